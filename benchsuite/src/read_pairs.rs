//! `neardup-bench read-pairs`: a sample of article pairs to read by hand, drawn independently
//! of any detector's verdict, and a viewer that prints a pair for reading.
//!
//! An article's text is `letters(title) + letters(content)` (the oracle's
//! [`letters`](neardup::eval::oracle::letters): NFKC, lower case, letters and digits only). A
//! letter of A is *covered* in a pair (A, B) when some window of at least [`RUN`] consecutive
//! letters holding it also occurs in B: the union of the shared substrings of [`RUN`] letters
//! or more. `coverage_small` is the covered share of the shorter text's letters,
//! `coverage_large` of the longer's.
//!
//! - `sample` draws pairs from two pools, stratified by `coverage_small`: `runs`, every pair
//!   sharing a [`RUN`]-letter window (found with an inverted index of window hashes that skips
//!   windows of more than [`MAX_ARTICLES`] articles), and `links`, the pairs of a `neardup
//!   dedupe --pairs` file. It writes `pairs.tsv` (what the reader sees), `strata.tsv` (where
//!   each pair came from) and a README.
//! - `show` prints pairs of `pairs.tsv` in full with the covered stretches in `【…】`, and
//!   nothing about pools or strata.
//!
//! No article text is written anywhere: only ids and numbers.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, Context};
use neardup::eval::oracle::letters;
use neardup::hashing::BuildIdentity;
use neardup::input::{self, Lines};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;
use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64;

use neardup::cli::common::{self, CmdResult, Status};

/// Letters of a copied run: shorter shared substrings do not count.
pub const RUN: usize = 20;

/// A window found in more articles than this makes no candidate pairs (it still counts in
/// the coverage of pairs found otherwise).
pub const MAX_ARTICLES: usize = 200;

/// Bins of `coverage_small`: `[EDGES[i], EDGES[i + 1])`, the last one closed.
const EDGES: [f64; 6] = [0.0, 0.1, 0.25, 0.5, 0.8, 1.0];
const BIN_NAMES: [&str; 5] = [
    "[0,0.1)",
    "[0.1,0.25)",
    "[0.25,0.5)",
    "[0.5,0.8)",
    "[0.8,1]",
];

/// Content characters `show` prints of each article.
const SHOW_CHARS: usize = 4000;

#[derive(clap::Args, Debug)]
pub struct ReadPairsBench {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Draw pairs to read, stratified by pool and copied share; writes pairs.tsv,
    /// strata.tsv and README.md into --out.
    Sample(SampleArgs),
    /// Print pairs of a pairs.tsv for reading, copied runs marked 【…】.
    Show(ShowArgs),
    /// Judge a detector's pairs (`dedupe --pairs`) against the labels read by hand.
    Score(crate::read_score::ScoreArgs),
}

#[derive(clap::Args, Debug)]
struct SampleArgs {
    /// Corpus of JSON Lines articles `{"id","title","content"}` (`.gz` is fine).
    #[arg(long, short)]
    input: String,
    /// Pairs of `neardup dedupe --pairs` (JSON Lines with `a` and `b`): the `links` pool.
    #[arg(long)]
    links: String,
    /// Folder to write pairs.tsv, strata.tsv and README.md into.
    #[arg(long)]
    out: String,
    /// Pairs drawn per stratum (pool × bin of coverage_small).
    #[arg(long, default_value_t = 30)]
    per_stratum: usize,
    /// Seed of the draw and of the shuffle.
    #[arg(long, default_value_t = 43)]
    seed: u64,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// The sample's pairs.tsv.
    #[arg(long)]
    pairs: String,
    /// The corpus the sample was drawn from.
    #[arg(long, short)]
    input: String,
    /// Pair number, or an inclusive range `N..M`.
    range: String,
}

pub fn run(b: ReadPairsBench) -> CmdResult {
    match b.command {
        Command::Sample(args) => sample(args),
        Command::Show(args) => show(args),
        Command::Score(args) => crate::read_score::run(args),
    }
}

struct Article {
    id: String,
    title: String,
    content: String,
}

/// The corpus's articles, in file order.
fn read_corpus(path: &str) -> anyhow::Result<Vec<Article>> {
    let source = input::open(path)?;
    let mut out = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        let v: Value = serde_json::from_slice(&raw).with_context(|| format!("{path}:{line}"))?;
        let id = match v.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => bail!("{path}:{line}: no id"),
            Some(other) => other.to_string(),
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        out.push(Article {
            id,
            title: text("title"),
            content: text("content"),
        });
    }
    Ok(out)
}

/// An article's comparison text: its letters and the hashes of its [`RUN`]-letter windows.
pub struct Text {
    letters: usize,
    windows: Vec<u64>,
}

impl Text {
    pub fn new(letters: &str) -> Text {
        let offsets: Vec<usize> = letters
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(letters.len()))
            .collect();
        let n = offsets.len() - 1;
        let bytes = letters.as_bytes();
        let windows = if n < RUN {
            Vec::new()
        } else {
            (0..=n - RUN)
                .map(|i| xxh3_64(&bytes[offsets[i]..offsets[i + RUN]]))
                .collect()
        };
        Text {
            letters: n,
            windows,
        }
    }

    fn of(a: &Article) -> Text {
        Text::new(&comparison_text(a))
    }

    fn set(&self) -> HashSet<u64, BuildIdentity> {
        self.windows.iter().copied().collect()
    }
}

fn comparison_text(a: &Article) -> String {
    letters(&a.title) + &letters(&a.content)
}

/// Letters covered by the windows marked (window `i` covers letters `i..i + RUN`).
fn covered_letters(marks: impl IntoIterator<Item = bool>) -> usize {
    let (mut end, mut count) = (0, 0);
    for (i, m) in marks.into_iter().enumerate() {
        if m {
            count += i + RUN - i.max(end);
            end = i + RUN;
        }
    }
    count
}

/// Which letters of a text the marked windows cover.
fn letter_mask(marks: &[bool], letters: usize) -> Vec<bool> {
    let mut mask = vec![false; letters];
    for (i, &m) in marks.iter().enumerate() {
        if m {
            mask[i..i + RUN].fill(true);
        }
    }
    mask
}

/// The windows of `a` found in `b`, and those of `b` found in `a`.
fn shared_marks(a: &Text, a_set: &HashSet<u64, BuildIdentity>, b: &Text) -> (Vec<bool>, Vec<bool>) {
    let b_marks: Vec<bool> = b.windows.iter().map(|h| a_set.contains(h)).collect();
    let shared: HashSet<u64, BuildIdentity> = b
        .windows
        .iter()
        .zip(&b_marks)
        .filter(|(_, &m)| m)
        .map(|(&h, _)| h)
        .collect();
    let a_marks = a.windows.iter().map(|h| shared.contains(h)).collect();
    (a_marks, b_marks)
}

/// The covered shares of a pair's two texts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coverage {
    /// Of `a`'s letters.
    pub a: f64,
    /// Of `b`'s letters.
    pub b: f64,
    /// Whether `a` is the shorter text (in letters; `a` on a tie).
    pub a_shorter: bool,
}

impl Coverage {
    fn from_marks(a: &Text, a_marks: &[bool], b: &Text, b_marks: &[bool]) -> Coverage {
        let share = |marks: &[bool], n: usize| {
            if n == 0 {
                0.0
            } else {
                covered_letters(marks.iter().copied()) as f64 / n as f64
            }
        };
        Coverage {
            a: share(a_marks, a.letters),
            b: share(b_marks, b.letters),
            a_shorter: a.letters <= b.letters,
        }
    }

    pub fn small(&self) -> f64 {
        if self.a_shorter {
            self.a
        } else {
            self.b
        }
    }

    pub fn large(&self) -> f64 {
        if self.a_shorter {
            self.b
        } else {
            self.a
        }
    }
}

/// The coverage of one pair, computed from scratch.
#[cfg(test)]
fn coverage(a: &Text, b: &Text) -> Coverage {
    let (a_marks, b_marks) = shared_marks(a, &a.set(), b);
    Coverage::from_marks(a, &a_marks, b, &b_marks)
}

fn bin_of(c: f64) -> usize {
    (0..BIN_NAMES.len())
        .rev()
        .find(|&i| c >= EDGES[i])
        .unwrap_or(0)
}

fn key(a: u32, b: u32) -> u64 {
    let (a, b) = if a < b { (a, b) } else { (b, a) };
    (u64::from(a) << 32) | u64::from(b)
}

fn unkey(k: u64) -> (u32, u32) {
    ((k >> 32) as u32, k as u32)
}

/// Every pair sharing a window found in at most [`MAX_ARTICLES`] articles (sorted keys), and
/// the number of distinct windows skipped for being in more.
fn runs_pool(texts: &[Text]) -> (Vec<u64>, usize) {
    let mut postings: Vec<(u64, u32)> = texts
        .par_iter()
        .enumerate()
        .flat_map_iter(|(d, t)| {
            let mut h = t.windows.clone();
            h.sort_unstable();
            h.dedup();
            h.into_iter().map(move |h| (h, d as u32))
        })
        .collect();
    postings.par_sort_unstable();
    let mut starts = vec![0];
    starts.extend((1..postings.len()).filter(|&i| postings[i].0 != postings[i - 1].0));
    starts.push(postings.len());
    let groups: Vec<&[(u64, u32)]> = starts.windows(2).map(|w| &postings[w[0]..w[1]]).collect();
    let ignored = groups.iter().filter(|g| g.len() > MAX_ARTICLES).count();
    // Chunks of windows, each chunk's pairs deduplicated before they are merged: templates
    // repeat the same pairs over many windows.
    let mut pairs: Vec<u64> = groups
        .par_chunks(1 << 16)
        .flat_map_iter(|chunk| {
            let mut out = Vec::new();
            for g in chunk {
                if g.len() < 2 || g.len() > MAX_ARTICLES {
                    continue;
                }
                for (i, &(_, x)) in g.iter().enumerate() {
                    for &(_, y) in &g[i + 1..] {
                        out.push(key(x, y));
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    pairs.par_sort_unstable();
    pairs.dedup();
    (pairs, ignored)
}

/// The coverage of each pair (sorted keys), grouped by first article so its window set is
/// built once.
fn pool_coverage(texts: &[Text], pairs: &[u64]) -> Vec<Coverage> {
    let mut starts = vec![0];
    starts.extend((1..pairs.len()).filter(|&i| unkey(pairs[i]).0 != unkey(pairs[i - 1]).0));
    starts.push(pairs.len());
    starts
        .par_windows(2)
        .flat_map_iter(|w| {
            let group = &pairs[w[0]..w[1]];
            let a = &texts[unkey(group[0]).0 as usize];
            let a_set = a.set();
            group.iter().map(move |&k| {
                let b = &texts[unkey(k).1 as usize];
                let (a_marks, b_marks) = shared_marks(a, &a_set, b);
                Coverage::from_marks(a, &a_marks, b, &b_marks)
            })
        })
        .collect()
}

/// One line of a `neardup dedupe --pairs` file: its two ids and the whole object.
pub(crate) struct PairLine {
    pub a: String,
    pub b: String,
    pub fields: Value,
}

/// The lines of a `neardup dedupe --pairs` file (JSON Lines with `"a"` and `"b"`, strings or
/// numbers); errors name the file and the line.
pub(crate) fn dedupe_pairs(path: &str) -> anyhow::Result<Vec<PairLine>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse_dedupe_pairs(path, &text)
}

/// [`dedupe_pairs`] of a file already read.
pub(crate) fn parse_dedupe_pairs(path: &str, text: &str) -> anyhow::Result<Vec<PairLine>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Value =
            serde_json::from_str(line).with_context(|| format!("{path}:{}", n + 1))?;
        let id = |k: &str| -> anyhow::Result<String> {
            match fields.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Ok(other.to_string()),
                None => bail!("{path}:{}: no `{k}`", n + 1),
            }
        };
        let (a, b) = (id("a")?, id("b")?);
        out.push(PairLine { a, b, fields });
    }
    Ok(out)
}

/// The numbered pairs of a sample's pairs.tsv (`n a b`, a header line first).
pub(crate) fn sample_pairs(path: &str) -> anyhow::Result<Vec<(usize, String, String)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse_sample_pairs(path, &text)
}

/// [`sample_pairs`] of a file already read.
pub(crate) fn parse_sample_pairs(
    path: &str,
    text: &str,
) -> anyhow::Result<Vec<(usize, String, String)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [n, a, b] = cols[..] else {
            bail!("{path}:{}: not `n a b`", i + 1);
        };
        let n: usize = n
            .parse()
            .with_context(|| format!("{path}:{}: bad n", i + 1))?;
        out.push((n, a.to_owned(), b.to_owned()));
    }
    Ok(out)
}

/// The pairs of a `neardup dedupe --pairs` file as sorted, distinct keys.
fn read_links(path: &str, index: &HashMap<&str, u32>) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for p in dedupe_pairs(path)? {
        let id = |s: &str| -> anyhow::Result<u32> {
            index
                .get(s)
                .copied()
                .with_context(|| format!("{path}: id {s} is not in the corpus"))
        };
        let (a, b) = (id(&p.a)?, id(&p.b)?);
        if a != b {
            out.push(key(a, b));
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// One stratum's draw.
struct Stratum {
    pool: &'static str,
    bin: usize,
    size: usize,
    /// Of `size`, pairs in the other pool too.
    shared: usize,
    /// Of `size`, pairs already drawn from the other pool.
    taken: usize,
    drawn: usize,
}

struct Drawn {
    key: u64,
    pool: &'static str,
    bin: usize,
    coverage: Coverage,
}

fn sample(args: SampleArgs) -> CmdResult {
    common::ensure_usage(args.per_stratum > 0, "--per-stratum must be at least 1")?;
    let started = Instant::now();
    let articles = read_corpus(&args.input)?;
    let mut index: HashMap<&str, u32> = HashMap::new();
    for (i, a) in articles.iter().enumerate() {
        if index.insert(&a.id, i as u32).is_some() {
            bail!("{}: id {} appears twice", args.input, a.id);
        }
    }
    let texts: Vec<Text> = articles.par_iter().map(Text::of).collect();
    let unmappable: Vec<&str> = articles
        .par_iter()
        .filter(|a| letter_origins(&a.title).is_none() || letter_origins(&a.content).is_none())
        .map(|a| a.id.as_str())
        .collect();
    let t = Instant::now();
    let (runs, ignored) = runs_pool(&texts);
    eprintln!(
        "{} articles; runs pool: {} pairs sharing a {RUN}-letter window; {ignored} windows in \
         more than {MAX_ARTICLES} articles ignored for candidates ({:.1} s)",
        articles.len(),
        runs.len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let runs_cov = pool_coverage(&texts, &runs);
    eprintln!(
        "coverage of the runs pool: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let links = read_links(&args.links, &index)?;
    let links_cov = pool_coverage(&texts, &links);
    let links_in_runs = links
        .iter()
        .filter(|k| runs.binary_search(k).is_ok())
        .count();
    eprintln!(
        "links pool: {} pairs ({links_in_runs} of them in the runs pool)",
        links.len()
    );

    // The links pool first: it is small, and a pair it draws is then left out of the runs
    // pool's draw (which loses next to nothing of its much larger strata).
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut drawn: Vec<Drawn> = Vec::new();
    let mut taken: HashSet<u64> = HashSet::new();
    let mut strata = Vec::new();
    for (pool, keys, covs, other) in [
        ("links", &links, &links_cov, &runs),
        ("runs", &runs, &runs_cov, &links),
    ] {
        for bin in 0..BIN_NAMES.len() {
            let members: Vec<usize> = (0..keys.len())
                .filter(|&i| bin_of(covs[i].small()) == bin)
                .collect();
            let free: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| !taken.contains(&keys[i]))
                .collect();
            let chosen: Vec<usize> = free
                .choose_multiple(&mut rng, args.per_stratum)
                .copied()
                .collect();
            for &i in &chosen {
                taken.insert(keys[i]);
                drawn.push(Drawn {
                    key: keys[i],
                    pool,
                    bin,
                    coverage: covs[i],
                });
            }
            strata.push(Stratum {
                pool,
                bin,
                size: members.len(),
                shared: members
                    .iter()
                    .filter(|&&i| other.binary_search(&keys[i]).is_ok())
                    .count(),
                taken: members.len() - free.len(),
                drawn: chosen.len(),
            });
        }
    }
    drawn.shuffle(&mut rng);

    let out = std::path::Path::new(&args.out);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", args.out))?;
    let size_of = |pool: &str, bin: usize| {
        strata
            .iter()
            .find(|s| s.pool == pool && s.bin == bin)
            .map_or(0, |s| s.size)
    };
    let mut pairs_tsv = String::from("n\ta\tb\n");
    let mut strata_tsv =
        String::from("n\tpool\tbin\tpool_size_in_stratum\tcoverage_small\tcoverage_large\n");
    for (n, d) in drawn.iter().enumerate() {
        let (a, b) = unkey(d.key);
        let (a, b) = (&articles[a as usize].id, &articles[b as usize].id);
        writeln!(pairs_tsv, "{}\t{a}\t{b}", n + 1)?;
        writeln!(
            strata_tsv,
            "{}\t{}\t{}\t{}\t{:.4}\t{:.4}",
            n + 1,
            d.pool,
            BIN_NAMES[d.bin],
            size_of(d.pool, d.bin),
            d.coverage.small(),
            d.coverage.large()
        )?;
    }
    std::fs::write(out.join("pairs.tsv"), pairs_tsv)?;
    std::fs::write(out.join("strata.tsv"), strata_tsv)?;

    let mut table = String::from(
        "| pool | coverage_small | pairs in pool | of them in the other pool | of them drawn from the other pool first | drawn |\n|---|---|---:|---:|---:|---:|\n",
    );
    for s in &strata {
        writeln!(
            table,
            "| {} | {} | {} | {} | {} | {}{} |",
            s.pool,
            BIN_NAMES[s.bin],
            s.size,
            s.shared,
            s.taken,
            s.drawn,
            if s.drawn < args.per_stratum {
                " (all there were)"
            } else {
                ""
            }
        )?;
    }
    eprint!("{table}");
    let links_digest = format!(
        "{:016x}",
        xxh3_64(&std::fs::read(&args.links).with_context(|| format!("reading {}", args.links))?)
    );
    let readme = readme(&ReadmeFacts {
        args: &args,
        articles: articles.len(),
        runs: runs.len(),
        ignored,
        links: links.len(),
        links_in_runs,
        links_digest: &links_digest,
        drawn: drawn.len(),
        table: &table,
    });
    std::fs::write(out.join("README.md"), readme)?;
    if !unmappable.is_empty() {
        eprintln!(
            "{} articles hold markup or text whose letters `show` cannot map back to \
             characters one by one, and it prints them without marks: {}",
            unmappable.len(),
            unmappable.join(" ")
        );
    }
    eprintln!(
        "{} pairs written to {} in {:.1} s",
        drawn.len(),
        args.out,
        started.elapsed().as_secs_f64()
    );
    Ok(Status::Done)
}

struct ReadmeFacts<'a> {
    args: &'a SampleArgs,
    articles: usize,
    runs: usize,
    ignored: usize,
    links: usize,
    links_in_runs: usize,
    links_digest: &'a str,
    drawn: usize,
    table: &'a str,
}

fn readme(f: &ReadmeFacts) -> String {
    let a = f.args;
    format!(
        r#"# Pairs to read by hand

A sample of {drawn} pairs of articles of the corpus (`zh_articles.jsonl.gz`, {articles}
articles), drawn independently of any detector's verdict on them, to be read and labelled
by hand. Written by `neardup-bench read-pairs sample` (`benchsuite/src/read_pairs.rs`); no
article text is kept here, only ids and numbers.

## How the sample was drawn

```
neardup-bench read-pairs sample -i {input} --links {links} \
    --out {out} --per-stratum {per} --seed {seed}
```

An article's text is `letters(title) + letters(content)` (`neardup_eval::oracle::letters`:
NFKC, lower case, letters and digits only). A letter of one article is *covered* in a pair
when some window of at least {run} consecutive letters holding it also occurs in the other
article: the union of all shared substrings of {run} letters or more. `coverage_small` is the
covered share of the shorter text's letters, `coverage_large` the same for the longer text;
both are computed exactly per pair (every {run}-letter window hashed with xxh3).

Two pools:

- **runs**: every pair of articles sharing at least one {run}-letter window, found with an
  inverted index of window hashes: {runs} pairs. Windows found in more than {max}
  articles ({ignored} distinct windows) make no candidate pairs but still count in the
  coverage of the pairs found otherwise. This pool knows nothing of any detector.
- **links**: the {links_n} distinct pairs of `--links`, the output of
  `neardup dedupe -i CORPUS --pairs` (xxh3 of the file: `{digest}`); their coverage is computed
  the same way. {links_in_runs} of them are in the runs pool too (a pair
that shares no 20-letter window has coverage 0).

Strata are pool × bin of `coverage_small` (`[0,0.1)`, `[0.1,0.25)`, `[0.25,0.5)`, `[0.5,0.8)`,
`[0.8,1]`). From each, {per} pairs are drawn at random (`rand`'s `StdRng` seeded with {seed};
the links pool's strata first, then the runs pool's, a pair drawn from one pool not drawn
again from the other); a stratum with fewer pairs gives all of them. All the drawn pairs
are then shuffled together with the same generator and numbered 1..{drawn}.

{table}
## Files

- `pairs.tsv`: `n a b`, the numbered pairs (article ids, `a` before `b` in corpus order).
  This is all the reader needs and sees; print pairs with
  `neardup-bench read-pairs show --pairs pairs.tsv -i CORPUS N..M`, which shows both articles
  with their covered stretches in `【…】` (brackets of the text itself are shown as `〖…〗`)
  and the two coverage figures, and nothing about pools or strata.
- `strata.tsv`: `n pool bin pool_size_in_stratum coverage_small coverage_large`, where each
  pair came from, for the analysis after the reading. Not to be looked at while reading.
- `labels.tsv` (to come): the reading, columns `n a b label note`, one line per pair, with
  one label of:
  - `reprint`: the same article filed twice, possibly edited or re-headlined;
  - `partial`: most of the shorter text is copied inside the longer one (an excerpt, a
    teaser, an update, a notice quoted whole inside a round-up);
  - `passage`: they share at least one copied passage of a sentence or more, but neither is
    mostly inside the other (a quoted statement, a wire paragraph, a compilation);
  - `template`: the shared wording is a template or formula text (bulletins, notices,
    admission rules, policy boilerplate) with different facts, not a copy;
  - `same_event`: different reports of one event with no copied passage beyond short
    phrases;
  - `unrelated`: none of these.
"#,
        drawn = f.drawn,
        articles = f.articles,
        input = a.input,
        links = a.links,
        links_n = f.links,
        out = a.out,
        per = a.per_stratum,
        seed = a.seed,
        run = RUN,
        runs = f.runs,
        max = MAX_ARTICLES,
        ignored = f.ignored,
        links_in_runs = f.links_in_runs,
        digest = f.links_digest,
        table = f.table,
    )
}

/// Combining marks (the main blocks): normalised with the character before them.
fn is_combining(c: char) -> bool {
    matches!(c,
        '\u{300}'..='\u{36f}'
        | '\u{1ab0}'..='\u{1aff}'
        | '\u{1dc0}'..='\u{1dff}'
        | '\u{20d0}'..='\u{20ff}'
        | '\u{fe20}'..='\u{fe2f}'
        | '\u{3099}'..='\u{309a}')
}

/// For each letter of `text` (as [`letters`] gives them), the first and last index of the characters of `text` it comes from (a character with the combining marks
/// after it); `None` when they cannot be mapped so (markup, or a normalisation across more
/// characters).
fn letter_origins(text: &str) -> Option<Vec<(usize, usize)>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut origin = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut j = i + 1;
        while j < chars.len() && is_combining(chars[j]) {
            j += 1;
        }
        if j == i + 1 && ('\u{4e00}'..='\u{9fff}').contains(&c) {
            out.push(c);
            origin.push((i, i));
        } else {
            let segment: String = chars[i..j].iter().collect();
            for l in letters(&segment).chars() {
                out.push(l);
                origin.push((i, j - 1));
            }
        }
        i = j;
    }
    let whole: Vec<char> = letters(text).chars().collect();
    (whole == out).then_some(origin)
}

/// `N` or `N..M` (inclusive).
fn parse_range(s: &str) -> anyhow::Result<(usize, usize)> {
    let bad = || common::usage(format!("not a pair number or range N..M: {s}"));
    let (from, to) = match s.split_once("..") {
        Some((a, b)) => (a.trim().parse(), b.trim().parse()),
        None => (s.trim().parse(), s.trim().parse()),
    };
    let (from, to): (usize, usize) = (from.map_err(|_| bad())?, to.map_err(|_| bad())?);
    if from == 0 || to < from {
        return Err(bad());
    }
    Ok((from, to))
}

fn show(args: ShowArgs) -> CmdResult {
    let (from, to) = parse_range(&args.range)?;
    let mut wanted: Vec<(usize, String, String)> = sample_pairs(&args.pairs)?
        .into_iter()
        .filter(|(n, _, _)| (from..=to).contains(n))
        .collect();
    if wanted.is_empty() {
        return Err(common::usage(format!(
            "no pair numbered {} in {}",
            args.range, args.pairs
        )));
    }
    wanted.sort();
    let ids: HashSet<&str> = wanted
        .iter()
        .flat_map(|(_, a, b)| [a.as_str(), b.as_str()])
        .collect();
    let articles: HashMap<String, Article> = read_corpus(&args.input)?
        .into_iter()
        .filter(|a| ids.contains(a.id.as_str()))
        .map(|a| (a.id.clone(), a))
        .collect();
    let mut out = String::new();
    for (n, a, b) in &wanted {
        let get = |id: &str| {
            articles
                .get(id)
                .with_context(|| format!("id {id} is not in {}", args.input))
        };
        out.push_str(&render_pair(*n, get(a)?, get(b)?));
    }
    print!("{out}");
    Ok(Status::Done)
}

/// A pair for reading: header with the coverage figures, then each side marked.
fn render_pair(n: usize, a: &Article, b: &Article) -> String {
    let (ta, tb) = (Text::of(a), Text::of(b));
    let (a_marks, b_marks) = shared_marks(&ta, &ta.set(), &tb);
    let cov = Coverage::from_marks(&ta, &a_marks, &tb, &b_marks);
    let (short, long) = if cov.a_shorter {
        ("a", "b")
    } else {
        ("b", "a")
    };
    let mut out = format!(
        "=== pair {n} ===  copied runs: {:.1} % of the shorter text ({short}), {:.1} % of the \
         longer ({long})\n",
        100.0 * cov.small(),
        100.0 * cov.large()
    );
    for (side, art, text, marks, share) in [
        ("a", a, &ta, &a_marks, cov.a),
        ("b", b, &tb, &b_marks, cov.b),
    ] {
        let mask = letter_mask(marks, text.letters);
        let _ = writeln!(
            out,
            "\n--- {side}: {}  ({} letters, {:.1} % in copied runs)",
            art.id,
            text.letters,
            100.0 * share
        );
        let title_letters = letters(&art.title).chars().count();
        let (title_mask, content_mask) = mask.split_at(title_letters);
        let _ = writeln!(out, "title: {}", mark(&art.title, title_mask, usize::MAX));
        out.push_str(&mark(&art.content, content_mask, SHOW_CHARS));
        out.push('\n');
        let chars = art.content.chars().count();
        if chars > SHOW_CHARS {
            let _ = writeln!(
                out,
                "[… {} more characters of the content not shown ({chars} in all)]",
                chars - SHOW_CHARS
            );
        }
    }
    out.push('\n');
    out
}

/// `text`'s first `limit` characters with each maximal stretch of covered letters (`mask`,
/// over its letters) in `【…】`; the text's own `【】` become `〖〗`.
fn mark(text: &str, mask: &[bool], limit: usize) -> String {
    let swap = |c: char| match c {
        '【' => '〖',
        '】' => '〗',
        c => c,
    };
    let Some(origin) = letter_origins(text) else {
        let shown: String = text.chars().take(limit).map(swap).collect();
        return if mask.iter().any(|&m| m) {
            format!("(this text holds markup: its copied runs are not marked)\n{shown}")
        } else {
            shown
        };
    };
    // Stretches as (first, last) character indices; two that meet in one character (which
    // gave several letters) are one.
    let mut stretches: Vec<(usize, usize)> = Vec::new();
    let mut push = |s: usize, e: usize| match stretches.last_mut() {
        Some(last) if s <= last.1 => last.1 = e,
        _ => stretches.push((s, e)),
    };
    let mut start = None;
    for (j, &m) in mask.iter().enumerate() {
        match (m, start) {
            (true, None) => start = Some(j),
            (false, Some(s)) => {
                push(origin[s].0, origin[j - 1].1);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push(origin[s].0, origin[mask.len() - 1].1);
    }
    let mut out = String::new();
    let mut next = stretches.iter().peekable();
    let mut open = None;
    for (i, c) in text.chars().enumerate().take(limit) {
        if open.is_none() {
            if let Some(&&(s, e)) = next.peek() {
                if s == i {
                    out.push('【');
                    open = Some(e);
                    next.next();
                }
            }
        }
        out.push(swap(c));
        if open == Some(i) {
            out.push('】');
            open = None;
        }
    }
    if open.is_some() {
        out.push('】');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` distinct CJK letters starting at `from`.
    fn letters_from(from: u32, n: u32) -> String {
        (from..from + n)
            .map(|c| char::from_u32(0x4e00 + c).unwrap())
            .collect()
    }

    #[test]
    fn one_shared_run_of_25_letters() {
        let run = letters_from(0, 25);
        let a = format!("{}{run}{}", letters_from(100, 40), letters_from(200, 35));
        let b = format!("{}{run}", letters_from(300, 60));
        let c = coverage(&Text::new(&a), &Text::new(&b));
        assert_eq!(c.a, 25.0 / 100.0);
        assert_eq!(c.b, 25.0 / 85.0);
        assert!(!c.a_shorter);
        assert_eq!(c.small(), 25.0 / 85.0);
        assert_eq!(c.large(), 25.0 / 100.0);
    }

    #[test]
    fn a_run_of_19_letters_is_not_copied() {
        let run = letters_from(0, 19);
        let a = format!("{}{run}{}", letters_from(100, 40), letters_from(200, 35));
        let b = format!("{run}{}", letters_from(300, 60));
        let c = coverage(&Text::new(&a), &Text::new(&b));
        assert_eq!((c.a, c.b), (0.0, 0.0));
    }

    #[test]
    fn same_text_is_covered_whole_and_short_texts_not_at_all() {
        let a = letters_from(0, 50);
        let c = coverage(&Text::new(&a), &Text::new(&a));
        assert_eq!((c.small(), c.large()), (1.0, 1.0));
        let short = letters_from(0, 10);
        let c = coverage(&Text::new(&short), &Text::new(&short));
        assert_eq!((c.small(), c.large()), (0.0, 0.0));
    }

    #[test]
    fn overlapping_windows_count_each_letter_once() {
        // Windows 0, 1 and 10 marked: letters 0..21 and 10..30 → 30 letters.
        let mut marks = vec![false; 40];
        marks[0] = true;
        marks[1] = true;
        marks[10] = true;
        assert_eq!(covered_letters(marks.iter().copied()), 30);
        let mask = letter_mask(&marks, 59);
        assert_eq!(mask.iter().filter(|&&m| m).count(), 30);
    }

    #[test]
    fn marks_map_back_to_the_original_characters() {
        let run = letters_from(0, 20);
        // Punctuation inside the copied run stays inside the marks; the text's own
        // brackets are swapped.
        let text = format!("【甲】，{}。{}！乙", &run[..30], &run[30..]);
        let mut mask = vec![false; letters(&text).chars().count()];
        mask[1..21].fill(true);
        assert_eq!(
            mark(&text, &mask, usize::MAX),
            format!("〖甲〗，【{}。{}】！乙", &run[..30], &run[30..])
        );
    }

    #[test]
    fn combining_marks_stay_with_their_letter() {
        let text = "cafe\u{301}。";
        assert_eq!(letters(text), "café");
        assert_eq!(
            letter_origins(text).unwrap(),
            [(0, 0), (1, 1), (2, 2), (3, 4)]
        );
        assert_eq!(
            mark(text, &[false, false, true, true], usize::MAX),
            "ca【fe\u{301}】。"
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("3").unwrap(), (3, 3));
        assert_eq!(parse_range("1..2").unwrap(), (1, 2));
        assert!(parse_range("0").is_err());
        assert!(parse_range("5..2").is_err());
    }
}

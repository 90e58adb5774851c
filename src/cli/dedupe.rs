//! `neardup dedupe`: near-duplicate clusters of one file, in memory, no store.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use neardup::align::Span;
use neardup::allpairs::aligned::{self, AlignedPair, FoundBy};
use neardup::allpairs::minhash::{all_pairs_related, MinHashCluster, MinHashMatches};
use neardup::allpairs::simhash::{AllPairs, Matches};
use neardup::method::four_decimals;
use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::relation::{AlignRule, MatchOptions, MatchRule, Relation};
use neardup::{Methods, MinHashParams, Score, Signature, SimHash, Sketches, Tolerance};
use serde::Serialize;
use serde_json::Value;

use super::common::{
    self, CmdResult, InputArgs, MethodArgs, ProfileArgs, RelationArgs, RunArgs, Searched,
};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `--method minhash` (the default) links articles whose estimated Jaccard similarity
    /// is at least --threshold; `--method simhash` links fingerprints within Hamming
    /// distance -k (at most 7).
    #[command(flatten)]
    method: MethodArgs,
    /// Print every linked pair (`{"a", "b", "similarity"|"distance"}`, MinHash also
    /// `"relation"` and `"containment"`) instead of clusters. The relation reads "a relation b".
    #[arg(long)]
    pairs: bool,
    /// Alignment decides (MinHash only): MinHash finds candidates down to a similarity of
    /// 0.1, and so do texts sharing passages by their anchors (`found_by`: `minhash` or
    /// `anchors`), then the texts are aligned and a pair is linked when one text is a copy of the
    /// other in letters, facts included (`near_duplicate`, `contains`, `contained_in`), or
    /// reported as `shares_passage` when they share a passage without either being a copy
    /// (never clustered). Two instances of one template are not copies: formula text recurring
    /// across the input is learned and does not count. Pairs carry `a_copied`, `b_copied` and
    /// the shared `passages` (character spans of both texts). Reads the input twice more.
    #[arg(long, conflicts_with_all = ["threshold", "k", "no_containment", "pre_tokenized"])]
    align: bool,
    /// With --align: use this formula artefact (`neardup formula learn`) instead of learning
    /// formula from the input (no windows counted).
    #[arg(long, requires = "align", value_name = "PATH")]
    formula: Option<std::path::PathBuf>,
    #[command(flatten)]
    relation: RelationArgs,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    profile: ProfileArgs,
    /// Do not learn boilerplate from the input. By default, lines that recur in many of its
    /// documents (a site's disclaimer, related links, footer) are learned in a first pass and
    /// dropped before fingerprinting; `--boilerplate PATH` uses a learned artefact instead.
    #[arg(long, conflicts_with = "boilerplate")]
    no_boilerplate: bool,
    /// Learning: a line is boilerplate when at least N documents hold it (default: 10, or one
    /// document in 2,000 when that is more).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..))]
    boilerplate_min_docs: Option<u64>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Serialize)]
struct ClusterLine<'a> {
    cluster: Vec<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_distance: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_similarity: Option<f64>,
    /// MinHash: links of the cluster that are containments (partial copies), not
    /// near-duplicates; left out when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    contained: Option<u64>,
}

/// A pair linked by alignment (`--align --pairs`).
#[derive(Serialize)]
struct AlignedLine<'a> {
    a: &'a Value,
    b: &'a Value,
    /// MinHash's estimate (which made the pair a candidate, unless the anchors did).
    similarity: f64,
    /// The candidate step that found the pair: `minhash`, or `anchors` only.
    found_by: FoundBy,
    /// How b relates to a, read "a relation b".
    relation: Relation,
    /// Share of a's letters (and b's) copied in the other, letter for letter.
    a_copied: f64,
    b_copied: f64,
    passages: Vec<PassageLine>,
}

/// A passage both texts hold: where it is in each, and its letters in runs.
#[derive(Serialize)]
struct PassageLine {
    a: Span,
    b: Span,
    matched: usize,
}

impl<'a> AlignedLine<'a> {
    fn new(p: &AlignedPair, ids: &'a [Value]) -> AlignedLine<'a> {
        AlignedLine {
            a: &ids[p.a as usize],
            b: &ids[p.b as usize],
            similarity: p.similarity,
            found_by: p.found_by,
            relation: p.matched.relation,
            a_copied: four_decimals(p.matched.a_copied),
            b_copied: four_decimals(p.matched.b_copied),
            passages: p
                .passages
                .iter()
                .map(|q| PassageLine {
                    a: q.a,
                    b: q.b,
                    matched: q.matched,
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct PairLine<'a> {
    a: &'a Value,
    b: &'a Value,
    #[serde(flatten)]
    score: Score,
    /// MinHash: how b relates to a, read "a relation b".
    #[serde(skip_serializing_if = "Option::is_none")]
    relation: Option<Relation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    containment: Option<f64>,
}

/// The sketches of one method, collected for its all-pairs finder: built from the
/// tolerance, so a sketch of the other method has nowhere to go.
enum Batch {
    SimHash(AllPairs, Vec<SimHash>),
    MinHash(MatchRule, MinHashParams, Vec<Signature>),
    /// MinHash's candidates for the alignment (`--align`).
    Candidates(MinHashParams, Vec<Signature>),
}

impl Batch {
    fn new(
        tolerance: Tolerance,
        params: MinHashParams,
        options: MatchOptions,
        align: bool,
    ) -> anyhow::Result<Batch> {
        Ok(match tolerance {
            Tolerance::Distance(_) if align => {
                return Err(common::usage(
                    "--align works with MinHash: leave out --method simhash, or --align",
                ))
            }
            Tolerance::Distance(k) => Batch::SimHash(AllPairs::new(k)?, Vec::new()),
            Tolerance::Similarity(_) if align => Batch::Candidates(params, Vec::new()),
            Tolerance::Similarity(t) => {
                Batch::MinHash(MatchRule::new(t, options), params, Vec::new())
            }
        })
    }

    /// Keeps the sketch of this batch's method; `false` when the text was too short.
    fn push(&mut self, s: Sketches) -> bool {
        match self {
            Batch::SimHash(_, v) => match s.simhash {
                Some(Ok(f)) => v.push(f.simhash),
                _ => return false,
            },
            Batch::MinHash(_, _, v) | Batch::Candidates(_, v) => match s.minhash {
                Some(Ok(f)) => v.push(f.signature),
                _ => return false,
            },
        }
        true
    }

    /// What the finder found, and with `--align` the signatures, which give the pairs only
    /// the anchors find MinHash's similarity too.
    fn run(self) -> (Found, Option<Vec<Signature>>) {
        match self {
            Batch::SimHash(finder, v) => (Found::SimHash(finder.run(&v)), None),
            Batch::MinHash(rule, params, v) => {
                (Found::MinHash(all_pairs_related(&v, &params, &rule)), None)
            }
            Batch::Candidates(params, v) => {
                (Found::MinHash(aligned::candidates(&v, &params)), Some(v))
            }
        }
    }
}

/// What either method's all-pairs finder found, as input positions.
enum Found {
    SimHash(Matches),
    MinHash(MinHashMatches),
}

impl Found {
    /// Every linked pair `(a, b, score, relation, containment)`, `a < b`, in order, made as
    /// it is printed (relations are MinHash's).
    #[allow(clippy::type_complexity)]
    fn pairs(
        &self,
    ) -> Box<dyn Iterator<Item = (u32, u32, Score, Option<Relation>, Option<f64>)> + '_> {
        match self {
            Found::SimHash(m) => Box::new(
                m.pairs()
                    .map(|(a, b, d)| (a, b, Score::Distance(d), None, None)),
            ),
            Found::MinHash(m) => Box::new(m.related_pairs().map(|p| {
                let r = p.related;
                (
                    p.a,
                    p.b,
                    Score::Similarity(r.similarity),
                    Some(r.relation),
                    r.containment,
                )
            })),
        }
    }

    fn pair_count(&self) -> u64 {
        match self {
            Found::SimHash(m) => m.pair_count(),
            Found::MinHash(m) => m.pair_count(),
        }
    }

    /// Members (ascending), the cluster's score (largest distance or smallest similarity)
    /// and, for MinHash, its links that are containments.
    fn clusters(&self) -> Vec<(Vec<u32>, Score, Option<u64>)> {
        match self {
            Found::SimHash(m) => m
                .clusters()
                .into_iter()
                .map(|c| (c.members, Score::Distance(c.max_distance), None))
                .collect(),
            Found::MinHash(m) => m
                .clusters()
                .into_iter()
                .map(|c| {
                    (
                        c.members,
                        Score::Similarity(c.min_similarity),
                        (c.contained > 0).then_some(c.contained),
                    )
                })
                .collect(),
        }
    }

    /// Candidate pairs compared in full.
    fn comparisons(&self) -> u64 {
        match self {
            Found::SimHash(m) => m.stats.comparisons,
            Found::MinHash(m) => m.comparisons,
        }
    }

    /// A skew warning, if any.
    fn warning(&self) -> Option<String> {
        match self {
            Found::SimHash(m) => {
                let s = &m.stats;
                let largest = s.largest_bucket.iter().copied().max().unwrap_or(0);
                (largest >= 1000 && largest * 64 >= s.unique.max(1)).then(|| {
                    let block = s
                        .largest_bucket
                        .iter()
                        .position(|&b| b == largest)
                        .unwrap_or(0);
                    format!(
                        "bucket skew: block {block} value {:#x} is shared by {largest} of {} distinct fingerprints; such groups are split further, but pairs that really are near cost quadratic time",
                        s.largest_bucket_value[block], s.unique
                    )
                })
            }
            Found::MinHash(m) => (m.largest_group >= 1000).then(|| {
                format!(
                    "band skew: {} distinct signatures share one band key; they are compared pair by pair",
                    m.largest_group
                )
            }),
        }
    }
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    let method = args.method.method(None)?;
    let tolerance = args.method.tolerance(method, Searched::NewBlocks)?;
    args.run.init_threads()?;
    let mut fp = args.profile.fingerprinter()?;
    let spec = args.input.spec();
    let mut spool = None;
    let mut input = args.input.input.clone();
    let learn = !args.no_boilerplate && args.profile.boilerplate.is_none() && !spec.pre_tokenized;
    // Learning and aligning read the input again: standard input is kept in a file for that.
    if (learn || args.align) && input == "-" {
        let s = Spool::of_stdin()?;
        input = s.path.to_string_lossy().into_owned();
        spool = Some(s);
    }
    if learn {
        let learned = pipeline::learn_boilerplate(
            neardup::input::open(&input)?,
            &spec,
            &fp,
            neardup::text::boilerplate::DEFAULT_SAMPLE,
            args.boilerplate_min_docs.map(|n| n as usize),
        );
        if !args.run.quiet {
            match &learned {
                Some(b) => eprintln!("dedupe: boilerplate learned from the input: {b}"),
                None => eprintln!("dedupe: no boilerplate: no line recurs in enough documents"),
            }
        }
        if let Some(b) = learned {
            fp = fp.with_boilerplate(Some(Arc::new(b)));
        }
    }
    let mut batch = Batch::new(
        tolerance,
        *fp.minhasher().params(),
        args.relation.options(),
        args.align,
    )?;
    let source = neardup::input::open(&input)?;
    let pb = common::progress_bar(&source, args.run.quiet);
    let position = Arc::clone(&source.position);
    let strict = args.input.strict;
    let mut ids: Vec<Value> = Vec::new();
    let mut lines: Vec<u64> = Vec::new();

    let counts = pipeline::run(
        source,
        &spec,
        &fp,
        &PipelineOptions::with_methods(Methods::only(method)),
        |c| common::tick(&pb, &position, c),
        |item| -> anyhow::Result<()> {
            match item {
                Item::Doc {
                    line,
                    id,
                    sketches: s,
                } => {
                    if batch.push(s) {
                        ids.push(id.0);
                        lines.push(line);
                    }
                }
                Item::Bad(e) => {
                    common::report_bad_line(&pb, &e);
                    if strict {
                        anyhow::bail!("stopped at the first bad line (--strict)");
                    }
                }
            }
            Ok(())
        },
    );
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let counts = counts?;
    let paired = Instant::now();
    let (found, aligned_sigs) = batch.run();
    let decided = if let Some(sigs) = aligned_sigs {
        let candidates: Vec<(u32, u32, f64)> = found
            .pairs()
            .map(|(a, b, score, ..)| (a, b, score.similarity().unwrap_or(0.0)))
            .collect();
        if !args.run.quiet {
            eprintln!("dedupe: aligning {} candidate pairs", candidates.len());
        }
        let formula = match &args.formula {
            Some(path) => Some(common::read_formula(path, fp.config().fold)?),
            None => None,
        };
        Some(neardup::pipeline::align_candidates(
            || neardup::input::open(&input),
            &spec,
            &fp,
            &lines,
            &sigs,
            &candidates,
            &AlignRule::DEFAULT,
            formula.as_ref(),
        )?)
    } else {
        None
    };
    let clusters = match &decided {
        Some(d) => aligned::clusters(ids.len(), &d.pairs)
            .into_iter()
            .map(|c: MinHashCluster| {
                (
                    c.members,
                    Score::Similarity(c.min_similarity),
                    (c.contained > 0).then_some(c.contained),
                )
            })
            .collect(),
        None => found.clusters(),
    };
    let pair_secs = paired.elapsed().as_secs_f64();

    let mut out = common::stdout();
    match &decided {
        Some(d) if args.pairs => {
            for p in &d.pairs {
                write_line(&mut out, &AlignedLine::new(p, &ids))?;
            }
        }
        None if args.pairs => {
            for (a, b, score, relation, containment) in found.pairs() {
                write_line(
                    &mut out,
                    &PairLine {
                        a: &ids[a as usize],
                        b: &ids[b as usize],
                        score,
                        relation,
                        containment,
                    },
                )?;
            }
        }
        _ => {
            for (members, score, contained) in &clusters {
                write_line(
                    &mut out,
                    &ClusterLine {
                        cluster: members.iter().map(|&i| &ids[i as usize]).collect(),
                        max_distance: score.distance(),
                        min_similarity: score.similarity(),
                        contained: *contained,
                    },
                )?;
            }
        }
    }
    common::flush(&mut out)?;

    if !args.run.quiet {
        let in_clusters: usize = clusters.iter().map(|c| c.0.len()).sum();
        let linked = match &decided {
            Some(d) => {
                let copies = d
                    .pairs
                    .iter()
                    .filter(|p| p.matched.relation.is_copy())
                    .count();
                format!(
                    "{copies} copy pairs and {} pairs sharing a passage by alignment ({} candidate pairs of {method} and {} more of anchors, {} texts aligned, formula {} of {} windows, {})",
                    d.pairs.len() - copies,
                    found.pair_count(),
                    d.anchor_candidates,
                    d.texts,
                    d.formula_id,
                    d.formula_windows,
                    if args.formula.is_some() { "given" } else { "learned from the input" },
                )
            }
            None => format!(
                "{} pairs with {method} {tolerance} ({} candidate pairs compared)",
                found.pair_count(),
                found.comparisons()
            ),
        };
        eprintln!(
            "dedupe: {} documents, {} fingerprinted, {} too short, {} bad lines; {} holding {} documents, {} duplicates (beyond the first of each cluster), {linked}; all pairs in {:.3} s, total {:.2} s",
            counts.documents,
            counts.fingerprinted,
            counts.too_short,
            counts.bad_lines,
            common::plural(clusters.len(), "cluster", "clusters"),
            in_clusters,
            in_clusters - clusters.len(),
            pair_secs,
            started.elapsed().as_secs_f64(),
        );
        if let Some(w) = found.warning() {
            eprintln!("warning: {w}");
        }
    }
    drop(spool);
    Ok(common::status(&counts))
}

/// Writes one JSON line.
fn write_line(out: &mut impl Write, line: &impl Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, line).context("writing output")?;
    out.write_all(b"\n").context("writing output")
}

/// Standard input copied into a temporary file, removed when dropped.
struct Spool {
    path: std::path::PathBuf,
}

impl Spool {
    fn of_stdin() -> anyhow::Result<Spool> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "neardup-dedupe-stdin-{}-{nanos}.jsonl",
            std::process::id()
        ));
        let spool = Spool { path };
        let mut file = std::fs::File::create(&spool.path).with_context(|| {
            format!(
                "creating {} to read standard input twice (pass --no-boilerplate to read it once)",
                spool.path.display()
            )
        })?;
        std::io::copy(&mut std::io::stdin().lock(), &mut file)
            .with_context(|| format!("copying standard input to {}", spool.path.display()))?;
        Ok(spool)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

//! `neardup eval`: detection quality on labelled pairs, and the synthetic benchmark generator.

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use neardup::eval::corpus::{self, Truth};
use neardup::eval::detector::{learn_boilerplate, Detector};
use neardup::eval::generate::{self, Article};
use neardup::eval::{fields_of, overall, read_pairs, Report, Scored};
use neardup::input::{self, Lines};
use neardup::relation::{ContainmentRule, MatchOptions};
use neardup::text::Boilerplate;
use neardup::{Features, FingerprintConfig, Fingerprinter, Profile, Scheme, Thresholds, Weight};
use serde_json::{Map, Value};

use super::common::{self, CmdResult, RelationArgs, RunArgs, Status};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  neardup eval --generate -i ../shared/data/zh_articles.jsonl.gz -o pairs.jsonl
  neardup eval --pairs pairs.jsonl                       # the default profile
  neardup eval --pairs pairs.jsonl --all-profiles --minhash --plot pr.png
  neardup eval --corpus ../shared/data/zh_articles.jsonl.gz --all-profiles --minhash --worst worst.jsonl")]
pub struct Args {
    /// Labelled pairs to measure: JSON Lines of
    /// {\"a\": {\"title\": .., \"content\": ..}, \"b\": {..}, \"duplicate\": true|false}.
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present_any = ["generate", "corpus"],
        conflicts_with_all = ["generate", "corpus"]
    )]
    pairs: Option<PathBuf>,
    /// Score every detector on a whole corpus (JSON Lines articles with an `id`, `.gz` is
    /// fine) against the text-overlap oracle: a reported pair sharing < 20% of the shorter
    /// text (5-character runs) is a false positive; a pair with run Jaccard ≥ 0.5 must be found.
    #[arg(long, value_name = "PATH", conflicts_with = "generate")]
    corpus: Option<String>,
    /// --corpus: write the reported pairs sharing the least text, per detector, to this JSON
    /// Lines file (SimHash at distance --k, MinHash at its best-F1 threshold).
    #[arg(long, value_name = "PATH")]
    worst: Option<PathBuf>,
    /// --corpus: pairs per detector written to --worst.
    #[arg(long, default_value_t = 20, value_name = "N")]
    worst_count: usize,
    /// Build the synthetic benchmark from the articles of --input instead, writing pairs to
    /// --output: edited reposts, real reposts, random and hard negatives, then the messy
    /// kinds: Traditional-character reposts (traditional_chars, traditional_taiwan,
    /// traditional_hongkong) and short items under site boilerplate longer than themselves
    /// (site_boilerplate_long negatives, same_item_two_sites positives), then the partial
    /// reprints: lead excerpts and middle passages of 20–50% of an article, and digest pages,
    /// items quoting one statement and teasers of one day as negatives, then the copied-text
    /// kinds of issue 43: template instances (negatives) and their reposts, round-ups and
    /// articles quoting one statement (shares_passage), excerpts wrapped in long boilerplate
    /// and lightly reworded passages.
    #[arg(long)]
    generate: bool,
    /// --generate: JSON Lines articles {\"id\", \"title\", \"content\"} (`.gz` is fine).
    #[arg(long, short, value_name = "PATH", requires = "generate")]
    input: Option<String>,
    /// --generate: where to write the pairs (`-` = standard output).
    #[arg(long, short, default_value = "-", value_name = "PATH")]
    output: String,
    /// --generate: RNG seed; the same seed and input give the same pairs on every platform.
    #[arg(long, default_value_t = generate::Config::default().seed)]
    seed: u64,
    /// --generate: positive pairs per transformation and size.
    #[arg(long, default_value_t = generate::Config::default().per_cell, value_name = "N")]
    per_cell: usize,
    /// --generate: random negatives, and hard negatives of each kind.
    #[arg(long, default_value_t = generate::Config::default().negatives, value_name = "N")]
    negatives: usize,
    /// --generate: real reposts mined from the input (by sentence overlap), at most N per
    /// group; 0 turns mining off.
    #[arg(long, default_value_t = generate::Config::default().real, value_name = "N")]
    real: usize,
    /// --generate: leave out the messy kinds (Traditional reposts and site boilerplate); the
    /// pairs before them are the same either way.
    #[arg(long, requires = "generate")]
    no_messy: bool,
    /// --generate: leave out the partial reprints (lead_excerpt and middle_passage positives;
    /// digest_page, shared_statement and same_day_teasers negatives); the pairs before them
    /// are the same either way.
    #[arg(long, requires = "generate")]
    no_partial: bool,
    /// --generate: leave out the copied-text kinds of issue 43 (template_instances,
    /// template_repost, compilation, shared_quote, wrapped_excerpt, reworded_passage); the
    /// pairs before them are the same either way.
    #[arg(long, requires = "generate")]
    no_copies: bool,

    /// Measure without learning boilerplate from the documents measured. By default each
    /// detector learns it from them first, as `dedupe` does from its input.
    #[arg(long, conflicts_with = "generate")]
    no_boilerplate: bool,

    /// Profile to measure; repeat to compare several (default: `default`).
    #[arg(long = "profile", value_name = "NAME", value_parser = common::parse_profile)]
    profiles: Vec<Profile>,
    /// Measure every profile.
    #[arg(long)]
    all_profiles: bool,
    /// Also measure a scheme that is not a profile, e.g. `word,logtfidf,nonum`, `word2,tf`,
    /// `char4,tf`, `word,tfidf,top40`: features (word | word2 | charN), weight (tf | tfidf |
    /// logtfidf), optional `topN` and `nonum` (numbers do not vote). Repeatable.
    #[arg(long = "scheme", value_name = "SPEC", value_parser = parse_scheme)]
    schemes: Vec<Scheme>,
    /// Also measure MinHash with the default parameters (the decision of the store and
    /// `dedupe`: a shared LSH band and estimated Jaccard ≥ the threshold).
    #[arg(long)]
    minhash: bool,
    /// Also measure the alignment detector (issue 43, not yet what `dedupe` or a store
    /// decide): MinHash's candidates (default parameters) related by aligning the two texts
    /// (`relation::AlignRule`), with formula windows learned from the texts measured; it
    /// reports shared passages (`shares_passage`) too. One operating point, `aligned`.
    #[arg(long)]
    aligned: bool,
    /// Also measure MinHash with these parameters, e.g. `shingle=w3` or `n=256;bands=85x3`
    /// (keys left out keep their default). Repeatable.
    #[arg(long = "minhash-params", value_name = "SPEC", value_parser = common::parse_minhash_params)]
    minhash_params: Vec<neardup::MinHashParams>,
    /// MinHash: the relations measured. By default a pair is also linked when one article
    /// is mostly contained in the other, as the store and `dedupe` decide.
    #[command(flatten)]
    relations: RelationArgs,
    /// MinHash: the containment threshold measured (default
    /// `neardup::relation::DEFAULT_CONTAINMENT`), to tune it.
    #[arg(long, value_name = "C", conflicts_with = "no_containment")]
    containment: Option<f64>,
    /// MinHash: the floor on the contained article's distinct shingles measured (default
    /// `neardup::relation::DEFAULT_MIN_SHINGLES`), to tune it.
    #[arg(long, value_name = "N", conflicts_with = "no_containment")]
    min_shingles: Option<u32>,
    /// MinHash: the containment decision's evidence margin measured, in standard errors of
    /// the Jaccard estimate (default `neardup::relation::DEFAULT_CONTAINMENT_MARGIN`; 0 judges
    /// the estimate itself), to tune it.
    #[arg(long, value_name = "Z", conflicts_with = "no_containment", value_parser = parse_margin)]
    containment_margin: Option<f64>,
    /// Text fields of each article, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    fields: Vec<String>,
    /// Distance shown in the per-group table (SimHash).
    #[arg(long, short, default_value_t = 3)]
    k: u32,
    /// Threshold shown in the per-group table (MinHash): one of 0.1, 0.2, …, 0.9; default
    /// the product's default, 0.3. `best` shows each MinHash detector's best-F1 threshold.
    #[arg(long, default_value = "0.3", value_name = "T|best")]
    threshold: String,
    /// Largest distance in the overall table (SimHash).
    #[arg(long, default_value_t = neardup::eval::TOP_K_EVALUATED, value_name = "K")]
    max_k: u32,
    /// Texts with fewer distinct features get no fingerprint.
    #[arg(long, default_value_t = Thresholds::default().min_words, value_name = "N")]
    min_words: usize,
    /// Draw precision–recall curves to this PNG (--pairs: on the labelled pairs; --corpus:
    /// against the oracle).
    #[arg(long, value_name = "PNG")]
    plot: Option<PathBuf>,
    /// TrueType font for the plot's labels (default: `NEARDUP_FONT` or a usual system font).
    #[arg(long, value_name = "TTF")]
    font: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
}

/// `word,tfidf[,topN][,nonum]`; see `--scheme`.
/// `--containment-margin`: a number of standard errors, 0 or more.
fn parse_margin(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(z) if z.is_finite() && z >= 0.0 => Ok(z),
        _ => Err(format!(
            "`{s}` is not a margin: give a number of standard errors, 0 or more (0 judges the estimate itself)"
        )),
    }
}

fn parse_scheme(spec: &str) -> Result<Scheme, String> {
    let mut scheme = Scheme {
        features: Features::Words,
        weight: Weight::TfIdf,
        top_n: None,
        numbers: true,
    };
    for part in spec.split(',').map(str::trim) {
        match part {
            "word" => scheme.features = Features::Words,
            "word2" => scheme.features = Features::WordBigrams,
            "tf" => scheme.weight = Weight::Tf,
            "tfidf" => scheme.weight = Weight::TfIdf,
            "logtfidf" => scheme.weight = Weight::LogTfIdf,
            "nonum" => scheme.numbers = false,
            p if p.starts_with("char") => {
                let n: u8 = p[4..]
                    .parse()
                    .ok()
                    .filter(|&n| (1..=8).contains(&n))
                    .ok_or_else(|| format!("`{p}`: charN needs N from 1 to 8"))?;
                scheme.features = Features::CharNgrams(n);
            }
            p if p.starts_with("top") => {
                let n: u16 = p[3..]
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("`{p}`: topN needs a positive N"))?;
                scheme.top_n = Some(n);
            }
            p => {
                return Err(format!(
                    "`{p}`: expected word, word2, charN, tf, tfidf, logtfidf, topN or nonum"
                ))
            }
        }
    }
    Ok(scheme)
}

pub fn run(args: Args) -> CmdResult {
    args.run.init_threads()?;
    if args.worst.is_some() && args.corpus.is_none() {
        return Err(common::usage(
            "--worst lists reported pairs of a corpus: use it with --corpus ARTICLES.jsonl",
        ));
    }
    if args.generate {
        generate(&args)
    } else if args.corpus.is_some() {
        evaluate_corpus(&args)
    } else {
        evaluate(&args)
    }
}

fn note(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("{msg}");
    }
}

/// The articles of a JSON Lines file: `(id, object)`; each needs a non-empty string in at
/// least one of `fields`.
fn read_objects(
    path: &str,
    fields: &[String],
) -> anyhow::Result<Vec<(String, Map<String, Value>)>> {
    let source = input::open(path)?;
    let name = source.name.clone();
    let mut out = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("reading {name}"))?;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Map<String, Value> = serde_json::from_slice(&raw)
            .with_context(|| format!("{name}:{line}: not a valid JSON object"))?;
        let id = match v.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => bail!("{name}:{line}: no `id` (string or integer); every article needs one"),
        };
        let texts = input::object_texts(&v, fields)
            .map_err(|e| anyhow::anyhow!("{name}:{line}: article {id}: {e}"))?;
        if texts.iter().all(|t| t.is_empty()) {
            bail!(
                "{name}:{line}: article {id} has no text: none of {} is a non-empty string (choose the fields with --field)",
                fields
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        out.push((id, v));
    }
    Ok(out)
}

/// The articles of a JSON Lines file (`id`, `title`, `content`; `.gz` is fine).
pub fn read_articles(path: &str) -> anyhow::Result<Vec<Article>> {
    Ok(read_objects(path, &["content".to_owned()])?
        .into_iter()
        .map(|(id, v)| {
            let text = |f: &str| {
                v.get(f)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Article {
                title: text("title"),
                content: text("content"),
                id,
            }
        })
        .collect())
}

fn generate(args: &Args) -> CmdResult {
    let started = Instant::now();
    let path = args
        .input
        .as_deref()
        .context("--generate needs --input ARTICLES.jsonl")?;
    let articles = read_articles(path)?;
    anyhow::ensure!(
        articles.len() >= 20,
        "{path}: {} articles; the generator needs at least 20",
        articles.len()
    );
    let config = generate::Config {
        seed: args.seed,
        per_cell: args.per_cell,
        negatives: args.negatives,
        real: args.real,
        messy: !args.no_messy,
        partial: !args.no_partial,
        copies: !args.no_copies,
    };
    let quiet = args.run.quiet;
    let pairs = generate::generate(&articles, &config, |m| note(quiet, m));
    let rename = args.output != "-" && common::replaceable(&args.output);
    let mut out: Box<dyn Write> = if args.output == "-" {
        Box::new(common::stdout())
    } else if !rename {
        Box::new(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&args.output)
                .with_context(|| format!("opening {}", args.output))?,
        ))
    } else {
        // Written beside the target and renamed, so a failed run leaves no half file.
        let tmp = format!("{}.tmp", args.output);
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&tmp).with_context(|| format!("creating {tmp}"))?,
        ))
    };
    for p in &pairs {
        serde_json::to_writer(&mut out, p).context("writing pairs")?;
        out.write_all(b"\n").context("writing pairs")?;
    }
    common::flush(&mut out)?;
    drop(out);
    if rename {
        std::fs::rename(format!("{}.tmp", args.output), &args.output)
            .with_context(|| format!("writing {}", args.output))?;
    }
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for p in &pairs {
        *kinds.entry(p.kind()).or_default() += 1;
    }
    note(
        quiet,
        &format!(
            "eval --generate: {} pairs from {} articles ({kinds:?}) in {:.1} s",
            pairs.len(),
            articles.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Status::Done)
}

/// The operating points of the per-group table: `k=K` (SimHash) and `J>=T` (MinHash).
fn group_points(args: &Args) -> anyhow::Result<Vec<String>> {
    let mut points = vec![format!("k={}", args.k)];
    if args.threshold != "best" {
        let t = neardup::eval::minhash::THRESHOLDS
            .into_iter()
            .find(|t| {
                args.threshold
                    .parse::<f64>()
                    .is_ok_and(|a| (a - t).abs() < 1e-9)
            })
            .ok_or_else(|| {
                common::usage(format!(
                    "--threshold {}: the per-group table shows one of 0.1, 0.2, …, 0.9, or `best`",
                    args.threshold
                ))
            })?;
        points.push(neardup::eval::minhash::point_label(t));
    }
    Ok(points)
}

/// The detectors dropping the boilerplate learned from the documents measured, as `dedupe`
/// learns it from its input (unless --no-boilerplate).
fn with_learned_boilerplate(
    args: &Args,
    detectors: Vec<Detector>,
    texts: &[Vec<String>],
) -> Vec<Detector> {
    if args.no_boilerplate {
        return detectors;
    }
    // What is learned depends only on whether the text is folded: learned once per setting,
    // and never for seed000, which drops none.
    let mut by_fold: [Option<Option<Arc<Boilerplate>>>; 2] = [None, None];
    detectors
        .into_iter()
        .map(|d| {
            let fp = d.fingerprinter();
            if fp.scheme().is_none() {
                return d;
            }
            let learned = by_fold[usize::from(fp.folds())]
                .get_or_insert_with(|| learn_boilerplate(fp, texts).map(Arc::new))
                .clone();
            if let Some(b) = &learned {
                note(
                    args.run.quiet,
                    &format!("{}: boilerplate learned from the documents: {b}", d.name()),
                );
            }
            d.with_boilerplate(learned)
        })
        .collect()
}

/// The detectors asked for: profiles, schemes, MinHash (the `default` profile when none).
fn detectors(args: &Args) -> anyhow::Result<Vec<Detector>> {
    common::ensure_usage(args.max_k <= 64, "--max-k must be at most 64")?;
    anyhow::ensure!(
        args.k <= args.max_k,
        "--k must be at most --max-k ({})",
        args.max_k
    );
    let config = |profile| FingerprintConfig {
        profile,
        thresholds: Thresholds {
            min_words: args.min_words,
            ..Thresholds::default()
        },
        ..FingerprintConfig::default()
    };
    let mut profiles = if args.all_profiles {
        Profile::ALL.to_vec()
    } else {
        args.profiles.clone()
    };
    if profiles.is_empty()
        && args.schemes.is_empty()
        && !args.minhash
        && !args.aligned
        && args.minhash_params.is_empty()
    {
        profiles.push(Profile::Default);
    }
    let mut out = Vec::new();
    for p in profiles {
        let fp = Fingerprinter::new(config(p));
        note(args.run.quiet, &format!("{p}: {}", fp.version()));
        out.push(Detector::SimHash {
            name: p.name().to_owned(),
            fp,
        });
    }
    for s in &args.schemes {
        let fp = Fingerprinter::with_scheme(*s, config(Profile::Default));
        note(args.run.quiet, &format!("{s}: {}", fp.version()));
        out.push(Detector::SimHash {
            name: s.to_string(),
            fp,
        });
    }
    let defaults = args.minhash.then(neardup::MinHashParams::default);
    for params in defaults
        .into_iter()
        .chain(args.minhash_params.iter().copied())
    {
        out.push(Detector::MinHash {
            fp: Fingerprinter::new(FingerprintConfig {
                minhash: params,
                ..config(Profile::Default)
            }),
            options: match_options(args)?,
        });
    }
    if args.aligned {
        out.push(Detector::Aligned {
            fp: Fingerprinter::new(config(Profile::Default)),
            options: match_options(args)?,
        });
    }
    Ok(out)
}

/// The relations the MinHash detectors measure (`--no-containment`, `--containment`,
/// `--min-shingles`, `--containment-margin`).
fn match_options(args: &Args) -> anyhow::Result<MatchOptions> {
    let mut options = args.relations.options();
    if let Some(rule) = &mut options.containment {
        *rule = ContainmentRule::new(
            args.containment.unwrap_or(rule.threshold),
            args.min_shingles.unwrap_or(rule.min_shingles),
        )
        .context("--containment")?
        .with_margin(args.containment_margin.unwrap_or(rule.margin));
    }
    Ok(options)
}

fn evaluate(args: &Args) -> CmdResult {
    let started = Instant::now();
    let path = args.pairs.as_ref().expect("clap requires --pairs");
    let detectors = detectors(args)?;
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let pairs = read_pairs(BufReader::new(file), &path.display().to_string())?;
    anyhow::ensure!(!pairs.is_empty(), "{}: no pairs", path.display());
    let quiet = args.run.quiet;
    let texts: Vec<Vec<String>> = pairs
        .iter()
        .flat_map(|p| [&p.a, &p.b])
        .map(|d| fields_of(d, &args.fields))
        .collect();
    let detectors = with_learned_boilerplate(args, detectors, &texts);
    drop(texts);
    let mut scored: Vec<Scored> = Vec::new();
    for d in &detectors {
        note(quiet, &format!("scoring {}", d.name()));
        scored.push(d.score(&args.fields, &pairs, args.max_k));
    }
    let report = Report {
        pairs: &pairs,
        scored: &scored,
        points: group_points(args)?,
    };
    let mut out = common::stdout();
    writeln!(out, "{}", report.markdown())?;
    common::flush(&mut out)?;
    if let Some(png) = &args.plot {
        let curves: Vec<Curve> = scored
            .iter()
            .map(|s| {
                let pts = overall(&pairs, s)
                    .iter()
                    .map(|r| (r.recall, r.precision))
                    .collect();
                (s.name.clone(), pts)
            })
            .collect();
        plot(
            png,
            "Precision–recall, k = 0..8 (SimHash) / J = 0.1..0.9 (MinHash)",
            &curves,
            args.font.as_deref(),
        )?;
    }
    note(
        quiet,
        &format!(
            "eval: {} pairs, {} detector(s) in {:.1} s",
            pairs.len(),
            scored.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Status::Done)
}

/// One precision–recall curve: a detector's name and its (recall, precision) points.
type Curve = (String, Vec<(f64, f64)>);

/// Draws the curves to `png`; without a font, prints which colour is which detector.
#[cfg(feature = "eval-plot")]
fn plot(
    png: &std::path::Path,
    title: &str,
    curves: &[Curve],
    font: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use super::eval_plot;
    let labelled = eval_plot::pr_curves(png, title, curves, font)
        .with_context(|| format!("drawing {}", png.display()))?;
    if !labelled {
        eprintln!(
            "{}: no TrueType font found (give one with --font or NEARDUP_FONT), so the plot has no labels; colours in order:",
            png.display()
        );
        for (n, (name, _)) in curves.iter().enumerate() {
            let (colour, _) = eval_plot::COLOURS[n % eval_plot::COLOURS.len()];
            eprintln!("  {colour}: {name}");
        }
    }
    Ok(())
}

/// `--plot` needs the `eval-plot` feature (on by default).
#[cfg(not(feature = "eval-plot"))]
fn plot(
    png: &std::path::Path,
    _title: &str,
    _curves: &[Curve],
    _font: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    Err(common::usage(format!(
        "--plot {}: this neardup was built without the `eval-plot` feature; build it with the default features",
        png.display()
    )))
}

/// `--corpus`: every detector's pairs on the whole corpus against the text-overlap oracle.
fn evaluate_corpus(args: &Args) -> CmdResult {
    let started = Instant::now();
    let path = args.corpus.as_deref().expect("checked by run");
    let detectors = detectors(args)?;
    let quiet = args.run.quiet;
    let objects = read_objects(path, &args.fields)?;
    anyhow::ensure!(
        objects.len() >= 2,
        "{path}: at least two articles are needed"
    );
    let ids: Vec<String> = objects.iter().map(|(id, _)| id.clone()).collect();
    let texts: Vec<Vec<String>> = objects
        .iter()
        .map(|(_, v)| fields_of(v, &args.fields))
        .collect();
    drop(objects);
    let detectors = with_learned_boilerplate(args, detectors, &texts);
    let t = Instant::now();
    let truth = Truth::new(&texts);
    note(
        quiet,
        &format!(
            "oracle: {} must-find pairs among {} articles in {:.1} s",
            truth.must_find.len(),
            texts.len(),
            t.elapsed().as_secs_f64()
        ),
    );
    let shown = format!("k={}", args.k);
    let mut tables = Vec::new();
    let mut worst = Vec::new();
    for d in &detectors {
        let t = Instant::now();
        let pairs = d.corpus_pairs(&texts, args.max_k);
        let rows = corpus::rows(&truth, &pairs);
        note(
            quiet,
            &format!(
                "{}: all pairs in {:.1} s",
                d.name(),
                t.elapsed().as_secs_f64()
            ),
        );
        if args.worst.is_some() {
            let point = pairs
                .points
                .iter()
                .position(|(p, _)| *p == shown)
                .or_else(|| corpus::best_row(&rows))
                .unwrap_or(0);
            worst.extend(corpus::worst(
                &truth,
                &pairs,
                point,
                args.worst_count,
                &ids,
                &texts,
            ));
        }
        tables.push(rows);
    }
    let mut out = common::stdout();
    writeln!(out, "{}", corpus::markdown(&truth, texts.len(), &tables))?;
    common::flush(&mut out)?;
    if let Some(png) = &args.plot {
        let curves: Vec<Curve> = tables
            .iter()
            .filter_map(|rows| {
                let name = rows.first()?.detector.clone();
                Some((name, rows.iter().map(|r| (r.recall, r.precision)).collect()))
            })
            .collect();
        plot(
            png,
            "Whole corpus vs text-overlap oracle, k = 0..7 (SimHash) / J = 0.1..0.9 (MinHash)",
            &curves,
            args.font.as_deref(),
        )?;
    }
    if let Some(file) = &args.worst {
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?,
        );
        for p in &worst {
            serde_json::to_writer(&mut w, p)
                .with_context(|| format!("writing {}", file.display()))?;
            w.write_all(b"\n")
                .with_context(|| format!("writing {}", file.display()))?;
        }
        w.flush()
            .with_context(|| format!("writing {}", file.display()))?;
    }
    note(
        quiet,
        &format!(
            "eval --corpus: {} articles, {} detector(s) in {:.1} s",
            texts.len(),
            detectors.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Status::Done)
}

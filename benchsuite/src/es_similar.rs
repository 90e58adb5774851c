//! `neardup-bench es-similar`: `similar --id` on a large index of documents that look like
//! the corpus, and what MinHash costs in index size.
//!
//! The documents are the corpus articles first (with their real reposts), then synthetic
//! ones up to `--docs`, made by [`Synthesizer`] from the corpus's real sentences, titles and
//! opening/closing lines (sources, editor lines, boilerplate), so that their fingerprints are
//! as skewed as real ones; or, with `--fill words`, new text walked on the corpus's chain of
//! words, which does not repeat the corpus's sentences a hundred times over ([`Fill`]). Each
//! is fingerprinted with both methods in one pass (rayon) and written, fingerprint fields and
//! id only, into two fresh indices made by `es::init_index`:
//! one holding both methods and one holding SimHash only (the size per document, and what the
//! MinHash fields cost a SimHash lookup). Both get 1 shard and 0 replicas and are force-merged to one segment.
//!
//! Then the same `Similar::by_id` lookups (the library call behind `neardup similar --id`)
//! for random ids run against every configuration in turn, interleaved so that load from the
//! rest of the machine hits all alike.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use elasticsearch::http::Method as Http;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, BlockType, Body, FieldNames, FilterMode, IndexMeta, MinHashFieldNames, Near, RetryPolicy,
    Similar, SimilarOptions,
};
use neardup::eval::generate::Article;
use neardup::eval::synth::{Fill, Synthesizer};
use neardup::minhash::Threshold;
use neardup::relation::{AlignRule, MatchOptions};
use neardup::{Fingerprinter, Method, Methods, Tolerance};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::es::Rng;
use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct EsSimilarBench {
    #[command(flatten)]
    es: EsArgs,
    /// The corpus (e.g. ../shared/data/zh_articles.jsonl.gz): its articles are loaded first,
    /// and the synthetic ones are made of its sentences.
    #[arg(long, short)]
    input: String,
    /// Documents per index.
    #[arg(long, default_value_t = 1_000_000)]
    docs: usize,
    /// Seed of the synthetic articles: the same seed and corpus give the same documents.
    #[arg(long, default_value_t = 20240601)]
    seed: u64,
    /// What the synthetic articles are made of: `sentences` (a real article's title, opening
    /// and closing lines around real sentences drawn from the whole corpus; every sentence
    /// recurs in about a hundred articles at 1M) or `words` (new text walked on the corpus's
    /// chain of words, with its word pairs). The indices of `words` are named PREFIX-words-….
    #[arg(long, value_enum, default_value_t = FillArg::Sentences)]
    fill: FillArg,
    /// Look up only the corpus articles (with their real reposts among them), not random
    /// documents of the whole index.
    #[arg(long)]
    corpus_queries: bool,
    /// Timed lookups per configuration (after --warmup untimed ones).
    #[arg(long, default_value_t = 2_000)]
    queries: usize,
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// SimHash distances k to look up with (comma-separated, at most 7).
    #[arg(
        short = 'k',
        long = "max-distance",
        value_delimiter = ',',
        default_value = "3,7"
    )]
    k: Vec<u32>,
    /// MinHash: smallest estimated Jaccard similarity looked up in the index holding both
    /// methods.
    #[arg(long, default_value_t = neardup::minhash::DEFAULT_THRESHOLD, value_name = "T", value_parser = common::parse_threshold)]
    threshold: Threshold,
    /// Use the indices of a previous run (`--keep`) when they hold --docs documents made by
    /// this fingerprinter, instead of loading them again; indices an interrupted load left
    /// with fewer are filled up from where it stopped.
    #[arg(long)]
    reuse: bool,
    /// Keep the indices afterwards.
    #[arg(long)]
    keep: bool,
    /// Aligned lookups (`Similar::aligned_by_id`, `similar --align`) instead: one index,
    /// PREFIX-texts, holding both methods and the articles' title and content (which the
    /// alignment reads), its formula learned from it as the worker learns it; MinHash
    /// lookups with containment at the default threshold beside the aligned ones.
    #[arg(long)]
    align: bool,
    /// Afterwards, where the time of a lookup goes: N lookups per configuration alone, with
    /// the nodes' shard-level totals (query and fetch phases, realtime gets) read before and
    /// after. 0 leaves it out.
    #[arg(long, default_value_t = 200, value_name = "N")]
    split: usize,
    /// Append one JSON line per configuration (documents, median, p99, candidates, bytes per
    /// document, engine, load average) to FILE, for `neardup-bench growth-plot`.
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
    /// Write every timed lookup as a JSON line (configuration, id, milliseconds, documents
    /// transferred, matches) to FILE: which lookups make the tail.
    #[arg(long, value_name = "FILE")]
    lookups: Option<std::path::PathBuf>,
    /// The two indices are named PREFIX-both and PREFIX-simhash (PREFIX-texts with --align).
    #[arg(long, default_value = "neardup-bench-similar", value_name = "PREFIX")]
    index_prefix: String,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// `--fill`: [`Fill`] on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FillArg {
    Sentences,
    Words,
}

impl From<FillArg> for Fill {
    fn from(f: FillArg) -> Fill {
        match f {
            FillArg::Sentences => Fill::Sentences,
            FillArg::Words => Fill::Words,
        }
    }
}

/// Documents per bulk request.
const CHUNK: usize = 5_000;

/// Document `n` of the benchmark: the corpus articles, then synthetic ones.
pub(super) struct Documents {
    pub(super) real: Vec<Article>,
    pub(super) synth: Synthesizer,
}

impl Documents {
    fn article(&self, n: usize) -> Article {
        match self.real.get(n) {
            Some(a) => a.clone(),
            None => self.synth.article(n as u64),
        }
    }

    fn id(&self, n: usize) -> String {
        match self.real.get(n) {
            Some(a) => a.id.clone(),
            None => Synthesizer::id(n as u64),
        }
    }
}

/// An index to fill and what it holds.
pub(super) struct Target {
    pub(super) index: String,
    pub(super) meta: IndexMeta,
    /// The documents keep their title and content beside the fingerprint fields.
    pub(super) texts: bool,
}

pub fn run(args: EsSimilarBench) -> CmdResult {
    common::ensure_usage(
        args.docs > 0 && args.queries > 0,
        "--docs and --queries must be positive",
    )?;
    let real = neardup::cli::eval::read_articles(&args.input)?;
    let synth = Synthesizer::with_fill(&real, args.seed, args.fill.into()).with_context(|| {
        let lacking = match args.fill {
            FillArg::Sentences => "no article has three sentences",
            FillArg::Words => "no article has a title and a content with words",
        };
        format!("{}: {lacking} to build synthetic ones from", args.input)
    })?;
    let docs = Documents { real, synth };
    let fp = args.profile.fingerprinter()?;
    let config = fp.config().clone();
    let meta = |methods| {
        IndexMeta::new(
            &config,
            methods,
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        )
    };
    let prefix = match args.fill {
        FillArg::Sentences => args.index_prefix.clone(),
        FillArg::Words => format!("{}-words", args.index_prefix),
    };
    let targets = if args.align {
        vec![Target {
            index: format!("{prefix}-texts"),
            meta: meta(Methods::BOTH),
            texts: true,
        }]
    } else {
        vec![
            Target {
                index: format!("{prefix}-both"),
                meta: meta(Methods::BOTH),
                texts: false,
            },
            Target {
                index: format!("{prefix}-simhash"),
                meta: meta(Methods::only(Method::SimHash)),
                texts: false,
            },
        ]
    };

    let (es_config, client) = args.es.client()?;
    let rt = es_args::runtime()?;
    let retry = RetryPolicy::default();
    let version = rt.block_on(es::server_version(&client, &retry))?;
    // With --reuse, what the indices hold already: all of it, or what an interrupted load
    // left (it goes on from the last whole bulk request before it).
    let mut held = Some(args.docs);
    if args.reuse {
        for t in &targets {
            let w = rt.block_on(written(&client, &retry, t, &fp))?;
            held = held.zip(w).map(|(a, b)| a.min(b));
        }
    } else {
        held = None;
    }
    let reused = held == Some(args.docs);
    if !reused {
        let from = match held {
            Some(h) if h < args.docs => (h / CHUNK).saturating_sub(1) * CHUNK,
            _ => 0,
        };
        if from > 0 {
            eprintln!(
                "the indices hold {from}+ documents of {}: loading goes on from there",
                args.docs
            );
        }
        load_from(&rt, &client, &retry, &targets, &docs, &fp, from..args.docs)?;
        if args.align {
            // The formula aligned lookups leave out, learned from the index as the worker
            // learns it.
            let t = &targets[0];
            let started = Instant::now();
            let learned = rt.block_on(async {
                let refresh = format!("/{}/_refresh", t.index);
                es::request(&client, &retry, "refresh", Http::Post, &refresh, &[], None).await?;
                let scanner = es::Scanner::new(client.clone(), retry.clone());
                let fields = ["title".to_owned(), "content".to_owned()];
                let learned =
                    es::learn_formula(&scanner, &t.index, &fields, es::FORMULA_SAMPLE, &fp).await?;
                es::record_formula(&client, &retry, &t.index, learned.formula.clone()).await?;
                anyhow::Ok(learned)
            })?;
            eprintln!(
                "formula {} learned from {} documents in {:.0} s",
                learned.formula,
                learned.read,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let names: Vec<&str> = targets.iter().map(|t| t.index.as_str()).collect();
    rt.block_on(merge_to_one_segment(&client, &retry, &names))?;
    let real_docs = docs.real.len().min(args.docs);
    println!(
        "Elasticsearch {version} at {}; {} documents per index ({real_docs} corpus articles, {} synthetic of {:?}, seed {}); 1 shard, 0 replicas, force-merged to 1 segment",
        es_config.display_urls(),
        args.docs,
        args.docs - real_docs,
        args.fill,
        args.seed,
    );

    rt.block_on(async {
        println!();
        println!("| index | methods | documents | segments | store bytes | bytes per document |");
        println!("|---|---|---|---|---|---|");
        let mut bytes_per_doc = Vec::new();
        for t in &targets {
            let s = stats(&client, &t.index).await?;
            bytes_per_doc.push(s.bytes as f64 / s.docs.max(1) as f64);
            println!(
                "| {} | {} | {} | {} | {} | {:.1} |",
                t.index,
                methods_name(&t.meta),
                s.docs,
                s.segments,
                s.bytes,
                s.bytes as f64 / s.docs.max(1) as f64
            );
        }

        let mut configs = Vec::new();
        for t in &targets {
            let mut tolerances: Vec<Tolerance> =
                args.k.iter().map(|&k| Tolerance::Distance(k)).collect();
            if t.meta.minhash.is_some() {
                tolerances.insert(0, Tolerance::Similarity(args.threshold));
            }
            // MinHash is looked up for near-duplicates only, and where the index holds the
            // containment fields (fields format 3) for partial copies too.
            let mut asked: Vec<Near> = tolerances.iter().map(|&t| Near::from(t)).collect();
            if t.meta.has_containment() {
                asked.insert(
                    1,
                    Near::new(Tolerance::Similarity(args.threshold), MatchOptions::default()),
                );
            }
            if args.align {
                asked = vec![Near::new(
                    Tolerance::Similarity(args.threshold),
                    MatchOptions::default(),
                )];
            }
            for &near in &asked {
                for filter in [FilterMode::Client, FilterMode::Server] {
                    let similar = || {
                        Similar::with_options(
                            client.clone(),
                            fp.clone(),
                            SimilarOptions {
                                filter,
                                ..SimilarOptions::default()
                            },
                            RetryPolicy::none(),
                        )
                    };
                    configs.push(Config {
                        index: &t.index,
                        near,
                        filter,
                        similar: similar(),
                        aligned: false,
                    });
                    if args.align {
                        configs.push(Config {
                            index: &t.index,
                            near,
                            filter,
                            similar: similar(),
                            aligned: true,
                        });
                    }
                }
            }
        }
        println!();
        // Ids drawn from the corpus articles only, or from every document.
        let drawn = if args.corpus_queries {
            docs.real.len().min(args.docs)
        } else {
            args.docs
        };
        println!(
            "{} timed lookups per configuration after {} warm-up, the same random ids in every index{}:",
            args.queries,
            args.warmup,
            if args.corpus_queries { ", corpus articles only" } else { "" },
        );
        let mut rng = Rng(7);
        let ids: Vec<String> = (0..args.warmup + args.queries)
            .map(|_| docs.id((rng.next() % drawn as u64) as usize))
            .collect();
        let mut results: Vec<Vec<Lookup>> = (0..configs.len()).map(|_| Vec::new()).collect();
        for (n, id) in ids.iter().enumerate() {
            for c in 0..configs.len() {
                let c = (c + n) % configs.len();
                let config = &configs[c];
                let t = Instant::now();
                let found = if config.aligned {
                    config
                        .similar
                        .aligned_by_id(config.index, id, &AlignRule::DEFAULT)
                        .await?
                } else {
                    config
                        .similar
                        .by_id(config.index, id, config.near)
                        .await?
                };
                let elapsed = t.elapsed();
                if n >= args.warmup {
                    results[c].push(Lookup {
                        id: n,
                        elapsed,
                        transferred: found.transferred,
                        matches: found.matches.len() as u64,
                    });
                }
            }
        }
        println!();
        println!("| index | query | filter | median ms | p99 ms | queries/s | candidates per query: median | p99 | mean | transferred per query | matches per query |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
        for (c, config) in configs.iter().enumerate() {
            // Both filters see the same candidates; the client filter fetches all of them.
            let candidates_of = configs
                .iter()
                .position(|o| {
                    o.index == config.index
                        && o.near == config.near
                        && o.filter == FilterMode::Client
                        && o.aligned == config.aligned
                })
                .expect("a client-filter configuration per index and tolerance");
            let mut candidates: Vec<u64> =
                results[candidates_of].iter().map(|l| l.transferred).collect();
            candidates.sort_unstable();
            let r = &results[c];
            let mut lat: Vec<Duration> = r.iter().map(|l| l.elapsed).collect();
            lat.sort_unstable();
            let total: Duration = lat.iter().sum();
            let per_query = |sum: u64| sum as f64 / r.len() as f64;
            println!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.0} | {} | {} | {:.1} | {:.1} | {:.2} |",
                config.index,
                config.name(),
                config.filter,
                percentile(&lat, 0.5).as_secs_f64() * 1e3,
                percentile(&lat, 0.99).as_secs_f64() * 1e3,
                lat.len() as f64 / total.as_secs_f64(),
                percentile(&candidates, 0.5),
                percentile(&candidates, 0.99),
                per_query(candidates.iter().sum()),
                per_query(r.iter().map(|l| l.transferred).sum()),
                per_query(r.iter().map(|l| l.matches).sum()),
            );
        }
        if args.split > 0 {
            println!();
            println!(
                "Where the time goes: {} lookups per configuration alone (the first timed ids), the nodes' shard-level totals read before and after, per lookup:",
                args.split.min(args.queries)
            );
            println!();
            println!("| index | query | filter | wall ms | shard query phase ms | query phases | shard fetch phase ms | fetch phases | realtime get ms | gets | the rest (client, HTTP, coordination) ms |");
            println!("|---|---|---|---|---|---|---|---|---|---|---|");
            let split = &ids[args.warmup..][..args.split.min(args.queries)];
            for config in &configs {
                let before = phase_totals(&client).await?;
                let t = Instant::now();
                for id in split {
                    if config.aligned {
                        config.similar.aligned_by_id(config.index, id, &AlignRule::DEFAULT).await?;
                    } else {
                        config.similar.by_id(config.index, id, config.near).await?;
                    }
                }
                let wall = t.elapsed().as_secs_f64() * 1e3;
                let d = phase_totals(&client).await?.since(&before);
                let per = |v: u64| v as f64 / split.len() as f64;
                println!(
                    "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    config.index,
                    config.name(),
                    config.filter,
                    wall / split.len() as f64,
                    per(d.query_ms),
                    per(d.queries),
                    per(d.fetch_ms),
                    per(d.fetches),
                    per(d.get_ms),
                    per(d.gets),
                    (wall - (d.query_ms + d.fetch_ms + d.get_ms) as f64) / split.len() as f64,
                );
            }
        }
        if let Some(path) = &args.lookups {
            use std::io::Write;
            let mut out = std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("{}: cannot write the lookups", path.display()))?,
            );
            for (c, config) in configs.iter().enumerate() {
                for l in &results[c] {
                    let row = json!({
                        "index": config.index,
                        "query": config.name(),
                        "filter": config.filter.to_string(),
                        "id": ids[l.id],
                        "ms": l.elapsed.as_secs_f64() * 1e3,
                        "transferred": l.transferred,
                        "matches": l.matches,
                    });
                    writeln!(out, "{row}")?;
                }
            }
            out.flush()?;
        }
        if let Some(path) = &args.record {
            use std::io::Write;
            let engine = es::server_version(&client, &retry).await?;
            let mut out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("{}: cannot append the results", path.display()))?;
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs();
            let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            for (c, config) in configs.iter().enumerate() {
                let t = targets.iter().position(|t| t.index == config.index).expect("a configuration's index is a target");
                let mut lat: Vec<Duration> = results[c].iter().map(|l| l.elapsed).collect();
                lat.sort_unstable();
                let mut candidates: Vec<u64> = results[c].iter().map(|l| l.transferred).collect();
                candidates.sort_unstable();
                let row = json!({
                    "docs": args.docs,
                    "fill": format!("{:?}", args.fill).to_lowercase(),
                    "corpus_queries": args.corpus_queries,
                    "engine": engine.to_string(),
                    "index": config.index,
                    "methods": methods_name(&targets[t].meta),
                    "query": config.name(),
                    "filter": config.filter.to_string(),
                    "queries": lat.len(),
                    "median_ms": percentile(&lat, 0.5).as_secs_f64() * 1e3,
                    "p99_ms": percentile(&lat, 0.99).as_secs_f64() * 1e3,
                    "transferred_median": percentile(&candidates, 0.5),
                    "transferred_p99": percentile(&candidates, 0.99),
                    "bytes_per_doc": bytes_per_doc[t],
                    "load_avg": load_avg.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
                    "at": at,
                });
                writeln!(out, "{row}")?;
            }
        }
        if !args.keep {
            for t in &targets {
                es::request(&client, &retry, "delete bench index", Http::Delete, &format!("/{}", t.index), &[], None).await?;
            }
        }
        Ok(Status::Done)
    })
}

/// One way of looking up, timed against the others.
struct Config<'a> {
    index: &'a str,
    near: Near,
    filter: FilterMode,
    similar: Similar,
    /// `Similar::aligned_by_id` (its own candidates; `near` unused).
    aligned: bool,
}

impl Config<'_> {
    /// What the configuration looks up, as the tables and the records name it.
    fn name(&self) -> String {
        match self.near.options.containment {
            _ if self.aligned => {
                "aligned (MinHash t = 0.1 + containment, then the texts)".to_owned()
            }
            Some(_) => format!("{} + containment", describe(self.near.tolerance)),
            None => describe(self.near.tolerance),
        }
    }
}

/// The shard-level totals of every node: searches' query and fetch phases, realtime gets.
#[derive(Clone, Copy, Default)]
struct PhaseTotals {
    query_ms: u64,
    queries: u64,
    fetch_ms: u64,
    fetches: u64,
    get_ms: u64,
    gets: u64,
}

impl PhaseTotals {
    fn since(&self, before: &PhaseTotals) -> PhaseTotals {
        PhaseTotals {
            query_ms: self.query_ms - before.query_ms,
            queries: self.queries - before.queries,
            fetch_ms: self.fetch_ms - before.fetch_ms,
            fetches: self.fetches - before.fetches,
            get_ms: self.get_ms - before.get_ms,
            gets: self.gets - before.gets,
        }
    }
}

/// `GET /_nodes/stats/indices/search,get`, summed over the nodes.
async fn phase_totals(client: &Elasticsearch) -> anyhow::Result<PhaseTotals> {
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "node search stats",
        Http::Get,
        "/_nodes/stats/indices/search,get",
        &[],
        None,
    )
    .await?;
    let mut t = PhaseTotals::default();
    let nodes = r["nodes"].as_object().context("node stats without nodes")?;
    for node in nodes.values() {
        let i = &node["indices"];
        let get = |v: &Value| v.as_u64().unwrap_or(0);
        t.query_ms += get(&i["search"]["query_time_in_millis"]);
        t.queries += get(&i["search"]["query_total"]);
        t.fetch_ms += get(&i["search"]["fetch_time_in_millis"]);
        t.fetches += get(&i["search"]["fetch_total"]);
        t.get_ms += get(&i["get"]["time_in_millis"]);
        t.gets += get(&i["get"]["total"]);
    }
    Ok(t)
}

/// One timed lookup.
struct Lookup {
    /// Its id's position in the lookups' ids.
    id: usize,
    elapsed: Duration,
    /// Documents whose fingerprint crossed the network (the query document included).
    transferred: u64,
    matches: u64,
}

/// `SimHash k = 3` or `MinHash t = 0.3`, for the benchmark tables.
pub(super) fn describe(t: Tolerance) -> String {
    match t {
        Tolerance::Distance(k) => format!("SimHash k = {k}"),
        Tolerance::Similarity(t) => format!("MinHash t = {t}"),
    }
}

/// The value at quantile `q` of sorted `v` (nearest rank).
pub(super) fn percentile<T: Copy>(v: &[T], q: f64) -> T {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn methods_name(meta: &IndexMeta) -> &'static str {
    match (meta.simhash.is_some(), meta.minhash.is_some()) {
        (true, true) => "SimHash + MinHash",
        (true, false) => "SimHash",
        (false, true) => "MinHash",
        (false, false) => "none",
    }
}

/// Whether `t.index` exists with `docs` documents and the methods and versions of `t.meta`.
pub(super) async fn holds(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    t: &Target,
    fp: &Fingerprinter,
    docs: usize,
) -> anyhow::Result<bool> {
    Ok(written(client, retry, t, fp).await? == Some(docs))
}

/// How many documents `t.index` holds once refreshed, if it exists with the methods and
/// versions of `t.meta`: what an interrupted load left.
pub(super) async fn written(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    t: &Target,
    fp: &Fingerprinter,
) -> anyhow::Result<Option<usize>> {
    let refresh = format!("/{}/_refresh", t.index);
    let r = es::send(client, Http::Post, &refresh, &[], None).await?;
    if r.status.as_u16() == 404 {
        return Ok(None);
    }
    let r = es::send(
        client,
        Http::Get,
        &format!("/{}/_count", t.index),
        &[],
        None,
    )
    .await?;
    let Some(count) = r.body["count"].as_u64() else {
        return Ok(None);
    };
    let meta = es::read_meta(client, retry, &t.index, &FieldNames::default()).await?;
    meta.check_fingerprinter(&t.index, fp)?;
    Ok((meta.methods() == t.meta.methods()).then_some(count as usize))
}

/// Writes documents `range` into `targets`, fingerprinting (both methods, one pass, on
/// rayon's threads) ahead of the bulk requests on another thread. From 0 the indices are
/// made afresh; from a later document the load an interrupted run left goes on (the documents are written in order, in
/// bulk requests of [`CHUNK`], and writing one again overwrites it with the same fields).
pub(super) fn load_from(
    rt: &tokio::runtime::Runtime,
    client: &Elasticsearch,
    retry: &RetryPolicy,
    targets: &[Target],
    docs: &Documents,
    fp: &Fingerprinter,
    range: std::ops::Range<usize>,
) -> anyhow::Result<()> {
    let (from, n) = (range.start, range.end);
    rt.block_on(async {
        for t in targets {
            if from == 0 {
                let _ = es::send(client, Http::Delete, &format!("/{}", t.index), &[], None).await?;
                es::init_index(client, retry, &t.index, &t.meta).await?;
            }
            let settings = json!({ "number_of_replicas": 0, "refresh_interval": "-1" });
            put_settings(client, retry, &t.index, settings).await?;
        }
        anyhow::Ok(())
    })?;
    let started = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Vec<String>>(2);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for start in (from..n).step_by(CHUNK) {
                let bodies = bulk_bodies(targets, docs, fp, start..(start + CHUNK).min(n));
                if tx.send(bodies).is_err() {
                    break;
                }
            }
        });
        let mut written = from;
        for bodies in rx {
            for (t, nd) in targets.iter().zip(bodies) {
                rt.block_on(bulk_load(client, retry, &t.index, nd))?;
            }
            written += CHUNK.min(n - written);
            if written % 100_000 < CHUNK {
                eprintln!(
                    "{written} documents written in {:.0} s",
                    started.elapsed().as_secs_f64()
                );
            }
        }
        anyhow::Ok(())
    })?;
    let loaded = started.elapsed();
    rt.block_on(async {
        for t in targets {
            put_settings(client, retry, &t.index, json!({ "refresh_interval": null })).await?;
        }
        anyhow::Ok(())
    })?;
    eprintln!(
        "fingerprinted and wrote documents {from}..{n} into {} indices in {:.0} s ({:.0} documents/s)",
        targets.len(),
        loaded.as_secs_f64(),
        (n - from) as f64 / loaded.as_secs_f64(),
    );
    Ok(())
}

/// `POST /{index}/_bulk` with `nd`; an error naming the first failed item if any failed.
pub(super) async fn bulk_load(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    nd: String,
) -> anyhow::Result<()> {
    let r = es::request(
        client,
        retry,
        "bench bulk load",
        Http::Post,
        &format!("/{index}/_bulk"),
        &[],
        Some(&Body::NdJson(nd)),
    )
    .await?;
    if r["errors"] != false {
        let failed = r["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["index"]["error"].is_object()));
        anyhow::bail!(
            "bulk load into {index} failed: {}",
            failed.unwrap_or(&Value::Null)
        );
    }
    Ok(())
}

/// Force-merges every index to one segment and waits until the merge is done and visible.
/// A merge of a million documents outlasts the HTTP timeout (Elasticsearch 7.10 has no
/// `wait_for_completion=false` for it), so the request runs on its own and the segment count
/// is polled; a request that timed out while nothing merges is sent again.
pub(super) async fn merge_to_one_segment(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    indices: &[&str],
) -> anyhow::Result<()> {
    let started = Instant::now();
    let force_merge = |index: &str| {
        let (client, path) = (client.clone(), format!("/{index}/_forcemerge"));
        tokio::spawn(async move {
            es::request(
                &client,
                &RetryPolicy::none(),
                "force merge",
                Http::Post,
                &path,
                &[("max_num_segments", "1")],
                None,
            )
            .await
        })
    };
    for &index in indices {
        let mut merge = force_merge(index);
        let mut answered = false;
        loop {
            es::request(
                client,
                retry,
                "refresh",
                Http::Post,
                &format!("/{index}/_refresh"),
                &[],
                None,
            )
            .await?;
            let s = stats(client, index).await?;
            if s.segments <= 1 && s.merging == 0 {
                break;
            }
            if merge.is_finished() && s.merging == 0 {
                match (&mut merge).await? {
                    Err(e) if e.is_transient() => merge = force_merge(index),
                    Err(e) => return Err(e.into()),
                    // Answered: the next refresh shows the merged segment, or it did not merge.
                    Ok(_) if answered => {
                        anyhow::bail!("force merge of {index} left {} segments", s.segments)
                    }
                    Ok(_) => {
                        answered = true;
                        merge = tokio::spawn(async { Ok(Value::Null) });
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
    eprintln!(
        "force-merged to one segment in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One `_bulk` body per target for documents `range`: their ids and the fingerprint fields
/// of the methods each target holds (and their title and content where it keeps texts).
fn bulk_bodies(
    targets: &[Target],
    docs: &Documents,
    fp: &Fingerprinter,
    range: std::ops::Range<usize>,
) -> Vec<String> {
    let sketched: Vec<(Article, neardup::Sketches)> = range
        .into_par_iter()
        .map(|n| {
            let a = docs.article(n);
            let sketches = fp.sketch_fields(Methods::BOTH, &[&a.title, &a.content]);
            (a, sketches)
        })
        .collect();
    targets
        .iter()
        .map(|t| {
            let mut nd = String::with_capacity(sketched.len() * 1_200);
            for (a, sketches) in &sketched {
                // The fields of every method the target index holds, as the writers make them.
                let mut doc = es::fingerprint_fields_json(&t.meta, sketches);
                if t.texts {
                    doc.insert("title".into(), json!(a.title));
                    doc.insert("content".into(), json!(a.content));
                }
                nd.push_str(&json!({ "index": { "_id": a.id } }).to_string());
                nd.push('\n');
                nd.push_str(&Value::Object(doc).to_string());
                nd.push('\n');
            }
            nd
        })
        .collect()
}

/// `PUT /{index}/_settings` with `{"index": settings}`.
async fn put_settings(
    client: &elasticsearch::Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    settings: Value,
) -> anyhow::Result<()> {
    es::request(
        client,
        retry,
        "bench index settings",
        Http::Put,
        &format!("/{index}/_settings"),
        &[],
        Some(&Body::Json(json!({ "index": settings }))),
    )
    .await?;
    Ok(())
}

/// `_stats` of an index's primaries.
pub(super) struct Stats {
    pub(super) docs: u64,
    pub(super) segments: u64,
    pub(super) bytes: u64,
    /// Merges running now.
    merging: u64,
}

pub(super) async fn stats(client: &Elasticsearch, index: &str) -> anyhow::Result<Stats> {
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "index stats",
        Http::Get,
        &format!("/{index}/_stats/docs,store,segments,merge"),
        &[],
        None,
    )
    .await?;
    let p = &r["_all"]["primaries"];
    let get = |v: &Value| v.as_u64().unwrap_or(0);
    Ok(Stats {
        docs: get(&p["docs"]["count"]),
        segments: get(&p["segments"]["count"]),
        bytes: get(&p["store"]["size_in_bytes"]),
        merging: get(&p["merges"]["current"]),
    })
}

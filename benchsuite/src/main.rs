//! `neardup-bench`: the project's measurements, kept out of what users install (a
//! `publish = false` workspace member, like ripgrep's benchsuite): throughput on a real
//! corpus, reported as medians, and the Elasticsearch and service benchmarks that need a live
//! node. CPU micro-benchmarks are criterion benches (`cargo bench`, `benches/`); the fuzzer is
//! `fuzz/`.
//!
//! Run it with `cargo run -p neardup-bench --release -- <command> …` (see BENCHMARKS.md).

mod align_pairs;
mod backfill;
mod containment;
mod es;
mod es_groups;
mod es_layout;
mod es_recall;
mod es_regroup;
mod es_similar;
mod es_throughput;
mod es_tracking;
mod growth_plot;
mod index;
mod read_pairs;
mod read_score;
mod serve_writes;
mod soak;
mod store_layout;

use std::time::Instant;

use anyhow::Context;
use neardup::input::{self, Body, InputSpec, Lines};
use neardup::pipeline::sketch_body;
use neardup::text::Folder;
use neardup::{FingerprintConfig, Fingerprinter, Method, Methods};
use rayon::prelude::*;

use clap::Parser;
use neardup::cli::common::{self, CmdResult, LogFormat, ProfileArgs, Status};

/// Measurements of neardup: throughput, latency, recall and sizes (development only).
#[derive(Parser, Debug)]
#[command(name = "neardup-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
    /// Log lines on stderr as `text` or as `json`.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "NEARDUP_LOG_FORMAT",
        display_order = 1000
    )]
    log_format: LogFormat,
}

fn main() {
    let cli = Cli::parse();
    common::init_logging(cli.log_format);
    std::process::exit(common::finish(run(cli.bench)));
}

#[derive(clap::Subcommand, Debug)]
enum Bench {
    /// Fingerprint throughput (MB/s of UTF-8 text, documents/s) of SimHash, MinHash and both,
    /// beside bare jieba-rs segmentation of the same text; one thread and all threads.
    Fingerprint(FingerprintBench),
    /// Block term-query latency on Elasticsearch: `short` vs `keyword` blocks (medians, p99).
    EsTerms(es::EsTermsBench),
    /// All pairs within k among random fingerprints and/or a corpus's, one thread and all.
    Allpairs(index::AllPairsBench),
    /// Latency of `similar` queries on a store (median, p99); on a MinHash store its own
    /// documents are the queries, near-duplicates only and with containment.
    Similar(index::SimilarBench),
    /// `similar --id` latency (client vs server filter) and index size per document with and
    /// without MinHash, on Elasticsearch, over the corpus plus synthetic articles made of its
    /// sentences (1M documents by default).
    EsSimilar(es_similar::EsSimilarBench),
    /// How `similar --id` grows with the index: a table and a PNG of median and p99 against
    /// documents, from the records of `es-similar --record FILE` at several sizes.
    GrowthPlot(growth_plot::GrowthPlotBench),
    /// Bytes per article of compact layouts of the fingerprint fields on Elasticsearch (an
    /// index per option, against a baseline without them; `_disk_usage` where the engine has
    /// it), and offline the b-bit signatures' precision and recall and shorter band terms'
    /// random candidates (issue 21, measurement only).
    EsLayout(es_layout::EsLayoutBench),
    /// Recall and precision of `similar --id` on Elasticsearch over labelled pairs
    /// (`neardup eval --generate`) written into a fresh index by the real writer.
    EsRecall(es_recall::EsRecallBench),
    /// Duplicate groups after es-init + one worker pass over labelled pairs: articles
    /// labelled, pairs sharing a group, and the field's bytes per article.
    EsGroups(es_groups::EsGroupsBench),
    /// `neardup regroup` over indices of growing size: time, peak RSS (flat), work file,
    /// cluster CPU.
    EsRegroup(es_regroup::EsRegroupBench),
    /// `similar --id` lookups per second and p50/p90/p99 at a fixed concurrency through the
    /// library, on an existing index; writes the sampled ids for `scripts/bench-serve`,
    /// which replays them through `neardup serve` with wrk.
    EsThroughput(es_throughput::EsThroughputBench),
    /// The application's bulk writes of whole articles with the edit-tracking final pipeline
    /// beside without it, alternating in the same run (docs/s medians, the ratio).
    EsTracking(es_tracking::EsTrackingBench),
    /// Candidate steps for partial reprints (issue 31): recall of lead excerpts and passages
    /// of 20–40 % of an article under today's bands and "at least m minima agree", and
    /// candidates per query on the whole corpus.
    ContainmentCandidates(containment::ContainmentBench),
    /// Bytes per document of layouts of a MinHash store's key tables (band table, minima
    /// tables of fewer positions and bits), each written as `Store::compact` writes a store
    /// (issue 45, measurement only).
    StoreLayout(store_layout::StoreLayoutBench),
    /// Back-fill throughput next to the raw rate of the same bulk updates (docs/s, medians).
    Backfill(backfill::BackfillBench),
    /// Articles written per second through `neardup serve` (plain and dedupe `PUT`s) beside
    /// direct Elasticsearch PUTs of the same articles at the same concurrency.
    ServeWrites(serve_writes::ServeWritesBench),
    /// A long day of mixed traffic (lookups, PUTs, dedupe PUTs, bulk) through `neardup
    /// serve` on a cluster, one node killed and started again in the middle: memory, claims
    /// held and p50/p99 per minute, every answer and write checked.
    Soak(soak::SoakBench),
    /// The alignment of listed pairs of a corpus: shares in passages, passages, identity,
    /// facts that agree and differ, one line a pair; and the time an alignment takes.
    AlignPairs(align_pairs::AlignPairsBench),
    /// Pairs of articles to read by hand, drawn by how much text they share (20-letter
    /// runs) from every pair sharing one and from a `dedupe --pairs` file, blind to any
    /// detector: `sample` writes the numbered pairs, `show` prints them with the copied runs
    /// marked.
    ReadPairs(read_pairs::ReadPairsBench),
}

#[derive(clap::Args, Debug)]
pub struct FingerprintBench {
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// Text fields to fingerprint.
    #[arg(long = "field", default_values = ["title", "content"])]
    fields: Vec<String>,
    /// Timed runs per configuration; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Use only the first N documents.
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    profile: ProfileArgs,
}

fn run(b: Bench) -> CmdResult {
    match b {
        Bench::Fingerprint(args) => fingerprint(args),
        Bench::EsTerms(args) => es::run(args),
        Bench::Allpairs(args) => index::allpairs(args),
        Bench::Similar(args) => index::similar(args),
        Bench::EsSimilar(args) => es_similar::run(args),
        Bench::GrowthPlot(args) => growth_plot::run(args),
        Bench::AlignPairs(args) => align_pairs::run(args),
        Bench::EsLayout(args) => es_layout::run(args),
        Bench::EsRecall(args) => es_recall::run(args),
        Bench::EsGroups(args) => es_groups::run(args),
        Bench::EsRegroup(args) => es_regroup::run(args),
        Bench::EsThroughput(args) => es_throughput::run(args),
        Bench::EsTracking(args) => es_tracking::run(args),
        Bench::Backfill(args) => backfill::run(args),
        Bench::ContainmentCandidates(args) => containment::run(args),
        Bench::ServeWrites(args) => serve_writes::run(args),
        Bench::Soak(args) => soak::run(args),
        Bench::StoreLayout(args) => store_layout::run(args),
        Bench::ReadPairs(args) => read_pairs::run(args),
    }
}

fn fingerprint(args: FingerprintBench) -> CmdResult {
    common::ensure_usage(args.runs > 0, "--runs must be at least 1")?;
    let spec = InputSpec {
        text_fields: args.fields.clone(),
        ..InputSpec::default()
    };
    let source = input::open(&args.input)?;
    let mut docs = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{}:{line}", args.input))?;
        let doc =
            input::parse_line(&raw, &spec).with_context(|| format!("{}:{line}", args.input))?;
        docs.push(doc.body);
        if args.limit.is_some_and(|n| docs.len() >= n) {
            break;
        }
    }
    let bytes: usize = docs
        .iter()
        .map(|b| match b {
            Body::Fields(f) => f.iter().map(String::len).sum::<usize>(),
            Body::Tokens(t) => t.iter().map(String::len).sum::<usize>(),
        })
        .sum();
    // Start-up, each part timed where it is first loaded: jieba's dictionary, then the
    // folding tables, then what the fingerprinter adds (IDF table, stop words).
    let t = Instant::now();
    let jieba = neardup::text::segment::jieba();
    let jieba_start = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let folder = Folder::shared();
    let fold_start = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let fp = args.profile.fingerprinter()?;
    let _ = fp.sketch_fields(Methods::BOTH, &["预热"]);
    let rest_start = t.elapsed().as_secs_f64();
    let unfolded = Fingerprinter::new(FingerprintConfig {
        fold: false,
        ..fp.config().clone()
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let folded_docs = docs
        .iter()
        .filter(|b| match b {
            Body::Fields(f) => f.iter().any(|t| folder.is_traditional(t)),
            Body::Tokens(_) => false,
        })
        .count();
    println!(
        "corpus: {} ({} documents, {:.1} MB UTF-8, {} with a Traditional character); {}; {}; {} runs each, median reported",
        args.input,
        docs.len(),
        bytes as f64 / 1e6,
        folded_docs,
        fp.version(),
        fp.minhash_version(),
        args.runs
    );
    println!(
        "start-up: jieba dictionary {:.0} ms, folding tables {:.0} ms, the rest of the fingerprinter {:.0} ms",
        jieba_start * 1e3,
        fold_start * 1e3,
        rest_start * 1e3
    );
    println!("| what | threads | MB/s | MB/s per thread | docs/s | × bare jieba | too short |");
    println!("|---|---|---|---|---|---|---|");
    enum Work<'a> {
        Jieba,
        Sketch(Methods, &'a Fingerprinter),
        Fold,
    }
    let configs = [
        ("bare jieba-rs cut (HMM on)", Work::Jieba),
        ("simhash", Work::Sketch(Methods::only(Method::SimHash), &fp)),
        ("minhash", Work::Sketch(Methods::only(Method::MinHash), &fp)),
        ("both", Work::Sketch(Methods::BOTH, &fp)),
        ("both, --no-fold", Work::Sketch(Methods::BOTH, &unfolded)),
        ("folding alone (check + convert)", Work::Fold),
    ];
    for threads in [1, cores] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let mut baseline = None;
        let mut both = None;
        for (name, work) in &configs {
            let mut secs = Vec::with_capacity(args.runs);
            let mut too_short = 0;
            for _ in 0..args.runs {
                let t = Instant::now();
                too_short = pool.install(|| match work {
                    // The same fields, cut as they are: the segmentation alone.
                    Work::Jieba => docs
                        .par_iter()
                        .map(|b| match b {
                            Body::Fields(f) => f
                                .iter()
                                .map(|text| jieba.cut(text, true).len())
                                .sum::<usize>(),
                            Body::Tokens(t) => t.len(),
                        })
                        .filter(|&n| n == 0)
                        .count(),
                    Work::Sketch(m, fp) => docs
                        .par_iter()
                        .filter(|b| sketch_body(fp, *m, b).too_short().is_some())
                        .count(),
                    Work::Fold => docs
                        .par_iter()
                        .map(|b| match b {
                            Body::Fields(f) => f.iter().map(|text| folder.fold(text).len()).sum(),
                            Body::Tokens(_) => 0,
                        })
                        .filter(|&n: &usize| n == 0)
                        .count(),
                });
                secs.push(t.elapsed().as_secs_f64());
            }
            secs.sort_by(f64::total_cmp);
            let median = secs[secs.len() / 2];
            let base = *baseline.get_or_insert(median);
            if *name == "both" {
                both = Some(median);
            }
            let mbs = bytes as f64 / 1e6 / median;
            println!(
                "| {name} | {threads} | {mbs:.1} | {:.1} | {:.0} | {:.2} | {too_short} |",
                mbs / threads as f64,
                docs.len() as f64 / median,
                base / median,
            );
        }
        if let (Some(base), Some(both)) = (baseline, both) {
            let start = jieba_start + fold_start + rest_start;
            println!(
                "{threads} thread(s), start-up included: both {:.2} × bare jieba-rs ({:.2} s against {:.2} s)",
                (jieba_start + base) / (start + both),
                start + both,
                jieba_start + base
            );
        }
        if cores == 1 {
            break;
        }
    }
    Ok(Status::Done)
}

#[cfg(test)]
mod tests {
    /// clap checks argument names only when a command is parsed: every subcommand here.
    #[test]
    fn the_parser_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}

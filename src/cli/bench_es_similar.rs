//! `neardup bench es-similar`: `similar --id` latency on a large index, for the client- and
//! server-side filters and `short` vs `keyword` blocks.
//!
//! Loads the fingerprints (real articles' first, random ones up to `--docs`; only the
//! fingerprint fields and an id) into one fresh index per block type, then runs the same
//! `Similar::by_id` lookups (the library call `neardup similar --id` makes) against every
//! configuration, interleaved so that load from the rest of the machine hits all alike.

use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use neardup::es::{self, BlockType, FieldNames, FilterMode, RetryPolicy, Similar, SimilarOptions};
use neardup::SimHash;

use super::bench_es::{load, real_fingerprints, Rng};
use super::common::{self, CmdResult, ProfileArgs, Status};
use super::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct EsSimilarBench {
    #[command(flatten)]
    es: EsArgs,
    /// Real articles whose fingerprints are loaded first (e.g. ../shared/data/zh_articles.jsonl.gz);
    /// the rest of --docs are random fingerprints.
    #[arg(long, short)]
    input: Option<String>,
    /// Documents per index.
    #[arg(long, default_value_t = 1_000_000)]
    docs: usize,
    /// Timed lookups per configuration (after --warmup untimed ones).
    #[arg(long, default_value_t = 2_000)]
    queries: usize,
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Largest distance looked for.
    #[arg(short = 'k', long = "max-distance", default_value_t = 3)]
    k: u32,
    /// Block types to compare (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "short,keyword")]
    block_types: Vec<BlockType>,
    /// Use the indices of a previous run (`--keep`) when they hold --docs documents, instead
    /// of loading them again.
    #[arg(long)]
    reuse: bool,
    /// Keep the indices afterwards (named neardup-bench-similar-{short,keyword}).
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    profile: ProfileArgs,
}

pub fn run(args: EsSimilarBench) -> CmdResult {
    common::ensure_usage(
        args.docs > 0 && args.queries > 0,
        "--docs and --queries must be positive",
    )?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let version = es::server_version(&client, &retry).await?;
        let names = FieldNames::default();
        let mut indices = Vec::new();
        let mut real = None;
        for bt in &args.block_types {
            let index = format!("neardup-bench-similar-{bt}");
            if !(args.reuse && doc_count(&client, &index).await? == Some(args.docs as u64)) {
                let fps = fingerprints(&args, &mut real)?;
                load(&client, &retry, &index, *bt, &names, &fps, true).await?;
            }
            indices.push((*bt, index));
        }
        println!(
            "Elasticsearch {version} at {}; {} documents per index{}; {} timed lookups per configuration after {} warm-up; k = {}; 1 shard, 0 replicas, 1 segment",
            config.display_urls(),
            args.docs,
            real.map(|r| format!(" ({r} real fingerprints, the rest random)")).unwrap_or_default(),
            args.queries,
            args.warmup,
            args.k
        );

        let mut configs = Vec::new();
        for (bt, index) in &indices {
            for filter in [FilterMode::Client, FilterMode::Server] {
                let options = SimilarOptions {
                    filter,
                    ..SimilarOptions::default()
                };
                let similar = Similar::with_options(
                    client.clone(),
                    args.profile.fingerprinter(),
                    options,
                    RetryPolicy::none(),
                );
                configs.push((*bt, filter, index.clone(), similar));
            }
        }
        let mut rng = Rng(7);
        let ids: Vec<String> = (0..args.warmup + args.queries)
            .map(|_| (rng.next() % args.docs as u64).to_string())
            .collect();
        let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
        let mut transferred = vec![0u64; configs.len()];
        let mut matches = vec![0u64; configs.len()];
        for (n, id) in ids.iter().enumerate() {
            for c in 0..configs.len() {
                let c = (c + n) % configs.len();
                let (_, _, index, similar) = &configs[c];
                let t = Instant::now();
                let found = similar.by_id(index.as_str(), id, args.k).await?;
                let elapsed = t.elapsed();
                if n >= args.warmup {
                    lat[c].push(elapsed);
                    transferred[c] += found.transferred;
                    matches[c] += found.matches.len() as u64;
                }
            }
        }
        println!();
        println!("| blocks | filter | median ms | p99 ms | queries/s | candidates transferred per query | matches per query |");
        println!("|---|---|---|---|---|---|---|");
        for (c, (bt, filter, _, _)) in configs.iter().enumerate() {
            let l = &mut lat[c];
            l.sort();
            let pct = |p: f64| l[((l.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
            let total: Duration = l.iter().sum();
            println!(
                "| {bt} | {filter} | {:.2} | {:.2} | {:.0} | {:.1} | {:.2} |",
                pct(0.5),
                pct(0.99),
                l.len() as f64 / total.as_secs_f64(),
                transferred[c] as f64 / l.len() as f64,
                matches[c] as f64 / l.len() as f64,
            );
        }
        if !args.keep {
            for (_, index) in &indices {
                es::request(&client, &retry, "delete bench index", Method::Delete, &format!("/{index}"), &[], None).await?;
            }
        }
        Ok(Status::Done)
    })
}

/// The fingerprints to load: the real ones first, then random ones up to `--docs`.
/// `real` receives how many are real.
fn fingerprints(args: &EsSimilarBench, real: &mut Option<usize>) -> anyhow::Result<Vec<SimHash>> {
    let mut fps = real_fingerprints(args.input.as_deref(), args.docs, &args.profile)?;
    fps.truncate(args.docs);
    *real = Some(fps.len());
    let mut rng = Rng(42);
    while fps.len() < args.docs {
        fps.push(SimHash(rng.next()));
    }
    Ok(fps)
}

/// Documents in `index`, or `None` when it does not exist.
async fn doc_count(
    client: &elasticsearch::Elasticsearch,
    index: &str,
) -> anyhow::Result<Option<u64>> {
    let r = es::send(client, Method::Get, &format!("/{index}/_count"), &[], None).await?;
    if r.status.as_u16() == 404 {
        return Ok(None);
    }
    Ok(r.body["count"].as_u64())
}

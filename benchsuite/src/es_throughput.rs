//! `neardup-bench es-throughput`: `similar --id` from many callers at once, through the
//! library (`Similar::by_id`, what an embedding Rust service calls), on an index that exists
//! (e.g. the one `bench es-similar --keep` leaves).
//!
//! It samples ids from the index itself (a seeded `random_score` query, so the same seed
//! picks the same ids) and can write them to a file: `scripts/bench-serve` replays that file
//! through `neardup serve` with a real HTTP load generator (wrk) at the same concurrency, so
//! the two figures differ only by the service.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use elasticsearch::http::Method as Http;
use neardup::es::{self, Body, RetryPolicy, Similar};
use neardup::minhash::Threshold;
use neardup::Tolerance;
use serde_json::json;

use crate::es_similar::{describe, percentile};
use neardup::cli::common::{self, CmdResult, Status};
use neardup::cli::es_args::{self, parse_duration, EsArgs};

#[derive(clap::Args, Debug)]
pub struct EsThroughputBench {
    #[command(flatten)]
    es: EsArgs,
    /// The index to look up in.
    #[arg(
        long,
        default_value = "neardup-bench-similar-both",
        value_name = "NAME"
    )]
    index: String,
    /// Lookups in flight at once.
    #[arg(long, default_value_t = 16, value_name = "N")]
    concurrency: usize,
    /// How long to measure (after --warmup).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    duration: Duration,
    /// Lookups before the measurement, not counted.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    warmup: Duration,
    /// Ids sampled from the index; the callers take them in turn, over and over.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    ids: usize,
    /// Seed of the sample.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Also write the sampled ids to this file, one per line (for scripts/bench-serve).
    #[arg(long, value_name = "FILE")]
    write_ids: Option<std::path::PathBuf>,
    /// MinHash threshold (default: the index's own method at its default).
    #[arg(long, conflicts_with = "k", value_parser = common::parse_threshold)]
    threshold: Option<Threshold>,
    /// SimHash distance (default: the index's own method at its default).
    #[arg(short = 'k', long = "max-distance")]
    k: Option<u32>,
}

pub fn run(args: EsThroughputBench) -> CmdResult {
    common::ensure_usage(
        args.concurrency > 0 && args.ids > 0 && !args.duration.is_zero(),
        "--concurrency, --ids and --duration must be positive",
    )?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let ids = sample_ids(&client, &args.index, args.ids, args.seed).await?;
        if let Some(path) = &args.write_ids {
            std::fs::write(path, ids.join("\n") + "\n")
                .with_context(|| format!("cannot write the ids to {}", path.display()))?;
        }
        let similar = Arc::new(Similar::with_options(
            client.clone(),
            None,
            Default::default(),
            RetryPolicy::none(),
        ));
        let tolerance = match Tolerance::asked(args.k, args.threshold)? {
            Some(t) => t,
            None => similar.default_tolerance(args.index.as_str()).await?,
        };
        let ids = Arc::new(ids);
        let next = Arc::new(AtomicUsize::new(0));
        let run_for = |d: Duration| {
            let (similar, ids, next, index) =
                (similar.clone(), ids.clone(), next.clone(), args.index.clone());
            async move {
                let end = Instant::now() + d;
                let mut tasks = Vec::new();
                for _ in 0..args.concurrency {
                    let (similar, ids, next, index) =
                        (similar.clone(), ids.clone(), next.clone(), index.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut timed = Vec::new();
                        let mut errors = 0u64;
                        while Instant::now() < end {
                            let id = &ids[next.fetch_add(1, Ordering::Relaxed) % ids.len()];
                            let t = Instant::now();
                            match similar.by_id(index.as_str(), id, tolerance).await {
                                Ok(_) => timed.push(t.elapsed()),
                                Err(_) => errors += 1,
                            }
                        }
                        (timed, errors)
                    }));
                }
                let started = Instant::now();
                let mut all = Vec::new();
                let mut errors = 0;
                for t in tasks {
                    let (timed, e) = t.await.expect("a lookup task");
                    all.extend(timed);
                    errors += e;
                }
                (all, errors, started.elapsed())
            }
        };
        run_for(args.warmup).await;
        let cpu_before = process_cpu();
        let (mut lat, errors, elapsed) = run_for(args.duration).await;
        let cpu = process_cpu().zip(cpu_before).map(|(after, before)| after - before);
        anyhow::ensure!(!lat.is_empty(), "no lookup finished within --duration");
        lat.sort_unstable();
        let ms = |q| percentile(&lat, q).as_secs_f64() * 1e3;
        println!(
            "Elasticsearch {version} at {}, index {}, {} ids (seed {}), {}, {} callers, {:.0} s after {:.0} s warm-up",
            config.display_urls(),
            args.index,
            ids.len(),
            args.seed,
            describe(tolerance),
            args.concurrency,
            args.duration.as_secs_f64(),
            args.warmup.as_secs_f64(),
        );
        println!("| path | lookups | errors | lookups/s | p50 ms | p90 ms | p99 ms | CPU ms per lookup |");
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| library (Similar::by_id) | {} | {errors} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            lat.len(),
            lat.len() as f64 / elapsed.as_secs_f64(),
            ms(0.5),
            ms(0.9),
            ms(0.99),
            cpu.map_or("n/a".to_owned(), |c| format!(
                "{:.3}",
                c.as_secs_f64() * 1e3 / lat.len() as f64
            )),
        );
        Ok(Status::Done)
    })
}

/// CPU time (user + system) this process has used so far, from `/proc/self/stat` (Linux;
/// `None` elsewhere). Fields 14 and 15 count in the kernel's USER_HZ, 100 per second.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// `n` ids of `index`, picked by a seeded `random_score` (the same seed, the same ids).
async fn sample_ids(
    client: &elasticsearch::Elasticsearch,
    index: &str,
    n: usize,
    seed: u64,
) -> anyhow::Result<Vec<String>> {
    let body = json!({
        "size": n,
        "_source": false,
        "query": { "function_score": {
            "query": { "match_all": {} },
            "random_score": { "seed": seed, "field": "_seq_no" },
        }},
    });
    let size = n.to_string();
    let reply = es::request(
        client,
        &RetryPolicy::default(),
        "sample ids",
        Http::Post,
        &format!("/{index}/_search"),
        &[("size", size.as_str())],
        Some(&Body::Json(body)),
    )
    .await?;
    let ids: Vec<String> = reply["hits"]["hits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["_id"].as_str().map(str::to_owned))
        .collect();
    anyhow::ensure!(
        !ids.is_empty(),
        "index `{index}` holds no documents to look up"
    );
    Ok(ids)
}

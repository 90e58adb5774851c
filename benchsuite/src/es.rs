//! `neardup-bench es-terms`: are `keyword` blocks faster than `short` ones for the block
//! `term` queries? Loads the same fingerprints into two fresh indices that differ only in the
//! block type, then times the same queries against both, interleaved.

use std::time::{Duration, Instant};

use anyhow::Context;
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, BlockType, Body, FieldNames, RetryPolicy};
use neardup::input::{self, InputSpec, Lines};
use neardup::pipeline::fingerprint_body;
use neardup::SimHash;
use rayon::prelude::*;
use serde_json::{json, Value};

use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
pub struct EsTermsBench {
    #[command(flatten)]
    es: EsArgs,
    /// Real articles whose fingerprints are loaded first (e.g. ../shared/data/zh_articles.jsonl.gz);
    /// the rest of --docs are random fingerprints.
    #[arg(long, short)]
    input: Option<String>,
    /// Fingerprints per index.
    #[arg(long, default_value_t = 300_000)]
    docs: usize,
    /// Timed queries per index and query shape.
    #[arg(long, default_value_t = 2_000)]
    queries: usize,
    /// Keep the two indices afterwards (named neardup-bench-{short,keyword}).
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// SplitMix64: reproducible random fingerprints without another dependency.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

pub fn run(args: EsTermsBench) -> CmdResult {
    common::ensure_usage(
        args.docs > 0 && args.queries > 0,
        "--docs and --queries must be positive",
    )?;
    let mut fps = real_fingerprints(args.input.as_deref(), args.docs, &args.profile)?;
    let real = fps.len().min(args.docs);
    fps.truncate(args.docs);
    let mut rng = Rng(42);
    while fps.len() < args.docs {
        fps.push(SimHash(rng.next()));
    }
    // Query fingerprints: stored ones with 0–3 bits flipped (near duplicates, as the query
    // path sees them), spread over the whole set.
    let queries: Vec<SimHash> = (0..args.queries)
        .map(|_| {
            let mut q = fps[(rng.next() % fps.len() as u64) as usize].0;
            for _ in 0..rng.next() % 4 {
                q ^= 1 << (rng.next() % 64);
            }
            SimHash(q)
        })
        .collect();

    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async {
        let retry = RetryPolicy::default();
        let version = es::server_version(&client, &retry).await?;
        println!(
            "Elasticsearch {version} at {}; {} fingerprints per index ({real} from real articles, {} random); {} queries per shape; 1 shard, 0 replicas, force-merged to 1 segment",
            config.display_urls(),
            fps.len(),
            fps.len() - real,
            queries.len()
        );
        let names = FieldNames::default();
        let mut indices = Vec::new();
        for bt in BlockType::ALL {
            let index = format!("neardup-bench-{bt}");
            load(&client, &retry, &index, bt, &names, &fps).await?;
            indices.push((bt, index));
        }
        let shapes = ["one block term", "four-block bool should"];
        println!();
        println!("| blocks | query | median µs | p99 µs | mean hits | index size MB |");
        println!("|---|---|---|---|---|---|");
        for (shape_no, shape) in shapes.iter().enumerate() {
            let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); indices.len()];
            let mut hits = vec![0u64; indices.len()];
            // Warm-up, then interleave the indices so drift hits both alike.
            for q in queries.iter().take(200) {
                for (_, index) in &indices {
                    search(&client, index, &names, *q, shape_no).await?;
                }
            }
            for (n, q) in queries.iter().enumerate() {
                for k in 0..indices.len() {
                    let k = (k + n) % indices.len();
                    let t = Instant::now();
                    hits[k] += search(&client, &indices[k].1, &names, *q, shape_no).await?;
                    lat[k].push(t.elapsed());
                }
            }
            for (k, (bt, index)) in indices.iter().enumerate() {
                lat[k].sort();
                let pct = |p: f64| lat[k][((lat[k].len() - 1) as f64 * p) as usize].as_micros();
                println!(
                    "| {bt} | {shape} | {} | {} | {:.1} | {:.1} |",
                    pct(0.5),
                    pct(0.99),
                    hits[k] as f64 / queries.len() as f64,
                    store_bytes(&client, index).await? as f64 / 1e6
                );
            }
        }
        if !args.keep {
            for (_, index) in &indices {
                es::request(&client, &retry, "delete bench index", Method::Delete, &format!("/{index}"), &[], None).await?;
            }
        }
        Ok(Status::Done)
    })
}

/// Fingerprints of up to `docs` articles of `input` (none without it).
fn real_fingerprints(
    input: Option<&str>,
    docs: usize,
    profile: &ProfileArgs,
) -> anyhow::Result<Vec<SimHash>> {
    let Some(path) = input else {
        return Ok(Vec::new());
    };
    let spec = InputSpec::default();
    let source = input::open(path)?;
    let mut bodies = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        bodies.push(
            input::parse_line(&raw, &spec)
                .with_context(|| format!("{path}:{line}"))?
                .body,
        );
        if bodies.len() >= docs {
            break;
        }
    }
    let fp = profile.fingerprinter()?;
    Ok(bodies
        .par_iter()
        .filter_map(|b| fingerprint_body(&fp, b).ok().map(|f| f.simhash))
        .collect())
}

/// Loads `fps` into a fresh `index` (1 shard, 0 replicas), refreshes and force-merges it to
/// one segment.
async fn load(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    bt: BlockType,
    names: &FieldNames,
    fps: &[SimHash],
) -> anyhow::Result<()> {
    let _ = es::send(client, Method::Delete, &format!("/{index}"), &[], None).await?;
    let body = json!({
        "settings": { "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1" },
        "mappings": names.mapping(bt),
    });
    es::request(
        client,
        retry,
        "create bench index",
        Method::Put,
        &format!("/{index}"),
        &[],
        Some(&Body::Json(body)),
    )
    .await?;
    let started = Instant::now();
    for chunk in fps.chunks(5_000) {
        let mut nd = String::with_capacity(chunk.len() * 140);
        for f in chunk {
            let [a, b, c, d] = f.blocks16();
            nd.push_str("{\"index\":{}}\n");
            nd.push_str(
                &json!({ &names.blocks[0]: a, &names.blocks[1]: b, &names.blocks[2]: c, &names.blocks[3]: d, &names.simhash: f.as_i64() })
                    .to_string(),
            );
            nd.push('\n');
        }
        let r = es::request(
            client,
            retry,
            "bench bulk load",
            Method::Post,
            &format!("/{index}/_bulk"),
            &[],
            Some(&Body::NdJson(nd)),
        )
        .await?;
        anyhow::ensure!(
            r["errors"] == false,
            "bulk load into {index} failed: {}",
            r["items"][0]
        );
    }
    refresh(client, retry, index).await?;
    es::request(
        client,
        retry,
        "force merge",
        Method::Post,
        &format!("/{index}/_forcemerge"),
        &[("max_num_segments", "1")],
        None,
    )
    .await?;
    eprintln!(
        "loaded {} fingerprints into {index} ({bt} blocks) in {:.1} s",
        fps.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One query; returns the number of hits (exact: track_total_hits).
async fn search(
    client: &Elasticsearch,
    index: &str,
    names: &FieldNames,
    q: SimHash,
    shape: usize,
) -> anyhow::Result<u64> {
    let blocks = q.blocks16();
    let filter = if shape == 0 {
        json!({ "term": { &names.blocks[0]: blocks[0] } })
    } else {
        let should: Vec<Value> = names
            .blocks
            .iter()
            .zip(blocks)
            .map(|(f, b)| json!({ "term": { f: b } }))
            .collect();
        json!({ "bool": { "should": should, "minimum_should_match": 1 } })
    };
    let body = json!({
        "size": 100,
        "track_total_hits": true,
        "_source": false,
        "docvalue_fields": [&names.simhash],
        "query": { "bool": { "filter": filter } },
    });
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "bench search",
        Method::Post,
        &format!("/{index}/_search"),
        &[("request_cache", "false")],
        Some(&Body::Json(body)),
    )
    .await?;
    Ok(r["hits"]["total"]["value"].as_u64().unwrap_or(0))
}

/// On-disk size of an index's primary shards.
async fn store_bytes(client: &Elasticsearch, index: &str) -> anyhow::Result<u64> {
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "index stats",
        Method::Get,
        &format!("/{index}/_stats/store"),
        &[],
        None,
    )
    .await?;
    Ok(r["_all"]["primaries"]["store"]["size_in_bytes"]
        .as_u64()
        .unwrap_or(0))
}

/// Makes what was written to `index` searchable (`_refresh`).
pub(super) async fn refresh(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
) -> anyhow::Result<()> {
    es::request(
        client,
        retry,
        "refresh",
        Method::Post,
        &format!("/{}/_refresh", es::path_segment(index)),
        &[],
        None,
    )
    .await?;
    Ok(())
}

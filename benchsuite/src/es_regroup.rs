//! `neardup-bench es-regroup`: what `neardup regroup` costs as an index grows — wall time,
//! the process's peak RSS (it must stay flat: the union-find lives in the work file), the
//! work file's size, and the cluster's CPU time — over indices of the corpus plus synthetic
//! articles made of its sentences (the documents of `es-similar`), fingerprinted with both
//! methods and groups recorded but not yet labelled (an index whose groups are turned on
//! after its articles were fingerprinted: every label is written).
//!
//! Each run is the real command line (`neardup regroup`, beside this binary), timed, its
//! memory sampled every 100 ms from `/proc`.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method as Http;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, BlockType, FieldNames, GroupMeta, IndexMeta, MinHashFieldNames, RetryPolicy,
};
use neardup::eval::synth::Synthesizer;
use neardup::Methods;
use serde_json::Value;

use super::es_similar::{holds, load_from, Documents, Target};
use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:
  neardup-bench es-regroup --es http://127.0.0.1:9200 -i ../shared/data/zh_articles.jsonl.gz --docs 100000,200000,400000")]
pub struct EsRegroupBench {
    #[command(flatten)]
    es: EsArgs,
    /// The corpus (e.g. ../shared/data/zh_articles.jsonl.gz): its articles come first, and
    /// the synthetic ones are made of its sentences.
    #[arg(long, short)]
    input: String,
    /// Index sizes to regroup, one index each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "100000,200000")]
    docs: Vec<usize>,
    /// Seed of the synthetic articles.
    #[arg(long, default_value_t = 20240601)]
    seed: u64,
    /// Indices are named PREFIX-N.
    #[arg(long, default_value = "neardup-bench-regroup", value_name = "PREFIX")]
    index_prefix: String,
    /// Use an index of a previous run (`--keep`) holding N documents; its labels are
    /// removed before the run.
    #[arg(long)]
    reuse: bool,
    /// Keep the indices afterwards.
    #[arg(long)]
    keep: bool,
    /// `similar` searches in flight (`neardup regroup --searches`).
    #[arg(long, default_value_t = 8)]
    searches: usize,
    /// How regroup links (`neardup regroup --linking`): `join`, `search`, or both
    /// (`join,search`), each run on the same index in turn, its labels removed before.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "join")]
    linking: Vec<LinkingArg>,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// `neardup regroup --linking`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LinkingArg {
    Join,
    Search,
}

impl LinkingArg {
    fn name(self) -> &'static str {
        match self {
            LinkingArg::Join => "join",
            LinkingArg::Search => "search",
        }
    }
}

pub fn run(args: EsRegroupBench) -> CmdResult {
    common::ensure_usage(
        !args.docs.is_empty() && args.docs.iter().all(|&n| n > 0),
        "--docs must be positive sizes",
    )?;
    let url = args
        .es
        .url
        .clone()
        .context("--es (or NEARDUP_ES_URL) is required")?;
    let neardup = std::env::current_exe()?
        .parent()
        .context("this binary's directory")?
        .join("neardup");
    anyhow::ensure!(
        neardup.exists(),
        "{} not found: build it with `cargo build --release -p neardup`",
        neardup.display()
    );
    let real = neardup::cli::eval::read_articles(&args.input)?;
    let synth = Synthesizer::new(&real, args.seed)
        .with_context(|| format!("{}: no article to build synthetic ones from", args.input))?;
    let docs = Documents { real, synth };
    let fp = args.profile.fingerprinter()?;
    let meta = IndexMeta {
        group: Some(GroupMeta::default()),
        ..IndexMeta::new(
            fp.config(),
            Methods::BOTH,
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        )
    };
    let (es_config, client) = args.es.client()?;
    let rt = es_args::runtime()?;
    let retry = RetryPolicy::default();
    let version = rt.block_on(es::server_version(&client, &retry))?;
    let work = std::env::temp_dir().join(format!("neardup-bench-regroup-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let load_avg = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut rows = Vec::new();
    for &n in &args.docs {
        let target = Target {
            index: format!("{}-{n}", args.index_prefix),
            meta: meta.clone(),
            texts: false,
        };
        let reused = args.reuse && rt.block_on(holds(&client, &retry, &target, &fp, n))?;
        if !reused {
            load_from(
                &rt,
                &client,
                &retry,
                std::slice::from_ref(&target),
                &docs,
                &fp,
                0..n,
            )?;
        }
        for (run, linking) in args.linking.iter().map(|l| l.name()).enumerate() {
            if reused || run > 0 {
                rt.block_on(unlabel(&client, &retry, &target.index))?;
            }
            let state = work.join(format!("state-{n}-{linking}.redb"));
            let report_path = work.join(format!("report-{n}-{linking}.json"));
            let cpu_before = rt.block_on(cluster_cpu_ms(&client, &retry))?;
            let loadavg_before = load_avg();
            let started = Instant::now();
            let mut child = Command::new(&neardup)
                .args(["regroup", "--index", &target.index, "--quiet", "--searches"])
                .arg(args.searches.to_string())
                .args(["--linking", linking, "--state"])
                .arg(&state)
                .arg("--report-json")
                .arg(&report_path)
                .env("NEARDUP_ES_URL", &url)
                .stderr(Stdio::piped())
                .spawn()
                .context("running neardup regroup")?;
            // Peak memory, sampled: the process's own (anonymous) pages, and all its
            // resident pages (with the join's memory-mapped files, which the page cache can
            // take back).
            let (mut anon_kb, mut rss_kb) = (0u64, 0u64);
            let status = loop {
                if let Some(status) = child.try_wait()? {
                    break status;
                }
                let s = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
                    .unwrap_or_default();
                let kb = |key: &str| -> u64 {
                    s.lines()
                        .find_map(|l| {
                            l.strip_prefix(key)?
                                .trim()
                                .strip_suffix(" kB")?
                                .parse()
                                .ok()
                        })
                        .unwrap_or(0)
                };
                anon_kb = anon_kb.max(kb("RssAnon:"));
                rss_kb = rss_kb.max(kb("VmRSS:"));
                std::thread::sleep(std::time::Duration::from_millis(100));
            };
            let took = started.elapsed().as_secs_f64();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut stderr)?;
            }
            anyhow::ensure!(status.success(), "neardup regroup failed: {stderr}");
            let cpu_after = rt.block_on(cluster_cpu_ms(&client, &retry))?;
            let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path)?)?;
            let state_bytes = std::fs::metadata(&state).map(|m| m.len()).unwrap_or(0);
            println!("{stderr}");
            println!(
                "load average before: {}, after: {}",
                loadavg_before.trim(),
                load_avg().trim()
            );
            rows.push(Row {
                n,
                linking,
                took,
                anon_kb,
                rss_kb,
                state_bytes,
                cpu_s: (cpu_after - cpu_before) as f64 / 1000.0,
                report,
            });
        }
        if !args.keep {
            rt.block_on(es::request(
                &client,
                &retry,
                "delete bench index",
                Http::Delete,
                &format!("/{}", es::path_segment(&target.index)),
                &[],
                None,
            ))?;
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    println!();
    println!(
        "Elasticsearch {version} at {}; `neardup regroup` (release build, {} searches in flight) on indices of the corpus plus synthetic articles, both methods, no label yet",
        es_config.display_urls(),
        args.searches
    );
    println!("| articles | linking | time | articles/s | peak memory (own) | peak RSS (with mapped files) | work file | join files | cluster CPU | labels written | groups of 2+ | largest |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.0} s | {:.0} | {:.0} MB | {:.0} MB | {:.0} MB ({:.0} B/article) | {:.0} MB ({:.0} B/article) | {:.0} s | {} | {} | {} |",
            r.n,
            r.linking,
            r.took,
            r.n as f64 / r.took,
            r.anon_kb as f64 / 1024.0,
            r.rss_kb as f64 / 1024.0,
            r.state_bytes as f64 / 1e6,
            r.state_bytes as f64 / r.n as f64,
            r.report["join_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            r.report["join_bytes"].as_f64().unwrap_or(0.0) / r.n as f64,
            r.cpu_s,
            r.report["written"],
            r.report["shared_groups"],
            r.report["largest_group"],
        );
    }
    Ok(Status::Done)
}

/// One regroup measured.
struct Row {
    n: usize,
    linking: &'static str,
    took: f64,
    anon_kb: u64,
    rss_kb: u64,
    state_bytes: u64,
    cpu_s: f64,
    report: Value,
}

/// Removes every label, as before groups were turned on.
async fn unlabel(client: &Elasticsearch, retry: &RetryPolicy, index: &str) -> anyhow::Result<()> {
    // The last run's labels searchable first: an update by query that meets a version its
    // search did not see skips it (`conflicts: proceed`), and the label would stay.
    super::es::refresh(client, retry, index).await?;
    es::request(
        client,
        retry,
        "remove labels",
        Http::Post,
        &format!("/{}/_update_by_query", es::path_segment(index)),
        &[
            ("refresh", "true"),
            ("conflicts", "proceed"),
            ("timeout", "30m"),
        ],
        Some(&es::Body::Json(serde_json::json!({
            "query": { "exists": { "field": "nearDupGroup" } },
            "script": { "source": "ctx._source.remove('nearDupGroup')" }
        }))),
    )
    .await?;
    Ok(())
}

/// The cluster's process CPU time so far, summed over its nodes (ms).
async fn cluster_cpu_ms(client: &Elasticsearch, retry: &RetryPolicy) -> anyhow::Result<u64> {
    let r = es::request(
        client,
        retry,
        "node stats",
        Http::Get,
        "/_nodes/stats/process",
        &[],
        None,
    )
    .await?;
    Ok(r["nodes"]
        .as_object()
        .map(|nodes| {
            nodes
                .values()
                .filter_map(|n| n["process"]["cpu"]["total_in_millis"].as_u64())
                .sum()
        })
        .unwrap_or(0))
}

//! `neardup-bench serve-writes`: how fast articles are written through `neardup serve`,
//! beside direct single-document Elasticsearch PUTs of the same articles at the same
//! concurrency, each mode on a fresh index `es-init` made (so every mode writes the same
//! mapping).
//!
//! Modes: `direct` (`PUT /{index}/_doc/{id}` of the article alone, what an application does
//! without neardup), `put` (`PUT /v1/{index}/articles/{id}`) and `dedupe` (the same with
//! `?dedupe=true`; near-duplicates of earlier articles are answered 409, which counts as
//! answered); and in batches of `--batch`: `direct-bulk` (Elasticsearch's `_bulk`), `bulk`
//! (`POST /v1/{index}/articles/_bulk`) and `bulk-dedupe`. Rates count articles; latencies are
//! per request. The service is the real binary (`--neardup`, by default the `neardup` beside
//! this benchmark), started once, as it runs in production.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use elasticsearch::http::Method as Http;
use neardup::cli::common::{self, CmdResult, Status};
use neardup::cli::es_args::{self, EsArgs};
use neardup::es::{self, Body, EsConfig, IndexMeta, RetryPolicy};
use neardup::input::{self, Lines};
use serde_json::Value;

use crate::es_similar::percentile;

#[derive(clap::Args, Debug)]
pub struct ServeWritesBench {
    #[command(flatten)]
    es: EsArgs,
    /// Corpus of JSON Lines articles with an `id` (`.gz` is fine).
    #[arg(long, short)]
    input: String,
    /// Articles written per mode (the corpus's first).
    #[arg(long, default_value_t = 2000, value_name = "N")]
    docs: usize,
    /// Writes in flight at once.
    #[arg(long, default_value_t = 16, value_name = "N")]
    concurrency: usize,
    /// Modes, in the order run (each round runs them all).
    #[arg(long, value_delimiter = ',', default_values = ["direct", "put", "dedupe"])]
    modes: Vec<Mode>,
    /// Articles per request of the bulk modes.
    #[arg(long, default_value_t = 100, value_name = "N")]
    batch: usize,
    /// Rounds; medians over rounds are reported when more than one.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// The `neardup` binary to serve with (default: the one beside this benchmark).
    #[arg(long, value_name = "PATH")]
    neardup: Option<std::path::PathBuf>,
    /// Indices keep no duplicate groups (`es-init --no-groups`): writes skip labelling.
    #[arg(long)]
    no_groups: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Direct,
    Put,
    Dedupe,
    DirectBulk,
    Bulk,
    BulkDedupe,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct Elasticsearch PUT",
            Mode::Put => "service PUT",
            Mode::Dedupe => "service PUT ?dedupe=true",
            Mode::DirectBulk => "direct Elasticsearch _bulk",
            Mode::Bulk => "service _bulk",
            Mode::BulkDedupe => "service _bulk ?dedupe=true",
        }
    }

    fn is_bulk(self) -> bool {
        matches!(self, Mode::DirectBulk | Mode::Bulk | Mode::BulkDedupe)
    }

    fn is_direct(self) -> bool {
        matches!(self, Mode::Direct | Mode::DirectBulk)
    }
}

/// One mode's run.
struct Run {
    mode: Mode,
    rate: f64,
    p50: f64,
    p99: f64,
    /// Answers by status.
    statuses: std::collections::BTreeMap<u16, usize>,
}

/// The service process, stopped when dropped.
pub(crate) struct Served(Child);

impl Served {
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: ServeWritesBench) -> CmdResult {
    common::ensure_usage(
        args.concurrency > 0 && args.docs > 0 && args.rounds > 0 && args.batch > 0,
        "--docs, --concurrency, --rounds and --batch must be positive",
    )?;
    let articles = Arc::new(read_articles(&args.input, args.docs)?);
    let (config, client) = args.es.client()?;
    let bin = match &args.neardup {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("neardup"),
    };
    let (served, url) = serve(&bin, &args.es, "60s")?;
    es_args::runtime()?.block_on(async {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let service = EsConfig::new(&url)?.client()?;
        let mut runs: Vec<Run> = Vec::new();
        for round in 0..args.rounds {
            for &mode in &args.modes {
                let index = format!("neardup-bench-writes-{round}-{}", mode_slug(mode));
                fresh_index(&client, &index, !args.no_groups).await?;
                let target = if mode.is_direct() { &client } else { &service };
                let r = write_all(target, &index, &articles, mode, args.concurrency, args.batch)
                    .await?;
                eprintln!(
                    "round {}: {}: {:.0} articles/s, p50 {:.1} ms, p99 {:.1} ms, {:?}",
                    round + 1,
                    mode.name(),
                    r.rate,
                    r.p50,
                    r.p99,
                    r.statuses
                );
                runs.push(r);
                drop_index(&client, &index).await;
            }
        }
        drop(served);
        println!(
            "Elasticsearch {version} at {}, {} articles of {}, concurrency {}, {} round(s) (medians)",
            config.display_urls(),
            articles.len(),
            args.input,
            args.concurrency,
            args.rounds
        );
        println!("| mode | articles/s | × direct | p50 ms | p99 ms | answers |");
        println!("|---|---|---|---|---|---|");
        for &mode in &args.modes {
            let baseline = if mode.is_bulk() { Mode::DirectBulk } else { Mode::Direct };
            let direct = median_of(&runs, baseline, |r| r.rate);
            let rate = median_of(&runs, mode, |r| r.rate).unwrap_or(0.0);
            let statuses = runs
                .iter()
                .rev()
                .find(|r| r.mode == mode)
                .map(|r| format!("{:?}", r.statuses))
                .unwrap_or_default();
            println!(
                "| {} | {:.0} | {} | {:.1} | {:.1} | {} |",
                mode.name(),
                rate,
                direct.map_or("–".into(), |d| format!("{:.2}", rate / d)),
                median_of(&runs, mode, |r| r.p50).unwrap_or(0.0),
                median_of(&runs, mode, |r| r.p99).unwrap_or(0.0),
                statuses
            );
        }
        Ok(Status::Done)
    })
}

fn mode_slug(mode: Mode) -> &'static str {
    match mode {
        Mode::Direct => "direct",
        Mode::Put => "put",
        Mode::Dedupe => "dedupe",
        Mode::DirectBulk => "direct-bulk",
        Mode::Bulk => "bulk",
        Mode::BulkDedupe => "bulk-dedupe",
    }
}

fn median_of(runs: &[Run], mode: Mode, f: impl Fn(&Run) -> f64) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter(|r| r.mode == mode).map(f).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The first `n` articles of the corpus as `(id, article without its id)`.
fn read_articles(path: &str, n: usize) -> anyhow::Result<Vec<(String, String)>> {
    let source = input::open(path)?;
    let mut out = Vec::with_capacity(n);
    for (line, raw) in Lines::new(source.reader) {
        if out.len() == n {
            break;
        }
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        let mut v: Value =
            serde_json::from_slice(&raw).with_context(|| format!("{path}:{line}: not JSON"))?;
        let id = match v.as_object_mut().and_then(|o| o.remove("id")) {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => bail!("{path}:{line}: no `id`"),
        };
        out.push((id, v.to_string()));
    }
    Ok(out)
}

/// Starts `neardup serve` on a free port with request timeout `timeout` (`25s`); returns it
/// and its URL.
pub(crate) fn serve(
    bin: &std::path::Path,
    es: &EsArgs,
    timeout: &str,
) -> anyhow::Result<(Served, String)> {
    let mut cmd = Command::new(bin);
    let es_url = es.url.as_deref().context("--es URL is required")?;
    cmd.args(["--log-format", "json", "serve", "--es", es_url])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--max-concurrency",
            "1024",
            "--timeout",
            timeout,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Credentials reach the service as they reached us, never on its command line.
    for (var, v) in [
        ("NEARDUP_ES_USER", &es.user),
        ("NEARDUP_ES_PASSWORD", &es.password),
        ("NEARDUP_ES_API_KEY", &es.api_key),
    ] {
        if let Some(v) = v {
            cmd.env(var, v);
        }
    }
    if let Some(ca) = &es.ca_cert {
        cmd.arg("--es-ca-cert").arg(ca);
    }
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "cannot start {} (build it: cargo build --release)",
            bin.display()
        )
    })?;
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("piped")).lines();
    let served = Served(child);
    let first = lines.next().context("the service printed nothing")??;
    let v: Value = serde_json::from_str(&first).with_context(|| format!("service: {first}"))?;
    let addr = v["fields"]["listen"]
        .as_str()
        .with_context(|| format!("the service did not say where it listens: {first}"))?
        .to_owned();
    // Keep reading its log so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok((served, format!("http://{addr}")))
}

/// A fresh index as `es-init` makes it by default (with duplicate groups unless `groups` is
/// false).
async fn fresh_index(
    client: &elasticsearch::Elasticsearch,
    index: &str,
    groups: bool,
) -> anyhow::Result<()> {
    drop_index(client, index).await;
    let meta = IndexMeta {
        group: groups.then(es::GroupMeta::default),
        ..IndexMeta::default()
    };
    es::init_index(client, &RetryPolicy::default(), index, &meta).await?;
    Ok(())
}

async fn drop_index(client: &elasticsearch::Elasticsearch, index: &str) {
    let _ = es::send(client, Http::Delete, &format!("/{index}"), &[], None).await;
    let claims = format!("/{}", es::claims_index_name(index));
    let _ = es::send(client, Http::Delete, &claims, &[], None).await;
}

/// Writes every article with `concurrency` writers (one article per request, or `batch` in the
/// bulk modes) and times each answer.
async fn write_all(
    target: &elasticsearch::Elasticsearch,
    index: &str,
    articles: &Arc<Vec<(String, String)>>,
    mode: Mode,
    concurrency: usize,
    batch: usize,
) -> anyhow::Result<Run> {
    let per_request = if mode.is_bulk() { batch } else { 1 };
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (target, articles, next, index) = (
            target.clone(),
            articles.clone(),
            next.clone(),
            index.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut timed = Vec::new();
            let mut statuses = Vec::new();
            loop {
                let from = next.fetch_add(per_request, Ordering::Relaxed);
                if from >= articles.len() {
                    break;
                }
                let chunk = &articles[from..(from + per_request).min(articles.len())];
                let t = Instant::now();
                let answers = send_chunk(&target, &index, chunk, mode).await?;
                timed.push(t.elapsed());
                statuses.extend(answers);
            }
            anyhow::Ok((timed, statuses))
        }));
    }
    let mut lat: Vec<Duration> = Vec::new();
    let mut statuses = std::collections::BTreeMap::new();
    let mut written = 0;
    for t in tasks {
        let (timed, st) = t.await??;
        lat.extend(timed);
        for s in st {
            written += 1;
            *statuses.entry(s).or_insert(0) += 1;
        }
    }
    let elapsed = started.elapsed();
    lat.sort_unstable();
    let ms = |q| percentile(&lat, q).as_secs_f64() * 1e3;
    Ok(Run {
        mode,
        rate: written as f64 / elapsed.as_secs_f64(),
        p50: ms(0.5),
        p99: ms(0.99),
        statuses,
    })
}

/// One request for `chunk`; the status of each article.
async fn send_chunk(
    target: &elasticsearch::Elasticsearch,
    index: &str,
    chunk: &[(String, String)],
    mode: Mode,
) -> anyhow::Result<Vec<u16>> {
    let dedupe: &[(&str, &str)] = if matches!(mode, Mode::Dedupe | Mode::BulkDedupe) {
        &[("dedupe", "true")]
    } else {
        &[]
    };
    if !mode.is_bulk() {
        let (id, article) = &chunk[0];
        let path = match mode {
            Mode::Direct => format!("/{index}/_doc/{}", es::path_segment(id)),
            _ => format!("/v1/{index}/articles/{}", es::path_segment(id)),
        };
        let body: Value = serde_json::from_str(article).expect("read as JSON");
        let r = es::send(target, Http::Put, &path, dedupe, Some(&Body::Json(body))).await?;
        return Ok(vec![r.status.as_u16()]);
    }
    let mut lines = String::new();
    for (id, article) in chunk {
        if mode == Mode::DirectBulk {
            lines.push_str(&serde_json::json!({ "index": { "_id": id } }).to_string());
            lines.push('\n');
            lines.push_str(article);
        } else {
            let mut a: Value = serde_json::from_str(article).expect("read as JSON");
            a["id"] = Value::String(id.clone());
            lines.push_str(&a.to_string());
        }
        lines.push('\n');
    }
    let path = match mode {
        Mode::DirectBulk => format!("/{index}/_bulk"),
        _ => format!("/v1/{index}/articles/_bulk"),
    };
    let r = es::send(
        target,
        Http::Post,
        &path,
        dedupe,
        Some(&Body::NdJson(lines)),
    )
    .await?;
    anyhow::ensure!(
        r.status.is_success(),
        "{path}: HTTP {}: {}",
        r.status,
        r.body
    );
    Ok(r.body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let status = if mode == Mode::DirectBulk {
                &i["index"]["status"]
            } else {
                &i["status"]
            };
            status.as_u64().unwrap_or(0) as u16
        })
        .collect())
}

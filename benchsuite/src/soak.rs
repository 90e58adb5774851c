//! `neardup-bench soak`: a long day of traffic through `neardup serve` on a cluster, with one
//! node killed and started again in the middle, checked as it goes and at the end.
//!
//! The service is the real binary (`--neardup`), started once with every node's URL and a
//! request timeout below the claims' lease, as it runs in production. The index is made as
//! `es-init` makes it (duplicate groups, containment), on `--shards` shards with `--replicas`
//! replicas, and holds the corpus's articles (the **base**, written through the service's
//! bulk endpoint) before the traffic starts. Then `--concurrency` workers start operations at
//! `--rate` a second in all, each drawn at random:
//!
//! - **lookup** (60 %): `GET /v1/{index}/similar/{id}` of one of `--queries` base articles;
//! - **put** (15 %): a new article (synthetic, made of the corpus's sentences) or an edit of
//!   one the worker wrote before (a line added), `PUT /v1/{index}/articles/{id}`;
//! - **dedupe** (20 %): `PUT …?dedupe=true` of a light variant of a base article (which must be
//!   refused, 409) or, one time in four, of a new synthetic article;
//! - **bulk** (5 %): `--batch` new synthetic articles through `POST /v1/{index}/articles/_bulk`.
//!
//! A write answered with an error (a 5xx, a timeout, no answer) is sent again, as a client
//! would, until it is answered for good; a lookup answered with an error is counted and not
//! sent again. Each worker owns the ids it writes, so the versions of an id are sent in order.
//!
//! **Checks.** A lookup answered 200 is *wrong* when it lacks a match the same lookup found
//! before the traffic (base articles are never written during it), names an article nobody
//! wrote, or gives a similarity that is not the estimate of the query's signature and one
//! version of the match's text (the signatures computed here, by the library, at the index's
//! signature bits). At the end, with the traffic stopped: every article whose write was
//! acknowledged is stored with the last version acknowledged and the fingerprint fields the
//! library makes of it (*lost* otherwise), nothing refused or never sent is stored
//! (*doubled*), and no claim is held. Memory (RSS of the service), claims held, answers and
//! p50/p99 latencies are reported per `--interval`, with a plot (`--out`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use elasticsearch::http::Method as Http;
use elasticsearch::Elasticsearch;
use neardup::cli::common::{self, CmdResult, Status};
use neardup::cli::es_args::{self, parse_duration, EsArgs};
use neardup::es::{self, Body, EsConfig, IndexMeta, RetryPolicy, ScanOptions, Scanner};
use neardup::eval::synth::Synthesizer;
use neardup::minhash::Signature;
use neardup::{Fingerprinter, Method, Methods, Profile};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::es_similar::percentile;
use crate::serve_writes::serve;

#[derive(clap::Args, Debug)]
pub struct SoakBench {
    #[command(flatten)]
    es: EsArgs,
    /// Corpus of JSON Lines articles with an `id` (`.gz` is fine): the base, and the sentences
    /// new articles are made of.
    #[arg(long, short)]
    input: String,
    /// How long the traffic runs (`30m`, `90s`).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    duration: Duration,
    /// Operations started per second, all kinds together.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Workers: operations in flight at most.
    #[arg(long, default_value_t = 8, value_name = "N")]
    concurrency: usize,
    /// Base articles written before the traffic: the corpus's first N (0: all).
    #[arg(long, default_value_t = 0, value_name = "N")]
    base: usize,
    /// Base articles the lookups ask about (their answers before the traffic are the reference).
    #[arg(long, default_value_t = 300, value_name = "N")]
    queries: usize,
    /// Articles per bulk request.
    #[arg(long, default_value_t = 20, value_name = "N")]
    batch: usize,
    /// Node I (1..N) of the cluster `scripts/es-up --nodes N` started on --cluster-port is
    /// SIGKILLed at --restart-at and started again (`scripts/es-up --restart-node I`); 0: none.
    #[arg(long, default_value_t = 0, value_name = "I")]
    restart_node: usize,
    /// When the node is killed, as a share of --duration.
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    restart_at: f64,
    /// How long the node stays down before it is started again.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    down: Duration,
    /// The port `scripts/es-up` started the cluster on (default: the first --es URL's).
    #[arg(long, value_name = "PORT")]
    cluster_port: Option<u16>,
    /// The index (deleted and made again).
    #[arg(long, default_value = "neardup-soak")]
    index: String,
    #[arg(long, default_value_t = 3)]
    shards: u32,
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// One row of the report per this much time.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    interval: Duration,
    /// Share of the rows left out of the memory check (the service's caches fill first).
    #[arg(long, default_value_t = 0.2, value_name = "SHARE")]
    warmup: f64,
    /// Directory for `soak.csv` (one row per interval) and `soak.png` (the plot).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The `neardup` binary to serve with (default: the one beside this benchmark).
    #[arg(long, value_name = "PATH")]
    neardup: Option<PathBuf>,
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// What the workers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Lookup,
    Put,
    Dedupe,
    Bulk,
}

const KINDS: [Kind; 4] = [Kind::Lookup, Kind::Put, Kind::Dedupe, Kind::Bulk];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Lookup => "lookup",
            Kind::Put => "put",
            Kind::Dedupe => "dedupe",
            Kind::Bulk => "bulk",
        }
    }

    /// Drawn from `x` uniform in [0, 1).
    fn draw(x: f64) -> Kind {
        match x {
            x if x < 0.60 => Kind::Lookup,
            x if x < 0.75 => Kind::Put,
            x if x < 0.95 => Kind::Dedupe,
            _ => Kind::Bulk,
        }
    }
}

/// A request's outcome, as the report counts it.
#[derive(Default)]
struct Row {
    /// Latencies of answered requests, by kind.
    latency: BTreeMap<Kind, Vec<Duration>>,
    /// Requests answered with an error or not at all, by kind.
    errors: BTreeMap<Kind, u64>,
    /// Lookups answered wrong.
    wrong: u64,
    rss_mb: Option<f64>,
    claims_held: Option<u64>,
    claim_records: Option<u64>,
    load: Option<f64>,
}

/// What became of the versions of an id written during the soak.
#[derive(Default, Clone)]
struct Written {
    /// Every version sent, in order.
    versions: Vec<Value>,
    /// The last version a write of was acknowledged (200, 201).
    acked: Option<usize>,
    /// A dedupe write of it was refused (409).
    refused: bool,
    /// A version was given up on unanswered.
    unanswered: bool,
}

/// What the workers share.
struct Shared {
    index: String,
    service: Elasticsearch,
    fp: Fingerprinter,
    fields: Vec<String>,
    bits: u8,
    started: Instant,
    interval: Duration,
    rows: Mutex<Vec<Row>>,
    base: HashMap<String, Value>,
    /// The base articles looked up, with their signatures and the matches found before the
    /// traffic (id → similarity).
    queries: Vec<(String, Signature, BTreeMap<String, f64>)>,
    /// Base articles long enough to be found by their variants.
    variant_bases: Vec<String>,
    written: Mutex<HashMap<String, Written>>,
    signatures: Mutex<HashMap<(String, usize), Option<Signature>>>,
    wrong_examples: Mutex<Vec<String>>,
    /// Dedupe writes answered 409, with the articles each answer named.
    refusals: Mutex<Vec<(String, Vec<String>)>>,
    batch: usize,
    synth: Synthesizer,
}

/// How long a write is sent again before it is given up on.
const GIVE_UP: Duration = Duration::from_secs(300);

impl Shared {
    /// The row of the interval `at` (since the traffic started) falls in.
    fn row_of(&self, at: Duration) -> usize {
        (at.as_secs_f64() / self.interval.as_secs_f64()) as usize
    }

    /// The row of now.
    fn row<F: FnOnce(&mut Row)>(&self, f: F) {
        self.row_at(self.row_of(self.started.elapsed()), f);
    }

    fn row_at<F: FnOnce(&mut Row)>(&self, i: usize, f: F) {
        let mut rows = self.rows.lock().expect("rows");
        while rows.len() <= i {
            rows.push(Row::default());
        }
        f(&mut rows[i]);
    }

    /// An answer that took `took`, counted in the row of the minute its request was sent.
    fn answered(&self, kind: Kind, took: Duration) {
        let sent = self.started.elapsed().saturating_sub(took);
        self.row_at(self.row_of(sent), |r| {
            r.latency.entry(kind).or_default().push(took)
        });
    }

    fn error(&self, kind: Kind) {
        self.row(|r| *r.errors.entry(kind).or_default() += 1);
    }

    fn wrong(&self, why: String) {
        self.row(|r| r.wrong += 1);
        let mut w = self.wrong_examples.lock().expect("examples");
        if w.len() < 20 {
            w.push(why);
        }
    }

    /// The MinHash signature of a text, at the index's signature bits.
    fn signature(&self, article: &Value) -> Option<Signature> {
        let s = es::sketch_source(
            &self.fp,
            Methods::only(Method::MinHash),
            article,
            &self.fields,
        )
        .ok()?;
        let sig = s.minhash?.ok()?.signature;
        Some(sig.reduced(self.bits))
    }

    /// The signatures of every version of `id` (a base article's one, or those written).
    fn signatures_of(&self, id: &str) -> Option<Vec<Option<Signature>>> {
        let versions: Vec<Value> = match self.base.get(id) {
            Some(a) => vec![a.clone()],
            None => self
                .written
                .lock()
                .expect("written")
                .get(id)?
                .versions
                .clone(),
        };
        let mut out = Vec::new();
        for (v, article) in versions.iter().enumerate() {
            let key = (id.to_owned(), v);
            let known = self.signatures.lock().expect("sigs").get(&key).cloned();
            let sig = match known {
                Some(s) => s,
                None => {
                    let s = self.signature(article);
                    self.signatures.lock().expect("sigs").insert(key, s.clone());
                    s
                }
            };
            out.push(sig);
        }
        Some(out)
    }

    /// Why a lookup's matches are wrong, if they are.
    fn check_lookup(
        &self,
        query: &Signature,
        reference: &BTreeMap<String, f64>,
        answer: &Value,
    ) -> Option<String> {
        let mut found = BTreeMap::new();
        for m in answer["matches"].as_array()? {
            let id = m["id"].as_str()?.to_owned();
            found.insert(id, m["similarity"].as_f64());
        }
        for (id, sim) in reference {
            match found.get(id) {
                None => return Some(format!("lost match {id}")),
                Some(Some(s)) if (s - sim).abs() > 1e-6 => {
                    return Some(format!("{id}: similarity {s}, was {sim}"))
                }
                _ => {}
            }
        }
        for (id, sim) in found {
            if reference.contains_key(&id) {
                continue;
            }
            let Some(sigs) = self.signatures_of(&id) else {
                return Some(format!("match {id}: nobody wrote it"));
            };
            if let Some(sim) = sim {
                let agrees = sigs
                    .iter()
                    .flatten()
                    .any(|s| (query.similarity(s) - sim).abs() <= 1e-6);
                if !agrees {
                    return Some(format!(
                        "match {id}: similarity {sim}, no version of it has that estimate"
                    ));
                }
            }
        }
        None
    }

    /// Registers version `article` of `id` before it is sent; returns its number.
    fn register(&self, id: &str, article: &Value) -> usize {
        let mut w = self.written.lock().expect("written");
        let e = w.entry(id.to_owned()).or_default();
        e.versions.push(article.clone());
        e.versions.len() - 1
    }

    fn settle(&self, id: &str, version: usize, status: Option<u16>) {
        let mut w = self.written.lock().expect("written");
        let e = w.get_mut(id).expect("registered");
        match status {
            Some(200 | 201) => e.acked = Some(version),
            Some(409) => e.refused = true,
            _ => e.unanswered = true,
        }
    }
}

/// A status a client takes as the answer (anything but a server error, a timeout, 429).
fn is_answer(status: u16) -> bool {
    status < 500 && status != 429 && status != 408
}

/// `PUT` of version `article` of `id` through the service (registered before it is sent,
/// settled by its answer), sent again until answered; its status (`None` when given up on)
/// and the answer's body.
async fn write_one(
    s: &Shared,
    kind: Kind,
    id: &str,
    article: &Value,
    dedupe: bool,
) -> (Option<u16>, Value) {
    let version = s.register(id, article);
    let (status, body) = put(s, kind, id, article, dedupe).await;
    s.settle(id, version, status);
    (status, body)
}

/// [`write_one`]'s requests, without the bookkeeping.
async fn put(
    s: &Shared,
    kind: Kind,
    id: &str,
    article: &Value,
    dedupe: bool,
) -> (Option<u16>, Value) {
    let path = format!("/v1/{}/articles/{}", s.index, es::path_segment(id));
    let query: &[(&str, &str)] = if dedupe { &[("dedupe", "true")] } else { &[] };
    let give_up = Instant::now() + GIVE_UP;
    loop {
        let t = Instant::now();
        let reply = es::send(
            &s.service,
            Http::Put,
            &path,
            query,
            Some(&Body::Json(article.clone())),
        )
        .await;
        match reply {
            Ok(r) if is_answer(r.status.as_u16()) => {
                s.answered(kind, t.elapsed());
                return (Some(r.status.as_u16()), r.body);
            }
            _ => s.error(kind),
        }
        if Instant::now() > give_up {
            return (None, Value::Null);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One worker's ids and randomness.
struct Worker {
    n: usize,
    rng: StdRng,
    /// Ids it wrote and had acknowledged, to edit.
    mine: Vec<String>,
    next: u64,
}

impl Worker {
    /// A new synthetic article of this worker, and its id.
    fn new_article(&mut self, s: &Shared, prefix: &str) -> (String, Value) {
        let n = self.next * 64 + self.n as u64;
        self.next += 1;
        let a = s.synth.article(n);
        let id = format!("{prefix}{n}");
        (id, json!({ "title": a.title, "content": a.content }))
    }

    async fn run(&mut self, s: &Shared, kind: Kind) {
        match kind {
            Kind::Lookup => self.lookup(s).await,
            Kind::Put => self.put(s).await,
            Kind::Dedupe => self.dedupe(s).await,
            Kind::Bulk => self.bulk(s).await,
        }
    }

    async fn lookup(&mut self, s: &Shared) {
        let (id, sig, reference) = &s.queries[self.rng.gen_range(0..s.queries.len())];
        let path = format!("/v1/{}/similar/{}", s.index, es::path_segment(id));
        let t = Instant::now();
        match es::send(&s.service, Http::Get, &path, &[], None).await {
            Ok(r) if r.status.as_u16() == 200 => {
                s.answered(Kind::Lookup, t.elapsed());
                if let Some(why) = s.check_lookup(sig, reference, &r.body) {
                    s.wrong(format!("similar {id}: {why}"));
                }
            }
            Ok(r) if is_answer(r.status.as_u16()) => {
                s.answered(Kind::Lookup, t.elapsed());
                s.wrong(format!("similar {id}: HTTP {}: {}", r.status, r.body));
            }
            _ => s.error(Kind::Lookup),
        }
    }

    async fn put(&mut self, s: &Shared) {
        let edit = !self.mine.is_empty() && self.rng.gen_bool(0.5);
        let (id, article) = if edit {
            let id = self.mine[self.rng.gen_range(0..self.mine.len())].clone();
            let w = s.written.lock().expect("written")[&id].clone();
            let mut a = w.versions.last().expect("a version").clone();
            let n = w.versions.len();
            let content = format!("{}\n（第{n}次更新）", a["content"].as_str().unwrap_or(""));
            a["content"] = Value::String(content);
            (id, a)
        } else {
            self.new_article(s, "soak-p")
        };
        let (status, _) = write_one(s, Kind::Put, &id, &article, false).await;
        if !edit && matches!(status, Some(200 | 201)) {
            self.mine.push(id);
        }
    }

    async fn dedupe(&mut self, s: &Shared) {
        if self.rng.gen_bool(0.25) || s.variant_bases.is_empty() {
            let (id, article) = self.new_article(s, "soak-d");
            let (status, body) = write_one(s, Kind::Dedupe, &id, &article, true).await;
            if status == Some(409) {
                self.check_refusal(s, &id, &body);
            }
            return;
        }
        let base_id = &s.variant_bases[self.rng.gen_range(0..s.variant_bases.len())];
        let mut article = s.base[base_id].clone();
        let content = format!(
            "{}\n（来源：转载）",
            article["content"].as_str().unwrap_or("")
        );
        article["content"] = Value::String(content);
        let id = format!("soak-v{}-{}", self.n, self.next);
        self.next += 1;
        let (status, body) = write_one(s, Kind::Dedupe, &id, &article, true).await;
        match status {
            Some(409) => self.check_refusal(s, &id, &body),
            // Written: a near-duplicate let in, which the final check counts.
            Some(200 | 201) | None => {}
            Some(other) => s.wrong(format!(
                "dedupe PUT of {id}, a variant of {base_id}: HTTP {other}, not 409: {body}"
            )),
        }
    }

    /// A 409 must name an article of the base or one written during the soak (its write may
    /// not be answered yet); the end checks that one of those it names is stored.
    fn check_refusal(&self, s: &Shared, id: &str, body: &Value) {
        let named: Vec<String> = body["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect();
        let known = {
            let written = s.written.lock().expect("written");
            named
                .iter()
                .any(|m| s.base.contains_key(m) || written.contains_key(m))
        };
        if known {
            s.refusals
                .lock()
                .expect("refusals")
                .push((id.to_owned(), named));
        } else {
            s.wrong(format!(
                "dedupe PUT of {id}: 409 naming no article written: {body}"
            ));
        }
    }

    async fn bulk(&mut self, s: &Shared) {
        let mut pending: Vec<(String, usize, Value)> = (0..s.batch)
            .map(|_| {
                let (id, a) = self.new_article(s, "soak-b");
                let v = s.register(&id, &a);
                (id, v, a)
            })
            .collect();
        let path = format!("/v1/{}/articles/_bulk", s.index);
        let give_up = Instant::now() + GIVE_UP;
        while !pending.is_empty() {
            let lines = bulk_lines(pending.iter().map(|(id, _, a)| (id, a)));
            let t = Instant::now();
            let reply = es::send(
                &s.service,
                Http::Post,
                &path,
                &[],
                Some(&Body::NdJson(lines)),
            )
            .await;
            let items = match reply {
                Ok(r) if r.status.as_u16() == 200 => {
                    s.answered(Kind::Bulk, t.elapsed());
                    r.body["items"].as_array().cloned().unwrap_or_default()
                }
                _ => {
                    s.error(Kind::Bulk);
                    Vec::new()
                }
            };
            if items.len() == pending.len() {
                let mut again = Vec::new();
                for ((id, v, a), item) in pending.into_iter().zip(items) {
                    let status = item["status"].as_u64().unwrap_or(0) as u16;
                    if is_answer(status) {
                        s.settle(&id, v, Some(status));
                        if !matches!(status, 200 | 201) {
                            s.wrong(format!("bulk item {id}: {item}"));
                        }
                    } else {
                        again.push((id, v, a));
                    }
                }
                pending = again;
            }
            if !pending.is_empty() {
                if Instant::now() > give_up {
                    for (id, v, _) in pending {
                        s.settle(&id, v, None);
                    }
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// The resident set of process `pid`, in MB (Linux).
fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Claim records held now (a holder whose lease has not run out), and all records.
async fn claims(client: &Elasticsearch, index: &str) -> Option<(u64, u64)> {
    let claims = es::claims_index_name(index);
    es::send(
        client,
        Http::Post,
        &format!("/{claims}/_refresh"),
        &[],
        None,
    )
    .await
    .ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as i64;
    let held = json!({ "query": { "bool": { "filter": [
        { "exists": { "field": "holder" } },
        { "range": { "expires_at": { "gt": now } } }
    ] } } });
    let count = |body: Option<Value>| {
        let path = format!("/{claims}/_count");
        async move {
            let r = es::send(
                client,
                Http::Post,
                &path,
                &[],
                body.map(Body::Json).as_ref(),
            )
            .await
            .ok()?;
            r.body["count"].as_u64()
        }
    };
    Some((count(Some(held)).await?, count(None).await?))
}

/// The repository (the benchsuite's parent): where `scripts/es-up` is.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benchsuite sits in the repository")
        .to_path_buf()
}

/// SIGKILLs node `node` of the cluster es-up started on `port`.
fn kill_node(port: u16, node: usize) -> anyhow::Result<u32> {
    let cache = std::env::var_os("ES_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/es"));
    let pids = cache.join(port.to_string()).join("pids");
    let text = std::fs::read_to_string(&pids).with_context(|| {
        format!(
            "{}: no cluster of several nodes started by scripts/es-up --nodes N --port {port}",
            pids.display()
        )
    })?;
    let pid: u32 = text
        .lines()
        .nth(node - 1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("{}: no line for node {node}", pids.display()))?;
    let ok = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?
        .success();
    anyhow::ensure!(ok, "kill -KILL {pid} (node {node}) failed");
    Ok(pid)
}

fn restart_node(port: u16, node: usize) -> anyhow::Result<()> {
    let out = std::process::Command::new(repo_root().join("scripts/es-up"))
        .args([
            "--port",
            &port.to_string(),
            "--restart-node",
            &node.to_string(),
        ])
        .output()
        .context("running scripts/es-up --restart-node")?;
    anyhow::ensure!(
        out.status.success(),
        "scripts/es-up --restart-node {node}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Base articles from the corpus: `(id, {title, content})`.
fn base_articles(real: &[neardup::eval::generate::Article], n: usize) -> Vec<(String, Value)> {
    let n = if n == 0 {
        real.len()
    } else {
        n.min(real.len())
    };
    real[..n]
        .iter()
        .map(|a| {
            (
                a.id.clone(),
                json!({ "title": a.title, "content": a.content }),
            )
        })
        .collect()
}

/// The body of a `POST /v1/{index}/articles/_bulk`: one article a line, its id inside.
fn bulk_lines<'a>(articles: impl Iterator<Item = (&'a String, &'a Value)>) -> String {
    let mut lines = String::new();
    for (id, a) in articles {
        let mut a = a.clone();
        a["id"] = Value::String(id.clone());
        lines.push_str(&a.to_string());
        lines.push('\n');
    }
    lines
}

/// Writes `articles` through the service's bulk endpoint; every item must be written.
async fn load_base(
    service: &Elasticsearch,
    index: &str,
    articles: &[(String, Value)],
) -> anyhow::Result<()> {
    let path = format!("/v1/{index}/articles/_bulk");
    for chunk in articles.chunks(200) {
        let lines = bulk_lines(chunk.iter().map(|(id, a)| (id, a)));
        let r = es::send(service, Http::Post, &path, &[], Some(&Body::NdJson(lines))).await?;
        anyhow::ensure!(
            r.status.is_success(),
            "{path}: HTTP {}: {}",
            r.status,
            r.body
        );
        for item in r.body["items"].as_array().into_iter().flatten() {
            let status = item["status"].as_u64().unwrap_or(0);
            anyhow::ensure!(status == 200 || status == 201, "{path}: {item}");
        }
    }
    Ok(())
}

/// The end of the run, as checked.
#[derive(Debug, Default)]
struct Verdict {
    stored: usize,
    acknowledged: usize,
    lost: usize,
    wrong_fingerprints: usize,
    doubled: usize,
    unanswered: usize,
    refused: usize,
    /// 409s none of whose named articles is stored at the end.
    false_refusals: usize,
}

/// Every stored document's `_source`.
async fn all_docs(client: &Elasticsearch, index: &str) -> anyhow::Result<HashMap<String, Value>> {
    es::send(client, Http::Post, &format!("/{index}/_refresh"), &[], None).await?;
    let scanner = Scanner::new(client.clone(), RetryPolicy::default());
    let mut docs = HashMap::new();
    let body = json!({ "query": { "match_all": {} } });
    scanner
        .scan(index, &body, &ScanOptions::default(), |hits| {
            for h in hits {
                if let Some(id) = h["_id"].as_str() {
                    docs.insert(id.to_owned(), h["_source"].clone());
                }
            }
            true
        })
        .await?;
    Ok(docs)
}

fn verdict(
    s: &Shared,
    meta: &IndexMeta,
    stored: &HashMap<String, Value>,
) -> (Verdict, Vec<String>) {
    let written = s.written.lock().expect("written").clone();
    let mut v = Verdict {
        stored: stored.len(),
        ..Verdict::default()
    };
    let mut examples = Vec::new();
    let same_text = |a: &Value, b: &Value| a["title"] == b["title"] && a["content"] == b["content"];
    // What must be stored, with the versions it may hold.
    let mut expect: Vec<(&String, Vec<&Value>)> =
        s.base.iter().map(|(id, a)| (id, vec![a])).collect();
    for (id, w) in &written {
        if w.unanswered {
            v.unanswered += 1;
        }
        match w.acked {
            Some(last) => {
                v.acknowledged += 1;
                expect.push((id, w.versions[last..].iter().collect()));
            }
            None if w.refused => {
                v.refused += 1;
                if stored.contains_key(id) {
                    v.doubled += 1;
                    examples.push(format!("{id}: refused (409) but stored"));
                }
            }
            None => {}
        }
    }
    let checked: Vec<Option<String>> = expect
        .par_iter()
        .map(|(id, versions)| {
            let Some(src) = stored.get(*id) else {
                return Some(format!("{id}: acknowledged, not stored"));
            };
            if !versions.iter().any(|a| same_text(a, src)) {
                return Some(format!("{id}: stored text is not the last acknowledged"));
            }
            let sketches = es::sketch_source(&s.fp, meta.methods(), src, &s.fields).ok()?;
            let want = es::fingerprint_fields_json(meta, &sketches);
            if want.iter().all(|(k, v)| src.get(k) == Some(v)) {
                None
            } else {
                Some(format!("{id}: wrong fingerprint fields"))
            }
        })
        .collect();
    for why in checked.into_iter().flatten() {
        if why.ends_with("fields") {
            v.wrong_fingerprints += 1;
        } else {
            v.lost += 1;
        }
        examples.push(why);
    }
    for id in stored.keys() {
        if !s.base.contains_key(id) && !written.contains_key(id) {
            v.doubled += 1;
            examples.push(format!("{id}: stored, never written"));
        }
    }
    for (id, named) in s.refusals.lock().expect("refusals").iter() {
        if !named.iter().any(|m| stored.contains_key(m)) {
            v.false_refusals += 1;
            examples.push(format!("{id}: refused (409) naming {named:?}, none stored"));
        }
    }
    // A dedupe variant of a base article stored beside it is a near-duplicate let in.
    for (id, w) in &written {
        if id.starts_with("soak-v") && w.acked.is_some() && stored.contains_key(id) {
            v.doubled += 1;
            examples.push(format!("{id}: a variant of a stored article, let in"));
        }
    }
    examples.truncate(20);
    (v, examples)
}

pub fn run(args: SoakBench) -> CmdResult {
    common::ensure_usage(
        args.rate > 0.0
            && (1..=64).contains(&args.concurrency)
            && args.queries > 0
            && args.batch > 0,
        "--rate, --queries and --batch must be positive, --concurrency from 1 to 64",
    )?;
    common::ensure_usage(
        (0.0..1.0).contains(&args.restart_at) && (0.0..1.0).contains(&args.warmup),
        "--restart-at and --warmup are shares of the run, from 0 to below 1",
    )?;
    let (config, client) = args.es.client()?;
    let cluster_port = match args.cluster_port {
        Some(p) => p,
        None => config
            .urls
            .first()
            .and_then(|u| u.port_or_known_default())
            .context("--cluster-port: the first --es URL has no port")?,
    };
    let real = neardup::cli::eval::read_articles(&args.input)?;
    let synth = Synthesizer::new(&real, args.seed)
        .with_context(|| format!("{}: no article has three sentences", args.input))?;
    let base = base_articles(&real, args.base);
    drop(real);
    let bin = match &args.neardup {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("neardup"),
    };
    let (served, url) = serve(&bin, &args.es, "25s")?;
    let serve_pid = served.pid();
    let rt = es_args::runtime()?;
    let version = rt.block_on(es::first_contact(&client, config.connect_timeout))?;
    let service = EsConfig::new(&url)?.client()?;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let fields = vec!["title".to_owned(), "content".to_owned()];

    // The index, the base, the reference answers.
    let t = Instant::now();
    let meta = rt.block_on(async {
        let _ = es::send(
            &client,
            Http::Delete,
            &format!("/{}", args.index),
            &[],
            None,
        )
        .await;
        let claims = format!("/{}", es::claims_index_name(&args.index));
        let _ = es::send(&client, Http::Delete, &claims, &[], None).await;
        let settings = json!({ "settings": {
            "number_of_shards": args.shards, "number_of_replicas": args.replicas } });
        let path = format!("/{}", args.index);
        let r = es::send(&client, Http::Put, &path, &[], Some(&Body::Json(settings))).await?;
        anyhow::ensure!(r.status.is_success(), "create {}: {}", args.index, r.body);
        let wanted = IndexMeta {
            group: Some(es::GroupMeta::default()),
            ..IndexMeta::default()
        };
        es::init_index(&client, &RetryPolicy::default(), &args.index, &wanted).await?;
        load_base(&service, &args.index, &base).await?;
        es::send(
            &client,
            Http::Post,
            &format!("/{}/_refresh", args.index),
            &[],
            None,
        )
        .await?;
        let meta = es::read_meta(
            &client,
            &RetryPolicy::default(),
            &args.index,
            &Default::default(),
        )
        .await?;
        anyhow::Ok(meta)
    })?;
    eprintln!(
        "soak: {} base articles written through the service in {:.0} s",
        base.len(),
        t.elapsed().as_secs_f64()
    );
    let bits = meta
        .minhash
        .as_ref()
        .context("the index holds no MinHash")?
        .layout
        .signature_bits();
    let base_map: HashMap<String, Value> = base.iter().cloned().collect();
    let mut shared = Shared {
        index: args.index.clone(),
        service,
        fp,
        fields,
        bits,
        started: Instant::now(),
        interval: args.interval,
        rows: Mutex::new(Vec::new()),
        base: base_map,
        queries: Vec::new(),
        variant_bases: Vec::new(),
        written: Mutex::new(HashMap::new()),
        signatures: Mutex::new(HashMap::new()),
        wrong_examples: Mutex::new(Vec::new()),
        refusals: Mutex::new(Vec::new()),
        batch: args.batch,
        synth,
    };
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut candidates: Vec<&(String, Value)> = base
        .iter()
        .filter(|(_, a)| {
            a["content"]
                .as_str()
                .is_some_and(|c| c.chars().count() >= 300)
        })
        .collect();
    shared.variant_bases = candidates.iter().map(|(id, _)| id.clone()).collect();
    let mut queries = Vec::new();
    while queries.len() < args.queries && !candidates.is_empty() {
        let (id, a) = candidates.swap_remove(rng.gen_range(0..candidates.len()));
        if let Some(sig) = shared.signature(a) {
            queries.push((id.clone(), sig));
        }
    }
    for (id, sig) in queries {
        let path = format!("/v1/{}/similar/{}", args.index, es::path_segment(&id));
        let r = rt.block_on(es::send(&shared.service, Http::Get, &path, &[], None))?;
        anyhow::ensure!(
            r.status.as_u16() == 200,
            "{path}: HTTP {}: {}",
            r.status,
            r.body
        );
        let mut reference = BTreeMap::new();
        for m in r.body["matches"].as_array().into_iter().flatten() {
            let mid = m["id"]
                .as_str()
                .context("a match without an id")?
                .to_owned();
            reference.insert(mid, m["similarity"].as_f64().unwrap_or(f64::NAN));
        }
        // The reference must be right too: every similarity the estimate of the two texts.
        let empty = BTreeMap::new();
        if let Some(why) = shared.check_lookup(&sig, &empty, &r.body) {
            bail!("before the traffic, similar {id}: {why}");
        }
        shared.queries.push((id, sig, reference));
    }
    let matches: usize = shared.queries.iter().map(|q| q.2.len()).sum();
    eprintln!(
        "soak: {} lookups' reference answers ({matches} matches); traffic for {:.0} s at {} operations/s, {} workers",
        shared.queries.len(),
        args.duration.as_secs_f64(),
        args.rate,
        args.concurrency
    );

    // The traffic.
    shared.started = Instant::now();
    let shared = Arc::new(shared);
    let events = rt.block_on(traffic(&args, &shared, &client, serve_pid, cluster_port))?;
    let traffic_time = shared.started.elapsed();

    // The end, once the last answer came: claims (those of requests a timeout cut short are
    // given back in the background), then every document.
    let (held_at_end, records_at_end) = rt
        .block_on(claims(&client, &args.index))
        .unwrap_or((u64::MAX, 0));
    let stored = rt.block_on(all_docs(&client, &args.index))?;
    let (v, examples) = verdict(&shared, &meta, &stored);
    drop(served);

    let rows = std::mem::take(&mut *shared.rows.lock().expect("rows"));
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| minute | lookups | p50 / p99 ms | writes | p50 / p99 ms | errors | wrong | RSS MB | claims held | load |"
    );
    let _ = writeln!(table, "|---|---|---|---|---|---|---|---|---|---|");
    let mut csv = String::from(
        "minute,lookups,lookup_p50_ms,lookup_p99_ms,writes,write_p50_ms,write_p99_ms,errors,wrong,rss_mb,claims_held,claim_records,load\n",
    );
    let minute = |i: usize| (i as f64 + 1.0) * args.interval.as_secs_f64() / 60.0;
    let mut plot_rows = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let lat = |kinds: &[Kind]| {
            let mut v: Vec<Duration> = kinds
                .iter()
                .filter_map(|k| r.latency.get(k))
                .flatten()
                .copied()
                .collect();
            v.sort_unstable();
            let ms = |q| (!v.is_empty()).then(|| percentile(&v, q).as_secs_f64() * 1e3);
            (v.len(), ms(0.5), ms(0.99))
        };
        let (nl, l50, l99) = lat(&[Kind::Lookup]);
        let (nw, w50, w99) = lat(&[Kind::Put, Kind::Dedupe, Kind::Bulk]);
        let errors: u64 = r.errors.values().sum();
        let f = |x: Option<f64>| x.map_or("–".to_owned(), |x| format!("{x:.1}"));
        let c = |x: Option<u64>| x.map_or("–".to_owned(), |x| x.to_string());
        let _ = writeln!(
            table,
            "| {:.2} | {nl} | {} / {} | {nw} | {} / {} | {errors} | {} | {} | {} | {} |",
            minute(i),
            f(l50),
            f(l99),
            f(w50),
            f(w99),
            r.wrong,
            f(r.rss_mb),
            c(r.claims_held),
            f(r.load)
        );
        let e = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.3}"));
        let _ = writeln!(
            csv,
            "{:.2},{nl},{},{},{nw},{},{},{errors},{},{},{},{},{}",
            minute(i),
            e(l50),
            e(l99),
            e(w50),
            e(w99),
            r.wrong,
            e(r.rss_mb),
            r.claims_held.map_or(String::new(), |x| x.to_string()),
            r.claim_records.map_or(String::new(), |x| x.to_string()),
            e(r.load)
        );
        plot_rows.push(PlotRow {
            minute: minute(i),
            lookup_p50: l50,
            lookup_p99: l99,
            write_p50: w50,
            write_p99: w99,
            rss_mb: r.rss_mb,
            claims_held: r.claims_held,
        });
    }
    // Memory after the warm-up, against its median.
    let mut rss: Vec<f64> = rows
        .iter()
        .skip((rows.len() as f64 * args.warmup).ceil() as usize)
        .filter_map(|r| r.rss_mb)
        .collect();
    rss.sort_by(f64::total_cmp);
    let memory = (!rss.is_empty()).then(|| {
        let median = rss[rss.len() / 2];
        (
            median,
            (rss[0] / median - 1.0) * 100.0,
            (rss[rss.len() - 1] / median - 1.0) * 100.0,
        )
    });
    // Wrong answers: lookups and dedupe answers seen wrong as they came, and 409s that named
    // no article stored at the end.
    let wrong: u64 = rows.iter().map(|r| r.wrong).sum::<u64>() + v.false_refusals as u64;
    let answered: BTreeMap<Kind, usize> = KINDS
        .iter()
        .map(|&k| {
            (
                k,
                rows.iter()
                    .filter_map(|r| r.latency.get(&k))
                    .map(Vec::len)
                    .sum(),
            )
        })
        .collect();
    let errors: BTreeMap<Kind, u64> = KINDS
        .iter()
        .map(|&k| (k, rows.iter().filter_map(|r| r.errors.get(&k)).sum()))
        .collect();

    println!(
        "Elasticsearch {version} at {}, index {} ({} shards, {} replica(s)), {} base articles, {:.0} s of traffic at {} operations/s ({} workers){}",
        config.display_urls(),
        args.index,
        args.shards,
        args.replicas,
        base.len(),
        traffic_time.as_secs_f64(),
        args.rate,
        args.concurrency,
        events
            .iter()
            .map(|(minute, what)| format!("; {what} at minute {minute:.2}"))
            .collect::<String>()
    );
    println!();
    print!("{table}");
    println!();
    for k in KINDS {
        println!(
            "- {}: {} answered, {} answered with an error or not at all",
            k.name(),
            answered[&k],
            errors[&k]
        );
    }
    println!(
        "- wrong answers: {wrong}; lost writes: {}; wrong fingerprint fields: {}; doubled (stored though refused, never written, or a near-duplicate let in): {}",
        v.lost, v.wrong_fingerprints, v.doubled
    );
    println!(
        "- stored at the end: {} ({} base, {} acknowledged during the soak; {} refused as near-duplicates; {} given up on unanswered)",
        v.stored,
        base.len(),
        v.acknowledged,
        v.refused,
        v.unanswered
    );
    println!("- claims held when the last answer came: {held_at_end} (records: {records_at_end})");
    if let Some((median, low, high)) = memory {
        println!(
            "- the service's memory after the warm-up: median {median:.1} MB, {low:+.1} % … {high:+.1} % ({})",
            if low >= -10.0 && high <= 10.0 { "within ±10 %" } else { "NOT within ±10 %" }
        );
    }
    for e in shared
        .wrong_examples
        .lock()
        .expect("examples")
        .iter()
        .chain(&examples)
    {
        println!("  - {e}");
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("soak.csv"), &csv)?;
        let marks: Vec<f64> = events.iter().map(|e| e.0).collect();
        plot(&dir.join("soak.png"), &plot_rows, &marks)?;
        println!(
            "- {} and {}",
            dir.join("soak.csv").display(),
            dir.join("soak.png").display()
        );
    }
    if wrong > 0 || v.lost > 0 || v.wrong_fingerprints > 0 || v.doubled > 0 || held_at_end > 0 {
        bail!(
            "the soak failed: {wrong} wrong answers, {} lost writes, {} wrong fingerprints, {} doubled, {held_at_end} claims held at the end",
            v.lost,
            v.wrong_fingerprints,
            v.doubled
        );
    }
    Ok(Status::Done)
}

/// Runs the traffic, the sampler and the restart; the events (kill, back), each with the
/// minute it happened.
async fn traffic(
    args: &SoakBench,
    shared: &Arc<Shared>,
    client: &Elasticsearch,
    serve_pid: u32,
    cluster_port: u16,
) -> anyhow::Result<Vec<(f64, String)>> {
    let end = shared.started + args.duration;
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let next = Arc::new(Mutex::new(shared.started));
    let mut workers = Vec::new();
    for n in 0..args.concurrency {
        let (shared, next) = (shared.clone(), next.clone());
        let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(n as u64);
        workers.push(tokio::spawn(async move {
            let mut w = Worker {
                n,
                rng: StdRng::seed_from_u64(seed),
                mine: Vec::new(),
                next: 0,
            };
            loop {
                let at = {
                    let mut next = next.lock().expect("schedule");
                    let at = *next;
                    *next += period;
                    at
                };
                if at >= end {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                let kind = Kind::draw(w.rng.gen());
                w.run(&shared, kind).await;
            }
        }));
    }
    let sampler = {
        let (shared, client) = (shared.clone(), client.clone());
        let every = args.interval;
        tokio::spawn(async move {
            // Row i is sampled just before its end.
            let mut i = 0;
            while shared.started + every * (i as u32 + 1) <= end + Duration::from_millis(1) {
                let at = shared.started + every * (i as u32 + 1) - Duration::from_millis(200);
                tokio::time::sleep_until(at.into()).await;
                let claims = claims(&client, &shared.index).await;
                let (rss, load) = (rss_mb(serve_pid), load_average());
                shared.row_at(i, |r| {
                    r.rss_mb = rss;
                    r.load = load;
                    r.claims_held = claims.map(|c| c.0);
                    r.claim_records = claims.map(|c| c.1);
                });
                i += 1;
            }
        })
    };
    let mut events = Vec::new();
    if args.restart_node > 0 {
        let at = shared.started + args.duration.mul_f64(args.restart_at);
        tokio::time::sleep_until(at.into()).await;
        let minute = |s: &Shared| s.started.elapsed().as_secs_f64() / 60.0;
        let pid = kill_node(cluster_port, args.restart_node)?;
        events.push((
            minute(shared),
            format!("node {} (pid {pid}) SIGKILLed", args.restart_node),
        ));
        tokio::time::sleep(args.down).await;
        let (port, node) = (cluster_port, args.restart_node);
        tokio::task::spawn_blocking(move || restart_node(port, node)).await??;
        events.push((
            minute(shared),
            format!("node {} back in the cluster", args.restart_node),
        ));
    }
    for w in workers {
        w.await?;
    }
    sampler.await?;
    Ok(events)
}

/// One point of each series of the plot.
struct PlotRow {
    minute: f64,
    lookup_p50: Option<f64>,
    lookup_p99: Option<f64>,
    write_p50: Option<f64>,
    write_p99: Option<f64>,
    rss_mb: Option<f64>,
    claims_held: Option<u64>,
}

/// Three panels over the minutes of the run: latencies (log scale), the service's RSS, claims
/// held; the kill and the node's return as vertical lines.
fn plot(out: &Path, rows: &[PlotRow], marks: &[f64]) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let font = neardup::cli::eval_plot::find_font(None);
    if let Some(p) = &font {
        let bytes: &'static [u8] = Box::leak(std::fs::read(p)?.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| anyhow::anyhow!("{}: not a usable font", p.display()))?;
    }
    let root = BitMapBackend::new(out, (1000, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((3, 1));
    let x_max = rows.last().map_or(1.0, |r| r.minute).max(1.0);
    let colour = |i: usize| neardup::cli::eval_plot::COLOURS[i].1;
    let series = |f: &dyn Fn(&PlotRow) -> Option<f64>| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| Some((r.minute, f(r)?)))
            .collect()
    };

    let lat: [(&str, Vec<(f64, f64)>); 4] = [
        ("lookup p50", series(&|r| r.lookup_p50)),
        ("lookup p99", series(&|r| r.lookup_p99)),
        ("write p50", series(&|r| r.write_p50)),
        ("write p99", series(&|r| r.write_p99)),
    ];
    let y_max = lat
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.1))
        .fold(10.0_f64, f64::max)
        * 1.5;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("latency per minute (ms)", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, (0.5..y_max).log_scale())?;
    chart.configure_mesh().x_desc("minute").draw()?;
    for (i, (name, s)) in lat.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(s.clone(), c.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    for &m in marks {
        chart.draw_series(LineSeries::new(
            vec![(m, 0.5), (m, y_max)],
            BLACK.stroke_width(1),
        ))?;
    }
    if font.is_some() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }

    let panel = |area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
                 title: &str,
                 s: Vec<(f64, f64)>,
                 c: RGBColor|
     -> anyhow::Result<()> {
        let y_max = s.iter().map(|p| p.1).fold(1.0_f64, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart.configure_mesh().x_desc("minute").draw()?;
        chart.draw_series(LineSeries::new(s, c.stroke_width(2)))?;
        for &m in marks {
            chart.draw_series(LineSeries::new(
                vec![(m, 0.0), (m, y_max)],
                BLACK.stroke_width(1),
            ))?;
        }
        Ok(())
    };
    panel(
        &panels[1],
        "the service's resident memory (MB)",
        series(&|r| r.rss_mb),
        colour(4),
    )?;
    panel(
        &panels[2],
        "claims held",
        series(&|r| r.claims_held.map(|c| c as f64)),
        colour(5),
    )?;
    root.present()?;
    Ok(())
}

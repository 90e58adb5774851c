//! Lost answers (issue 32, 2.3): Elasticsearch applies a request but its answer never reaches
//! neardup. neardup talks to node 1 through toxiproxy (`scripts/toxiproxy-up`, driven over its
//! HTTP API); a `limit_data` toxic of 0 bytes on the proxy's downstream direction lets every
//! request through and closes the connection as soon as the answer comes back. The toxic is
//! put on before the targeted requests are sent and taken off only once the cluster (asked
//! directly, not through the proxy) shows that one of them was applied: its answer was lost
//! for certain, and the retry after it meets what the lost attempt did.
//!
//! One node behind the proxy is all these need; they run on the suite's cluster (node 1) so
//! that they share its start. Proxies listen on `NEARDUP_FAULTS_PORT` + 3 and on; the
//! toxiproxy API on `NEARDUP_FAULTS_TOXIPROXY_PORT` (default 8474).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, ClaimError, Claims, EsConfig, RetryPolicy};
use neardup::serve::{EsBackend, ServeConfig, Service};
use neardup::{Fingerprinter, Profile};
use serde_json::{json, Value};

use crate::backfill;
use crate::check::{self, Row};
use crate::cluster::Cluster;
use crate::common::es as t;
use crate::common::serve::{call, put_json, variants};

/// A toxiproxy server started by `scripts/toxiproxy-up`, stopped when dropped.
struct Toxiproxy {
    port: u16,
    api: String,
    http: reqwest::Client,
}

fn toxiproxy_script(port: u16, args: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/toxiproxy-up");
    let status = Command::new(&script)
        .args(["--port", &port.to_string()])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        status.success(),
        "scripts/toxiproxy-up --port {port} {args:?} failed: the lost-answer scenarios need \
         toxiproxy (built with Go by that script) and that port free"
    );
}

impl Toxiproxy {
    fn start() -> Toxiproxy {
        let port = std::env::var("NEARDUP_FAULTS_TOXIPROXY_PORT")
            .ok()
            .map(|p| p.parse().expect("NEARDUP_FAULTS_TOXIPROXY_PORT is a port"))
            .unwrap_or(8474);
        toxiproxy_script(port, &[]);
        Toxiproxy {
            port,
            api: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.api));
        if let Some(body) = body {
            req = req.body(body.to_string());
        }
        let r = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("toxiproxy {method} {path}: {e}"));
        let status = r.status();
        assert!(
            status.is_success(),
            "toxiproxy {method} {path}: {status} {}",
            r.text().await.unwrap_or_default()
        );
    }

    /// Removes every proxy the server has (left by an earlier run that did not stop it).
    async fn clear(&self) {
        let r = self.http.get(format!("{}/proxies", self.api)).send().await;
        let proxies: Value = serde_json::from_str(&r.unwrap().text().await.unwrap()).unwrap();
        for name in proxies.as_object().into_iter().flatten().map(|(k, _)| k) {
            self.call(reqwest::Method::DELETE, &format!("/proxies/{name}"), None)
                .await;
        }
    }

    /// The only proxy: `name` on 127.0.0.1:`listen` to node 1 of `c`; returns its URL.
    async fn proxy(&self, name: &str, listen: u16, c: &Cluster) -> String {
        self.clear().await;
        let upstream = c.url(1).trim_start_matches("http://").to_owned();
        self.call(
            reqwest::Method::POST,
            "/proxies",
            Some(json!({"name": name, "listen": format!("127.0.0.1:{listen}"), "upstream": upstream})),
        )
        .await;
        format!("http://127.0.0.1:{listen}")
    }

    /// From now on every answer through `name` is lost (the request gets through).
    async fn cut(&self, name: &str) {
        let toxic = json!({"name": "lost", "type": "limit_data", "stream": "downstream",
            "attributes": {"bytes": 0}});
        self.call(
            reqwest::Method::POST,
            &format!("/proxies/{name}/toxics"),
            Some(toxic),
        )
        .await;
    }

    /// Answers through `name` arrive again.
    async fn restore(&self, name: &str) {
        self.call(
            reqwest::Method::DELETE,
            &format!("/proxies/{name}/toxics/lost"),
            None,
        )
        .await;
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        toxiproxy_script(self.port, &["--stop"]);
    }
}

/// The port of proxy `i` (0..5): beside the suite's nodes.
fn proxy_port(c: &Cluster, i: u16) -> u16 {
    c.port + 3 + i
}

fn client_of(url: &str) -> Elasticsearch {
    EsConfig::new(url).unwrap().client().unwrap()
}

/// `index`'s statistic at `path` (e.g. `primaries.indexing.index_total`), asked directly.
async fn stat(client: &Elasticsearch, index: &str, metric: &str, path: &[&str]) -> u64 {
    let r = es::request(
        client,
        &RetryPolicy::default(),
        "index stats",
        Method::Get,
        &format!("/{}/_stats/{metric}", es::path_segment(index)),
        &[],
        None,
    )
    .await
    .unwrap();
    let mut v = &r["_all"];
    for p in path {
        v = &v[*p];
    }
    v.as_u64().unwrap_or(0)
}

/// Writes applied to `index`'s primaries (index and delete operations).
async fn writes(client: &Elasticsearch, index: &str) -> u64 {
    stat(
        client,
        index,
        "indexing",
        &["primaries", "indexing", "index_total"],
    )
    .await
        + stat(
            client,
            index,
            "indexing",
            &["primaries", "indexing", "delete_total"],
        )
        .await
}

/// Realtime gets served by `index` (each id of an `_mget` counts).
async fn gets(client: &Elasticsearch, index: &str) -> u64 {
    stat(client, index, "get", &["total", "get", "total"]).await
}

/// Polls `f` until it says yes or `done` does (a job that ended); returns whether `f` did.
async fn until<F, Fut>(mut f: F, mut done: impl FnMut() -> bool) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if f().await {
            return true;
        }
        if done() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many answers each scenario has lost for it (at least).
const CUTS: u32 = 4;

/// `neardup backfill` through the proxy: answers to its `_bulk` writes (and its scroll pages)
/// lost `CUTS` times, each after a write it sent was seen applied. The job retries or is
/// rerun (the same command) until it completes.
pub async fn bulk(c: &Cluster, n: usize) -> Row {
    let start = Instant::now();
    let client = c.client();
    let index = "faults-lost-bulk";
    let docs = t::shared_articles(n);
    backfill::index_with(c, &client, index, &docs).await;
    let tp = Toxiproxy::start();
    let es = tp.proxy("bulk", proxy_port(c, 0), c).await;
    let dir = tempfile::tempdir().unwrap();

    let mut runs = 1;
    let mut child = backfill::spawn_backfill(&es, index, dir.path(), runs);
    let mut cuts = 0;
    // The job is under way (it has written) before the first cut.
    let loaded = writes(&client, index).await;
    let started = until(
        || async { writes(&client, index).await > loaded },
        || child.try_wait().unwrap().is_some(),
    )
    .await;
    while started && cuts < CUTS {
        let before = writes(&client, index).await;
        tp.cut("bulk").await;
        let applied = until(
            || async { writes(&client, index).await > before },
            || child.try_wait().unwrap().is_some(),
        )
        .await;
        tp.restore("bulk").await;
        if !applied {
            break;
        }
        cuts += 1;
        // Answers flow again until the job has written more.
        let after = writes(&client, index).await;
        if !until(
            || async { writes(&client, index).await > after },
            || child.try_wait().unwrap().is_some(),
        )
        .await
        {
            break;
        }
    }
    assert!(
        cuts > 0,
        "lost-answer-bulk: the back-fill ended before an answer could be lost"
    );
    let mut status = child.wait().unwrap();
    while !status.success() && runs < 4 {
        runs += 1;
        status = backfill::spawn_backfill(&es, index, dir.path(), runs)
            .wait()
            .unwrap();
    }
    let f = check::fingerprints(&client, index, &docs).await;
    let lost = f.absent + backfill::acknowledged(dir.path()).saturating_sub(f.right);
    eprintln!(
        "lost-answer-bulk: {cuts} times an applied write's answer lost; doubled or stray documents: {}",
        f.extra
    );
    assert_eq!(f.extra, 0, "lost-answer-bulk: no document doubled");
    if !status.success() {
        for r in 1..=runs {
            let log = std::fs::read_to_string(dir.path().join(format!("run-{r}.log")));
            eprintln!("run {r}:\n{}", log.unwrap_or_default());
        }
    }
    t::delete_index(&client, index).await;
    Row {
        scenario: format!(
            "lost answers: back-fill `_bulk` (and scroll) answers lost {cuts} times, retried"
        ),
        lost,
        wrong_or_missing: f.wrong + f.missing,
        completed: status.success(),
        runs,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// The records of `keys` in the claims index `index`, read directly: holder per key (`None`:
/// no record, `Some(None)`: a record nobody holds).
async fn holders(client: &Elasticsearch, index: &str, keys: &[String]) -> Vec<Option<Value>> {
    let r = es::request(
        client,
        &RetryPolicy::default(),
        "claims: read",
        Method::Post,
        &format!("/{}/_mget", es::path_segment(index)),
        &[],
        Some(&es::Body::Json(json!({ "ids": keys }))),
    )
    .await
    .unwrap();
    r["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["found"] == true).then(|| d["_source"]["holder"].clone()))
        .collect()
}

/// Claims of a fresh claims index for `name`: one reached through `url`, with a lease far
/// beyond the claimants' deadlines (a claimant waiting for its own claim fails, it is not
/// rescued by the lease).
async fn fresh_claims(direct: &Elasticsearch, url: &str, name: &str) -> Claims {
    let mut claims = Claims::new(client_of(url), RetryPolicy::default(), name);
    claims.lease = Duration::from_secs(600);
    t::delete_index(direct, claims.index()).await;
    Claims::new(direct.clone(), RetryPolicy::default(), name)
        .ensure_index()
        .await
        .unwrap();
    claims
}

/// How long a claimant waits for keys held by someone: far less than the lease.
const CLAIM_DEADLINE: Duration = Duration::from_secs(120);

/// `Claims::acquire` through the proxy, the answer to its `_bulk` of creates lost (the records
/// seen created before the answers flow again), `CUTS` rounds of three fresh keys. The retry's
/// 409s are the claimant's own records: it must hold every key (no wait for its own lease, no
/// "held by someone"), and its release (guarded by the versions it owns) must delete them.
pub async fn claim_create(c: &Cluster) -> Row {
    let start = Instant::now();
    let direct = c.client();
    let tp = Toxiproxy::start();
    let url = tp.proxy("claims", proxy_port(c, 1), c).await;
    let claims = fresh_claims(&direct, &url, "faults-lost-claim-create").await;
    let (mut false_409s, mut not_released, mut failed) = (0, 0, 0);
    for round in 0..CUTS {
        let keys: Vec<String> = ["m1", "m2", "s0:7"]
            .iter()
            .map(|k| format!("{k}-{round}"))
            .collect();
        tp.cut("claims").await;
        let task = {
            let (claims, keys) = (claims.clone(), keys.clone());
            tokio::spawn(async move {
                claims
                    .acquire(&keys, "lost-answer", Instant::now() + CLAIM_DEADLINE)
                    .await
            })
        };
        until(
            || async {
                holders(&direct, claims.index(), &keys)
                    .await
                    .iter()
                    .all(Option::is_some)
            },
            || false,
        )
        .await;
        tp.restore("claims").await;
        match task.await.unwrap() {
            Ok(held) => {
                let mut got: Vec<&str> = held.keys().collect();
                got.sort_unstable();
                assert_eq!(got, keys.iter().map(String::as_str).collect::<Vec<_>>());
                claims.release(held).await;
                not_released += holders(&direct, claims.index(), &keys)
                    .await
                    .iter()
                    .filter(|h| h.is_some())
                    .count() as u64;
            }
            Err(ClaimError::Timeout { key, holder }) => {
                eprintln!("lost-answer-claim-create: waited for `{key}` held by `{holder}`");
                false_409s += 1;
            }
            Err(e) => {
                eprintln!("lost-answer-claim-create: {e}");
                failed += 1;
            }
        }
    }
    t::delete_index(&direct, claims.index()).await;
    Row {
        scenario: format!(
            "lost answers: a claim's create (`op_type=create`) lost {CUTS} times, retried"
        ),
        lost: failed,
        wrong_or_missing: not_released,
        false_409s: Some(false_409s),
        completed: failed + false_409s == 0,
        runs: 1,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// A claimant through the proxy waits for keys another holds (reading their records with
/// `_mget`); an `_mget`'s answer is lost (seen served before the answers flow again) while the
/// other releases them. The retried read sees them free: the claimant holds every key.
pub async fn mget(c: &Cluster) -> Row {
    let start = Instant::now();
    let direct = c.client();
    let tp = Toxiproxy::start();
    let url = tp.proxy("mget", proxy_port(c, 2), c).await;
    let waiting = fresh_claims(&direct, &url, "faults-lost-mget").await;
    let first = Claims::new(direct.clone(), RetryPolicy::default(), "faults-lost-mget");
    let (mut not_held, mut failed) = (0, 0);
    for round in 0..CUTS {
        let keys: Vec<String> = ["m1", "s2:9"]
            .iter()
            .map(|k| format!("{k}-{round}"))
            .collect();
        let held = first
            .acquire(&keys, "first", Instant::now() + CLAIM_DEADLINE)
            .await
            .unwrap();
        let before = gets(&direct, waiting.index()).await;
        let task = {
            let (claims, keys) = (waiting.clone(), keys.clone());
            tokio::spawn(async move {
                claims
                    .acquire(&keys, "second", Instant::now() + CLAIM_DEADLINE)
                    .await
            })
        };
        // The second claimant reads the records (it found them held): cut, and wait for one
        // more read served.
        until(
            || async { gets(&direct, waiting.index()).await > before },
            || false,
        )
        .await;
        tp.cut("mget").await;
        let cut_at = gets(&direct, waiting.index()).await;
        until(
            || async { gets(&direct, waiting.index()).await > cut_at },
            || false,
        )
        .await;
        first.release(held).await;
        tp.restore("mget").await;
        match task.await.unwrap() {
            Ok(held) => {
                let by = holders(&direct, waiting.index(), &keys).await;
                not_held += by
                    .iter()
                    .filter(|h| h.as_ref() != Some(&json!("second")))
                    .count() as u64;
                waiting.release(held).await;
            }
            Err(e) => {
                eprintln!("lost-answer-mget: {e}");
                failed += 1;
            }
        }
    }
    t::delete_index(&direct, waiting.index()).await;
    Row {
        scenario: format!(
            "lost answers: a claims `_mget` lost {CUTS} times while the keys are released, retried"
        ),
        lost: failed,
        wrong_or_missing: not_held,
        false_409s: Some(failed),
        completed: failed == 0,
        runs: 1,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// The service (`neardup serve`'s router in process) talks to the cluster through the
/// proxy; 20 concurrent dedupe `PUT`s of near-duplicate variants of one article. Answers are
/// lost `CUTS` times, each until a write (a claim, a release or the article) is seen applied
/// or an `_mget` (of claims or of recent inserts) served.
/// Exactly one variant must be stored, every other answer a 409 naming it: a 409 that names
/// no stored article is false, a 2xx whose article is not stored a lost insert.
pub async fn dedupe_put(c: &Cluster) -> Row {
    let start = Instant::now();
    let direct = c.client();
    let index = "faults-lost-dedupe";
    backfill::index_with(c, &direct, index, &[]).await;
    let claims_index = format!("neardup-claims-{index}");
    t::delete_index(&direct, &claims_index).await;
    let tp = Toxiproxy::start();
    let url = tp.proxy("dedupe", proxy_port(c, 3), c).await;
    let app = Arc::new(Service::new(
        ServeConfig {
            timeout: CLAIM_DEADLINE,
            // What the index holds is read once, by the warm-up below (those reads are not
            // what this scenario loses).
            meta_ttl: Duration::from_secs(3600),
            ..ServeConfig::default()
        },
        EsBackend {
            client: client_of(&url),
            retry: RetryPolicy::default(),
        },
        Fingerprinter::for_profile(Profile::Default),
    ))
    .router();
    let v = variants(20);
    // Warm-up, answers flowing: the service reads what the index holds and makes its claims
    // index, with an article far from the variants (the shortest of those they come from).
    let (_, warm) = t::shared_articles(200)
        .into_iter()
        .min_by_key(|(_, a)| a["content"].as_str().map_or(0, str::len))
        .unwrap();
    let (status, body, _) = call(
        &app,
        put_json(&format!("/v1/{index}/articles/warm?dedupe=true"), &warm),
    )
    .await;
    assert_eq!(
        status.as_u16(),
        201,
        "lost-answer-dedupe-put: warm-up: {body}"
    );
    // Requests applied or served: writes and realtime gets (`_mget`) of the article index and
    // the claims index (which the warm-up made). A window ends at the first of either, so
    // that it never outlasts the retries of claimants that only read while they wait.
    let all_writes = || async {
        writes(&direct, index).await
            + writes(&direct, &claims_index).await
            + gets(&direct, index).await
            + gets(&direct, &claims_index).await
    };
    let before = all_writes().await;
    tp.cut("dedupe").await;
    let tasks: Vec<_> = v
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (app, req) = (
                app.clone(),
                put_json(&format!("/v1/{index}/articles/v{i}?dedupe=true"), a),
            );
            tokio::spawn(async move { (i, call(&app, req).await) })
        })
        .collect();
    let finished = || tasks.iter().all(|t| t.is_finished());
    let mut cuts = 0;
    let mut mark = before;
    loop {
        let applied = until(|| async { all_writes().await > mark }, finished).await;
        tp.restore("dedupe").await;
        if applied {
            cuts += 1;
        }
        if cuts >= CUTS || finished() {
            break;
        }
        let now = all_writes().await;
        if !until(|| async { all_writes().await > now }, finished).await {
            break;
        }
        mark = all_writes().await;
        tp.cut("dedupe").await;
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    t::refresh(&direct, index).await;
    let stored: Vec<String> = check::all_docs(&direct, index)
        .await
        .into_keys()
        .filter(|id| id != "warm")
        .collect();
    let as_loaded: Vec<(String, Value)> =
        stored.iter().map(|id| (id.clone(), Value::Null)).collect();
    let f = check::fingerprints(&direct, index, &as_loaded).await;
    let (mut lost, mut false_409s, mut other) = (0, 0, Vec::new());
    for (i, (status, body, _)) in &answers {
        match status.as_u16() {
            200 | 201 => {
                if !stored.contains(&format!("v{i}")) {
                    lost += 1;
                }
            }
            409 => {
                let names_stored = body.to_string().contains("duplicate")
                    && stored
                        .iter()
                        .any(|id| body.to_string().contains(&format!("\"{id}\"")));
                if !names_stored {
                    false_409s += 1;
                    eprintln!("lost-answer-dedupe-put: v{i}: a false 409: {body}");
                }
            }
            s => other.push(format!("v{i}: {s} {body}")),
        }
    }
    let statuses: std::collections::BTreeMap<u16, usize> =
        answers
            .iter()
            .fold(Default::default(), |mut m, (_, (s, _, _))| {
                *m.entry(s.as_u16()).or_default() += 1;
                m
            });
    eprintln!(
        "lost-answer-dedupe-put: {cuts} times an applied write's or a served _mget's answer lost; stored {stored:?}; answers {statuses:?}"
    );
    if !other.is_empty() {
        // What still holds keys, to tell a slow holder from claimants waiting for each other.
        t::refresh(&direct, &claims_index).await;
        let held = t::call(
            &direct,
            Method::Post,
            &format!("/{claims_index}/_search"),
            Some(json!({ "size": 100, "query": { "exists": { "field": "holder" } } })),
        )
        .await;
        eprintln!(
            "lost-answer-dedupe-put: claims still held: {}",
            held["hits"]
        );
    }
    assert!(other.is_empty(), "lost-answer-dedupe-put: {other:?}");
    assert!(cuts > 0, "lost-answer-dedupe-put: no answer was lost");
    t::delete_index(&direct, index).await;
    t::delete_index(&direct, &claims_index).await;
    Row {
        scenario: format!(
            "lost answers: service dedupe `PUT`s racing 20 near-duplicates, answers lost {cuts} times"
        ),
        lost: lost + u64::from(stored.is_empty()),
        wrong_or_missing: f.wrong + f.missing,
        near_duplicates: Some(stored.len().saturating_sub(1) as u64),
        false_409s: Some(false_409s),
        completed: other.is_empty(),
        runs: 1,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

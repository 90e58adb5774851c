//! Faults under the service (`neardup serve`'s router, in process, as the binary runs it, with
//! a client for every node's URL and the binary's retry policy): the node holding the primary
//! SIGKILLed, then restarted, while
//!
//! - near-duplicates race through dedupe `PUT`s (`?dedupe=true`): sets of variants of one
//!   article each, a third sent before the fault, a third while the node is down and a third
//!   while it restarts; through the router in process, or through two `neardup serve`
//!   processes of the binary (each its own caches, claims client and node pool), each variant
//!   of a set to the other process than the one before;
//! - articles are loaded through the bulk endpoint (`POST /v1/{index}/articles/_bulk`).
//!
//! A request or a bulk item answered with an error is sent again once the index is green, as
//! a client would, until it is answered for good. Then the figures: acknowledged (201, 200)
//! articles lost, wrong or missing fingerprints (brute force, [`check::fingerprints`]), articles
//! stored beyond one per near-duplicate set, and 409s naming no stored article.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::Router;
use neardup::es::RetryPolicy;
use neardup::serve::{EsBackend, ServeConfig, Service};
use neardup::{Fingerprinter, Profile};
use serde_json::{json, Value};

use crate::backfill::index_with;
use crate::check::{self, Row};
use crate::cluster::Cluster;
use crate::common::es as t;
use crate::common::serve::{call, post_ndjson, put_json};

/// Near-duplicate sets and variants in each.
const SETS: usize = 6;
const VARIANTS: usize = 8;

/// How often an answered-with-an-error request is sent again before the scenario gives up.
const RESENDS: u32 = 120;

/// The service as `neardup serve` builds it, on every node's URL, with a request timeout of
/// 25 s (`--timeout 25s`: below the claims' 30 s lease, as it must be; the default 10 s is
/// shorter than an Elasticsearch fail-over takes, so every request in flight then is a 504).
fn service(c: &Cluster) -> Router {
    Arc::new(Service::new(
        ServeConfig {
            timeout: Duration::from_secs(25),
            ..ServeConfig::default()
        },
        EsBackend {
            client: c.client(),
            retry: RetryPolicy::default(),
        },
        Fingerprinter::for_profile(Profile::Default),
    ))
    .router()
}

/// `SETS` sets of `VARIANTS` near-duplicates: variants of `SETS` long articles of the shared
/// corpus (each drops a different few sentences, so every two of a set are near-duplicates
/// and no two are equal).
fn near_duplicate_sets() -> Vec<Vec<Value>> {
    let mut articles = t::shared_articles(400);
    articles.sort_by_key(|(_, a)| std::cmp::Reverse(a["content"].as_str().map_or(0, str::len)));
    let mut titles = BTreeSet::new();
    articles
        .into_iter()
        .map(|(_, a)| a)
        .filter(|a| titles.insert(a["title"].to_string()))
        .take(SETS)
        .map(|a| {
            let content = a["content"].as_str().unwrap().to_owned();
            let sentences: Vec<&str> = content.split_inclusive('。').collect();
            assert!(sentences.len() > 12, "a long article");
            (0..VARIANTS)
                .map(|i| {
                    let body: String = sentences
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i && (j + 3 * i) % 17 != 0)
                        .map(|(_, s)| *s)
                        .collect();
                    json!({ "title": a["title"], "content": body })
                })
                .collect()
        })
        .collect()
}

/// Whether an answer is final: stored (201, 200) or refused as a duplicate (409).
fn answered(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::CREATED | StatusCode::OK | StatusCode::CONFLICT
    )
}

/// Sends the `PUT` of `article` at `path` until it is answered for good (see [`answered`]),
/// a second apart.
async fn resend(front: Front, path: String, article: Value) -> (StatusCode, Value) {
    for _ in 0..RESENDS {
        let (status, body) = front.put(&path, &article).await;
        if answered(status) {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("{path}: not answered after {RESENDS} resends");
}

/// SIGKILLs the node holding `index`'s primary (without blocking the service's tasks).
async fn kill_primary(c: &Cluster, index: &str) -> usize {
    let node = c.primary_node(&c.client(), index).await;
    tokio::task::block_in_place(|| c.kill(node));
    node
}

/// Where dedupe `PUT`s go: the service's router in process, or a `neardup serve` process over
/// a socket (an answer that never came is a `502`, and is sent again).
#[derive(Clone)]
enum Front {
    Router(Router),
    Process(String),
}

impl Front {
    async fn put(&self, path: &str, article: &Value) -> (StatusCode, Value) {
        match self {
            Front::Router(app) => {
                let (status, body, _) = call(app, put_json(path, article)).await;
                (status, body)
            }
            Front::Process(addr) => {
                let (addr, req) = (
                    addr.clone(),
                    raw("PUT", path, "application/json", &article.to_string()),
                );
                match tokio::task::spawn_blocking(move || try_http(&addr, &req))
                    .await
                    .unwrap()
                {
                    Some((s, body)) => (
                        status(s),
                        serde_json::from_str(&body).unwrap_or(Value::String(body)),
                    ),
                    None => (StatusCode::BAD_GATEWAY, Value::Null),
                }
            }
        }
    }
}

/// Dedupe `PUT`s racing through the router in process, the claims' primary killed.
pub async fn dedupe(c: &Cluster) -> Row {
    let row = dedupe_through(c, "faults-serve-dedupe", &[Front::Router(service(c))]).await;
    Row {
        scenario: format!(
            "service dedupe PUTs racing ({SETS} sets of {VARIANTS} near-duplicates): node holding the claims' primary SIGKILLed, restarted"
        ),
        ..row
    }
}

/// The same race through two `neardup serve` processes (the binary, `--timeout 25s`), each
/// variant of a set to the other process than the one before.
pub async fn dedupe_two_processes(c: &Cluster) -> Row {
    let (_first, a) = spawn_serve(c);
    let (_second, b) = spawn_serve(c);
    let fronts = [Front::Process(a), Front::Process(b)];
    let row = dedupe_through(c, "faults-serve-two", &fronts).await;
    Row {
        scenario: format!(
            "two neardup serve processes, dedupe PUTs racing ({SETS} sets of {VARIANTS} near-duplicates): node holding the claims' primary SIGKILLed, restarted"
        ),
        ..row
    }
}

/// Sets of near-duplicates `PUT` at once through `fronts` (variant `v` of set `s` through
/// front `(s + v) % fronts.len()`, and sent again through it when answered with an error),
/// a third before the node holding the claims' primary is killed, a third while it is down
/// and a third while it restarts: the figures.
async fn dedupe_through(c: &Cluster, index: &str, fronts: &[Front]) -> Row {
    let start = Instant::now();
    let client = c.client();
    index_with(c, &client, index, &[]).await;
    t::delete_index(&client, &format!("neardup-claims-{index}")).await;
    let sets = near_duplicate_sets();
    // One unrelated article first: it makes the claims index, whose primary's node is killed.
    let (warm_id, warm) = t::example_articles().into_iter().next().unwrap();
    let warm_path = format!("/v1/{index}/articles/{warm_id}?dedupe=true");
    let (status, body) = fronts[0].put(&warm_path, &warm).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let claims = format!("neardup-claims-{index}");
    c.wait_green(&client, &claims).await;
    let index_primary = c.primary_node(&client, index).await;
    let path = |s: usize, v: usize| format!("/v1/{index}/articles/s{s}v{v}?dedupe=true");
    let front = |s: usize, v: usize| fronts[(s + v) % fronts.len()].clone();
    let wave = |range: std::ops::Range<usize>| {
        let mut tasks = Vec::new();
        for s in range {
            for (v, a) in sets[s].iter().enumerate() {
                let (front, path, a) = (front(s, v), path(s, v), a.clone());
                tasks.push((
                    (s, v),
                    tokio::spawn(async move { front.put(&path, &a).await }),
                ));
            }
        }
        tasks
    };
    let third = SETS / 3;
    let mut tasks = wave(0..third);
    let node = kill_primary(c, &claims).await;
    tasks.extend(wave(third..2 * third));
    tokio::time::sleep(Duration::from_secs(3)).await;
    tasks.extend(wave(2 * third..SETS));
    tokio::task::block_in_place(|| c.restart(node));
    c.wait_green(&client, index).await;

    let mut answers: BTreeMap<(usize, usize), (StatusCode, Value)> = BTreeMap::new();
    let mut errors: BTreeMap<String, u32> = BTreeMap::new();
    for (key, task) in tasks {
        answers.insert(key, task.await.unwrap());
    }
    // The ones answered with an error, sent again all at once: they race too.
    let mut again = Vec::new();
    for (&(s, v), (status, body)) in &answers {
        if !answered(*status) {
            eprintln!("{index}: s{s}v{v}: {status} {body}");
            *errors
                .entry(format!("{} {}", status.as_u16(), body["error"]["code"]))
                .or_default() += 1;
            let (front, path, article) = (front(s, v), path(s, v), sets[s][v].clone());
            again.push(((s, v), tokio::spawn(resend(front, path, article))));
        }
    }
    let resent = again.len();
    for (key, task) in again {
        answers.insert(key, task.await.unwrap());
    }
    let stored = check::all_docs(&client, index).await;
    let mut acknowledged: Vec<(String, Value)> = answers
        .iter()
        .filter(|(_, (status, _))| *status != StatusCode::CONFLICT)
        .map(|(&(s, v), _)| (format!("s{s}v{v}"), sets[s][v].clone()))
        .collect();
    acknowledged.push((warm_id, warm));
    let mut doubled = 0;
    for s in 0..SETS {
        let in_set = stored
            .keys()
            .filter(|id| id.starts_with(&format!("s{s}v")))
            .count();
        assert!(in_set > 0, "set {s}: nothing stored: {answers:?}");
        doubled += in_set as u64 - 1;
    }
    let false_409s = answers
        .values()
        .filter(|(status, body)| {
            *status == StatusCode::CONFLICT
                && !body["matches"].as_array().is_some_and(|m| {
                    m.iter()
                        .any(|m| m["id"].as_str().is_some_and(|id| stored.contains_key(id)))
                })
        })
        .count() as u64;
    let f = check::fingerprints(&client, index, &acknowledged).await;
    eprintln!(
        "{index}: {} PUTs, {resent} answered with an error ({errors:?}) and resent, {} stored; node {node} (the claims' primary) killed, the index's primary on node {index_primary}",
        answers.len(),
        stored.len()
    );
    Row {
        lost: f.absent,
        wrong_or_missing: f.wrong + f.missing,
        near_duplicates: Some(doubled + f.extra),
        false_409s: Some(false_409s),
        completed: true,
        runs: 1 + u32::from(resent > 0),
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// Articles per bulk request, and bulk requests in flight at once.
const BATCH: usize = 50;
const IN_FLIGHT: usize = 4;

pub async fn bulk(c: &Cluster, n: usize) -> Row {
    let start = Instant::now();
    let client = c.client();
    let index = "faults-serve-bulk";
    index_with(c, &client, index, &[]).await;
    let app = service(c);
    let docs = t::shared_articles(n);
    let path = format!("/v1/{index}/articles/_bulk");
    let lines = |batch: &[(String, Value)]| -> Vec<String> {
        batch
            .iter()
            .map(|(id, a)| {
                let mut a = a.clone();
                a["id"] = json!(id);
                a.to_string()
            })
            .collect()
    };
    let batches: Vec<Vec<(String, Value)>> = docs.chunks(BATCH).map(<[_]>::to_vec).collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sender = {
        let (app, path, batches) = (app.clone(), path.clone(), batches.clone());
        tokio::spawn(async move {
            let queue = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            let mut tasks = Vec::new();
            for (b, batch) in batches.into_iter().enumerate() {
                let permit = queue.clone().acquire_owned().await.unwrap();
                let (app, req, tx) = (app.clone(), post_ndjson(&path, &lines(&batch)), tx.clone());
                tasks.push(tokio::spawn(async move {
                    let answer = call(&app, req).await;
                    drop(permit);
                    let _ = tx.send(b);
                    (b, answer.0, answer.1)
                }));
            }
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.unwrap());
            }
            out
        })
    };
    // The fault once a fifth of the batches are answered.
    let mut done = 0;
    while done < batches.len() / 5 {
        rx.recv()
            .await
            .expect("the bulk requests go on until the fault");
        done += 1;
    }
    assert!(
        done < batches.len(),
        "the load was done before the fault: give it more articles"
    );
    let node = kill_primary(c, index).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    tokio::task::block_in_place(|| c.restart(node));
    let answers = sender.await.unwrap();
    c.wait_green(&client, index).await;

    let mut acknowledged: BTreeSet<String> = BTreeSet::new();
    let mut failed_items = 0;
    let mut failed_requests = 0;
    let take = |body: &Value, acknowledged: &mut BTreeSet<String>| -> Vec<String> {
        let mut failed = Vec::new();
        for item in body["items"].as_array().unwrap() {
            let id = item["id"].as_str().unwrap().to_owned();
            match item["status"].as_u64() {
                Some(200 | 201) => {
                    acknowledged.insert(id);
                }
                _ => failed.push(id),
            }
        }
        failed
    };
    let mut resend_batches: Vec<Vec<(String, Value)>> = Vec::new();
    for (b, status, body) in &answers {
        if *status != StatusCode::OK {
            failed_requests += 1;
            resend_batches.push(batches[*b].clone());
            continue;
        }
        let failed = take(body, &mut acknowledged);
        failed_items += failed.len();
        let failed: BTreeSet<String> = failed.into_iter().collect();
        let again: Vec<(String, Value)> = batches[*b]
            .iter()
            .filter(|(id, _)| failed.contains(id))
            .cloned()
            .collect();
        if !again.is_empty() {
            resend_batches.push(again);
        }
    }
    for batch in &resend_batches {
        let mut rest = batch.clone();
        for attempt in 0..RESENDS {
            let (status, body, _) = call(&app, post_ndjson(&path, &lines(&rest))).await;
            if status == StatusCode::OK {
                let failed: BTreeSet<String> = take(&body, &mut acknowledged).into_iter().collect();
                rest.retain(|(id, _)| failed.contains(id));
                if rest.is_empty() {
                    break;
                }
            }
            assert!(
                attempt + 1 < RESENDS,
                "bulk: not answered after {RESENDS} resends"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let loaded: Vec<(String, Value)> = docs
        .iter()
        .filter(|(id, _)| acknowledged.contains(id))
        .cloned()
        .collect();
    assert_eq!(
        loaded.len(),
        docs.len(),
        "bulk: every article acknowledged in the end"
    );
    let f = check::fingerprints(&client, index, &loaded).await;
    assert_eq!(f.extra, 0, "bulk: no article doubled or made up");
    eprintln!(
        "serve-bulk: {} articles in {} requests; {failed_requests} request(s) and {failed_items} item(s) answered with an error and resent; node {node} killed",
        docs.len(),
        batches.len()
    );
    Row {
        scenario: "service bulk endpoint loading: node holding the primary SIGKILLed, restarted"
            .into(),
        lost: f.absent,
        wrong_or_missing: f.wrong + f.missing,
        completed: true,
        runs: 1 + u32::from(!resend_batches.is_empty()),
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// One HTTP/1.1 request over a socket to a `neardup serve` process that may be killed under
/// it: the status and body, or `None` when no whole answer came back.
fn try_http(addr: &str, request: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).ok()?;
    conn.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).ok()?;
    let status = answer.get(9..12)?.parse().ok()?;
    let (_, body) = answer.split_once("\r\n\r\n")?;
    Some((status, body.to_owned()))
}

fn raw(method: &str, path: &str, content_type: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A `neardup serve` process, SIGKILLed when dropped (also when a scenario fails).
struct Serving(std::process::Child);

impl Serving {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `neardup serve` on every node's URL (a port of its own), its log drained; returns the
/// process and where it listens.
fn spawn_serve(c: &Cluster) -> (Serving, String) {
    let (child, lines, addr) = crate::common::serve::start_serving(
        std::process::Command::new(env!("CARGO_BIN_EXE_neardup")).args([
            "--log-format",
            "json",
            "serve",
            "--es",
            &c.urls(),
            "--listen",
            "127.0.0.1:0",
            "--timeout",
            "25s",
        ]),
    );
    std::thread::spawn(move || lines.for_each(drop));
    (Serving(child), addr)
}

/// neardup's own `serve` process SIGKILLed while near-duplicates race through dedupe `PUT`s
/// and articles load through the bulk endpoint; a new process is started, every request not
/// answered for good is sent to it again (a dedupe `PUT` whose claims the dead process held
/// waits for their lease to run out), and after the lease one more near-duplicate of each set
/// is refused at once (no claim left blocking).
pub async fn neardup_sigkill(c: &Cluster, n: usize) -> Row {
    let start = Instant::now();
    let client = c.client();
    let index = "faults-serve-sigkill";
    // The bulk load goes to an index of its own: the corpus it loads holds the articles the
    // near-duplicate sets are made of, which would refuse whole sets.
    let bulk_index = "faults-serve-sigkill-bulk";
    index_with(c, &client, index, &[]).await;
    index_with(c, &client, bulk_index, &[]).await;
    t::delete_index(&client, &format!("neardup-claims-{index}")).await;
    let sets = near_duplicate_sets();
    let docs = t::shared_articles(n.min(1000));
    let batches: Vec<Vec<(String, Value)>> = docs.chunks(BATCH).map(<[_]>::to_vec).collect();
    let bulk_body = |batch: &[(String, Value)]| -> String {
        batch
            .iter()
            .map(|(id, a)| {
                let mut a = a.clone();
                a["id"] = json!(id);
                a.to_string() + "\n"
            })
            .collect()
    };
    let put = |s: usize, v: usize, a: &Value| {
        raw(
            "PUT",
            &format!("/v1/{index}/articles/s{s}v{v}?dedupe=true"),
            "application/json",
            &a.to_string(),
        )
    };
    let bulk = |batch: &[(String, Value)]| {
        raw(
            "POST",
            &format!("/v1/{bulk_index}/articles/_bulk"),
            "application/x-ndjson",
            &bulk_body(batch),
        )
    };

    let (mut first, addr) = spawn_serve(c);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let loader = {
        let (addr, requests) = (
            addr.clone(),
            batches.iter().map(|b| bulk(b)).collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || {
            requests
                .iter()
                .map(|r| {
                    let answer = try_http(&addr, r);
                    let _ = tx.send(());
                    answer
                })
                .collect::<Vec<_>>()
        })
    };
    let spawn_puts = |range: std::ops::Range<usize>| {
        let mut tasks = Vec::new();
        for s in range {
            for (v, a) in sets[s].iter().enumerate() {
                let (addr, req) = (addr.clone(), put(s, v, a));
                tasks.push((
                    (s, v),
                    tokio::task::spawn_blocking(move || try_http(&addr, &req)),
                ));
            }
        }
        tasks
    };
    let mut puts = spawn_puts(0..SETS / 2);
    for _ in 0..3 {
        rx.recv().await.expect("bulk requests before the kill");
    }
    puts.extend(spawn_puts(SETS / 2..SETS));
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.kill();
    let killed = Instant::now();
    let bulk_answers = loader.await.unwrap();
    let mut answers: BTreeMap<(usize, usize), Option<(u16, String)>> = BTreeMap::new();
    for (key, task) in puts {
        answers.insert(key, task.await.unwrap());
    }
    let unanswered_puts = answers
        .values()
        .filter(|a| !a.as_ref().is_some_and(|(s, _)| answered(status(*s))))
        .count();
    let unanswered_bulks = bulk_answers
        .iter()
        .filter(|a| a.as_ref().is_none_or(|(s, _)| *s != 200))
        .count();
    assert!(
        unanswered_puts + unanswered_bulks > 0,
        "everything was answered before the kill: the kill came too late"
    );

    // A new process; everything not answered for good is sent to it, the PUTs all at once.
    let (second, addr) = spawn_serve(c);
    let mut again = Vec::new();
    for (&(s, v), a) in &answers {
        if !a.as_ref().is_some_and(|(st, _)| answered(status(*st))) {
            let (addr, req) = (addr.clone(), put(s, v, &sets[s][v]));
            again.push((
                (s, v),
                tokio::task::spawn_blocking(move || {
                    for _ in 0..RESENDS {
                        if let Some((st, body)) = try_http(&addr, &req) {
                            if answered(status(st)) {
                                return Some((st, body));
                            }
                        }
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    panic!("s{s}v{v}: not answered after {RESENDS} resends");
                }),
            ));
        }
    }
    let mut acknowledged: BTreeSet<String> = BTreeSet::new();
    let mut rest: Vec<(String, Value)> = Vec::new();
    for (b, a) in bulk_answers.iter().enumerate() {
        match a {
            Some((200, body)) => {
                let body: Value = serde_json::from_str(body).unwrap();
                for item in body["items"].as_array().unwrap() {
                    let id = item["id"].as_str().unwrap();
                    if matches!(item["status"].as_u64(), Some(200 | 201)) {
                        acknowledged.insert(id.to_owned());
                    } else {
                        rest.extend(batches[b].iter().filter(|(i, _)| i == id).cloned());
                    }
                }
            }
            _ => rest.extend(batches[b].iter().cloned()),
        }
    }
    let resent_bulk = rest.len();
    // In batches of the first load's size (a request has a body limit); a failed request is
    // sent again a second later.
    let mut failures = 0;
    while !rest.is_empty() {
        let (addr, req) = (addr.clone(), bulk(&rest[..rest.len().min(BATCH)]));
        let answer = tokio::task::spawn_blocking(move || try_http(&addr, &req))
            .await
            .unwrap();
        match answer {
            Some((200, body)) if acknowledge(&body, &mut rest, &mut acknowledged) => {}
            other => {
                eprintln!("serve-sigkill: bulk resend answered {other:?}");
                failures += 1;
                assert!(
                    failures < RESENDS,
                    "bulk: not answered after {RESENDS} resends"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let resent_puts = again.len();
    for (key, task) in again {
        answers.insert(key, task.await.unwrap());
    }

    // After the dead process's lease, one more near-duplicate of each set: refused at once.
    let lease = Duration::from_secs(31);
    tokio::time::sleep(lease.saturating_sub(killed.elapsed())).await;
    let mut blocking = 0;
    for (s, set) in sets.iter().enumerate() {
        let mut late = set[0].clone();
        late["title"] = json!(format!("{}（转载）", set[0]["title"].as_str().unwrap()));
        let (addr, req) = (addr.clone(), put(s, VARIANTS, &late));
        let answer = tokio::task::spawn_blocking(move || try_http(&addr, &req))
            .await
            .unwrap();
        match answer {
            Some((409, _)) => {}
            other => {
                eprintln!("serve-sigkill: late near-duplicate of set {s}: {other:?}");
                blocking += 1;
            }
        }
    }
    assert_eq!(
        blocking, 0,
        "serve-sigkill: claims left blocking after their lease"
    );
    drop(second);

    let stored = check::all_docs(&client, index).await;
    let mut doubled = 0;
    let mut false_409s = 0;
    for s in 0..SETS {
        let in_set = stored
            .keys()
            .filter(|id| id.starts_with(&format!("s{s}v")))
            .count();
        assert!(in_set > 0, "set {s}: nothing stored: {answers:?}");
        doubled += in_set as u64 - 1;
    }
    for (&(s, v), a) in &answers {
        let (st, body) = a.as_ref().unwrap();
        if *st == 409 {
            let body: Value = serde_json::from_str(body).unwrap();
            if !body["matches"].as_array().is_some_and(|m| {
                m.iter()
                    .any(|m| m["id"].as_str().is_some_and(|id| stored.contains_key(id)))
            }) {
                false_409s += 1;
            }
        } else {
            acknowledged.insert(format!("s{s}v{v}"));
        }
    }
    let loaded: Vec<(String, Value)> = docs
        .iter()
        .filter(|(id, _)| acknowledged.contains(id))
        .cloned()
        .collect();
    assert_eq!(
        loaded.len(),
        docs.len(),
        "bulk: every article acknowledged in the end"
    );
    let b = check::fingerprints(&client, bulk_index, &loaded).await;
    assert_eq!(
        b.extra, 0,
        "serve-sigkill: no bulk article doubled or made up"
    );
    let mut stored_puts: Vec<(String, Value)> = Vec::new();
    for (s, set) in sets.iter().enumerate() {
        for (v, a) in set.iter().enumerate() {
            if acknowledged.contains(&format!("s{s}v{v}")) {
                stored_puts.push((format!("s{s}v{v}"), a.clone()));
            }
        }
    }
    let f = check::fingerprints(&client, index, &stored_puts).await;
    eprintln!(
        "serve-sigkill: {} PUTs and {} bulk requests; after the kill {resent_puts} PUTs and {resent_bulk} bulk articles resent to a new process",
        answers.len(),
        batches.len()
    );
    Row {
        scenario: format!(
            "service: neardup serve itself SIGKILLed under dedupe PUTs racing ({SETS} sets of {VARIANTS}) and bulk loading, restarted"
        ),
        lost: f.absent + b.absent,
        wrong_or_missing: f.wrong + f.missing + b.wrong + b.missing,
        near_duplicates: Some(doubled + f.extra),
        false_409s: Some(false_409s),
        completed: true,
        runs: 2,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// Takes the items a bulk answer acknowledges out of `rest` into `acknowledged`; whether
/// there was any.
fn acknowledge(
    body: &str,
    rest: &mut Vec<(String, Value)>,
    acknowledged: &mut BTreeSet<String>,
) -> bool {
    let body: Value = serde_json::from_str(body).unwrap();
    let before = rest.len();
    for item in body["items"].as_array().unwrap() {
        if matches!(item["status"].as_u64(), Some(200 | 201)) {
            let id = item["id"].as_str().unwrap().to_owned();
            rest.retain(|(i, _)| *i != id);
            acknowledged.insert(id);
        }
    }
    rest.len() < before
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

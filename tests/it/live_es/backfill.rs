//! The back-fill against a live node, on real articles in 3-shard indices holding both methods:
//! exact fingerprints (SimHash and MinHash) with every other field byte-identical, SIGKILL and
//! restart, documents changed and deleted during the run, bad documents, a restart of the
//! Elasticsearch node itself, and MinHash added by es-init to a back-filled SimHash index.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::backfill::{
    Backfill, BackfillConfig, BackfillCounts, BackfillReport, Mode, Paging,
};
use neardup::es::{init_index, BlockType, FieldNames, IndexMeta, RetryPolicy};
use neardup::{FingerprintConfig, Fingerprinter, Profile, SimHash};
use serde_json::value::RawValue;
use serde_json::{json, Value};

fn fp() -> Fingerprinter {
    Fingerprinter::for_profile(Profile::Default)
}

/// Both methods, default settings and field names (what `neardup es-init` makes).
fn both() -> IndexMeta {
    IndexMeta::default()
}

/// A 3-shard index with the fingerprint fields of both methods and `docs` loaded.
async fn index_with(client: &Elasticsearch, prefix: &str, docs: &[(String, Value)]) -> TestIndex {
    index_mapped(client, prefix, docs, json!({})).await
}

async fn index_mapped(
    client: &Elasticsearch,
    prefix: &str,
    docs: &[(String, Value)],
    properties: Value,
) -> TestIndex {
    let idx = TestIndex::new(prefix);
    t::call(
        client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({
            "settings": {"number_of_shards": 3, "number_of_replicas": 0},
            "mappings": {"properties": properties},
        })),
    )
    .await;
    init_index(client, &RetryPolicy::none(), &idx.name, &both())
        .await
        .unwrap();
    for chunk in docs.chunks(500) {
        t::load(client, &idx.name, chunk).await;
    }
    idx
}

/// Real articles with extra fields whose JSON text must survive untouched.
fn articles(n: usize) -> Vec<(String, Value)> {
    t::shared_articles(n)
        .into_iter()
        .enumerate()
        .map(|(i, (id, mut d))| {
            d["views"] = json!(i * 7);
            d["score"] = serde_json::from_str("1.50").unwrap();
            d["meta"] = json!({"source": "wire", "tags": ["a", "b"], "n": null});
            (id, d)
        })
        .collect()
}

#[derive(serde::Deserialize)]
struct RawHit {
    _id: String,
    _source: Box<RawValue>,
}

/// Every document's `_source`, field by field, as the raw JSON text Elasticsearch returns.
async fn raw_sources(
    client: &Elasticsearch,
    index: &str,
) -> BTreeMap<String, BTreeMap<String, String>> {
    t::refresh(client, index).await;
    let resp = client
        .send(
            Method::Post,
            &format!("/{index}/_search"),
            Default::default(),
            None::<&()>,
            Some(json!({"size": 10000, "query": {"match_all": {}}}).to_string()),
            None,
        )
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    #[derive(serde::Deserialize)]
    struct Hits {
        hits: Vec<RawHit>,
    }
    #[derive(serde::Deserialize)]
    struct Resp {
        hits: Hits,
    }
    let r: Resp = serde_json::from_str(&text).unwrap();
    r.hits
        .hits
        .into_iter()
        .map(|h| {
            let fields: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(h._source.get()).unwrap();
            (
                h._id,
                fields
                    .into_iter()
                    .map(|(k, v)| (k, v.get().to_owned()))
                    .collect(),
            )
        })
        .collect()
}

fn parsed(raw: &BTreeMap<String, String>) -> Value {
    Value::Object(
        raw.iter()
            .map(|(k, v)| (k.clone(), serde_json::from_str(v).unwrap()))
            .collect(),
    )
}

/// What the back-fill must have stored for a `_source`: `Some(fp)` or `None` (too short).
fn expected(src: &Value) -> Option<SimHash> {
    let fields = ["title".to_string(), "content".to_string()];
    neardup::es::fingerprint_source(&fp(), src, &fields)
        .expect("test documents hold text")
        .ok()
        .map(|f| f.simhash)
}

/// Asserts that every document carries the current versions and the fingerprints of its
/// text, SimHash and MinHash.
fn assert_all_fingerprinted(docs: &BTreeMap<String, BTreeMap<String, String>>) {
    assert_simhash_fingerprinted(docs);
    let fp = fp();
    for (id, raw) in docs {
        let src = parsed(raw);
        let text = |f: &str| src[f].as_str().unwrap_or("").to_owned();
        let (title, content) = (text("title"), text("content"));
        t::assert_minhash_fields(&src, &fp, &[&title, &content], id);
    }
}

/// Asserts that every document carries the current SimHash version and the fingerprint of its
/// text.
fn assert_simhash_fingerprinted(docs: &BTreeMap<String, BTreeMap<String, String>>) {
    let version = fp().version().to_owned();
    for (id, raw) in docs {
        let src = parsed(raw);
        assert_eq!(src["simHashVersion"], version.as_str(), "{id}");
        let stored = src["simHash"].as_i64().map(SimHash::from_i64);
        assert_eq!(
            stored,
            expected(&src),
            "{id}: fingerprint of its latest text"
        );
        if let Some(stored) = stored {
            let blocks: Vec<i64> = ["simHashA", "simHashB", "simHashC", "simHashD"]
                .iter()
                .map(|b| src[*b].as_i64().unwrap())
                .collect();
            let want: Vec<i64> = stored.blocks16().iter().map(|b| i64::from(*b)).collect();
            assert_eq!(blocks, want, "{id}: blocks");
        } else {
            assert_eq!(src["simHashReason"], "too_short", "{id}");
        }
    }
}

fn config(index: &str, dir: &Path) -> BackfillConfig {
    let mut c = BackfillConfig::new(index);
    c.state_path = dir.join("state.jsonl");
    c.failed_path = dir.join("failed.jsonl");
    c.bulk_size = 100;
    c.page_size = 200;
    c
}

async fn run(client: &Elasticsearch, c: BackfillConfig) -> BackfillReport {
    Backfill::new(client.clone(), fp(), c)
        .run(&AtomicBool::new(false), Arc::new(|_| {}))
        .await
        .unwrap()
}

fn assert_adds_up(c: &BackfillCounts) {
    assert!(c.adds_up(), "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_writes_exact_fingerprints_and_leaves_every_other_field_byte_identical() {
    let client = t::client().await;
    let docs = articles(2000);
    let idx = index_with(&client, "bf-exact", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let before = raw_sources(&client, &idx.name).await;
    assert_eq!(before.len(), docs.len());

    // A dry run writes nothing.
    let mut dry = config(&idx.name, dir.path());
    dry.dry_run = true;
    let r = run(&client, dry).await;
    assert_eq!(r.counts.scanned, 2000, "{r:?}");
    assert_adds_up(&r.counts);
    assert_eq!(raw_sources(&client, &idx.name).await, before);
    assert!(
        !dir.path().join("state.jsonl").exists(),
        "a dry run keeps no state"
    );

    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.scanned, 2000, "{r:?}");
    assert_eq!(r.counts.written + r.counts.too_short, 2000, "{r:?}");
    // The walk pages with a point in time where the node has one (8.x, 9.x), else scroll.
    let paging = if t::capabilities(&client, &idx.name).await.pit {
        Paging::Pit
    } else {
        Paging::Scroll
    };
    assert_eq!(r.paging, paging.name(), "{r:?}");
    assert_eq!((r.counts.failed, r.counts.bad, r.counts.deleted), (0, 0, 0));
    assert_adds_up(&r.counts);
    let after = raw_sources(&client, &idx.name).await;
    assert_all_fingerprinted(&after);
    let fingerprint_fields = [
        "simHashA",
        "simHashB",
        "simHashC",
        "simHashD",
        "simHash",
        "simHashVersion",
        "simHashReason",
        "minHashBands",
        "minHashSignature",
        "minHashVersion",
        "minHashReason",
        "minHashMinima",
        "minHashDistinct",
    ];
    // Elasticsearch's update API re-serialises the merged `_source` (Jackson): a source
    // already in that form (compact, as loaded here) keeps every byte, except that characters
    // outside the BMP (emoji) come back as `\uD83D\uDC7B` escapes. So: bytes identical where
    // the text has no such character, and the same JSON values everywhere.
    let mut escaped = 0;
    for (id, old) in &before {
        let mut new = after[id].clone();
        for f in fingerprint_fields {
            new.remove(f);
        }
        assert_eq!(
            new.keys().collect::<Vec<_>>(),
            old.keys().collect::<Vec<_>>(),
            "{id}"
        );
        for (field, raw) in old {
            if raw.chars().any(|c| c as u32 > 0xFFFF) {
                escaped += 1;
                assert_eq!(parsed(&new), parsed(old), "{id}.{field}: same value");
            } else {
                assert_eq!(&new[field], raw, "{id}.{field}: byte-identical");
            }
        }
    }
    assert!(
        escaped < 100,
        "{escaped} fields with characters outside the BMP"
    );
    // Again: nothing is missing any more.
    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.scanned, 0, "{r:?}");

    // --all rewrites every document (a new version each), with the same values.
    let seq_before = seq_nos(&client, &idx.name).await;
    let mut all = config(&idx.name, dir.path());
    all.mode = Mode::All;
    let r = run(&client, all).await;
    assert_eq!(r.counts.scanned, 2000, "{r:?}");
    assert_eq!(r.counts.written + r.counts.too_short, 2000);
    assert_adds_up(&r.counts);
    let seq_after = seq_nos(&client, &idx.name).await;
    for (id, s) in &seq_before {
        assert!(seq_after[id] > *s, "{id} rewritten");
    }
    assert_eq!(raw_sources(&client, &idx.name).await, after);
}

async fn seq_nos(client: &Elasticsearch, index: &str) -> HashMap<String, u64> {
    t::refresh(client, index).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{index}/_search"),
        Some(json!({"size": 10000, "_source": false, "seq_no_primary_term": true})),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["_id"].as_str().unwrap().to_owned(),
                h["_seq_no"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The neardup binary running a back-fill.
fn spawn_backfill(es: &str, index: &str, dir: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["backfill", "--es", es, "--index", index, "--quiet"])
        .arg("--state")
        .arg(dir.join("state.jsonl"))
        .arg("--failed")
        .arg(dir.join("failed.jsonl"))
        .arg("--report-json")
        .arg(dir.join("report.json"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Finished batches in the state file so far.
fn batches_done(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("state.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("{\"t\":\"done\"") && !l.contains("\"b\":0,"))
        .count()
}

/// Whether the state file shows a batch sent but not finished.
fn batch_in_flight(dir: &Path) -> bool {
    let text = std::fs::read_to_string(dir.join("state.jsonl")).unwrap_or_default();
    let mut open = std::collections::HashSet::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match v["t"].as_str() {
            Some("batch") => open.insert(v["b"].as_u64()),
            Some("done") => open.remove(&v["b"].as_u64()),
            _ => false,
        };
    }
    !open.is_empty()
}

/// Waits (polling, no deadline) until the state file shows `n` more finished batches.
fn wait_for_batches(dir: &Path, child: &mut Child, n: usize) {
    wait_until(dir, child, n, false)
}

/// Waits until `n` more batches have finished and, with `in_flight`, another one is in
/// flight, so that a kill then leaves a batch for the restart to look up.
fn wait_until(dir: &Path, child: &mut Child, n: usize, in_flight: bool) {
    let start = batches_done(dir);
    while batches_done(dir) < start + n || (in_flight && !batch_in_flight(dir)) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the back-fill ended ({status}) before {n} more batches: {err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(child: Child) -> (i32, Value) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let dir_report = stderr.clone();
    (code, json!({ "stderr": dir_report }))
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn counts_of(report: &Value) -> BackfillCounts {
    serde_json::from_value(report["counts"].clone()).unwrap()
}

async fn sigkill_and_restart(mode: &[&str]) {
    let client = t::client().await;
    let docs = articles(1500);
    let idx = index_with(&client, "bf-kill", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let es = t::url();
    // Slow enough that each run is killed in the middle, several batches in flight.
    let mut args = vec![
        "--bulk-size",
        "40",
        "--concurrency",
        "3",
        "--max-docs-per-sec",
        "600",
    ];
    args.extend_from_slice(mode);
    for after in [3, 5, 4] {
        let mut child = spawn_backfill(&es, &idx.name, dir.path(), &args);
        wait_until(dir.path(), &mut child, after, true);
        child.kill().unwrap(); // SIGKILL, with a batch in flight
        child.wait().unwrap();
    }
    let child = spawn_backfill(&es, &idx.name, dir.path(), &args);
    let (code, out) = finish(child);
    assert_eq!(code, 0, "{out}");
    let r = report(dir.path());
    assert_eq!(r["resumed"], true);
    let c = counts_of(&r);
    // Every document counted exactly once across the four runs.
    assert_eq!(c.scanned, 1500, "{r}");
    assert_eq!(c.written + c.too_short, 1500, "{r}");
    assert_adds_up(&c);
    assert_all_fingerprinted(&raw_sources(&client, &idx.name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_run_then_restart_finishes_and_counts_every_document_once() {
    sigkill_and_restart(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_run_then_restart_with_all() {
    sigkill_and_restart(&["--all"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_updated_or_deleted_during_the_run() {
    let client = t::client().await;
    let docs = articles(1500);
    let idx = index_with(&client, "bf-change", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(&idx.name, dir.path());
    c.max_docs_per_sec = Some(400.0);
    c.bulk_size = 50;
    let job = Backfill::new(client.clone(), fp(), c);
    let handle =
        tokio::spawn(async move { job.run(&AtomicBool::new(false), Arc::new(|_| {})).await });
    // The documents the walk reaches last, in both of its orders: the end of the last shard
    // (a point in time sorted by `_shard_doc` walks one shard after the other; a scroll sorted
    // by `_doc` walks the shards side by side).
    let last_shard = t::call(
        &client,
        Method::Post,
        &format!("/{}/_search?preference=_shards:2", idx.name),
        Some(json!({"size": 1500, "sort": ["_doc"], "_source": false})),
    )
    .await;
    let shard_ids: Vec<&str> = last_shard["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    assert!(shard_ids.len() >= 300, "{} in shard 2", shard_ids.len());
    let by_id: HashMap<&str, &Value> = docs.iter().map(|(id, d)| (id.as_str(), d)).collect();
    let late: Vec<(&str, &Value)> = shard_ids[shard_ids.len() - 300..]
        .iter()
        .map(|id| (*id, by_id[id]))
        .collect();
    // Once the walk has started (its snapshot is taken), change documents it has not reached:
    // it reads their old versions, so every one of these writes meets a changed document.
    while batches_done(dir.path()) < 1 {
        assert!(!handle.is_finished(), "{:?}", handle.await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut nd = String::new();
    for (i, (id, d)) in late.iter().enumerate() {
        match i % 3 {
            0 => {
                nd += &json!({"delete": {"_id": id}}).to_string();
                nd.push('\n');
            }
            1 => {
                // A partial update of the text, as an editor's fix.
                nd += &json!({"update": {"_id": id}}).to_string();
                nd.push('\n');
                nd += &json!({"doc": {"content": docs[i].1["content"]}}).to_string();
                nd.push('\n');
            }
            _ => {
                // The article service saving the whole article again (no fingerprint fields).
                nd += &json!({"index": {"_id": id}}).to_string();
                nd.push('\n');
                let mut new = (*d).clone();
                new["title"] = json!(format!("更新 {}", d["title"].as_str().unwrap_or("")));
                nd += &new.to_string();
                nd.push('\n');
            }
        }
    }
    let r = neardup::es::request(
        &client,
        &RetryPolicy::none(),
        "changes",
        Method::Post,
        &format!("/{}/_bulk", idx.name),
        &[],
        Some(&neardup::es::Body::NdJson(nd)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "{r}");

    let r = handle.await.unwrap().unwrap();
    let c = &r.counts;
    assert_adds_up(c);
    assert_eq!(c.deleted, 100, "{r:?}");
    assert_eq!(c.failed + c.bad, 0, "{r:?}");
    assert!(
        c.conflicts_retried >= 200,
        "each changed document met a 409: {r:?}"
    );
    assert_eq!(c.written + c.too_short, 1400, "{r:?}");
    let after = raw_sources(&client, &idx.name).await;
    assert_eq!(after.len(), 1400);
    assert_all_fingerprinted(&after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_documents_are_counted_and_reported_never_fatal() {
    let client = t::client().await;
    // `body` is stored but not indexed (`enabled: false`), as some services keep article
    // bodies: Elasticsearch takes anything there, so bad values reach the back-fill.
    let mut docs: Vec<(String, Value)> = articles(300)
        .into_iter()
        .map(|(id, mut d)| {
            let body = d.as_object_mut().unwrap().remove("content").unwrap();
            d["body"] = body;
            (id, d)
        })
        .collect();
    let huge = docs[..40]
        .iter()
        .map(|(_, d)| d["body"].as_str().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .repeat(20);
    assert!(huge.len() > 2_000_000, "{}", huge.len());
    docs.extend([
        ("no-text".to_string(), json!({"other": "x"})),
        ("empty".to_string(), json!({"title": "", "body": ""})),
        (
            "number".to_string(),
            json!({"title": "标题", "body": 12345}),
        ),
        (
            "object".to_string(),
            json!({"title": "标题", "body": {"zh": "正文"}}),
        ),
        ("huge".to_string(), json!({"title": "长文", "body": huge})),
    ]);
    let idx = index_mapped(
        &client,
        "bf-bad",
        &docs,
        json!({"body": {"type": "object", "enabled": false}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let fields = ["--field", "title", "--field", "body"];
    let child = spawn_backfill(&t::url(), &idx.name, dir.path(), &fields);
    let (code, out) = finish(child);
    assert_eq!(
        code, 3,
        "exit code 3 when documents were not written: {out}"
    );
    let stderr = out["stderr"].as_str().unwrap();
    assert!(stderr.contains("bad text field"), "{stderr}");
    let c = counts_of(&report(dir.path()));
    assert_eq!(c.scanned, 305, "{c:?}");
    assert_eq!(c.bad, 2, "{c:?}");
    assert_adds_up(&c);
    let failed = std::fs::read_to_string(dir.path().join("failed.jsonl")).unwrap();
    let lines: Vec<Value> = failed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, ["number", "object"]);
    assert!(lines
        .iter()
        .all(|l| l["kind"] == "bad" && l["index"] == idx.name.as_str()));
    for (id, reason) in [("no-text", "too_short"), ("empty", "too_short")] {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(src["simHashReason"], reason, "{id}");
    }
    let (src, _) = t::get(&client, &idx.name, "huge").await;
    assert!(
        src["simHash"].is_i64(),
        "the huge document is fingerprinted"
    );

    // Running again reports nothing new: the bad documents are not fingerprintable, and the
    // finished job starts afresh (so they are reported again, and only they are read).
    let child = spawn_backfill(&t::url(), &idx.name, dir.path(), &fields);
    let (code, _) = finish(child);
    assert_eq!(code, 3);
    let c = counts_of(&report(dir.path()));
    assert_eq!((c.scanned, c.bad), (2, 2), "{c:?}");
}

/// A node of the test's own on `port`, stopped when dropped (also when the test fails).
struct OwnNode {
    port: u16,
}

impl OwnNode {
    fn script(name: &str, port: u16) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new(root.join("scripts").join(name))
            .env("ES_PORT", port.to_string())
            .env("ES_HEAP", "512m")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "scripts/{name} on port {port} failed");
    }

    fn start(port: u16) -> OwnNode {
        Self::script("es-up", port);
        OwnNode { port }
    }
}

impl Drop for OwnNode {
    fn drop(&mut self) {
        Self::script("es-down", self.port);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_of_the_elasticsearch_node_mid_run() {
    // Its own node: the shared test node must not restart under the other tests.
    let port: u16 = std::env::var("NEARDUP_TEST_ES_RESTART_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(9290);
    let node = OwnNode::start(port);
    let es = format!("http://127.0.0.1:{port}");
    let client = neardup::es::EsConfig::new(&es).unwrap().client().unwrap();
    let docs = articles(1500);
    let name = format!("neardup-test-bf-restart-{}", std::process::id());
    t::call(
        &client,
        Method::Put,
        &format!("/{name}"),
        Some(json!({"settings": {"number_of_shards": 3, "number_of_replicas": 0}})),
    )
    .await;
    init_index(
        &client,
        &RetryPolicy::none(),
        &name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await
    .unwrap();
    for chunk in docs.chunks(500) {
        t::load(&client, &name, chunk).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_backfill(
        &es,
        &name,
        dir.path(),
        &["--bulk-size", "50", "--max-docs-per-sec", "300"],
    );
    wait_for_batches(dir.path(), &mut child, 3);
    OwnNode::script("es-down", port);
    OwnNode::script("es-up", port);
    let (code, out) = finish(child);
    assert_eq!(code, 0, "{out}");
    let stderr = out["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("retrying"),
        "the job rode out the outage: {stderr}"
    );
    let c = counts_of(&report(dir.path()));
    assert_eq!(c.scanned, 1500, "{c:?}");
    assert_adds_up(&c);
    let r = t::call(
        &client,
        Method::Post,
        &format!("/{name}/_count"),
        Some(
            json!({"query": {"bool": {"must_not": {"term": {"simHashVersion": fp().version()}}}}}),
        ),
    )
    .await;
    assert_eq!(r["count"], 0, "every document has its fingerprint");
    let _ = neardup::es::send(&client, Method::Delete, &format!("/{name}"), &[], None).await;
    drop(node);
}

/// A `--state` file that is not a journal is refused and left as it is; a state file in use
/// by another run is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_or_locked_state_file_is_refused() {
    let client = t::client().await;
    let idx = index_with(&client, "bf-state", &articles(20)).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.jsonl");
    std::fs::write(&state, "my notes, one line\n").unwrap();
    let (code, out) = finish(spawn_backfill(&t::url(), &idx.name, dir.path(), &[]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out["stderr"]
            .as_str()
            .unwrap()
            .contains("not a neardup back-fill state file"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "my notes, one line\n",
        "not overwritten"
    );

    std::fs::remove_file(&state).unwrap();
    // Another back-fill holds the lock on `<state>.lock` (an OS file lock, as that one takes).
    let mut lock_name = state.as_os_str().to_owned();
    lock_name.push(".lock");
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::path::PathBuf::from(lock_name))
        .unwrap();
    held.try_lock().unwrap();
    let out = spawn_backfill(&t::url(), &idx.name, dir.path(), &[])
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another neardup backfill"), "{err}");
    assert!(!state.exists(), "nothing written while locked");
    drop(held);
    let (code, report) = finish(spawn_backfill(&t::url(), &idx.name, dir.path(), &[]));
    assert_eq!(code, 0, "{report}");
}

/// A SimHash-only index back-filled; es-init adds MinHash: every document's SimHash is
/// current, its MinHash missing, so the back-fill (--only-missing) walks them all again and
/// fills MinHash in, leaving the SimHash values as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_added_by_es_init_is_back_filled() {
    let client = t::client().await;
    let docs = articles(300);
    let idx = t::initialised(
        &client,
        "bf-add-minhash",
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await;
    t::load(&client, &idx.name, &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.written + r.counts.too_short, 300, "{r:?}");
    let simhash_only = raw_sources(&client, &idx.name).await;
    assert_simhash_fingerprinted(&simhash_only);
    for (id, raw) in &simhash_only {
        assert!(!raw.contains_key("minHashVersion"), "{id}");
    }
    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.scanned, 0, "all current: {r:?}");

    init_index(&client, &RetryPolicy::none(), &idx.name, &both())
        .await
        .unwrap();
    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.scanned, 300, "MinHash missing everywhere: {r:?}");
    assert_eq!(r.counts.written + r.counts.too_short, 300, "{r:?}");
    assert_adds_up(&r.counts);
    let after = raw_sources(&client, &idx.name).await;
    assert_all_fingerprinted(&after);
    for (id, old) in &simhash_only {
        for f in FieldNames::default().all() {
            assert_eq!(after[id].get(f), old.get(f), "{id}: {f} kept");
        }
    }
    let r = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(r.counts.scanned, 0, "{r:?}");

    // A back-fill given a fingerprinter of other MinHash parameters refuses before writing.
    let other = Fingerprinter::new(FingerprintConfig {
        minhash: "shingle=w2;n=128;sig=oph;bands=32x4".parse().unwrap(),
        ..FingerprintConfig::default()
    });
    let e = Backfill::new(client.clone(), other, config(&idx.name, dir.path()))
        .run(&AtomicBool::new(false), Arc::new(|_| {}))
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("bands=32x4"), "{e}");
}

/// Every document's `_version`.
async fn versions(client: &Elasticsearch, index: &str) -> HashMap<String, u64> {
    t::refresh(client, index).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{index}/_search"),
        Some(json!({"size": 10000, "_source": false, "version": true})),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["_id"].as_str().unwrap().to_owned(),
                h["_version"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Issue 32: `--slice 0/2` and `--slice 1/2`, two processes of the binary at the same time in
/// one working directory (so with the default state and failed files of each slice), share a
/// 2-shard index: together they write every document once, exactly right, each slice 30 to
/// 70 % of them. Sliced PIT where the node has PIT (es8, es9), sliced scroll elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slices_at_the_same_time_write_every_document_once() {
    let client = t::client().await;
    let n = 2000;
    let docs = articles(n);
    let idx = TestIndex::new("bf-slices");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({ "settings": {"number_of_shards": 2, "number_of_replicas": 0} })),
    )
    .await;
    init_index(&client, &RetryPolicy::none(), &idx.name, &both())
        .await
        .unwrap();
    for chunk in docs.chunks(500) {
        t::load(&client, &idx.name, chunk).await;
    }
    let pit = t::capabilities(&client, &idx.name).await.pit;
    let dir = tempfile::tempdir().unwrap();
    let es = t::url();
    let children: Vec<Child> = ["0/2", "1/2"]
        .iter()
        .map(|slice| {
            Command::new(env!("CARGO_BIN_EXE_neardup"))
                .current_dir(dir.path())
                .args(["backfill", "--es", &es, "--index", &idx.name, "--quiet"])
                .args(["--slice", slice, "--bulk-size", "100"])
                .arg("--report-json")
                .arg(format!("report-{}.json", &slice[..1]))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut scanned = 0;
    for (i, child) in children.into_iter().enumerate() {
        let (code, out) = finish(child);
        assert_eq!(code, 0, "slice {i}/2: {out}");
        let r: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("report-{i}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(r["slice"], format!("{i}/2"), "{r}");
        assert_eq!(r["paging"], if pit { "pit" } else { "scroll" }, "{r}");
        let c = counts_of(&r);
        assert_adds_up(&c);
        assert_eq!(c.written + c.too_short, c.scanned, "{r}");
        let share = c.scanned as f64 / n as f64;
        assert!(
            (0.3..=0.7).contains(&share),
            "slice {i}/2 wrote {share:.3}: {r}"
        );
        scanned += c.scanned;
        // Each slice kept its own files, under its own default names.
        assert!(
            dir.path()
                .join(format!(
                    ".neardup-backfill-{}-slice-{i}-of-2.jsonl",
                    idx.name
                ))
                .exists(),
            "state file of slice {i}"
        );
        assert!(dir
            .path()
            .join(format!("neardup-backfill-failed-slice-{i}-of-2.jsonl"))
            .exists());
    }
    assert_eq!(scanned, n as u64, "the slices read every document once");
    assert_all_fingerprinted(&raw_sources(&client, &idx.name).await);
    let v = versions(&client, &idx.name).await;
    assert_eq!(v.len(), n);
    assert!(
        v.values().all(|&v| v == 2),
        "loaded once, written once: {:?}",
        v.iter()
            .filter(|(_, &v)| v != 2)
            .take(5)
            .collect::<Vec<_>>()
    );
}

/// A slice of `--all` walks each shard sliced (scroll, `preference`); the two slices of a job
/// rewrite every document once between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slices_of_all_rewrite_every_document_once() {
    let client = t::client().await;
    let docs = articles(600);
    let idx = index_with(&client, "bf-slices-all", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let first = run(&client, config(&idx.name, dir.path())).await;
    assert_eq!(first.counts.scanned, 600);
    let before = versions(&client, &idx.name).await;
    let mut scanned = 0;
    for i in 0..2 {
        let mut c =
            config(&idx.name, dir.path()).with_slice(Some(format!("{i}/2").parse().unwrap()));
        c.state_path = dir.path().join(format!("state-{i}.jsonl"));
        c.failed_path = dir.path().join(format!("failed-{i}.jsonl"));
        c.mode = Mode::All;
        let r = run(&client, c).await;
        assert_eq!(r.slice.as_deref(), Some(format!("{i}/2").as_str()));
        assert_eq!(r.paging, "scroll", "a per-shard walk pages with scroll");
        let share = r.counts.scanned as f64 / 600.0;
        assert!(
            (0.3..=0.7).contains(&share),
            "slice {i}/2: {share:.3} {r:?}"
        );
        scanned += r.counts.scanned;
    }
    assert_eq!(scanned, 600);
    let after = versions(&client, &idx.name).await;
    for (id, v) in &after {
        assert_eq!(*v, before[id] + 1, "{id}: rewritten exactly once");
    }
    assert_all_fingerprinted(&raw_sources(&client, &idx.name).await);
}

/// Issue 32: a write block set on the index in the middle of a back-fill stops it at once,
/// with the bulks in flight: the failed file holds at most their documents, the message names
/// the block and the request that lifts it. Lifted, the same command resumes and writes every
/// document right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_block_mid_run_stops_at_once_and_the_same_command_resumes() {
    let client = t::client().await;
    let n = 1500;
    let docs = articles(n);
    let idx = index_with(&client, "bf-block", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let es = t::url();
    let (bulk, in_flight) = (40, 3);
    let args = [
        "--bulk-size",
        "40",
        "--concurrency",
        "3",
        "--max-docs-per-sec",
        "300",
    ];
    let settings = format!("/{}/_settings", idx.name);
    let mut child = spawn_backfill(&es, &idx.name, dir.path(), &args);
    wait_for_batches(dir.path(), &mut child, 3);
    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.write": true})),
    )
    .await;
    let (code, out) = finish(child);
    let stderr = out["stderr"].as_str().unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("index `{}` is blocked for writes", idx.name)),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            r#"`PUT /{}/_settings {{"index.blocks.write": false}}`"#,
            idx.name
        )),
        "{stderr}"
    );
    assert!(stderr.contains("run the same command again"), "{stderr}");
    let failed = std::fs::read_to_string(dir.path().join("failed.jsonl")).unwrap_or_default();
    assert!(
        failed.lines().count() <= bulk * in_flight,
        "at most the bulks in flight: {failed}"
    );
    let written_before = raw_sources(&client, &idx.name)
        .await
        .values()
        .filter(|d| d.contains_key("simHashVersion"))
        .count();
    assert!(
        written_before < n,
        "stopped before the end: {written_before}"
    );

    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.write": false})),
    )
    .await;
    let child = spawn_backfill(&es, &idx.name, dir.path(), &args[..4]);
    let (code, out) = finish(child);
    assert_eq!(code, 0, "{out}");
    let r = report(dir.path());
    assert_eq!(r["resumed"], true, "{r}");
    let c = counts_of(&r);
    assert_eq!(c.scanned, n as u64, "{r}");
    assert_eq!(c.written + c.too_short, n as u64, "{r}");
    assert_adds_up(&c);
    assert_all_fingerprinted(&raw_sources(&client, &idx.name).await);
}

/// Issue 32: the flood-stage block (`index.blocks.read_only_allow_delete`, 429) is pushback,
/// not a stop: the back-fill backs off and retries until it is lifted, and writes everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flood_stage_block_is_backed_off_and_retried() {
    let client = t::client().await;
    let n = 600;
    let docs = articles(n);
    let idx = index_with(&client, "bf-flood", &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let es = t::url();
    let settings = format!("/{}/_settings", idx.name);
    let args = ["--bulk-size", "40", "--max-docs-per-sec", "300"];
    let mut child = spawn_backfill(&es, &idx.name, dir.path(), &args);
    wait_for_batches(dir.path(), &mut child, 2);
    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.read_only_allow_delete": true})),
    )
    .await;
    // The block holds for a while (the job needs about two seconds more at 300 docs/s).
    std::thread::sleep(Duration::from_secs(3));
    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.read_only_allow_delete": null})),
    )
    .await;
    let (code, out) = finish(child);
    assert_eq!(code, 0, "{out}");
    let c = counts_of(&report(dir.path()));
    assert!(c.rejections > 0, "{c:?}");
    assert_eq!(
        (c.scanned, c.written + c.too_short),
        (n as u64, n as u64),
        "{c:?}"
    );
    assert_all_fingerprinted(&raw_sources(&client, &idx.name).await);
}

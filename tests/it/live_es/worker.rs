//! The worker against a live node, on real articles: fills new documents, refreshes changed
//! and outdated ones, records too-short ones once instead of retrying them forever, and judges
//! staleness per method: MinHash added to an index by es-init is filled in.

use crate::common;

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::{
    init_index, BlockType, FieldNames, IndexMeta, Refresh, RetryPolicy, Worker, WorkerConfig,
};
use neardup::{Fingerprinter, Profile, SimHash};
use serde_json::{json, Value};

fn stored(src: &Value) -> Option<SimHash> {
    src["simHash"].as_i64().map(SimHash::from_i64)
}

fn expected(fp: &Fingerprinter, src: &Value) -> Option<SimHash> {
    fp.fingerprint_fields(&[
        src["title"].as_str().unwrap_or(""),
        src["content"].as_str().unwrap_or(""),
    ])
    .ok()
    .map(|f| f.simhash)
}

/// `updated_at` as the article service would set it: a date, one minute apart.
fn stamp(i: usize) -> String {
    format!("2024-03-01T{:02}:{:02}:00Z", 8 + i / 60, i % 60)
}

/// A new index with a `date` field `updated_at` and the SimHash fields (`default` profile).
async fn dated_simhash_index(client: &elasticsearch::Elasticsearch, prefix: &str) -> TestIndex {
    let idx = TestIndex::new(prefix);
    t::create_index(client, &idx.name, json!({"updated_at": {"type": "date"}})).await;
    init_index(
        client,
        &RetryPolicy::none(),
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await
    .unwrap();
    idx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_fills_refreshes_and_skips_too_short_documents() {
    let client = t::client().await;
    let idx = dated_simhash_index(&client, "worker").await;

    let mut docs = t::shared_articles(300);
    docs.extend(t::example_articles());
    // The examples (with the too-short ones) are older than the real articles.
    let n = docs.len();
    for (i, (_, d)) in docs.iter_mut().enumerate() {
        d["updated_at"] = json!(stamp((i + n - 300) % n));
    }
    t::load(&client, &idx.name, &docs).await;

    let fp = Fingerprinter::for_profile(Profile::Default);
    let indexer = t::indexer(&client, &idx.name)
        .await
        .with_refresh(Refresh::WaitFor);
    let mut worker = Worker::new(
        indexer,
        WorkerConfig {
            changed_field: Some("updated_at".into()),
            batch_size: 64,
            changed_overlap: Duration::ZERO,
            ..WorkerConfig::default()
        },
    );
    worker.check().await.unwrap();
    let stop = AtomicBool::new(false);

    // Pass 1: everything is new.
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!(r.stale, docs.len() as u64, "{r:?}");
    assert_eq!(r.seen, docs.len() as u64);
    assert!(r.too_short >= 2, "ex-029 and ex-030 at least: {r:?}");
    assert_eq!(r.writes.updated, docs.len() as u64, "{r:?}");
    assert!(r.writes.failed.is_empty() && r.writes.conflicts.is_empty());
    t::refresh(&client, &idx.name).await;
    for (id, d) in &docs {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(src["simHashVersion"], fp.version(), "{id}");
        assert_eq!(stored(&src), expected(&fp, d), "{id}");
        if stored(&src).is_none() {
            assert_eq!(src["simHashReason"], "too_short", "{id}");
        }
    }
    let (ex029, _) = t::get(&client, &idx.name, "ex-029").await;
    assert_eq!(ex029["simHashReason"], "too_short");

    // Pass 2: nothing changed. Only the newest document (at the watermark) is looked at again,
    // and too-short ones are not retried.
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!(r.seen, 1, "{r:?}");
    assert_eq!((r.too_short, r.writes.updated), (0, 0), "{r:?}");

    // Changes: two texts edited (with a newer updated_at), one fingerprint of an older
    // pipeline version, one new document, one too-short text that got a real body.
    let edited = [&docs[3].0, &docs[150].0];
    for (n, id) in edited.iter().enumerate() {
        t::call(
            &client,
            Method::Post,
            &format!("/{}/_update/{id}", idx.name),
            Some(json!({"doc": {"content": docs[200 + n].1["content"], "updated_at": "2024-03-02T00:00:00Z"}})),
        )
        .await;
    }
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/{}", idx.name, docs[10].0),
        Some(json!({"doc": {"simHashVersion": "default-0;old", "simHash": 1}})),
    )
    .await;
    t::load(
        &client,
        &idx.name,
        &[("brand-new".into(), docs[20].1.clone())],
    )
    .await;
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/ex-029", idx.name),
        Some(json!({"doc": {"content": docs[30].1["content"], "updated_at": "2024-03-02T00:00:01Z"}})),
    )
    .await;
    t::refresh(&client, &idx.name).await;

    let r = worker.pass(&stop).await.unwrap();
    // 2 edited + ex-029 (changed), 1 outdated, 1 new, and the previous newest document again
    assert_eq!(r.seen, 6, "{r:?}");
    assert_eq!(r.writes.updated, 5, "{r:?}");
    assert_eq!(r.writes.noop, 1, "{r:?}");
    t::refresh(&client, &idx.name).await;
    for id in edited
        .iter()
        .map(|s| s.as_str())
        .chain([docs[10].0.as_str(), "brand-new", "ex-029"])
    {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(src["simHashVersion"], fp.version(), "{id}");
        let want = expected(&fp, &src);
        assert!(want.is_some(), "{id} has a real text now");
        assert_eq!(stored(&src), want, "{id}");
        assert_eq!(src["simHashReason"], Value::Null, "{id}");
    }

    // Pass 4: quiet again.
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!(r.writes.updated, 0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neardup_worker_once_from_the_command_line() {
    let client = t::client().await;
    let idx = TestIndex::new("worker-cli");
    let docs = t::example_articles();
    t::load(&client, &idx.name, &docs).await;
    let bin = env!("CARGO_BIN_EXE_neardup");

    // Not initialised: refuses, naming es-init.
    let out = Command::new(bin)
        .args(["worker", "--once", "--index", &idx.name])
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("neardup es-init"), "{err}");

    let out = Command::new(bin)
        .args(["es-init", "--es", &t::url(), "--index", &idx.name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("added"));

    let out = Command::new(bin)
        .args([
            "worker", "--once", "--index", &idx.name, "--field", "title", "--field", "content",
        ])
        .env("NEARDUP_ES_URL", t::url())
        .env("NEARDUP_ES_PASSWORD", "never-printed")
        .env("NEARDUP_ES_USER", "nobody")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The test node has no security: it ignores the credentials, and they never show up.
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("never-printed"), "{err}");
    assert!(err.contains("pass done"), "{err}");
    t::refresh(&client, &idx.name).await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    for (id, d) in &docs {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(stored(&src), expected(&fp, d), "{id}");
        assert_eq!(src["simHashVersion"], fp.version(), "{id}");
        // es-init records both methods by default: the worker writes both.
        t::assert_minhash_fields(&src, &fp, &texts(d), id);
    }

    // A --profile other than the one the index records is a usage error naming both versions.
    let out = Command::new(bin)
        .args([
            "worker",
            "--once",
            "--index",
            &idx.name,
            "--profile",
            "seed000",
        ])
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(Fingerprinter::for_profile(Profile::Seed000).version())
            && err.contains(fp.version()),
        "{err}"
    );
}

fn texts(src: &Value) -> [&str; 2] {
    [
        src["title"].as_str().unwrap_or(""),
        src["content"].as_str().unwrap_or(""),
    ]
}

/// An index es-init made for SimHash only is filled; es-init then adds MinHash: the documents
/// whose SimHash is current are stale for MinHash, and one pass fills MinHash in (leaving the
/// SimHash values as they are) — a worker already running included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_added_by_es_init_is_filled_in() {
    let client = t::client().await;
    let idx = t::initialised(
        &client,
        "worker-add-minhash",
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await;
    let mut docs = t::shared_articles(40);
    docs.extend(t::example_articles());
    t::load(&client, &idx.name, &docs).await;
    let indexer = t::indexer(&client, &idx.name)
        .await
        .with_refresh(Refresh::WaitFor);
    let mut worker = Worker::new(indexer, WorkerConfig::default());
    worker.check().await.unwrap();
    assert!(worker.indexer().meta().minhash.is_none());
    let stop = AtomicBool::new(false);
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!(r.writes.updated, docs.len() as u64, "{r:?}");
    t::refresh(&client, &idx.name).await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let mut before = Vec::new();
    for (id, _) in &docs {
        let (src, seq) = t::get(&client, &idx.name, id).await;
        assert!(src.get("minHashVersion").is_none(), "{id}: {src}");
        before.push((src, seq));
    }
    assert_eq!(worker.pass(&stop).await.unwrap().stale, 0, "all current");

    // es-init adds MinHash (what `neardup es-init` does by default).
    let both = IndexMeta::default();
    init_index(&client, &RetryPolicy::none(), &idx.name, &both)
        .await
        .unwrap();
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!(worker.indexer().meta(), &both);
    assert_eq!(
        r.stale,
        docs.len() as u64,
        "SimHash current, MinHash missing: {r:?}"
    );
    assert_eq!(r.writes.updated, docs.len() as u64, "{r:?}");
    t::refresh(&client, &idx.name).await;
    for ((id, d), (old, _)) in docs.iter().zip(&before) {
        let (src, _) = t::get(&client, &idx.name, id).await;
        t::assert_minhash_fields(&src, &fp, &texts(d), id);
        for f in FieldNames::default().all() {
            assert_eq!(src[f], old[f], "{id}: {f} kept");
        }
    }
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!((r.stale, r.writes.updated), (0, 0), "{r:?}");

    // A MinHash of another version (an older neardup) is stale too, SimHash being current.
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/{}?refresh=true", idx.name, docs[0].0),
        Some(json!({"doc": {"minHashVersion": "minhash-0;old"}})),
    )
    .await;
    let r = worker.pass(&stop).await.unwrap();
    assert_eq!((r.stale, r.writes.updated), (1, 1), "{r:?}");
    let (src, _) = t::get(&client, &idx.name, &docs[0].0).await;
    t::assert_minhash_fields(&src, &fp, &texts(&docs[0].1), &docs[0].0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_running_worker_cleanly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let client = t::client().await;
    let idx = t::initialised(
        &client,
        "worker-signal",
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await;
    t::load(&client, &idx.name, &t::example_articles()).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "worker",
            "--es",
            &t::url(),
            "--index",
            &idx.name,
            "--interval",
            "1h",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("pass done") {
            break;
        }
    }
    assert!(log.contains("pass done"), "{log}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for line in lines {
        log.push_str(&line.unwrap());
        log.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("worker stopped"), "{log}");
}

/// `--changed-field` change detection survives a restart: the watermark is saved in the
/// `--state` file after each pass and read by the next process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watermark_survives_a_restart() {
    let client = t::client().await;
    let idx = dated_simhash_index(&client, "worker-watermark").await;
    let mut docs = t::shared_articles(20);
    for (i, (_, d)) in docs.iter_mut().enumerate() {
        d["updated_at"] = json!(stamp(i));
    }
    t::load(&client, &idx.name, &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("wm.json");
    let once = || {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["worker", "--once", "--index", &idx.name])
            .args(["--changed-field", "updated_at", "--changed-overlap", "0s"])
            .arg("--state")
            .arg(&state)
            .env("NEARDUP_ES_URL", t::url())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    once();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["index"], idx.name.as_str());
    assert_eq!(saved["changed_field"], "updated_at");
    assert!(saved["watermark"].as_i64().is_some(), "{saved}");

    // Edited after the first run, fingerprint fields untouched: only change detection,
    // which needs the watermark, finds it.
    let (id, _) = &docs[5];
    let new_content = docs[12].1["content"].clone();
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/{id}", idx.name),
        Some(json!({"doc": {"content": new_content, "updated_at": "2024-03-02T00:00:00Z"}})),
    )
    .await;
    t::refresh(&client, &idx.name).await;
    let err = once();
    assert!(err.contains("resuming change detection"), "{err}");
    t::refresh(&client, &idx.name).await;
    let (src, _) = t::get(&client, &idx.name, id).await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    assert_eq!(
        stored(&src),
        expected(&fp, &src),
        "the edited text's fingerprint"
    );

    // A file that is not a watermark file is refused, not overwritten.
    std::fs::write(&state, "notes\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["worker", "--once", "--index", &idx.name])
        .args(["--changed-field", "updated_at", "--state"])
        .arg(&state)
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a neardup worker watermark file"));
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "notes\n");
}

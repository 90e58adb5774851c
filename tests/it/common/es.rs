//! A live Elasticsearch node for the `es_*` tests: never a mock.
//!
//! The URL comes from `NEARDUP_TEST_ES` (default `http://127.0.0.1:9200`). A test that finds no
//! node fails: start one with `scripts/es-up` (`ES_PORT=9250 scripts/es-up` and
//! `NEARDUP_TEST_ES=http://127.0.0.1:9250` for a port of your own).

use std::sync::atomic::{AtomicU32, Ordering};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, Body, EsConfig, RetryPolicy};
use serde_json::Value;

pub fn url() -> String {
    std::env::var("NEARDUP_TEST_ES").unwrap_or_else(|_| "http://127.0.0.1:9200".into())
}

/// A client for the test node, after checking that it answers.
pub async fn client() -> Elasticsearch {
    let url = url();
    let client = EsConfig::new(&url)
        .and_then(|c| c.client())
        .unwrap_or_else(|e| panic!("bad NEARDUP_TEST_ES `{url}`: {e}"));
    if let Err(e) = es::server_version(&client, &RetryPolicy::none()).await {
        panic!(
            "no Elasticsearch node answers at {url} ({e}).\n\
             Start one with scripts/es-up (or ES_PORT=9250 scripts/es-up and \
             NEARDUP_TEST_ES=http://127.0.0.1:9250); these tests never run against a mock."
        );
    }
    client
}

/// An index name no other test (or test run) uses.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "neardup-test-{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A uniquely named index that is deleted when dropped (also when the test fails).
pub struct TestIndex {
    pub name: String,
}

impl TestIndex {
    pub fn new(prefix: &str) -> TestIndex {
        TestIndex {
            name: unique_name(prefix),
        }
    }
}

impl Drop for TestIndex {
    fn drop(&mut self) {
        // A fresh runtime and client on a plain thread: Drop may run inside a runtime.
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = EsConfig::new(&url()).unwrap().client().unwrap();
                let path = format!("/{}", es::path_segment(&name));
                let _ = es::send(&client, Method::Delete, &path, &[], None).await;
                // The indices kept beside it (the changes feed's checkpoints, dedupe on
                // insert's claims) and the edit-tracking pipeline es-init installed outlive it.
                for beside in [
                    es::feed::feed_index_name(&name),
                    es::claims_index_name(&name),
                ] {
                    let path = format!("/{}", es::path_segment(&beside));
                    let _ = es::send(&client, Method::Delete, &path, &[], None).await;
                }
                let pipeline = es::tracking_pipeline_name(&name);
                let path = format!("/_ingest/pipeline/{}", es::path_segment(&pipeline));
                let _ = es::send(&client, Method::Delete, &path, &[], None).await;
            });
        })
        .join();
    }
}

/// Sends a request and returns its body, panicking on an error status.
pub async fn call(
    client: &Elasticsearch,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let body = body.map(Body::Json);
    es::request(
        client,
        &RetryPolicy::none(),
        path,
        method,
        path,
        &[],
        body.as_ref(),
    )
    .await
    .unwrap_or_else(|e| panic!("{method:?} {path}: {e}"))
}

/// Indexes `docs` (`(id, source)`) with one bulk request and refreshes.
pub async fn load(client: &Elasticsearch, index: &str, docs: &[(String, Value)]) {
    let mut nd = String::new();
    for (id, doc) in docs {
        nd.push_str(&serde_json::json!({ "index": { "_id": id } }).to_string());
        nd.push('\n');
        nd.push_str(&doc.to_string());
        nd.push('\n');
    }
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "load",
        Method::Post,
        &format!("/{index}/_bulk"),
        &[("refresh", "true")],
        Some(&Body::NdJson(nd)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "bulk load failed: {r}");
}

/// A fresh index that `es-init` made for `meta` (dropped with the `TestIndex`).
pub async fn initialised(
    client: &Elasticsearch,
    prefix: &str,
    meta: &neardup::es::IndexMeta,
) -> TestIndex {
    let idx = TestIndex::new(prefix);
    neardup::es::init_index(client, &neardup::es::RetryPolicy::none(), &idx.name, meta)
        .await
        .unwrap();
    idx
}

/// Deletes `index` if it is there (a clean start, or clean-up after a scenario); the answer is
/// not checked.
pub async fn delete_index(client: &Elasticsearch, index: &str) {
    let _ = es::send(client, Method::Delete, &format!("/{index}"), &[], None).await;
}

/// Creates `index` with these mapping properties, as an application does before `es-init`.
pub async fn create_index(client: &Elasticsearch, index: &str, properties: Value) {
    call(
        client,
        Method::Put,
        &format!("/{index}"),
        Some(serde_json::json!({ "mappings": { "properties": properties } })),
    )
    .await;
}

/// The four block fields as the older Java service mapped them: `short`, no doc values.
pub fn java_blocks() -> Value {
    let short = serde_json::json!({"type": "short", "doc_values": false});
    serde_json::json!({
        "simHashA": short, "simHashB": short, "simHashC": short, "simHashD": short
    })
}

/// `_source` and `(_seq_no, _primary_term)` of a document.
pub async fn get(client: &Elasticsearch, index: &str, id: &str) -> (Value, (u64, u64)) {
    let r = call(
        client,
        Method::Get,
        &format!("/{index}/_doc/{}", es::path_segment(id)),
        None,
    )
    .await;
    (
        r["_source"].clone(),
        (
            r["_seq_no"].as_u64().unwrap(),
            r["_primary_term"].as_u64().unwrap(),
        ),
    )
}

pub async fn refresh(client: &Elasticsearch, index: &str) {
    call(client, Method::Post, &format!("/{index}/_refresh"), None).await;
}

pub async fn count(client: &Elasticsearch, index: &str) -> u64 {
    call(client, Method::Get, &format!("/{index}/_count"), None).await["count"]
        .as_u64()
        .unwrap()
}

/// The articles of `examples/articles.jsonl` as `(id, {"title", "content"})`.
pub fn example_articles() -> Vec<(String, Value)> {
    std::fs::read_to_string(super::examples())
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let id = v["id"].as_str().unwrap().to_owned();
            v.as_object_mut().unwrap().remove("id");
            (id, v)
        })
        .collect()
}

/// The first `n` real articles of the shared corpus as `(id, {"title", "content"})`.
pub fn shared_articles(n: usize) -> Vec<(String, Value)> {
    use std::io::BufRead;
    let path = super::shared_dir().join("data/zh_articles.jsonl.gz");
    let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::BufReader::new(flate2::read::GzDecoder::new(f))
        .lines()
        .take(n)
        .map(|l| {
            let mut v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            let id = match v["id"].take() {
                Value::String(s) => s,
                other => other.to_string(),
            };
            v.as_object_mut().unwrap().remove("id");
            (format!("zh-{id}"), v)
        })
        .collect()
}

/// What the test node can do, asked from the node itself (never from the engine's name), so
/// that each test checks the path neardup takes there instead of skipping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Painless runs: the server-side filter is used. Without it (the Elasticsearch 8/9 test
    /// nodes of `scripts/es-up`) neardup falls back to the client-side filter.
    pub painless: bool,
    /// `POST /<index>/_pit` opens a point in time: paging uses it. Without (7.10 without
    /// X-Pack; OpenSearch, whose PIT API has another path) paging uses scroll.
    pub pit: bool,
}

/// Asks the node what it can do; `index` must exist (a point in time is opened and closed
/// on it).
pub async fn capabilities(client: &Elasticsearch, index: &str) -> Capabilities {
    let langs = call(client, Method::Get, "/_script_language", None).await;
    let painless = langs["types_allowed"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t == "inline"))
        && langs["language_contexts"]
            .as_array()
            .is_some_and(|l| l.iter().any(|l| l["language"] == "painless"));
    let pit_path = format!("/{}/_pit", es::path_segment(index));
    let r = es::send(
        client,
        Method::Post,
        &pit_path,
        &[("keep_alive", "1m")],
        None,
    )
    .await
    .unwrap();
    let pit = r.status.is_success();
    if let Some(id) = r.body["id"].as_str() {
        let body = Body::Json(serde_json::json!({ "id": id }));
        es::send(client, Method::Delete, "/_pit", &[], Some(&body))
            .await
            .unwrap();
    }
    Capabilities { painless, pit }
}

/// Checks the MinHash fields (default names) of a stored `_source` against
/// [`neardup::Fingerprinter::sketch_fields`] of `texts`, in the compact layout with the
/// containment fields a new index gets ([`MinHashLayout::NEW`], fields format 4): one
/// 6-character term per band (the band key's highest 36 bits), the signature's lowest 8 bits
/// of each minimum back from base64, the version code, the reason, one 4-character term for
/// each of the first 64 minima and the distinct shingle count; or, for a too-short text, the version code,
/// `too_short` and null values.
pub fn assert_minhash_fields(src: &Value, fp: &neardup::Fingerprinter, texts: &[&str], id: &str) {
    use neardup::es::{ContainmentMeta, MinHashFieldNames, MinHashLayout, MinHashMeta};
    let meta = MinHashMeta {
        params: fp.config().minhash,
        version: fp.minhash_version().to_owned(),
        fields: MinHashFieldNames::default(),
        layout: MinHashLayout::NEW,
        from_full: false,
        containment: Some(ContainmentMeta::new()),
    };
    let sketches = fp.sketch_fields(neardup::Methods::BOTH, texts);
    assert_eq!(src["minHashVersion"], meta.stored_version(), "{id}: {src}");
    match sketches.minhash.unwrap() {
        Ok(f) => {
            let terms: Vec<String> = f
                .signature
                .band_keys(&fp.config().minhash)
                .into_iter()
                .map(|k| MinHashLayout::NEW.band_term(k))
                .collect();
            assert!(terms.iter().all(|t| t.len() == 6), "{terms:?}");
            assert_eq!(src["minHashBands"], serde_json::json!(terms), "{id}");
            let stored = src["minHashSignature"].as_str().expect("signature stored");
            assert_eq!(
                MinHashLayout::NEW.signature_from_base64(stored, f.signature.len()),
                Some(f.signature.reduced(8)),
                "{id}"
            );
            assert_eq!(src["minHashReason"], Value::Null, "{id}");
            let minima = src["minHashMinima"].as_str().expect("minima stored");
            let minima: Vec<&str> = minima.split(' ').collect();
            let want = meta
                .containment
                .as_ref()
                .unwrap()
                .minima_terms(&f.signature);
            assert_eq!(minima, want, "{id}");
            assert_eq!(minima.len(), 64, "{id}");
            assert!(minima.iter().all(|t| t.len() == 4), "{minima:?}");
            assert_eq!(
                src["minHashDistinct"],
                serde_json::json!(f.signature.distinct()),
                "{id}"
            );
        }
        Err(_) => {
            assert_eq!(src["minHashReason"], "too_short", "{id}");
            assert_eq!(src["minHashBands"], Value::Null, "{id}");
            assert_eq!(src["minHashSignature"], Value::Null, "{id}");
            assert_eq!(src["minHashMinima"], Value::Null, "{id}");
            assert_eq!(src["minHashDistinct"], Value::Null, "{id}");
        }
    }
}

/// An indexer of `index` as the tests open one: the default field names, no retries.
pub async fn indexer(client: &Elasticsearch, index: &str) -> es::EsIndexer {
    es::EsIndexer::open(
        client.clone(),
        index,
        RetryPolicy::none(),
        &es::FieldNames::default(),
    )
    .await
    .unwrap()
}

/// The fingerprint fields of a stored `_source`.
pub fn stored_fields(src: &Value) -> serde_json::Map<String, Value> {
    src.as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("minHash") || k.starts_with("simHash"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What neardup's fingerprinting makes of a `_source`'s current text (the worker's default
/// fields, `title` and `content`).
pub fn wanted_fields(indexer: &es::EsIndexer, src: &Value) -> serde_json::Map<String, Value> {
    let sketches = es::sketch_source(
        indexer.fingerprinter(),
        indexer.meta().methods(),
        src,
        &es::WorkerConfig::default().text_fields,
    )
    .unwrap();
    es::fingerprint_fields_json(indexer.meta(), &sketches)
}

/// Creates `index` (a body of `settings` and `mappings`, as `PUT /{index}` takes) with shards
/// that are never assigned: it is red from the start. Searches over it and other indices
/// answer 200 with the other indices' hits, saying so only in `_shards`; multi-gets mark its
/// documents with an `error`.
pub async fn create_red_index(client: &Elasticsearch, index: &str, mut body: Value) {
    body["settings"]["index.routing.allocation.require._name"] = "neardup-nowhere".into();
    call(
        client,
        Method::Put,
        &format!("/{index}?wait_for_active_shards=0"),
        Some(body),
    )
    .await;
}

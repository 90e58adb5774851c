//! The compact MinHash layout on a live node: a user's application that updates other fields
//! (`_update` with a partial document, `_update_by_query`, `_reindex`) neither loses nor
//! changes a fingerprint, and an index in the full layout moves to the compact one in place
//! (`es-init --upgrade --layout compact`, then `backfill`) while `similar` keeps finding the
//! documents not rewritten yet.

use crate::common;

use std::collections::BTreeSet;

use common::es::{self as t, TestIndex};
use common::es_cli;
use elasticsearch::http::Method;
use neardup::es::{self, Body, IndexMeta, MinHashLayout, RetryPolicy};
use serde_json::{json, Value};

/// The neardup fields of a `_source`.
fn fingerprint_fields(src: &Value) -> Value {
    let o = src.as_object().unwrap();
    Value::Object(
        o.iter()
            .filter(|(k, _)| k.starts_with("minHash") || k.starts_with("simHash"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

fn similar_ids(index: &str, id: &str) -> BTreeSet<String> {
    let (code, out, err) = es_cli(index, &["similar", "--id", id]);
    assert_eq!(code, 0, "{err}");
    common::json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn read_meta(client: &elasticsearch::Elasticsearch, index: &str) -> IndexMeta {
    es::read_meta(client, &RetryPolicy::none(), index, &Default::default())
        .await
        .unwrap()
}

/// Real articles and an edited copy of each of the first three (the last 10 % cut).
fn articles() -> Vec<(String, Value)> {
    let mut docs = t::shared_articles(30);
    for i in 0..3 {
        let (id, src) = docs[i].clone();
        let content = src["content"].as_str().unwrap();
        let n = content.chars().count();
        let cut: String = content.chars().take(n * 9 / 10).collect();
        docs.push((
            format!("{id}-cut"),
            json!({ "title": src["title"], "content": cut }),
        ));
    }
    docs
}

/// A request that may be refused because the engine does not have the API (the es8 and es9
/// distributions `scripts/es-up` starts have no reindex module; Elasticsearch then answers
/// "no handler found", or 405 for a path it reads as an index name): `None` then, and only
/// then.
async fn call_if_available(
    client: &elasticsearch::Elasticsearch,
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    body: Value,
) -> Option<Value> {
    match es::request(
        client,
        &RetryPolicy::none(),
        path,
        method,
        path,
        query,
        Some(&Body::Json(body)),
    )
    .await
    {
        Ok(v) => Some(v),
        Err(es::EsError::Status { status, reason, .. })
            if (status == 400 || status == 404 || status == 405)
                && (reason.contains("no handler found")
                    || reason.contains("Incorrect HTTP method")) =>
        {
            None
        }
        Err(e) => panic!("{method:?} {path}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_of_other_fields_keep_the_fingerprints() {
    let client = t::client().await;
    let idx = t::initialised(&client, "layout-partial", &IndexMeta::default()).await;
    let docs = articles();
    t::load(&client, &idx.name, &docs).await;
    let (code, _, err) = es_cli(&idx.name, &["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    let ids: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    let mut before = Vec::new();
    for id in &ids {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(src["minHashBands"].as_array().unwrap().len(), 42, "{id}");
        before.push(fingerprint_fields(&src));
    }
    let near_before = similar_ids(&idx.name, &docs[0].0);
    assert!(
        near_before.contains(&format!("{}-cut", docs[0].0)),
        "{near_before:?}"
    );

    // `_update` with a partial document, on every document.
    for id in &ids {
        t::call(
            &client,
            Method::Post,
            &format!("/{}/_update/{id}", idx.name),
            Some(json!({ "doc": { "views": 7, "tags": ["a"] } })),
        )
        .await;
    }
    t::refresh(&client, &idx.name).await;
    // `_update_by_query` with a script, where the engine has it.
    let by_query = call_if_available(
        &client,
        Method::Post,
        &format!("/{}/_update_by_query", idx.name),
        &[("refresh", "true"), ("conflicts", "proceed")],
        json!({ "script": { "source": "ctx._source.views += 1", "lang": "painless" } }),
    )
    .await;
    if let Some(r) = &by_query {
        assert_eq!(r["updated"], ids.len(), "{r}");
    }
    t::refresh(&client, &idx.name).await;
    for (id, want) in ids.iter().zip(&before) {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(&fingerprint_fields(&src), want, "{id}");
        let views = if by_query.is_some() { 8 } else { 7 };
        assert_eq!(src["views"], views, "{id}");
    }
    assert_eq!(similar_ids(&idx.name, &docs[0].0), near_before);

    // `_reindex` into another index es-init made: the same fields, the same answers.
    let copy = t::initialised(&client, "layout-reindex", &IndexMeta::default()).await;
    let reindexed = call_if_available(
        &client,
        Method::Post,
        "/_reindex",
        &[("refresh", "true")],
        json!({ "source": { "index": idx.name }, "dest": { "index": copy.name } }),
    )
    .await;
    if let Some(r) = reindexed {
        // Where the engine has it (es7 and OpenSearch as `scripts/es-up` starts them).
        assert_eq!(r["created"], ids.len(), "{r}");
        for (id, want) in ids.iter().zip(&before) {
            let (src, _) = t::get(&client, &copy.name, id).await;
            assert_eq!(&fingerprint_fields(&src), want, "{id}");
        }
        assert_eq!(similar_ids(&copy.name, &docs[0].0), near_before);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_layout_index_moves_to_the_compact_one_in_place() {
    let client = t::client().await;
    let idx = TestIndex::new("layout-upgrade");
    let full = IndexMeta::default().with_layout(MinHashLayout::Full);
    es::init_index(&client, &RetryPolicy::none(), &idx.name, &full)
        .await
        .unwrap();
    let docs = articles();
    t::load(&client, &idx.name, &docs).await;
    let (code, _, err) = es_cli(&idx.name, &["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    let (src, _) = t::get(&client, &idx.name, &docs[0].0).await;
    assert_eq!(
        src["minHashBands"][0].as_str().unwrap().len(),
        16,
        "the full layout"
    );
    let bases: Vec<String> = docs[..3].iter().map(|(id, _)| id.clone()).collect();
    let full_answers: Vec<BTreeSet<String>> =
        bases.iter().map(|b| similar_ids(&idx.name, b)).collect();
    for (b, found) in bases.iter().zip(&full_answers) {
        assert!(found.contains(&format!("{b}-cut")), "{b}: {found:?}");
    }

    // A plain es-init keeps the layout the index records.
    let (code, out, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("full layout"), "{out}");
    // Another layout without --upgrade is refused and changes nothing.
    let (code, _, err) = es_cli(&idx.name, &["es-init", "--layout", "compact"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--upgrade"), "{err}");

    let (code, out, err) = es_cli(&idx.name, &["es-init", "--upgrade", "--layout", "compact"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("compact (8-bit minima) layout"), "{out}");
    let meta = read_meta(&client, &idx.name).await;
    let m = meta.minhash.as_ref().unwrap();
    assert!(m.from_full && m.layout == MinHashLayout::NEW, "{m:?}");
    // Before the back-fill: nothing rewritten, and the same articles are found (by the
    // compact rule on their whole minima's lowest 8 bits).
    for (b, want) in bases.iter().zip(&full_answers) {
        assert_eq!(&similar_ids(&idx.name, b), want, "{b}");
    }
    common::backfill(&client, &idx.name).await;
    let fp = meta.fingerprinter(&idx.name).unwrap();
    for (id, d) in &docs {
        let (src, _) = t::get(&client, &idx.name, id).await;
        let texts = [
            d["title"].as_str().unwrap_or(""),
            d["content"].as_str().unwrap_or(""),
        ];
        t::assert_minhash_fields(&src, &fp, &texts, id);
    }
    // The back-fill saw every document rewritten and ended the upgrade.
    let meta = read_meta(&client, &idx.name).await;
    let m = meta.minhash.as_ref().unwrap();
    assert!(!m.from_full && m.layout == MinHashLayout::NEW, "{m:?}");
    for (b, want) in bases.iter().zip(&full_answers) {
        assert_eq!(&similar_ids(&idx.name, b), want, "{b}");
    }
    let (code, out, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing changed"), "{out}");
}

//! Containment on a live node (fields format 4): a lead excerpt and a passage from the middle
//! of an article are found from either side with their relation, by the server's script as
//! by the client; `--no-containment` answers as before; indices in fields format 2 and 3 keep
//! answering as before until `es-init --upgrade` and `backfill` move them in place.

use crate::common;

use std::collections::BTreeMap;

use common::es::{self as t, TestIndex};
use common::es_cli;
use elasticsearch::http::Method;
use neardup::es::{self, Body, IndexMeta, RetryPolicy};
use serde_json::{json, Value};

/// `similar --id id` (with `extra` flags): its raw output and the matches by id.
fn similar(index: &str, id: &str, extra: &[&str]) -> (String, BTreeMap<String, Value>) {
    let mut args = vec!["similar", "--id", id];
    args.extend(extra);
    let (code, out, err) = es_cli(index, &args);
    assert_eq!(code, 0, "{err}");
    // The server's script compiles and runs: one Elasticsearch rejects (`script_exception`,
    // a compile or runtime error) would fall back to the client filter with a warning. A
    // node without painless (some test runners) falls back without a script error.
    assert!(!err.contains("script_exception"), "{err}");
    let by_id = common::json_lines(&out)
        .into_iter()
        .map(|l| (l["id"].as_str().unwrap().to_owned(), l))
        .collect();
    (out, by_id)
}

async fn read_meta(client: &elasticsearch::Elasticsearch, index: &str) -> IndexMeta {
    es::read_meta(client, &RetryPolicy::none(), index, &Default::default())
        .await
        .unwrap()
}

/// Documents of `index` whose fingerprints are stale for what it records now.
async fn stale(client: &elasticsearch::Elasticsearch, index: &str) -> u64 {
    let meta = read_meta(client, index).await;
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "count stale",
        Method::Post,
        &format!("/{index}/_count"),
        &[],
        Some(&Body::Json(json!({ "query": es::stale_query(&meta) }))),
    )
    .await
    .unwrap();
    r["count"].as_u64().unwrap()
}

/// A full article's id, its lead excerpt's and its passage's.
type Planted = (String, String, String);

/// Corpus articles, and for the two longest of them (by sentences) a lead excerpt (the first
/// 25 % of the sentences and a "read more" line) and a passage from the middle (20 %, under a
/// title of its own). Returns the documents and the `(full, excerpt, passage)` ids.
fn articles() -> (Vec<(String, Value)>, Vec<Planted>) {
    let mut docs = t::shared_articles(30);
    let mut by_length: Vec<(usize, usize)> = docs
        .iter()
        .enumerate()
        .map(|(i, (_, d))| (d["content"].as_str().unwrap().split('。').count(), i))
        .collect();
    by_length.sort_unstable_by(|a, b| b.cmp(a));
    let mut planted = Vec::new();
    for &(n, i) in &by_length[..2] {
        assert!(n >= 40, "{n} sentences");
        let (id, d) = docs[i].clone();
        let sentences: Vec<&str> = d["content"].as_str().unwrap().split('。').collect();
        let lead = sentences[..n / 4].join("。") + "。……阅读全文";
        let middle = sentences[n * 2 / 5..n * 3 / 5].join("。") + "。";
        let (l, m) = (format!("{id}-lead"), format!("{id}-middle"));
        docs.push((l.clone(), json!({ "title": d["title"], "content": lead })));
        docs.push((m.clone(), json!({ "title": "一段摘录", "content": middle })));
        planted.push((id, l, m));
    }
    (docs, planted)
}

/// Checks `found` holds `id` with `relation` and a containment of at least 0.7 (a part is
/// named a part even when its Jaccard similarity reaches the threshold, as a 25 % lead can).
fn assert_related(found: &BTreeMap<String, Value>, id: &str, relation: &str, from: &str) {
    let m = found
        .get(id)
        .unwrap_or_else(|| panic!("{from}: {id} not found in {found:?}"));
    let c = m["containment"].as_f64().unwrap();
    assert!((0.7..=1.0).contains(&c), "{from}: {m}");
    assert_eq!(m["relation"], relation, "{from}: {m}");
}

fn check_partial_copies(index: &str, planted: &[Planted]) {
    for (full, lead, middle) in planted {
        let (_, from_full) = similar(index, full, &[]);
        assert_related(&from_full, lead, "contains", full);
        assert_related(&from_full, middle, "contains", full);
        for part in [lead, middle] {
            let (_, from_part) = similar(index, part, &[]);
            assert_related(&from_part, full, "contained_in", part);
        }
        // Near-duplicates only: the passage (Jaccard about 0.2) is not found, and no match
        // says a relation.
        let (out, only) = similar(index, full, &["--no-containment"]);
        assert!(!only.contains_key(middle), "{out}");
        assert!(!out.contains("relation"), "{out}");
        assert!(
            only.values()
                .all(|m| m["similarity"].as_f64().unwrap() >= 0.3),
            "{out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excerpt_and_a_passage_are_found_from_either_side() {
    let client = t::client().await;
    let idx = TestIndex::new("containment");
    let (code, out, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("layout, containment"), "{out}");
    assert_eq!(
        es::FieldsFormat::of(&read_meta(&client, &idx.name).await),
        es::FieldsFormat::V4
    );
    let (docs, planted) = articles();
    t::load(&client, &idx.name, &docs).await;
    let (code, _, err) = es_cli(&idx.name, &["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    check_partial_copies(&idx.name, &planted);
    // The service on Elasticsearch answers what the command line finds, relations included.
    let app = common::serve::es_router(client.clone(), neardup::serve::ServeConfig::default());
    for (full, lead, middle) in &planted {
        for id in [full, lead, middle] {
            let (status, body, _) = common::serve::call(
                &app,
                axum::http::Request::get(format!("/v1/{}/similar/{id}", idx.name))
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await;
            assert_eq!(status, axum::http::StatusCode::OK, "{body}");
            let cli: Vec<Value> = similar(&idx.name, id, &[]).1.into_values().collect();
            let mut served = body["matches"].as_array().unwrap().clone();
            served.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
            assert_eq!(served, cli, "{id}");
        }
        // `?containment=false`: near-duplicates only, as `--no-containment` answers.
        let (status, body, _) = common::serve::call(
            &app,
            axum::http::Request::get(format!("/v1/{}/similar/{full}?containment=false", idx.name))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, axum::http::StatusCode::OK, "{body}");
        let only: Vec<Value> = similar(&idx.name, full, &["--no-containment"])
            .1
            .into_values()
            .collect();
        let mut served = body["matches"].as_array().unwrap().clone();
        served.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        assert_eq!(served, only, "{full}");
        assert!(!body.to_string().contains(middle.as_str()), "{body}");
    }
    // The client-side filter gives the same answer: the server's script keeps every
    // partial copy the rule keeps.
    for (full, lead, middle) in &planted {
        for id in [full, lead, middle] {
            let (server, _) = similar(&idx.name, id, &[]);
            let (client_side, _) = similar(&idx.name, id, &["--filter", "client"]);
            assert_eq!(server, client_side, "{id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_3_index_keeps_answering_and_moves_to_format_4_in_place() {
    let client = t::client().await;
    let idx = TestIndex::new("containment-format-3");
    let three = IndexMeta::default().with_containment_terms(es::ContainmentMeta::format_3());
    assert_eq!(es::FieldsFormat::of(&three), es::FieldsFormat::V3);
    es::init_index(&client, &RetryPolicy::none(), &idx.name, &three)
        .await
        .unwrap();
    let (docs, planted) = articles();
    t::load(&client, &idx.name, &docs).await;
    let (code, _, err) = es_cli(&idx.name, &["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    let minima = |src: &Value| {
        let terms: Vec<String> = src["minHashMinima"]
            .as_str()
            .unwrap()
            .split(' ')
            .map(str::to_owned)
            .collect();
        (terms.len(), terms[0].len())
    };
    let (src, _) = t::get(&client, &idx.name, &planted[0].0).await;
    assert_eq!(minima(&src), (128, 3), "{src}");
    // Format 3 finds partial copies by its own terms (10 of 128 agreeing), says once how to
    // move to format 4, and a plain es-init keeps it.
    check_partial_copies(&idx.name, &planted);
    let (code, _, err) = es_cli(&idx.name, &["similar", "--id", &planted[0].0]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(fields format 3)"), "{err}");
    assert!(err.contains("es-init --upgrade"), "{err}");
    let (code, _, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        es::FieldsFormat::of(&read_meta(&client, &idx.name).await),
        es::FieldsFormat::V3
    );
    assert_eq!(stale(&client, &idx.name).await, 0);

    // The upgrade records format 4: every document is stale until the back-fill rewrites
    // its terms.
    let (code, _, err) = es_cli(&idx.name, &["es-init", "--upgrade"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        es::FieldsFormat::of(&read_meta(&client, &idx.name).await),
        es::FieldsFormat::V4
    );
    assert_eq!(stale(&client, &idx.name).await, docs.len() as u64);
    common::backfill(&client, &idx.name).await;
    assert_eq!(stale(&client, &idx.name).await, 0);
    let (src, _) = t::get(&client, &idx.name, &planted[0].0).await;
    assert_eq!(minima(&src), (64, 4), "{src}");
    check_partial_copies(&idx.name, &planted);
    let (code, _, err) = es_cli(&idx.name, &["similar", "--id", &planted[0].0]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("es-init --upgrade"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_2_index_keeps_answering_and_moves_to_containment_in_place() {
    let client = t::client().await;
    let idx = TestIndex::new("containment-upgrade");
    let two = IndexMeta::default().with_containment(false);
    es::init_index(&client, &RetryPolicy::none(), &idx.name, &two)
        .await
        .unwrap();
    let (docs, planted) = articles();
    t::load(&client, &idx.name, &docs).await;
    let (code, _, err) = es_cli(&idx.name, &["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    let (src, _) = t::get(&client, &idx.name, &planted[0].0).await;
    assert!(src.get("minHashMinima").is_none(), "{src}");
    let before: Vec<String> = planted
        .iter()
        .map(|(full, _, _)| similar(&idx.name, full, &["--no-containment"]).0)
        .collect();

    // Untouched, it answers near-duplicates as before, and says once how to get more.
    let (full, _, middle) = &planted[0];
    let (code, out, err) = es_cli(&idx.name, &["similar", "--id", full]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("es-init --upgrade"), "{err}");
    assert!(!out.contains(middle.as_str()), "{out}");
    let (code, out, _) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0);
    // A plain es-init keeps what the index records (it adds groups and edit tracking,
    // which the library call above left out).
    assert!(!out.contains("layout, containment"), "{out}");
    assert_eq!(
        es::FieldsFormat::of(&read_meta(&client, &idx.name).await),
        es::FieldsFormat::V2
    );

    // The upgrade records format 4; every document is stale, and still found as before.
    let (code, out, err) = es_cli(&idx.name, &["es-init", "--upgrade"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("layout, containment"), "{out}");
    let meta = read_meta(&client, &idx.name).await;
    assert_eq!(es::FieldsFormat::of(&meta), es::FieldsFormat::V4);
    assert!(meta.has_containment());
    assert_eq!(stale(&client, &idx.name).await, docs.len() as u64);
    for ((full, _, _), want) in planted.iter().zip(&before) {
        assert_eq!(&similar(&idx.name, full, &["--no-containment"]).0, want);
    }

    common::backfill(&client, &idx.name).await;
    assert_eq!(stale(&client, &idx.name).await, 0);
    let fp = meta.fingerprinter(&idx.name).unwrap();
    for (id, d) in &docs {
        let (src, _) = t::get(&client, &idx.name, id).await;
        let texts = [
            d["title"].as_str().unwrap_or(""),
            d["content"].as_str().unwrap_or(""),
        ];
        t::assert_minhash_fields(&src, &fp, &texts, id);
    }
    check_partial_copies(&idx.name, &planted);
    for ((full, _, _), want) in planted.iter().zip(&before) {
        assert_eq!(&similar(&idx.name, full, &["--no-containment"]).0, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_on_insert_refuses_an_excerpt_and_stores_the_full_article_of_a_teaser() {
    let client = t::client().await;
    let idx = TestIndex::new("containment-dedupe");
    let (code, _, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    let (docs, planted) = articles();
    let doc = |id: &str| docs.iter().find(|(i, _)| i == id).unwrap().1.clone();
    let app = common::serve::es_router(client.clone(), neardup::serve::ServeConfig::default());
    let put = |id: &str| {
        common::serve::put_json(
            &format!(
                "/v1/{}/articles/{id}?dedupe=true&refresh=wait_for",
                idx.name
            ),
            &doc(id),
        )
    };
    // A full article is stored; its middle passage is refused, naming the relation.
    let (full, _, middle) = &planted[0];
    let (status, body, _) = common::serve::call(&app, put(full)).await;
    assert_eq!(status, axum::http::StatusCode::CREATED, "{body}");
    let (status, body, _) = common::serve::call(&app, put(middle)).await;
    assert_eq!(status, axum::http::StatusCode::CONFLICT, "{body}");
    assert_eq!(body["matches"][0]["id"], full.as_str(), "{body}");
    assert_eq!(body["matches"][0]["relation"], "contained_in", "{body}");
    assert_eq!(body["relation"], "contained_in", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("contained in"),
        "{body}"
    );
    // A passage is stored first; the full article that contains it is stored too.
    let (full, _, middle) = &planted[1];
    let (status, body, _) = common::serve::call(&app, put(middle)).await;
    assert_eq!(status, axum::http::StatusCode::CREATED, "{body}");
    let (status, body, _) = common::serve::call(&app, put(full)).await;
    assert_eq!(status, axum::http::StatusCode::CREATED, "{body}");
    t::refresh(&client, &idx.name).await;
    assert_eq!(t::count(&client, &idx.name).await, 3);
    // ...and joins the passage's group.
    assert_eq!(
        group_of(&client, &idx.name, full).await,
        group_of(&client, &idx.name, middle).await
    );

    // One `_bulk` of a lead, its full article and its middle passage, in that order: the
    // lead and the article are stored (one group), the passage is refused for the article
    // earlier in the request.
    let bulk = TestIndex::new("containment-dedupe-bulk");
    let (code, _, err) = es_cli(&bulk.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    let (full, lead, middle) = &planted[0];
    let lines: Vec<String> = [lead, full, middle]
        .iter()
        .map(|id| {
            let mut d = doc(id);
            d["id"] = json!(id);
            d.to_string()
        })
        .collect();
    let (status, body, _) = common::serve::call(
        &app,
        common::serve::post_ndjson(
            &format!("/v1/{}/articles/_bulk?dedupe=true", bulk.name),
            &lines,
        ),
    )
    .await;
    assert_eq!(status, axum::http::StatusCode::OK, "{body}");
    let items = body["items"].as_array().unwrap();
    assert_eq!(items[0]["status"], 201, "{body}");
    assert_eq!(items[1]["status"], 201, "{body}");
    assert_eq!(items[2]["status"], 409, "{body}");
    assert_eq!(items[2]["relation"], "contained_in", "{body}");
    assert_eq!(items[2]["matches"][0]["id"], full.as_str(), "{body}");
    t::refresh(&client, &bulk.name).await;
    assert_eq!(
        group_of(&client, &bulk.name, full).await,
        group_of(&client, &bulk.name, lead).await
    );
    for name in [&idx.name, &bulk.name] {
        t::call(
            &client,
            Method::Delete,
            &format!("/neardup-claims-{name}"),
            None,
        )
        .await;
    }
}

/// The duplicate group label of a document.
async fn group_of(client: &elasticsearch::Elasticsearch, index: &str, id: &str) -> String {
    let d = t::call(client, Method::Get, &format!("/{index}/_doc/{id}"), None).await;
    d["_source"]["nearDupGroup"]
        .as_str()
        .unwrap_or_else(|| panic!("{id} has no group: {d}"))
        .to_owned()
}

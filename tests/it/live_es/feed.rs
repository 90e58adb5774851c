//! The changes feed on a live node: after application edits of every kind (partial `_update`,
//! full re-index, `_bulk` `update` and `index` actions, `_update_by_query` where the node runs
//! painless), one worker pass, by a worker process that resumes from the checkpoint stored in
//! Elasticsearch, leaves every article with the fingerprint of its current text and rewrites
//! no other; the next pass reads the worker's own writes once and writes nothing. No final
//! pipeline is involved, so the same holds on every engine (the Elasticsearch 8/9 test nodes
//! have no painless, so no pipeline).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, feed, Body, EsIndexer, GroupMeta, IndexMeta, PassReport, RetryPolicy, Tracking, Worker,
    WorkerConfig,
};
use serde_json::{json, Value};

const ARTICLES: usize = 500;
/// Edits of each kind; five kinds, 160 edits.
const PER_KIND: usize = 32;

fn text_fields() -> Vec<String> {
    vec!["title".into(), "content".into()]
}

/// Every document: `_source` and `_seq_no`.
async fn all_docs(client: &Elasticsearch, index: &str) -> BTreeMap<String, (Value, u64)> {
    t::refresh(client, index).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{index}/_search"),
        Some(json!({ "size": 1000, "seq_no_primary_term": true, "query": { "match_all": {} } })),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["_id"].as_str().unwrap().to_owned(),
                (h["_source"].clone(), h["_seq_no"].as_u64().unwrap()),
            )
        })
        .collect()
}

fn halved(content: &Value, tag: &str) -> Value {
    let content = content.as_str().unwrap();
    let cut: String = content.chars().take(content.chars().count() / 2).collect();
    json!(format!("{cut}（{tag}）"))
}

async fn bulk(client: &Elasticsearch, index: &str, nd: String) {
    let r = es::request(
        client,
        &RetryPolicy::none(),
        "bulk edits",
        Method::Post,
        &format!("/{index}/_bulk"),
        &[],
        Some(&Body::NdJson(nd)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "{r}");
}

/// `_update_by_query` appending to `ids`' content; `false` where the node has no handler for
/// it or cannot run painless.
async fn update_by_query(client: &Elasticsearch, index: &str, ids: &[String]) -> bool {
    let path = format!("/{index}/_update_by_query");
    let body = json!({
        "query": { "ids": { "values": ids } },
        "script": { "source": "ctx._source.content = ctx._source.content.substring(0, ctx._source.content.length() / 2) + '（按查询更新）'", "lang": "painless" },
    });
    match es::request(
        client,
        &RetryPolicy::none(),
        &path,
        Method::Post,
        &path,
        &[("conflicts", "proceed")],
        Some(&Body::Json(body)),
    )
    .await
    {
        Ok(r) => {
            assert_eq!(r["updated"], ids.len(), "{r}");
            true
        }
        Err(es::EsError::Status { status, reason, .. })
            if (400..=405).contains(&status)
                && (reason.contains("no handler found") || reason.contains("painless")) =>
        {
            false
        }
        Err(e) => panic!("POST {path}: {e}"),
    }
}

/// The application's edits of `ids`, five kinds, `PER_KIND` each (the fifth kind,
/// `_update_by_query`, is sent as bulk `update` actions where the node cannot run it);
/// then `extra` articles get a field that is not text (`tags`): a write the feed reads and
/// leaves alone. Returns the kinds sent.
async fn edit(
    client: &Elasticsearch,
    index: &str,
    docs: &BTreeMap<String, (Value, u64)>,
    ids: &[String],
    extra: &[String],
) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    let mut chunks = ids.chunks(PER_KIND);
    // Partial `_update`s.
    for id in chunks.next().unwrap() {
        t::call(
            client,
            Method::Post,
            &format!("/{index}/_update/{id}"),
            Some(json!({ "doc": { "content": halved(&docs[id].0["content"], "更正") } })),
        )
        .await;
    }
    kinds.push("_update");
    // Whole documents re-indexed, with the stored fields read back.
    for id in chunks.next().unwrap() {
        let mut src = docs[id].0.clone();
        src["content"] = halved(&src["content"], "重发");
        t::call(
            client,
            Method::Put,
            &format!("/{index}/_doc/{id}"),
            Some(src),
        )
        .await;
    }
    kinds.push("PUT _doc");
    // A bulk of `update` actions (partial documents).
    let mut nd = String::new();
    for id in chunks.next().unwrap() {
        nd += &format!(
            "{}\n{}\n",
            json!({ "update": { "_id": id } }),
            json!({ "doc": { "content": halved(&docs[id].0["content"], "批量") } })
        );
    }
    bulk(client, index, nd).await;
    kinds.push("_bulk update");
    // A bulk of `index` actions (whole documents, stored fields read back).
    let mut nd = String::new();
    for id in chunks.next().unwrap() {
        let mut src = docs[id].0.clone();
        src["title"] = json!(format!("{}（新）", src["title"].as_str().unwrap()));
        src["content"] = halved(&src["content"], "批量重发");
        nd += &format!("{}\n{src}\n", json!({ "index": { "_id": id } }));
    }
    bulk(client, index, nd).await;
    kinds.push("_bulk index");
    let last = chunks.next().unwrap();
    if update_by_query(client, index, last).await {
        kinds.push("_update_by_query");
    } else {
        let mut nd = String::new();
        for id in last {
            nd += &format!(
                "{}\n{}\n",
                json!({ "update": { "_id": id } }),
                json!({ "doc": { "content": halved(&docs[id].0["content"], "按查询更新") } })
            );
        }
        bulk(client, index, nd).await;
        kinds.push("_bulk update (no painless)");
    }
    assert!(chunks.next().is_none());
    let mut nd = String::new();
    for id in extra {
        nd += &format!(
            "{}\n{}\n",
            json!({ "update": { "_id": id } }),
            json!({ "doc": { "tags": ["edited"] } })
        );
    }
    bulk(client, index, nd).await;
    kinds
}

/// A grouped, two-shard index made by es-init, with edit tracking (the final pipeline) when
/// `tracked` and the node can run it; returns whether it runs.
async fn index(client: &Elasticsearch, prefix: &str, tracked: bool) -> (TestIndex, bool) {
    let idx = TestIndex::new(prefix);
    t::call(
        client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({ "settings": { "number_of_shards": 2, "number_of_replicas": 0 } })),
    )
    .await;
    let meta = IndexMeta {
        group: Some(GroupMeta::default()),
        ..IndexMeta::default()
    };
    es::init_index(client, &RetryPolicy::none(), &idx.name, &meta)
        .await
        .unwrap();
    let mut on = false;
    if tracked {
        let done = es::track_edits(client, &RetryPolicy::none(), &idx.name, false)
            .await
            .unwrap();
        on = matches!(done[&idx.name], Tracking::On(_));
    }
    (idx, on)
}

fn worker(indexer: &EsIndexer) -> Worker {
    Worker::new(
        indexer.clone(),
        WorkerConfig {
            text_fields: text_fields(),
            ..WorkerConfig::default()
        },
    )
}

async fn pass(w: &mut Worker, what: &str) -> PassReport {
    let r = w.pass(&AtomicBool::new(false)).await.unwrap();
    eprintln!(
        "{what}: {:.2} s, stale {}, stale read {}, feed read {}, feed unchanged {}, written {}, conflicts {}",
        r.elapsed.as_secs_f64(),
        r.stale,
        r.seen,
        r.feed.read,
        r.feed.unchanged,
        r.writes.updated,
        r.writes.conflicts.len()
    );
    assert!(r.writes.failed.is_empty(), "{r:?}");
    r
}

/// The scenario, with or without the final pipeline; returns the reports of the pass after
/// the edits and of the next one.
async fn scenario(prefix: &str, tracked: bool) -> Option<(PassReport, PassReport)> {
    let client = t::client().await;
    let (idx, on) = index(&client, prefix, tracked).await;
    if tracked && !on {
        return None;
    }
    let name = idx.name.clone();
    let articles = t::shared_articles(ARTICLES);
    let started = Instant::now();
    t::load(&client, &name, &articles).await;
    eprintln!(
        "{prefix}: {ARTICLES} articles loaded in {:.2} s (pipeline {on})",
        started.elapsed().as_secs_f64()
    );
    let indexer = t::indexer(&client, &name).await;

    // The first pass: no checkpoint yet, so the stale query fingerprints all 500 and the
    // feed starts at the global checkpoints read before it.
    let mut first = worker(&indexer);
    let r = pass(&mut first, "pass 1 (start)").await;
    assert_eq!(
        (r.stale, r.writes.updated),
        (ARTICLES as u64, ARTICLES as u64),
        "{r:?}"
    );
    assert_eq!((r.feed.started, r.feed.read), (1, 0), "{r:?}");
    // The next reads the worker's own 500 writes once, and writes nothing.
    let r = pass(&mut first, "pass 2 (own writes)").await;
    assert_eq!(
        (r.feed.read, r.feed.unchanged),
        (ARTICLES as u64, ARTICLES as u64),
        "{r:?}"
    );
    assert_eq!(r.writes.total(), 0, "{r:?}");
    let before = all_docs(&client, &name).await;
    assert_eq!(before.len(), ARTICLES);

    // 160 edits, every kind, on long articles, spread over both shards; 10 more articles
    // get a non-text field.
    let long: Vec<String> = articles
        .iter()
        .filter(|(_, d)| d["content"].as_str().unwrap().chars().count() > 400)
        .map(|(id, _)| id.clone())
        .collect();
    assert!(long.len() >= 5 * PER_KIND + 10, "{}", long.len());
    let edited: Vec<String> = long[..5 * PER_KIND].to_vec();
    let extra: Vec<String> = long[5 * PER_KIND..5 * PER_KIND + 10].to_vec();
    let kinds = edit(&client, &name, &before, &edited, &extra).await;
    eprintln!("{prefix}: edits {kinds:?}");
    let edited: BTreeSet<String> = edited.into_iter().collect();
    assert_eq!(edited.len(), 160);
    let after_edits = all_docs(&client, &name).await;
    for id in &edited {
        let (src, _) = &after_edits[id];
        assert_ne!(
            t::stored_fields(src),
            t::wanted_fields(&indexer, src),
            "{id}: the edit changes the fingerprint"
        );
    }

    // A worker process started afresh resumes from the stored checkpoint: one pass.
    let mut restarted = worker(&indexer);
    let r = pass(&mut restarted, "pass 3 (after 160 edits)").await;
    assert_eq!(r.writes.updated, edited.len() as u64, "{r:?}");
    assert_eq!(r.feed.started, 0, "{r:?}");
    let after = all_docs(&client, &name).await;
    let mut right = 0;
    for (id, (src, seq)) in &after {
        if t::stored_fields(src) == t::wanted_fields(&indexer, src) {
            right += 1;
        }
        if !edited.contains(id) {
            assert_eq!(
                t::stored_fields(src),
                t::stored_fields(&before[id].0),
                "{id}: not rewritten"
            );
            assert_eq!(*seq, after_edits[id].1, "{id}: not written at all");
        }
    }
    assert_eq!(
        right, ARTICLES,
        "every fingerprint is that of the current text"
    );
    let second = pass(&mut restarted, "pass 4 (settles)").await;
    assert_eq!(second.writes.total(), 0, "{second:?}");
    assert_eq!(second.feed.read, edited.len() as u64, "{second:?}");
    let third = pass(&mut restarted, "pass 5 (quiet)").await;
    assert_eq!((third.feed.read, third.writes.total()), (0, 0), "{third:?}");

    // The checkpoint: one document, keyed by the index's UUID.
    let store = feed::feed_index_name(&name);
    assert_eq!(restarted.feed_index(), Some(store.as_str()));
    t::refresh(&client, &store).await;
    let docs = all_docs(&client, &store).await;
    assert_eq!(docs.len(), 1, "{docs:?}");
    let (src, _) = docs.values().next().unwrap();
    assert_eq!(src["index"], name);
    assert_eq!(src["shards"].as_array().unwrap().len(), 2, "{src}");
    if !on {
        assert_eq!(r.feed.read, (edited.len() + 10) as u64, "{r:?}");
        assert_eq!(r.feed.unchanged, 10, "{r:?}");
    }
    Some((r, second))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_of_every_kind_are_followed_by_the_feed_without_a_pipeline() {
    scenario("feed", false).await.unwrap();
}

/// With the final pipeline too (where the node runs it): the same result; the pipeline makes
/// the stale query find most edits first, and the feed then reads each once more. The
/// figures printed here are those of docs/measurements/es-edit-tracking.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_and_the_pipeline_together_give_the_same_fingerprints() {
    let client = t::client().await;
    let caps = {
        let probe = TestIndex::new("feed-probe");
        t::call(&client, Method::Put, &format!("/{}", probe.name), None).await;
        t::capabilities(&client, &probe.name).await
    };
    match scenario("feed-tracked", true).await {
        None => assert!(!caps.painless, "the pipeline runs where painless does"),
        Some((r, _)) => {
            assert!(caps.painless);
            assert!(r.stale > 0, "the pipeline marked edits stale: {r:?}");
        }
    }
}

/// A re-created index (a new UUID) starts over; a worker whose checkpoint is older than the
/// stored one cannot store it (guarded by `_seq_no`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_index_starts_over_and_a_slow_worker_never_moves_the_checkpoint_back() {
    let client = t::client().await;
    let (idx, _) = index(&client, "feed-restart", false).await;
    let name = idx.name.clone();
    let articles = t::shared_articles(20);
    t::load(&client, &name, &articles).await;
    let indexer = t::indexer(&client, &name).await;
    let mut a = worker(&indexer);
    let r = pass(&mut a, "a: start").await;
    assert_eq!(r.feed.started, 1, "{r:?}");

    let mut f = feed::Feed::new(client.clone(), RetryPolicy::none(), &name);
    let now = f.now().await.unwrap();
    assert_eq!(now.len(), 1);
    let stored = f.load(&now[0].uuid).await.unwrap().unwrap();
    // Another worker moves it on (its own pass); this one's save, guarded by the version it
    // read, is refused.
    let mut b = worker(&indexer);
    t::load(&client, &name, &articles[..3]).await;
    pass(&mut b, "b: moves on").await;
    let moved = f.load(&now[0].uuid).await.unwrap().unwrap();
    assert_ne!(moved.guard, stored.guard);
    assert!(!f.save(&stored.marks, Some(stored.guard)).await.unwrap());
    assert_eq!(f.load(&now[0].uuid).await.unwrap().unwrap(), moved);

    // Deleted and created again: a new UUID, so the feed starts over after a stale pass.
    t::delete_index(&client, &name).await;
    es::init_index(&client, &RetryPolicy::none(), &name, &IndexMeta::default())
        .await
        .unwrap();
    let fresh = f.now().await.unwrap();
    assert_ne!(fresh[0].uuid, now[0].uuid);
    assert!(matches!(
        feed::plan(Some(&moved.marks), &fresh[0]),
        feed::Plan::Start { .. }
    ));
    t::load(&client, &name, &articles).await;
    let indexer = t::indexer(&client, &name).await;
    let r = pass(&mut worker(&indexer), "a new index").await;
    assert_eq!((r.feed.started, r.writes.updated), (1, 20), "{r:?}");
}

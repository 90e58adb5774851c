//! Edit tracking on a live node: the final pipeline es-init installs turns every write that is
//! not neardup's own (a partial `_update`, a full re-index, `_update_by_query`, a bulk of edits)
//! into a stale article, which one worker pass re-fingerprints from its current text; neardup's
//! own writes (the back-fill, the worker, regroup's labels, the service's writes through
//! `EsIndexer`) are never marked stale, and the marker is never stored. Where the node cannot
//! run the pipeline (the Elasticsearch 8/9 test nodes: no painless, no ingest-common), es-init
//! says so, names `--changed-field` and changes nothing.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;

use common::es::{self as t, TestIndex};
use common::es_cli;
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, Body, EsIndexer, GroupLabel, GroupMeta, IndexMeta, Refresh, RetryPolicy, Tracking,
    Worker, WorkerConfig, TRACKING_MARKER,
};
use serde_json::{json, Map, Value};

fn text_fields() -> Vec<String> {
    vec!["title".into(), "content".into()]
}

/// The ids the worker's "missing or outdated" query finds.
async fn stale_ids(client: &Elasticsearch, indexer: &EsIndexer) -> BTreeSet<String> {
    t::refresh(client, indexer.index()).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{}/_search", indexer.index()),
        Some(json!({
            "query": Worker::new(indexer.clone(), WorkerConfig::default()).stale_query(),
            "size": 1000,
            "_source": false,
        })),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Sends a request; `None` where the node has no handler for it (`_update_by_query` is a
/// module some distributions leave out).
async fn call_if_available(client: &Elasticsearch, path: &str, body: Value) -> Option<Value> {
    match es::request(
        client,
        &RetryPolicy::none(),
        path,
        Method::Post,
        path,
        &[("refresh", "true"), ("conflicts", "proceed")],
        Some(&Body::Json(body)),
    )
    .await
    {
        Ok(v) => Some(v),
        Err(es::EsError::Status { status, reason, .. })
            if (status == 400 || status == 404 || status == 405)
                && reason.contains("no handler found") =>
        {
            None
        }
        Err(e) => panic!("POST {path}: {e}"),
    }
}

/// A grouped index (es-init's default) with edit tracking as es-init installs it; whether the
/// node runs it is asked of the node (painless and its ingest processors).
async fn tracked_index(client: &Elasticsearch, prefix: &str) -> (TestIndex, bool) {
    let meta = IndexMeta {
        group: Some(GroupMeta::default()),
        ..IndexMeta::default()
    };
    let idx = t::initialised(client, prefix, &meta).await;
    let caps = t::capabilities(client, &idx.name).await;
    let done = es::track_edits(client, &RetryPolicy::none(), &idx.name, false)
        .await
        .unwrap();
    let on = match &done[&idx.name] {
        Tracking::On(m) => {
            assert_eq!(m.pipeline, es::tracking_pipeline_name(&idx.name));
            true
        }
        Tracking::Unavailable(why) => {
            assert!(why.contains("cannot run"), "{why}");
            false
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(on, caps.painless, "tracking where the node runs painless");
    (idx, on)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_of_every_kind_are_re_fingerprinted_and_neardup_writes_are_not() {
    let client = t::client().await;
    let (idx, on) = tracked_index(&client, "tracking").await;
    let indexer = EsIndexer::open(
        client.clone(),
        idx.name.clone(),
        RetryPolicy::none(),
        &Default::default(),
    )
    .await
    .unwrap()
    .with_refresh(Refresh::WaitFor);
    assert_eq!(indexer.meta().tracking.is_some(), on);

    // neardup's own writes: the service's bulk and PUT (`EsIndexer`), then the back-fill
    // rewriting every document (`--all`: no write is a noop).
    let docs = t::shared_articles(24);
    assert!(docs[..9]
        .iter()
        .all(|(_, d)| d["content"].as_str().unwrap().chars().count() > 200));
    let sketches: Vec<_> = docs
        .iter()
        .map(|(_, d)| indexer.sketch(d, &text_fields()).unwrap())
        .collect();
    let batch: Vec<_> = docs[..20]
        .iter()
        .zip(&sketches)
        .map(|((id, d), s)| (id.as_str(), d, s))
        .collect();
    for r in indexer
        .index_articles(&batch, Refresh::WaitFor)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    for ((id, d), s) in docs[20..].iter().zip(&sketches[20..]) {
        indexer.index_article(Some(id), d, s).await.unwrap();
    }
    assert_eq!(stale_ids(&client, &indexer).await, BTreeSet::new());
    let (code, _, err) = es_cli(&idx.name, &["backfill", "--all", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stale_ids(&client, &indexer).await, BTreeSet::new());
    let before: Vec<Map<String, Value>> = {
        let mut v = Vec::new();
        for (id, _) in &docs {
            let (src, _) = t::get(&client, &idx.name, id).await;
            assert!(src.get(TRACKING_MARKER).is_none(), "{id}: {src}");
            v.push(t::stored_fields(&src));
        }
        v
    };

    // regroup's label writes, guarded: not stale either.
    let mut labels = Vec::new();
    for (id, _) in &docs[..4] {
        let (_, guard) = t::get(&client, &idx.name, id).await;
        labels.push(GroupLabel {
            id: id.clone(),
            guard: Some(guard),
            label: "relabelled".into(),
        });
    }
    let r = indexer.write_group_labels(&labels).await.unwrap();
    assert_eq!(r.updated, 4, "{r:?}");
    assert_eq!(stale_ids(&client, &indexer).await, BTreeSet::new());

    // The application's edits. 0: a partial `_update` makes it an exact copy of article 1.
    let (id0, id1) = (&docs[0].0, &docs[1].0);
    let twin_text = docs[1].1.clone();
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/{id0}?refresh=true", idx.name),
        Some(json!({ "doc": { "title": twin_text["title"], "content": twin_text["content"] } })),
    )
    .await;
    // 2: re-indexed whole by the application, with the stored fields it read back.
    let (mut src, _) = t::get(&client, &idx.name, &docs[2].0).await;
    src["content"] = json!(format!("{}（更正）", src["content"].as_str().unwrap()));
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_doc/{}?refresh=true", idx.name, docs[2].0),
        Some(src),
    )
    .await;
    // 3: `_update_by_query`, where the node has it.
    let by_query = call_if_available(
        &client,
        &format!("/{}/_update_by_query", idx.name),
        json!({
            "query": { "ids": { "values": [docs[3].0] } },
            "script": { "source": "ctx._source.content = ctx._source.content + '（补充）'", "lang": "painless" },
        }),
    )
    .await;
    // 4 to 7: a bulk of edits, as a back-office script sends: whole documents (`index`
    // actions, with the stored fields read back). 8: a bulk `update` action (a partial
    // document), which the engine may run without the final pipeline.
    let mut nd = String::new();
    for (id, _) in &docs[4..8] {
        let (mut src, _) = t::get(&client, &idx.name, id).await;
        let content = src["content"].as_str().unwrap();
        let cut: String = content.chars().take(content.chars().count() / 2).collect();
        src["content"] = json!(cut);
        nd += &format!("{}\n{src}\n", json!({ "index": { "_id": id } }));
    }
    let content = docs[8].1["content"].as_str().unwrap();
    let cut: String = content.chars().take(content.chars().count() / 2).collect();
    nd += &format!(
        "{}\n{}\n",
        json!({ "update": { "_id": docs[8].0 } }),
        json!({ "doc": { "content": cut } })
    );
    let r = es::request(
        &client,
        &RetryPolicy::none(),
        "bulk edits",
        Method::Post,
        &format!("/{}/_bulk", idx.name),
        &[("refresh", "true")],
        Some(&Body::NdJson(nd)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "{r}");
    let bulk_updates = indexer
        .meta()
        .tracking
        .as_ref()
        .is_some_and(|t| t.bulk_updates);
    let mut edited: BTreeSet<String> = [0, 2, 4, 5, 6, 7]
        .iter()
        .map(|&i| docs[i].0.clone())
        .collect();
    if by_query.is_some() {
        edited.insert(docs[3].0.clone());
    }
    if bulk_updates {
        edited.insert(docs[8].0.clone());
    }

    // A label written into an edited article does not make it look fresh.
    let (_, guard) = t::get(&client, &idx.name, id0).await;
    let r = indexer
        .write_group_labels(&[GroupLabel {
            id: id0.clone(),
            guard: Some(guard),
            label: "relabelled".into(),
        }])
        .await
        .unwrap();
    assert_eq!(r.total(), 1, "{r:?}");

    if !on {
        // No tracking: the edits are not seen without a changed field (the fallback es-init
        // names), and the marker was never sent, so never stored.
        assert_eq!(stale_ids(&client, &indexer).await, BTreeSet::new());
        for (id, _) in &docs {
            let (src, _) = t::get(&client, &idx.name, id).await;
            assert!(src.get(TRACKING_MARKER).is_none(), "{id}: {src}");
        }
        return;
    }
    assert_eq!(stale_ids(&client, &indexer).await, edited);

    // One worker pass: every article's fingerprint is that of its current text; only the
    // edited ones were rewritten, and the worker's writes are not stale.
    let mut worker = Worker::new(
        indexer.clone(),
        WorkerConfig {
            text_fields: text_fields(),
            ..WorkerConfig::default()
        },
    );
    worker.check().await.unwrap();
    let r = worker.pass(&AtomicBool::new(false)).await.unwrap();
    assert_eq!(r.stale, edited.len() as u64, "{r:?}");
    assert_eq!(r.writes.updated, edited.len() as u64, "{r:?}");
    assert_eq!(stale_ids(&client, &indexer).await, BTreeSet::new());
    for ((id, _), old) in docs.iter().zip(&before) {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert!(src.get(TRACKING_MARKER).is_none(), "{id}: {src}");
        let now = t::stored_fields(&src);
        if !edited.contains(id) {
            assert_eq!(&now, old, "{id}: not edited, not rewritten");
        }
        if *id == docs[8].0 && !bulk_updates {
            // The limit: a bulk `update` action the engine ran without the pipeline is not
            // seen (docs/elasticsearch.md, "Edits").
            assert_ne!(now, t::wanted_fields(&indexer, &src), "{id}");
            continue;
        }
        assert_eq!(now, t::wanted_fields(&indexer, &src), "{id}");
    }
    let r = worker.pass(&AtomicBool::new(false)).await.unwrap();
    assert_eq!(r.writes.total(), 0, "{r:?}");

    // similar --id follows the new text: article 0 is now an exact copy of article 1.
    let (code, out, err) = es_cli(&idx.name, &["similar", "--id", id0]);
    assert_eq!(code, 0, "{err}");
    let found: BTreeSet<String> = common::json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(found.contains(id1.as_str()), "{found:?}");
    // Deleting an index leaves its pipeline: removing tracking deletes it.
    let off = es::untrack_edits(&client, &RetryPolicy::none(), &idx.name)
        .await
        .unwrap();
    assert_eq!(off[&idx.name], Tracking::Off(true));
}

/// es-init from the command line: installs tracking by default (or says why not, naming
/// --changed-field), refuses to replace a user's final pipeline unless asked to chain to it,
/// and --no-tracking removes it cleanly (setting, pipeline, `_meta`), restoring the user's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn es_init_installs_chains_refuses_and_removes_tracking() {
    let client = t::client().await;
    let idx = TestIndex::new("tracking-cli");
    let ours = es::tracking_pipeline_name(&idx.name);
    let (code, out, err) = es_cli(&idx.name, &["es-init"]);
    assert_eq!(code, 0, "{err}");
    let caps = t::capabilities(&client, &idx.name).await;
    let final_pipeline = |client: Elasticsearch, name: String| async move {
        let r = t::call(
            &client,
            Method::Get,
            &format!("/{name}/_settings/index.final_pipeline?flat_settings=true"),
            None,
        )
        .await;
        r[&name]["settings"]["index.final_pipeline"]
            .as_str()
            .map(str::to_owned)
    };
    let meta = |client: Elasticsearch, name: String| async move {
        es::read_meta(&client, &RetryPolicy::none(), &name, &Default::default())
            .await
            .unwrap()
    };
    if !caps.painless {
        assert!(
            out.contains("edits are NOT tracked") && out.contains("--changed-field"),
            "{out}"
        );
        assert_eq!(final_pipeline(client.clone(), idx.name.clone()).await, None);
        assert_eq!(meta(client.clone(), idx.name.clone()).await.tracking, None);
        return;
    }
    assert!(
        out.contains(&format!("edits tracked by the final pipeline `{ours}`")),
        "{out}"
    );
    assert_eq!(
        final_pipeline(client.clone(), idx.name.clone())
            .await
            .as_deref(),
        Some(ours.as_str())
    );
    assert_eq!(
        meta(client.clone(), idx.name.clone())
            .await
            .tracking
            .unwrap()
            .pipeline,
        ours
    );

    // An index with a final pipeline of the user's.
    let user = format!("{}-users", idx.name);
    t::call(
        &client,
        Method::Put,
        &format!("/_ingest/pipeline/{user}"),
        Some(json!({ "processors": [ { "set": { "field": "seenByUser", "value": true } } ] })),
    )
    .await;
    let other = TestIndex::new("tracking-user");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", other.name),
        Some(json!({ "settings": { "index.final_pipeline": user } })),
    )
    .await;
    let (code, _, err) = es_cli(&other.name, &["es-init"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&user)
            && err.contains("--chain-final-pipeline")
            && err.contains("--no-tracking"),
        "{err}"
    );
    assert_eq!(
        final_pipeline(client.clone(), other.name.clone()).await,
        Some(user.clone())
    );
    let (code, out, err) = es_cli(&other.name, &["es-init", "--chain-final-pipeline"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("after your pipeline `{user}`")),
        "{out}"
    );
    // Both run: the user's sets its field, neardup's clears the versions of an edit.
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_doc/1?refresh=true", other.name),
        Some(json!({ "title": "t", "content": "c", "simHashVersion": "v", "minHashVersion": "v" })),
    )
    .await;
    let (src, _) = t::get(&client, &other.name, "1").await;
    assert_eq!(
        src,
        json!({ "title": "t", "content": "c", "seenByUser": true })
    );

    // Removal is clean, and gives the user's pipeline back.
    let (code, out, err) = es_cli(&other.name, &["es-init", "--no-tracking"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("edit tracking removed"), "{out}");
    assert_eq!(
        final_pipeline(client.clone(), other.name.clone()).await,
        Some(user.clone())
    );
    assert_eq!(
        meta(client.clone(), other.name.clone()).await.tracking,
        None
    );
    let gone = es::send(
        &client,
        Method::Get,
        &format!(
            "/_ingest/pipeline/{}",
            es::tracking_pipeline_name(&other.name)
        ),
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(gone.status.as_u16(), 404);
    let (code, _, err) = es_cli(&idx.name, &["es-init", "--no-tracking"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(final_pipeline(client.clone(), idx.name.clone()).await, None);
    t::call(
        &client,
        Method::Delete,
        &format!("/_ingest/pipeline/{user}"),
        None,
    )
    .await;
}

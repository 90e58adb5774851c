//! `EsIndexer` against a live node: articles with the fingerprints of both methods in one
//! request, bulk partial updates that leave every other field byte-identical, seq_no guards,
//! per-item errors, what the index's `_meta` holds decides what is written, and a fingerprinter
//! of another version is refused.

use crate::common;

use std::collections::BTreeMap;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{
    init_index, BlockType, EsError, EsIndexer, FieldNames, FingerprintUpdate, GroupLabel,
    IndexMeta, MinHashFieldNames, Refresh, RetryPolicy,
};
use neardup::{FingerprintConfig, Fingerprinter, Profile, SimHash};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Both methods, default settings and field names (what `neardup es-init` makes).
fn both() -> IndexMeta {
    IndexMeta::default()
}

async fn initialised(client: &Elasticsearch, prefix: &str) -> TestIndex {
    t::initialised(client, prefix, &both()).await
}

async fn open(client: &Elasticsearch, index: &str) -> EsIndexer {
    t::indexer(client, index).await.with_refresh(Refresh::Now)
}

fn texts(src: &Value) -> [&str; 2] {
    [
        src["title"].as_str().unwrap_or(""),
        src["content"].as_str().unwrap_or(""),
    ]
}

fn text_fields() -> Vec<String> {
    vec!["title".into(), "content".into()]
}

fn stored_simhash(src: &Value) -> Option<SimHash> {
    let blocks: Vec<i16> = ["simHashA", "simHashB", "simHashC", "simHashD"]
        .iter()
        .map(|b| src[b].as_i64().map(|v| v as i16))
        .collect::<Option<_>>()?;
    let fp = SimHash::from_blocks16([blocks[0], blocks[1], blocks[2], blocks[3]]);
    assert_eq!(
        fp,
        SimHash::from_i64(src["simHash"].as_i64().unwrap()),
        "blocks and long agree"
    );
    Some(fp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn articles_are_indexed_with_their_fingerprint_in_one_request() {
    let client = t::client().await;
    let idx = initialised(&client, "write-articles").await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let indexer = open(&client, &idx.name).await;
    assert_eq!(indexer.meta(), &both());
    assert_eq!(indexer.fingerprinter().version(), fp.version());

    let articles = t::example_articles();
    for (id, article) in &articles {
        let sketches = indexer.sketch(article, &text_fields()).unwrap();
        let r = indexer
            .index_article(Some(id), article, &sketches)
            .await
            .unwrap();
        assert_eq!(&r.id, id);
        assert_eq!(r.result, "created");
    }
    assert_eq!(t::count(&client, &idx.name).await, articles.len() as u64);

    for (id, article) in &articles {
        let (src, _) = t::get(&client, &idx.name, id).await;
        assert_eq!(src["title"], article["title"]);
        assert_eq!(src["content"], article["content"]);
        assert_eq!(src["simHashVersion"], fp.version());
        match fp.fingerprint_fields(&[
            article["title"].as_str().unwrap(),
            article["content"].as_str().unwrap(),
        ]) {
            Ok(f) => {
                assert_eq!(stored_simhash(&src), Some(f.simhash), "{id}");
                assert_eq!(src["simHashReason"], Value::Null);
            }
            Err(_) => {
                assert_eq!(src["simHashReason"], "too_short", "{id}");
                assert_eq!(src["simHashA"], Value::Null);
                assert_eq!(src["simHash"], Value::Null);
            }
        }
        t::assert_minhash_fields(&src, &fp, &texts(article), id);
    }
    // The examples' ground truth: two too-short items, too short for both methods.
    let (src, _) = t::get(&client, &idx.name, "ex-029").await;
    assert_eq!(src["simHashReason"], "too_short");
    assert_eq!(src["minHashReason"], "too_short");

    // Re-indexing replaces the article; an auto id works too; a non-object is refused.
    let (id, article) = &articles[0];
    let r = indexer
        .index_article(
            Some(id),
            article,
            &indexer.sketch(article, &text_fields()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.result, "updated");
    let r = indexer
        .index_article(
            None,
            article,
            &indexer.sketch(article, &text_fields()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.result, "created");
    assert_ne!(&r.id, id);
    let e = indexer
        .index_article(
            Some("x"),
            &json!(["not", "an", "object"]),
            &indexer.sketch(&json!({}), &[]).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("document `x`"), "{e}");
}

/// The raw JSON text of each top-level field of a document's `_source`, as Elasticsearch
/// returns it.
async fn raw_source(client: &Elasticsearch, index: &str, id: &str) -> BTreeMap<String, String> {
    let resp = client
        .send(
            Method::Get,
            &format!("/{index}/_source/{id}"),
            Default::default(),
            None::<&()>,
            None::<()>,
            None,
        )
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    let fields: BTreeMap<String, Box<RawValue>> = serde_json::from_str(&text).unwrap();
    fields
        .into_iter()
        .map(|(k, v)| (k, v.get().to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_updates_touch_only_the_fingerprint_fields() {
    let client = t::client().await;
    let idx = initialised(&client, "write-bulk").await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let indexer = open(&client, &idx.name).await;

    // Articles with every kind of JSON value next to the text, loaded without fingerprints.
    let mut docs = t::shared_articles(40);
    for (i, (_, d)) in docs.iter_mut().enumerate() {
        let o = d.as_object_mut().unwrap();
        o.insert("views".into(), json!(i * 1000 + 7));
        o.insert("score".into(), json!(0.25 + i as f64));
        o.insert(
            "tags".into(),
            json!(["新闻", "tag \"quoted\"", format!("第{i}条")]),
        );
        o.insert("meta".into(), json!({"source": {"name": "新京报", "url": "https://example.com/a?b=1&c=2"}, "flags": [true, false, null]}));
        o.insert("updated_at".into(), json!("2024-05-01T08:00:00Z"));
        o.insert("empty".into(), json!({}));
    }
    docs.push((
        "short-one".into(),
        json!({"title": "快讯", "content": "", "views": 1}),
    ));
    t::load(&client, &idx.name, &docs).await;

    let mut before = Vec::new();
    let mut updates = Vec::new();
    for (id, _) in &docs {
        let (src, guard) = t::get(&client, &idx.name, id).await;
        before.push(raw_source(&client, &idx.name, id).await);
        updates.push(FingerprintUpdate {
            id: id.clone(),
            guard: Some(guard),
            sketches: indexer.sketch(&src, &text_fields()).unwrap(),
            order: None,
            texts: None,
        });
    }
    let report = indexer.update_fingerprints(&updates).await.unwrap();
    assert_eq!(report.updated, docs.len() as u64, "{report:?}");
    assert!(report.conflicts.is_empty() && report.failed.is_empty() && report.missing.is_empty());

    let (ours, minhash) = (FieldNames::default(), MinHashFieldNames::default());
    for ((id, d), (old, u)) in docs.iter().zip(before.iter().zip(&updates)) {
        let mut new = raw_source(&client, &idx.name, id).await;
        let containment = neardup::es::ContainmentFieldNames::default();
        for f in ours
            .all()
            .into_iter()
            .chain(minhash.all())
            .chain(containment.all())
        {
            assert!(new.remove(f).is_some(), "{id}: {f} written");
        }
        assert_eq!(&new, old, "{id}: every other field byte-identical");
        let (src, _) = t::get(&client, &idx.name, id).await;
        match u.sketches.simhash.as_ref().unwrap() {
            Ok(f) => assert_eq!(stored_simhash(&src), Some(f.simhash)),
            Err(_) => assert_eq!(src["simHashReason"], "too_short"),
        }
        t::assert_minhash_fields(&src, &fp, &texts(d), id);
    }

    // The same values again are no-ops (no new document versions).
    let updates: Vec<_> = updates
        .into_iter()
        .map(|u| FingerprintUpdate { guard: None, ..u })
        .collect();
    let report = indexer.update_fingerprints(&updates).await.unwrap();
    assert_eq!(report.noop, docs.len() as u64, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_fingerprint_never_overwrites_a_newer_text() {
    let client = t::client().await;
    let idx = initialised(&client, "write-stale").await;
    let fp = Fingerprinter::for_profile(Profile::Default);
    let indexer = open(&client, &idx.name).await;
    let docs = t::shared_articles(3);
    t::load(&client, &idx.name, &docs).await;

    // The worker reads the old text and fingerprints it...
    let (old_src, guard) = t::get(&client, &idx.name, &docs[0].0).await;
    let stale = indexer.sketch(&old_src, &text_fields()).unwrap();
    // ...meanwhile the article service saves a new text with its fresh fingerprint...
    let new_article = &docs[1].1;
    let fresh = indexer.sketch(new_article, &text_fields()).unwrap();
    indexer
        .index_article(Some(&docs[0].0), new_article, &fresh)
        .await
        .unwrap();
    // ...and a second document is edited without a fingerprint at all.
    let (_, guard2) = t::get(&client, &idx.name, &docs[2].0).await;
    t::call(
        &client,
        Method::Post,
        &format!("/{}/_update/{}?refresh=true", idx.name, docs[2].0),
        Some(json!({"doc": {"content": "改写后的正文"}})),
    )
    .await;

    let report = indexer
        .update_fingerprints(&[
            FingerprintUpdate {
                id: docs[0].0.clone(),
                guard: Some(guard),
                sketches: stale.clone(),
                order: None,
                texts: None,
            },
            FingerprintUpdate {
                id: docs[2].0.clone(),
                guard: Some(guard2),
                sketches: stale.clone(),
                order: None,
                texts: None,
            },
            FingerprintUpdate {
                id: "deleted-meanwhile".into(),
                guard: Some((0, 1)),
                sketches: stale.clone(),
                order: None,
                texts: None,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        report.conflicts,
        [docs[0].0.clone(), docs[2].0.clone()],
        "{report:?}"
    );
    assert_eq!(report.missing, ["deleted-meanwhile"]);
    assert_eq!(report.updated, 0);

    let (src, _) = t::get(&client, &idx.name, &docs[0].0).await;
    let simhash = |s: &neardup::Sketches| s.simhash.clone().unwrap().unwrap().simhash;
    assert_eq!(
        stored_simhash(&src),
        Some(simhash(&fresh)),
        "the newer fingerprint stays"
    );
    assert_ne!(simhash(&stale), stored_simhash(&src).unwrap());
    t::assert_minhash_fields(&src, &fp, &texts(new_article), &docs[0].0);
    let (src, _) = t::get(&client, &idx.name, &docs[2].0).await;
    assert!(
        src.get("simHashA").is_none() && src.get("minHashBands").is_none(),
        "no stale fingerprint on the edited text: {src}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_item_failures_are_reported_with_the_document_id() {
    let client = t::client().await;
    let idx = TestIndex::new("write-failures");
    // `simHashReason` mapped as a number: writing "too_short" into it fails for that item only.
    let names = FieldNames {
        reason: "reasonCode".into(),
        ..FieldNames::default()
    };
    init_index(
        &client,
        &RetryPolicy::none(),
        &idx.name,
        &IndexMeta::simhash(
            Profile::Default,
            BlockType::Short,
            FieldNames {
                reason: "other".into(),
                ..FieldNames::default()
            },
        ),
    )
    .await
    .unwrap();
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_mapping", idx.name),
        Some(json!({"properties": {"reasonCode": {"type": "long"}}})),
    )
    .await;
    // An indexer told (wrongly) that the index records `reasonCode`: `new` trusts its caller.
    let fp = Fingerprinter::for_profile(Profile::Default);
    let told = IndexMeta::simhash(Profile::Default, BlockType::Short, names);
    let indexer = EsIndexer::new(client.clone(), &idx.name, told, fp)
        .unwrap()
        .with_refresh(Refresh::Now);
    let docs = vec![
        ("good".to_string(), t::shared_articles(1).remove(0).1),
        (
            "tiny".to_string(),
            json!({"title": "快讯", "content": "暂无"}),
        ),
    ];
    t::load(&client, &idx.name, &docs).await;
    let updates: Vec<_> = docs
        .iter()
        .map(|(id, d)| FingerprintUpdate {
            id: id.clone(),
            guard: None,
            sketches: indexer.sketch(d, &text_fields()).unwrap(),
            order: None,
            texts: None,
        })
        .collect();
    let report = indexer.update_fingerprints(&updates).await.unwrap();
    assert_eq!(report.updated, 1, "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let f = &report.failed[0];
    assert_eq!((f.id.as_str(), f.status), ("tiny", 400));
    // 7.x and OpenSearch call it mapper_parsing_exception, 8.x and 9.x
    // document_parsing_exception: the report passes on whichever the node says.
    assert!(
        ["mapper_parsing_exception", "document_parsing_exception"].contains(&f.error_type.as_str()),
        "{f}"
    );
    assert!(
        f.to_string().starts_with("document `tiny`: HTTP 400"),
        "{f}"
    );
}

/// Issue 32: a write block on the index (`index.blocks.write`, 403 `cluster_block_exception`)
/// is one error for every writer, never a failure per document nor refused credentials: the
/// bulk updates of the back-fill and the worker, regroup's labels, a single article and a
/// bulk of articles all stop with `EsError::Blocked`, which names the request that lifts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_block_stops_every_writer_with_the_request_that_lifts_it() {
    let client = t::client().await;
    let grouped = IndexMeta {
        group: Some(neardup::es::GroupMeta::default()),
        ..both()
    };
    let idx = t::initialised(&client, "write-blocked", &grouped).await;
    let docs = t::shared_articles(3);
    t::load(&client, &idx.name, &docs).await;
    let indexer = open(&client, &idx.name).await;
    let settings = format!("/{}/_settings", idx.name);
    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.write": true})),
    )
    .await;
    let lift = format!(
        r#"PUT /{}/_settings {{"index.blocks.write": false}}"#,
        idx.name
    );
    let is_block = |e: &EsError| {
        matches!(e, EsError::Blocked { lift: l, .. } if *l == lift)
            && e.to_string().contains("run the same command again")
    };
    let sketches: Vec<_> = docs
        .iter()
        .map(|(_, d)| indexer.sketch(d, &text_fields()).unwrap())
        .collect();
    let updates: Vec<_> = docs
        .iter()
        .zip(&sketches)
        .map(|((id, _), s)| FingerprintUpdate {
            id: id.clone(),
            guard: None,
            sketches: s.clone(),
            order: None,
            texts: None,
        })
        .collect();
    let e = indexer.update_fingerprints(&updates).await.unwrap_err();
    assert!(is_block(&e), "{e}");
    let labels = [GroupLabel {
        id: docs[0].0.clone(),
        guard: None,
        label: "x".into(),
    }];
    let e = indexer.write_group_labels(&labels).await.unwrap_err();
    assert!(is_block(&e), "{e}");
    let e = indexer
        .index_article(Some("new"), &docs[0].1, &sketches[0])
        .await
        .unwrap_err();
    assert!(is_block(&e), "{e}");
    let each = indexer
        .index_articles(&[("new", &docs[0].1, &sketches[0])], Refresh::No)
        .await
        .unwrap();
    assert!(each[0].as_ref().is_err_and(is_block), "{:?}", each[0]);
    // Lifted as the message says, the same writes go through.
    t::call(
        &client,
        Method::Put,
        &settings,
        Some(json!({"index.blocks.write": false})),
    )
    .await;
    let report = indexer.update_fingerprints(&updates).await.unwrap();
    assert_eq!(report.updated, 3, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_meta_decides_what_is_written_and_other_versions_are_refused() {
    let client = t::client().await;

    // SimHash only: no MinHash field is written.
    let simhash_only =
        IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default());
    let idx = t::initialised(&client, "write-simhash-only", &simhash_only).await;
    let indexer = open(&client, &idx.name).await;
    assert_eq!(indexer.meta(), &simhash_only);
    let (id, article) = t::shared_articles(1).remove(0);
    let sketches = indexer.sketch(&article, &text_fields()).unwrap();
    assert!(
        sketches.minhash.is_none(),
        "MinHash is not computed for nothing"
    );
    indexer
        .index_article(Some(&id), &article, &sketches)
        .await
        .unwrap();
    let (src, _) = t::get(&client, &idx.name, &id).await;
    assert!(stored_simhash(&src).is_some());
    assert!(src.get("minHashVersion").is_none(), "{src}");

    // A fingerprinter of another SimHash profile is refused, naming both versions.
    let seed = Fingerprinter::for_profile(Profile::Seed000);
    let e = EsIndexer::new(
        client.clone(),
        &idx.name,
        simhash_only.clone(),
        seed.clone(),
    )
    .unwrap_err();
    assert!(matches!(e, EsError::VersionMismatch { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("seed000") && msg.contains("default-3"),
        "{msg}"
    );
    assert!(indexer.clone().with_fingerprinter(seed).is_err());
    // And one of other MinHash parameters, on an index holding MinHash.
    let other = Fingerprinter::new(FingerprintConfig {
        minhash: "shingle=w2;n=128;sig=oph;bands=32x4".parse().unwrap(),
        ..FingerprintConfig::default()
    });
    let e = EsIndexer::new(client.clone(), &idx.name, both(), other).unwrap_err();
    assert!(e.to_string().contains("bands=32x4"), "{e}");

    // Legacy: the older Java service's index (no _meta, the four blocks and nothing else
    // of ours) is not initialised; with the other SimHash fields mapped (no _meta still) it
    // is SimHash seed000, and gets SimHash only.
    let legacy = TestIndex::new("write-legacy");
    t::create_index(
        &client,
        &legacy.name,
        json!({
            "simHashA": {"type": "short"}, "simHashB": {"type": "short"},
            "simHashC": {"type": "short"}, "simHashD": {"type": "short"}
        }),
    )
    .await;
    let e = EsIndexer::open(
        client.clone(),
        &legacy.name,
        RetryPolicy::none(),
        &FieldNames::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, EsError::NotInitialised { .. }), "{e:?}");
    assert!(e.to_string().contains("simHashVersion"), "{e}");
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_mapping", legacy.name),
        Some(json!({"properties": {
            "simHash": {"type": "long"}, "simHashVersion": {"type": "keyword"},
            "simHashReason": {"type": "keyword"}
        }})),
    )
    .await;
    let indexer = open(&client, &legacy.name).await;
    assert!(indexer.meta().minhash.is_none());
    let seed = Fingerprinter::for_profile(Profile::Seed000);
    assert_eq!(indexer.fingerprinter().version(), seed.version());
    let sketches = indexer.sketch(&article, &text_fields()).unwrap();
    indexer
        .index_article(Some(&id), &article, &sketches)
        .await
        .unwrap();
    let (src, _) = t::get(&client, &legacy.name, &id).await;
    assert_eq!(src["simHashVersion"], seed.version());
    assert_eq!(
        stored_simhash(&src),
        Some(seed.fingerprint_fields(&texts(&article)).unwrap().simhash)
    );
    assert!(src.get("minHashBands").is_none(), "{src}");

    // A MinHash field mapped with another type than `_meta` needs is a conflict.
    let bad = TestIndex::new("write-bad-minhash");
    t::create_index(
        &client,
        &bad.name,
        json!({"minHashSignature": {"type": "keyword"}}),
    )
    .await;
    let mut mapping = both().mapping();
    mapping["properties"]
        .as_object_mut()
        .unwrap()
        .remove("minHashSignature");
    mapping["_meta"] = json!({ "neardup": both().to_json() });
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_mapping", bad.name),
        Some(mapping),
    )
    .await;
    let e = EsIndexer::open(
        client.clone(),
        &bad.name,
        RetryPolicy::none(),
        &FieldNames::default(),
    )
    .await
    .unwrap_err();
    match &e {
        EsError::MappingConflict {
            field,
            existing,
            wanted,
            ..
        } => assert_eq!(
            (field.as_str(), existing.as_str(), wanted.as_str()),
            ("minHashSignature", "keyword", "binary")
        ),
        other => panic!("expected a mapping conflict, got {other:?}"),
    }
}

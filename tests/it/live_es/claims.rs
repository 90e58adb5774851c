//! Claims (`neardup::es::claims`) against a live node: one holder per key across concurrent
//! writers, waiting until release, expired claims taken over, guarded releases, and a holder
//! dropped mid-request giving its keys back at once (what it was writing listed as pending).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::{
    claim_keys, insert_unless_near, ClaimError, Claims, EsIndexer, IndexMeta, Inserted, NewArticle,
    Refresh, RetryPolicy, Similar,
};
use neardup::{Sketches, Tolerance};
use serde_json::{json, Value};

async fn claims(idx: &TestIndex) -> Claims {
    let client = t::client().await;
    let c = Claims::new(client, RetryPolicy::none(), &idx.name);
    c.ensure_index().await.unwrap();
    c.ensure_index().await.unwrap(); // idempotent
    c
}

/// `id` written under each of `keys`, for `Claims::release_recording`.
fn under(keys: &[&str], id: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    keys.iter()
        .map(|k| (k.to_string(), vec![id.to_owned()]))
        .collect()
}

fn keys(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_sharing_a_key_never_hold_it_together() {
    let idx = TestIndex::new("claims-mutex");
    let c = Arc::new(claims(&idx).await);
    // 12 writers; each pair shares at least one key, in different orders.
    let sets: Vec<Vec<String>> = (0..12)
        .map(|i| {
            keys(&[
                &format!("k{}", i % 3),
                "shared",
                &format!("k{}", (i + 1) % 3),
            ])
        })
        .collect();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, set) in sets.into_iter().enumerate() {
        let (c, inside, overlaps) = (c.clone(), inside.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            let held = c
                .acquire(
                    &set,
                    &format!("w{i}"),
                    Instant::now() + Duration::from_secs(20),
                )
                .await
                .unwrap();
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            c.release(held).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_key_times_out_and_nothing_stays_held() {
    let idx = TestIndex::new("claims-timeout");
    let c = claims(&idx).await;
    let first = c
        .acquire(
            &keys(&["b", "c"]),
            "first",
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(first.keys().collect::<Vec<_>>(), ["b", "c"]);
    let e = c
        .acquire(
            &keys(&["a", "c"]),
            "second",
            Instant::now() + Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    match &e {
        ClaimError::Timeout { key, holder } => {
            assert_eq!((key.as_str(), holder.as_str()), ("c", "first"))
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // "a" was released when "c" timed out: a third writer gets it at once.
    let third = c
        .acquire(
            &keys(&["a"]),
            "third",
            Instant::now() + Duration::from_millis(300),
        )
        .await
        .unwrap();
    c.release(third).await;
    c.release(first).await;
    let again = c
        .acquire(
            &keys(&["a", "b", "c"]),
            "fourth",
            Instant::now() + Duration::from_millis(300),
        )
        .await
        .unwrap();
    c.release(again).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_claim_is_taken_over_and_its_late_release_leaves_the_new_one() {
    let idx = TestIndex::new("claims-expiry");
    let mut c = claims(&idx).await;
    c.lease = Duration::from_millis(200);
    let crashed = c
        .acquire(
            &keys(&["x"]),
            "crashed",
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.lease = Duration::from_secs(30);
    let next = c
        .acquire(
            &keys(&["x"]),
            "next",
            Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap();
    // The crashed holder's release comes late: it must not free the new holder's claim.
    c.release(crashed).await;
    let e = c
        .acquire(
            &keys(&["x"]),
            "third",
            Instant::now() + Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClaimError::Timeout { ref holder, .. } if holder == "next"),
        "{e:?}"
    );
    c.release(next).await;
}

/// A release after a write lists the article in each key's record; the next holder of any of
/// those keys gets it back (`recent_ids`), until the horizon has passed. A record with nothing
/// recent is deleted on release, and `sweep` deletes free records older than the horizon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_list_recent_inserts_until_the_horizon() {
    let idx = TestIndex::new("claims-recent");
    let mut c = claims(&idx).await;
    let soon = || Instant::now() + Duration::from_secs(5);
    let first = c.acquire(&keys(&["a", "b"]), "w1", soon()).await.unwrap();
    assert!(first.recent_ids().is_empty());
    c.release_recording(first, &under(&["a", "b"], "article-1"))
        .await;
    let second = c.acquire(&keys(&["b", "c"]), "w2", soon()).await.unwrap();
    assert_eq!(second.recent_ids(), ["article-1"]);
    c.release_recording(second, &under(&["b", "c"], "article-2"))
        .await;
    let third = c
        .acquire(&keys(&["a", "b", "c"]), "w3", soon())
        .await
        .unwrap();
    assert_eq!(third.recent_ids(), ["article-1", "article-2"]);
    // A release with nothing written keeps what the records list.
    c.release(third).await;
    let held = c.acquire(&keys(&["c"]), "w4", soon()).await.unwrap();
    assert_eq!(held.recent_ids(), ["article-2"]);
    // Each article is listed under the keys given for it only.
    c.release_recording(held, &under(&["c"], "article-2")).await;
    let a_only = c.acquire(&keys(&["a"]), "w4b", soon()).await.unwrap();
    assert_eq!(a_only.recent_ids(), ["article-1"]);
    c.release(a_only).await;

    // A holder keeps the records of keys it took over while another waits for them.
    let holder = c.acquire(&keys(&["b"]), "w5", soon()).await.unwrap();
    let e = c
        .acquire(
            &keys(&["a", "b"]),
            "w6",
            Instant::now() + Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClaimError::Timeout { ref holder, .. } if holder == "w5"),
        "{e:?}"
    );
    c.release(holder).await;

    // Past the horizon, entries are dropped, and a record left with none is deleted.
    c.horizon = Duration::from_millis(300);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = c
        .acquire(&keys(&["a", "b", "c"]), "w7", soon())
        .await
        .unwrap();
    assert!(late.recent_ids().is_empty(), "{:?}", late.recent_ids());
    c.release(late).await;
    let client = t::client().await;
    for key in ["a", "b", "c"] {
        let r = neardup::es::send(
            &client,
            Method::Get,
            &format!("/{}/_doc/{key}", c.index()),
            &[],
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status.as_u16(), 404, "record `{key}`: {}", r.body);
    }

    // The sweep deletes free records older than the horizon, and leaves held ones.
    let d = c.acquire(&keys(&["d"]), "w8", soon()).await.unwrap();
    c.release_recording(d, &under(&["d"], "article-3")).await;
    let e = c.acquire(&keys(&["e"]), "w9", soon()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    t::refresh(&client, c.index()).await;
    assert_eq!(c.sweep().await.unwrap(), 1);
    let e_record = neardup::es::send(
        &client,
        Method::Get,
        &format!("/{}/_doc/e", c.index()),
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(e_record.status.as_u16(), 200, "the held claim stays");
    c.release(e).await;
    assert!(c.sweep_due());
    assert!(!c.sweep_due(), "at most once per horizon");
}

/// A dedupe insert of `article` as `id` (`insert_unless_near`), waiting for claimed keys up to
/// `wait`.
async fn insert(
    w: &(EsIndexer, Claims, Similar, Tolerance),
    id: &str,
    article: &Value,
    wait: Duration,
) -> Result<Inserted, neardup::es::DedupeError> {
    let (indexer, claims, similar, tolerance) = w;
    let sketches = sketch(indexer, article);
    let mut done = insert_unless_near(
        indexer,
        claims,
        similar,
        &[NewArticle {
            id,
            article,
            sketches: &sketches,
        }],
        *tolerance,
        Refresh::No,
        &format!("insert of {id}"),
        Instant::now() + wait,
    )
    .await?;
    Ok(done.pop().unwrap())
}

fn sketch(indexer: &EsIndexer, article: &Value) -> Sketches {
    let fields = ["title".to_owned(), "content".to_owned()];
    indexer.sketch(article, &fields).unwrap()
}

/// Whether `id` is stored in `index` (a realtime get: no refresh needed).
async fn stored(client: &elasticsearch::Elasticsearch, index: &str, id: &str) -> bool {
    let r = neardup::es::send(
        client,
        Method::Get,
        &format!("/{index}/_doc/{id}"),
        &[],
        None,
    )
    .await
    .unwrap();
    r.status.as_u16() == 200
}

/// A holder dropped before its release (a request its timeout cancelled) gives its keys back
/// at once, listing the article it was writing as pending. The index never refreshes on its
/// own here, so a search finds nothing written in the test: only the listing can refuse a
/// near-duplicate. The lease (600 s) is far beyond every claimant's deadline: a claimant that
/// had to wait for it fails instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_dropped_mid_request_gives_its_keys_back_listing_what_it_was_writing() {
    let client = t::client().await;
    let idx = t::initialised(&client, "claims-dropped", &IndexMeta::default()).await;
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_settings", idx.name),
        Some(json!({ "index": { "refresh_interval": "-1" } })),
    )
    .await;
    let indexer = t::indexer(&client, &idx.name).await;
    let mut claims = Claims::new(client.clone(), RetryPolicy::none(), &idx.name);
    claims.lease = Duration::from_secs(600);
    claims.ensure_index().await.unwrap();
    let similar = Similar::new(client.clone(), indexer.fingerprinter().clone());
    let tolerance = similar.default_tolerance(idx.name.as_str()).await.unwrap();
    let w = (indexer, claims, similar, tolerance);
    let (indexer, claims) = (&w.0, &w.1);
    let keys_of = |a: &Value| {
        let s = sketch(indexer, a).into_sketch(tolerance.method()).unwrap();
        claim_keys(&s, indexer.meta()).unwrap()
    };
    let writing = |keys: &[String], id: &str| {
        keys.iter()
            .map(|k| (k.clone(), vec![id.to_owned()]))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let soon = Duration::from_secs(60);
    // Three stories, each with two near-duplicate versions.
    let stories: Vec<Vec<Value>> = t::shared_articles(3)
        .into_iter()
        .map(|(_, a)| {
            let content = a["content"].as_str().unwrap();
            vec![
                a.clone(),
                json!({ "title": a["title"], "content": format!("{content}（来源：本网综合）") }),
            ]
        })
        .collect();

    // 1. Dropped after its write was applied (its answer never heard): a racing
    // near-duplicate is refused, naming it, and never created; nobody waits for the lease.
    let a = &stories[0];
    let keys = keys_of(&a[0]);
    let mut held = claims
        .acquire(&keys, "dropped after writing", Instant::now() + soon)
        .await
        .unwrap();
    held.writing(writing(&keys, "a0"));
    let s0 = sketch(indexer, &a[0]);
    indexer
        .index_articles(&[("a0", &a[0], &s0)], Refresh::No)
        .await
        .unwrap();
    drop(held);
    match insert(&w, "a1", &a[1], soon).await.unwrap() {
        Inserted::Duplicate(m) => assert_eq!(m[0].id, "a0", "{m:?}"),
        other => panic!("a near-duplicate of a0 must be refused: {other:?}"),
    }
    assert!(!stored(&client, &idx.name, "a1").await, "a1 never created");

    // 2. Dropped while its write was in flight: until the article is found by id (or the lease
    // ends), a near-duplicate waits; once it is applied, the near-duplicate is refused.
    let b = &stories[1];
    let keys = keys_of(&b[0]);
    let mut held = claims
        .acquire(&keys, "dropped while writing", Instant::now() + soon)
        .await
        .unwrap();
    held.writing(writing(&keys, "b0"));
    drop(held);
    match insert(&w, "b1", &b[1], Duration::from_secs(2)).await {
        Err(neardup::es::DedupeError::Claim(ClaimError::Timeout { holder, .. })) => {
            assert_eq!(holder, "the unanswered write of `b0`")
        }
        other => panic!("b1 must wait for b0's unanswered write: {other:?}"),
    }
    assert!(!stored(&client, &idx.name, "b1").await, "b1 not created");
    let s0 = sketch(indexer, &b[0]);
    indexer
        .index_articles(&[("b0", &b[0], &s0)], Refresh::No)
        .await
        .unwrap();
    match insert(&w, "b1", &b[1], soon).await.unwrap() {
        Inserted::Duplicate(m) => assert_eq!(m[0].id, "b0", "{m:?}"),
        other => panic!("a near-duplicate of b0 must be refused: {other:?}"),
    }
    assert!(!stored(&client, &idx.name, "b1").await, "b1 never created");

    // 3. Dropped before writing anything (cancelled while it searched): an insert of the same
    // keys goes on at once and is written.
    let c = &stories[2];
    let held = claims
        .acquire(
            &keys_of(&c[0]),
            "dropped before writing",
            Instant::now() + soon,
        )
        .await
        .unwrap();
    drop(held);
    assert!(
        matches!(
            insert(&w, "c0", &c[0], soon).await.unwrap(),
            Inserted::Written(_)
        ),
        "c0 written"
    );
    assert!(stored(&client, &idx.name, "c0").await);
}

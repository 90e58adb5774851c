//! Claims (`neardup::es::claims`) against a live node: one holder per key across concurrent
//! writers, waiting until release, expired claims taken over, guarded releases.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::RetryPolicy;
use neardup::es::{ClaimError, Claims};

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

/// Removes the claims index with the test index.
struct Cleanup(String);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let name = self.0.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let c = t::client().await;
                let _ = neardup::es::send(&c, Method::Delete, &format!("/{name}"), &[], None).await;
            })
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_sharing_a_key_never_hold_it_together() {
    let idx = TestIndex::new("claims-mutex");
    let c = Arc::new(claims(&idx).await);
    let _cleanup = Cleanup(c.index().to_owned());
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
    let _cleanup = Cleanup(c.index().to_owned());
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
    let _cleanup = Cleanup(c.index().to_owned());
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
    let _cleanup = Cleanup(c.index().to_owned());
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

//! The one paging layer against a live node: every hit exactly once across many small pages in
//! each paging mode the node has, a stop before the end frees the context, and a scroll that
//! disappears mid-read is reported as lost (or, through `scan`, read again without passing
//! any hit on twice).

use crate::common;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, Cursor, EsConfig, EsError, Paging, RetryPolicy, ScanOptions, Scanner};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const DOCS: usize = 100;
const PAGE: usize = 7;

/// `DELETE /_search/scroll/_all` reaches every scroll of the node: the tests that read with a
/// scroll take turns.
static SCROLLS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A 3-shard index of `DOCS` documents `d000`…
async fn index(client: &Elasticsearch, prefix: &str) -> TestIndex {
    let idx = TestIndex::new(prefix);
    t::call(
        client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({ "settings": { "number_of_shards": 3, "number_of_replicas": 0 } })),
    )
    .await;
    let docs: Vec<(String, Value)> = (0..DOCS)
        .map(|i| (format!("d{i:03}"), json!({ "n": i })))
        .collect();
    t::load(client, &idx.name, &docs).await;
    idx
}

fn all_ids() -> BTreeSet<String> {
    (0..DOCS).map(|i| format!("d{i:03}")).collect()
}

fn options(paging: Paging) -> ScanOptions {
    ScanOptions {
        page_size: PAGE,
        paging,
        ..ScanOptions::default()
    }
}

fn scanner(client: &Elasticsearch) -> Scanner {
    Scanner::new(client.clone(), RetryPolicy::none())
}

fn body() -> Value {
    json!({ "query": { "match_all": {} }, "_source": false, "track_total_hits": true })
}

/// How often each id came back, reading the cursor to its end.
async fn drain(cursor: &mut Cursor) -> Result<BTreeMap<String, u32>, EsError> {
    let mut seen = BTreeMap::new();
    loop {
        let page = cursor.next_page().await?;
        if page.is_empty() {
            return Ok(seen);
        }
        assert!(
            page.len() <= PAGE,
            "{} hits in a page of {PAGE}",
            page.len()
        );
        for h in page {
            *seen
                .entry(h["_id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
}

fn assert_each_once(seen: &BTreeMap<String, u32>, want: &BTreeSet<String>, what: &str) {
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "{what}: read more than once: {twice:?}");
    let got: BTreeSet<String> = seen.keys().cloned().collect();
    assert_eq!(&got, want, "{what}");
}

/// The search contexts (scrolls, points in time) open on `index`.
async fn open_contexts(client: &Elasticsearch, index: &str) -> u64 {
    let r = t::call(
        client,
        Method::Get,
        &format!("/{index}/_stats/search"),
        None,
    )
    .await;
    r["_all"]["total"]["search"]["open_contexts"]
        .as_u64()
        .unwrap_or_else(|| panic!("no open_contexts in {r}"))
}

/// The modes to check on this node: scroll everywhere, point in time where the node has one.
async fn modes(client: &Elasticsearch, index: &str) -> (bool, Vec<Paging>) {
    let pit = t::capabilities(client, index).await.pit;
    let mut modes = vec![Paging::Scroll];
    if pit {
        modes.push(Paging::Pit);
    }
    (pit, modes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hit_exactly_once_across_small_pages_in_every_paging_mode() {
    let client = t::client().await;
    let idx = index(&client, "scan-once").await;
    let (pit, modes) = modes(&client, &idx.name).await;
    let _turn = SCROLLS.lock().await;
    for paging in modes.iter().copied().chain([Paging::Auto]) {
        let s = scanner(&client);
        let mut cursor = s.cursor(&idx.name, body(), &options(paging));
        let seen = drain(&mut cursor).await.unwrap();
        cursor.close().await;
        assert_each_once(&seen, &all_ids(), paging.name());
        let used = cursor.stats().paging;
        let want = match paging {
            Paging::Auto if pit => Paging::Pit,
            Paging::Auto => Paging::Scroll,
            p => p,
        };
        assert_eq!(used, Some(want), "{paging}");
        assert_eq!(cursor.total(), Some(DOCS as u64), "{paging}");
        assert_eq!(cursor.stats().hits, DOCS as u64);
        // 15 pages of 7 hold 100 hits; the last, short one ends the read.
        assert_eq!(
            cursor.stats().requests,
            DOCS.div_ceil(PAGE) as u32,
            "{paging}"
        );
        if paging == Paging::Auto {
            assert_eq!(s.pit_supported(), Some(pit));
        }

        // The same through the callback, and with a first plain request that cannot hold all.
        let mut seen = BTreeMap::new();
        let opts = ScanOptions {
            single_request_first: true,
            ..options(paging)
        };
        let stats = s
            .scan(&idx.name, &body(), &opts, |page| {
                for h in page {
                    *seen
                        .entry(h["_id"].as_str().unwrap().to_owned())
                        .or_insert(0u32) += 1;
                }
                true
            })
            .await
            .unwrap();
        assert_each_once(&seen, &all_ids(), &format!("scan {paging}"));
        assert_eq!(stats.paging, Some(want));
        assert_eq!(stats.requests, 1 + DOCS.div_ceil(PAGE) as u32);
    }

    // Limited to one shard: scroll (a PIT cannot be limited), exactly that shard's documents.
    let shard0 = t::call(
        &client,
        Method::Post,
        &format!("/{}/_search?preference=_shards:0&size=1000", idx.name),
        Some(json!({ "_source": false })),
    )
    .await;
    let want: BTreeSet<String> = shard0["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!want.is_empty() && want.len() < DOCS, "{}", want.len());
    let mut cursor = scanner(&client)
        .cursor(&idx.name, body(), &options(Paging::Auto))
        .with_preference("_shards:0");
    let seen = drain(&mut cursor).await.unwrap();
    cursor.close().await;
    assert_each_once(&seen, &want, "shard 0");
    assert_eq!(cursor.stats().paging, Some(Paging::Scroll));
    let mut forced = scanner(&client)
        .cursor(&idx.name, body(), &options(Paging::Pit))
        .with_preference("_shards:0");
    let e = forced.next_page().await.unwrap_err();
    assert!(e.to_string().contains("page with scroll"), "{e}");

    // Forcing a point in time where the node has none fails with the node's answer.
    if !pit {
        let mut c = scanner(&client).cursor(&idx.name, body(), &options(Paging::Pit));
        let e = c.next_page().await.unwrap_err();
        assert!(e.to_string().contains("point in time"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_early_closes_the_context() {
    let client = t::client().await;
    let idx = index(&client, "scan-stop").await;
    let (_, modes) = modes(&client, &idx.name).await;
    let _turn = SCROLLS.lock().await;
    for paging in modes {
        assert_eq!(open_contexts(&client, &idx.name).await, 0, "{paging}");
        let s = scanner(&client);
        let mut cursor = s.cursor(&idx.name, body(), &options(paging));
        assert_eq!(cursor.next_page().await.unwrap().len(), PAGE);
        assert!(
            open_contexts(&client, &idx.name).await > 0,
            "{paging}: no context open while reading"
        );
        cursor.close().await;
        assert_eq!(open_contexts(&client, &idx.name).await, 0, "{paging}");

        // Through the callback: stop after the second page.
        let mut pages = 0;
        let stats = s
            .scan(&idx.name, &body(), &options(paging), |_| {
                pages += 1;
                pages < 2
            })
            .await
            .unwrap();
        assert_eq!((pages, stats.hits), (2, 2 * PAGE as u64), "{paging}");
        assert_eq!(open_contexts(&client, &idx.name).await, 0, "{paging}");
    }
}

/// Deletes every scroll of the node, from a thread of its own (the callback of `scan` is not
/// async).
fn delete_all_scrolls() {
    std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let client = EsConfig::new(&t::url()).unwrap().client().unwrap();
                let r = es::send(&client, Method::Delete, "/_search/scroll/_all", &[], None)
                    .await
                    .unwrap();
                assert!(r.status.is_success(), "{:?}", r.body);
            })
    })
    .join()
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scroll_deleted_mid_read_is_lost_and_scan_reads_again_without_duplicates() {
    let client = t::client().await;
    let idx = index(&client, "scan-lost").await;
    let _turn = SCROLLS.lock().await;

    let s = scanner(&client);
    let mut cursor = s.cursor(&idx.name, body(), &options(Paging::Scroll));
    assert_eq!(cursor.next_page().await.unwrap().len(), PAGE);
    delete_all_scrolls();
    match cursor.next_page().await {
        Err(EsError::ContextLost { cause, .. }) => assert_eq!(cause.status(), Some(404), "{cause}"),
        other => panic!("expected a lost context, got {other:?}"),
    }
    // Done after the error: nothing more, nothing to close.
    assert!(cursor.next_page().await.unwrap().is_empty());
    cursor.close().await;

    // `scan` reads again from the start and passes on only what it had not.
    let mut seen = BTreeMap::new();
    let mut pages = 0;
    let stats = s
        .scan(&idx.name, &body(), &options(Paging::Scroll), |page| {
            pages += 1;
            if pages == 3 {
                delete_all_scrolls();
            }
            for h in page {
                *seen
                    .entry(h["_id"].as_str().unwrap().to_owned())
                    .or_insert(0u32) += 1;
            }
            true
        })
        .await
        .unwrap();
    assert_each_once(&seen, &all_ids(), "scan after a lost scroll");
    assert_eq!(stats.hits, DOCS as u64);
    // Three pages, the failed continuation (not counted), then the whole read again.
    assert_eq!(stats.requests, 3 + DOCS.div_ceil(PAGE) as u32, "{stats:?}");
    assert_eq!(open_contexts(&client, &idx.name).await, 0);
}

/// A shard that cannot answer (here the shards of a red index read with a green one) makes
/// Elasticsearch answer a search with 200 and the other shards' hits, saying so only in
/// `_shards`: counted in `total`, not in `successful`, and (7.10, OpenSearch) not in `failed`
/// either. Every read of neardup's is an error then, never a short answer: a count, a plain
/// read and a paged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_some_shards_cannot_answer_is_an_error_never_a_short_answer() {
    let client = t::client().await;
    let idx = index(&client, "scan-green").await;
    let red = TestIndex::new("scan-red");
    t::create_red_index(
        &client,
        &red.name,
        json!({ "settings": { "number_of_shards": 2 } }),
    )
    .await;
    let both = format!("{},{}", idx.name, red.name);
    // The node's own answer: 200, the green index's hits, two shards of five missing.
    let raw = t::call(
        &client,
        Method::Post,
        &format!("/{both}/_search?size=1000"),
        Some(json!({ "_source": false })),
    )
    .await;
    assert!(
        raw["_shards"]["total"] == 5
            && raw["_shards"]["successful"] == 3
            && raw["hits"]["hits"].as_array().unwrap().len() == DOCS,
        "not a partial answer: {raw}"
    );

    let s = scanner(&client);
    let shard_failed = |e: &EsError| {
        let text = e.to_string();
        assert!(text.contains("2 shard(s) failed"), "{text}");
    };
    let e = s
        .count(
            &both,
            &json!({ "match_all": {} }),
            &options(Paging::Auto),
            None,
        )
        .await
        .unwrap_err();
    shard_failed(&e);
    let mut passed = 0;
    let one_request = ScanOptions {
        page_size: 1000,
        single_request_first: true,
        ..options(Paging::Auto)
    };
    for opts in [one_request, options(Paging::Scroll)] {
        let e = s
            .scan(&both, &body(), &opts, |page| {
                passed += page.len();
                true
            })
            .await
            .unwrap_err();
        shard_failed(&e);
    }
    assert_eq!(passed, 0, "a short page was passed on");
}

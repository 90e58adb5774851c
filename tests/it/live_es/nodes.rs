//! Several node URLs of which one refuses connections (its process is gone): every request
//! goes to a node that answers at once, without a retry, a create and a `_bulk` included; a
//! client whose only node refuses still fails with `Unreachable`.

use crate::common;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::{self, Body, EsConfig, EsError, RetryPolicy};
use serde_json::json;

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_node_that_refuses_connections_is_skipped_without_a_retry() {
    let live = t::client().await;
    let dead = format!("http://127.0.0.1:{}", closed_port());
    // The dead node first: the pool's first turn goes to it.
    let client = EsConfig::new(&format!("{dead},{}", t::url()))
        .unwrap()
        .client()
        .unwrap();
    let none = RetryPolicy::none();
    let idx = TestIndex::new("nodes");
    let path = format!("/{}", idx.name);
    es::request(&client, &none, "create", Method::Put, &path, &[], None)
        .await
        .unwrap_or_else(|e| panic!("create index with a dead node listed first: {e}"));

    let mut nd = String::new();
    for i in 0..10 {
        nd.push_str(&json!({ "create": { "_id": format!("d{i}") } }).to_string());
        nd.push('\n');
        nd.push_str(&json!({ "n": i }).to_string());
        nd.push('\n');
    }
    let bulk = es::request(
        &client,
        &none,
        "bulk",
        Method::Post,
        &format!("{path}/_bulk"),
        &[("refresh", "true")],
        Some(&Body::NdJson(nd)),
    )
    .await
    .unwrap_or_else(|e| panic!("_bulk with a dead node listed: {e}"));
    assert_eq!(bulk["errors"], false, "{bulk}");

    let search = Body::Json(json!({ "query": { "match_all": {} }, "track_total_hits": true }));
    for i in 0..20 {
        let r = es::request(
            &client,
            &none,
            "search",
            Method::Post,
            &format!("{path}/_search"),
            &[],
            Some(&search),
        )
        .await
        .unwrap_or_else(|e| panic!("search {i} with a dead node listed: {e}"));
        assert_eq!(r["hits"]["total"]["value"], 10, "search {i}: {r}");
    }
    assert_eq!(t::count(&live, &idx.name).await, 10);

    let alone = EsConfig::new(&dead).unwrap().client().unwrap();
    match es::send(&alone, Method::Get, "/", &[], None).await {
        Err(EsError::Unreachable { detail }) => {
            assert!(detail.contains("127.0.0.1"), "{detail}")
        }
        other => panic!("a client whose only node refuses: {other:?}"),
    }
}

//! `neardup serve` in process (the router, as the binary runs it) and over a real socket:
//! fingerprint answers, errors, limits, token, metrics, health against a live node, graceful
//! shutdown.

use crate::common;

use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use axum::Router;
use common::es as t;
use common::serve::{
    assert_bulk_writes_and_dedupes, assert_other_method_is_409, call, created_among, http,
    post_json, put_json, sigterm, start_serving, variants,
};
use neardup::es::{EsConfig, RetryPolicy, Secret};
use neardup::serve::{self, ServeConfig};
use neardup::{Fingerprinter, Profile};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

async fn service(config: ServeConfig) -> Router {
    crate::common::serve::es_router(t::client().await, config)
}

fn article() -> Value {
    let (id, mut a) = t::example_articles().into_iter().next().unwrap();
    a["id"] = json!(id);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprint_answers_what_the_cli_prints() {
    let app = service(ServeConfig::default()).await;
    let a = article();
    let (status, body, _) = call(&app, post_json("/v1/fingerprint", &a)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (code, out, err) = common::neardup(&["fingerprint", "-q"], format!("{a}\n").as_bytes());
    assert_eq!(code, 0, "{err}");
    let cli: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(body, cli);
    assert_eq!(body["minhash"].as_array().unwrap().len(), 128);

    let (status, body, _) = call(&app, post_json("/v1/fingerprint", &json!({"title": "短"}))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body["simhash"].is_null() && body["minhash"].is_null(),
        "{body}"
    );
    assert_eq!(body["minhash_reason"], "too_short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_that_say_what_to_do() {
    let app = service(ServeConfig {
        body_limit: 1000,
        ..ServeConfig::default()
    })
    .await;
    let big = json!({ "title": "长".repeat(2000) });
    let (status, body, _) = call(&app, post_json("/v1/fingerprint", &big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "too_large");

    let (status, body, _) = call(
        &app,
        Request::post("/v1/fingerprint")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{not json"))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "bad_request");

    let (status, body, _) = call(
        &app,
        Request::post("/v1/fingerprint")
            .body(Body::from("{}"))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Content-Type"));

    let (status, body, _) = call(&app, post_json("/v1/fingerprint", &json!({"title": 42}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("title"));

    let (status, body, _) = call(&app, post_json("/v1/fingerprint", &json!(["a"]))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // An index name Elasticsearch refuses: no index has it, 404 quoting the rule, not 500
    // (schemathesis).
    let (status, body, _) = call(
        &app,
        post_json("/v1/_bad/similar", &json!({"title": "标题"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("must not start with '_'"));

    let (status, body, _) = call(&app, Request::get("/nope").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_v1_but_not_health_or_metrics() {
    let app = service(ServeConfig {
        token: Some(Secret::new("s3cret-token")),
        ..ServeConfig::default()
    })
    .await;
    let a = article();
    let (status, body, headers) = call(&app, post_json("/v1/fingerprint", &a)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    assert!(!body.to_string().contains("s3cret"));

    let mut wrong = post_json("/v1/fingerprint", &a);
    wrong.headers_mut().insert(
        header::AUTHORIZATION,
        "Bearer s3cret-tokem".parse().unwrap(),
    );
    assert_eq!(call(&app, wrong).await.0, StatusCode::UNAUTHORIZED);

    let mut right = post_json("/v1/fingerprint", &a);
    right.headers_mut().insert(
        header::AUTHORIZATION,
        "Bearer s3cret-token".parse().unwrap(),
    );
    assert_eq!(call(&app, right).await.0, StatusCode::OK);

    let (status, body, _) = call(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert!(body["elasticsearch"].as_str().is_some());
    let (status, _, _) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status() {
    let app = service(ServeConfig::default()).await;
    for _ in 0..3 {
        call(&app, post_json("/v1/fingerprint", &article())).await;
    }
    call(&app, post_json("/v1/fingerprint", &json!({"title": 1}))).await;
    let r = app
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert!(r.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text =
        String::from_utf8(to_bytes(r.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap();
    assert!(
        text.contains(
            r#"neardup_http_requests_total{method="POST",route="/v1/fingerprint",status="200"} 3"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"neardup_http_requests_total{method="POST",route="/v1/fingerprint",status="422"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"neardup_http_request_duration_seconds_count{route="/v1/fingerprint"} 4"#),
        "{text}"
    );
    assert!(text.contains("neardup_es_errors_total") || text.contains("neardup_http_in_flight"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_503_when_elasticsearch_is_down() {
    let client = EsConfig::new("http://127.0.0.1:9")
        .unwrap()
        .client()
        .unwrap();
    let app = crate::common::serve::es_router(client, ServeConfig::default());
    let (status, body, _) = call(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "unavailable");
    let (_, metrics, _) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains(r#"neardup_es_errors_total{kind="unreachable"} 1"#),
        "{metrics}"
    );
}

/// A request whose body stalls after `first` holds its slot until `tx` is dropped.
fn stalled_request() -> (
    Request<Body>,
    tokio::sync::mpsc::Sender<Result<Vec<u8>, std::io::Error>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let req = Request::post("/v1/fingerprint")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap();
    (req, tx)
}

/// While one request holds the only slot, the next is refused at once with 503; health and
/// metrics stay outside the limit; the slot is free again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturation_is_503_at_once() {
    let app = service(ServeConfig {
        concurrency: 1,
        timeout: Duration::from_secs(60),
        ..ServeConfig::default()
    })
    .await;
    // A stalled request that is in flight and still running holds the slot: were the slot
    // taken, it would have been refused at once.
    let (held, tx) = loop {
        let (stalled, tx) = stalled_request();
        let held = tokio::spawn({
            let app = app.clone();
            async move { call(&app, stalled).await }
        });
        tx.send(Ok(b"{\"title\":".to_vec())).await.unwrap();
        // In flight: the stalled request and this metrics request itself.
        loop {
            let (_, m, _) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
            if m.as_str().unwrap().contains("neardup_http_in_flight 2") || held.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if !held.is_finished() {
            break (held, tx);
        }
    };
    let (status, body, headers) = call(&app, post_json("/v1/fingerprint", &article())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "overloaded");
    assert_eq!(headers[header::RETRY_AFTER], "1");
    let (status, _, _) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);

    tx.send(Ok(br#""\u77ed"}"#.to_vec())).await.unwrap();
    drop(tx);
    let (status, body, _) = held.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, _) = call(&app, post_json("/v1/fingerprint", &article())).await;
    assert_eq!(status, StatusCode::OK, "the slot is free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_timeout_is_504() {
    let app = service(ServeConfig {
        timeout: Duration::from_millis(300),
        ..ServeConfig::default()
    })
    .await;
    let (stalled, tx) = stalled_request();
    tx.send(Ok(b"{\"title\":".to_vec())).await.unwrap();
    let (status, body, _) = call(&app, stalled).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["error"]["code"], "timeout");
    drop(tx);
}

/// Over a real socket: on shutdown the server stops accepting, and a request in flight
/// still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_request_in_flight_finish() {
    let app = service(ServeConfig::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve::run(listener, app.clone(), async {
        let _ = stop_rx.await;
    }));

    let body = article().to_string();
    let (head, tail) = body.as_bytes().split_at(body.len() / 2);
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        format!(
            "POST /v1/fingerprint HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    conn.write_all(head).await.unwrap();
    // In flight: the half-sent request and the metrics request asking.
    loop {
        let (_, m, _) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
        if m.as_str().unwrap().contains("neardup_http_in_flight 2") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_tx.send(()).unwrap();
    let mut refused = false;
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "no new connections once shutting down");
    assert!(!server.is_finished(), "still serving the request in flight");
    conn.write_all(tail).await.unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"minhash\""), "{answer}");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops after the request in flight")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_in_the_openapi_description_is_served() {
    let app = service(ServeConfig::default()).await;
    let (status, doc, _) = call(
        &app,
        Request::get("/v1/openapi.json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.0.3");
    let mut routes = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let uri = path
            .replace("{index}", "neardup-openapi-no-index")
            .replace("{id}", "x");
        for method in ops.as_object().unwrap().keys() {
            let req = Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(uri.as_str())
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(article().to_string()))
                .unwrap();
            let (status, body, _) = call(&app, req).await;
            // A documented route may answer 404 for the missing index, but never "no such
            // endpoint" (the router's fallback) or 405.
            assert!(
                status != StatusCode::METHOD_NOT_ALLOWED
                    && !body.to_string().contains("no such endpoint"),
                "{method} {path}: {status} {body}"
            );
            routes += 1;
        }
    }
    assert_eq!(routes, 10, "documented routes");
}

/// The binary: `--token-file`, JSON logs on stderr (one object per line, the token in none),
/// and SIGTERM ends it with exit code 0.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_logs_json_without_the_token_and_stops_on_sigterm() {
    use std::process::Command;

    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "tok-9f8e7d6c\n").unwrap();
    let (mut child, lines, addr) = start_serving(
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args([
                "--log-format",
                "json",
                "serve",
                "--es",
                &t::url(),
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--token-file")
            .arg(&token_file),
    );

    let request = |auth: &str| {
        let body = article().to_string();
        format!(
            "POST /v1/fingerprint HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for (auth, want) in [("", 401), ("Authorization: Bearer tok-9f8e7d6c\r\n", 200)] {
        let (status, body) = http(addr.as_str(), &request(auth));
        assert_eq!(status, want, "{body}");
    }
    assert_eq!(sigterm(&mut child), Some(0));
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let mut statuses = Vec::new();
    for line in &rest {
        assert!(
            !line.contains("tok-9f8e7d6c"),
            "the token reached a log line: {line}"
        );
        let v: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        if v["target"] == "neardup::serve::access" {
            statuses.push(v["fields"]["status"].as_str().unwrap().to_owned());
            assert_eq!(v["fields"]["route"], "/v1/fingerprint");
        }
    }
    assert_eq!(statuses, ["401", "200"], "{rest:?}");
}

/// A fresh index holding both methods (what `es-init` makes by default).
async fn both_methods_index(prefix: &str) -> t::TestIndex {
    t::initialised(
        &t::client().await,
        prefix,
        &neardup::es::IndexMeta::default(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_endpoints_answer_what_the_cli_finds() {
    // Keeping duplicate groups, as es-init does by default: the review page shows them.
    let idx = t::initialised(
        &t::client().await,
        "serve-similar",
        &neardup::es::IndexMeta {
            group: Some(neardup::es::GroupMeta::default()),
            ..neardup::es::IndexMeta::default()
        },
    )
    .await;
    let app = service(ServeConfig::default()).await;
    let articles = t::example_articles();
    // All at once, each answer waiting for a refresh (`refresh=wait_for` passed through).
    let puts: Vec<_> = articles
        .iter()
        .map(|(id, a)| {
            let (app, req) = (
                app.clone(),
                put_json(
                    &format!("/v1/{}/articles/{id}?refresh=wait_for", idx.name),
                    a,
                ),
            );
            tokio::spawn(async move { call(&app, req).await })
        })
        .collect();
    for p in puts {
        let (status, body, _) = p.await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let ids: String = articles.iter().map(|(id, _)| format!("{id}\n")).collect();
    let (code, out, err) = common::neardup(
        &[
            "similar",
            "--es",
            &t::url(),
            "--index",
            &idx.name,
            "--ids-from",
            "-",
        ],
        ids.as_bytes(),
    );
    // Exit 3: some ids could not be looked up (here: a text too short to fingerprint).
    assert_eq!(
        code,
        if out.contains("\"error\"") { 3 } else { 0 },
        "{err}\n{out}"
    );
    let mut found_any = 0;
    for line in out.lines() {
        let cli: Value = serde_json::from_str(line).unwrap();
        let id = cli["id"].as_str().unwrap();
        let (status, body, _) = call(
            &app,
            Request::get(format!("/v1/{}/similar/{id}", idx.name))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if cli.get("error").is_some() {
            assert_eq!(body["query"], "too_short", "{id}: {body}");
            assert!(cli["error"].as_str().unwrap().contains("too short"));
        } else {
            assert_eq!(body["query"], "stored", "{id}: {body}");
        }
        assert_eq!(
            body["matches"],
            cli.get("matches").cloned().unwrap_or(json!([])),
            "{id}"
        );
        assert_eq!(body["method"], "minhash");
        assert_eq!(body["threshold"], 0.3);
        found_any += body["matches"].as_array().unwrap().len();
    }
    assert!(found_any > 0, "the planted duplicates are found");

    // An article posted as text finds its own stored copy (and its duplicates).
    let (id, a) = &articles[0];
    let (status, body, _) = call(&app, post_json(&format!("/v1/{}/similar", idx.name), a)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let first = &body["matches"][0];
    assert_eq!(
        (first["id"].as_str(), first["similarity"].as_f64()),
        (Some(id.as_str()), Some(1.0))
    );
    // SimHash on request.
    let (status, body, _) = call(
        &app,
        Request::get(format!("/v1/{}/similar/{id}?k=7", idx.name))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["method"].as_str(), body["max_distance"].as_u64()),
        (Some("simhash"), Some(7))
    );

    let (status, body, _) = call(
        &app,
        Request::get(format!("/v1/{}/articles/{id}", idx.name))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["article"]["title"], a["title"]);
    // Its group, apart from the text fields; the label is an article of the index.
    assert_eq!(body["article"].get("nearDupGroup"), None);
    let label = body["group"].as_str().expect("the article's group");
    assert!(articles.iter().any(|(id, _)| id == label), "{label}");

    for path in [
        format!("/v1/{}/similar/no-such-id", idx.name),
        "/v1/neardup-no-such-index/similar/x".to_owned(),
        format!("/v1/{}/articles/no-such-id", idx.name),
    ] {
        let (status, body, _) = call(&app, Request::get(&path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found");
    }
    let (status, body, _) = call(
        &app,
        Request::get(format!("/v1/{}/similar/{id}?k=2&threshold=0.5", idx.name))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_insert_stores_the_first_and_refuses_its_near_duplicates() {
    let idx = both_methods_index("serve-dedupe").await;
    let app = service(ServeConfig::default()).await;
    let v = variants(2);
    let path = |id: &str| format!("/v1/{}/articles/{id}?dedupe=true", idx.name);
    let (status, body, _) = call(&app, put_json(&path("orig"), &v[0])).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body, _) = call(&app, put_json(&path("copy"), &v[1])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "duplicate");
    assert_eq!(body["matches"][0]["id"], "orig");
    assert!(body["matches"][0]["similarity"].as_f64().unwrap() >= 0.3);
    // Storing the same id again replaces it (it is not its own duplicate).
    let (status, body, _) = call(&app, put_json(&path("orig"), &v[1])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], "updated");
    // Something else is stored; without dedupe a duplicate is stored too.
    let (other_id, other) = t::example_articles().into_iter().next().unwrap();
    let (status, body, _) = call(&app, put_json(&path(&other_id), &other)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, _) = call(
        &app,
        put_json(&format!("/v1/{}/articles/copy", idx.name), &v[1]),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    t::refresh(&t::client().await, &idx.name).await;
    assert_eq!(t::count(&t::client().await, &idx.name).await, 3);
    // A field Elasticsearch refuses (an empty name): 422 naming it, not 500 (schemathesis).
    let mut odd = other.clone();
    odd[""] = json!({"x": "y"});
    let (status, body, _) = call(
        &app,
        put_json(&format!("/v1/{}/articles/odd", idx.name), &odd),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("field name cannot be an empty string"));
}

/// Puts `body` at `path` and says how the index answers a search for it before any refresh:
/// `(status of the PUT, documents a search sees)`.
async fn put_then_search(app: &Router, index: &str, path: &str, body: &Value) -> (StatusCode, u64) {
    let (status, answer, _) = call(app, put_json(path, body)).await;
    assert!(
        status.is_success() || status == StatusCode::CONFLICT,
        "{answer}"
    );
    let c = t::client().await;
    let seen = neardup::es::send(
        &c,
        elasticsearch::http::Method::Post,
        &format!("/{index}/_search"),
        &[],
        Some(&neardup::es::Body::Json(
            json!({ "size": 0, "track_total_hits": true }),
        )),
    )
    .await
    .unwrap()
    .body["hits"]["total"]["value"]
        .as_u64()
        .unwrap();
    (status, seen)
}

/// An index of both methods that refreshes every `interval`, the claims gone with it.
async fn index_refreshing_every(prefix: &str, interval: &str) -> t::TestIndex {
    let idx = both_methods_index(prefix).await;
    let c = t::client().await;
    neardup::es::send(
        &c,
        elasticsearch::http::Method::Put,
        &format!("/{}/_settings", idx.name),
        &[],
        Some(&neardup::es::Body::Json(
            json!({ "index": { "refresh_interval": interval } }),
        )),
    )
    .await
    .unwrap();
    idx
}

/// A plain `PUT` does not wait for a refresh, and a dedupe `PUT` right after it (no refresh
/// in between) still refuses the near-duplicate of a dedupe insert: it reads the article the
/// keys' records list, by id. `?refresh=` passes through (`wait_for`: the similar-endpoints
/// test); a bad value is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_do_not_wait_for_a_refresh_and_dedupe_still_sees_them() {
    // 60 s: no refresh comes between the two inserts.
    let idx = index_refreshing_every("serve-norefresh", "60s").await;
    let app = service(ServeConfig::default()).await;
    let v = variants(3);
    let path = |id: &str, q: &str| format!("/v1/{}/articles/{id}?{q}", idx.name);
    let (status, seen) =
        put_then_search(&app, &idx.name, &path("orig", "dedupe=true"), &v[0]).await;
    assert_eq!(
        (status, seen),
        (StatusCode::CREATED, 0),
        "not searchable yet"
    );
    let (status, body, _) = call(&app, put_json(&path("copy", "dedupe=true"), &v[1])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["matches"][0]["id"], "orig");
    // The same match a search finds once refreshed.
    t::refresh(&t::client().await, &idx.name).await;
    let (status, again, _) = call(&app, put_json(&path("copy", "dedupe=true"), &v[1])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert_eq!(again["matches"], body["matches"]);

    let (other_id, other) = t::example_articles().into_iter().next().unwrap();
    let (status, seen) =
        put_then_search(&app, &idx.name, &path(&other_id, "refresh=false"), &other).await;
    assert_eq!(
        (status, seen),
        (StatusCode::CREATED, 1),
        "only `orig` is searchable"
    );
    let (status, seen) =
        put_then_search(&app, &idx.name, &path("third", "refresh=true"), &v[2]).await;
    assert_eq!((status, seen), (StatusCode::CREATED, 3));
    let (status, body, _) = call(&app, put_json(&path("x", "refresh=soon"), &other)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("wait_for"));
}

/// `POST /v1/{index}/articles/_bulk` on Elasticsearch: the same rules and statuses as on a
/// store (the shared assertions), with no refresh between the batches; what was written is
/// in the index, with its fingerprint fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_writes_and_dedupes_on_elasticsearch() {
    let idx = index_refreshing_every("serve-bulk", "60s").await;
    let app = service(ServeConfig::default()).await;
    assert_bulk_writes_and_dedupes(&app, &idx.name).await;
    let c = t::client().await;
    t::refresh(&c, &idx.name).await;
    // b0, the example article, b3 and j2 (written without dedupe).
    assert_eq!(t::count(&c, &idx.name).await, 4);
    let doc = neardup::es::send(
        &c,
        elasticsearch::http::Method::Get,
        &format!("/{}/_doc/b0", idx.name),
        &[],
        None,
    )
    .await
    .unwrap()
    .body;
    assert_eq!(doc["_source"]["id"], "b0");
    assert_eq!(doc["_source"]["minHashBands"].as_array().unwrap().len(), 42);
    // An article too short to fingerprint is written (nothing can be near it), as by PUT.
    let (status, body, _) = call(
        &app,
        common::serve::post_ndjson(
            &format!("/v1/{}/articles/_bulk?dedupe=true", idx.name),
            &[json!({"id": "tiny", "title": "短"}).to_string()],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["items"][0]["status"], 201, "{body}");
}

/// An index that refreshes rarely keeps the records longer, and still needs no refresh per
/// write; one that never refreshes on its own has each dedupe write refresh it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_fits_indices_that_refresh_rarely_or_never() {
    for (prefix, interval, searchable) in [
        ("serve-slowrefresh", "30s", 0),
        ("serve-neverrefresh", "-1", 1),
    ] {
        let idx = index_refreshing_every(prefix, interval).await;
        let app = service(ServeConfig::default()).await;
        let v = variants(2);
        let path = |id: &str| format!("/v1/{}/articles/{id}?dedupe=true", idx.name);
        let (status, seen) = put_then_search(&app, &idx.name, &path("orig"), &v[0]).await;
        assert_eq!(
            (status, seen),
            (StatusCode::CREATED, searchable),
            "{interval}"
        );
        let (status, body, _) = call(&app, put_json(&path("copy"), &v[1])).await;
        assert_eq!(status, StatusCode::CONFLICT, "{interval}: {body}");
    }
}

/// Two services (each with its own caches, as two processes have) take 25 concurrent dedupe
/// inserts of variants of one article each: exactly one is created, every other is a 409.
/// The request timeout is generous: a loaded machine can take seconds for 50 inserts waiting
/// on each other's keys, and a 504 says nothing of the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_near_duplicates_through_two_services_create_exactly_one() {
    let v = variants(50);
    let config = || ServeConfig {
        timeout: Duration::from_secs(120),
        ..ServeConfig::default()
    };
    for round in 0..3 {
        let idx = both_methods_index(&format!("serve-race-{round}")).await;
        let apps = [service(config()).await, service(config()).await];
        let created = created_among(&apps, &v, |i| {
            format!("/v1/{}/articles/v{i}?dedupe=true", idx.name)
        })
        .await;
        assert_eq!(created, 1, "round {round}");
        t::refresh(&t::client().await, &idx.name).await;
        assert_eq!(t::count(&t::client().await, &idx.name).await, 1);
    }
}

/// Issue 32: two real `neardup serve` processes on one index, 20 concurrent dedupe `PUT`s of
/// variants of one article through each (40 in all, over real sockets): exactly one article
/// is created, every other answer is 409 `duplicate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_serve_processes_racing_near_duplicates_create_exactly_one() {
    use std::process::Command;
    let v = variants(40);
    let idx = both_methods_index("serve-two-processes").await;
    let mut servers: Vec<_> = (0..2)
        .map(|_| {
            start_serving(Command::new(env!("CARGO_BIN_EXE_neardup")).args([
                "--log-format",
                "json",
                "serve",
                "--es",
                &t::url(),
                "--listen",
                "127.0.0.1:0",
                "--timeout",
                "120s",
            ]))
        })
        .collect();
    let addrs: Vec<String> = servers.iter().map(|(_, _, a)| a.clone()).collect();
    let answers: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = v
            .iter()
            .enumerate()
            .map(|(i, article)| {
                let addr = addrs[i % 2].clone();
                let body = article.to_string();
                let request = format!(
                    "PUT /v1/{}/articles/v{i}?dedupe=true HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    idx.name,
                    body.len()
                );
                scope.spawn(move || http(addr.as_str(), &request))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 1, "{answers:?}");
    for (status, body) in &answers {
        assert!(
            *status == 201 || (*status == 409 && body.contains("duplicate")),
            "{status}: {body}"
        );
    }
    for (child, _, _) in &mut servers {
        assert_eq!(sigterm(child), Some(0));
    }
    let client = t::client().await;
    t::refresh(&client, &idx.name).await;
    assert_eq!(t::count(&client, &idx.name).await, 1);
}

/// Bulk dedupe races too: two services take 10 concurrent `_bulk` requests of 5 variants of
/// one article each (and single `PUT`s of 10 more at the same time): exactly one is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bulk_batches_through_two_services_create_exactly_one() {
    let v = variants(60);
    let config = || ServeConfig {
        timeout: Duration::from_secs(120),
        ..ServeConfig::default()
    };
    let idx = both_methods_index("serve-race-bulk").await;
    let apps = [service(config()).await, service(config()).await];
    let mut tasks = Vec::new();
    for (b, chunk) in v[..50].chunks(5).enumerate() {
        let lines: Vec<String> = chunk
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut a = a.clone();
                a["id"] = json!(format!("b{b}-{i}"));
                a.to_string()
            })
            .collect();
        let (app, req) = (
            apps[b % 2].clone(),
            common::serve::post_ndjson(
                &format!("/v1/{}/articles/_bulk?dedupe=true", idx.name),
                &lines,
            ),
        );
        tasks.push(tokio::spawn(async move { call(&app, req).await }));
    }
    let singles = {
        let (apps, name, rest) = (apps.clone(), idx.name.clone(), v[50..].to_vec());
        tokio::spawn(async move {
            created_among(&apps, &rest, |i| {
                format!("/v1/{name}/articles/p{i}?dedupe=true")
            })
            .await
        })
    };
    let mut created = singles.await.unwrap();
    for task in tasks {
        let (status, body, _) = task.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        for item in body["items"].as_array().unwrap() {
            match item["status"].as_u64() {
                Some(201) => created += 1,
                Some(409) => assert_eq!(item["error"]["code"], "duplicate"),
                _ => panic!("{item}"),
            }
        }
    }
    assert_eq!(created, 1);
    t::refresh(&t::client().await, &idx.name).await;
    assert_eq!(t::count(&t::client().await, &idx.name).await, 1);
}

/// The review page in a real headless browser (Debian's Chromium; `NEARDUP_TEST_CHROMIUM`
/// names another binary): a link looks up a planted duplicate, lists it with its similarity,
/// and opens it beside the query with the shared passages marked; with `&align=true`, marked
/// where the answer's spans say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_page_shows_the_planted_duplicates_in_a_browser() {
    let chromium = std::env::var("NEARDUP_TEST_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let idx = both_methods_index("serve-page").await;
    let app = service(ServeConfig::default()).await;
    let puts: Vec<_> = t::example_articles()
        .into_iter()
        .map(|(id, a)| {
            let (app, req) = (
                app.clone(),
                put_json(&format!("/v1/{}/articles/{id}", idx.name), &a),
            );
            tokio::spawn(async move { call(&app, req).await })
        })
        .collect();
    for p in puts {
        assert_eq!(p.await.unwrap().0, StatusCode::CREATED);
    }
    // A lookup by id searches: the PUTs must be searchable before the page asks.
    t::refresh(&t::client().await, &idx.name).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve::run(listener, app, async {
        let _ = stop_rx.await;
    }));
    let html = dump_dom(
        &chromium,
        format!(
            "http://{addr}/?index={}&id=ex-005&compare=ex-005-edit",
            idx.name
        ),
    )
    .await;
    assert!(
        html.contains("<td>ex-005-edit</td>"),
        "the duplicate is listed: {html}"
    );
    assert!(
        // 106 of 128 minima agree in their lowest 8 bits: (106/128 − 1/256) / (1 − 1/256).
        html.contains("<td>0.827</td>"),
        "with its similarity: {html}"
    );
    assert!(
        html.contains(r#"data-shown="ex-005-edit""#),
        "opened beside: {html}"
    );
    let marks = html.matches("<mark>").count();
    assert!(
        marks >= 2,
        "shared passages marked on both sides ({marks}): {html}"
    );

    // With the texts deciding (`&align=true`): what each text shares is marked where the
    // answer's spans say, in the texts `GET …/articles/{id}` gives.
    let html = dump_dom(
        &chromium,
        format!(
            "http://{addr}/?index={}&id=ex-005&align=true&compare=ex-005-edit",
            idx.name
        ),
    )
    .await;
    assert!(
        html.contains(r#"data-shown="ex-005-edit""#),
        "opened beside: {html}"
    );
    assert!(html.contains("copied: query / match"), "{html}");
    let similar = neardup::es::Similar::with_options(
        t::client().await,
        None,
        Default::default(),
        RetryPolicy::none(),
    );
    let found = similar
        .aligned_by_id(
            idx.name.as_str(),
            "ex-005",
            &neardup::relation::AlignRule::DEFAULT,
        )
        .await
        .unwrap();
    let m = found
        .matches
        .iter()
        .find(|m| m.id == "ex-005-edit")
        .expect("the edit is a copy");
    let texts = |id: &str| {
        let (_, a) = t::example_articles()
            .into_iter()
            .find(|(i, _)| i == id)
            .unwrap();
        ["title", "content"]
            .iter()
            .map(|f| a[f].as_str().unwrap().chars().collect::<Vec<char>>())
            .collect::<Vec<_>>()
    };
    let (query, other) = (texts("ex-005"), texts("ex-005-edit"));
    let mut want: Vec<String> = Vec::new();
    for side in [0, 1] {
        for p in &m.shared.as_ref().unwrap().passages {
            let (span, texts) = if side == 0 {
                (p.query, &query)
            } else {
                (p.found, &other)
            };
            want.push(texts[span.field][span.start..span.end].iter().collect());
        }
    }
    let marked: Vec<String> = html
        .split("<mark>")
        .skip(1)
        .map(|m| m.split("</mark>").next().unwrap().to_owned())
        .collect();
    assert!(!want.is_empty());
    assert_eq!(marked, want, "{html}");
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// The page at `url` after its script ran, as headless Chromium dumps it.
async fn dump_dom(chromium: &str, url: String) -> String {
    let chromium = chromium.to_owned();
    let dom = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--virtual-time-budget=15000",
                "--dump-dom",
                &url,
            ])
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{chromium}` ({e}): install Debian's chromium (apt-get install chromium) or set NEARDUP_TEST_CHROMIUM; this test never skips"
                )
            })
    })
    .await
    .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// An index that gains MinHash (`es-init`) while services run: one that re-reads `_meta`
/// (`meta_ttl` 0) writes and answers with MinHash at once, with no restart; one that remembers
/// it for an hour keeps writing what it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_es_init_adds_is_used_without_a_restart() {
    use neardup::es::{BlockType, FieldNames, IndexMeta, MinHashFieldNames};
    use neardup::{Method, Methods};

    let client = t::client().await;
    let config = Fingerprinter::for_profile(Profile::Default)
        .config()
        .clone();
    let simhash_only = IndexMeta::new(
        &config,
        Methods::only(Method::SimHash),
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    );
    let idx = t::initialised(&client, "serve-meta", &simhash_only).await;
    let fresh = service(ServeConfig {
        meta_ttl: Duration::ZERO,
        ..ServeConfig::default()
    })
    .await;
    let stale = service(ServeConfig {
        meta_ttl: Duration::from_secs(3600),
        ..ServeConfig::default()
    })
    .await;
    let v = variants(4);
    let put = |app: &Router, id: &str, a: &Value| {
        let (app, req) = (
            app.clone(),
            put_json(
                &format!("/v1/{}/articles/{id}?refresh=wait_for", idx.name),
                a,
            ),
        );
        async move { call(&app, req).await }
    };
    let similar_method = |app: &Router, id: &str| {
        let (app, req) = (
            app.clone(),
            Request::get(format!("/v1/{}/similar/{id}", idx.name))
                .body(Body::empty())
                .unwrap(),
        );
        async move {
            let (status, body, _) = call(&app, req).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["method"].clone()
        }
    };
    for (app, id, a) in [(&fresh, "a", &v[0]), (&stale, "b", &v[1])] {
        let (status, body, _) = put(app, id, a).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(similar_method(app, id).await, "simhash");
    }

    neardup::es::init_index(
        &client,
        &RetryPolicy::none(),
        &idx.name,
        &IndexMeta::default(),
    )
    .await
    .unwrap();
    let (status, body, _) = put(&fresh, "c", &v[2]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (source, _) = t::get(&client, &idx.name, "c").await;
    assert!(source["minHashSignature"].is_string(), "{source}");
    assert_eq!(similar_method(&fresh, "c").await, "minhash");

    let (status, body, _) = put(&stale, "d", &v[3]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (source, _) = t::get(&client, &idx.name, "d").await;
    assert!(source.get("minHashSignature").is_none(), "{source}");
    assert_eq!(similar_method(&stale, "d").await, "simhash");
}

/// A tolerance of the method an index lacks is 409 on every endpoint, worded with the query
/// parameter that fits (it was 500 with a CLI flag in the message), as on a store
/// (tests/it/serve_store.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_method_an_index_lacks_is_409_on_every_endpoint() {
    use neardup::es::{BlockType, FieldNames, IndexMeta, MinHashFieldNames};
    use neardup::{Method, Methods};

    let client = t::client().await;
    let config = Fingerprinter::for_profile(Profile::Default)
        .config()
        .clone();
    let app = service(ServeConfig::default()).await;
    let a = variants(1).remove(0);
    for (held, method) in [("simhash", Method::SimHash), ("minhash", Method::MinHash)] {
        let meta = IndexMeta::new(
            &config,
            Methods::only(method),
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        );
        let idx = t::initialised(&client, &format!("serve-only-{held}"), &meta).await;
        let (status, body, _) =
            call(&app, put_json(&format!("/v1/{}/articles/a", idx.name), &a)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_other_method_is_409(&app, &idx.name, held, "a", &a).await;
    }
}

/// A service that reads other text fields than the ones an index's groups align refuses to
/// write into it (409 `index_not_usable`, naming both and the fix) and writes nothing; the
/// same service writes into an index whose groups align what it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_into_an_index_grouped_by_other_text_fields_is_409() {
    use neardup::es::{GroupLink, GroupMeta, IndexMeta};

    let client = t::client().await;
    let grouped_by = |fields: &[&str]| IndexMeta {
        group: Some(GroupMeta {
            link: GroupLink::Texts {
                fields: fields.iter().map(|f| f.to_string()).collect(),
            },
            ..GroupMeta::default()
        }),
        ..IndexMeta::default()
    };
    let app = service(ServeConfig {
        text_fields: vec!["title".into(), "body".into()],
        ..ServeConfig::default()
    })
    .await;
    let mut a = variants(1).remove(0);
    a["body"] = a["content"].take();
    let other = t::initialised(
        &client,
        "serve-group-fields",
        &grouped_by(&["title", "content"]),
    )
    .await;
    let (status, body, _) = call(
        &app,
        put_json(&format!("/v1/{}/articles/a", other.name), &a),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "index_not_usable", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("texts of title, content") && msg.contains("read from title, body"),
        "{msg}"
    );
    t::refresh(&client, &other.name).await;
    assert_eq!(t::count(&client, &other.name).await, 0, "nothing written");
    let same = t::initialised(&client, "serve-group-fields-ok", &grouped_by(&["body"])).await;
    let (status, body, _) =
        call(&app, put_json(&format!("/v1/{}/articles/a", same.name), &a)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

//! `neardup serve --store DIR`: the service answering from a local store, in process (the
//! router, as the binary runs it) and as the binary. No Elasticsearch involved.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use common::serve::{
    assert_bulk_writes_and_dedupes, call, created_among, http, post_json, put_json, sigterm,
    start_serving, variants,
};
use neardup::serve::{ServeConfig, Service, StoreBackend};
use neardup::store::{OpenOptions, Store, StoreConfig};
use neardup::{Fingerprinter, Profile};
use serde_json::{json, Value};

/// A store made by `neardup index` (`method`) from the first 300 corpus articles and three
/// variants of one long article (`v0`–`v2`), in `dir`.
fn indexed_store(dir: &Path, method: &str) {
    let mut lines = String::new();
    for (id, mut a) in common::es::shared_articles(300) {
        a["id"] = json!(id);
        lines.push_str(&format!("{a}\n"));
    }
    for (i, mut a) in variants(3).into_iter().enumerate() {
        a["id"] = json!(format!("v{i}"));
        lines.push_str(&format!("{a}\n"));
    }
    let store = dir.to_str().unwrap();
    let (code, _, err) = common::neardup(
        &[
            "index", "--store", store, "--method", method, "--input", "-", "-q",
        ],
        lines.as_bytes(),
    );
    assert_eq!(code, 0, "{err}");
}

/// The service over the store in `dir`, named after the directory.
fn service(dir: &Path) -> (Router, StoreBackend) {
    let store = Store::open(dir, &OpenOptions::default()).unwrap();
    let fp = Fingerprinter::for_profile(Profile::Default);
    let backend = StoreBackend::new(store, StoreBackend::name_of(dir), fp.clone()).unwrap();
    let app = Arc::new(Service::new(ServeConfig::default(), backend.clone(), fp)).router();
    (app, backend)
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

/// `neardup similar --store` output lines, with the index the service adds.
fn cli_matches(args: &[&str], stdin: &str, name: &str) -> Vec<Value> {
    let (code, out, err) = common::neardup(args, stdin.as_bytes());
    assert_eq!(code, 0, "{err}");
    common::json_lines(&out)
        .into_iter()
        .map(|mut m| {
            m["index"] = json!(name);
            m
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_endpoints_answer_what_the_cli_finds_on_a_store() {
    for (method, near, flag) in [
        ("minhash", "threshold=0.3", ["--threshold", "0.3"]),
        ("simhash", "k=3", ["-k", "3"]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(format!("news-{method}"));
        indexed_store(&dir, method);
        let store = dir.to_str().unwrap();
        let name = format!("news-{method}");
        let mut queries = vec!["v0".to_owned(), "v2".to_owned()];
        queries.extend(
            common::es::shared_articles(40)
                .into_iter()
                .step_by(8)
                .map(|(id, _)| id),
        );
        let by_id: Vec<Vec<Value>> = queries
            .iter()
            .map(|id| {
                cli_matches(
                    &["similar", "--store", store, "--id", id, flag[0], flag[1]],
                    "",
                    &name,
                )
            })
            .collect();
        let article = variants(3).remove(1);
        let mut line = article.clone();
        line["id"] = json!("not-stored");
        let by_text = cli_matches(
            &[
                "similar", "--store", store, "--input", "-", flag[0], flag[1],
            ],
            &format!("{line}\n"),
            &name,
        );
        let only = cli_matches(
            &[
                "similar",
                "--store",
                store,
                "--id",
                "v0",
                flag[0],
                flag[1],
                "--no-containment",
            ],
            "",
            &name,
        );
        if method == "minhash" {
            assert!(
                by_id[0]
                    .iter()
                    .all(|m| m["relation"].is_string() && m["containment"].is_number()),
                "MinHash matches say their relation: {:?}",
                by_id[0]
            );
        }
        assert!(
            by_id[0].iter().any(|m| m["id"] == "v1"),
            "{method}: the planted variant is found: {:?}",
            by_id[0]
        );

        let (app, _) = service(&dir);
        for (id, want) in queries.iter().zip(&by_id) {
            let (status, body, _) =
                call(&app, get(&format!("/v1/{name}/similar/{id}?{near}"))).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["matches"].as_array().unwrap(), want, "{method} {id}");
            assert_eq!(body["method"], method);
            assert_eq!(body["query"], "stored");
        }
        let (status, body, _) = call(
            &app,
            post_json(&format!("/v1/{name}/similar?{near}"), &article),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["matches"].as_array().unwrap(), &by_text, "{method}");
        assert_eq!(body["query"], "computed");

        // `containment=false` is the CLI's `--no-containment`.
        let (status, body, _) = call(
            &app,
            get(&format!("/v1/{name}/similar/v0?{near}&containment=false")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["matches"].as_array().unwrap(), &only, "{method}");

        // A store keeps no texts to align: `align=true` is a bad request that says so.
        let (status, body, _) = call(&app, get(&format!("/v1/{name}/similar/v0?align=true"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.to_string().contains("keeps none"), "{body}");

        // The store's own method at its default when nothing is asked.
        let (status, body, _) = call(&app, get(&format!("/v1/{name}/similar/v0"))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["method"], method);
        let (status, body, _) = call(
            &app,
            post_json(&format!("/v1/{name}/similar"), &json!({"title": "短"})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["query"], "too_short");
        assert_eq!(body["matches"], json!([]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refuses_near_duplicates_says_what_it_lacks_and_keeps_no_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("desk");
    indexed_store(&dir, "minhash");
    let (app, backend) = service(&dir);
    let before = backend.store().len().unwrap();
    let fresh = variants(6).split_off(4);
    let path = |id: &str| format!("/v1/desk/articles/{id}?dedupe=true");

    // Near the planted v0–v2: refused, with them as matches.
    let (status, body, _) = call(&app, put_json(&path("late-copy"), &fresh[0])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "duplicate");
    let ids: Vec<&str> = body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"v0") && ids.contains(&"v1"), "{body}");
    assert!(body["matches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["index"] == "desk"));
    // Its own id is not its own duplicate: replaced.
    let (status, body, _) = call(&app, put_json(&path("v0"), &fresh[1])).await;
    assert_eq!(status, StatusCode::CONFLICT, "v0 is still near v1: {body}");
    let (_, other) = common::es::example_articles().into_iter().next().unwrap();
    let (status, body, _) = call(&app, put_json(&path("new-1"), &other)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["result"], "created");
    let (status, body, _) = call(&app, put_json(&path("new-1"), &other)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], "updated");
    // Without dedupe it just stores.
    let (status, body, _) = call(&app, put_json("/v1/desk/articles/late-copy", &fresh[0])).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(backend.store().len().unwrap(), before + 2);
    let (status, body, _) = call(&app, get("/v1/desk/similar/late-copy")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!body["matches"].as_array().unwrap().is_empty());

    // Too short to fingerprint: nothing to keep.
    let (status, body, _) = call(&app, put_json(&path("short"), &json!({"title": "短"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "too_short");
    // No texts in a store; unknown ids, indices and methods.
    let (status, body, _) = call(&app, get("/v1/desk/articles/v1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "text_not_kept");
    let (status, body, _) = call(&app, get("/v1/desk/articles/nope")).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
    let (status, body, _) = call(&app, get("/v1/desk/similar/nope")).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
    let (status, body, _) = call(&app, get("/v1/elsewhere/similar/v1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`desk`"));
    let (status, body, _) = call(&app, get("/v1/desk/similar/v1?k=3")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "index_not_usable");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`?threshold=T`"));
    let (status, body, _) = call(&app, get("/healthz")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["documents"], before + 2);
    assert_eq!(body["store"], "desk");
}

/// Query strings and paths the handlers cannot read, and a `threshold` or `k` out of range
/// (with or without dedupe), are answered 400 with a JSON error that says what is expected,
/// never with axum's plain-text rejection nor ignored (both found by schemathesis); a method
/// an endpoint does not take is a JSON 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_requests_get_json_errors_that_say_what_is_expected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("desk");
    let (code, _, err) = common::neardup(
        &[
            "index",
            "--store",
            dir.to_str().unwrap(),
            "--input",
            "examples/articles.jsonl",
            "-q",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (app, _) = service(&dir);
    let article = json!({"title": "标题", "content": "内容"});
    let requests = [
        get("/v1/desk/similar/ex-001?threshold=null"),
        get("/v1/desk/similar/ex-001?k=-1"),
        get("/v1/desk/similar/ex-001?k=2&k=2"),
        get("/v1/%FF/similar/ex-001"),
        get("/v1/desk/articles/%FF"),
        post_json("/v1/desk/similar?threshold=x", &article),
        post_json("/v1/%FF/similar", &article),
        put_json("/v1/desk/articles/a?dedupe=yes", &article),
        put_json("/v1/desk/articles/%FF", &article),
        // Out of range or both given: 400 with or without dedupe.
        put_json("/v1/desk/articles/a?threshold=-0.5", &article),
        put_json("/v1/desk/articles/a?k=8", &article),
        put_json("/v1/desk/articles/a?refresh=soon", &article),
        get("/v1/desk/similar/ex-001?k=8"),
        put_json(
            "/v1/desk/articles/a?dedupe=false&threshold=0.5&k=3",
            &article,
        ),
    ];
    // A method the endpoint does not take: 405 with its Allow header, and a JSON error too.
    let (status, body, headers) = call(
        &app,
        Request::delete("/v1/desk/similar/ex-001")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(headers["allow"], "GET,HEAD");
    assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
    for req in requests {
        let uri = req.uri().clone();
        let (status, body, headers) = call(&app, req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(headers["content-type"], "application/json", "{uri}");
        assert_eq!(body["error"]["code"], "bad_request", "{uri}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        let says_what_to_do = if uri.query().is_some_and(|q| q.contains("refresh")) {
            message.contains("wait_for")
        } else if uri.query().is_some() {
            message.contains("threshold")
        } else {
            message.contains("percent-encoded UTF-8")
        };
        assert!(says_what_to_do, "{uri}: {message}");
    }
}

/// 50 concurrent dedupe inserts of variants of one article, 3 rounds: exactly one is
/// created each time (the check and the write are one redb write transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_near_duplicates_on_a_store_create_exactly_one() {
    let v = variants(50);
    for round in 0..3 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("race");
        let (code, _, err) = common::neardup(
            &[
                "index",
                "--store",
                dir.to_str().unwrap(),
                "--input",
                "/dev/null",
                "-q",
            ],
            b"",
        );
        assert_eq!(code, 0, "{err}");
        let (app, backend) = service(&dir);
        let created = created_among(&[app], &v, |i| {
            format!("/v1/race/articles/v{i}?dedupe=true")
        })
        .await;
        assert_eq!(created, 1, "round {round}");
        assert_eq!(backend.store().len().unwrap(), 1, "round {round}");
    }
}

#[test]
fn the_binary_serves_a_store_and_says_how_to_make_one() {
    use std::process::Command;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("articles");
    let store = dir.to_str().unwrap().to_owned();
    let serve = |extra: &[&str]| {
        let (code, _, err) = common::neardup(
            &[
                &["serve", "--store", &store, "--listen", "127.0.0.1:0"],
                extra,
            ]
            .concat(),
            b"",
        );
        (code, err)
    };
    let (code, err) = serve(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--input /dev/null"), "{err}");
    indexed_store(&dir, "simhash");
    let (code, err) = serve(&["--es", "http://127.0.0.1:9"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--store and --es"), "{err}");

    // NEARDUP_ES_URL in the environment (as in a container) does not stand in its way.
    let (mut child, _, addr) = start_serving(
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args([
                "--log-format",
                "json",
                "serve",
                "--store",
                &store,
                "--listen",
                "127.0.0.1:0",
            ])
            .env("NEARDUP_ES_URL", "http://127.0.0.1:9"),
    );
    let (status, body) = http(
        addr.as_str(),
        "GET /v1/articles/similar/v0?k=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["method"], "simhash");
    assert!(
        body["matches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "v1"),
        "{body}"
    );
    assert_eq!(sigterm(&mut child), Some(0));
}

/// A tolerance of the method a store lacks is 409 on every endpoint, worded with the query
/// parameter that fits, as `serve --es` answers it (tests/it/live_es/serve.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_method_a_store_lacks_is_409_on_every_endpoint() {
    for held in ["simhash", "minhash"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("desk");
        indexed_store(&dir, held);
        let (app, _) = service(&dir);
        let a = variants(1).remove(0);
        common::serve::assert_other_method_is_409(&app, "desk", held, "v0", &a).await;
    }
}

/// What generated clients rely on: every operation named (`operationId`) and tagged, and
/// the error codes the service answers with listed as the `ErrorCode` enum, all and only.
#[test]
fn the_description_names_every_operation_and_lists_the_error_codes() {
    let doc: Value = serde_json::from_str(neardup::serve::OPENAPI).unwrap();
    let tags: Vec<&str> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut ids = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let id = op["operationId"].as_str();
            assert!(id.is_some(), "{method} {path}: no operationId");
            ids.push(id.unwrap().to_owned());
            let op_tags = op["tags"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            assert!(
                !op_tags.is_empty() && op_tags.iter().all(|t| tags.contains(&t.as_str().unwrap())),
                "{method} {path}: tags {op_tags:?} not among the declared {tags:?}"
            );
        }
    }
    let named: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(named.len(), ids.len(), "operationIds repeat: {ids:?}");
    for id in [
        "putArticle",
        "bulkArticles",
        "similarById",
        "similarByArticle",
        "fingerprint",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    let listed: Vec<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let codes: Vec<&str> = neardup::serve::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, codes, "the description's ErrorCode enum");
}

/// `POST /v1/{index}/articles/_bulk` on a new MinHash store: the same rules and statuses as on
/// Elasticsearch (the shared assertions); the batch is checked and written in one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_writes_and_dedupes_on_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bulk");
    let fp = Fingerprinter::for_profile(Profile::Default);
    let config = StoreConfig::for_method(&fp, neardup::Method::MinHash, false, 0);
    drop(Store::create_or_open(&dir, &config, &OpenOptions::default()).unwrap());
    let (app, backend) = service(&dir);
    assert_bulk_writes_and_dedupes(&app, "bulk").await;
    // b0, the example article, b3 and j2 (written without dedupe).
    assert_eq!(backend.store().len().unwrap(), 4);
    // A store keeps only fingerprints: an article too short for one is 422 on its own.
    let (status, body, _) = call(
        &app,
        common::serve::post_ndjson(
            "/v1/bulk/articles/_bulk",
            &[json!({"id": "tiny", "title": "短"}).to_string()],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["items"][0]["status"], 422, "{body}");
    assert_eq!(body["items"][0]["error"]["code"], "too_short");
}

/// A lead excerpt: the first 40 % of an article's sentences (the corpus keeps no paragraph
/// breaks), under the article's title.
fn lead_excerpt(article: &Value) -> Value {
    let content = article["content"].as_str().unwrap();
    let sentences: Vec<&str> = content.split_inclusive('。').collect();
    let n = (sentences.len() * 2).div_ceil(5);
    json!({ "title": article["title"], "content": sentences[..n].concat() })
}

/// The longest of `articles`: its 40 % lead has enough shingles to be contained.
fn longest(articles: &[(String, Value)]) -> (String, Value) {
    articles
        .iter()
        .max_by_key(|(_, a)| a["content"].as_str().unwrap().chars().count())
        .cloned()
        .unwrap()
}

/// A planted lead excerpt is `contained_in` its article and the article `contains` it, from
/// either side, as `similar --store` says; dedupe-on-insert refuses the excerpt after the
/// article (409 naming `contained_in`, the article and the containment) and stores the
/// article after its excerpt; `containment=false` asks for near-duplicates only. At
/// `threshold=0.5` (a 40 % lead has Jaccard ≈ 0.43 with its article): the relation does not
/// hang on the threshold (the review page's test asks at the default 0.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_excerpt_is_contained_in_its_article_from_either_side() {
    let articles = common::es::shared_articles(80);
    let (stored, later) = articles.split_at(60);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("desk");
    let mut lines = String::new();
    for (id, a) in stored {
        let mut a = a.clone();
        a["id"] = json!(id);
        lines.push_str(&format!("{a}\n"));
    }
    let store = dir.to_str().unwrap();
    let (code, _, err) = common::neardup(
        &[
            "index", "--store", store, "--method", "minhash", "--input", "-", "-q",
        ],
        lines.as_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    let (full_id, full) = longest(stored);
    let excerpt = lead_excerpt(&full);
    let mut line = excerpt.clone();
    line["id"] = json!("excerpt");
    let by_text = cli_matches(
        &[
            "similar",
            "--store",
            store,
            "--input",
            "-",
            "--threshold",
            "0.5",
        ],
        &format!("{line}\n"),
        "desk",
    );
    let (app, backend) = service(&dir);
    let near = "threshold=0.5";
    let relations = |body: &Value| -> Vec<(String, String)> {
        body["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["relation"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };

    // The excerpt, asked by text: contained in the stored article, as the CLI says.
    let (status, body, _) = call(
        &app,
        post_json(&format!("/v1/desk/similar?{near}"), &excerpt),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(relations(&body), [(full_id.clone(), "contained_in".into())]);
    let m = &body["matches"][0];
    assert!(m["containment"].as_f64().unwrap() >= 0.7, "{body}");
    assert!(m["similarity"].as_f64().unwrap() < 0.5, "{body}");
    assert_eq!(body["matches"].as_array().unwrap(), &by_text);
    let (status, body, _) = call(
        &app,
        post_json(
            &format!("/v1/desk/similar?{near}&containment=false"),
            &excerpt,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["matches"], json!([]));

    // Inserting the excerpt after its article: refused, naming the relation.
    let put = |id: &str, query: &str| format!("/v1/desk/articles/{id}?dedupe=true&{near}{query}");
    let (status, body, _) = call(&app, put_json(&put("excerpt", ""), &excerpt)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "duplicate");
    assert_eq!(body["relation"], "contained_in");
    assert_eq!(body["matches"][0]["id"], json!(full_id));
    assert_eq!(body["matches"][0]["relation"], "contained_in");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("contained in `{full_id}`")) && message.contains("containment"),
        "{message}"
    );
    // Near-duplicates only: the excerpt is none, so it is stored.
    let (status, body, _) = call(
        &app,
        put_json(&put("excerpt", "&containment=false"), &excerpt),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // From the article's side it contains the excerpt; from the excerpt's, the reverse.
    for (id, other, relation) in [
        (full_id.as_str(), "excerpt", "contains"),
        ("excerpt", full_id.as_str(), "contained_in"),
    ] {
        let (status, body, _) = call(&app, get(&format!("/v1/desk/similar/{id}?{near}"))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(relations(&body), [(other.to_owned(), relation.to_owned())]);
        let (status, body, _) = call(
            &app,
            get(&format!("/v1/desk/similar/{id}?{near}&containment=false")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["matches"], json!([]));
    }
    drop(app);
    drop(backend);
    let cli = cli_matches(
        &[
            "similar",
            "--store",
            store,
            "--id",
            &full_id,
            "--threshold",
            "0.5",
        ],
        "",
        "desk",
    );
    let (app, backend) = service(&dir);
    let (_, body, _) = call(&app, get(&format!("/v1/desk/similar/{full_id}?{near}"))).await;
    assert_eq!(body["matches"].as_array().unwrap(), &cli);

    // An excerpt stored first does not keep its full article out: 201, in `_bulk` too.
    let (later_id, later_full) = longest(later);
    let later_excerpt = lead_excerpt(&later_full);
    let (status, body, _) = call(&app, put_json(&put("teaser", ""), &later_excerpt)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body, _) = call(&app, put_json(&put(&later_id, ""), &later_full)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body, _) = call(&app, get(&format!("/v1/desk/similar/{later_id}?{near}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        relations(&body),
        [("teaser".to_owned(), "contains".to_owned())]
    );
    let mut copy = lead_excerpt(&later_full);
    copy["id"] = json!("teaser-again");
    let (status, body, _) = call(
        &app,
        post_json(
            &format!("/v1/desk/articles/_bulk?dedupe=true&{near}"),
            &json!({ "articles": [copy] }),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let item = &body["items"][0];
    assert_eq!(item["status"], 409, "{body}");
    assert_eq!(
        item["relation"], "near_duplicate",
        "the stored teaser: {body}"
    );

    // A bad value is a clear 400.
    let (status, body, _) = call(
        &app,
        get(&format!("/v1/desk/similar/{full_id}?containment=maybe")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`containment` true or false"),
        "{body}"
    );
    assert_eq!(backend.store().len().unwrap(), 63);
}

/// The review page over a store, in a real headless browser (Debian's Chromium;
/// `NEARDUP_TEST_CHROMIUM` names another binary): a link looks up an article whose 40 % lead
/// is stored, and the page lists the lead with its relation and containment (a 40 % lead is a
/// part of the article even at Jaccard ≈ 0.43, above the default threshold: the article
/// contains it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_page_shows_each_matchs_relation_and_containment_in_a_browser() {
    let chromium = std::env::var("NEARDUP_TEST_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let articles = common::es::shared_articles(60);
    let (full_id, full) = longest(&articles);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("desk");
    let (code, _, err) = common::neardup(
        &[
            "index",
            "--store",
            dir.to_str().unwrap(),
            "--input",
            "/dev/null",
            "-q",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (app, _) = service(&dir);
    for (id, a) in [
        (full_id.as_str(), full.clone()),
        ("lead", lead_excerpt(&full)),
    ] {
        let (status, body, _) = call(&app, put_json(&format!("/v1/desk/articles/{id}"), &a)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (_, body, _) = call(&app, get(&format!("/v1/desk/similar/{full_id}"))).await;
    let m = &body["matches"][0];
    assert_eq!(
        (&m["id"], &m["relation"]),
        (&json!("lead"), &json!("contains")),
        "{body}"
    );
    let containment = format!("{:.2}", m["containment"].as_f64().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(neardup::serve::run(listener, app, async {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}/?index=desk&id={full_id}");
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
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(html.contains("<td>lead</td>"), "the lead is listed: {html}");
    assert!(
        html.contains("<td>the query contains it</td>"),
        "with its relation: {html}"
    );
    assert!(
        html.contains(&format!("<td>{containment}</td>")),
        "and its containment {containment}: {html}"
    );
    assert!(html.contains("1 match;"), "{html}");
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

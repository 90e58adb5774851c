//! HTTP helpers for the tests of `neardup serve`: requests to a router in process, and the
//! near-duplicate variants the dedupe tests insert.

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use tower::ServiceExt;

/// Sends `req` to `app`: status, body (JSON, or the text as a JSON string) and headers.
pub async fn call(app: &Router, req: Request<Body>) -> (StatusCode, Value, axum::http::HeaderMap) {
    let r = app.clone().oneshot(req).await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    let bytes = to_bytes(r.into_body(), usize::MAX).await.unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body, headers)
}

pub fn post_json(path: &str, body: &Value) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

pub fn put_json(path: &str, body: &Value) -> Request<Body> {
    Request::put(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// `n` variants of one long real article: each drops a different few sentences, so every
/// two are near-duplicates but no two are equal.
pub fn variants(n: usize) -> Vec<Value> {
    let (_, a) = super::es::shared_articles(200)
        .into_iter()
        .max_by_key(|(_, a)| a["content"].as_str().map_or(0, str::len))
        .unwrap();
    let content = a["content"].as_str().unwrap();
    let sentences: Vec<&str> = content.split_inclusive('。').collect();
    assert!(sentences.len() > 12, "a long article");
    (0..n)
        .map(|i| {
            let body: String = sentences
                .iter()
                .enumerate()
                .filter(|(j, _)| {
                    j % sentences.len() != i % sentences.len() && (j + 3 * i) % 17 != 0
                })
                .map(|(_, s)| *s)
                .collect();
            json!({ "title": a["title"], "content": body })
        })
        .collect()
}

/// PUTs every variant at once (`path(i)` for the i-th), through `apps` in turn, and counts
/// the `201`s; every other answer must be a `409 duplicate`.
pub async fn created_among(
    apps: &[Router],
    variants: &[Value],
    path: impl Fn(usize) -> String,
) -> usize {
    let mut tasks = Vec::new();
    for (i, a) in variants.iter().enumerate() {
        let app = apps[i % apps.len()].clone();
        let req = put_json(&path(i), a);
        tasks.push(tokio::spawn(async move { call(&app, req).await }));
    }
    let mut created = 0;
    for task in tasks {
        let (status, body, _) = task.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => assert_eq!(body["error"]["code"], "duplicate"),
            other => panic!("{other} {body}"),
        }
    }
    created
}

/// One plain HTTP/1.1 request (written out, `Connection: close`) to a service over a real
/// socket: the status code and the body.
pub fn http(addr: impl std::net::ToSocketAddrs, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer[9..12]
        .parse()
        .unwrap_or_else(|_| panic!("not HTTP: {answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// SIGTERM (what `docker stop` and service managers send), then the exit code.
pub fn sigterm(child: &mut std::process::Child) -> Option<i32> {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap().code()
}

/// The log lines of a child process's stderr.
pub type LogLines = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

/// Spawns `cmd` (`neardup --log-format json serve …`) with stderr piped and reads its first
/// line, which must be "serving": the child, its further log lines, and where it listens.
pub fn start_serving(cmd: &mut std::process::Command) -> (std::process::Child, LogLines, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["fields"]["message"], "serving", "{first}");
    let addr = first["fields"]["listen"].as_str().unwrap().to_owned();
    (child, lines, addr)
}

/// Asks `index` (holding `held` only: "simhash" or "minhash") by the other method on each
/// endpoint that takes a tolerance, for the document `id` and the article `a`: every answer is
/// 409 `index_not_usable` naming the query parameter that fits, never a CLI flag. The same
/// checks run on both backends, so the same mistake gets the same status from each.
pub async fn assert_other_method_is_409(
    app: &Router,
    index: &str,
    held: &str,
    id: &str,
    a: &Value,
) {
    let (other, fits) = match held {
        "simhash" => ("threshold=0.3", "`?k=N`"),
        "minhash" => ("k=3", "`?threshold=T`"),
        _ => panic!("a method: simhash or minhash, not {held}"),
    };
    let requests = [
        Request::get(format!("/v1/{index}/similar/{id}?{other}"))
            .body(Body::empty())
            .unwrap(),
        post_json(&format!("/v1/{index}/similar?{other}"), a),
        put_json(
            &format!("/v1/{index}/articles/{id}-again?dedupe=true&{other}"),
            a,
        ),
    ];
    for req in requests {
        let what = format!("{} {}", req.method(), req.uri());
        let (status, body, _) = call(app, req).await;
        assert_eq!(status, StatusCode::CONFLICT, "{what}: {body}");
        assert_eq!(body["error"]["code"], "index_not_usable", "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(fits), "{what}: {message}");
        assert!(
            message.contains(&format!("holds {held}")),
            "{what}: {message}"
        );
        assert!(
            !message.contains("--"),
            "{what} names a CLI flag: {message}"
        );
    }
}

pub fn post_ndjson(path: &str, lines: &[String]) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from(lines.join("\n") + "\n"))
        .unwrap()
}

/// `POST /v1/{index}/articles/_bulk` on either backend: a batch is deduplicated within
/// itself (in order) and against what is stored, each line answered on its own (a bad line
/// does not stop the others), ids kept; the same rules and statuses on both backends.
/// `index` is empty (a store) or an index `es-init` made; the test articles are written there.
pub async fn assert_bulk_writes_and_dedupes(app: &Router, index: &str) {
    let v = variants(4);
    let (other_id, other) = super::es::example_articles().into_iter().next().unwrap();
    let line = |id: &str, a: &Value| {
        let mut a = a.clone();
        a["id"] = json!(id);
        a.to_string()
    };
    let path = |q: &str| format!("/v1/{index}/articles/_bulk{q}");
    let batch = [
        line("b0", &v[0]),
        line("b1", &v[1]),
        "not json".to_owned(),
        json!({"title": "没有编号"}).to_string(),
        line(&other_id, &other),
    ];
    let (status, body, _) = call(app, post_ndjson(&path("?dedupe=true"), &batch)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["errors"], true);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 5, "{body}");
    assert_eq!(
        (items[0]["id"].as_str(), items[0]["status"].as_u64()),
        (Some("b0"), Some(201))
    );
    assert_eq!(items[0]["result"], "created");
    // Near the earlier article of the same batch: refused, naming it.
    assert_eq!(items[1]["status"], 409, "{body}");
    assert_eq!(items[1]["error"]["code"], "duplicate");
    assert_eq!(items[1]["matches"][0]["id"], "b0");
    for bad in &items[2..4] {
        assert_eq!(bad["status"], 400, "{bad}");
        assert!(bad.get("id").is_none(), "{bad}");
        assert!(
            bad["error"]["message"].as_str().unwrap().contains("`id`"),
            "{bad}"
        );
    }
    assert_eq!(items[4]["status"], 201, "{body}");

    // Against what is stored (no refresh in between on Elasticsearch); the same id again is
    // not its own duplicate.
    let (status, body, _) = call(
        app,
        post_ndjson(
            &path("?dedupe=true"),
            &[line("b2", &v[2]), line("b0", &v[0])],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let items = body["items"].as_array().unwrap();
    assert_eq!(items[0]["status"], 409, "{body}");
    assert_eq!(items[0]["matches"][0]["id"], "b0");
    assert_eq!(
        (items[1]["status"].as_u64(), items[1]["result"].as_str()),
        (Some(200), Some("updated"))
    );

    // Without dedupe a near-duplicate is written.
    let (status, body, _) = call(app, post_ndjson(&path(""), &[line("b3", &v[3])])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["errors"], false);
    assert_eq!(body["items"][0]["status"], 201);

    // The request itself is refused when nothing in it is an article, or it holds too many.
    for (lines, says) in [
        (vec![], "no articles"),
        (vec!["[1, 2]".to_owned()], "no line is an article"),
        (vec![line("x", &other); 1001], "at most 1000"),
    ] {
        let (status, body, _) = call(app, post_ndjson(&path(""), &lines)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }

    // The JSON form (`application/json`, for typed clients that cannot send JSON Lines): each
    // article answered on its own, in order, ...
    let article = |id: &str, a: &Value| {
        let mut a = a.clone();
        a["id"] = json!(id);
        a
    };
    let (status, body, _) = call(
        app,
        post_json(
            &path("?dedupe=true"),
            &json!({"articles": [article("j0", &v[0]), article("j1", &v[1])]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{body}");
    assert_eq!(
        (items[0]["id"].as_str(), items[0]["status"].as_u64()),
        (Some("j0"), Some(409)),
        "{body}"
    );
    assert_eq!(items[0]["matches"][0]["id"], "b0", "{body}");
    assert_eq!(
        (items[1]["id"].as_str(), items[1]["status"].as_u64()),
        (Some("j1"), Some(409)),
        "{body}"
    );
    let (status, body, _) = call(
        app,
        post_json(&path(""), &json!({"articles": [article("j2", &v[2])]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["errors"].as_bool(),
            body["items"][0]["status"].as_u64()
        ),
        (Some(false), Some(201)),
        "{body}"
    );
    // ... but a body the description refuses is refused whole, naming the first bad article,
    // and nothing of it is written (j3 never is: the caller counts what is stored).
    let too_many: Vec<Value> = (0..1001)
        .map(|i| article(&format!("x{i}"), &other))
        .collect();
    for (request, status, says) in [
        (json!({"articles": []}), 400, "no articles"),
        (
            json!({"articles": [article("j3", &v[3]), {"title": "没有编号"}]}),
            400,
            "articles[1] is not an article with its `id`",
        ),
        (
            json!({"articles": [article("j3", &v[3]), {"id": "j4", "title": 7}]}),
            422,
            "articles[1]: ",
        ),
        (
            json!({"article": [article("j3", &v[3])]}),
            400,
            "no `articles` array",
        ),
        (json!([article("j3", &v[3])]), 400, "no `articles` array"),
        (json!({"articles": too_many}), 400, "at most 1000"),
    ] {
        let (got, body, _) = call(app, post_json(&path(""), &request)).await;
        assert_eq!(got.as_u16(), status, "{request}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{request}: {body}"
        );
    }
    let not_json = Request::post(path(""))
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(Body::from(line("j4", &v[3])))
        .unwrap();
    let (status, body, _) = call(app, not_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no `articles` array"),
        "{body}"
    );
    let bad_json = Request::post(path(""))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"articles\": ["))
        .unwrap();
    let (status, body, _) = call(app, bad_json).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the body is not JSON"),
        "{body}"
    );
}

/// The service in front of Elasticsearch through `client` (no retries), as a router to call
/// in process.
pub fn es_router(
    client: elasticsearch::Elasticsearch,
    config: neardup::serve::ServeConfig,
) -> Router {
    std::sync::Arc::new(neardup::serve::Service::new(
        config,
        neardup::serve::EsBackend {
            client,
            retry: neardup::es::RetryPolicy::none(),
        },
        neardup::Fingerprinter::for_profile(neardup::Profile::Default),
    ))
    .router()
}

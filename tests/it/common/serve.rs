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

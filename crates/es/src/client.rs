//! The connection: where the cluster is and how to log in ([`EsConfig`]), the client built
//! from it, the one error type of this crate ([`EsError`]), and the one way a request is sent,
//! retried and read ([`send`], [`request`], [`check`]).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use elasticsearch::auth::Credentials;
use elasticsearch::cert::{Certificate, CertificateValidation};
use elasticsearch::http::headers::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_TYPE};
use elasticsearch::http::transport::{SingleNodeConnectionPool, TransportBuilder};
use elasticsearch::http::{Method, StatusCode, Url};
use elasticsearch::Elasticsearch;
use serde_json::Value;

use crate::error::{blocked, error_type_reason, EsError};
use crate::nodes;
use crate::retry::RetryPolicy;

/// A secret (password, API key) that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself, for handing to the client. Never print it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

/// How to log in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials (a local dev node with security off).
    #[default]
    None,
    /// HTTP basic auth.
    Basic { user: String, password: Secret },
    /// An API key: either `id:api_key` or the base64 `encoded` form Elasticsearch returns.
    ApiKey(Secret),
}

/// Where the cluster is and how to connect to it.
#[derive(Clone, Debug)]
pub struct EsConfig {
    /// One or more node URLs (requests go round-robin, passing over a node that refuses
    /// connections: see [`send`]). Credentials in a URL
    /// (`http://user:pass@host:9200`) are moved to [`Auth::Basic`] and removed from the URL.
    pub urls: Vec<Url>,
    pub auth: Auth,
    /// PEM file with the CA certificate(s) that signed the cluster's HTTP certificate.
    pub ca_cert: Option<PathBuf>,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
    /// How long [`first_contact`] waits for the cluster's first answer. The first contact
    /// is not retried: a refused connection, an unknown host or no answer in this time fails
    /// at once, while [`RetryPolicy`] retries only requests to a cluster that has answered.
    pub connect_timeout: Duration,
    /// Gzip the bodies sent and ask for gzipped answers. Off by default, as in
    /// Elasticsearch's own Java and Python clients: it saves bytes on a slow link and costs
    /// CPU time on both sides of every request (about 0.3 ms of a `similar` lookup at 1M
    /// documents on one machine, docs/elasticsearch.md). Off, the client asks for plain
    /// answers (`Accept-Encoding: identity`) and still reads a gzipped one.
    pub compression: bool,
}

impl EsConfig {
    /// A configuration for `urls` (comma-separated for several nodes), without auth.
    pub fn new(urls: &str) -> Result<EsConfig, EsError> {
        let mut auth = Auth::None;
        let mut parsed = Vec::new();
        for u in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            let mut url = Url::parse(u).map_err(|e| {
                EsError::Config(format!(
                    "`{}` is not a URL ({e}); expected e.g. http://127.0.0.1:9200",
                    redact_url_str(u)
                ))
            })?;
            if !matches!(url.scheme(), "http" | "https") || !u.contains("://") {
                return Err(EsError::Config(format!(
                    "`{}`: the URL must start with http:// or https://, e.g. http://127.0.0.1:9200",
                    redact_url_str(u)
                )));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(EsError::Config(format!(
                    "`{}`: a node URL has no `?` or `#` part (a password with `#`, `?` or `/` \
                     goes in NEARDUP_ES_PASSWORD, not in the URL)",
                    redact_url_str(u)
                )));
            }
            if !url.username().is_empty() {
                auth = Auth::Basic {
                    user: url.username().to_owned(),
                    password: Secret::new(url.password().unwrap_or_default()),
                };
                let _ = url.set_username("");
                let _ = url.set_password(None);
            }
            parsed.push(url);
        }
        if parsed.is_empty() {
            return Err(EsError::Config(
                "no Elasticsearch URL: pass --es URL or set NEARDUP_ES_URL".into(),
            ));
        }
        Ok(EsConfig {
            urls: parsed,
            auth,
            ca_cert: None,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            compression: false,
        })
    }

    /// The URLs, comma-separated, for messages (never with credentials).
    pub fn display_urls(&self) -> String {
        self.urls
            .iter()
            .map(redact_url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The hosts a password would be sent to in clear text: basic auth over plain `http://`
    /// to a host that is not this machine.
    pub fn clear_text_password_hosts(&self) -> Vec<String> {
        if !matches!(self.auth, Auth::Basic { .. }) {
            return Vec::new();
        }
        self.urls
            .iter()
            .filter(|u| u.scheme() == "http")
            .filter_map(|u| u.host_str())
            .filter(|h| {
                let bare = h.trim_start_matches('[').trim_end_matches(']');
                let loopback = bare.eq_ignore_ascii_case("localhost")
                    || bare
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                !loopback
            })
            .map(str::to_owned)
            .collect()
    }

    /// Builds the client. Fails on an unreadable CA certificate; does not contact the cluster
    /// (see [`first_contact`] for a check that it answers). Warns (a `tracing` warning) when a
    /// password would cross the network in clear text.
    pub fn client(&self) -> Result<Elasticsearch, EsError> {
        for host in self.clear_text_password_hosts() {
            tracing::warn!(
                "basic auth over plain http:// to {host}: the password crosses the network unencrypted; use https:// (and --es-ca-cert for a self-signed cluster)"
            );
        }
        let mut builder = if self.urls.len() == 1 {
            TransportBuilder::new(SingleNodeConnectionPool::new(self.urls[0].clone()))
        } else {
            TransportBuilder::new(nodes::Nodes::new(&self.urls))
        };
        builder = builder.timeout(self.timeout).enable_meta_header(false);
        builder = if self.compression {
            builder.request_body_compression(true)
        } else {
            // The HTTP client asks for gzip by itself unless a request names an encoding.
            builder.header(ACCEPT_ENCODING, HeaderValue::from_static("identity"))
        };
        match &self.auth {
            Auth::None => {}
            Auth::Basic { user, password } => {
                builder = builder.auth(Credentials::Basic(
                    user.clone(),
                    password.expose().to_owned(),
                ));
            }
            Auth::ApiKey(key) => {
                let key = key.expose();
                builder = builder.auth(match key.split_once(':') {
                    Some((id, k)) => Credentials::ApiKey(id.to_owned(), k.to_owned()),
                    None => Credentials::EncodedApiKey(key.to_owned()),
                });
            }
        }
        if let Some(path) = &self.ca_cert {
            let pem = std::fs::read(path).map_err(|e| EsError::CaCert {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let cert = Certificate::from_pem(&pem).map_err(|e| EsError::CaCert {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            builder = builder.cert_validation(CertificateValidation::Full(cert));
        }
        let transport = builder
            .build()
            .map_err(|e| EsError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Elasticsearch::new(transport))
    }
}

/// A request body: JSON, or newline-delimited JSON for `_bulk`.
#[derive(Clone, Debug)]
pub enum Body {
    Json(Value),
    NdJson(String),
}

/// A response that came back, whatever its status.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

/// Sends one request and returns the status and the parsed JSON body (`null` when empty).
/// Connection failures become [`EsError::Unreachable`]; HTTP statuses are left to the caller.
/// No retries (see [`request`]), except one: a node that refuses the connection got nothing,
/// so with several nodes the request goes at once to the next one, up to once per node,
/// and the refusing node is passed over for a while (`nodes::SKIP`). That holds for every
/// request, a create included; any other connection error is returned as it is.
pub async fn send(
    client: &Elasticsearch,
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    body: Option<&Body>,
) -> Result<Reply, EsError> {
    let mut headers = HeaderMap::new();
    let bytes = match body {
        None => None,
        Some(Body::Json(v)) => Some(v.to_string()),
        Some(Body::NdJson(s)) => {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            );
            Some(s.clone())
        }
    };
    let mut refused: Vec<String> = Vec::new();
    let response = loop {
        let e = match client
            .send(
                method,
                path,
                headers.clone(),
                Some(query),
                bytes.as_deref(),
                None,
            )
            .await
        {
            Ok(response) => break response,
            Err(e) => e,
        };
        match nodes::refused(&e) {
            Some(node) if !refused.contains(&node) => {
                nodes::mark_refused(&node);
                refused.push(node);
            }
            _ => {
                let detail = error_chain(&e);
                return Err(if untrusted_certificate(&detail) {
                    EsError::Tls { detail }
                } else {
                    EsError::Unreachable { detail }
                });
            }
        }
    };
    let status = response.status_code();
    let text = response.text().await.map_err(|e| EsError::Unreachable {
        detail: format!("reading the response: {}", error_chain(&e)),
    })?;
    let body = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Reply { status, body })
}

/// Sends a request with retries (see [`RetryPolicy`]) and turns error statuses into
/// [`EsError`]s; `what` names the operation in messages (e.g. "index `news`: put mapping").
pub async fn request(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    what: &str,
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    body: Option<&Body>,
) -> Result<Value, EsError> {
    retry
        .run(|| async {
            let reply = send(client, method, path, query, body).await?;
            check(what, reply)
        })
        .await
}

/// A search (`_search`, `_count`) sent as [`request`] sends it, with one more rule: an answer
/// that some shards did not give ([`shards_failed`]) is an error, retried like an error
/// status, never a short answer. Elasticsearch answers 200 with the hits of the shards that
/// did answer.
pub(crate) async fn search(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    what: &str,
    path: &str,
    query: &[(&str, &str)],
    body: Option<&Body>,
) -> Result<Value, EsError> {
    read_whole(client, retry, what, (path, query, body), shards_failed).await
}

/// A multi-get (`_mget`) sent as [`request`] sends it, with one more rule: a document the
/// answer gives an `error` for instead of `found` ([`docs_failed`]) makes it an error,
/// retried like an error status. Elasticsearch answers 200 and marks the documents of a shard
/// with no copy assigned that way; read as "not found", they would pass for deleted.
pub(crate) async fn mget(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    what: &str,
    path: &str,
    query: &[(&str, &str)],
    body: Option<&Body>,
) -> Result<Value, EsError> {
    read_whole(client, retry, what, (path, query, body), docs_failed).await
}

/// A read (`POST path`) sent as [`request`] sends it, whose 2xx answer is an error too when
/// `incomplete` says that part of it is missing.
async fn read_whole(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    what: &str,
    (path, query, body): (&str, &[(&str, &str)], Option<&Body>),
    incomplete: fn(&str, &Value) -> Option<EsError>,
) -> Result<Value, EsError> {
    retry
        .run(|| async {
            let reply = send(client, Method::Post, path, query, body).await?;
            let r = check(what, reply)?;
            match incomplete(what, &r) {
                Some(e) => Err(e),
                None => Ok(r),
            }
        })
        .await
}

/// The error a multi-get answer stands for when some of its documents carry an `error`: the
/// first one's, and how many. A shard without a copy (`no_shard_available_action_exception`)
/// is 503, which is retried; a missing index is [`EsError::IndexNotFound`]; anything else 400.
pub(crate) fn docs_failed(what: &str, r: &Value) -> Option<EsError> {
    let docs = r["docs"].as_array()?;
    let mut failed = docs.iter().filter(|d| d.get("error").is_some());
    let first = failed.next()?;
    let n = 1 + failed.count();
    let (error_type, reason) = error_type_reason(first);
    if error_type == "index_not_found_exception" {
        let index = first["_index"].as_str().unwrap_or("?").to_owned();
        return Some(EsError::IndexNotFound { index });
    }
    Some(EsError::Status {
        what: format!(
            "{what}: {n} of {} documents could not be read (the first: `{}`)",
            docs.len(),
            first["_id"].as_str().unwrap_or("?")
        ),
        status: if error_type.contains("no_shard_available") {
            503
        } else {
            400
        },
        error_type,
        reason,
    })
}

/// The error a search answer (`_search`, `_count`, a scroll page) stands for when some of its
/// shards did not answer. Two kinds: a shard that failed (`_shards.failed`, with its status
/// and reason), and a shard that was never asked because no copy of it is assigned (the
/// index is red): Elasticsearch counts that one in `total` but neither in `successful` nor
/// in `failed`. `None` when every shard answered.
pub(crate) fn shards_failed(what: &str, r: &Value) -> Option<EsError> {
    let shards = &r["_shards"];
    let count = |k: &str| shards[k].as_u64().unwrap_or(0);
    let failed = count("failed");
    // A skipped shard (nothing in it can match) counts as successful too.
    let unanswered = match shards["successful"].as_u64() {
        Some(successful) => count("total").saturating_sub(successful + failed),
        None => 0,
    };
    if failed > 0 {
        let first = &shards["failures"][0];
        let (error_type, reason) =
            error_type_reason(&serde_json::json!({ "error": first["reason"] }));
        return Some(EsError::Status {
            what: format!("{what}: {} shard(s) failed", failed + unanswered),
            status: first["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(500),
            error_type,
            reason,
        });
    }
    (unanswered > 0).then(|| EsError::Status {
        what: format!("{what}: {unanswered} shard(s) failed"),
        status: 503,
        error_type: "no_shard_available".into(),
        reason: format!(
            "{unanswered} of {} shards have no copy assigned (the index is red; \
             `GET _cluster/allocation/explain` says why)",
            count("total")
        ),
    })
}

/// Maps an error status to an [`EsError`]; passes 2xx bodies through.
pub fn check(what: &str, reply: Reply) -> Result<Value, EsError> {
    let status = reply.status.as_u16();
    if (200..300).contains(&status) {
        return Ok(reply.body);
    }
    let (error_type, reason) = error_type_reason(&reply.body);
    if let Some(blocked) = blocked(status, &error_type, &reason, None) {
        return Err(blocked);
    }
    if status == 401 || status == 403 {
        return Err(EsError::Unauthorized { status, reason });
    }
    if error_type == "index_not_found_exception" {
        let index = reply.body["error"]["index"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        return Err(EsError::IndexNotFound { index });
    }
    Err(EsError::Status {
        what: what.to_owned(),
        status,
        error_type,
        reason,
    })
}

/// The version number (`7.10.2`) of the cluster, which also checks that it answers and that
/// the credentials work.
pub async fn server_version(
    client: &Elasticsearch,
    retry: &RetryPolicy,
) -> Result<String, EsError> {
    let info = request(client, retry, "GET /", Method::Get, "/", &[], None).await?;
    info["version"]["number"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| EsError::BadResponse {
            what: "GET /".into(),
            detail: "no version.number: is this Elasticsearch?".into(),
        })
}

/// The first request to a cluster: [`server_version`] without retries, within
/// `connect_timeout`. A command calls it before its real work so that a wrong URL, a node that
/// is down or an unknown host fails in one line at once instead of after minutes of retries.
pub async fn first_contact(
    client: &Elasticsearch,
    connect_timeout: Duration,
) -> Result<String, EsError> {
    match tokio::time::timeout(
        connect_timeout,
        server_version(client, &RetryPolicy::none()),
    )
    .await
    {
        Ok(answer) => answer,
        Err(_) => Err(EsError::Unreachable {
            detail: format!(
                "no answer within the connect timeout of {} s",
                connect_timeout.as_secs_f64()
            ),
        }),
    }
}

/// Percent-encodes an index name or document id for use as one path segment.
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Like [`path_segment`], but keeps `*` and `,` so patterns and lists reach Elasticsearch.
pub(crate) fn path_segment_keep_patterns(index: &str) -> String {
    index
        .split(',')
        .map(|part| {
            part.split('*')
                .map(path_segment)
                .collect::<Vec<_>>()
                .join("*")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A URL with its user and password removed, for messages.
pub fn redact_url(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string().trim_end_matches('/').to_owned()
}

/// A URL as typed, with everything before its last `@` (after the scheme, if any) removed:
/// works on strings that do not parse, or parse oddly (`user:pass@host:9200` has no scheme
/// and reads as the scheme `user`).
fn redact_url_str(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(i), Some(j)) if j > i => {
            format!("{}<credentials hidden>@{}", &s[..i + 3], &s[j + 1..])
        }
        (_, Some(j)) => format!("<credentials hidden>@{}", &s[j + 1..]),
        _ => s.to_owned(),
    }
}

/// Whether a connection failed because the node's certificate was not trusted (rustls's
/// "invalid peer certificate: UnknownIssuer", "…: Expired", "…: NotValidForName"), as opposed
/// to a node that is down or a connection that broke.
fn untrusted_certificate(detail: &str) -> bool {
    detail.contains("invalid peer certificate") || detail.contains("certificate verify failed")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// Makes what was written to `index` searchable (the back-fill and the regroup, before they
/// walk it).
pub(crate) async fn refresh(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
) -> Result<(), EsError> {
    request(
        client,
        retry,
        &format!("index `{index}`: refresh"),
        Method::Post,
        &format!("/{}/_refresh", path_segment(index)),
        &[],
        None,
    )
    .await
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_answer_some_shards_did_not_give_is_an_error() {
        use serde_json::json;
        let answer = |shards: Value| shards_failed("read", &json!({ "_shards": shards }));
        // Every shard answered; one of them was skipped (counted as successful).
        assert!(
            answer(json!({ "total": 3, "successful": 3, "skipped": 1, "failed": 0 })).is_none()
        );
        assert!(shards_failed("read", &json!({ "count": 3 })).is_none());
        // A red index: a shard neither successful nor failed.
        let e = answer(json!({ "total": 3, "successful": 2, "skipped": 1, "failed": 0 })).unwrap();
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("1 shard(s) failed"), "{e}");
        // A shard that failed, with its own status and reason.
        let e = answer(
            json!({ "total": 3, "successful": 2, "failed": 1, "failures": [
            { "shard": 1, "status": 400, "reason": {
                "type": "query_shard_exception", "reason": "failed to create query" } } ] }),
        )
        .unwrap();
        assert!(!e.is_transient(), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("1 shard(s) failed") && text.contains("failed to create query"),
            "{text}"
        );
    }

    /// The head of the one request `send` makes with a client of `config` (a JSON body),
    /// read off the socket by a listener that answers `{}`; and whether the body came
    /// gzipped (it starts with gzip's magic bytes).
    async fn sent(config: EsConfig) -> (String, bool) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(socket.try_clone().unwrap());
            let mut head = String::new();
            while !head.ends_with("\r\n\r\n") {
                assert!(
                    reader.read_line(&mut head).unwrap() > 0,
                    "the client closed before a whole request head"
                );
            }
            let head = head.to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            (&socket)
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                .unwrap();
            (head, body.starts_with(&[0x1f, 0x8b]))
        });
        let client = EsConfig {
            urls: vec![Url::parse(&url).unwrap()],
            ..config
        }
        .client()
        .unwrap();
        let body = Body::Json(serde_json::json!({ "query": { "match_all": {} } }));
        let reply = send(&client, Method::Post, "/i/_search", &[], Some(&body))
            .await
            .unwrap();
        assert_eq!(reply.body, serde_json::json!({}));
        server.join().unwrap()
    }

    #[tokio::test]
    async fn answers_are_asked_plain_unless_compression_is_on() {
        let plain = EsConfig::new("http://127.0.0.1:9200").unwrap();
        assert!(!plain.compression, "off by default");
        let (head, gzipped) = sent(plain.clone()).await;
        assert!(head.contains("accept-encoding: identity\r\n"), "{head}");
        assert!(!head.contains("content-encoding"), "{head}");
        assert!(!gzipped);

        let (head, gzipped) = sent(EsConfig {
            compression: true,
            ..plain
        })
        .await;
        assert!(head.contains("accept-encoding: gzip"), "{head}");
        assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
        assert!(gzipped, "the body is gzipped");
    }

    #[test]
    fn credentials_in_the_url_move_to_basic_auth_and_never_print() {
        let c = EsConfig::new("https://elastic:s3cret@es.example:9200").unwrap();
        assert_eq!(c.display_urls(), "https://es.example:9200");
        match &c.auth {
            Auth::Basic { user, password } => {
                assert_eq!(user, "elastic");
                assert_eq!(password.expose(), "s3cret");
            }
            other => panic!("expected basic auth, got {other:?}"),
        }
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn clear_text_passwords_are_found_for_remote_http_hosts_only() {
        let hosts = |u: &str| EsConfig::new(u).unwrap().clear_text_password_hosts();
        assert_eq!(hosts("http://u:p@es.example:9200"), vec!["es.example"]);
        assert_eq!(hosts("http://u:p@10.1.2.3:9200"), vec!["10.1.2.3"]);
        assert!(hosts("https://u:p@es.example:9200").is_empty());
        assert!(hosts("http://u:p@127.0.0.1:9200").is_empty());
        assert!(hosts("http://u:p@localhost:9200").is_empty());
        assert!(hosts("http://u:p@[::1]:9200").is_empty());
        assert!(
            hosts("http://es.example:9200").is_empty(),
            "no password, no warning"
        );
    }

    #[test]
    fn several_urls_and_bad_ones() {
        let c = EsConfig::new("http://a:9200, http://b:9200").unwrap();
        assert_eq!(c.urls.len(), 2);
        let e = EsConfig::new("es.example:9200").unwrap_err().to_string();
        assert!(e.contains("http://"), "{e}");
        let e = EsConfig::new("not a url://u:pw@x").unwrap_err().to_string();
        assert!(!e.contains("pw"), "{e}");
        for typed in [
            "elastic:s3cretPW@127.0.0.1:9200",
            "elastic:s3cretPW@es.example",
            "ftp://elastic:s3cretPW@es.example",
            "http://elastic:s3c#retPW@127.0.0.1:9200",
            "http://elastic:s3c?retPW@127.0.0.1:9200",
            "http://elastic:s3c/retPW@127.0.0.1:9200",
            "http://elastic:s3cretPW@[::1",
            "http://a:9200,elastic:s3cretPW@b:9200",
        ] {
            let e = EsConfig::new(typed).unwrap_err().to_string();
            for part in ["s3c", "retPW"] {
                assert!(!e.contains(part), "{typed}: {e}");
            }
        }
        assert!(EsConfig::new(" ").is_err());
    }

    #[test]
    fn patterns_survive_encoding() {
        assert_eq!(path_segment_keep_patterns("news-*,old"), "news-*,old");
        assert_eq!(path_segment_keep_patterns("a b"), "a%20b");
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(path_segment("news-2024"), "news-2024");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
        assert_eq!(path_segment("文"), "%E6%96%87");
    }

    #[test]
    fn a_block_names_the_setting_that_lifts_it() {
        let write = "index [news-1] blocked by: [FORBIDDEN/8/index write (api)];";
        let e = blocked(403, "cluster_block_exception", write, Some("news")).unwrap();
        assert!(!e.is_transient());
        let text = e.to_string();
        assert!(
            text.contains("index `news-1` is blocked for writes"),
            "{text}"
        );
        assert!(
            text.contains(r#"`PUT /news-1/_settings {"index.blocks.write": false}`"#),
            "{text}"
        );
        assert!(text.contains("run the same command again"), "{text}");
        let lift = |reason: &str| match blocked(403, "cluster_block_exception", reason, Some("n")) {
            Some(EsError::Blocked { lift, .. }) => lift,
            other => panic!("{other:?}"),
        };
        assert!(
            lift("index [n] blocked by: [FORBIDDEN/5/index read-only (api)];")
                .contains(r#""index.blocks.read_only": false"#)
        );
        assert!(lift("blocked by: [FORBIDDEN/6/cluster read-only (api)];")
            .contains(r#""cluster.blocks.read_only": false"#));
        assert!(
            lift("index [n] blocked by: [FORBIDDEN/12/index read-only / allow delete (api)];")
                .contains("read_only_allow_delete")
        );
        // The flood stage answers 429: pushed back and retried, not a stop.
        assert!(blocked(
            429,
            "cluster_block_exception",
            "index [n] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block];",
            None
        )
        .is_none());
        assert!(blocked(403, "security_exception", "no", None).is_none());
        // A whole answer with the block is the same error, not refused credentials.
        let reply = Reply {
            status: StatusCode::FORBIDDEN,
            body: serde_json::json!({"error": {"type": "cluster_block_exception", "reason": write}, "status": 403}),
        };
        assert!(matches!(check("put", reply), Err(EsError::Blocked { .. })));
    }

    #[test]
    fn error_bodies() {
        let body = serde_json::json!({"error": {"type": "x", "reason": "y", "caused_by": {"reason": "z"}}});
        assert_eq!(
            error_type_reason(&body),
            ("x".into(), "y (caused by: z)".into())
        );
        let body = serde_json::json!({"error": {"type": "search_phase_execution_exception", "reason": "all shards failed",
            "root_cause": [{"type": "script_exception", "reason": "runtime error"}]}});
        assert_eq!(
            error_type_reason(&body).1,
            "all shards failed (root cause: script_exception: runtime error)"
        );
        // OpenSearch 3: the script error's type only in the top-level cause
        let body = serde_json::json!({"error": {"type": "search_phase_execution_exception", "reason": "all shards failed",
            "caused_by": {"type": "script_exception", "reason": "runtime error"}}});
        assert_eq!(
            error_type_reason(&body).1,
            "all shards failed (caused by: script_exception: runtime error)"
        );
        let body = serde_json::json!({"error": "Incorrect HTTP method"});
        assert_eq!(error_type_reason(&body).1, "Incorrect HTTP method");
    }
}

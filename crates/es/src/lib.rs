//! Elasticsearch: connection, the fingerprint fields' mapping, writing fingerprints next to
//! articles, and the worker that keeps an index's fingerprints current.
//!
//! - [`EsConfig`] says where the cluster is and how to log in; [`EsConfig::client`] builds the
//!   official [`Elasticsearch`] client from it.
//! - [`schema`]: the fields as data: names ([`FieldNames`], [`MinHashFieldNames`]), block type
//!   ([`BlockType`]), what `_meta` records ([`IndexMeta`]), the JSON mappings shipped in
//!   `mappings/`, and how values are encoded and decoded. No cluster calls.
//! - `init`: what talks to the cluster about the schema: [`init_index`] (`neardup es-init`),
//!   [`upgrade_index`] (`es-init --upgrade`),
//!   [`verify_index`], [`read_meta`], [`existing_profile`].
//! - `write`: [`EsIndexer`] indexes articles with their fingerprint and updates fingerprint
//!   fields in bulk, guarded by sequence numbers so a stale fingerprint never wins.
//! - `worker`: one pass of "find documents whose fingerprint is missing, outdated or older
//!   than their text, and write a fresh one".
//! - `similar`: the query path: [`Similar`] finds every document near a document, a text
//!   or a fingerprint, with the method the indices record in `_meta` ([`IndexMeta`]): MinHash
//!   above a similarity, or SimHash within Hamming distance k ≤ 7.
//! - `scan`: the one paging layer: every read of many hits (similar, worker, back-fill)
//!   goes through a [`Scanner`] (point in time + `search_after`, or scroll on clusters without
//!   PIT); a scroll page is never re-sent after a failure.
//! - `retry`: the backoff policy every request goes through ([`request`]).
//!
//! Every request is sent with plain `application/json` (the client's default; bulk bodies as
//! `application/x-ndjson`) and the client does not check the `X-Elastic-Product` header, so the
//! same code talks to Elasticsearch 7.10+ and 8.x. See `docs/elasticsearch.md`.

pub mod backfill;
mod claims;
mod dedupe;
pub mod group;
mod init;
mod nodes;
pub mod regroup;
mod retry;
mod scan;
pub mod schema;
mod similar;
mod tracking;
mod worker;
mod write;

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

pub use claims::{ClaimError, Claims, Held, RecentInsert};
pub use dedupe::{claim_keys, insert_unless_near, DedupeError, Inserted, NewArticle};
pub use init::{
    existing_profile, finish_layout_upgrade, init_index, read_each, read_meta, upgrade_index,
    verify_index, InitOutcome,
};
pub use retry::RetryPolicy;
pub use scan::{Cursor, Paging, ScanOptions, ScanStats, Scanner, Slice};
pub use schema::{
    tracking_pipeline, tracking_pipeline_name, BlockType, ContainmentFieldNames, ContainmentMeta,
    FieldNames, GroupMeta, GroupOrder, IndexMeta, MetaSource, MinHashFieldNames, MinHashLayout,
    MinHashMeta, SimHashMeta, TrackingMeta, TRACKING_MARKER,
};
pub use similar::{
    FilterMode, IndexList, Match, Near, QueryFingerprint, Similar, SimilarOptions, Similarity,
    DEFAULT_K, FLIPPED_BLOCK_K,
};
pub use tracking::{track_edits, untrack_edits, Tracking};
pub use worker::{stale_query, PassReport, Watermark, Worker, WorkerConfig};
pub use write::{
    fingerprint_fields_json, fingerprint_source, simhash_fields_json, sketch_source, BulkReport,
    EsIndexer, FingerprintUpdate, GroupLabel, IndexedArticle, ItemFailure, Refresh,
};

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

/// Everything talking to Elasticsearch can fail with. Messages say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EsError {
    #[error("{0}")]
    Config(String),

    #[error("CA certificate {}: {reason}; pass a PEM file with --es-ca-cert / NEARDUP_ES_CA_CERT", path.display())]
    CaCert { path: PathBuf, reason: String },

    #[error("cannot reach Elasticsearch ({detail}); check --es / NEARDUP_ES_URL and that the node is up (scripts/es-up starts a local one)")]
    Unreachable { detail: String },

    /// The certificate of an `https://` node was not trusted (signed by a CA this machine does
    /// not know, e.g. a cluster's own; expired; for another host). Not retried.
    #[error("the TLS connection to Elasticsearch failed: its certificate is not trusted ({detail}); a cluster whose certificate is signed by its own CA (as Elasticsearch's security setup makes) needs that CA: pass its PEM file with --es-ca-cert or NEARDUP_ES_CA_CERT (e.g. config/certs/http_ca.crt of the node)")]
    Tls { detail: String },

    /// A block on the index (or cluster) refuses every write (`index.blocks.write`,
    /// `index.blocks.read_only`, `cluster.blocks.read_only`: 403 `cluster_block_exception`):
    /// nothing written to it can succeed until it is lifted, so writers stop. The flood-stage
    /// block (`read_only_allow_delete`, 429) is transient instead: retried with backoff.
    #[error("index `{index}` is blocked for writes ({reason}); nothing more was sent. Lift the block with `{lift}` and run the same command again: it resumes where it stopped")]
    Blocked {
        index: String,
        reason: String,
        /// The request that lifts it.
        lift: String,
    },

    #[error("Elasticsearch refused the credentials (HTTP {status}: {reason}); check NEARDUP_ES_USER / NEARDUP_ES_PASSWORD or NEARDUP_ES_API_KEY and the user's privileges")]
    Unauthorized { status: u16, reason: String },

    #[error("index `{index}` does not exist; create it, or run `neardup es-init --index {index}` to create it with the fingerprint fields")]
    IndexNotFound { index: String },

    #[error("no index matches `{pattern}`; check --index (`GET _cat/indices` lists the indices)")]
    NoIndexMatches { pattern: String },

    #[error("index `{index}` has no mapping for the fingerprint fields {fields:?}; run `neardup es-init --index {index}` first (writing them unmapped would let Elasticsearch guess wrong types)")]
    NotInitialised { index: String, fields: Vec<String> },

    /// The index's field limit (`index.mapping.total_fields.limit`) leaves no room for the
    /// fingerprint fields `es-init` adds; nothing was added.
    #[error("index `{index}` cannot take the {fields} fingerprint fields: its field limit is reached ({reason}). Nothing was changed. Raise the limit with `PUT /{index}/_settings {{\"index.mapping.total_fields.limit\": {}}}` and run es-init again", room(.enough, .fields))]
    FieldLimit {
        index: String,
        fields: usize,
        reason: String,
        /// A limit with room for them, when the error said the current one.
        enough: Option<usize>,
    },

    #[error("index `{index}`: field `{field}` is already mapped as `{existing}`, but neardup needs `{wanted}`; {hint}")]
    MappingConflict {
        index: String,
        field: String,
        existing: String,
        wanted: String,
        hint: String,
    },

    #[error("{what}: HTTP {status} {error_type}: {reason}")]
    Status {
        what: String,
        status: u16,
        error_type: String,
        reason: String,
    },

    #[error("gave up after {attempts} attempts: {last}")]
    Exhausted { attempts: u32, last: Box<EsError> },

    /// A paged read lost its place: the scroll or point in time is gone, or a scroll page was
    /// lost in transit (never sent again: that would skip a page). Raised by [`scan::Cursor`];
    /// what reads again from a safe point depends on the caller.
    #[error("{what}: lost the scroll or point in time ({cause}); it expired (raise the keep-alive), its node restarted, or a scroll page was lost in transit. Start the read again")]
    ContextLost { what: String, cause: Box<EsError> },

    #[error("{what}: unexpected response from Elasticsearch: {detail}")]
    BadResponse { what: String, detail: String },

    #[error("document `{id}`: {reason}")]
    BadDocument { id: String, reason: String },

    #[error("no document with id `{id}` in `{index}`; check the id and --index (a document written less than a refresh interval ago, 1 s by default, is not searchable yet)")]
    DocumentNotFound { id: String, index: String },

    #[error("id `{id}` is in several indices ({}); pass just one of them with --index", indices.join(", "))]
    AmbiguousId { id: String, indices: Vec<String> },

    #[error(transparent)]
    BadText(#[from] neardup_core::input::BadTextField),

    #[error("index `{index}` holds {method} fingerprints of version `{stored}`, but this neardup computes `{computed}`: they are not comparable; re-run `neardup backfill` into a new index (es-init with the current version), or use the neardup release that wrote them")]
    VersionMismatch {
        index: String,
        method: neardup_core::Method,
        stored: String,
        computed: String,
    },

    #[error("index `{index}`: its `_meta.neardup` cannot be read: {detail}")]
    BadMeta { index: String, detail: String },

    #[error("the indices queried together hold no fingerprints in common ({}); query them separately, or es-init and back-fill them alike", indices.join("; "))]
    MetaMismatch { indices: Vec<String> },

    #[error("index `{index}` already holds {existing}, but {wanted} was asked for; {hint}")]
    MetaConflict {
        index: String,
        existing: String,
        wanted: String,
        hint: String,
    },

    /// The indices hold no fingerprints of the asked method; `held` is the one they hold.
    /// Worded without command-line flags: the CLI and the service each say how to ask.
    #[error("`{index}` holds {held} fingerprints only, not {asked}: ask by {held} (the index's default), or es-init it with both methods and back-fill it")]
    MethodNotHeld {
        index: String,
        held: neardup_core::Method,
        asked: neardup_core::Method,
    },

    #[error("k = {k} is too large: the four 16-bit block fields answer exactly for k ≤ 7 (a pair within 7 bits has a block within one bit); use -k 0..=7")]
    DistanceTooLarge { k: u32 },

    #[error("dedupe with SimHash needs k ≤ 3 (two fingerprints within 3 bits have an equal block to claim); got k = {k}")]
    DedupeDistance { k: u32 },
}

impl EsError {
    /// Whether trying again later may succeed (429, 5xx, connection errors).
    pub fn is_transient(&self) -> bool {
        match self {
            EsError::Unreachable { .. } => true,
            EsError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// The HTTP status of a server error, if it came with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            EsError::Status { status, .. } | EsError::Unauthorized { status, .. } => Some(*status),
            EsError::Blocked { .. } => Some(403),
            EsError::IndexNotFound { .. } => Some(404),
            EsError::Exhausted { last, .. } => last.status(),
            EsError::ContextLost { cause, .. } => cause.status(),
            _ => None,
        }
    }
}

/// The field limit to suggest in [`EsError::FieldLimit`]'s message.
fn room(enough: &Option<usize>, fields: &usize) -> String {
    enough.map_or_else(
        || format!("<the fields it has + {fields}>"),
        |n| n.to_string(),
    )
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

/// [`EsError::Blocked`] when an error (a whole answer's or one bulk item's) is a block that
/// refuses every write: 403 `cluster_block_exception`. `index` names the index written to
/// when the reason does not (`index [news] blocked by: [FORBIDDEN/8/index write (api)];`).
/// The flood-stage block answers 429 and is not one: it is retried.
pub(crate) fn blocked(
    status: u16,
    error_type: &str,
    reason: &str,
    index: Option<&str>,
) -> Option<EsError> {
    if status != 403 || error_type != "cluster_block_exception" {
        return None;
    }
    let named = reason
        .split_once("index [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(name, _)| name.to_owned());
    let index = named
        .or(index.map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    let setting = |s: &str| format!(r#"PUT /{index}/_settings {{"{s}": false}}"#);
    let lift = if reason.contains("cluster read-only / allow delete") {
        r#"PUT /_cluster/settings {"persistent": {"cluster.blocks.read_only_allow_delete": false}}"#
            .to_owned()
    } else if reason.contains("cluster read-only") {
        r#"PUT /_cluster/settings {"persistent": {"cluster.blocks.read_only": false}}"#.to_owned()
    } else if reason.contains("allow delete") {
        setting("index.blocks.read_only_allow_delete")
    } else if reason.contains("index read-only") {
        setting("index.blocks.read_only")
    } else if reason.contains("index write") {
        setting("index.blocks.write")
    } else {
        format!("PUT /{index}/_settings with the index.blocks.* setting it names set to false (GET /{index}/_settings lists them)")
    };
    Some(EsError::Blocked {
        index,
        reason: format!("HTTP 403 {error_type}: {reason}"),
        lift,
    })
}

/// `(type, reason)` of an Elasticsearch error body (`{"error": {"type", "reason"}}`, or the
/// plain `{"error": "..."}` some endpoints return).
pub fn error_type_reason(body: &Value) -> (String, String) {
    let err = &body["error"];
    match err {
        Value::Object(_) => {
            let ty = err["type"].as_str().unwrap_or("error").to_owned();
            let mut reason = err["reason"].as_str().unwrap_or("").to_owned();
            let cause = &err["caused_by"];
            if let Some(cause_reason) = cause["reason"].as_str() {
                // OpenSearch and newer Elasticsearch name a search's real error (e.g.
                // `script_exception`) only in the cause's type.
                reason = match cause["type"]
                    .as_str()
                    .filter(|t| Some(*t) != err["type"].as_str())
                {
                    Some(cause_type) => {
                        format!("{reason} (caused by: {cause_type}: {cause_reason})")
                    }
                    None => format!("{reason} (caused by: {cause_reason})"),
                };
            } else if let Some(root) = err["root_cause"]
                .get(0)
                .filter(|r| r["type"] != err["type"])
            {
                // Search failures ("all shards failed") carry the real error only here.
                reason = format!(
                    "{reason} (root cause: {}: {})",
                    root["type"].as_str().unwrap_or("error"),
                    root["reason"].as_str().unwrap_or("")
                );
            }
            (ty, reason)
        }
        Value::String(s) => ("error".into(), s.clone()),
        _ => ("error".into(), truncate(&body.to_string(), 300)),
    }
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

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

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

// The Rust examples of the documentation (docs/how-to/write-from-an-article-service.md,
// docs/how-to/find-near-duplicates.md) name the library as its users do, `neardup::es::…`, so
// they are doctested in the `neardup` crate (src/lib.rs), which re-exports this one as `es`.

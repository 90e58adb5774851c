//! `neardup serve`: the HTTP service an article API calls (feature `serve`).
//!
//! Built on axum (tokio's own HTTP framework, on hyper; the tower middleware it shares with
//! the rest of the tokio ecosystem gives the body limit, timeout and load shedding), with
//! Prometheus metrics from the `prometheus` crate. The binary's `serve` subcommand only parses
//! flags and calls [`run`].
//!
//! Production manners, all in [`Service::router`]:
//! - every body is limited to [`ServeConfig::body_limit`] bytes (413 beyond),
//! - every request to `/v1/…` has [`ServeConfig::timeout`] to finish (504 after it),
//! - at most [`ServeConfig::concurrency`] requests to `/v1/…` run at once; more are refused
//!   at once with 503 and `Retry-After: 1` rather than queued (a caller's retry is cheaper
//!   than a queue that grows until every request times out),
//! - `/v1/…` needs `Authorization: Bearer <token>` when a token is configured (401 without),
//! - one log line per request (method, route template, status, milliseconds; never headers,
//!   bodies or the token), JSON when the CLI is asked for JSON logs,
//! - [`run`] stops accepting on shutdown and lets requests in flight finish.
//!
//! Errors are JSON: `{"error": {"code": "not_found", "message": "…"}}`.

mod error;
mod metrics;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use elasticsearch::Elasticsearch;
use serde::Deserialize;
use serde_json::{json, Value};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::ServiceBuilder;

pub use self::error::ApiError;
pub use self::metrics::Metrics;
use crate::es::claims::{ClaimError, Claims};
use crate::es::meta::band_term;
use crate::es::{
    self, EsError, EsIndexer, FieldNames, IndexMeta, QueryFingerprint, Refresh, RetryPolicy,
    Secret, Similar, SimilarOptions, Similarity,
};
use crate::fingerprint::{FingerprintRecord, Methods};
use crate::input::field_texts;
use crate::{Fingerprinter, Sketch, Tolerance};

/// The review page served at `/`.
pub const PAGE: &str = include_str!("page.html");

/// The OpenAPI description served at `/v1/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Limits and settings of the service.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Time a `/v1/…` request has to finish.
    pub timeout: Duration,
    /// `/v1/…` requests answered at once; more get 503.
    pub concurrency: usize,
    /// Bearer token required on `/v1/…`, if any.
    pub token: Option<Secret>,
    /// Article fields fingerprinted, in order (dotted paths allowed).
    pub text_fields: Vec<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            body_limit: 2 * 1024 * 1024,
            timeout: Duration::from_secs(10),
            concurrency: 64,
            token: None,
            text_fields: vec!["title".into(), "content".into()],
        }
    }
}

/// The Elasticsearch cluster the service answers from.
#[derive(Clone, Debug)]
pub struct EsBackend {
    pub client: Elasticsearch,
    pub retry: RetryPolicy,
}

/// The service: its settings, backend and metrics. Build one, then [`Service::router`].
pub struct Service {
    config: ServeConfig,
    es: EsBackend,
    fingerprinter: Fingerprinter,
    /// The one query function: it remembers what each index holds.
    similar: Similar,
    /// Writers (read `_meta` once per index) and claims, per index written to.
    writers: Mutex<HashMap<String, Arc<Writer>>>,
    metrics: Metrics,
}

/// What `PUT /v1/{index}/articles/{id}` writes with.
struct Writer {
    indexer: EsIndexer,
    claims: Claims,
}

impl Service {
    /// A service answering from `es`; `fingerprinter` serves `POST /v1/fingerprint`.
    pub fn new(config: ServeConfig, es: EsBackend, fingerprinter: Fingerprinter) -> Service {
        let similar = Similar::with_options(
            es.client.clone(),
            None,
            SimilarOptions {
                text_fields: config.text_fields.clone(),
                ..SimilarOptions::default()
            },
            es.retry.clone(),
        );
        Service {
            config,
            es,
            fingerprinter,
            similar,
            writers: Mutex::new(HashMap::new()),
            metrics: Metrics::new(),
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Every route with its middleware.
    pub fn router(self: Arc<Self>) -> Router {
        // One semaphore for every `/v1` route: `Router::layer` wraps each route on its own.
        let limits = ServiceBuilder::new()
            .layer(HandleErrorLayer::new(overloaded_or_timed_out))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(
                self.config.concurrency.max(1),
            ))
            .timeout(self.config.timeout);
        let v1 = Router::new()
            .route("/v1/fingerprint", post(fingerprint))
            .route("/v1/{index}/similar/{id}", get(similar_by_id))
            .route("/v1/{index}/similar", post(similar_by_article))
            .route("/v1/{index}/articles/{id}", get(article).put(put_article))
            .route("/v1/openapi.json", get(openapi))
            .layer(middleware::from_fn_with_state(self.clone(), authorise))
            .layer(limits);
        Router::new()
            .merge(v1)
            .route("/", get(page))
            .route("/healthz", get(healthz))
            .route("/metrics", get(metrics_text))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(self.config.body_limit))
            .layer(middleware::from_fn_with_state(self.clone(), track))
            .with_state(self)
    }

    /// An Elasticsearch error as an answer; failures of the cluster itself are counted.
    fn es_failed(&self, e: EsError) -> ApiError {
        if e.is_transient() || matches!(e.status(), Some(s) if s >= 500) {
            self.metrics.es_error(&e);
        }
        ApiError::from(e)
    }

    /// The writer of `index`: its `EsIndexer` (what `_meta` says it holds, writes visible
    /// before they return) and its claims (index created on first use).
    async fn writer(&self, index: &str) -> Result<Arc<Writer>, ApiError> {
        if let Some(w) = self.writers.lock().expect("lock").get(index) {
            return Ok(w.clone());
        }
        let indexer = EsIndexer::open(
            self.es.client.clone(),
            index,
            self.es.retry.clone(),
            &FieldNames::default(),
        )
        .await
        .map_err(|e| self.es_failed(e))?
        .with_refresh(Refresh::WaitFor);
        let mut claims = Claims::new(self.es.client.clone(), self.es.retry.clone(), index);
        // A holder finishes within its request's time (the claims' own deadline) plus its
        // writes; the lease is well beyond that.
        claims.lease = (self.config.timeout * 3).max(Duration::from_secs(30));
        claims.ensure_index().await.map_err(|e| self.es_failed(e))?;
        let w = Arc::new(Writer { indexer, claims });
        self.writers
            .lock()
            .expect("lock")
            .insert(index.to_owned(), w.clone());
        Ok(w)
    }

    /// Stores `article` as `id` with `w` unless something near `sketch` is stored: claims the keys a
    /// near-duplicate must share with it, searches, writes (visible before it returns), then
    /// releases the claims. See [`crate::es::claims`] for why this is race-free.
    async fn insert_unless_near(
        &self,
        w: &Writer,
        id: &str,
        article: &Value,
        sketches: &crate::Sketches,
        sketch: Sketch,
        tolerance: Tolerance,
    ) -> Result<Response, ApiError> {
        let index = w.indexer.index();
        let keys = claim_keys(&sketch, w.indexer.meta())?;
        let holder = format!("{id} (pid {})", std::process::id());
        let deadline = Instant::now() + self.config.timeout;
        let held = w
            .claims
            .acquire(&keys, &holder, deadline)
            .await
            .map_err(|e| match e {
                ClaimError::Timeout { .. } => ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "busy",
                    format!("{e}: another insert of a near-duplicate is in progress"),
                ),
                ClaimError::Es(e) => self.es_failed(e),
            })?;
        let outcome = async {
            let found = self
                .similar
                .by_fingerprint(index, sketch, tolerance)
                .await
                .map_err(|e| self.es_failed(e))?;
            let matches: Vec<_> = found.matches.into_iter().filter(|m| m.id != id).collect();
            if !matches.is_empty() {
                let mut e = ApiError::new(
                    StatusCode::CONFLICT,
                    "duplicate",
                    format!(
                        "not stored: {} near-duplicate(s) of this article are stored already",
                        matches.len()
                    ),
                );
                e.extra = Some(json!({ "matches": matches }));
                return Err(e);
            }
            let r = w
                .indexer
                .index_article(Some(id), article, sketches)
                .await
                .map_err(|e| self.es_failed(e))?;
            Ok(stored(index, &r))
        }
        .await;
        w.claims.release(held).await;
        outcome
    }

    /// The texts of an article posted to the service, by the one document-to-text rule.
    fn article_texts<'a>(&self, article: &'a Value) -> Result<Vec<&'a str>, ApiError> {
        if !article.is_object() {
            return Err(ApiError::bad_request(
                "the body must be a JSON object with the article's text fields (e.g. {\"title\": …, \"content\": …})",
            ));
        }
        field_texts(article, &self.config.text_fields)
            .map_err(|e| ApiError::unprocessable(e.to_string()))
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then waits for the requests in
/// flight to finish.
pub async fn run(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: no new connections; waiting for the requests in flight");
}

/// Counts, times and logs every request.
async fn track(State(svc): State<Arc<Service>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let m = &svc.metrics;
    m.in_flight.inc();
    let started = Instant::now();
    let response = next.run(req).await;
    let elapsed = started.elapsed();
    m.in_flight.dec();
    let status = response.status().as_u16().to_string();
    m.requests
        .with_label_values(&[route.as_str(), method.as_str(), status.as_str()])
        .inc();
    m.latency
        .with_label_values(&[route.as_str()])
        .observe(elapsed.as_secs_f64());
    tracing::info!(
        target: "neardup::serve::access",
        method = %method,
        route = %route,
        status = %status,
        ms = elapsed.as_secs_f64() * 1e3,
        "request"
    );
    response
}

/// `Authorization: Bearer <token>` on `/v1/…` when a token is configured.
async fn authorise(State(svc): State<Arc<Service>>, req: Request, next: Next) -> Response {
    if let Some(token) = &svc.config.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.expose().as_bytes())) {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this service needs `Authorization: Bearer <token>` (the token in the file given to --token-file)",
            )
            .into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

/// Compares without stopping at the first difference, so the time taken does not tell how
/// much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn overloaded_or_timed_out(e: tower::BoxError) -> Response {
    if e.is::<tower::load_shed::error::Overloaded>() {
        let mut r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "too many requests at once; retry shortly",
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    } else if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took longer than the service's --timeout",
        )
        .into_response()
    } else {
        ApiError::internal(e.to_string()).into_response()
    }
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint; GET /v1/openapi.json lists them",
    )
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn metrics_text(State(svc): State<Arc<Service>>) -> impl IntoResponse {
    let (content_type, body) = svc.metrics.render();
    ([(header::CONTENT_TYPE, content_type)], body)
}

/// 200 with the cluster's version when Elasticsearch answers, else 503.
async fn healthz(State(svc): State<Arc<Service>>) -> Response {
    let probe = tokio::time::timeout(
        Duration::from_secs(2),
        es::server_version(&svc.es.client, &RetryPolicy::none()),
    )
    .await;
    match probe {
        Ok(Ok(version)) => Json(json!({ "status": "ok", "elasticsearch": version })).into_response(),
        Ok(Err(e)) => {
            svc.metrics.es_error(&e);
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "error": e.to_string() })),
            )
                .into_response()
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "error": "Elasticsearch did not answer within 2 s" })),
        )
            .into_response(),
    }
}

/// `POST /v1/fingerprint`: what `neardup fingerprint` prints for the article.
async fn fingerprint(
    State(svc): State<Arc<Service>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<FingerprintRecord>, ApiError> {
    let Json(article) = body.map_err(ApiError::from)?;
    let texts: Vec<String> = svc
        .article_texts(&article)?
        .into_iter()
        .map(str::to_owned)
        .collect();
    let id = article.get("id").cloned().unwrap_or(Value::Null);
    let svc2 = svc.clone();
    let sketches = tokio::task::spawn_blocking(move || {
        svc2.fingerprinter.sketch_fields(Methods::BOTH, &texts)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(FingerprintRecord::new(id, &sketches)))
}

async fn page() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE)
}

/// `?threshold=T` (MinHash) or `?k=N` (SimHash); neither: what the index holds, at its
/// default.
#[derive(Debug, Default, Deserialize)]
struct Near {
    threshold: Option<f64>,
    k: Option<u32>,
}

impl Near {
    async fn tolerance(&self, svc: &Service, index: &str) -> Result<Tolerance, ApiError> {
        match (self.threshold, self.k) {
            (Some(_), Some(_)) => Err(ApiError::bad_request(
                "give `threshold` (MinHash) or `k` (SimHash), not both",
            )),
            (Some(t), None) if !(t > 0.0 && t <= 1.0) => Err(ApiError::bad_request(format!(
                "threshold {t} is out of range: use 0 < threshold ≤ 1"
            ))),
            (Some(t), None) => Ok(Tolerance::Similarity(t)),
            (None, Some(k)) => Ok(Tolerance::Distance(k)),
            (None, None) => svc
                .similar
                .default_tolerance(index)
                .await
                .map_err(|e| svc.es_failed(e)),
        }
    }
}

/// The answer of both similar endpoints: the matches (`{"id", "index", "similarity"}` or
/// `{"id", "index", "distance"}`), what counted as near, and where the query came from.
fn answer(found: &Similarity) -> Value {
    let (query, reason) = match &found.query {
        QueryFingerprint::Stored(_) => ("stored", None),
        QueryFingerprint::Computed(_) | QueryFingerprint::Given(_) => ("computed", None),
        QueryFingerprint::TooShort(why) => ("too_short", Some(why.to_string())),
    };
    let mut v = json!({
        "matches": found.matches,
        "method": found.tolerance.method(),
        "query": query,
        "candidates": found.transferred,
    });
    match found.tolerance {
        Tolerance::Similarity(t) => v["threshold"] = json!(t),
        Tolerance::Distance(k) => v["max_distance"] = json!(k),
    }
    if let Some(r) = reason {
        v["reason"] = json!(r);
    }
    v
}

/// `GET /v1/{index}/similar/{id}`: what `neardup similar --es … --index {index} --id {id}`
/// finds.
async fn similar_by_id(
    State(svc): State<Arc<Service>>,
    Path((index, id)): Path<(String, String)>,
    Query(near): Query<Near>,
) -> Result<Json<Value>, ApiError> {
    let tolerance = near.tolerance(&svc, &index).await?;
    let found = svc
        .similar
        .by_id(index.as_str(), &id, tolerance)
        .await
        .map_err(|e| svc.es_failed(e))?;
    Ok(Json(answer(&found)))
}

/// `POST /v1/{index}/similar` with an article: its near-duplicates in the index.
async fn similar_by_article(
    State(svc): State<Arc<Service>>,
    Path(index): Path<String>,
    Query(near): Query<Near>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(article) = body.map_err(ApiError::from)?;
    svc.article_texts(&article)?;
    let tolerance = near.tolerance(&svc, &index).await?;
    let found = svc
        .similar
        .by_article(index.as_str(), &article, tolerance)
        .await
        .map_err(|e| svc.es_failed(e))?;
    Ok(Json(answer(&found)))
}

/// `GET /v1/{index}/articles/{id}`: the article's text fields (for the review page).
async fn article(
    State(svc): State<Arc<Service>>,
    Path((index, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let fields: Vec<&str> = svc.config.text_fields.iter().map(String::as_str).collect();
    let hit = svc
        .similar
        .find_document(&index.as_str().into(), &id, &fields)
        .await
        .map_err(|e| svc.es_failed(e))?;
    Ok(Json(json!({
        "id": hit["_id"],
        "index": hit["_index"],
        "article": hit["_source"],
    })))
}

/// The keys two near-duplicates must share, to claim before a dedupe insert: the LSH band
/// terms of a MinHash signature; the four block values of a SimHash (k ≤ 3: two fingerprints
/// within distance 3 have an equal block).
fn claim_keys(sketch: &Sketch, meta: &IndexMeta) -> Result<Vec<String>, ApiError> {
    Ok(match sketch {
        Sketch::MinHash(sig) => {
            let params =
                meta.minhash.as_ref().map(|m| m.params).ok_or_else(|| {
                    ApiError::bad_request("the index holds no MinHash fingerprints")
                })?;
            sig.band_keys(&params)
                .into_iter()
                .map(|k| format!("m{}", band_term(k)))
                .collect()
        }
        Sketch::SimHash(f) => f
            .blocks16()
            .iter()
            .enumerate()
            .map(|(i, b)| format!("s{i}:{b}"))
            .collect(),
    })
}

fn stored(index: &str, r: &es::IndexedArticle) -> Response {
    let status = if r.result == "created" {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (
        status,
        Json(json!({ "id": r.id, "index": index, "result": r.result })),
    )
        .into_response()
}

/// `?dedupe=true` and the tolerance of the duplicate check.
#[derive(Debug, Default, Deserialize)]
struct PutParams {
    #[serde(default)]
    dedupe: bool,
    threshold: Option<f64>,
    k: Option<u32>,
}

/// `PUT /v1/{index}/articles/{id}`: stores the article with its fingerprint fields (201
/// created, 200 replaced), visible to search when the answer comes. With `?dedupe=true`,
/// only unless a near-duplicate is stored: 409 with the matches.
async fn put_article(
    State(svc): State<Arc<Service>>,
    Path((index, id)): Path<(String, String)>,
    Query(p): Query<PutParams>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(article) = body.map_err(ApiError::from)?;
    svc.article_texts(&article)?;
    let w = svc.writer(&index).await?;
    let article = Arc::new(article);
    let sketches = {
        let (w, article, fields) = (w.clone(), article.clone(), svc.config.text_fields.clone());
        tokio::task::spawn_blocking(move || w.indexer.sketch(&article, &fields))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map_err(|e| ApiError::unprocessable(e.to_string()))?
    };
    if !p.dedupe {
        let r = w
            .indexer
            .index_article(Some(&id), &article, &sketches)
            .await
            .map_err(|e| svc.es_failed(e))?;
        return Ok(stored(&index, &r));
    }
    let near = Near {
        threshold: p.threshold,
        k: p.k,
    };
    let tolerance = near.tolerance(&svc, &index).await?;
    if let Tolerance::Distance(k) = tolerance {
        if k > 3 {
            return Err(ApiError::bad_request(format!(
                "dedupe with SimHash needs k ≤ 3 (an equal block to claim); got k = {k}"
            )));
        }
    }
    let method = tolerance.method();
    if !w.indexer.meta().has(method) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "index_not_usable",
            format!(
                "index `{index}` holds no {method} fingerprints ({})",
                w.indexer.meta()
            ),
        ));
    }
    let Ok(sketch) = sketches.clone().into_sketch(method) else {
        // Too short to fingerprint: nothing can be near it.
        let r = w
            .indexer
            .index_article(Some(&id), &article, &sketches)
            .await
            .map_err(|e| svc.es_failed(e))?;
        return Ok(stored(&index, &r));
    };
    // In a task of its own: a request that times out must not leave its claims behind
    // mid-way, so the insert runs to its end (and releases) whatever happens to the answer.
    let task = {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.insert_unless_near(&w, &id, &article, &sketches, sketch, tolerance)
                .await
        })
    };
    task.await.map_err(|e| ApiError::internal(e.to_string()))?
}

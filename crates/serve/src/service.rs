//! The service: its routes, the middleware every request goes through, and the handlers that
//! answer from the backend ([`Backend`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::ServiceBuilder;

use crate::config::ServeConfig;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::Metrics;
use crate::on_es::EsBackend;
use crate::on_es::EsSide;
use crate::on_store::StoreBackend;
use crate::shapes::{answer, WriteOptions};
use neardup_core::fingerprint::{FingerprintRecord, Methods};
use neardup_core::input::field_texts;
use neardup_core::minhash::Threshold;
use neardup_core::relation::MatchOptions;
use neardup_core::{Fingerprinter, Tolerance};
use neardup_es::Refresh;

/// The review page served at `/`.
pub const PAGE: &str = include_str!("page.html");

/// The OpenAPI description served at `/v1/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Where the service answers from.
#[derive(Clone, Debug)]
pub enum Backend {
    /// An Elasticsearch cluster: any index on it, by name.
    Es(EsBackend),
    /// A local store, as one index.
    Store(StoreBackend),
}

impl From<EsBackend> for Backend {
    fn from(b: EsBackend) -> Backend {
        Backend::Es(b)
    }
}

impl From<StoreBackend> for Backend {
    fn from(b: StoreBackend) -> Backend {
        Backend::Store(b)
    }
}

/// The service: its settings, backend and metrics. Build one, then [`Service::router`].
pub struct Service {
    config: ServeConfig,
    side: Side,
    fingerprinter: Fingerprinter,
    metrics: Arc<Metrics>,
}

/// The backend with what the service keeps for it.
enum Side {
    Es(Arc<EsSide>),
    Store(StoreBackend),
}

impl Service {
    /// A service answering from `backend`; `fingerprinter` serves `POST /v1/fingerprint`
    /// (and, with a store, makes the store's sketches).
    pub fn new(
        config: ServeConfig,
        backend: impl Into<Backend>,
        fingerprinter: Fingerprinter,
    ) -> Service {
        let side = match backend.into() {
            Backend::Es(es) => Side::Es(Arc::new(EsSide::new(es, &config))),
            Backend::Store(store) => Side::Store(store),
        };
        Service {
            config,
            side,
            fingerprinter,
            metrics: Arc::new(Metrics::new()),
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
            .route("/v1/{index}/articles/_bulk", post(bulk_articles))
            .route("/v1/openapi.json", get(openapi))
            .layer(middleware::from_fn_with_state(self.clone(), authorise))
            .layer(limits);
        Router::new()
            .merge(v1)
            .route("/", get(page))
            .route("/healthz", get(healthz))
            .route("/metrics", get(metrics_text))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(self.config.body_limit))
            .layer(middleware::from_fn_with_state(self.clone(), track))
            .with_state(self)
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

    /// [`Service::article_texts`], owned (for work on another thread).
    fn owned_texts(&self, article: &Value) -> Result<Vec<String>, ApiError> {
        Ok(self
            .article_texts(article)?
            .into_iter()
            .map(str::to_owned)
            .collect())
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
                ErrorCode::Unauthorized,
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
            ErrorCode::Overloaded,
            "too many requests at once; retry shortly",
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    } else if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::Timeout,
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
        ErrorCode::NotFound,
        "no such endpoint; GET /v1/openapi.json lists them",
    )
}

/// 405 as JSON, like every other error (axum adds the `Allow` header).
async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "this endpoint does not take that method: the Allow header lists those it takes, GET /v1/openapi.json describes them",
    )
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn metrics_text(State(svc): State<Arc<Service>>) -> impl IntoResponse {
    let (content_type, body) = svc.metrics.render();
    ([(header::CONTENT_TYPE, content_type)], body)
}

/// 200 when the backend answers (Elasticsearch's version, or the store's size), else 503.
async fn healthz(State(svc): State<Arc<Service>>) -> Response {
    match &svc.side {
        Side::Es(es) => es.health(&svc.metrics).await,
        Side::Store(st) => st.health().await,
    }
}

/// `POST /v1/fingerprint`: what `neardup fingerprint` prints for the article.
async fn fingerprint(
    State(svc): State<Arc<Service>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<FingerprintRecord>, ApiError> {
    let Json(article) = body?;
    let texts = svc.owned_texts(&article)?;
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
/// default. `?containment=false`: near-duplicates only (the CLI's `--no-containment`).
#[derive(Debug, Default, Deserialize)]
struct Near {
    threshold: Option<f64>,
    k: Option<u32>,
    containment: Option<bool>,
    /// `align=true`: the texts decide (Elasticsearch).
    align: Option<bool>,
}

impl Near {
    /// Whether `?align=true` asks the texts to decide; it takes no tolerance or relations of
    /// its own, and only Elasticsearch has the texts.
    fn aligned(&self) -> Result<bool, ApiError> {
        if self.align != Some(true) {
            return Ok(false);
        }
        if self.threshold.is_some() || self.k.is_some() || self.containment.is_some() {
            return Err(ApiError::bad_request(
                "`align=true` decides by the texts (MinHash finds candidates down to 0.1): leave out `threshold`, `k` and `containment`",
            ));
        }
        Ok(true)
    }

    /// The relations asked for: partial copies too unless `containment=false`.
    fn options(&self) -> MatchOptions {
        MatchOptions::with_containment(self.containment.unwrap_or(true))
    }

    /// The tolerance asked for, if any.
    fn given(&self) -> Result<Option<Tolerance>, ApiError> {
        if self.threshold.is_some() && self.k.is_some() {
            return Err(ApiError::bad_request(
                "give `threshold` (MinHash) or `k` (SimHash), not both",
            ));
        }
        // `k` out of range is refused here, where the method's range is known, not where the
        // tolerance is used: a PUT without `dedupe` uses none and would pass it unchecked.
        if let Some(k) = self.k.filter(|&k| k > neardup_core::simhash::MAX_K) {
            let e = neardup_core::Error::UnsupportedDistance {
                k,
                max: neardup_core::simhash::MAX_K,
            };
            return Err(ApiError::bad_request(format!(
                "{e}: `k` is a whole number 0–7 (SimHash); or give `threshold` (MinHash)"
            )));
        }
        let threshold = self
            .threshold
            .map(Threshold::new)
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Tolerance::asked(self.k, threshold).map_err(|e| ApiError::bad_request(e.to_string()))
    }
}

/// `GET /v1/{index}/similar/{id}`: what `neardup similar … --id {id}` finds.
async fn similar_by_id(
    State(svc): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    near: Result<Query<Near>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path((index, id)) = path?;
    let Query(near) = near?;
    let (given, options) = (near.given()?, near.options());
    let aligned = near.aligned()?;
    let found = match &svc.side {
        Side::Es(es) if aligned => es.similar_aligned(&svc.metrics, &index, &id).await?,
        Side::Store(_) if aligned => return Err(no_texts_in_store()),
        Side::Es(es) => {
            es.similar_by_id(&svc.metrics, &index, &id, given, options)
                .await?
        }
        Side::Store(st) => st.similar_by_id(&index, id, given, options).await?,
    };
    Ok(Json(answer(&found)))
}

/// `align=true` on a store, which keeps no texts.
fn no_texts_in_store() -> ApiError {
    ApiError::bad_request(
        "`align=true` reads the texts of the matches, and a local store keeps none: align on an Elasticsearch index",
    )
}

/// `POST /v1/{index}/similar` with an article: its near-duplicates in the index (on a store,
/// also the articles it contains or is contained in, each with its relation).
async fn similar_by_article(
    State(svc): State<Arc<Service>>,
    path: Result<Path<String>, PathRejection>,
    near: Result<Query<Near>, QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(index) = path?;
    let Query(near) = near?;
    let (given, options) = (near.given()?, near.options());
    let Json(article) = body?;
    let aligned = near.aligned()?;
    let found = match &svc.side {
        Side::Store(_) if aligned => return Err(no_texts_in_store()),
        Side::Es(es) => {
            svc.article_texts(&article)?;
            if aligned {
                es.similar_aligned_by_article(&svc.metrics, &index, &article)
                    .await?
            } else {
                es.similar_by_article(&svc.metrics, &index, &article, given, options)
                    .await?
            }
        }
        Side::Store(st) => {
            let texts = svc.owned_texts(&article)?;
            st.similar_by_text(&index, texts, given, options).await?
        }
    };
    Ok(Json(answer(&found)))
}

/// `GET /v1/{index}/articles/{id}`: the article's text fields (for the review page).
async fn article(
    State(svc): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path((index, id)) = path?;
    let found = match &svc.side {
        Side::Es(es) => {
            es.article(&svc.metrics, &index, &id, &svc.config.text_fields)
                .await?
        }
        Side::Store(st) => st.article(&index, id).await?,
    };
    Ok(Json(found))
}

/// Articles one `_bulk` request takes at most: a batch holds every key of its articles
/// while it is searched and written, so larger batches hold up other writers longer.
pub const MAX_BULK_ARTICLES: usize = 1000;

/// `POST /v1/{index}/articles/_bulk`: JSON Lines, one article per line with its `id` (a
/// string), or with `Content-Type: application/json` one object `{"articles": [...]}` (for
/// clients that cannot send JSON Lines); the same query string as `PUT`. Answers 200 with one
/// item per article, in order: `{"id", "status", "result"}` when written,
/// `{"id", "status", "error", "relation"?, "matches"?}` when not (409 a near-duplicate, or an
/// article contained in a stored one, with `dedupe=true`; 400 an unreadable item, 422 an
/// article that cannot be used); `errors` says whether any item failed.
async fn bulk_articles(
    State(svc): State<Arc<Service>>,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<PutParams>, QueryRejection>,
    headers: axum::http::HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let Path(index) = path?;
    let Query(p) = params?;
    let opts = p.options()?;
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::TooLarge,
                "the body is larger than the service's --max-body: send smaller batches",
            )
        } else {
            ApiError::bad_request(format!("the body cannot be read: {}", r.body_text()))
        }
    })?;
    let started = std::time::Instant::now();
    let form = BulkBody::of(&headers);
    let lines = form.items(&body)?;
    if form == BulkBody::Json {
        // A typed body is refused whole when an article's text fields are not what the
        // description says (422, naming the article), as it is when an item has no `id`.
        for (i, (_, a)) in lines.iter().enumerate() {
            if let Ok(a) = a {
                svc.article_texts(a).map_err(|e| {
                    ApiError::new(e.status, e.code, format!("articles[{i}]: {}", e.message))
                })?;
            }
        }
    }
    let ids: Vec<String> = lines.iter().map(|(id, _)| id.clone()).collect();
    let answers = match &svc.side {
        Side::Es(es) => {
            let articles = lines
                .into_iter()
                .map(|(id, a)| {
                    let a = a.and_then(|a| {
                        svc.article_texts(&a)?;
                        Ok(a)
                    });
                    (id, a)
                })
                .collect();
            es.clone()
                .bulk(svc.metrics.clone(), index.clone(), articles, opts)
                .await?
        }
        Side::Store(st) => {
            let articles = lines
                .into_iter()
                .map(|(id, a)| (id, a.and_then(|a| svc.owned_texts(&a))))
                .collect::<Vec<_>>();
            st.write(&index, articles, opts).await?
        }
    };
    let mut errors = false;
    let items: Vec<Value> = ids
        .into_iter()
        .zip(answers)
        .map(|(id, answer)| match answer {
            Ok(created) => {
                let (status, result) = if created {
                    (201, "created")
                } else {
                    (200, "updated")
                };
                json!({ "id": id, "index": index, "status": status, "result": result })
            }
            Err(e) => {
                errors = true;
                let status = e.status.as_u16();
                let mut item = e.body();
                if !id.is_empty() {
                    item["id"] = json!(id);
                }
                item["status"] = json!(status);
                item
            }
        })
        .collect();
    Ok(Json(json!({
        "took_ms": started.elapsed().as_millis() as u64,
        "errors": errors,
        "items": items,
    }))
    .into_response())
}

/// One item of a `_bulk` body: its id (empty when unreadable) and the article, or why it is
/// not one.
type BulkLine = (String, Result<Value, ApiError>);

/// The two forms a `_bulk` body takes, told apart by its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BulkBody {
    /// JSON Lines, one article per line (`application/x-ndjson`, and any type but JSON): each
    /// line is read on its own, and one that is not an article is answered on its own.
    Lines,
    /// `{"articles": [...]}` (`application/json`), for typed clients: read whole, so a body
    /// the description refuses (an item without its `id`, a text field of another type) is
    /// refused whole, and nothing of it is written.
    Json,
}

impl BulkBody {
    fn of(headers: &axum::http::HeaderMap) -> BulkBody {
        let essence = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        match essence.as_deref() {
            Some("application/json") => BulkBody::Json,
            _ => BulkBody::Lines,
        }
    }

    /// The articles of a body as `(id, article)`, in order. A line that is not a JSON object
    /// with a non-empty string `id` is answered 400 on its own (its id empty: its item has
    /// none); such an item of `articles` is 400 for the request. No article at all, or more
    /// than [`MAX_BULK_ARTICLES`], is 400 for the request.
    fn items(self, body: &[u8]) -> Result<Vec<BulkLine>, ApiError> {
        let items: Vec<BulkLine> = match self {
            BulkBody::Lines => body
                .split(|&b| b == b'\n')
                .enumerate()
                .filter(|(_, l)| !l.trim_ascii().is_empty())
                .map(|(n, l)| {
                    let line = n + 1;
                    match serde_json::from_slice::<Value>(l) {
                        Ok(v) => Self::article(format!("line {line}"), v),
                        Err(e) => (
                            String::new(),
                            Err(ApiError::bad_request(format!(
                                "line {line} is not JSON ({e}): send one article per line, a JSON object with its `id`"
                            ))),
                        ),
                    }
                })
                .collect(),
            BulkBody::Json => {
                let mut body = serde_json::from_slice::<Value>(body).map_err(|e| {
                    ApiError::bad_request(format!(
                        "the body is not JSON ({e}): send {{\"articles\": [...]}}, or JSON Lines with Content-Type: application/x-ndjson"
                    ))
                })?;
                let Some(Value::Array(articles)) = body.get_mut("articles").map(Value::take)
                else {
                    return Err(ApiError::bad_request(
                        "the body has no `articles` array: send {\"articles\": [{\"id\": \"a1\", \"title\": …, \"content\": …}, …]}",
                    ));
                };
                articles
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| match Self::article(format!("articles[{i}]"), v) {
                        (_, Err(e)) => Err(e),
                        item => Ok(item),
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        if items.iter().all(|(_, a)| a.is_err()) {
            return Err(ApiError::bad_request(match items.first() {
                Some((_, Err(e))) => format!(
                    "no line is an article: send each article with its `id` ({})",
                    e.message
                ),
                _ => "no articles: send JSON Lines, one article with its `id` per line, or {\"articles\": [...]} as application/json".to_owned(),
            }));
        }
        if items.len() > MAX_BULK_ARTICLES {
            return Err(ApiError::bad_request(format!(
                "{} articles in one request; send at most {MAX_BULK_ARTICLES} per request",
                items.len()
            )));
        }
        Ok(items)
    }

    /// One item, `what` naming where it is (`line 3`, `articles[2]`).
    fn article(what: String, v: Value) -> BulkLine {
        match v["id"].as_str() {
            Some(id) if v.is_object() && !id.is_empty() => (id.to_owned(), Ok(v)),
            _ => (
                String::new(),
                Err(ApiError::bad_request(format!(
                    "{what} is not an article with its `id` (a non-empty string): a JSON object, e.g. {{\"id\": \"a1\", \"title\": …, \"content\": …}}"
                ))),
            ),
        }
    }
}

/// `?dedupe=true`, the tolerance and the relations of the duplicate check.
#[derive(Debug, Default, Deserialize)]
struct PutParams {
    #[serde(default)]
    dedupe: bool,
    threshold: Option<f64>,
    k: Option<u32>,
    containment: Option<bool>,
    /// With `dedupe=true` on Elasticsearch: the texts confirm a refusal.
    align: Option<bool>,
    /// As Elasticsearch's: `false` (the default), `wait_for`, `true`.
    refresh: Option<String>,
}

impl PutParams {
    fn near(&self) -> Near {
        Near {
            threshold: self.threshold,
            k: self.k,
            containment: self.containment,
            align: None,
        }
    }

    /// What the query string asks of the write, checked (with or without dedupe: a bad
    /// `threshold`, `k` or `refresh` is never silently ignored).
    fn options(&self) -> Result<WriteOptions, ApiError> {
        let near = self.near();
        let align = self.align == Some(true);
        if align && !self.dedupe {
            return Err(ApiError::bad_request(
                "`align=true` confirms the duplicate check by the texts: it goes with `dedupe=true`",
            ));
        }
        Ok(WriteOptions {
            align,
            dedupe: self.dedupe,
            given: near.given()?,
            options: near.options(),
            refresh: self
                .refresh
                .as_deref()
                .map_or(Ok(Refresh::No), str::parse)
                .map_err(ApiError::bad_request)?,
        })
    }
}

/// `PUT /v1/{index}/articles/{id}`: stores the article with its fingerprint (201 created,
/// 200 replaced), searchable as `?refresh=` asks (Elasticsearch's values; by default at the
/// index's next refresh). With `?dedupe=true`, only unless a near-duplicate is stored, or (on
/// a store) an article it is contained in: 409 naming the relation, with the matches.
async fn put_article(
    State(svc): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<PutParams>, QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Path((index, id)) = path?;
    let Query(p) = params?;
    let opts = p.options()?;
    let Json(article) = body?;
    match &svc.side {
        Side::Es(es) => {
            svc.article_texts(&article)?;
            es.clone()
                .put(svc.metrics.clone(), index, id, article, opts)
                .await
        }
        Side::Store(st) => {
            let texts = svc.owned_texts(&article)?;
            st.put(&index, id, texts, opts).await
        }
    }
}

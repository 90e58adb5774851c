//! The service answering from Elasticsearch: the query function, the writers and the claims
//! that make dedupe-on-insert race-free across service processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, ErrorCode, Found, Metrics, ServeConfig, WriteOptions};
use crate::es::schema::band_term;
use crate::es::{
    self, EsError, EsIndexer, FieldNames, IndexMeta, Refresh, RetryPolicy, Similar, SimilarOptions,
};
use crate::es::{ClaimError, Claims};
use crate::method::sort_matches;
use crate::{Sketch, Sketches, Tolerance};

/// The Elasticsearch cluster the service answers from.
#[derive(Clone, Debug)]
pub struct EsBackend {
    pub client: elasticsearch::Elasticsearch,
    pub retry: RetryPolicy,
}

/// The service's side of the cluster.
pub(super) struct EsSide {
    es: EsBackend,
    /// The one query function: it remembers what each index holds.
    similar: Similar,
    /// Writers (what `_meta` said when they were opened) and claims, per index written to,
    /// with when they were opened: reopened after `similar`'s `describe_ttl`, as it re-reads.
    writers: Mutex<HashMap<String, (Instant, Arc<Writer>)>>,
    /// A claim's lease is derived from it.
    timeout: Duration,
}

/// What `PUT /v1/{index}/articles/{id}` writes with.
struct Writer {
    indexer: EsIndexer,
    claims: Claims,
    /// What a dedupe write must wait for: nothing, unless the index never refreshes on its
    /// own ([`Claims::fit_refresh_interval`]).
    dedupe_refresh: Refresh,
}

/// An Elasticsearch error as an answer; failures of the cluster itself are counted.
fn failed(metrics: &Metrics, e: EsError) -> ApiError {
    if e.is_transient() || matches!(e.status(), Some(s) if s >= 500) {
        metrics.es_error(&e);
    }
    ApiError::from(e)
}

impl EsSide {
    pub(super) fn new(es: EsBackend, config: &ServeConfig) -> EsSide {
        let options = SimilarOptions {
            text_fields: config.text_fields.clone(),
            describe_ttl: config.meta_ttl,
            ..SimilarOptions::default()
        };
        let similar = Similar::with_options(es.client.clone(), None, options, es.retry.clone());
        EsSide {
            es,
            similar,
            writers: Mutex::new(HashMap::new()),
            timeout: config.timeout,
        }
    }

    /// `given`, or what the index holds at its default.
    async fn tolerance(
        &self,
        m: &Metrics,
        index: &str,
        given: Option<Tolerance>,
    ) -> Result<Tolerance, ApiError> {
        match given {
            Some(t) => Ok(t),
            None => self
                .similar
                .default_tolerance(index)
                .await
                .map_err(|e| failed(m, e)),
        }
    }

    pub(super) async fn similar_by_id(
        &self,
        m: &Metrics,
        index: &str,
        id: &str,
        given: Option<Tolerance>,
    ) -> Result<Found, ApiError> {
        let tolerance = self.tolerance(m, index, given).await?;
        let found = self
            .similar
            .by_id(index, id, tolerance)
            .await
            .map_err(|e| failed(m, e))?;
        Ok(found.into())
    }

    pub(super) async fn similar_by_article(
        &self,
        m: &Metrics,
        index: &str,
        article: &Value,
        given: Option<Tolerance>,
    ) -> Result<Found, ApiError> {
        let tolerance = self.tolerance(m, index, given).await?;
        let found = self
            .similar
            .by_article(index, article, tolerance)
            .await
            .map_err(|e| failed(m, e))?;
        Ok(found.into())
    }

    /// The article's text fields, `{"id", "index", "article"}`.
    pub(super) async fn article(
        &self,
        m: &Metrics,
        index: &str,
        id: &str,
        fields: &[String],
    ) -> Result<Value, ApiError> {
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let hit = self
            .similar
            .find_document(&index.into(), id, &fields)
            .await
            .map_err(|e| failed(m, e))?;
        Ok(json!({
            "id": hit["_id"],
            "index": hit["_index"],
            "article": hit["_source"],
        }))
    }

    /// 200 with the cluster's version when Elasticsearch answers, else 503.
    pub(super) async fn health(&self, m: &Metrics) -> Response {
        let probe = tokio::time::timeout(
            Duration::from_secs(2),
            es::server_version(&self.es.client, &RetryPolicy::none()),
        )
        .await;
        match probe {
            Ok(Ok(version)) => {
                Json(json!({ "status": "ok", "elasticsearch": version })).into_response()
            }
            Ok(Err(e)) => {
                m.es_error(&e);
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

    /// `PUT /v1/{index}/articles/{id}` (the article's text fields already checked).
    pub(super) async fn put(
        self: Arc<Self>,
        m: Arc<Metrics>,
        index: String,
        id: String,
        article: Value,
        opts: WriteOptions,
    ) -> Result<Response, ApiError> {
        let WriteOptions {
            dedupe,
            given,
            refresh,
        } = opts;
        let w = self.writer(&m, &index).await?;
        let article = Arc::new(article);
        let sketches = {
            let (w, article) = (w.clone(), article.clone());
            let fields = self.similar.options().text_fields.clone();
            tokio::task::spawn_blocking(move || w.indexer.sketch(&article, &fields))
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?
                .map_err(|e| ApiError::unprocessable(e.to_string()))?
        };
        if !dedupe {
            return w.store(&m, &id, &article, &sketches, refresh).await;
        }
        let refresh = refresh.max(w.dedupe_refresh);
        let tolerance = self.tolerance(&m, &index, given).await?;
        if let Tolerance::Distance(k) = tolerance {
            if k > 3 {
                return Err(ApiError::bad_request(format!(
                    "dedupe with SimHash needs k ≤ 3 (an equal block to claim); got k = {k}"
                )));
            }
        }
        let method = tolerance.method();
        if !w.indexer.meta().has(method) {
            return Err(ApiError::method_not_held(
                &format!("index `{index}`"),
                w.indexer.meta().default_method(),
                method,
            ));
        }
        let Ok(sketch) = sketches.clone().into_sketch(method) else {
            // Too short to fingerprint: nothing can be near it.
            return w.store(&m, &id, &article, &sketches, refresh).await;
        };
        // In a task of its own: a request that times out must not leave its claims behind
        // mid-way, so the insert runs to its end (and releases) whatever happens to the answer.
        let task = tokio::spawn(async move {
            self.insert_unless_near(&m, &w, &id, &article, &sketches, sketch, tolerance, refresh)
                .await
        });
        task.await.map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// The writer of `index`: its `EsIndexer` (what `_meta` says it holds), its claims
    /// (index created on first use) and whether dedupe writes must wait for a refresh.
    async fn writer(&self, m: &Metrics, index: &str) -> Result<Arc<Writer>, ApiError> {
        if let Some((at, w)) = self.writers.lock().expect("lock").get(index) {
            if at.elapsed() < self.similar.options().describe_ttl {
                return Ok(w.clone());
            }
        }
        let indexer = EsIndexer::open(
            self.es.client.clone(),
            index,
            self.es.retry.clone(),
            &FieldNames::default(),
        )
        .await
        .map_err(|e| failed(m, e))?;
        let mut claims = Claims::new(self.es.client.clone(), self.es.retry.clone(), index);
        // A holder finishes within its request's time (the claims' own deadline) plus its
        // writes; the lease is well beyond that.
        claims.lease = (self.timeout * 3).max(Duration::from_secs(30));
        claims.ensure_index().await.map_err(|e| failed(m, e))?;
        let interval = indexer.refresh_interval().await.map_err(|e| failed(m, e))?;
        let dedupe_refresh = claims.fit_refresh_interval(interval);
        if dedupe_refresh != Refresh::No {
            tracing::warn!(
                index,
                "the index has periodic refresh disabled (refresh_interval -1): each dedupe write refreshes it"
            );
        }
        let w = Arc::new(Writer {
            indexer,
            claims,
            dedupe_refresh,
        });
        self.writers
            .lock()
            .expect("lock")
            .insert(index.to_owned(), (Instant::now(), w.clone()));
        Ok(w)
    }

    /// Stores `article` as `id` with `w` unless something near `sketch` is stored: claims the
    /// keys a near-duplicate must share with it, searches and reads the recent inserts the
    /// keys' records list (by id), writes, then releases the claims, listing the article in
    /// them. See [`crate::es::Claims`] for why this is race-free.
    #[allow(clippy::too_many_arguments)]
    async fn insert_unless_near(
        &self,
        m: &Metrics,
        w: &Writer,
        id: &str,
        article: &Value,
        sketches: &Sketches,
        sketch: Sketch,
        tolerance: Tolerance,
        refresh: Refresh,
    ) -> Result<Response, ApiError> {
        let index = w.indexer.index();
        let keys = claim_keys(&sketch, w.indexer.meta())?;
        let holder = format!("{id} (pid {})", std::process::id());
        let deadline = Instant::now() + self.timeout;
        let held = w
            .claims
            .acquire(&keys, &holder, deadline)
            .await
            .map_err(|e| match e {
                ClaimError::Timeout { .. } => ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::Busy,
                    format!("{e}: another insert of a near-duplicate is in progress"),
                ),
                ClaimError::Es(e) => failed(m, e),
            })?;
        let mut written = false;
        let outcome = async {
            let recent = held.recent_ids();
            let (found, listed) = tokio::join!(
                self.similar
                    .by_fingerprint(index, sketch.clone(), tolerance),
                self.similar.among_ids(index, &recent, sketch, tolerance)
            );
            let mut matches = found.map_err(|e| failed(m, e))?.matches;
            matches.extend(listed.map_err(|e| failed(m, e))?);
            matches.retain(|m| m.id != id);
            sort_matches(&mut matches);
            matches.dedup_by(|a, b| a.id == b.id && a.index == b.index);
            if !matches.is_empty() {
                return Err(ApiError::duplicate(matches));
            }
            // From here the article may be stored even if the answer is lost: list it.
            written = true;
            w.store(m, id, article, sketches, refresh).await
        }
        .await;
        if written {
            w.claims.release_recording(held, id).await;
        } else {
            w.claims.release(held).await;
        }
        if w.claims.sweep_due() {
            let claims = w.claims.clone();
            tokio::spawn(async move {
                match claims.sweep().await {
                    Ok(deleted) => {
                        tracing::debug!(deleted, claims = claims.index(), "swept old claim records")
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not sweep old claim records; the next sweep will")
                    }
                }
            });
        }
        outcome
    }
}

impl Writer {
    /// Writes the article with its fingerprint fields: 201 created, 200 replaced; visible to
    /// search as `refresh` says.
    async fn store(
        &self,
        m: &Metrics,
        id: &str,
        article: &Value,
        sketches: &Sketches,
        refresh: Refresh,
    ) -> Result<Response, ApiError> {
        let r = self
            .indexer
            .index_article_refresh(Some(id), article, sketches, refresh)
            .await
            .map_err(|e| failed(m, e))?;
        Ok(super::stored(
            self.indexer.index(),
            &r.id,
            r.result == "created",
        ))
    }
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

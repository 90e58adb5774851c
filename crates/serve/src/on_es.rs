//! The service answering from Elasticsearch: the query function, the writers and the claims
//! that make dedupe-on-insert race-free across service processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::config::ServeConfig;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::Metrics;
use crate::shapes::{Found, WriteOptions};
use neardup_core::input::field_texts;
use neardup_core::relation::MatchOptions;
use neardup_core::text::plain_text;
use neardup_core::{Sketches, Tolerance};
use neardup_es::{
    ClaimError, Claims, DedupeError, EsError, EsIndexer, FieldNames, Inserted, Near, NewArticle,
    Refresh, RetryPolicy, Similar, SimilarOptions,
};

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
        options: MatchOptions,
    ) -> Result<Found, ApiError> {
        let tolerance = self.tolerance(m, index, given).await?;
        let found = self
            .similar
            .by_id(index, id, Near::new(tolerance, options))
            .await
            .map_err(|e| failed(m, e))?;
        Ok(found.into())
    }

    /// `?align=true`: [`neardup_es::Similar::aligned_by_id`] with the default rule.
    pub(super) async fn similar_aligned(
        &self,
        m: &Metrics,
        index: &str,
        id: &str,
    ) -> Result<Found, ApiError> {
        let found = self
            .similar
            .aligned_by_id(index, id, &neardup_core::relation::AlignRule::DEFAULT)
            .await
            .map_err(|e| failed(m, e))?;
        Ok(found.into())
    }

    /// `POST …/similar?align=true`: [`neardup_es::Similar::aligned_by_article`] with the
    /// default rule.
    pub(super) async fn similar_aligned_by_article(
        &self,
        m: &Metrics,
        index: &str,
        article: &Value,
    ) -> Result<Found, ApiError> {
        let found = self
            .similar
            .aligned_by_article(index, article, &neardup_core::relation::AlignRule::DEFAULT)
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
        options: MatchOptions,
    ) -> Result<Found, ApiError> {
        let tolerance = self.tolerance(m, index, given).await?;
        let found = self
            .similar
            .by_article(index, article, Near::new(tolerance, options))
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
        // Where the index keeps duplicate groups, the article's group too.
        let group = self
            .similar
            .index_meta(index)
            .await
            .map_err(|e| failed(m, e))?
            .group
            .map(|g| g.field);
        let mut read: Vec<&str> = fields.iter().map(String::as_str).collect();
        read.extend(group.as_deref());
        let mut hit = self
            .similar
            .find_document(&index.into(), id, &read)
            .await
            .map_err(|e| failed(m, e))?;
        let label = group.and_then(|g| hit["_source"].as_object_mut()?.remove(&g));
        let mut out = json!({
            "id": hit["_id"],
            "index": hit["_index"],
            "article": hit["_source"],
        });
        // The texts aligned lookups compare, in the order their spans' `field` counts: each
        // text field's plain text. A field that holds no text leaves them out.
        if let Ok(texts) = field_texts(&hit["_source"], fields) {
            out["texts"] = json!(texts
                .into_iter()
                .map(|t| plain_text(t).into_owned())
                .collect::<Vec<_>>());
        }
        if let Some(label) = label.filter(|l| !l.is_null()) {
            out["group"] = label;
        }
        Ok(out)
    }

    /// 200 with the cluster's version when Elasticsearch answers, else 503.
    pub(super) async fn health(&self, m: &Metrics) -> Response {
        let probe = tokio::time::timeout(
            Duration::from_secs(2),
            neardup_es::server_version(&self.es.client, &RetryPolicy::none()),
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
            ..
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
        // In a task of its own: a request that times out must not leave its claims behind
        // mid-way, so the insert runs to its end (and releases) whatever happens to the answer.
        let task = tokio::spawn(async move {
            let one = [NewArticle {
                id: &id,
                article: &article,
                sketches: &sketches,
            }];
            let mut done = self
                .insert(
                    &m,
                    &w,
                    &one,
                    opts.near(tolerance),
                    refresh,
                    &format!("{id} (pid {})", std::process::id()),
                )
                .await?;
            match done.pop().expect("one answer per article") {
                Inserted::Written(r) => Ok(crate::shapes::stored(
                    w.indexer.index(),
                    &r.id,
                    r.result == "created",
                )),
                Inserted::Duplicate(matches) => Err(ApiError::duplicate(matches)),
                Inserted::Failed(e) => Err(failed(&m, e)),
            }
        });
        task.await.map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// `POST /v1/{index}/articles/_bulk`: writes the readable articles (`(id, article or why
    /// it cannot be read)`) in one `_bulk`; with dedupe, each only unless a near-duplicate is
    /// stored or earlier in the batch. Per article: whether it was created (else replaced),
    /// or why it was not written.
    pub(super) async fn bulk(
        self: Arc<Self>,
        m: Arc<Metrics>,
        index: String,
        articles: Vec<(String, Result<Value, ApiError>)>,
        opts: WriteOptions,
    ) -> Result<Vec<Result<bool, ApiError>>, ApiError> {
        let w = self.writer(&m, &index).await?;
        let tolerance = match opts.dedupe {
            true => Some(self.tolerance(&m, &index, opts.given).await?),
            false => None,
        };
        let refresh = match opts.dedupe {
            true => opts.refresh.max(w.dedupe_refresh),
            false => opts.refresh,
        };
        // Sketched on the blocking pool; the insert in a task of its own, as a PUT's.
        let task = tokio::spawn(async move {
            let fields = self.similar.options().text_fields.clone();
            let w2 = w.clone();
            let sketched = tokio::task::spawn_blocking(move || {
                articles
                    .into_iter()
                    .map(|(id, a)| {
                        let s = a.and_then(|a| {
                            let s = w2
                                .indexer
                                .sketch(&a, &fields)
                                .map_err(|e| ApiError::unprocessable(e.to_string()))?;
                            Ok((a, s))
                        });
                        (id, s)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
            let readable: Vec<(&str, &Value, &Sketches)> = sketched
                .iter()
                .filter_map(|(id, s)| s.as_ref().ok().map(|(a, sk)| (id.as_str(), a, sk)))
                .collect();
            let answers: Vec<Result<bool, ApiError>> = match tolerance {
                None => w
                    .indexer
                    .index_articles(&readable, refresh)
                    .await
                    .map_err(|e| failed(&m, e))?
                    .into_iter()
                    .map(|r| r.map(|r| r.result == "created").map_err(|e| failed(&m, e)))
                    .collect(),
                Some(t) => {
                    let batch: Vec<NewArticle> = readable
                        .iter()
                        .map(|&(id, article, sketches)| NewArticle {
                            id,
                            article,
                            sketches,
                        })
                        .collect();
                    let holder = format!("bulk of {} (pid {})", batch.len(), std::process::id());
                    self.insert(&m, &w, &batch, opts.near(t), refresh, &holder)
                        .await?
                        .into_iter()
                        .map(|done| match done {
                            Inserted::Written(r) => Ok(r.result == "created"),
                            Inserted::Duplicate(matches) => Err(ApiError::duplicate(matches)),
                            Inserted::Failed(e) => Err(failed(&m, e)),
                        })
                        .collect()
                }
            };
            let mut answers = answers.into_iter();
            let mut out = Vec::with_capacity(sketched.len());
            for (_, s) in sketched {
                out.push(match s {
                    Ok(_) => answers.next().expect("one answer per readable article"),
                    Err(e) => Err(e),
                });
            }
            Ok(out)
        });
        task.await.map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// [`es::insert_unless_near`] with `w`, waiting for claimed keys up to the request's
    /// timeout; its failures as answers.
    async fn insert(
        &self,
        m: &Metrics,
        w: &Writer,
        articles: &[NewArticle<'_>],
        near: Near,
        refresh: Refresh,
        holder: &str,
    ) -> Result<Vec<Inserted>, ApiError> {
        let deadline = Instant::now() + self.timeout;
        neardup_es::insert_unless_near(
            &w.indexer,
            &w.claims,
            &self.similar,
            articles,
            near,
            refresh,
            holder,
            deadline,
        )
        .await
        .map_err(|e| match e {
            DedupeError::Claim(e @ ClaimError::Timeout { .. }) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Busy,
                format!("{e}: another insert of a near-duplicate is in progress"),
            ),
            DedupeError::Claim(ClaimError::Es(e)) | DedupeError::Es(e) => failed(m, e),
        })
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
        indexer
            .meta()
            .check_group_text_fields(index, &self.similar.options().text_fields)
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
        Ok(crate::shapes::stored(
            self.indexer.index(),
            &r.id,
            r.result == "created",
        ))
    }
}

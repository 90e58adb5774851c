//! The service answering from a local store (`neardup serve --store DIR`): one store, served
//! as one index named after its directory.
//!
//! Every store operation is blocking (redb), so each runs on tokio's blocking pool. Dedupe on
//! insert is [`Store::check`] with `insert`: the search and the write are one write
//! transaction, and redb runs write transactions one at a time, so concurrent inserts of
//! near-duplicates create exactly one. Matches say their relation (`near_duplicate`,
//! `contained_in`, `contains`) as `neardup similar --store` does; `containment=false` asks
//! for near-duplicates only. Only one process can open a store, so there is no
//! second service to race with.
//!
//! A store keeps fingerprints, not texts: `GET /v1/{index}/articles/{id}` answers 404
//! `text_not_kept` for a stored id (the review page says so instead of comparing).

use std::path::Path;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::shapes::{Found, WriteOptions};
use neardup_core::fingerprint::Methods;
use neardup_core::relation::MatchOptions;
use neardup_core::{Fingerprinter, Sketch, Tolerance};
use neardup_es::QueryFingerprint;
use neardup_store::{Match, Store, StoreError};

/// A local store the service answers from, under the index name `name`.
#[derive(Clone, Debug)]
pub struct StoreBackend {
    store: Arc<Store>,
    name: String,
    fingerprinter: Arc<Fingerprinter>,
}

impl StoreBackend {
    /// Serves `store` as the index `name`, fingerprinting with `fingerprinter`; errors unless
    /// it makes the sketches the store holds (method, profile and version).
    pub fn new(
        store: Store,
        name: impl Into<String>,
        fingerprinter: Fingerprinter,
    ) -> Result<StoreBackend, StoreError> {
        store.ensure_fingerprints(
            fingerprinter.config().profile.name(),
            fingerprinter.version_of(store.method(), false),
        )?;
        Ok(StoreBackend {
            store: Arc::new(store),
            name: name.into(),
            fingerprinter: Arc::new(fingerprinter),
        })
    }

    /// The index name of a store in `dir`: the directory's own name.
    pub fn name_of(dir: &Path) -> String {
        dir.canonicalize()
            .ok()
            .as_deref()
            .and_then(Path::file_name)
            .or_else(|| dir.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "store".to_owned())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn fingerprinter(&self) -> &Fingerprinter {
        &self.fingerprinter
    }

    /// 404 unless `index` is this store's name.
    fn check_index(&self, index: &str) -> Result<(), ApiError> {
        if index == self.name {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!(
                "no index `{index}`: this service answers from the local store `{}` ({})",
                self.name,
                self.store.path().display()
            ),
        ))
    }

    /// The store's method at its default: MinHash's default threshold, or the store's `k`.
    fn default_tolerance(&self) -> Tolerance {
        Tolerance::default_for(self.store.method(), self.store.config().k)
    }

    /// `given`, or the default; 409 unless the store holds its method (saying which query
    /// parameter fits, not the CLI's flags).
    fn tolerance(&self, given: Option<Tolerance>) -> Result<Tolerance, ApiError> {
        let tolerance = given.unwrap_or_else(|| self.default_tolerance());
        let (held, asked) = (self.store.method(), tolerance.method());
        if held != asked {
            return Err(ApiError::method_not_held(
                &format!("the local store `{}`", self.name),
                held,
                asked,
            ));
        }
        Ok(tolerance)
    }

    /// The sketch of `texts` by the store's method, or why there is none.
    fn sketch(&self, texts: &[String]) -> Result<Sketch, neardup_core::fingerprint::TooShort> {
        let method = self.store.method();
        self.fingerprinter
            .sketch_fields(Methods::only(method), texts)
            .into_sketch(method)
    }

    /// Runs `f` on the blocking pool (redb and jieba block).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&StoreBackend) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || f(&me))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
    }

    /// Matches with the store's name as their index, as Elasticsearch's carry theirs.
    fn named(&self, matches: Vec<Match>) -> Vec<Match> {
        matches
            .into_iter()
            .map(|m| Match {
                index: Some(self.name.clone()),
                ..m
            })
            .collect()
    }

    pub(super) async fn similar_by_id(
        &self,
        index: &str,
        id: String,
        given: Option<Tolerance>,
        options: MatchOptions,
    ) -> Result<Found, ApiError> {
        self.check_index(index)?;
        let tolerance = self.tolerance(given)?;
        self.blocking(move |b| {
            let snap = b.store.snapshot()?;
            let sketch = snap.get(&id)?.ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    ErrorCode::NotFound,
                    format!(
                        "no document `{id}` in the local store `{}`: it was never indexed, or its text was too short to fingerprint",
                        b.name
                    ),
                )
            })?;
            let matches = snap.similar(&sketch, tolerance, Some(&id), &options)?;
            Ok(Found {
                matches: b.named(matches),
                tolerance,
                query: QueryFingerprint::Stored(sketch),
                candidates: None,
                formula: None,
            })
        })
        .await
    }

    pub(super) async fn similar_by_text(
        &self,
        index: &str,
        texts: Vec<String>,
        given: Option<Tolerance>,
        options: MatchOptions,
    ) -> Result<Found, ApiError> {
        self.check_index(index)?;
        let tolerance = self.tolerance(given)?;
        self.blocking(move |b| {
            let found = match b.sketch(&texts) {
                Err(why) => Found {
                    matches: Vec::new(),
                    tolerance,
                    query: QueryFingerprint::TooShort(why),
                    candidates: None,
                    formula: None,
                },
                Ok(sketch) => Found {
                    matches: b.named(b.store.similar(sketch.clone(), tolerance, None, &options)?),
                    tolerance,
                    query: QueryFingerprint::Computed(sketch),
                    candidates: None,
                    formula: None,
                },
            };
            Ok(found)
        })
        .await
    }

    /// A store has no text to show: 404 `text_not_kept` for a stored id, `not_found` else.
    pub(super) async fn article(&self, index: &str, id: String) -> Result<Value, ApiError> {
        self.check_index(index)?;
        self.blocking(move |b| {
            Err(match b.store.get(&id)? {
                Some(_) => ApiError::new(
                    StatusCode::NOT_FOUND,
                    ErrorCode::TextNotKept,
                    format!(
                        "`{id}` is in the local store `{}`, but a store keeps fingerprints, not texts: open the article where your articles are kept",
                        b.name
                    ),
                ),
                None => ApiError::new(
                    StatusCode::NOT_FOUND,
                    ErrorCode::NotFound,
                    format!("no document `{id}` in the local store `{}`", b.name),
                ),
            })
        })
        .await
    }

    /// 200 with the store's name and size, else 503.
    pub(super) async fn health(&self) -> Response {
        let me = self.clone();
        match tokio::task::spawn_blocking(move || me.store.len()).await {
            Ok(Ok(documents)) => Json(json!({
                "status": "ok",
                "store": self.name,
                "documents": documents,
            }))
            .into_response(),
            Ok(Err(e)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "error": e.to_string() })),
            )
                .into_response(),
            Err(e) => ApiError::internal(e.to_string()).into_response(),
        }
    }

    /// `PUT /v1/{index}/articles/{id}`: stores the article's sketch (201 created, 200
    /// replaced); with `dedupe`, only unless a near-duplicate is stored or one it is
    /// contained in (409 with the relation and the matches), checked and written in one
    /// transaction.
    pub(super) async fn put(
        &self,
        index: &str,
        id: String,
        texts: Vec<String>,
        opts: WriteOptions,
    ) -> Result<Response, ApiError> {
        let mut done = self
            .write(index, vec![(id.clone(), Ok(texts))], opts)
            .await?;
        let created = done.pop().expect("one answer per article")?;
        Ok(crate::shapes::stored(&self.name, &id, created))
    }

    /// Stores the sketches of articles (`(id, its texts or why they cannot be read)`), in
    /// order; with `dedupe`, each only unless [`Store::check`] refuses it (a near-duplicate,
    /// or an article contained in one, is stored or earlier in the batch; a full article
    /// whose teaser is stored is written): all checked and written in one transaction. Per
    /// article: whether it was created (else replaced), or why it was not stored.
    pub(super) async fn write(
        &self,
        index: &str,
        articles: Vec<(String, Result<Vec<String>, ApiError>)>,
        opts: WriteOptions,
    ) -> Result<Vec<Result<bool, ApiError>>, ApiError> {
        self.check_index(index)?;
        if opts.align {
            return Err(ApiError::bad_request(
                "`align=true` reads the texts of the stored articles, and a local store keeps none: dedupe on a store without it",
            ));
        }
        let tolerance = if opts.dedupe {
            Some(self.tolerance(opts.given)?)
        } else {
            None
        };
        let options = opts.options;
        self.blocking(move |b| {
            let mut out: Vec<Option<Result<bool, ApiError>>> = Vec::new();
            let mut sketched = Vec::new();
            let mut ids = Vec::new();
            for (i, (id, texts)) in articles.into_iter().enumerate() {
                ids.push(id);
                let sketch = texts.and_then(|t| {
                    b.sketch(&t).map_err(|why| {
                        ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            ErrorCode::TooShort,
                            format!(
                                "not stored: the article is too short to fingerprint ({why}), and a local store keeps only fingerprints"
                            ),
                        )
                    })
                });
                match sketch {
                    Ok(s) => {
                        sketched.push((i, s));
                        out.push(None);
                    }
                    Err(e) => out.push(Some(Err(e))),
                }
            }
            match tolerance {
                None => {
                    for (i, sketch) in sketched {
                        out[i] = Some(Ok(b.store.upsert(&ids[i], sketch)?.inserted > 0));
                    }
                }
                Some(t) => {
                    let (order, docs): (Vec<usize>, Vec<(&str, Sketch)>) = sketched
                        .into_iter()
                        .map(|(i, s)| (i, (ids[i].as_str(), s)))
                        .unzip();
                    let results = b.store.check(&docs, t, true, &options)?;
                    for (i, r) in order.into_iter().zip(results) {
                        out[i] = Some(if r.inserted {
                            Ok(!r.replaced)
                        } else {
                            Err(ApiError::duplicate(b.named(r.matches)))
                        });
                    }
                }
            }
            Ok(out
                .into_iter()
                .map(|o| o.expect("every article has an answer"))
                .collect())
        })
        .await
    }
}

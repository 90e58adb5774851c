//! What the two backends and the routes share: what a lookup found ([`Found`]) and its JSON
//! answer, what a write asks ([`WriteOptions`]) and the answer of a stored article.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use neardup_core::relation::MatchOptions;
use neardup_core::Tolerance;
use neardup_es::{QueryFingerprint, Refresh, Similarity};
use neardup_store::Match;

/// What a lookup found, on either backend.
pub(crate) struct Found {
    pub(crate) matches: Vec<Match>,
    pub(crate) tolerance: Tolerance,
    pub(crate) query: QueryFingerprint,
    /// Documents whose fingerprints crossed the network (Elasticsearch only).
    pub(crate) candidates: Option<u64>,
    /// The formula an aligned lookup left out (`?align=true`), when the index records one.
    pub(crate) formula: Option<String>,
}

impl From<Similarity> for Found {
    fn from(s: Similarity) -> Found {
        Found {
            matches: s.matches,
            tolerance: s.tolerance,
            query: s.query,
            candidates: Some(s.transferred),
            formula: s.formula,
        }
    }
}

/// The answer of both similar endpoints: the matches (`{"id", "index", "similarity"}`, with
/// `"relation"` and `"containment"` from a MinHash store, or `{"id", "index", "distance"}`),
/// what counted as near, and where the query came from.
pub(crate) fn answer(found: &Found) -> Value {
    let (query, reason) = match &found.query {
        QueryFingerprint::Stored(_) => ("stored", None),
        QueryFingerprint::Computed(_) | QueryFingerprint::Given(_) => ("computed", None),
        QueryFingerprint::TooShort(why) => ("too_short", Some(why.to_string())),
    };
    let mut v = json!({
        "matches": found.matches,
        "method": found.tolerance.method(),
        "query": query,
    });
    if let Some(c) = found.candidates {
        v["candidates"] = json!(c);
    }
    match found.tolerance {
        Tolerance::Similarity(t) => v["threshold"] = json!(t),
        Tolerance::Distance(k) => v["max_distance"] = json!(k),
    }
    if let Some(r) = reason {
        v["reason"] = json!(r);
    }
    if let Some(f) = &found.formula {
        v["formula"] = json!(f);
    }
    v
}

/// How to write an article: unless a near-duplicate is stored, or one it is contained in
/// (`dedupe`, at `given` or the index's default tolerance, under `options`), and when it must
/// be searchable (a store's writes always are at once).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteOptions {
    pub(crate) dedupe: bool,
    pub(crate) given: Option<Tolerance>,
    pub(crate) options: MatchOptions,
    pub(crate) refresh: Refresh,
    /// `align=true` (with `dedupe`, on Elasticsearch): a refusal is confirmed by the rule
    /// on the aligned texts.
    pub(crate) align: bool,
}

impl WriteOptions {
    /// What counts as near for the duplicate check at `tolerance`.
    pub(crate) fn near(&self, tolerance: Tolerance) -> neardup_es::Near {
        let near = neardup_es::Near::new(tolerance, self.options);
        match self.align {
            true => near.aligned(neardup_core::relation::AlignRule::DEFAULT),
            false => near,
        }
    }
}

/// The answer of a stored article: 201 created, 200 replaced.
pub(crate) fn stored(index: &str, id: &str, created: bool) -> Response {
    let (status, result) = if created {
        (StatusCode::CREATED, "created")
    } else {
        (StatusCode::OK, "updated")
    };
    (
        status,
        Json(json!({ "id": id, "index": index, "result": result })),
    )
        .into_response()
}

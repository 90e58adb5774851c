//! What a job walks: the indices behind a name or pattern ([`resolve_indices`]), and the read
//! of the documents a query matches in one of them: a [`Cursor`] of the one paging layer
//! ([`crate::scan`]) that fetches only the fields the job needs and the
//! `_seq_no`/`_primary_term` that guard its writes (the back-fill's and regroup's walks).
//!
//! Neither a PIT's nor a scroll's order survives a restart (segments merge, the snapshot is
//! gone), so the walker is never the checkpoint: the back-fill's query is (see
//! [`crate::backfill`] for the resumability guarantee). A walk that loses its context (a
//! node restarted, the scroll or PIT is gone, a scroll page was lost in transit) or the
//! cluster through the retries reports [`WalkError::Lost`]; the caller opens a new one.

use std::time::Duration;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};

use crate::client::{path_segment, request};
use crate::retry::RetryPolicy;
use crate::scan::{Cursor, Paging, ScanOptions, Scanner, Slice};
use crate::EsError;

/// One document as read: what the update guard and the fingerprint need.
#[derive(Clone, Debug)]
pub struct Hit {
    pub id: String,
    pub seq_no: u64,
    pub primary_term: u64,
    pub source: Value,
}

impl Hit {
    /// A hit (or `_mget`/`_doc` answer) that has an id, a `_seq_no` and a `_primary_term`.
    pub fn from_json(h: &Value) -> Option<Hit> {
        Some(Hit {
            id: h["_id"].as_str()?.to_owned(),
            seq_no: h["_seq_no"].as_u64()?,
            primary_term: h["_primary_term"].as_u64()?,
            source: h.get("_source").cloned().unwrap_or(Value::Null),
        })
    }
}

/// Why a walk stopped before its end.
#[derive(Debug)]
pub enum WalkError {
    /// The search context is gone ([`EsError::ContextLost`]) or the cluster stayed
    /// unreachable or overloaded through the retries: open a new walk.
    Lost(EsError),
    /// Anything else (bad query, no such index, refused credentials): stop.
    Fatal(EsError),
}

impl WalkError {
    fn from(e: EsError) -> WalkError {
        let lost = match &e {
            EsError::Status { status, .. } => *status == 404 || *status >= 500 || *status == 429,
            EsError::ContextLost { .. }
            | EsError::Exhausted { .. }
            | EsError::Unreachable { .. } => true,
            _ => false,
        };
        if lost {
            WalkError::Lost(e)
        } else {
            WalkError::Fatal(e)
        }
    }

    pub fn into_inner(self) -> EsError {
        match self {
            WalkError::Lost(e) | WalkError::Fatal(e) => e,
        }
    }
}

/// What to walk.
#[derive(Clone, Debug)]
pub struct WalkSpec {
    pub index: String,
    pub query: Value,
    /// `_source` fields to fetch.
    pub fields: Vec<String>,
    pub page_size: usize,
    /// Search preference, e.g. `_shards:2` to walk one shard (scroll only).
    pub preference: Option<String>,
    pub keep_alive: Duration,
    /// Walk one slice of the query's documents (`--slice I/N`); `None`: all of them.
    pub slice: Option<Slice>,
}

/// An open walk. Call [`Walker::close`] when done to free the context early.
pub struct Walker {
    cursor: Cursor,
    index: String,
}

impl Walker {
    /// A walk paged as `paging` says (a walk limited to shards pages with scroll unless
    /// [`Paging::Pit`] is forced, which then fails). Nothing is sent before the first page.
    pub fn open(scanner: &Scanner, paging: Paging, spec: WalkSpec) -> Walker {
        let body = json!({
            "query": spec.query,
            "_source": spec.fields,
            "seq_no_primary_term": true,
        });
        let options = ScanOptions {
            page_size: spec.page_size,
            keep_alive: spec.keep_alive,
            single_request_first: false,
            paging,
            slice: spec.slice,
        };
        let mut cursor = scanner.cursor(&spec.index, body, &options);
        if let Some(p) = spec.preference {
            cursor = cursor.with_preference(p);
        }
        Walker {
            cursor,
            index: spec.index,
        }
    }

    /// The next page; an empty vector at the end.
    pub async fn next_page(&mut self) -> Result<Vec<Hit>, WalkError> {
        let raw = self.cursor.next_page().await.map_err(WalkError::from)?;
        raw.iter()
            .map(|h| {
                Hit::from_json(h).ok_or_else(|| {
                    WalkError::Fatal(EsError::BadResponse {
                        what: format!("index `{}`: read documents", self.index),
                        detail: format!("a hit without _id/_seq_no/_primary_term: {h}"),
                    })
                })
            })
            .collect()
    }

    /// Frees the scroll or PIT now rather than at the keep-alive; failures are harmless.
    pub async fn close(mut self) {
        self.cursor.close().await;
    }
}

/// The concrete indices behind an index name, alias or pattern (comma-separated allowed),
/// sorted and without duplicates. Closed indices are left out.
pub async fn resolve_indices(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    pattern: &str,
) -> Result<Vec<String>, EsError> {
    let r = request(
        client,
        retry,
        &format!("resolve `{pattern}`"),
        Method::Get,
        &format!("/_resolve/index/{}", path_segment_list(pattern)),
        &[],
        None,
    )
    .await?;
    let mut out = Vec::new();
    for i in r["indices"].as_array().into_iter().flatten() {
        let open = !i["attributes"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "closed"));
        if let (Some(name), true) = (i["name"].as_str(), open) {
            out.push(name.to_owned());
        }
    }
    for a in r["aliases"].as_array().into_iter().flatten() {
        out.extend(
            a["indices"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_owned)),
        );
    }
    for d in r["data_streams"].as_array().into_iter().flatten() {
        out.extend(
            d["backing_indices"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_owned)),
        );
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Percent-encodes each comma-separated name but keeps `*` and the commas.
fn path_segment_list(pattern: &str) -> String {
    pattern
        .split(',')
        .map(|p| path_segment(p.trim()).replace("%2A", "*"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_keeps_its_stars_and_commas() {
        assert_eq!(path_segment_list("news-*, a b"), "news-*,a%20b");
    }

    #[test]
    fn lost_or_fatal() {
        let status = |status, ty: &str| EsError::Status {
            what: "x".into(),
            status,
            error_type: ty.into(),
            reason: String::new(),
        };
        let lost = |e| EsError::ContextLost {
            what: "x".into(),
            cause: Box::new(e),
        };
        assert!(matches!(
            WalkError::from(lost(status(404, "search_context_missing_exception"))),
            WalkError::Lost(_)
        ));
        assert!(matches!(
            WalkError::from(lost(EsError::Unreachable {
                detail: "reset".into()
            })),
            WalkError::Lost(_)
        ));
        assert!(matches!(
            WalkError::from(status(400, "parsing_exception")),
            WalkError::Fatal(_)
        ));
        assert!(matches!(
            WalkError::from(EsError::IndexNotFound { index: "x".into() }),
            WalkError::Fatal(_)
        ));
    }
}

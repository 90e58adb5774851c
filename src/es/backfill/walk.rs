//! Reading every document a query matches, page by page, with only the fields the back-fill
//! needs.
//!
//! Two ways, chosen once per job by [`Paging::detect`]:
//!
//! - **Point in time + `search_after`** sorted by `_shard_doc` (Elasticsearch 7.12+ with the
//!   default distribution, and 8.x): a PIT is a cheap, consistent view that is not tied to one
//!   node's scroll context, and each page is an ordinary search.
//! - **Scroll** sorted by `_doc` everywhere else (the OSS distribution, 7.10 and older, and the
//!   test node here, which has no X-Pack). Same snapshot semantics, one search context per shard.
//!
//! Neither order survives a restart (segments merge, the snapshot is gone), so the walker is
//! never the checkpoint: the back-fill's query is (see `super` for the resumability guarantee).
//! A walk that loses its context (a node restarted and the scroll or PIT is gone) reports
//! [`WalkError::Lost`]; the caller opens a new one.

use std::time::Duration;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};

use crate::es::{path_segment, request, send, Body, EsError, RetryPolicy};

/// How pages are fetched.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Paging {
    /// Point in time with `search_after`, sorted by `_shard_doc`.
    PitSearchAfter,
    /// Scroll sorted by `_doc`.
    Scroll,
}

impl Paging {
    /// Point in time where the cluster has it, else scroll. A PIT needs Elasticsearch 7.12+
    /// (not OpenSearch, whose PIT API differs) with X-Pack: the version is checked first,
    /// because on older nodes `POST /idx/_pit` is routed as "index a document of type `_pit`";
    /// then a PIT is opened and closed on `index`, which answers 400/404/405 where X-Pack is
    /// missing.
    pub async fn detect(
        client: &Elasticsearch,
        retry: &RetryPolicy,
        index: &str,
    ) -> Result<Paging, EsError> {
        let info = request(client, retry, "GET /", Method::Get, "/", &[], None).await?;
        let version = info["version"]["number"].as_str().unwrap_or("0");
        let opensearch = info["version"]["distribution"] == "opensearch";
        if opensearch || !version_at_least(version, 7, 12) {
            return Ok(Paging::Scroll);
        }
        match open_pit(client, retry, index, "1m").await {
            Ok(id) => {
                close_pit(client, &id).await;
                Ok(Paging::PitSearchAfter)
            }
            Err(e) if matches!(e.status(), Some(400 | 404 | 405)) => {
                if matches!(e, EsError::IndexNotFound { .. }) {
                    return Err(e);
                }
                tracing::info!(error = %e, "no point-in-time API on this cluster: using scroll");
                Ok(Paging::Scroll)
            }
            Err(e) => Err(e),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Paging::PitSearchAfter => "point in time + search_after",
            Paging::Scroll => "scroll",
        }
    }
}

fn version_at_least(v: &str, major: u64, minor: u64) -> bool {
    let mut parts = v.split(['.', '-']).map(|p| p.parse::<u64>().unwrap_or(0));
    let (ma, mi) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

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
    /// The search context is gone (a node restarted, the keep-alive ran out) or the cluster
    /// stayed unreachable through the retries: open a new walk.
    Lost(EsError),
    /// Anything else (bad query, no such index, refused credentials): stop.
    Fatal(EsError),
}

impl WalkError {
    fn from(e: EsError) -> WalkError {
        let lost = match &e {
            EsError::Status {
                status, error_type, ..
            } => {
                *status == 404
                    || *status >= 500
                    || *status == 429
                    || error_type.contains("search_context_missing")
            }
            EsError::Exhausted { .. } | EsError::Unreachable { .. } => true,
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
}

/// An open walk. Call [`Walker::close`] when done to free the context early.
pub struct Walker {
    client: Elasticsearch,
    retry: RetryPolicy,
    spec: WalkSpec,
    paging: Paging,
    /// Scroll id or PIT id.
    context: Option<String>,
    search_after: Option<Value>,
    first: bool,
    done: bool,
}

impl Walker {
    /// Opens a walk (for a PIT, opens the PIT; a scroll is opened by the first page).
    pub async fn open(
        client: &Elasticsearch,
        retry: &RetryPolicy,
        paging: Paging,
        spec: WalkSpec,
    ) -> Result<Walker, WalkError> {
        if paging == Paging::PitSearchAfter && spec.preference.is_some() {
            return Err(WalkError::Fatal(EsError::Config(
                "a point-in-time walk cannot be limited to one shard; use scroll".into(),
            )));
        }
        let context = match paging {
            Paging::PitSearchAfter => Some(
                open_pit(client, retry, &spec.index, &keep_alive(spec.keep_alive))
                    .await
                    .map_err(WalkError::from)?,
            ),
            Paging::Scroll => None,
        };
        Ok(Walker {
            client: client.clone(),
            retry: retry.clone(),
            spec,
            paging,
            context,
            search_after: None,
            first: true,
            done: false,
        })
    }

    /// The next page; an empty vector at the end.
    pub async fn next_page(&mut self) -> Result<Vec<Hit>, WalkError> {
        if self.done {
            return Ok(Vec::new());
        }
        let page = match self.paging {
            Paging::PitSearchAfter => self.pit_page().await?,
            Paging::Scroll => self.scroll_page().await?,
        };
        let raw = page["hits"]["hits"].as_array().cloned().unwrap_or_default();
        // A short PIT page is the last; a scroll says so with an empty page.
        if raw.is_empty()
            || (self.paging == Paging::PitSearchAfter && raw.len() < self.spec.page_size)
        {
            self.done = true;
        }
        if let Some(last) = raw.last() {
            self.search_after = last.get("sort").cloned();
        }
        let mut hits = Vec::with_capacity(raw.len());
        for h in &raw {
            let hit = Hit::from_json(h).ok_or_else(|| {
                WalkError::Fatal(EsError::BadResponse {
                    what: format!("index `{}`: read documents", self.spec.index),
                    detail: format!("a hit without _id/_seq_no/_primary_term: {h}"),
                })
            })?;
            hits.push(hit);
        }
        Ok(hits)
    }

    fn body(&self) -> Value {
        json!({
            "size": self.spec.page_size,
            "query": self.spec.query,
            "_source": self.spec.fields,
            "seq_no_primary_term": true,
        })
    }

    async fn pit_page(&mut self) -> Result<Value, WalkError> {
        let mut body = self.body();
        body["pit"] = json!({
            "id": self.context.as_deref().unwrap_or_default(),
            "keep_alive": keep_alive(self.spec.keep_alive),
        });
        body["sort"] = json!([{ "_shard_doc": "asc" }]);
        // Counting is wasted work on every page (a scroll refuses to turn it off).
        body["track_total_hits"] = json!(false);
        if let Some(after) = &self.search_after {
            body["search_after"] = after.clone();
        }
        let page = request(
            &self.client,
            &self.retry,
            &format!("index `{}`: read a page (point in time)", self.spec.index),
            Method::Post,
            "/_search",
            &[],
            Some(&Body::Json(body)),
        )
        .await
        .map_err(WalkError::from)?;
        if let Some(id) = page["pit_id"].as_str() {
            self.context = Some(id.to_owned());
        }
        Ok(page)
    }

    async fn scroll_page(&mut self) -> Result<Value, WalkError> {
        let ka = keep_alive(self.spec.keep_alive);
        let page = if self.first {
            self.first = false;
            let mut body = self.body();
            body["sort"] = json!(["_doc"]);
            let mut query = vec![("scroll", ka.as_str())];
            if let Some(p) = &self.spec.preference {
                query.push(("preference", p));
            }
            request(
                &self.client,
                &self.retry,
                &format!("index `{}`: open a scroll", self.spec.index),
                Method::Post,
                &format!("/{}/_search", path_segment(&self.spec.index)),
                &query,
                Some(&Body::Json(body)),
            )
            .await
        } else {
            let Some(id) = &self.context else {
                return Ok(Value::Null);
            };
            request(
                &self.client,
                &self.retry,
                &format!("index `{}`: next scroll page", self.spec.index),
                Method::Post,
                "/_search/scroll",
                &[],
                Some(&Body::Json(json!({ "scroll": ka, "scroll_id": id }))),
            )
            .await
        }
        .map_err(WalkError::from)?;
        if let Some(id) = page["_scroll_id"].as_str() {
            self.context = Some(id.to_owned());
        }
        Ok(page)
    }

    /// Frees the scroll or PIT now rather than at the keep-alive; failures are harmless.
    pub async fn close(self) {
        let Some(id) = self.context else { return };
        match self.paging {
            Paging::PitSearchAfter => close_pit(&self.client, &id).await,
            Paging::Scroll => {
                let _ = send(
                    &self.client,
                    Method::Delete,
                    "/_search/scroll",
                    &[],
                    Some(&Body::Json(json!({ "scroll_id": [id] }))),
                )
                .await;
            }
        }
    }
}

fn keep_alive(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

async fn open_pit(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    keep_alive: &str,
) -> Result<String, EsError> {
    let what = format!("index `{index}`: open a point in time");
    let r = request(
        client,
        retry,
        &what,
        Method::Post,
        &format!("/{}/_pit", path_segment(index)),
        &[("keep_alive", keep_alive)],
        None,
    )
    .await?;
    r["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or(EsError::BadResponse {
            what,
            detail: format!("no id in {r}"),
        })
}

async fn close_pit(client: &Elasticsearch, id: &str) {
    let _ = send(
        client,
        Method::Delete,
        "/_pit",
        &[],
        Some(&Body::Json(json!({ "id": id }))),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(!version_at_least("7.10.2", 7, 12));
        assert!(version_at_least("7.12.0", 7, 12));
        assert!(version_at_least("8.14.1", 7, 12));
        assert!(version_at_least("8.0.0-SNAPSHOT", 7, 12));
        assert!(!version_at_least("6.8.23", 7, 12));
    }

    #[test]
    fn lost_or_fatal() {
        let status = |status, ty: &str| EsError::Status {
            what: "x".into(),
            status,
            error_type: ty.into(),
            reason: String::new(),
        };
        assert!(matches!(
            WalkError::from(status(404, "search_context_missing_exception")),
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

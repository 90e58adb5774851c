//! Reading every hit of a query, page by page, from one consistent view of the indices.
//!
//! Two ways to page, chosen once per [`Scanner`] and then cached:
//!
//! - **Point in time + `search_after`**, sorted by `_shard_doc` (Elasticsearch ≥ 7.12 with
//!   X-Pack, which every 8.x has). A PIT is cheap to open and needs no server-side cursor per
//!   page.
//! - **Scroll**, sorted by `_doc`, for clusters without PIT: the OSS/no-X-Pack 7.x builds (the
//!   7.10.2 test node answers `POST /idx/_pit` with 400) and 7.10–7.11, whose PIT has no
//!   `_shard_doc` to give `search_after` a unique, cheap sort key.
//!
//! Both visit documents in index order (no scoring, no sorting on article fields), the
//! cheapest order there is. A query whose hits fit in one page can skip the paging machinery
//! altogether ([`ScanOptions::single_request_first`]): one plain search with an exact
//! total answers it, which saves opening and closing a PIT or scroll (two round trips).

use std::time::Duration;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use super::mapping::path_segment_keep_patterns;
use super::{request, send, Body, EsError, RetryPolicy};

/// How to page through a query's hits.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Paging {
    /// Point in time where the cluster has it (≥ 7.12), scroll otherwise. Detected once per
    /// [`Scanner`].
    #[default]
    Auto,
    /// Point in time + `search_after` on `_shard_doc`; fails on clusters without it.
    Pit,
    /// Scroll sorted by `_doc`.
    Scroll,
}

impl Paging {
    pub fn name(self) -> &'static str {
        match self {
            Paging::Auto => "auto",
            Paging::Pit => "pit",
            Paging::Scroll => "scroll",
        }
    }
}

impl std::fmt::Display for Paging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Paging {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Paging::Auto, Paging::Pit, Paging::Scroll]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown paging `{s}`: use auto, pit or scroll"))
    }
}

/// Page size and context lifetimes.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// Hits per page.
    pub page_size: usize,
    /// How long the PIT or scroll context lives between two pages.
    pub keep_alive: Duration,
    /// First try one plain search with an exact total (`track_total_hits`). When every hit
    /// fits in it, that is the whole answer and no PIT or scroll is opened; otherwise its hits
    /// are dropped and paging starts from the beginning. Good for selective queries (the
    /// near-duplicate candidates); wasteful for a walk over a whole index.
    pub single_request_first: bool,
    /// Paging method (see [`Paging`]).
    pub paging: Paging,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            page_size: 1000,
            keep_alive: Duration::from_secs(60),
            single_request_first: false,
            paging: Paging::Auto,
        }
    }
}

/// Pages through queries on one cluster. Remembers whether the cluster supports PIT, so
/// the detection costs requests only on the first scan. Cheap to share behind a reference.
#[derive(Debug)]
pub struct Scanner {
    client: Elasticsearch,
    retry: RetryPolicy,
    pit_supported: OnceCell<bool>,
}

/// What one scan did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Hits returned to the caller.
    pub hits: u64,
    /// Search requests sent (not counting opening or closing a PIT or scroll).
    pub requests: u32,
    /// How it paged: `None` when the single first request held everything.
    pub paging: Option<Paging>,
}

impl Scanner {
    pub fn new(client: Elasticsearch, retry: RetryPolicy) -> Scanner {
        Scanner {
            client,
            retry,
            pit_supported: OnceCell::new(),
        }
    }

    pub fn client(&self) -> &Elasticsearch {
        &self.client
    }

    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Whether the cluster has point-in-time with `_shard_doc` (≥ 7.12), once known.
    pub fn pit_supported(&self) -> Option<bool> {
        self.pit_supported.get().copied()
    }

    /// Calls `on_page` with each page of hits (the raw `hits.hits` objects) of `body` run
    /// against `indices` (comma-separated names, aliases or patterns), until the hits run out
    /// or `on_page` returns `false`. `body` holds the query and what to fetch (`_source`,
    /// `docvalue_fields`, …); the scanner adds `size`, `sort` and the paging fields. The
    /// PIT or scroll context is closed on every way out.
    pub async fn scan<F>(
        &self,
        indices: &str,
        body: &Value,
        options: &ScanOptions,
        mut on_page: F,
    ) -> Result<ScanStats, EsError>
    where
        F: FnMut(Vec<Value>) -> bool,
    {
        let size = options.page_size.max(1);
        let mut stats = ScanStats::default();
        let search_path = format!("/{}/_search", path_segment_keep_patterns(indices));
        let what = format!("index `{indices}`: search");

        if options.single_request_first {
            let mut first = body.clone();
            first["size"] = json!(size);
            first["sort"] = json!(["_doc"]);
            first["track_total_hits"] = json!(true);
            let r = request(
                &self.client,
                &self.retry,
                &what,
                Method::Post,
                &search_path,
                &[],
                Some(&Body::Json(first)),
            )
            .await?;
            stats.requests += 1;
            let hits = take_hits(r.clone());
            let total = r["hits"]["total"]["value"].as_u64();
            let exact = r["hits"]["total"]["relation"].as_str() != Some("gte");
            if exact && total.is_some_and(|t| t <= hits.len() as u64) {
                stats.hits = hits.len() as u64;
                if !hits.is_empty() {
                    on_page(hits);
                }
                return Ok(stats);
            }
        }

        let pit = match options.paging {
            Paging::Auto => self.try_open_pit(indices, options.keep_alive).await?,
            Paging::Pit => Some(self.open_pit(indices, options.keep_alive).await?),
            Paging::Scroll => None,
        };
        match pit {
            Some(pit_id) => {
                stats.paging = Some(Paging::Pit);
                self.scan_pit(
                    indices,
                    pit_id,
                    body,
                    size,
                    options,
                    &mut stats,
                    &mut on_page,
                )
                .await?
            }
            None => {
                stats.paging = Some(Paging::Scroll);
                self.scan_scroll(
                    &search_path,
                    &what,
                    body,
                    size,
                    options,
                    &mut stats,
                    &mut on_page,
                )
                .await?
            }
        }
        Ok(stats)
    }

    /// Opens a PIT on `indices` if the cluster has one usable for paging, else `None`.
    ///
    /// PIT needs X-Pack and, for a unique cheap sort key (`_shard_doc`), 7.12 or newer: the
    /// version decides first. A cluster new enough that still answers the PIT endpoint with
    /// 400/404/405 (an OSS build, another product behind the same API) pages with scroll.
    /// The answer is remembered, so later scans go straight to the right method.
    async fn try_open_pit(
        &self,
        indices: &str,
        keep_alive: Duration,
    ) -> Result<Option<String>, EsError> {
        if self.pit_supported.get() == Some(&false) {
            return Ok(None);
        }
        if self.pit_supported.get().is_none() {
            let info = request(
                &self.client,
                &self.retry,
                "GET /",
                Method::Get,
                "/",
                &[],
                None,
            )
            .await?;
            let version = info["version"]["number"].as_str().unwrap_or("0");
            let distribution = info["version"]["distribution"].as_str().unwrap_or("");
            if distribution == "opensearch" || !version_at_least(version, 7, 12) {
                tracing::debug!(
                    version,
                    "no point in time with _shard_doc: paging with scroll"
                );
                let _ = self.pit_supported.set(false);
                return Ok(None);
            }
        }
        match self.open_pit(indices, keep_alive).await {
            Ok(id) => {
                let _ = self.pit_supported.set(true);
                Ok(Some(id))
            }
            Err(e) if self.pit_supported.get().is_none() && pit_unavailable(&e) => {
                tracing::debug!(error = %e, "point in time unavailable: paging with scroll");
                let _ = self.pit_supported.set(false);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn open_pit(&self, indices: &str, keep_alive: Duration) -> Result<String, EsError> {
        let r = request(
            &self.client,
            &self.retry,
            &format!("index `{indices}`: open point in time"),
            Method::Post,
            &format!("/{}/_pit", path_segment_keep_patterns(indices)),
            &[("keep_alive", &keep_alive_param(keep_alive))],
            None,
        )
        .await?;
        r["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| EsError::BadResponse {
                what: format!("index `{indices}`: open point in time"),
                detail: format!("no `id` in {r}"),
            })
    }

    /// Frees the PIT now rather than at keep-alive; failing is harmless.
    async fn close_pit(&self, id: &str) {
        let _ = send(
            &self.client,
            Method::Delete,
            "/_pit",
            &[],
            Some(&Body::Json(json!({ "id": id }))),
        )
        .await;
    }

    #[allow(clippy::too_many_arguments)]
    async fn scan_pit<F>(
        &self,
        indices: &str,
        mut pit_id: String,
        body: &Value,
        size: usize,
        options: &ScanOptions,
        stats: &mut ScanStats,
        on_page: &mut F,
    ) -> Result<(), EsError>
    where
        F: FnMut(Vec<Value>) -> bool,
    {
        let keep_alive = keep_alive_param(options.keep_alive);
        let mut after: Option<Value> = None;
        let result = loop {
            let page_body = pit_page_body(body, size, &pit_id, &keep_alive, after.as_ref());
            let r = match request(
                &self.client,
                &self.retry,
                &format!("index `{indices}`: search (point in time)"),
                Method::Post,
                "/_search",
                &[],
                Some(&Body::Json(page_body)),
            )
            .await
            {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            stats.requests += 1;
            // The id may change from page to page; the newest one is the one to use.
            if let Some(id) = r["pit_id"].as_str() {
                pit_id = id.to_owned();
            }
            let hits = take_hits(r);
            let n = hits.len();
            after = hits.last().map(|h| h["sort"].clone());
            stats.hits += n as u64;
            if n == 0 || !on_page(hits) || n < size {
                break Ok(());
            }
        };
        self.close_pit(&pit_id).await;
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn scan_scroll<F>(
        &self,
        search_path: &str,
        what: &str,
        body: &Value,
        size: usize,
        options: &ScanOptions,
        stats: &mut ScanStats,
        on_page: &mut F,
    ) -> Result<(), EsError>
    where
        F: FnMut(Vec<Value>) -> bool,
    {
        let keep_alive = keep_alive_param(options.keep_alive);
        let mut first = body.clone();
        first["size"] = json!(size);
        first["sort"] = json!(["_doc"]);
        let mut r = request(
            &self.client,
            &self.retry,
            what,
            Method::Post,
            search_path,
            &[("scroll", &keep_alive)],
            Some(&Body::Json(first)),
        )
        .await?;
        stats.requests += 1;
        let mut scroll_id = r["_scroll_id"].as_str().map(str::to_owned);
        let result = loop {
            let hits = take_hits(r);
            let n = hits.len();
            stats.hits += n as u64;
            if n == 0 || !on_page(hits) || n < size {
                break Ok(());
            }
            let Some(id) = &scroll_id else { break Ok(()) };
            r = match request(
                &self.client,
                &self.retry,
                &format!("{what}: next scroll page"),
                Method::Post,
                "/_search/scroll",
                &[],
                Some(&Body::Json(
                    json!({ "scroll": keep_alive, "scroll_id": id }),
                )),
            )
            .await
            {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            stats.requests += 1;
            scroll_id = r["_scroll_id"].as_str().map(str::to_owned).or(scroll_id);
        };
        if let Some(id) = scroll_id {
            let _ = send(
                &self.client,
                Method::Delete,
                "/_search/scroll",
                &[],
                Some(&Body::Json(json!({ "scroll_id": [id] }))),
            )
            .await;
        }
        result
    }
}

/// The body of one PIT page: the caller's query and fetch fields, plus the PIT, the sort on
/// `_shard_doc` and, after the first page, the previous page's last sort values.
fn pit_page_body(
    body: &Value,
    size: usize,
    pit_id: &str,
    keep_alive: &str,
    after: Option<&Value>,
) -> Value {
    let mut b = body.clone();
    b["size"] = json!(size);
    b["pit"] = json!({ "id": pit_id, "keep_alive": keep_alive });
    b["sort"] = json!([{ "_shard_doc": "asc" }]);
    b["track_total_hits"] = json!(false);
    if let Some(a) = after {
        b["search_after"] = a.clone();
    }
    b
}

fn take_hits(mut r: Value) -> Vec<Value> {
    match r["hits"]["hits"].take() {
        Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// A keep-alive as Elasticsearch's time unit (whole seconds, at least 1).
fn keep_alive_param(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// Whether an error opening a PIT means "this cluster has no PIT" (not "something is wrong").
fn pit_unavailable(e: &EsError) -> bool {
    matches!(
        e,
        EsError::Status {
            status: 400 | 404 | 405,
            ..
        }
    )
}

/// `7.12.1` ≥ (7, 12)? Unparsable versions count as old.
fn version_at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(ma), Some(mi)) => (ma, mi) >= (major, minor),
        _ => false,
    }
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
        assert!(!version_at_least("x", 7, 12));
    }

    #[test]
    fn pit_pages_carry_the_pit_sort_and_search_after() {
        let body = json!({ "query": { "match_all": {} }, "_source": false });
        let b = pit_page_body(&body, 50, "abc", "60s", None);
        assert_eq!(b["pit"], json!({ "id": "abc", "keep_alive": "60s" }));
        assert_eq!(b["sort"], json!([{ "_shard_doc": "asc" }]));
        assert_eq!(b["size"], 50);
        assert!(b.get("search_after").is_none());
        assert_eq!(b["query"], body["query"]);
        let after = json!([12345]);
        let b = pit_page_body(&body, 50, "def", "60s", Some(&after));
        assert_eq!(b["search_after"], after);
        assert_eq!(b["pit"]["id"], "def");
    }

    #[test]
    fn only_missing_endpoints_mean_no_pit() {
        let status = |s| EsError::Status {
            what: "pit".into(),
            status: s,
            error_type: "illegal_argument_exception".into(),
            reason: "request [/_all/_pit] contains unrecognized parameter: [keep_alive]".into(),
        };
        assert!(pit_unavailable(&status(400)));
        assert!(pit_unavailable(&status(405)));
        assert!(!pit_unavailable(&status(500)));
        assert!(!pit_unavailable(&EsError::Unauthorized {
            status: 403,
            reason: "no".into()
        }));
        assert_eq!("scroll".parse::<Paging>(), Ok(Paging::Scroll));
    }
}

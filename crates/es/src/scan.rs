//! The one paging layer: reading every hit of a query, page by page, from one consistent view
//! of the indices. `similar`, the worker and the back-fill all read through it.
//!
//! Two ways to page, chosen once per [`Scanner`] (and its clones) and then cached:
//!
//! - **Point in time + `search_after`**, sorted by `_shard_doc` (Elasticsearch ≥ 7.12 with
//!   X-Pack, which every 8.x and 9.x has). A PIT is cheap to open and needs no server-side
//!   cursor per page.
//! - **Scroll**, sorted by `_doc`, for clusters without PIT: OpenSearch (whose PIT API is
//!   another one), the OSS/no-X-Pack 7.x builds (the 7.10.2 test node answers
//!   `POST /idx/_pit` with 400) and 7.10–7.11, whose PIT has no `_shard_doc` to give
//!   `search_after` a unique, cheap sort key. A read limited to shards (`preference`) uses
//!   scroll too: a PIT cannot be limited to a shard.
//!
//! Both visit documents in index order (no scoring, no sorting on article fields), the
//! cheapest order there is.
//!
//! ## Pull or push
//!
//! [`Scanner::cursor`] gives a [`Cursor`]: [`Cursor::next_page`] until it returns an empty
//! page, then [`Cursor::close`] (also after stopping early) to free the PIT or scroll now
//! rather than at its keep-alive. [`Scanner::scan`] is a loop over a cursor that hands each
//! page to a callback.
//!
//! ## Retries: never a scroll page twice
//!
//! Requests go through the [`RetryPolicy`] except one. A PIT page is idempotent (the same PIT
//! id and `search_after` give the same page), and so are opening a PIT and the search that
//! opens a scroll (a lost answer leaves at most an unused context that expires). A scroll
//! continuation (`POST /_search/scroll`) is not: if its answer is lost, sending it again
//! returns the *next* page and one page is silently skipped. So a continuation is sent once;
//! when it fails (a connection error, 429, 5xx) the read reports [`EsError::ContextLost`], as
//! it does when the scroll or PIT is gone (404 `search_context_missing_exception`, a node
//! restart, an expired keep-alive, or shards answering without their context). The caller
//! starts again from a safe point: [`Scanner::scan`] reads the whole query once more and
//! passes on only the hits it has not passed on yet; the back-fill runs its resumable query
//! again; the worker's next pass picks up what this one did not write.
//!
//! A query whose hits fit in one page can skip the paging machinery altogether
//! ([`ScanOptions::single_request_first`]): one plain search with an exact total answers it,
//! which saves opening and closing a PIT or scroll (two round trips).
//!
//! ## Slices: one query read by N processes
//!
//! A read can be one [`Slice`] `I/N` of its query ([`ScanOptions::slice`]): N readers (on N
//! machines) with the same query and slices `0/N` … `N-1/N` read every hit exactly once
//! between them. Elasticsearch does the split (a sliced scroll or a sliced PIT); a slice must
//! be the same set of documents whenever and by whoever it is opened, since the N readers
//! open their views at different moments, and a resumed job opens new ones:
//!
//! - A sliced **scroll** splits by the hash of `_id` within a shard, or gives whole shards to
//!   slices when the read covers more shards than there are slices: both depend only on the
//!   document and the index, never on the view.
//! - A sliced **PIT** would split a shard by Lucene doc ids by default, and those change as
//!   segments merge between two views: a document could be in slice 0 of one reader's view
//!   and slice 1 of the other's, and be read by neither. So a sliced PIT names a field,
//!   `_seq_no` (numeric, with doc values, in every index), hashed like `_id`: a document
//!   moves to another slice only when it is written again, which the back-fill's query sees
//!   anyway (a written document no longer matches it, a changed one is walked again by the
//!   catch-up walk of whichever slice it is in then).
//!
//! A sliced read never takes the single-request shortcut: Elasticsearch slices only scrolls
//! and PITs. How evenly the slices split: by the `_id` hash, evenly, where a shard is split;
//! by shards where there are at least as many shards in the read as slices (a shard goes to
//! slice `shard % N`: with 2 slices, an index of 2 or 4 shards splits evenly, one of 3 gives
//! 2/3 and 1/3).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use super::path_segment_keep_patterns;
use super::{request, search, send, Body, EsError, RetryPolicy};

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

/// One slice `I/N` of a read: slices `0/N` … `N-1/N` of the same query read every hit exactly
/// once between them (see the module docs). `0/1` is the whole read.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Slice {
    id: u32,
    max: u32,
}

impl Slice {
    /// Slice `id` of `max`: an error unless `0 ≤ id < max` (so `max ≥ 1`).
    pub fn new(id: u32, max: u32) -> Result<Slice, EsError> {
        if max == 0 {
            return Err(EsError::Config(format!(
                "slice `{id}/{max}`: there must be at least one slice (N ≥ 1 in --slice I/N)"
            )));
        }
        if id >= max {
            return Err(EsError::Config(format!(
                "slice `{id}/{max}`: the slice number runs from 0 to {} (0 ≤ I < N in --slice I/N: with N = {max}, --slice 0/{max} … --slice {}/{max})",
                max - 1,
                max - 1
            )));
        }
        Ok(Slice { id, max })
    }

    /// The slice number `I`, from 0.
    pub fn id(self) -> u32 {
        self.id
    }

    /// The number of slices `N`.
    pub fn max(self) -> u32 {
        self.max
    }

    /// Whether this is the whole read (`0/1`): nothing to tell Elasticsearch.
    pub fn is_whole(self) -> bool {
        self.max == 1
    }

    /// The request's `slice` object, for the paging method; `None` for the whole read.
    fn body(self, paging: Paging) -> Option<Value> {
        if self.is_whole() {
            return None;
        }
        Some(match paging {
            Paging::Pit => json!({ "id": self.id, "max": self.max, "field": "_seq_no" }),
            Paging::Scroll | Paging::Auto => json!({ "id": self.id, "max": self.max }),
        })
    }
}

impl std::fmt::Display for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.id, self.max)
    }
}

impl std::str::FromStr for Slice {
    type Err = EsError;

    /// `I/N`, e.g. `0/2`.
    fn from_str(s: &str) -> Result<Slice, EsError> {
        let bad = || {
            EsError::Config(format!(
                "slice `{s}`: expected I/N, slice I of N counted from 0 (e.g. --slice 0/2 and --slice 1/2 on two machines)"
            ))
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse().map_err(|_| bad())?;
        let n = n.trim().parse().map_err(|_| bad())?;
        Slice::new(i, n)
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
    /// Read one slice of the hits (see [`Slice`]); `None` reads them all.
    pub slice: Option<Slice>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            page_size: 1000,
            keep_alive: Duration::from_secs(60),
            single_request_first: false,
            paging: Paging::Auto,
            slice: None,
        }
    }
}

/// Pages through queries on one cluster. Remembers whether the cluster supports PIT, so
/// the detection costs requests only on the first read; clones share what was detected.
#[derive(Clone, Debug)]
pub struct Scanner {
    client: Elasticsearch,
    retry: RetryPolicy,
    pit_supported: Arc<OnceCell<bool>>,
}

/// What one read did.
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
            pit_supported: Arc::new(OnceCell::new()),
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

    /// The paging `paging` stands for on `indices`: [`Paging::Auto`] becomes [`Paging::Pit`] or
    /// [`Paging::Scroll`] (detected as by the first read, then cached); the others stay.
    pub async fn detect(&self, paging: Paging, indices: &str) -> Result<Paging, EsError> {
        if paging != Paging::Auto {
            return Ok(paging);
        }
        if let Some(&pit) = self.pit_supported.get() {
            return Ok(if pit { Paging::Pit } else { Paging::Scroll });
        }
        match self.try_open_pit(indices, Duration::from_secs(60)).await? {
            Some(id) => {
                close_pit(&self.client, &id).await;
                Ok(Paging::Pit)
            }
            None => Ok(Paging::Scroll),
        }
    }

    /// Walks the documents of `index` (in its own order), calling `each` with the text
    /// `fields` of each until it answers `false` or the index ends; the cursor is closed
    /// either way. A document whose text field is not text is skipped, as the writers skip
    /// it. What learning from an index reads (boilerplate, formula).
    pub async fn each_text(
        &self,
        index: &str,
        fields: &[String],
        mut each: impl FnMut(Vec<&str>) -> bool,
    ) -> Result<(), EsError> {
        let body = json!({ "query": { "match_all": {} }, "_source": fields });
        let mut cursor = self.cursor(index, body, &ScanOptions::default());
        let result = async {
            loop {
                let page = cursor.next_page().await?;
                if page.is_empty() {
                    return Ok(());
                }
                for hit in &page {
                    let Some(src) = hit["_source"].as_object() else {
                        continue;
                    };
                    if let Ok(texts) = neardup_core::input::object_texts(src, fields) {
                        if !each(texts) {
                            return Ok(());
                        }
                    }
                }
            }
        }
        .await;
        cursor.close().await;
        result
    }

    /// A read of `body` run against `indices` (comma-separated names, aliases or patterns).
    /// `body` holds the query and what to fetch (`_source`, `docvalue_fields`,
    /// `seq_no_primary_term`, …); the cursor adds `size`, `sort` and the paging fields.
    /// Nothing is sent before the first [`Cursor::next_page`].
    pub fn cursor(&self, indices: &str, body: Value, options: &ScanOptions) -> Cursor {
        Cursor {
            scanner: self.clone(),
            indices: indices.to_owned(),
            body,
            options: options.clone(),
            preference: None,
            state: State::Start,
            after: None,
            stats: ScanStats::default(),
            total: None,
        }
    }

    /// How many documents of `indices` match `query` (limited to `preference` when given):
    /// the count API, or, for a slice, the exact total of the first page of a sliced read
    /// (Elasticsearch slices only scrolls and PITs), which is then closed.
    pub async fn count(
        &self,
        indices: &str,
        query: &Value,
        options: &ScanOptions,
        preference: Option<&str>,
    ) -> Result<u64, EsError> {
        let what = format!("index `{indices}`: count");
        if options.slice.is_none_or(Slice::is_whole) {
            let params: Vec<(&str, &str)> =
                preference.map(|p| ("preference", p)).into_iter().collect();
            let r = search(
                &self.client,
                &self.retry,
                &what,
                &format!("/{}/_count", path_segment_keep_patterns(indices)),
                &params,
                Some(&Body::Json(json!({ "query": query }))),
            )
            .await?;
            return Ok(r["count"].as_u64().unwrap_or(0));
        }
        let body = json!({ "query": query, "_source": false, "track_total_hits": true });
        let one = ScanOptions {
            page_size: 1,
            single_request_first: false,
            ..options.clone()
        };
        let mut cursor = self.cursor(indices, body, &one);
        if let Some(p) = preference {
            cursor = cursor.with_preference(p);
        }
        let page = cursor.next_page().await;
        let total = cursor.total();
        cursor.close().await;
        page?;
        total.ok_or_else(|| EsError::BadResponse {
            what,
            detail: "no hits.total in the first page of a sliced read".into(),
        })
    }

    /// Calls `on_page` with each page of hits (the raw `hits.hits` objects) of `body` run
    /// against `indices`, until the hits run out or `on_page` returns `false`. The PIT or
    /// scroll is closed on every way out.
    ///
    /// When the read loses its context ([`EsError::ContextLost`]) it starts once more from the
    /// beginning on a fresh view and passes on only hits (by `_index` and `_id`) it has not
    /// passed on before: `on_page` sees every hit at most once and, unless the second read
    /// loses its context too (then that error is returned), every hit of the query. That
    /// costs a set of the ids passed on, fine for the selective queries this is meant for.
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
        let mut stats = ScanStats::default();
        let mut passed: HashSet<(String, String)> = HashSet::new();
        let mut again = false;
        loop {
            let mut cursor = self.cursor(indices, body.clone(), options);
            let result = loop {
                let mut hits = match cursor.next_page().await {
                    Ok(hits) if hits.is_empty() => break Ok(()),
                    Ok(hits) => hits,
                    Err(e) => break Err(e),
                };
                hits.retain(|h| passed.insert(hit_key(h)));
                if hits.is_empty() {
                    continue;
                }
                stats.hits += hits.len() as u64;
                if !on_page(hits) {
                    break Ok(());
                }
            };
            cursor.close().await;
            stats.requests += cursor.stats.requests;
            stats.paging = cursor.stats.paging;
            match result {
                Err(e @ EsError::ContextLost { .. }) if !again => {
                    tracing::warn!(error = %e, "reading the query again from the start");
                    again = true;
                }
                Err(e) => return Err(e),
                Ok(()) => return Ok(stats),
            }
        }
    }

    /// Opens a PIT on `indices` if the cluster has one usable for paging, else `None`.
    ///
    /// PIT needs X-Pack and, for a unique cheap sort key (`_shard_doc`), 7.12 or newer, and
    /// not OpenSearch: the version decides first (on older nodes `POST /idx/_pit` would be
    /// routed as "index a document of type `_pit`"). A cluster new enough that still answers
    /// the PIT endpoint with 400/404/405 (an OSS build, another product behind the same API)
    /// pages with scroll. The answer is remembered, so later reads go straight to the right
    /// method.
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
        let what = format!("index `{indices}`: open point in time");
        let r = request(
            &self.client,
            &self.retry,
            &what,
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
                what,
                detail: format!("no `id` in {r}"),
            })
    }
}

/// Where a [`Cursor`] is.
#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Nothing sent yet.
    Start,
    /// Reading pages of a point in time (the newest id the cluster returned).
    Pit(String),
    /// The search that opens the scroll is next: paging did not open a PIT.
    ScrollOpen,
    /// Reading scroll pages (the newest scroll id).
    Scroll(String),
    /// The hits ran out, or a page failed; the context (if any) still needs closing.
    Done(Option<Context>),
}

/// A PIT or scroll to close.
#[derive(Clone, Debug, PartialEq)]
enum Context {
    Pit(String),
    Scroll(String),
}

/// One search request of a read, and whether the [`RetryPolicy`] may send it again.
#[derive(Clone, Debug)]
struct Step {
    what: String,
    path: String,
    params: Vec<(&'static str, String)>,
    body: Value,
    retryable: bool,
}

/// An open read of one query (see [`Scanner::cursor`]). Call [`Cursor::close`] when done,
/// also after stopping early, to free the PIT or scroll now rather than at its keep-alive.
#[derive(Debug)]
pub struct Cursor {
    scanner: Scanner,
    indices: String,
    body: Value,
    options: ScanOptions,
    preference: Option<String>,
    state: State,
    /// The last hit's sort values (PIT).
    after: Option<Value>,
    stats: ScanStats,
    total: Option<u64>,
}

impl Cursor {
    /// Limits the read to some shards or nodes (`preference`, e.g. `_shards:2`). With
    /// [`Paging::Auto`] such a read uses scroll; with [`Paging::Pit`] it fails, as a PIT
    /// cannot be limited to shards.
    pub fn with_preference(mut self, preference: impl Into<String>) -> Cursor {
        self.preference = Some(preference.into());
        self
    }

    /// What the read did so far.
    pub fn stats(&self) -> &ScanStats {
        &self.stats
    }

    /// The query's total hits as the first answer gave it, when it had one (ask for an exact
    /// count with `"track_total_hits": true` in the body).
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// The next page of hits (the raw `hits.hits` objects); an empty page at the end. A lost
    /// context is [`EsError::ContextLost`] (see the module docs); after any error the cursor
    /// is done and only needs closing.
    pub async fn next_page(&mut self) -> Result<Vec<Value>, EsError> {
        let result = self.fetch().await;
        let hits = match result {
            Ok(hits) => hits,
            Err(e) => {
                self.finish();
                return Err(e);
            }
        };
        let last_page = hits.len() < self.page_size();
        self.after = hits.last().map(|h| h["sort"].clone());
        self.stats.hits += hits.len() as u64;
        if last_page {
            self.finish();
        }
        Ok(hits)
    }

    /// Frees the PIT or scroll; failing is harmless (it expires at its keep-alive).
    pub async fn close(&mut self) {
        let context = match std::mem::replace(&mut self.state, State::Done(None)) {
            State::Pit(id) | State::Done(Some(Context::Pit(id))) => Context::Pit(id),
            State::Scroll(id) | State::Done(Some(Context::Scroll(id))) => Context::Scroll(id),
            State::Start | State::ScrollOpen | State::Done(None) => return,
        };
        let client = &self.scanner.client;
        match context {
            Context::Pit(id) => close_pit(client, &id).await,
            Context::Scroll(id) => {
                let body = Body::Json(json!({ "scroll_id": [id] }));
                let _ = send(client, Method::Delete, "/_search/scroll", &[], Some(&body)).await;
            }
        }
    }

    fn page_size(&self) -> usize {
        self.options.page_size.max(1)
    }

    /// The `slice` object of this read's requests when paging as `paging`, if it is a slice.
    fn slice_body(&self, paging: Paging) -> Option<Value> {
        self.options.slice.and_then(|s| s.body(paging))
    }

    /// Marks the read done, keeping the context to close.
    fn finish(&mut self) {
        self.state = match std::mem::replace(&mut self.state, State::Done(None)) {
            State::Pit(id) => State::Done(Some(Context::Pit(id))),
            State::Scroll(id) => State::Done(Some(Context::Scroll(id))),
            State::Done(c) => State::Done(c),
            State::Start | State::ScrollOpen => State::Done(None),
        };
    }

    /// The hits of the next page, with the state moved on.
    async fn fetch(&mut self) -> Result<Vec<Value>, EsError> {
        if self.state == State::Start {
            if self.options.single_request_first && self.slice_body(Paging::Scroll).is_none() {
                if let Some(hits) = self.single_request().await? {
                    self.state = State::Done(None);
                    return Ok(hits);
                }
            }
            self.state = self.open().await?;
        }
        let Some(step) = self.next_step() else {
            return Ok(Vec::new());
        };
        let reply = self.send(&step).await;
        // Every error after the context exists may mean it is gone; on a scroll page, that
        // the page was consumed.
        let mut r = match (&self.state, reply) {
            (_, Ok(r)) => r,
            (State::Scroll(_), Err(e)) if e.is_transient() || context_missing(&e) => {
                return Err(lost(&step.what, e))
            }
            (State::Pit(_), Err(e)) if context_missing(&e) => return Err(lost(&step.what, e)),
            (_, Err(e)) => return Err(e),
        };
        check_shards(&step.what, &r)?;
        self.stats.requests += 1;
        if self.total.is_none() {
            self.total = r["hits"]["total"]["value"].as_u64();
        }
        // The id may change from page to page; the newest one is the one to use.
        self.state = match std::mem::replace(&mut self.state, State::Done(None)) {
            State::Pit(id) => State::Pit(r["pit_id"].as_str().map_or(id, str::to_owned)),
            State::ScrollOpen => match r["_scroll_id"].as_str() {
                Some(id) => State::Scroll(id.to_owned()),
                None => State::Done(None),
            },
            State::Scroll(id) => State::Scroll(r["_scroll_id"].as_str().map_or(id, str::to_owned)),
            other => other,
        };
        Ok(take_hits(&mut r))
    }

    /// One plain search with an exact total: its hits when they are all the query has.
    async fn single_request(&mut self) -> Result<Option<Vec<Value>>, EsError> {
        let step = self.single_step();
        let mut r = self.send(&step).await?;
        check_shards(&step.what, &r)?;
        self.stats.requests += 1;
        let hits = take_hits(&mut r);
        let total = r["hits"]["total"]["value"].as_u64();
        let exact = r["hits"]["total"]["relation"].as_str() != Some("gte");
        if exact && total.is_some_and(|t| t <= hits.len() as u64) {
            self.total = total;
            Ok(Some(hits))
        } else {
            Ok(None)
        }
    }

    /// Opens the PIT, or chooses scroll.
    async fn open(&mut self) -> Result<State, EsError> {
        let scanner = &self.scanner;
        let keep_alive = self.options.keep_alive;
        let pit = match (self.options.paging, &self.preference) {
            (Paging::Pit, Some(_)) => {
                return Err(EsError::Config(format!(
                    "index `{}`: a point-in-time read cannot be limited to shards (preference); page with scroll",
                    self.indices
                )))
            }
            (Paging::Scroll, _) | (Paging::Auto, Some(_)) => None,
            (Paging::Pit, None) => Some(scanner.open_pit(&self.indices, keep_alive).await?),
            (Paging::Auto, None) => scanner.try_open_pit(&self.indices, keep_alive).await?,
        };
        Ok(match pit {
            Some(id) => {
                self.stats.paging = Some(Paging::Pit);
                State::Pit(id)
            }
            None => {
                self.stats.paging = Some(Paging::Scroll);
                State::ScrollOpen
            }
        })
    }

    fn search_path(&self) -> String {
        format!("/{}/_search", path_segment_keep_patterns(&self.indices))
    }

    fn preference_param(&self) -> Vec<(&'static str, String)> {
        self.preference
            .iter()
            .map(|p| ("preference", p.clone()))
            .collect()
    }

    fn single_step(&self) -> Step {
        let mut body = self.body.clone();
        body["size"] = json!(self.page_size());
        body["sort"] = json!(["_doc"]);
        body["track_total_hits"] = json!(true);
        Step {
            what: format!("index `{}`: search", self.indices),
            path: self.search_path(),
            params: self.preference_param(),
            body,
            retryable: true,
        }
    }

    /// The request for the next page in the current state; `None` when there is none.
    fn next_step(&self) -> Option<Step> {
        let keep_alive = keep_alive_param(self.options.keep_alive);
        match &self.state {
            State::Pit(id) => Some(Step {
                what: format!("index `{}`: search (point in time)", self.indices),
                path: "/_search".into(),
                params: Vec::new(),
                body: pit_page_body(
                    &self.body,
                    self.page_size(),
                    id,
                    &keep_alive,
                    self.after.as_ref(),
                    self.slice_body(Paging::Pit),
                ),
                retryable: true,
            }),
            State::ScrollOpen => {
                let mut body = self.body.clone();
                body["size"] = json!(self.page_size());
                body["sort"] = json!(["_doc"]);
                if let Some(slice) = self.slice_body(Paging::Scroll) {
                    body["slice"] = slice;
                }
                let mut params = vec![("scroll", keep_alive)];
                params.extend(self.preference_param());
                Some(Step {
                    what: format!("index `{}`: search (open a scroll)", self.indices),
                    path: self.search_path(),
                    params,
                    body,
                    retryable: true,
                })
            }
            State::Scroll(id) => Some(Step {
                what: format!("index `{}`: next scroll page", self.indices),
                path: "/_search/scroll".into(),
                params: Vec::new(),
                body: json!({ "scroll": keep_alive, "scroll_id": id }),
                // Sent again after a lost answer, it would return the page after.
                retryable: false,
            }),
            State::Start | State::Done(_) => None,
        }
    }

    async fn send(&self, step: &Step) -> Result<Value, EsError> {
        let once = RetryPolicy::none();
        let retry = if step.retryable {
            &self.scanner.retry
        } else {
            &once
        };
        let params: Vec<(&str, &str)> = step.params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        request(
            &self.scanner.client,
            retry,
            &step.what,
            Method::Post,
            &step.path,
            &params,
            Some(&Body::Json(step.body.clone())),
        )
        .await
    }
}

/// The body of one PIT page: the caller's query and fetch fields, plus the PIT, the sort on
/// `_shard_doc`, the slice (on every page: each is a search of its own) and, after the first
/// page, the previous page's last sort values. Counting is wasted work after the first page
/// (and on it, unless the caller asked for it).
fn pit_page_body(
    body: &Value,
    size: usize,
    pit_id: &str,
    keep_alive: &str,
    after: Option<&Value>,
    slice: Option<Value>,
) -> Value {
    let mut b = body.clone();
    if let Some(slice) = slice {
        b["slice"] = slice;
    }
    b["size"] = json!(size);
    b["pit"] = json!({ "id": pit_id, "keep_alive": keep_alive });
    b["sort"] = json!([{ "_shard_doc": "asc" }]);
    if after.is_some() || b.get("track_total_hits").is_none() {
        b["track_total_hits"] = json!(false);
    }
    if let Some(a) = after {
        b["search_after"] = a.clone();
    }
    b
}

fn take_hits(r: &mut Value) -> Vec<Value> {
    match r["hits"]["hits"].take() {
        Value::Array(a) => a,
        _ => Vec::new(),
    }
}

/// `(_index, _id)` of a hit, to pass each on once.
fn hit_key(h: &Value) -> (String, String) {
    let s = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
    (s("_index"), s("_id"))
}

/// Frees a PIT now rather than at its keep-alive; failing is harmless.
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

/// Whether the scroll or PIT a page needs is gone: `search_context_missing_exception`
/// (`SearchContextMissingException` in some messages), also as the root cause of a failed
/// search; an expired or unknown PIT.
fn context_missing(e: &EsError) -> bool {
    match e {
        EsError::Status {
            status,
            error_type,
            reason,
            ..
        } => {
            let text = format!("{error_type} {reason}");
            text.contains("search_context_missing")
                || text.contains("SearchContextMissingException")
                || (*status == 404 && text.contains("point in time"))
        }
        _ => false,
    }
}

fn lost(what: &str, cause: EsError) -> EsError {
    EsError::ContextLost {
        what: what.to_owned(),
        cause: Box::new(cause),
    }
}

/// A page that some shards did not answer is incomplete: an error, never a short page. Shards
/// that lost their context make it [`EsError::ContextLost`].
fn check_shards(what: &str, r: &Value) -> Result<(), EsError> {
    match crate::client::shards_failed(what, r) {
        None => Ok(()),
        Some(e) if context_missing(&e) => Err(lost(what, e)),
        Some(e) => Err(e),
    }
}

/// Whether `version` (`7.12.1`, `8.0.0-SNAPSHOT`, `8.x`) is at least `major.minor`. A major
/// above `major` is enough whatever follows; an unparsable version counts as old.
fn version_at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(ma), _) if ma > major => true,
        (Some(ma), Some(mi)) => ma == major && mi >= minor,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EsConfig;

    #[test]
    fn versions() {
        for (v, want) in [
            ("7.10.2", false),
            ("7.10.2-SNAPSHOT", false),
            ("7.12.0", true),
            ("7.12.1", true),
            ("8.0.0-SNAPSHOT", true),
            ("8.14.1", true),
            ("8.19.21", true),
            ("9.5.3", true),
            ("8.x", true),
            ("7.x", false),
            ("6.8.23", false),
            ("x", false),
            ("", false),
        ] {
            assert_eq!(version_at_least(v, 7, 12), want, "{v}");
        }
    }

    #[test]
    fn pit_pages_carry_the_pit_sort_and_search_after() {
        let body = json!({ "query": { "match_all": {} }, "_source": false });
        let b = pit_page_body(&body, 50, "abc", "60s", None, None);
        assert_eq!(b["pit"], json!({ "id": "abc", "keep_alive": "60s" }));
        assert_eq!(b["sort"], json!([{ "_shard_doc": "asc" }]));
        assert_eq!(b["size"], 50);
        assert_eq!(b["track_total_hits"], false);
        assert!(b.get("search_after").is_none());
        assert_eq!(b["query"], body["query"]);
        let after = json!([12345]);
        let b = pit_page_body(&body, 50, "def", "60s", Some(&after), None);
        assert_eq!(b["search_after"], after);
        assert_eq!(b["pit"]["id"], "def");
        // A count asked for comes with the first page only.
        let counted = json!({ "query": { "match_all": {} }, "track_total_hits": true });
        assert_eq!(
            pit_page_body(&counted, 5, "a", "1s", None, None)["track_total_hits"],
            true
        );
        assert_eq!(
            pit_page_body(&counted, 5, "a", "1s", Some(&after), None)["track_total_hits"],
            false
        );
    }

    #[test]
    fn slices_are_validated_once_and_sent_with_every_sliced_request() {
        let s: Slice = "1/3".parse().unwrap();
        assert_eq!((s.id(), s.max(), s.to_string()), (1, 3, "1/3".to_owned()));
        assert!("0/1".parse::<Slice>().unwrap().is_whole());
        for (bad, says) in [
            ("2/2", "0 ≤ I < N"),
            ("5/2", "--slice 1/2"),
            ("0/0", "at least one slice"),
            ("1", "expected I/N"),
            ("-1/2", "expected I/N"),
            ("a/b", "expected I/N"),
        ] {
            let e = bad.parse::<Slice>().unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
        // The whole read sends no slice; a PIT slices on `_seq_no`, which no merge changes.
        assert_eq!(Slice::new(0, 1).unwrap().body(Paging::Scroll), None);
        assert_eq!(s.body(Paging::Scroll), Some(json!({ "id": 1, "max": 3 })));
        assert_eq!(
            s.body(Paging::Pit),
            Some(json!({ "id": 1, "max": 3, "field": "_seq_no" }))
        );
        let client = EsConfig::new("http://127.0.0.1:9")
            .unwrap()
            .client()
            .unwrap();
        let options = ScanOptions {
            slice: Some(s),
            single_request_first: true,
            ..ScanOptions::default()
        };
        let mut c = Scanner::new(client, RetryPolicy::none()).cursor(
            "news",
            json!({ "query": { "match_all": {} } }),
            &options,
        );
        assert!(
            c.slice_body(Paging::Scroll).is_some(),
            "a sliced read skips the single request (Elasticsearch slices only scrolls and PITs)"
        );
        c.state = State::ScrollOpen;
        assert_eq!(
            c.next_step().unwrap().body["slice"],
            json!({ "id": 1, "max": 3 })
        );
        c.state = State::Scroll("s1".into());
        assert!(
            c.next_step().unwrap().body.get("slice").is_none(),
            "the scroll keeps it"
        );
        c.state = State::Pit("p1".into());
        c.after = Some(json!([7]));
        assert_eq!(c.next_step().unwrap().body["slice"]["field"], "_seq_no");
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

    fn cursor_at(url: &str, retry: RetryPolicy) -> Cursor {
        let client = EsConfig::new(url).unwrap().client().unwrap();
        Scanner::new(client, retry).cursor(
            "news",
            json!({ "query": { "match_all": {} } }),
            &ScanOptions::default(),
        )
    }

    #[test]
    fn a_scroll_continuation_is_never_retried_everything_else_is() {
        // Never contacted: this test looks at the requests a cursor would send.
        let mut c = cursor_at("http://127.0.0.1:9", RetryPolicy::default());
        assert!(c.single_step().retryable, "a plain search is idempotent");
        c.state = State::ScrollOpen;
        let open = c.next_step().unwrap();
        assert!(
            open.retryable,
            "opening a scroll again costs an unused context"
        );
        assert_eq!(open.path, "/news/_search");
        assert!(open.params.iter().any(|(k, _)| *k == "scroll"));
        c.state = State::Scroll("s1".into());
        let next = c.next_step().unwrap();
        assert_eq!(next.path, "/_search/scroll");
        assert_eq!(next.body["scroll_id"], "s1");
        assert!(!next.retryable, "a scroll page sent twice skips a page");
        c.state = State::Pit("p1".into());
        c.after = Some(json!([7]));
        let page = c.next_step().unwrap();
        assert!(page.retryable, "same PIT and search_after, same page");
        assert_eq!(page.body["search_after"], json!([7]));
        c.state = State::Done(None);
        assert!(c.next_step().is_none());
    }

    #[test]
    fn a_failed_scroll_page_is_a_lost_context() {
        let e = EsError::Status {
            what: "x".into(),
            status: 404,
            error_type: "search_phase_execution_exception".into(),
            reason: "all shards failed (root cause: search_context_missing_exception: No search context found for id [3])".into(),
        };
        assert!(context_missing(&e));
        assert!(!context_missing(&EsError::Status {
            what: "x".into(),
            status: 400,
            error_type: "parsing_exception".into(),
            reason: "unknown query".into(),
        }));
        // Shards that answer without their context make the page lost, not short.
        let partial = json!({ "_shards": { "total": 2, "failed": 1, "failures": [
            { "shard": 0, "status": 404, "reason": {
                "type": "search_context_missing_exception", "reason": "No search context found for id [9]" } } ] },
            "hits": { "hits": [] } });
        assert!(matches!(
            check_shards("read", &partial),
            Err(EsError::ContextLost { .. })
        ));
        let fine = json!({ "_shards": { "total": 2, "successful": 2, "failed": 0 }, "hits": { "hits": [] } });
        assert!(check_shards("read", &fine).is_ok());
    }

    /// A listener that accepts connections and closes them unanswered (an answer lost in
    /// transit), counting them.
    fn hang_up() -> (String, Arc<std::sync::atomic::AtomicU32>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let n = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(stream);
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn a_scroll_page_lost_in_transit_is_sent_once_and_reported_lost() {
        let quick = RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        };
        let (url, accepted) = hang_up();
        let mut c = cursor_at(&url, quick.clone());
        c.state = State::Scroll("s1".into());
        let e = c.next_page().await.unwrap_err();
        assert!(matches!(e, EsError::ContextLost { .. }), "{e}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(c.state, State::Done(Some(Context::Scroll("s1".into()))));
        assert!(c.next_page().await.unwrap().is_empty());

        // A PIT page is idempotent: retried as the policy says, and not a lost context.
        let (url, accepted) = hang_up();
        let mut c = cursor_at(&url, quick);
        c.state = State::Pit("p1".into());
        let e = c.next_page().await.unwrap_err();
        assert!(matches!(e, EsError::Exhausted { attempts: 3, .. }), "{e}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}

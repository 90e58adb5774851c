//! Keeping an index's fingerprints current, one pass at a time.
//!
//! A pass finds the documents that need a (new) fingerprint with one query
//! ([`Worker::stale_query`]):
//!
//! - for any method the index holds (its `_meta`), no version field (`simHashVersion`,
//!   `minHashVersion`) or one other than the version `_meta` records: never fingerprinted, by
//!   another pipeline version, or written before `es-init` added the method ([`stale_query`]);
//!   where `es-init` installed edit tracking ([`super::track_edits`]), also edited since;
//! - with a changed field (`--changed-field updated_at`): changed at or after the watermark,
//!   the field's highest value when the previous pass started (minus an overlap for dates, to
//!   cover refresh delays and writers' clock skew).
//!
//! - with the changes feed (on unless [`WorkerConfig::feed`] is off): every document written
//!   since the previous pass, by anyone and however, found by its `_seq_no` above each shard's
//!   stored checkpoint ([`super::feed`]). These are written only where the stored fingerprint
//!   fields differ from what the current text gives, so the worker's own writes, read once
//!   more by the next pass, settle there with nothing written. Where the index has no stored
//!   checkpoint yet (a first pass, a re-created index), the feed starts at the global
//!   checkpoints read when this pass started, before its stale query: the stale query covers
//!   what came before, the feed everything after.
//!
//! Too-short texts are written with the current versions, the reason `too_short` and `null`
//! values, so the first rule skips them until their text changes.
//!
//! One pass writes every method the index holds, in one guarded partial update per document.
//! Each pass starts by reading the index's `_meta` again, so a method `es-init` adds to a
//! running worker's index is filled in from the next pass on, and refreshes the index when
//! its periodic refresh is off (`refresh_interval: -1`) or the feed is on, so the query sees
//! every write.
//!
//! Documents are read through the one paging layer ([`Scanner`]: a point in time where the
//! cluster has one, else a scroll, in index order), fingerprinted on all cores, and written
//! back in bulk, each update guarded by the `_seq_no`/`_primary_term` the text was read with.
//! A pass that loses its read ([`EsError::ContextLost`]) fails; the next pass finds what it
//! did not write, as the query is the checkpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use rayon::prelude::*;
use serde_json::{json, Value};

use super::feed::{fields_differ, plan, retry_later, Feed, IndexNow, Plan, ShardEvent};
use super::scan::{Cursor, Paging, ScanOptions, Scanner};
use super::write::{fingerprint_fields_json, fingerprint_update, BulkReport, EsIndexer};
use super::{path_segment, request, search, Body, EsError};
use crate::formula::{learn_formula, record_formula, FormulaUpkeep};
use crate::schema::stale_query;
use crate::{read_meta, FieldNames};

/// What the worker reads and how.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Text fields fingerprinted together, in order (dotted paths allowed).
    pub text_fields: Vec<String>,
    /// A date or number field the article service bumps on every change (e.g. `updated_at`).
    pub changed_field: Option<String>,
    /// Documents per page read and bulk request.
    pub batch_size: usize,
    /// How long Elasticsearch keeps the point in time or scroll between two pages.
    pub scroll_keep_alive: Duration,
    /// For a date `changed_field`: documents changed up to this long before the watermark are
    /// looked at again (refresh delay, clock skew between writers).
    pub changed_overlap: Duration,
    /// Follow the changes feed ([`super::feed`]): find every document written since the
    /// previous pass by its sequence number, checkpoints kept in `neardup-feed-{index}`.
    pub feed: bool,
    /// Keep the formula `_meta` records current, learned from the index itself
    /// ([`Worker::keep_formula`]); `None`: leave it as it is.
    pub formula: Option<FormulaUpkeep>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            text_fields: neardup_core::input::default_text_fields(),
            changed_field: None,
            batch_size: 500,
            scroll_keep_alive: Duration::from_secs(300),
            changed_overlap: Duration::from_secs(60),
            feed: true,
            formula: Some(FormulaUpkeep::default()),
        }
    }
}

/// The highest value of the changed field seen at the start of a pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Watermark {
    /// Milliseconds since the epoch (date fields).
    EpochMillis(i64),
    /// A numeric field's value.
    Number(f64),
}

/// What one pass did.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    /// Stale documents the query found when the pass started.
    pub stale: u64,
    /// Documents read and fingerprinted.
    pub seen: u64,
    pub fingerprinted: u64,
    pub too_short: u64,
    /// What the bulk updates did, item by item.
    pub writes: BulkReport,
    /// What the changes feed did.
    pub feed: FeedReport,
    /// Stopped early (a signal): the rest is left for the next pass.
    pub interrupted: bool,
    pub elapsed: Duration,
}

/// What the changes feed did in one pass ([`super::feed`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedReport {
    /// Concrete indices whose feed started at this pass (no checkpoint, or a new UUID).
    pub started: u64,
    /// Shards with writes since their checkpoint, read.
    pub shards_read: u64,
    /// Documents read from the feed (written since the previous pass).
    pub read: u64,
    /// Of those, documents whose stored fingerprint fields were already right: not written.
    pub unchanged: u64,
    /// Checkpoints another worker stored first (ours were dropped, theirs stand).
    pub lost_races: u64,
}

/// Keeps one index's fingerprints current. Holds the watermark between passes.
#[derive(Debug)]
pub struct Worker {
    indexer: EsIndexer,
    /// Reads the stale documents; remembers the paging detected in the first pass.
    scanner: Scanner,
    config: WorkerConfig,
    watermark: Option<Watermark>,
    changed_is_date: Option<bool>,
    /// The changes feed, unless turned off.
    feed: Option<Feed>,
    /// When [`Worker::keep_formula`] last looked.
    formula_looked: Option<Instant>,
}

/// What [`Worker::keep_formula`] did when it learned a formula.
#[derive(Clone, Debug)]
pub struct FormulaReport {
    /// The id of the formula recorded now.
    pub id: String,
    /// The one it replaced, if any.
    pub replaced: Option<String>,
    /// Documents read to learn it.
    pub read: usize,
    /// Its windows.
    pub windows: usize,
    /// Learning and recording it.
    pub elapsed: Duration,
}

impl Worker {
    /// A worker writing through `indexer` (its index, what it holds, fingerprinter and retry
    /// policy). Call [`Worker::check`] before the first pass.
    pub fn new(indexer: EsIndexer, config: WorkerConfig) -> Worker {
        Worker {
            scanner: Scanner::new(indexer.client().clone(), indexer.retry().clone()),
            feed: config.feed.then(|| {
                Feed::new(
                    indexer.client().clone(),
                    indexer.retry().clone(),
                    indexer.index(),
                )
            }),
            indexer,
            config,
            watermark: None,
            changed_is_date: None,
            formula_looked: None,
        }
    }

    /// Keeps the formula the index records current (issue 43): at most once in
    /// [`FormulaUpkeep::every`] (the first call always), reads how many documents the index
    /// holds and the formula `_meta` records, and when one is due
    /// ([`FormulaUpkeep::due`]) learns it from the index ([`learn_formula`], the index's
    /// own folding and boilerplate) and records it ([`record_formula`]). `None` when it did
    /// not learn one; never with [`WorkerConfig::formula`] `None`.
    pub async fn keep_formula(&mut self) -> Result<Option<FormulaReport>, EsError> {
        let Some(upkeep) = self.config.formula else {
            return Ok(None);
        };
        if self
            .formula_looked
            .is_some_and(|t| t.elapsed() < upkeep.every)
        {
            return Ok(None);
        }
        self.formula_looked = Some(Instant::now());
        let index = self.indexer.index().to_owned();
        let (client, retry) = (self.indexer.client(), self.indexer.retry());
        let recorded = read_meta(client, retry, &index, &FieldNames::default())
            .await?
            .formula;
        let docs = self
            .scanner
            .count(
                &index,
                &json!({ "match_all": {} }),
                &ScanOptions::default(),
                None,
            )
            .await?;
        if !upkeep.due(recorded.as_deref(), docs) {
            return Ok(None);
        }
        let started = Instant::now();
        let learned = learn_formula(
            &self.scanner,
            &index,
            &self.config.text_fields,
            upkeep.sample,
            self.indexer.fingerprinter(),
        )
        .await?;
        let (id, windows) = (learned.formula.id(), learned.formula.len());
        record_formula(client, retry, &index, learned.formula).await?;
        Ok(Some(FormulaReport {
            id,
            replaced: recorded.map(|f| f.id()),
            read: learned.read,
            windows,
            elapsed: started.elapsed(),
        }))
    }

    pub fn indexer(&self) -> &EsIndexer {
        &self.indexer
    }

    /// The current watermark (persist it to resume change detection after a restart).
    pub fn watermark(&self) -> Option<&Watermark> {
        self.watermark.as_ref()
    }

    /// Starts change detection at `w` instead of at the first pass (which then only looks
    /// at missing and outdated fingerprints).
    pub fn set_watermark(&mut self, w: Option<Watermark>) {
        self.watermark = w;
    }

    /// Whether `changed_field` is a date (known after [`Worker::check`]).
    pub fn changed_field_is_date(&self) -> bool {
        self.changed_is_date == Some(true)
    }

    /// Checks that the index still maps the fields of every method it holds (so writes cannot
    /// create them with a dynamic mapping; [`EsIndexer::reload`]) and finds the changed
    /// field's type.
    pub async fn check(&mut self) -> Result<(), EsError> {
        self.reload().await?;
        if let Some(field) = &self.config.changed_field {
            self.changed_is_date = Some(field_is_date(&self.indexer, field).await?);
        }
        Ok(())
    }

    /// What the index holds, read again ([`EsIndexer::reload`]), and checked against the text
    /// fields this worker reads where groups are linked by texts: an `es-init` while the
    /// worker runs is seen at its next pass.
    async fn reload(&mut self) -> Result<(), EsError> {
        self.indexer.reload().await?;
        self.indexer
            .meta()
            .check_group_text_fields(self.indexer.index(), &self.config.text_fields)
    }

    /// The query that finds documents needing a fingerprint (see the module docs):
    /// `stale_query`, or changed since the watermark.
    pub fn stale_query(&self) -> Value {
        let mut should = vec![stale_query(self.indexer.meta())];
        if let (Some(field), Some(w)) = (&self.config.changed_field, &self.watermark) {
            should.push(match w {
                Watermark::EpochMillis(ms) => {
                    let from = ms - self.config.changed_overlap.as_millis() as i64;
                    json!({ "range": { field: { "gte": from, "format": "epoch_millis" } } })
                }
                Watermark::Number(n) => json!({ "range": { field: { "gte": n } } }),
            });
        }
        json!({ "bool": { "should": should, "minimum_should_match": 1 } })
    }

    /// The index holding the changes feed's checkpoints, where the feed is on.
    pub fn feed_index(&self) -> Option<&str> {
        self.feed.as_ref().map(Feed::store_index)
    }

    /// One pass over the stale documents, then over the changes feed. Stops after the batch
    /// in flight once `stop` is set.
    pub async fn pass(&mut self, stop: &AtomicBool) -> Result<PassReport, EsError> {
        let started = Instant::now();
        if self.config.changed_field.is_some() && self.changed_is_date.is_none() {
            self.check().await?;
        } else {
            self.reload().await?;
        }
        // Read before the stale query: where the feed starts, it starts here.
        let feed_now = match &self.feed {
            Some(feed) => Some(feed.now().await?),
            None => None,
        };
        // An index with periodic refresh off (`refresh_interval: -1`, e.g. during a bulk
        // load) would never show the pass what was written since: refresh it first. With the
        // feed, always: the stale query then reads no version the previous pass replaced
        // (a shard idle for searches skips its periodic refreshes), and every write up to the
        // global checkpoints just read is searchable.
        if feed_now.is_some() || self.indexer.refresh_interval().await?.is_none() {
            let indexer = &self.indexer;
            crate::client::refresh(indexer.client(), indexer.retry(), indexer.index()).await?;
        }
        let next_watermark = match &self.config.changed_field {
            Some(f) => self.max_changed(f).await?,
            None => None,
        };
        let mut report = PassReport::default();
        let index = self.indexer.index().to_owned();
        // The text, and what groups read where the index keeps them.
        let mut source = self.config.text_fields.clone();
        source.extend(self.indexer.group_source_fields());
        let body = json!({
            "query": self.stale_query(),
            "_source": source,
            "seq_no_primary_term": true,
            "track_total_hits": true,
        });
        let cursor = self.scanner.cursor(&index, body, &self.scan_options());
        self.drain(cursor, &mut report, false, stop, |report, total| {
            report.stale = total.unwrap_or(0);
            tracing::info!(
                index = %index,
                seen = report.seen,
                stale = report.stale,
                "batch written"
            );
        })
        .await?;
        if !report.interrupted && next_watermark.is_some() {
            self.watermark = next_watermark;
        }
        if let (Some(now), false) = (feed_now, report.interrupted) {
            if let Some(mut feed) = self.feed.take() {
                let result = self.follow(&mut feed, now, stop, &mut report).await;
                self.feed = Some(feed);
                result?;
            }
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// The changes feed's part of a pass: per concrete index, start the feed at `now` or
    /// read each shard's writes since its checkpoint, then store the checkpoints reached.
    async fn follow(
        &self,
        feed: &mut Feed,
        now: Vec<IndexNow>,
        stop: &AtomicBool,
        report: &mut PassReport,
    ) -> Result<(), EsError> {
        let mut source = self.config.text_fields.clone();
        source.extend(self.indexer.group_source_fields());
        if let Some(props) = self.indexer.meta().mapping()["properties"].as_object() {
            source.extend(props.keys().cloned());
        }
        let options = self.scan_options();
        for index in now {
            let stored = feed.load(&index.uuid).await?;
            let steps = match plan(stored.as_ref().map(|s| &s.marks), &index) {
                Plan::Start {
                    why,
                    marks: Some(marks),
                } => {
                    tracing::info!(
                        index = %index.index,
                        uuid = %index.uuid,
                        why,
                        "changes feed starts at the global checkpoints read before this pass's stale query"
                    );
                    if feed.save(&marks, stored.map(|s| s.guard)).await? {
                        report.feed.started += 1;
                    } else {
                        report.feed.lost_races += 1;
                    }
                    continue;
                }
                Plan::Start { why, marks: None } => {
                    tracing::warn!(
                        index = %index.index,
                        why,
                        "changes feed not started: a shard has no started primary; the next pass tries again"
                    );
                    continue;
                }
                Plan::Follow(steps) => steps,
            };
            let Some(stored) = stored else { continue };
            // The pass refreshed after reading the global checkpoints; once more where the stale
            // query wrote, so the feed does not read the versions it replaced.
            if report.writes.updated > 0 && steps.iter().any(|s| s.read.is_some()) {
                crate::client::refresh(self.indexer.client(), self.indexer.retry(), &index.index)
                    .await?;
            }
            let mut next = stored.marks.clone();
            for (i, s) in steps.into_iter().enumerate() {
                log_event(&index.index, s.next.shard, s.event.as_ref());
                let failed_before = report.writes.failed.len();
                if let Some(range) = s.read {
                    let cursor = feed.read(
                        &self.scanner,
                        &index.index,
                        s.next.shard,
                        range,
                        &source,
                        &options,
                    );
                    report.feed.shards_read += 1;
                    self.drain(cursor, report, true, stop, |report, _| {
                        tracing::info!(
                            index = %index.index,
                            shard = s.next.shard,
                            read = report.feed.read,
                            "changes feed: batch looked at"
                        );
                    })
                    .await?;
                    if report.interrupted {
                        break;
                    }
                }
                if retry_later(&report.writes.failed[failed_before..]) {
                    tracing::warn!(
                        index = %index.index,
                        shard = s.next.shard,
                        "changes feed: a write failed for a reason that passes (the cluster pushed back or erred); the shard's checkpoint stays, and the next pass reads its range again"
                    );
                    continue;
                }
                next.shards[i] = s.next;
            }
            if next != stored.marks && !feed.save(&next, Some(stored.guard)).await? {
                tracing::info!(
                    index = %index.index,
                    "another worker stored the feed's checkpoint first: it stands"
                );
                report.feed.lost_races += 1;
            }
            if report.interrupted {
                break;
            }
        }
        Ok(())
    }

    /// How the pass and the feed page through their reads: the worker's batch size and
    /// keep-alive, a point in time where the cluster has one.
    fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            page_size: self.config.batch_size.max(1),
            keep_alive: self.config.scroll_keep_alive,
            single_request_first: false,
            paging: Paging::Auto,
            slice: None,
        }
    }

    /// Reads `cursor` to its end, fingerprinting and writing each page (`only_changed`: the
    /// feed's pages, written only where the stored fields differ) and calling `page_done` with
    /// the report and the cursor's total after each; stops after the page in flight once
    /// `stop` is set (`report.interrupted`). The cursor is closed either way.
    async fn drain(
        &self,
        mut cursor: Cursor,
        report: &mut PassReport,
        only_changed: bool,
        stop: &AtomicBool,
        page_done: impl Fn(&mut PassReport, Option<u64>),
    ) -> Result<(), EsError> {
        let result = loop {
            let hits = match cursor.next_page().await {
                Ok(hits) if hits.is_empty() => break Ok(()),
                Ok(hits) => hits,
                Err(e) => break Err(e),
            };
            if let Err(e) = self.process(hits, report, only_changed).await {
                break Err(e);
            }
            page_done(report, cursor.total());
            if stop.load(Ordering::SeqCst) {
                report.interrupted = true;
                break Ok(());
            }
        };
        cursor.close().await;
        result
    }

    /// Sketches one page of hits with every method the index holds, on all cores, and writes
    /// the fields back; `only_changed` (the feed's pages): only where the stored fields differ.
    async fn process(
        &self,
        hits: Vec<Value>,
        report: &mut PassReport,
        only_changed: bool,
    ) -> Result<(), EsError> {
        let fp = self.indexer.fingerprinter().clone();
        let meta = self.indexer.meta().clone();
        let methods = meta.methods();
        let read = hits.len() as u64;
        let fields = self.config.text_fields.clone();
        let updates = tokio::task::spawn_blocking(move || {
            hits.par_iter()
                .filter_map(|h| {
                    let id = h["_id"].as_str()?.to_owned();
                    let guard = Some((h["_seq_no"].as_u64()?, h["_primary_term"].as_u64()?));
                    let group = meta.group.as_ref();
                    match fingerprint_update(&fp, methods, &fields, group, (id.clone(), guard), &h["_source"]) {
                        Ok(u)
                            if only_changed
                                && !fields_differ(
                                    &h["_source"],
                                    &fingerprint_fields_json(&meta, &u.sketches),
                                ) =>
                        {
                            None
                        }
                        Ok(u) => Some(u),
                        Err(bad) => {
                            tracing::warn!(%id, "{bad}: not fingerprinted (fix the document or --field)");
                            None
                        }
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| EsError::Config(format!("fingerprinting task failed: {e}")))?;
        if only_changed {
            report.feed.read += read;
            report.feed.unchanged += read - updates.len() as u64;
        } else {
            report.seen += updates.len() as u64;
        }
        for u in &updates {
            match u.sketches.too_short() {
                None => report.fingerprinted += 1,
                Some(_) => report.too_short += 1,
            }
        }
        if updates.is_empty() {
            return Ok(());
        }
        let written = self.indexer.update_fingerprints(&updates).await?;
        for f in &written.failed {
            tracing::error!(index = %self.indexer.index(), "{f}");
        }
        report.writes.merge(written);
        Ok(())
    }

    /// The changed field's highest value now, as the next pass's watermark.
    async fn max_changed(&self, field: &str) -> Result<Option<Watermark>, EsError> {
        let index = self.indexer.index();
        let body = json!({ "size": 0, "aggs": { "max_changed": { "max": { "field": field } } } });
        let r = search(
            self.indexer.client(),
            &super::RetryPolicy::default(),
            &format!("index `{index}`: highest `{field}`"),
            &format!("/{}/_search", path_segment(index)),
            &[],
            Some(&Body::Json(body)),
        )
        .await?;
        let Some(v) = r["aggregations"]["max_changed"]["value"].as_f64() else {
            return Ok(None);
        };
        Ok(Some(if self.changed_is_date == Some(true) {
            Watermark::EpochMillis(v as i64)
        } else {
            Watermark::Number(v)
        }))
    }
}

/// Logs what happened to a shard's primary since its checkpoint was stored.
fn log_event(index: &str, shard: u32, event: Option<&ShardEvent>) {
    match event {
        None => {}
        Some(ShardEvent::TermChanged { from, to, back_to }) => tracing::info!(
            index,
            shard,
            from,
            to,
            back_to,
            "changes feed: the shard's primary term changed (failover); following its global checkpoint, which only holds operations on every in-sync copy"
        ),
        Some(ShardEvent::Moved { from, to }) => tracing::info!(
            index,
            shard,
            from = from.as_str(),
            to = to.as_str(),
            "changes feed: the shard's primary moved to another node"
        ),
        Some(ShardEvent::Unavailable) => tracing::warn!(
            index,
            shard,
            "changes feed: the shard has no started primary; skipped until it has"
        ),
    }
}

/// Whether `field` is mapped as a date (else it must be numeric) in every index behind `index`.
async fn field_is_date(indexer: &EsIndexer, field: &str) -> Result<bool, EsError> {
    let index = indexer.index();
    let r = request(
        indexer.client(),
        &super::RetryPolicy::default(),
        &format!("index `{index}`: mapping of `{field}`"),
        Method::Get,
        &format!(
            "/{}/_mapping/field/{}",
            path_segment(index),
            path_segment(field)
        ),
        &[],
        None,
    )
    .await?;
    let mut types = Vec::new();
    for m in r.as_object().into_iter().flat_map(|o| o.values()) {
        if let Some(mapping) = m["mappings"][field]["mapping"].as_object() {
            types.extend(
                mapping
                    .values()
                    .filter_map(|v| v["type"].as_str())
                    .map(str::to_owned),
            );
        }
    }
    if types.is_empty() {
        return Err(EsError::Config(format!(
            "index `{index}` has no field `{field}` (--changed-field): name a date or number field the article service updates on every change"
        )));
    }
    let numeric = [
        "long",
        "integer",
        "short",
        "byte",
        "double",
        "float",
        "half_float",
        "scaled_float",
        "unsigned_long",
    ];
    if types.iter().all(|t| t == "date" || t == "date_nanos") {
        Ok(true)
    } else if types.iter().all(|t| numeric.contains(&t.as_str())) {
        Ok(false)
    } else {
        Err(EsError::Config(format!(
            "field `{field}` of index `{index}` is mapped as {types:?}: --changed-field needs a date or number field"
        )))
    }
}

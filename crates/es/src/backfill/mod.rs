//! Back-fill: fingerprint every existing document of one or more indices, resumably.
//!
//! ## What is walked
//!
//! - `--only-missing` ([`Mode::OnlyMissing`], the default): the documents without a current
//!   fingerprint of some method the index holds, exactly the worker's rule 1
//!   (`stale_query` in `worker.rs`: for any method in the index's `_meta`, no version field
//!   (`simHashVersion`, `minHashVersion`), or another version). A document whose SimHash is
//!   current but which has no MinHash (written before `es-init` added MinHash) is walked.
//! - `--all` ([`Mode::All`]): every document, rewritten even where the values are already
//!   right. When an index's walk starts, the highest `_seq_no` of each shard is recorded (the
//!   cutoff); the shard is walked with the query `_seq_no <= cutoff OR stale`. Every write of
//!   the back-fill makes a new document version (`detect_noop: false`), and so a `_seq_no`
//!   above the cutoff: a rewritten document no longer matches.
//!
//! ## Resumability guarantee
//!
//! In both modes the *query* is the checkpoint, not a position in the walk (neither a scroll
//! nor a PIT order survives a restart). After a restart the index is refreshed and the query
//! run again: documents whose write landed no longer match it, so they are not read again.
//! The state file (a journal, see `journal`) adds the bookkeeping that makes the report add
//! up: the counts of finished batches, the ids that failed (not retried within the job), and
//! the ids of the batches in flight when the run stopped. Those are looked up at the restart:
//! written ones are counted as written, deleted ones as deleted, the rest are walked again.
//!
//! So a run killed at any moment (SIGKILL included) and started again with the same command
//! misses no document, reads again at most the documents of the batches that were in flight
//! (at most `--concurrency` × `--bulk-size`), and counts every document once.
//!
//! After a walk, the index is refreshed and walked again (at most `catch_up_rounds` times)
//! while the previous walk found something: documents indexed or replaced without
//! fingerprint fields during the walk are picked up too.
//!
//! ## Pipeline
//!
//! A reader task pages through the index (`walk`), the sketches of every method the index
//! holds are computed in one pass per document on the rayon pool, and up to `concurrency`
//! guarded bulk updates (every method in the same partial update) are in flight
//! ([`crate::EsIndexer::update_fingerprints`]); `control` halves concurrency and bulk
//! size on 429s and paces the job to `max_docs_per_sec`. A 409 (the document changed after
//! it was read) makes the back-fill read the document again and write the fingerprint of its
//! new text; a 404 (deleted) is counted and skipped.

mod control;
mod journal;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use self::control::Aimd;
use self::journal::{Entry, JobKey, Journal, Replayed, StateLock};
pub use super::scan::Paging;
use super::scan::{ScanOptions, Scanner, Slice};
use super::write::{fingerprint_update, Labelling};
use super::{
    path_segment, request, verify_index, Body, EsError, EsIndexer, FieldNames, FingerprintUpdate,
    GroupMeta, IndexMeta, MinHashLayout, RetryPolicy,
};
use crate::client::{mget, refresh, search};
use crate::pace::Pace;
pub use crate::regroup::Linking;
use crate::regroup::{RegroupConfig, RegroupError, RegroupProgress, RegroupReport};
use crate::schema::stale_query;
use crate::walk::resolve_indices;
pub use crate::walk::{Hit, WalkError, WalkSpec, Walker};
use neardup_core::fingerprint::Methods;
use neardup_core::Fingerprinter;

/// Which documents are walked.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Only documents without a fingerprint of the current version.
    OnlyMissing,
    /// Every document.
    All,
}

impl Mode {
    fn key(self) -> &'static str {
        match self {
            Mode::OnlyMissing => "missing",
            Mode::All => "all",
        }
    }
}

/// What a back-fill did. Every document read ends in exactly one of `written`, `too_short`,
/// `deleted`, `failed` and `bad`, so `scanned` is their sum.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackfillCounts {
    /// Documents read (and fingerprinted).
    pub scanned: u64,
    /// Fingerprints stored.
    pub written: u64,
    /// Too-short texts (none of the fields, empty, or too few words): recorded as such.
    pub too_short: u64,
    /// Deleted between being read and being written.
    pub deleted: u64,
    /// Could not be written (listed in the failed file).
    pub failed: u64,
    /// A text field holds something other than text (a number, an object…): not written,
    /// listed in the failed file.
    pub bad: u64,
    /// Of `written` + `too_short`: the document already had exactly these values.
    pub unchanged: u64,
    /// Writes refused with 409 because the document changed after it was read; it was read
    /// again and its new text fingerprinted.
    pub conflicts_retried: u64,
    /// 429 pushbacks that were retried.
    pub rejections: u64,
    /// Of the documents above: in flight when an earlier run stopped, found written at the
    /// restart.
    pub recovered: u64,
}

impl BackfillCounts {
    pub fn add(&mut self, o: &BackfillCounts) {
        self.scanned += o.scanned;
        self.written += o.written;
        self.too_short += o.too_short;
        self.deleted += o.deleted;
        self.failed += o.failed;
        self.bad += o.bad;
        self.unchanged += o.unchanged;
        self.conflicts_retried += o.conflicts_retried;
        self.rejections += o.rejections;
        self.recovered += o.recovered;
    }

    /// Whether every document read is accounted for exactly once.
    pub fn adds_up(&self) -> bool {
        self.scanned == self.written + self.too_short + self.deleted + self.failed + self.bad
    }
}

/// Everything a back-fill can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackfillError {
    #[error(transparent)]
    Es(#[from] EsError),
    #[error("state file {}: {reason}", path.display())]
    State { path: PathBuf, reason: String },
    #[error("state file {} is the journal of slice {theirs} of this back-fill, and this run is slice {ours}: each slice needs its own state file (the default name has the slice in it). Pass --state with another file, or the --slice the file records to continue that slice", path.display())]
    OtherSlice {
        path: PathBuf,
        theirs: String,
        ours: String,
    },
    #[error("state file {} belongs to another back-fill ({theirs}); this one is {ours}. Pass --restart to discard it, or --state to use another file", path.display())]
    OtherJob {
        path: PathBuf,
        theirs: String,
        ours: String,
    },
    #[error("failed-documents file {}: {reason}", path.display())]
    FailedFile { path: PathBuf, reason: String },
    #[error("no index matches `{0}`")]
    NoIndex(String),
    #[error("index `{index}`: every document is fingerprinted, but linking its duplicate groups failed (run the same command again to go on, or `neardup regroup --index {index}`): {source}")]
    Regroup {
        index: String,
        #[source]
        source: Box<RegroupError>,
    },
}

/// How a back-fill runs.
#[derive(Clone, Debug)]
pub struct BackfillConfig {
    /// Index, alias, or pattern (`news-*`, `a,b`); expanded to concrete indices.
    pub pattern: String,
    /// Text fields fingerprinted together, in order (dotted paths allowed).
    pub text_fields: Vec<String>,
    /// The SimHash field names of indices without `_meta` (the older Java service's); the
    /// others record their field names in `_meta`.
    pub names: FieldNames,
    pub mode: Mode,
    /// Documents per page read.
    pub page_size: usize,
    /// Documents per bulk request (the maximum when adapting).
    pub bulk_size: usize,
    /// Bulk requests in flight (the maximum when adapting).
    pub concurrency: usize,
    /// Halve concurrency and bulk size on 429s, grow back slowly.
    pub adapt: bool,
    pub max_docs_per_sec: Option<f64>,
    /// Read and fingerprint, write nothing (neither to Elasticsearch nor the state file).
    pub dry_run: bool,
    /// The journal (see `journal`).
    pub state_path: PathBuf,
    /// Failed and bad documents, one JSON object a line.
    pub failed_path: PathBuf,
    /// Discard a state file of another job instead of refusing.
    pub restart: bool,
    /// Extra walks after the first, for documents that became stale meanwhile.
    pub catch_up_rounds: usize,
    /// Scroll or PIT keep-alive between two pages.
    pub keep_alive: Duration,
    /// How pages are read ([`Paging::Auto`]: detected once per job).
    pub paging: Paging,
    /// Walk only this slice of each index (`--slice I/N`): N jobs, each with its own slice,
    /// state file and failed file, walk every document once between them. `None`: all.
    pub slice: Option<Slice>,
    /// How the duplicate groups of the articles written are linked, where an index keeps
    /// groups. [`Linking::Join`] (the default): each article is written as its own group
    /// (an article that already carries a label keeps it), and when the walk of the index
    /// has ended one regroup by the join ([`crate::regroup`]) links them all, writing only
    /// the labels that change; a sliced job leaves that regroup to be run once every slice
    /// has finished ([`BackfillReport::regroup_pending`]). [`Linking::Search`]: each article
    /// is labelled as it is written, by the search every writer runs.
    pub linking: Linking,
    pub retry: RetryPolicy,
}

impl BackfillConfig {
    pub fn new(pattern: impl Into<String>) -> BackfillConfig {
        let pattern = pattern.into();
        BackfillConfig {
            state_path: default_state_path(&pattern, None),
            pattern,
            text_fields: neardup_core::input::default_text_fields(),
            names: FieldNames::default(),
            mode: Mode::OnlyMissing,
            page_size: 1000,
            bulk_size: 500,
            concurrency: 4,
            adapt: true,
            max_docs_per_sec: None,
            dry_run: false,
            failed_path: default_failed_path(None),
            restart: false,
            catch_up_rounds: 3,
            keep_alive: Duration::from_secs(300),
            paging: Paging::Auto,
            slice: None,
            linking: Linking::Join,
            // Patient enough to ride out a node restart (about four minutes).
            retry: RetryPolicy {
                max_retries: 14,
                ..RetryPolicy::default()
            },
        }
    }
}

impl BackfillConfig {
    /// The job walks `slice` of each index, with the default state and failed files of that
    /// slice ([`default_state_path`], [`default_failed_path`]), so that the slices of one
    /// back-fill run side by side in one directory without sharing a file.
    pub fn with_slice(mut self, slice: Option<Slice>) -> BackfillConfig {
        let slice = slice.filter(|s| !s.is_whole());
        self.slice = slice;
        self.state_path = default_state_path(&self.pattern, slice);
        self.failed_path = default_failed_path(slice);
        self
    }
}

/// `-slice-I-of-N` for a slice, nothing for the whole index.
fn slice_suffix(slice: Option<Slice>) -> String {
    slice
        .filter(|s| !s.is_whole())
        .map(|s| format!("-slice-{}-of-{}", s.id(), s.max()))
        .unwrap_or_default()
}

/// `neardup-backfill-failed.jsonl` (`neardup-backfill-failed-slice-I-of-N.jsonl` for a slice)
/// in the working directory.
pub fn default_failed_path(slice: Option<Slice>) -> PathBuf {
    PathBuf::from(format!(
        "neardup-backfill-failed{}.jsonl",
        slice_suffix(slice)
    ))
}

/// `.neardup-backfill-<pattern>.jsonl` (`….slice-I-of-N.jsonl` for a slice) in the working
/// directory, with the pattern's characters that are awkward in file names replaced.
pub fn default_state_path(pattern: &str, slice: Option<Slice>) -> PathBuf {
    let safe: String = pattern
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from(format!(
        ".neardup-backfill-{safe}{}.jsonl",
        slice_suffix(slice)
    ))
}

/// Where a back-fill is, for a progress bar.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Counts so far, earlier runs of the job included.
    pub counts: BackfillCounts,
    /// Documents the job expects to read in all (done + still matching when counted).
    pub total: u64,
    pub index: String,
    /// Bulk requests allowed in flight and bulk size now.
    pub in_flight: usize,
    pub bulk_size: usize,
    /// Where the regroup that links the index's groups is, once its walk has ended
    /// ([`BackfillConfig::linking`]); `None` while documents are being fingerprinted.
    pub regroup: Option<RegroupProgress>,
}

pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// The final report.
#[derive(Clone, Debug, Serialize)]
pub struct BackfillReport {
    pub pattern: String,
    pub mode: String,
    pub dry_run: bool,
    pub paging: String,
    /// The slice walked (`I/N`), when the job walks one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<String>,
    /// Counts per concrete index.
    pub indices: BTreeMap<String, BackfillCounts>,
    pub counts: BackfillCounts,
    /// This run and the earlier runs of the job.
    pub elapsed_secs: f64,
    pub docs_per_sec: f64,
    /// Whether this run continued an interrupted one.
    pub resumed: bool,
    /// Stopped early (a signal): run the same command again to continue.
    pub interrupted: bool,
    pub failed_file: PathBuf,
    pub state_file: PathBuf,
    /// How the groups were linked ([`BackfillConfig::linking`]).
    pub linking: Linking,
    /// The regroup of each index whose groups this job linked by the join (its last run).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub regroups: BTreeMap<String, RegroupReport>,
    /// Indices whose articles were written as their own groups and await one `neardup
    /// regroup` (a sliced job, [`BackfillConfig::linking`]): run it once every slice has
    /// finished.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regroup_pending: Vec<String>,
}

/// Re-reading a document that keeps changing under the back-fill stops after this many tries.
const MAX_CONFLICT_ROUNDS: u32 = 5;
/// A walk that loses its context this many times in a row without progress fails the job.
const MAX_LOST_WALKS: u32 = 5;

/// A back-fill job.
pub struct Backfill {
    client: Elasticsearch,
    fp: Fingerprinter,
    config: BackfillConfig,
}

/// A document ready to write, or why it cannot be.
enum Prepared {
    /// `labelled`: the document carries a group label in `label_field` (see [`prepare`]).
    Update {
        update: FingerprintUpdate,
        labelled: bool,
    },
    Bad {
        id: String,
        reason: String,
    },
}

/// A page of documents prepared ([`IndexRun::prepare`]).
#[derive(Default)]
struct PreparedBatch {
    updates: Vec<FingerprintUpdate>,
    /// The ids of the updates whose documents carry a group label.
    labelled: HashSet<String>,
    /// The documents that cannot be fingerprinted: id, why.
    bad: Vec<(String, String)>,
}

/// `hit`'s update: its text `fields` sketched with `methods`, and what the index's `group`
/// reads of it (its order key, its texts); and whether it carries a label in `label_field`
/// (the group field, read where the job labels by the join).
fn prepare(
    fp: &Fingerprinter,
    methods: Methods,
    fields: &[String],
    group: Option<&GroupMeta>,
    label_field: Option<&str>,
    hit: Hit,
) -> Prepared {
    let key = (hit.id.clone(), Some((hit.seq_no, hit.primary_term)));
    let labelled = label_field.is_some_and(|f| hit.source.get(f).is_some_and(Value::is_string));
    match fingerprint_update(fp, methods, fields, group, key, &hit.source) {
        Ok(update) => Prepared::Update { update, labelled },
        Err(bad) => Prepared::Bad {
            id: hit.id,
            reason: bad.to_string(),
        },
    }
}

/// State shared by the writer tasks of one index.
struct IndexRun {
    index: String,
    indexer: EsIndexer,
    fields: Vec<String>,
    dry_run: bool,
    journal: Option<Arc<Journal>>,
    failed: Arc<FailedFile>,
    aimd: Arc<Aimd>,
    counts: Arc<Mutex<BackfillCounts>>,
    /// Counts of the whole job (all indices), for progress.
    job_counts: Arc<Mutex<BackfillCounts>>,
    skip: Mutex<HashSet<String>>,
    started: Instant,
    progress: ProgressFn,
    total: u64,
    next_batch: Arc<Mutex<u64>>,
    /// The group field, where the articles are written as their own groups for a regroup by
    /// the join to link ([`BackfillConfig::linking`]); `None` where each is labelled by the
    /// writers' search, or the index keeps no groups.
    label_field: Option<String>,
}

impl IndexRun {
    /// The `_source` fields read: the text, and what groups read where the index keeps
    /// them ([`EsIndexer::group_source_fields`]).
    fn source_fields(&self) -> Vec<String> {
        let mut out = self.fields.clone();
        out.extend(self.indexer.group_source_fields());
        out.extend(self.label_field.clone());
        out
    }

    fn batch_no(&self) -> u64 {
        let mut n = self.next_batch.lock().unwrap();
        *n += 1;
        *n - 1
    }

    /// Records finished counts: journal, totals, progress.
    fn finish(&self, b: u64, c: BackfillCounts, skip: Vec<String>) -> Result<(), BackfillError> {
        if let Some(j) = &self.journal {
            j.record(&Entry::Done {
                index: self.index.clone(),
                b,
                counts: c.clone(),
                skip: skip.clone(),
                ms: self.started.elapsed().as_millis() as u64,
            })?;
        }
        self.skip.lock().unwrap().extend(skip);
        self.counts.lock().unwrap().add(&c);
        let job = {
            let mut j = self.job_counts.lock().unwrap();
            j.add(&c);
            j.clone()
        };
        let (in_flight, bulk_size) = self.aimd.current();
        (self.progress)(&Progress {
            counts: job,
            total: self.total,
            index: self.index.clone(),
            in_flight,
            bulk_size,
            regroup: None,
        });
        Ok(())
    }

    /// Writes one chunk: journal its ids, send the guarded bulk update, re-read and redo the
    /// documents that changed meanwhile, record the outcome.
    /// `labelled`: the ids of those that carry a group label (read where the job labels by
    /// the join, which keeps it).
    async fn write_chunk(
        &self,
        updates: Vec<FingerprintUpdate>,
        mut labelled: HashSet<String>,
    ) -> Result<(), BackfillError> {
        let b = self.batch_no();
        if let Some(j) = &self.journal {
            j.record(&Entry::Batch {
                index: self.index.clone(),
                b,
                ids: updates.iter().map(|u| u.id.clone()).collect(),
            })?;
        }
        let mut c = BackfillCounts {
            scanned: updates.len() as u64,
            ..BackfillCounts::default()
        };
        let mut skip = Vec::new();
        let mut pending = updates;
        let mut round = 0;
        while !pending.is_empty() {
            if self.dry_run {
                for u in &pending {
                    match u.sketches.too_short() {
                        None => c.written += 1,
                        Some(_) => c.too_short += 1,
                    }
                }
                break;
            }
            let labelling = match self.label_field {
                Some(_) => Labelling::Own {
                    labelled: &labelled,
                },
                None => Labelling::Search,
            };
            let report = self
                .indexer
                .update_fingerprints_labelled(&pending, labelling)
                .await?;
            self.aimd.feedback(report.rejections > 0);
            c.rejections += report.rejections;
            c.unchanged += report.noop;
            let conflicts: HashSet<&str> = report.conflicts.iter().map(String::as_str).collect();
            let missing: HashSet<&str> = report.missing.iter().map(String::as_str).collect();
            let failed: HashMap<&str, _> =
                report.failed.iter().map(|f| (f.id.as_str(), f)).collect();
            let mut again = Vec::new();
            for u in &pending {
                let id = u.id.as_str();
                if let Some(f) = failed.get(id) {
                    c.failed += 1;
                    skip.push(u.id.clone());
                    self.failed.write(
                        &self.index,
                        id,
                        "failed",
                        json!({"status": f.status, "error": f.error_type, "reason": f.reason}),
                    )?;
                } else if missing.contains(id) {
                    c.deleted += 1;
                } else if conflicts.contains(id) {
                    again.push(u.id.clone());
                } else if u.sketches.too_short().is_none() {
                    c.written += 1;
                } else {
                    c.too_short += 1;
                }
            }
            if again.is_empty() {
                break;
            }
            c.conflicts_retried += again.len() as u64;
            round += 1;
            if round > MAX_CONFLICT_ROUNDS {
                for id in again {
                    c.failed += 1;
                    self.failed.write(&self.index, &id, "failed", json!({
                        "status": 409,
                        "error": "version_conflict_engine_exception",
                        "reason": format!("changed {MAX_CONFLICT_ROUNDS} times while being fingerprinted; the worker or the next run will catch it"),
                    }))?;
                    skip.push(id);
                }
                break;
            }
            let (found, gone) = self.reread(&again).await?;
            c.deleted += gone;
            let batch = self.prepare(found).await?;
            (pending, labelled) = (batch.updates, batch.labelled);
            for (id, reason) in batch.bad {
                c.bad += 1;
                self.failed
                    .write(&self.index, &id, "bad", json!({ "reason": reason }))?;
                skip.push(id);
            }
        }
        self.finish(b, c, skip)
    }

    /// `hits` fingerprinted on the rayon pool ([`prepare`]): the updates to write, the ids
    /// of those that carry a group label, and the documents that cannot be fingerprinted,
    /// with why.
    async fn prepare(&self, hits: Vec<Hit>) -> Result<PreparedBatch, EsError> {
        let fp = self.indexer.fingerprinter().clone();
        let methods = self.indexer.meta().methods();
        let fields = self.fields.clone();
        let group = self.indexer.meta().group.clone();
        let label_field = self.label_field.clone();
        let prepared = tokio::task::spawn_blocking(move || {
            hits.into_par_iter()
                .map(|h| {
                    prepare(
                        &fp,
                        methods,
                        &fields,
                        group.as_ref(),
                        label_field.as_deref(),
                        h,
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| EsError::Config(format!("fingerprinting task failed: {e}")))?;
        let mut batch = PreparedBatch::default();
        for p in prepared {
            match p {
                Prepared::Update { update, labelled } => {
                    if labelled {
                        batch.labelled.insert(update.id.clone());
                    }
                    batch.updates.push(update)
                }
                Prepared::Bad { id, reason } => batch.bad.push((id, reason)),
            }
        }
        Ok(batch)
    }

    /// The current text, `_seq_no` and `_primary_term` of `ids` (realtime), and how many are gone.
    async fn reread(&self, ids: &[String]) -> Result<(Vec<Hit>, u64), EsError> {
        let r = mget(
            self.indexer.client(),
            self.indexer.retry(),
            &format!("index `{}`: read changed documents again", self.index),
            &format!("/{}/_mget", path_segment(&self.index)),
            &[("_source_includes", &self.source_fields().join(","))],
            Some(&Body::Json(json!({ "ids": ids }))),
        )
        .await?;
        let mut found = Vec::new();
        let mut gone = 0;
        for d in r["docs"].as_array().into_iter().flatten() {
            match (d["found"] == true).then(|| Hit::from_json(d)).flatten() {
                Some(h) => found.push(h),
                None => gone += 1,
            }
        }
        Ok((found, gone))
    }
}

/// The failed-documents file: one JSON object a line.
struct FailedFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl FailedFile {
    fn open(path: &Path, truncate: bool) -> Result<FailedFile, BackfillError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|f| {
                if truncate {
                    f.set_len(0)?;
                }
                Ok(f)
            })
            .map_err(|e| BackfillError::FailedFile {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(FailedFile {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    fn write(&self, index: &str, id: &str, kind: &str, detail: Value) -> Result<(), BackfillError> {
        let mut v = json!({ "index": index, "id": id, "kind": kind });
        if let (Value::Object(m), Value::Object(d)) = (&mut v, detail) {
            m.extend(d);
        }
        tracing::warn!(index, id, kind, "{v}");
        let mut line = v.to_string();
        line.push('\n');
        self.file
            .lock()
            .unwrap()
            .write_all(line.as_bytes())
            .map_err(|e| BackfillError::FailedFile {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }
}

/// How a walk (one round over an index) ended.
enum RoundEnd {
    /// Read to the end; this many documents were processed.
    Complete(u64),
    /// The search context was lost after processing this many documents.
    Lost(EsError, u64),
    Interrupted,
}

impl Backfill {
    pub fn new(client: Elasticsearch, fp: Fingerprinter, config: BackfillConfig) -> Backfill {
        Backfill { client, fp, config }
    }

    pub fn config(&self) -> &BackfillConfig {
        &self.config
    }

    /// Runs the job to its end, or until `stop` is set (then the batches in flight finish and
    /// the report says `interrupted`). Calls `progress` after every batch. Boxed, so that the
    /// job's body is compiled once, not in every codegen unit that awaits it.
    pub fn run<'a>(
        &'a self,
        stop: &'a AtomicBool,
        progress: ProgressFn,
    ) -> futures_util::future::BoxFuture<'a, Result<BackfillReport, BackfillError>> {
        Box::pin(self.run_to_end(stop, progress))
    }

    async fn run_to_end(
        &self,
        stop: &AtomicBool,
        progress: ProgressFn,
    ) -> Result<BackfillReport, BackfillError> {
        let cfg = &self.config;
        let started = Instant::now();
        let retry = &cfg.retry;
        let indices = resolve_indices(&self.client, retry, &cfg.pattern).await?;
        if indices.is_empty() {
            return Err(BackfillError::NoIndex(cfg.pattern.clone()));
        }
        // What each index holds; the fingerprinter must make every method of each.
        let mut metas = BTreeMap::new();
        for index in &indices {
            let meta = verify_index(&self.client, retry, index, &cfg.names).await?;
            meta.check_fingerprinter(index, &self.fp)?;
            meta.check_group_text_fields(index, &cfg.text_fields)?;
            metas.insert(index.clone(), meta);
        }
        let scanner = Scanner::new(self.client.clone(), retry.clone());
        let paging = scanner.detect(cfg.paging, &indices[0]).await?;

        let key = JobKey {
            pattern: cfg.pattern.clone(),
            mode: cfg.mode.key().into(),
            fingerprint_version: self.fp.version().to_owned(),
            minhash_version: metas.values().find_map(|m| m.minhash.as_ref()).map(|m| {
                match m.layout {
                    MinHashLayout::Full => self.fp.minhash_version().to_owned(),
                    layout => format!("{} ({layout} layout)", self.fp.minhash_version()),
                }
            }),
            text_fields: cfg.text_fields.clone(),
            version_field: cfg.names.version.clone(),
            slice: cfg.slice.filter(|s| !s.is_whole()),
        };
        let (journal, mut state, resumed) = self.open_state(&key)?;
        let failed = Arc::new(FailedFile::open(&cfg.failed_path, !resumed)?);

        // Set every index up first (cutoffs, batches left in flight, counts), for the total.
        let mut plans = Vec::new();
        let mut total = 0;
        for index in &indices {
            let st = state.indices.entry(index.clone()).or_default();
            if st.done {
                total += st.counts.scanned;
                continue;
            }
            self.refresh(index).await?;
            if cfg.mode == Mode::All && st.cutoffs.is_none() {
                st.cutoffs = Some(self.cutoffs(index).await?);
            }
            if let Some(j) = &journal {
                j.record(&Entry::Index {
                    index: index.clone(),
                    cutoffs: st.cutoffs.clone(),
                })?;
            }
            let segments = self.segments(&metas[index], st.cutoffs.as_ref());
            let in_flight = std::mem::take(&mut st.in_flight);
            for (b, ids) in in_flight {
                let c = self.recover(index, &metas[index], &ids, &segments).await?;
                tracing::info!(
                    index,
                    batch = b,
                    in_flight = ids.len(),
                    recovered = c.recovered,
                    "batch in flight when the previous run stopped: looked up"
                );
                if let Some(j) = &journal {
                    j.record(&Entry::Done {
                        index: index.clone(),
                        b,
                        counts: c.clone(),
                        skip: vec![],
                        ms: 0,
                    })?;
                }
                state.indices.get_mut(index).unwrap().counts.add(&c);
            }
            let st = &state.indices[index];
            let remaining = self.count(&scanner, paging, index, &segments).await?;
            total += st.counts.scanned + remaining;
            plans.push((index.clone(), segments));
        }

        let job_counts = Arc::new(Mutex::new(state.total()));
        let next_batch = Arc::new(Mutex::new(state.next_batch.max(1)));
        let aimd = Arc::new(Aimd::new(cfg.concurrency, cfg.bulk_size, cfg.adapt));
        let pace = Arc::new(Pace::new(cfg.max_docs_per_sec));
        let mut interrupted = false;
        let mut regroups = BTreeMap::new();
        let mut regroup_pending = Vec::new();
        let sliced = cfg.slice.is_some_and(|s| !s.is_whole());
        for (index, segments) in plans {
            let st = &state.indices[&index];
            let run = Arc::new(IndexRun {
                index: index.clone(),
                indexer: EsIndexer::new(
                    self.client.clone(),
                    &index,
                    metas[&index].clone(),
                    self.fp.clone(),
                )?
                .with_retry(retry.clone())
                .with_detect_noop(cfg.mode == Mode::OnlyMissing),
                fields: cfg.text_fields.clone(),
                dry_run: cfg.dry_run,
                journal: journal.clone(),
                failed: Arc::clone(&failed),
                aimd: Arc::clone(&aimd),
                counts: Arc::new(Mutex::new(BackfillCounts::default())),
                job_counts: Arc::clone(&job_counts),
                skip: Mutex::new(st.skip.clone()),
                started,
                progress: Arc::clone(&progress),
                total,
                next_batch: Arc::clone(&next_batch),
                label_field: match cfg.linking {
                    Linking::Join => metas[&index].group.as_ref().map(|g| g.field.clone()),
                    Linking::Search => None,
                },
            });
            let mut catch_up = 0;
            let mut lost = 0;
            loop {
                match self
                    .round(&run, &segments, &scanner, paging, &pace, stop)
                    .await?
                {
                    RoundEnd::Interrupted => {
                        interrupted = true;
                        break;
                    }
                    RoundEnd::Lost(e, seen) => {
                        lost = if seen > 0 { 1 } else { lost + 1 };
                        if cfg.dry_run || lost > MAX_LOST_WALKS {
                            return Err(e.into());
                        }
                        tracing::warn!(index, error = %e, "lost the walk; refreshing and starting a new one (written documents are not read again)");
                    }
                    RoundEnd::Complete(seen) => {
                        if seen == 0 || cfg.dry_run || catch_up >= cfg.catch_up_rounds {
                            break;
                        }
                        catch_up += 1;
                    }
                }
                self.refresh(&index).await?;
            }
            state
                .indices
                .get_mut(&index)
                .unwrap()
                .counts
                .add(&run.counts.lock().unwrap());
            if interrupted {
                break;
            }
            if !cfg.dry_run && super::finish_layout_upgrade(&self.client, retry, &index).await? {
                tracing::info!(
                    index,
                    "every document is in the compact layout now: queries send only its terms"
                );
            }
            if !cfg.dry_run && run.label_field.is_some() {
                if sliced {
                    regroup_pending.push(index.clone());
                } else {
                    let r = self
                        .regroup(&index, resumed, stop, &progress, &job_counts, total)
                        .await?;
                    interrupted = r.interrupted;
                    regroups.insert(index.clone(), r);
                    if interrupted {
                        break;
                    }
                }
            }
            if let Some(j) = &journal {
                j.record(&Entry::IndexDone {
                    index: index.clone(),
                })?;
            }
        }
        if !interrupted {
            if let Some(j) = &journal {
                j.record(&Entry::Finished)?;
            }
        }
        let counts = state.total();
        let elapsed = state.elapsed + started.elapsed();
        let secs = elapsed.as_secs_f64().max(1e-9);
        Ok(BackfillReport {
            pattern: cfg.pattern.clone(),
            mode: cfg.mode.key().into(),
            dry_run: cfg.dry_run,
            // `--all` walks shard by shard, which pages with scroll.
            paging: walk_paging(paging, (cfg.mode == Mode::All).then_some("_shards"))
                .name()
                .into(),
            slice: key.slice.map(|s| s.to_string()),
            indices: indices
                .iter()
                .map(|i| (i.clone(), state.indices[i].counts.clone()))
                .collect(),
            docs_per_sec: counts.scanned as f64 / secs,
            counts,
            elapsed_secs: secs,
            resumed,
            interrupted,
            failed_file: cfg.failed_path.clone(),
            state_file: cfg.state_path.clone(),
            linking: cfg.linking,
            regroups,
            regroup_pending,
        })
    }

    /// Links the duplicate groups of `index`, whose articles were written as their own
    /// groups, by one regroup by the join ([`BackfillConfig::linking`]), with its default work
    /// file's name beside the back-fill's state file. The file follows the back-fill's job: a
    /// resumed job (`resumed`) goes on with the regroup it left there (the back-fill records
    /// the index as done only after it), a new job discards whatever regroup left one there
    /// (its links are of articles this job has written again).
    async fn regroup(
        &self,
        index: &str,
        resumed: bool,
        stop: &AtomicBool,
        progress: &ProgressFn,
        job_counts: &Mutex<BackfillCounts>,
        total: u64,
    ) -> Result<RegroupReport, BackfillError> {
        let cfg = &self.config;
        let state = cfg
            .state_path
            .with_file_name(crate::regroup::default_state_path(index, false));
        let config = RegroupConfig {
            state,
            paging: cfg.paging,
            keep_alive: cfg.keep_alive,
            max_docs_per_sec: cfg.max_docs_per_sec,
            retry: cfg.retry.clone(),
            linking: Linking::Join,
            restart: !resumed,
            ..RegroupConfig::new(index)
        };
        tracing::info!(index, state = %config.state.display(), "every document is fingerprinted: linking the duplicate groups by the join");
        crate::regroup::regroup(
            self.client.clone(),
            &config,
            stop,
            |p| {
                progress(&Progress {
                    counts: job_counts.lock().unwrap().clone(),
                    total,
                    index: index.to_owned(),
                    in_flight: 0,
                    bulk_size: 0,
                    regroup: Some(p.clone()),
                })
            },
            |_| Ok(()),
        )
        .await
        .map_err(|e| BackfillError::Regroup {
            index: index.to_owned(),
            source: Box::new(e),
        })
    }

    /// The journal (none in a dry run), what it held, and whether this run continues a job.
    fn open_state(
        &self,
        key: &JobKey,
    ) -> Result<(Option<Arc<Journal>>, Replayed, bool), BackfillError> {
        let cfg = &self.config;
        let fresh = Replayed {
            next_batch: 1,
            ..Replayed::default()
        };
        if cfg.dry_run {
            return Ok((None, fresh, false));
        }
        let path = &cfg.state_path;
        let lock = StateLock::acquire(path)?;
        let old = journal::replay(path)?;
        match &old.key {
            Some(k) if k.slice != key.slice && !old.finished && !cfg.restart => {
                let name = |s: Option<Slice>| {
                    s.map_or("(none: the whole index)".into(), |s| s.to_string())
                };
                Err(BackfillError::OtherSlice {
                    path: path.clone(),
                    theirs: name(k.slice),
                    ours: name(key.slice),
                })
            }
            Some(k) if k == key && !old.finished => {
                let j = Journal::compact(path, &old, lock)?;
                tracing::info!(state = %path.display(), "continuing an interrupted back-fill");
                Ok((Some(Arc::new(j)), old, true))
            }
            Some(k) if k != key && !old.finished && !cfg.restart => Err(BackfillError::OtherJob {
                path: path.clone(),
                theirs: describe(k),
                ours: describe(key),
            }),
            _ => Ok((
                Some(Arc::new(Journal::create(path, key, lock)?)),
                fresh,
                false,
            )),
        }
    }

    /// The walks of one index holding `meta`: the stale documents ([`stale_query`]) for
    /// `--only-missing`; one per shard, each with its cutoff, for `--all`.
    fn segments(
        &self,
        meta: &IndexMeta,
        cutoffs: Option<&BTreeMap<String, i64>>,
    ) -> Vec<(Option<String>, Value)> {
        let stale = stale_query(meta);
        match cutoffs {
            None => vec![(None, stale)],
            Some(c) => c
                .iter()
                .map(|(shard, max)| {
                    let q = json!({ "bool": { "should": [
                        { "range": { "_seq_no": { "lte": max } } },
                        stale,
                    ], "minimum_should_match": 1 } });
                    (Some(format!("_shards:{shard}")), q)
                })
                .collect(),
        }
    }

    /// Each shard's highest `_seq_no` now.
    async fn cutoffs(&self, index: &str) -> Result<BTreeMap<String, i64>, EsError> {
        let r = request(
            &self.client,
            &self.config.retry,
            &format!("index `{index}`: shard sequence numbers"),
            Method::Get,
            &format!("/{}/_stats", path_segment(index)),
            &[("level", "shards")],
            None,
        )
        .await?;
        let mut out = BTreeMap::new();
        let shards = r["indices"][index]["shards"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (shard, copies) in shards {
            let max = copies
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["seq_no"]["max_seq_no"].as_i64())
                .max()
                .unwrap_or(-1);
            out.insert(shard, max);
        }
        if out.is_empty() {
            return Err(EsError::BadResponse {
                what: format!("index `{index}`: shard stats"),
                detail: "no shards with sequence numbers".into(),
            });
        }
        Ok(out)
    }

    async fn refresh(&self, index: &str) -> Result<(), EsError> {
        refresh(&self.client, &self.config.retry, index).await
    }

    /// Documents the walks of an index match now (in the job's slice).
    async fn count(
        &self,
        scanner: &Scanner,
        paging: Paging,
        index: &str,
        segments: &[(Option<String>, Value)],
    ) -> Result<u64, EsError> {
        let mut n = 0;
        for (pref, q) in segments {
            let options = ScanOptions {
                paging: walk_paging(paging, pref.as_deref()),
                keep_alive: self.config.keep_alive,
                slice: self.config.slice,
                ..ScanOptions::default()
            };
            n += scanner.count(index, q, &options, pref.as_deref()).await?;
        }
        Ok(n)
    }

    /// Counts the documents of batches that were in flight when a run stopped: those the walk
    /// no longer matches were written (or recorded as too short), those gone were deleted;
    /// the rest will be walked again and are not counted here.
    async fn recover(
        &self,
        index: &str,
        meta: &IndexMeta,
        ids: &[String],
        segments: &[(Option<String>, Value)],
    ) -> Result<BackfillCounts, EsError> {
        let mut c = BackfillCounts::default();
        let retry = &self.config.retry;
        let reasons: Vec<&str> = meta
            .simhash
            .iter()
            .map(|s| s.fields.reason.as_str())
            .chain(meta.minhash.iter().map(|m| m.fields.reason.as_str()))
            .collect();
        let includes = reasons.join(",");
        for chunk in ids.chunks(1000) {
            let r = mget(
                &self.client,
                retry,
                &format!("index `{index}`: look up the batches left in flight"),
                &format!("/{}/_mget", path_segment(index)),
                &[("_source_includes", includes.as_str())],
                Some(&Body::Json(json!({ "ids": chunk }))),
            )
            .await?;
            let mut pending = HashSet::new();
            for (pref, q) in segments {
                let mut params = vec![];
                if let Some(p) = pref {
                    params.push(("preference", p.as_str()));
                }
                let body = json!({
                    "size": chunk.len(),
                    "_source": false,
                    "query": { "bool": { "filter": [ { "ids": { "values": chunk } }, q ] } },
                });
                let s = search(
                    &self.client,
                    retry,
                    &format!("index `{index}`: which in-flight documents still need a fingerprint"),
                    &format!("/{}/_search", path_segment(index)),
                    &params,
                    Some(&Body::Json(body)),
                )
                .await?;
                for h in s["hits"]["hits"].as_array().into_iter().flatten() {
                    if let Some(id) = h["_id"].as_str() {
                        pending.insert(id.to_owned());
                    }
                }
            }
            for d in r["docs"].as_array().into_iter().flatten() {
                let id = d["_id"].as_str().unwrap_or_default();
                if d["found"] != true {
                    c.deleted += 1;
                } else if pending.contains(id) {
                    continue;
                } else if reasons.iter().any(|r| d["_source"][*r] == "too_short") {
                    c.too_short += 1;
                } else {
                    c.written += 1;
                }
                c.scanned += 1;
                c.recovered += 1;
            }
        }
        Ok(c)
    }

    /// One walk over an index: a reader task pages through it, pages are fingerprinted on the
    /// rayon pool, chunks are written by up to `concurrency` bulk requests.
    async fn round(
        &self,
        run: &Arc<IndexRun>,
        segments: &[(Option<String>, Value)],
        scanner: &Scanner,
        paging: Paging,
        pace: &Arc<Pace>,
        stop: &AtomicBool,
    ) -> Result<RoundEnd, BackfillError> {
        let cfg = &self.config;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<Hit>, WalkError>>(2);
        let reader_stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let scanner = scanner.clone();
            let segments = segments.to_vec();
            let index = run.index.clone();
            let fields = run.source_fields();
            let (page_size, keep_alive, slice) = (cfg.page_size.max(1), cfg.keep_alive, cfg.slice);
            let reader_stop = Arc::clone(&reader_stop);
            tokio::spawn(async move {
                for (preference, query) in segments {
                    let paging = walk_paging(paging, preference.as_deref());
                    let spec = WalkSpec {
                        index: index.clone(),
                        query,
                        fields: fields.clone(),
                        page_size,
                        preference,
                        keep_alive,
                        slice,
                    };
                    let mut walker = Walker::open(&scanner, paging, spec);
                    loop {
                        if reader_stop.load(Ordering::SeqCst) {
                            walker.close().await;
                            return;
                        }
                        match walker.next_page().await {
                            Ok(hits) if hits.is_empty() => break,
                            Ok(hits) => {
                                if tx.send(Ok(hits)).await.is_err() {
                                    walker.close().await;
                                    return;
                                }
                            }
                            Err(e) => {
                                walker.close().await;
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                        }
                    }
                    walker.close().await;
                }
            })
        };

        let mut writers: JoinSet<Result<(), BackfillError>> = JoinSet::new();
        let mut seen = 0u64;
        let mut end: Option<Result<RoundEnd, BackfillError>> = None;
        'pages: while let Some(page) = rx.recv().await {
            let hits = match page {
                Ok(h) => h,
                Err(WalkError::Lost(e)) => {
                    end = Some(Ok(RoundEnd::Lost(e, seen)));
                    break;
                }
                Err(WalkError::Fatal(e)) => {
                    end = Some(Err(e.into()));
                    break;
                }
            };
            let hits: Vec<Hit> = {
                let skip = run.skip.lock().unwrap();
                hits.into_iter().filter(|h| !skip.contains(&h.id)).collect()
            };
            seen += hits.len() as u64;
            let batch = run.prepare(hits).await?;
            let (updates, labelled) = (batch.updates, batch.labelled);
            let mut bad = BackfillCounts::default();
            let mut bad_ids = Vec::new();
            for (id, reason) in batch.bad {
                bad.scanned += 1;
                bad.bad += 1;
                run.failed
                    .write(&run.index, &id, "bad", json!({ "reason": reason }))?;
                bad_ids.push(id);
            }
            if bad.scanned > 0 {
                run.finish(0, bad, bad_ids)?;
            }
            let mut rest = updates;
            while !rest.is_empty() {
                let n = run.aimd.bulk_size().min(rest.len());
                let chunk: Vec<_> = rest.drain(..n).collect();
                let chunk_labelled: HashSet<String> = chunk
                    .iter()
                    .filter(|u| labelled.contains(&u.id))
                    .map(|u| u.id.clone())
                    .collect();
                pace.take(chunk.len()).await;
                let slot = Aimd::acquire(Arc::clone(&run.aimd)).await;
                // Surface a failed writer before sending more.
                while let Some(done) = writers.try_join_next() {
                    if let Err(e) = flatten(done) {
                        end = Some(Err(e));
                        break 'pages;
                    }
                }
                let run = Arc::clone(run);
                writers.spawn(async move {
                    let r = run.write_chunk(chunk, chunk_labelled).await;
                    drop(slot);
                    r
                });
            }
            if stop.load(Ordering::SeqCst) {
                end = Some(Ok(RoundEnd::Interrupted));
                break;
            }
        }
        reader_stop.store(true, Ordering::SeqCst);
        drop(rx);
        // Every batch in flight finishes (or fails) before the round ends.
        while let Some(done) = writers.join_next().await {
            if let Err(e) = flatten(done) {
                if !matches!(end, Some(Err(_))) {
                    end = Some(Err(e));
                }
            }
        }
        let _ = reader.await;
        end.unwrap_or(Ok(RoundEnd::Complete(seen)))
    }
}

/// How a walk limited to `preference` pages: a PIT cannot be limited to a shard, so per-shard
/// walks use scroll.
fn walk_paging(paging: Paging, preference: Option<&str>) -> Paging {
    if preference.is_some() {
        Paging::Scroll
    } else {
        paging
    }
}

fn flatten(
    r: Result<Result<(), BackfillError>, tokio::task::JoinError>,
) -> Result<(), BackfillError> {
    r.map_err(|e| EsError::Config(format!("a bulk writer task failed: {e}")))?
}

fn describe(k: &JobKey) -> String {
    let minhash = k
        .minhash_version
        .as_ref()
        .map(|v| format!(", MinHash version {v}"))
        .unwrap_or_default();
    let slice = k.slice.map(|s| format!(" --slice {s}")).unwrap_or_default();
    format!(
        "`{}` --{}{slice} --field {} (fingerprint version {}{minhash})",
        k.pattern,
        if k.mode == "all" {
            "all"
        } else {
            "only-missing"
        },
        k.text_fields.join(" --field "),
        k.fingerprint_version
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::Profile;

    #[test]
    fn bad_text_is_told_apart_from_missing_text() {
        let fp = Fingerprinter::for_profile(Profile::Default);
        let fields = vec!["title".to_string(), "content".to_string()];
        let hit = |source: Value| Hit {
            id: "d".into(),
            seq_no: 1,
            primary_term: 1,
            source,
        };
        match prepare(
            &fp,
            Methods::BOTH,
            &fields,
            None,
            None,
            hit(json!({"title": "t", "content": 42})),
        ) {
            Prepared::Bad { reason, .. } => assert!(reason.contains("`content` holds a number")),
            Prepared::Update { .. } => panic!("a number is not text"),
        }
        match prepare(
            &fp,
            Methods::BOTH,
            &fields,
            None,
            None,
            hit(json!({"title": ["a", {"x": 1}]})),
        ) {
            Prepared::Bad { reason, .. } => assert!(reason.contains("an object")),
            Prepared::Update { .. } => panic!("an object is not text"),
        }
        for src in [
            json!({}),
            json!({"title": "", "content": null}),
            json!({"other": 1}),
        ] {
            match prepare(&fp, Methods::BOTH, &fields, None, None, hit(src)) {
                Prepared::Update { update: u, .. } => {
                    let s = &u.sketches;
                    assert!(s.simhash.as_ref().unwrap().is_err(), "too short");
                    assert!(s.minhash.as_ref().unwrap().is_err(), "too short");
                }
                Prepared::Bad { reason, .. } => {
                    panic!("missing text is too short, not bad: {reason}")
                }
            }
        }
    }

    /// A document carries a label where the group field holds a string; only read where the
    /// job labels by the join (a label field is given).
    #[test]
    fn a_label_is_a_string_in_the_group_field() {
        let fp = Fingerprinter::for_profile(Profile::Default);
        let fields = vec!["title".to_string()];
        let labelled = |source: Value, label_field: Option<&str>| {
            let hit = Hit {
                id: "d".into(),
                seq_no: 1,
                primary_term: 1,
                source,
            };
            match prepare(&fp, Methods::BOTH, &fields, None, label_field, hit) {
                Prepared::Update { labelled, .. } => labelled,
                Prepared::Bad { reason, .. } => panic!("{reason}"),
            }
        };
        let g = Some("nearDupGroup");
        assert!(labelled(json!({"title": "t", "nearDupGroup": "a1"}), g));
        assert!(!labelled(json!({"title": "t", "nearDupGroup": null}), g));
        assert!(!labelled(json!({"title": "t"}), g));
        assert!(!labelled(json!({"title": "t", "other": "a1"}), g));
        assert!(!labelled(json!({"title": "t", "nearDupGroup": "a1"}), None));
    }

    #[test]
    fn state_file_names_and_patterns() {
        assert_eq!(
            default_state_path("news-*,old", None),
            PathBuf::from(".neardup-backfill-news-__old.jsonl")
        );
        // The slices of one job never share a default file.
        let slice = |s: &str| Some(s.parse::<Slice>().unwrap());
        assert_eq!(
            default_state_path("news", slice("1/2")),
            PathBuf::from(".neardup-backfill-news-slice-1-of-2.jsonl")
        );
        let c = BackfillConfig::new("news").with_slice(slice("0/2"));
        assert_eq!(
            c.state_path,
            PathBuf::from(".neardup-backfill-news-slice-0-of-2.jsonl")
        );
        assert_eq!(
            c.failed_path,
            PathBuf::from("neardup-backfill-failed-slice-0-of-2.jsonl")
        );
        let whole = BackfillConfig::new("news").with_slice(slice("0/1"));
        assert_eq!(whole.slice, None);
        assert_eq!(whole.state_path, default_state_path("news", None));
        assert_eq!(whole.failed_path, default_failed_path(None));
    }

    #[test]
    fn a_slice_resumes_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let client = crate::EsConfig::new("http://127.0.0.1:9")
            .unwrap()
            .client()
            .unwrap();
        let slice = |s: &str| Some(s.parse::<Slice>().unwrap());
        let job = |s: Option<Slice>, restart: bool| {
            let mut c = BackfillConfig::new("news").with_slice(s);
            c.state_path = dir.path().join("state.jsonl");
            c.restart = restart;
            Backfill::new(
                client.clone(),
                Fingerprinter::for_profile(Profile::Default),
                c,
            )
        };
        let key = |s: Option<Slice>| JobKey {
            pattern: "news".into(),
            mode: "missing".into(),
            fingerprint_version: "v".into(),
            minhash_version: None,
            text_fields: vec!["title".into()],
            version_field: "simHashVersion".into(),
            slice: s,
        };
        // Slice 0/2 starts a job and stops before its end.
        let (j, _, resumed) = job(slice("0/2"), false)
            .open_state(&key(slice("0/2")))
            .unwrap();
        assert!(!resumed);
        drop(j);
        // Slice 1/2 on that file is refused, naming both slices; so is the whole index.
        for (ours, named) in [(slice("1/2"), "1/2"), (None, "the whole index")] {
            let e = match job(ours, false).open_state(&key(ours)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{ours:?} took over slice 0/2's state file"),
            };
            assert!(
                e.contains("0/2") && e.contains(named) && e.contains("--slice"),
                "{e}"
            );
        }
        // The same slice resumes.
        let (_, _, resumed) = job(slice("0/2"), false)
            .open_state(&key(slice("0/2")))
            .unwrap();
        assert!(resumed);
    }

    #[test]
    fn counts_add_up() {
        let mut c = BackfillCounts {
            scanned: 5,
            written: 2,
            too_short: 1,
            deleted: 1,
            bad: 1,
            ..BackfillCounts::default()
        };
        assert!(c.adds_up());
        c.add(&BackfillCounts {
            scanned: 1,
            failed: 1,
            ..BackfillCounts::default()
        });
        assert!(c.adds_up());
        assert_eq!(c.scanned, 6);
    }
}

//! `neardup regroup`: recompute the duplicate groups of a whole index as the connected
//! components of what `similar` links at the index's default tolerance, and write only the
//! labels that change.
//!
//! The writers ([`super::group`]) keep groups current one article at a time and never
//! relabel others, so two groups an article bridges stay apart, and articles written by two
//! processes at the same moment can start two groups. A regroup joins them.
//!
//! ## How
//!
//! 1. **Link.** The index is walked once (the one paging layer, [`super::Scanner`]), reading each
//!    article's stored sketch, label and `_seq_no`/`_primary_term`, and each article with a
//!    sketch is united, in an on-disk union-find (`forest`), with what the search every writer
//!    runs ([`Similar::by_fingerprint`], at the index's default tolerance) finds near it. By
//!    default ([`Linking::Join`]) no search is sent: the walk writes each article's sketch and
//!    the terms its search would send to files, and `join` collects each article's
//!    candidates from them as Elasticsearch would and judges them by the same rule. Or
//!    ([`Linking::Search`]) one search per article. Links are symmetric (a shared band and an
//!    estimate within the tolerance, or a Hamming distance), so a link missed by one side's
//!    search (the other article was not yet searchable) is found by the other's.
//! 2. **Choose.** Each component's representative is, where the index orders groups by a
//!    field (`es-init --group-order`), its earliest member by the writers' one rule
//!    ([`super::group::earliest_first`]). In the default order (first fingerprinted, which
//!    no document records), it is the member whose id most members already carry as their
//!    label, so that the fewest labels change (a group the writers made is labelled with its
//!    first fingerprinted member; joined groups keep the larger one's label), ties to the
//!    smaller id. A member in every case, so a deleted representative's label gives way.
//! 3. **Write.** Each article whose label differs from its representative's id gets it, in
//!    guarded partial updates (`if_seq_no`/`if_primary_term` of the version read): an
//!    article changed since (re-fingerprinted, relabelled by a writer) is left as it is and
//!    counted. An article too short to have a sketch carries its own id; one never
//!    fingerprinted is left to the back-fill.
//!
//! ## Memory, resumability, cost
//!
//! The union-find, the article numbering and the tallies live in a redb file (`--state`),
//! so memory is one page of articles, the searches in flight and redb's page cache
//! ([`RegroupConfig::cache_bytes`]), whatever the index size; the file grows by about
//! 100 bytes per article. A join adds its bucket table (at most 128 MiB) and a byte per
//! article for each thread, and files of about 2 KB an article read through the page cache
//! (`join`). Each page of the walk (its articles, their links) is one transaction, as is
//! each page joined, each chunk of the choice and each bulk of labels: a run killed at any
//! moment and started again with the same command goes on from its last commit (pages
//! already linked are read again but not searched again; a join's walk starts over unless it
//! had finished). A search costs the cluster one `similar` search per article (what the
//! writers pay once per write); both cost one partial update per changed label, paced by
//! [`RegroupConfig::max_docs_per_sec`].
//!
//! Articles written during the link phase after the walk began are not walked (the writers
//! label them); articles changed after they were read keep their label.

mod common;
mod forest;
mod join;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use elasticsearch::Elasticsearch;
use futures_util::StreamExt;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::{json, Value};

pub use self::forest::{Component, Phase};
use self::forest::{Forest, Node, Rank};
use super::group::{better_container, group_near, order_key_at};
use super::schema::{GroupLink, GroupMeta, GroupOrder, IndexMeta};
use super::similar::{
    aligned_candidates, aligned_match, candidate_terms, common_keys, held_minima, judged_match,
    stored_query, Aligner, BatchTexts, StoredQuery,
};
use super::{
    path_segment, EsError, EsIndexer, GroupLabel, ItemFailure, Near, RetryPolicy, Similar,
    SimilarOptions,
};
use crate::client::{refresh, search};
use crate::init::record_common_minima;
use crate::pace::Pace;
use crate::scan::Paging;
use crate::walk::{resolve_indices, Hit, WalkError, WalkSpec, Walker};
use neardup_core::method::{Match, Query};
use neardup_core::relation::{AlignRule, Relation};
use neardup_core::Sketch;

/// Why a regroup stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegroupError {
    #[error(transparent)]
    Es(#[from] EsError),
    #[error("state file {}: {detail}", path.display())]
    State { path: PathBuf, detail: String },
    #[error("state file {} is in use by another regroup; wait for it, or pass --state to use another file", path.display())]
    StateInUse { path: PathBuf },
    #[error("state file {} belongs to another regroup ({recorded}). Pass --restart to discard it, or --state to use another file", path.display())]
    OtherJob { path: PathBuf, recorded: String },
    #[error("no index matches `{0}`")]
    NoIndex(String),
    #[error("`{pattern}` is {} indices ({}): regroup one index at a time", indices.len(), indices.join(", "))]
    SeveralIndices {
        pattern: String,
        indices: Vec<String>,
    },
    #[error("index `{0}` keeps no duplicate groups: `neardup es-init --index {0}` adds them")]
    NoGroups(String),
    #[error("cannot write the groups: {0}")]
    Output(std::io::Error),
    #[error("index `{index}` links its groups by the texts of {}: leave out --field (or give those), or `neardup es-init --group-by texts --group-text-field NAME` for others", recorded.join(", "))]
    OtherTextFields {
        index: String,
        recorded: Vec<String>,
    },
    #[error("index `{0}` is being moved to the compact MinHash layout: run `neardup backfill --index {0}` to the end first (it records when every document is moved), then regroup")]
    LayoutUpgrade(String),
    #[error("cannot learn the common minima terms: {0}")]
    CommonMinima(String),
    #[error("--common-above: {0}")]
    CommonAbove(String),
}

/// How a regroup runs.
#[derive(Clone, Debug)]
pub struct RegroupConfig {
    /// One index, or an alias or pattern that names one.
    pub index: String,
    /// The work file (see the module docs); [`default_state_path`] by default.
    pub state: PathBuf,
    /// Compute and list the groups, write nothing.
    pub dry_run: bool,
    /// Discard a work file left by another regroup and start over.
    pub restart: bool,
    /// Articles per page of the walk (and per transaction of the work file).
    pub page_size: usize,
    /// `similar` searches in flight.
    pub searches_in_flight: usize,
    /// Labels per bulk request.
    pub bulk_size: usize,
    /// Articles linked (searched or joined), and labels written, per second at most (none:
    /// unlimited).
    pub max_docs_per_sec: Option<f64>,
    pub paging: Paging,
    pub keep_alive: Duration,
    pub retry: RetryPolicy,
    /// redb's page cache for the work file, in bytes.
    pub cache_bytes: usize,
    /// The texts decide what is joined (`regroup --align`): MinHash finds candidates as an
    /// aligned lookup does, their texts and the article's are aligned, and only copies
    /// (`near_duplicate`, `contained_in`) are joined; two instances of one template, or two
    /// articles that share a passage, stay apart. Formula text the index records does not
    /// count. Where the index links its groups by texts ([`GroupLink::Texts`]) they decide
    /// with [`AlignRule::DEFAULT`] unless another rule is given here.
    pub align: Option<AlignRule>,
    /// The text fields the alignment reads (`_source`), in order. Default: those the index
    /// links its groups by, else `title` and `content`; others than the recorded ones are an
    /// error.
    pub text_fields: Option<Vec<String>>,
    /// How each article's links are found.
    pub linking: Linking,
    /// Learn the index's common minima terms in the walk: those held by more than this many
    /// articles ([`crate::schema::CommonMinima`]). The join is built with them, and unless it
    /// is a dry run they are recorded in the index's `_meta` before it joins, for every
    /// search after it. `None`: the join uses those the index records, if any. Needs
    /// [`Linking::Join`] and an index holding minima terms.
    pub common_above: Option<u64>,
}

/// How the link phase finds what each article links to. Both find what a `similar` search
/// of the article finds at the index's tolerance (the same terms, the same rule); they differ
/// in where the work is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Linking {
    /// Read every article's stored terms once and join them on this machine (`join`): no
    /// search, files beside the work file of about 2 KB an article, memory that stays under
    /// about 128 MiB beside the page cache. Articles written after the walk are not seen
    /// (the writers link them).
    #[default]
    Join,
    /// One `similar` search per article, as the writers search (what every release before
    /// the join did): the cluster does the work, the work file is all that is kept.
    Search,
}

impl RegroupConfig {
    pub fn new(index: impl Into<String>) -> RegroupConfig {
        let index = index.into();
        RegroupConfig {
            state: default_state_path(&index, false),
            index,
            dry_run: false,
            restart: false,
            page_size: 500,
            searches_in_flight: 8,
            bulk_size: 500,
            max_docs_per_sec: None,
            paging: Paging::Auto,
            keep_alive: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            cache_bytes: 64 << 20,
            align: None,
            text_fields: None,
            linking: Linking::default(),
            common_above: None,
        }
    }
}

/// `.neardup-regroup-<index>.redb` (`.dry-run.redb` for a dry run), in the working directory.
pub fn default_state_path(index: &str, dry_run: bool) -> PathBuf {
    let safe: String = index
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tail = if dry_run { ".dry-run" } else { "" };
    PathBuf::from(format!(".neardup-regroup-{safe}{tail}.redb"))
}

/// Where a running regroup is.
#[derive(Clone, Debug)]
pub struct RegroupProgress {
    pub phase: Phase,
    /// Articles read (link), or chosen (choose), or labels checked (write).
    pub done: u64,
    /// The index's article count, where known.
    pub total: Option<u64>,
}

/// What a regroup did (counts of the whole job, over every run that made it).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RegroupReport {
    pub index: String,
    pub field: String,
    pub tolerance: String,
    /// The texts decided what was joined ([`RegroupConfig::align`]).
    pub aligned: bool,
    /// The formula text an aligned regroup left out, when the index records one.
    pub formula: Option<String>,
    pub dry_run: bool,
    /// This run went on from a work file a previous run left.
    pub resumed: bool,
    pub state_file: PathBuf,
    /// Articles read.
    pub articles: u64,
    /// How the links were found.
    pub linking: Linking,
    /// The join's files at their largest, in bytes (0 for a search, or a join whose link
    /// phase a previous run finished).
    pub join_bytes: u64,
    /// The common minima terms the join was built with ([`RegroupConfig::common_above`]):
    /// learned by this walk, or recorded by the index; `None` for none.
    pub common_minima: Option<CommonMinimaReport>,
    /// Articles linked by this run, searched or joined (the rest were linked by a previous
    /// one).
    pub searched: u64,
    /// Components of articles with a sketch (a single article is a group of its own).
    pub groups: u64,
    /// Of those, with two or more articles.
    pub shared_groups: u64,
    pub largest_group: u64,
    /// Labels that differ from what the groups say (written, or for a dry run, would be).
    pub changed: u64,
    pub written: u64,
    /// Articles changed since they were read: left as they are.
    pub conflicts: u64,
    /// Articles deleted since they were read.
    pub deleted: u64,
    /// Labels Elasticsearch refused (this run's).
    pub failed: Vec<ItemFailureReport>,
    /// The run stopped on request before the end: run it again to go on.
    pub interrupted: bool,
    pub elapsed_secs: f64,
}

/// The common minima terms a join was built with.
#[derive(Clone, Debug, Serialize)]
pub struct CommonMinimaReport {
    /// Held by more than this many articles.
    pub above: u64,
    /// How many terms.
    pub terms: usize,
    /// Learned by this regroup's walk (and, unless a dry run, recorded in the index).
    pub learned: bool,
}

/// A label not written, and why.
#[derive(Clone, Debug, Serialize)]
pub struct ItemFailureReport {
    pub id: String,
    pub status: u16,
    pub reason: String,
}

impl From<ItemFailure> for ItemFailureReport {
    fn from(f: ItemFailure) -> Self {
        ItemFailureReport {
            id: f.id,
            status: f.status,
            reason: format!("{}: {}", f.error_type, f.reason),
        }
    }
}

/// Walks lost this many times in a row stop the job (it can be run again).
const MAX_LOST_WALKS: u32 = 5;

/// Articles per transaction of the choice.
const CHOOSE_CHUNK: usize = 10_000;

/// Recomputes the groups of `config.index` (see the module docs). `stop` ends the run after
/// the page or bulk in flight (the report says `interrupted`); `progress` is called after
/// each; `each_group` gets, for a dry run, every group of two or more articles.
pub async fn regroup(
    client: Elasticsearch,
    config: &RegroupConfig,
    stop: &AtomicBool,
    progress: impl Fn(&RegroupProgress) + Sync,
    mut each_group: impl FnMut(&Component) -> std::io::Result<()> + Send,
) -> Result<RegroupReport, RegroupError> {
    // Boxed, so that the job's body is compiled once, not for every caller's callbacks in
    // every codegen unit that awaits it.
    let job: futures_util::future::BoxFuture<'_, _> = Box::pin(regroup_job(
        client,
        config,
        stop,
        &progress,
        &mut each_group,
    ));
    job.await
}

/// [`regroup`]'s body.
async fn regroup_job(
    client: Elasticsearch,
    config: &RegroupConfig,
    stop: &AtomicBool,
    progress: &(dyn Fn(&RegroupProgress) + Sync),
    each_group: &mut (dyn FnMut(&Component) -> std::io::Result<()> + Send),
) -> Result<RegroupReport, RegroupError> {
    let started = Instant::now();
    let index = one_index(&client, &config.retry, &config.index).await?;
    let indexer = EsIndexer::open(
        client.clone(),
        &index,
        config.retry.clone(),
        &Default::default(),
    )
    .await?;
    let meta = indexer.meta().clone();
    let group = meta
        .group
        .clone()
        .ok_or_else(|| RegroupError::NoGroups(index.clone()))?;
    let method = meta.default_method();
    if meta.minhash.as_ref().is_some_and(|m| m.from_full) {
        return Err(RegroupError::LayoutUpgrade(index.clone()));
    }
    // The index's own link decides, unless asked to align.
    let (align, text_fields) = match (&group.link, &config.text_fields) {
        (GroupLink::Texts { fields }, Some(asked)) if asked != fields => {
            return Err(RegroupError::OtherTextFields {
                index: index.clone(),
                recorded: fields.clone(),
            })
        }
        (GroupLink::Texts { fields }, _) => (
            Some(config.align.unwrap_or(AlignRule::DEFAULT)),
            fields.clone(),
        ),
        (GroupLink::Sketches, asked) => (
            config.align,
            asked
                .clone()
                .unwrap_or_else(|| SimilarOptions::default().text_fields),
        ),
    };
    // Aligned candidates are MinHash's.
    if align.is_some() && method != neardup_core::Method::MinHash {
        return Err(EsError::MethodNotHeld {
            index: index.clone(),
            held: method,
            asked: neardup_core::Method::MinHash,
        }
        .into());
    }
    let near = group_near(&meta);
    let tolerance = near.tolerance;
    if config.common_above.is_some() {
        let minima = meta.minhash.as_ref().and_then(|m| m.containment.as_ref());
        if minima.is_none() || near.options.containment.is_none() {
            return Err(RegroupError::CommonAbove(format!(
                "index `{index}` holds no minima terms its groups ask (they link near-duplicates only, or the index has no containment fields): leave out --common-above"
            )));
        }
        if config.linking != Linking::Join {
            return Err(RegroupError::CommonAbove(
                "the common minima are learned by the join's walk: leave out --linking search"
                    .into(),
            ));
        }
    }
    let similar = Similar::with_options(
        client.clone(),
        None,
        SimilarOptions {
            paging: config.paging,
            keep_alive: config.keep_alive,
            text_fields: text_fields.clone(),
            ..SimilarOptions::default()
        },
        config.retry.clone(),
    );
    let aligner = match align {
        Some(rule) => Some(Arc::new(
            similar.aligner(&index.as_str().into(), rule).await?,
        )),
        None => None,
    };
    let formula = aligner.as_ref().and_then(|a| a.formula_id());
    let mut key = json!({
        "index": index,
        "field": group.field,
        "tolerance": tolerance.to_string(),
        "partial_copies": near.options.containment.is_some(),
        "version": meta.version(method),
        "order": group.order.field(),
        "dry_run": config.dry_run,
    });
    // Only a job that learns the common minima says with which bound, and only an aligned
    // job's key says how it aligns, so that a work file an earlier version left is still
    // this job's.
    if let Some(above) = config.common_above {
        key["common_above"] = json!(above);
    }
    if let Some(rule) = align {
        key["align"] = json!({
            "rule": format!("{rule:?}"),
            "texts": text_fields,
            "formula": formula,
        });
    }
    let key = key.to_string();
    let forest = Forest::open(&config.state, &key, config.restart, config.cache_bytes)?;
    let mut report = RegroupReport {
        index: index.clone(),
        field: group.field.clone(),
        tolerance: tolerance.to_string(),
        aligned: aligner.is_some(),
        formula,
        dry_run: config.dry_run,
        resumed: forest.linked()? > 0,
        state_file: config.state.clone(),
        linking: config.linking,
        ..RegroupReport::default()
    };
    let pace = Pace::new(config.max_docs_per_sec);
    let total = count(&client, &config.retry, &index).await.ok();

    if forest.phase()? == Phase::Link {
        refresh(&client, &config.retry, &index).await?;
        let mut fields: Vec<String> = similar.sketch_source_fields(index.as_str(), method).await?;
        fields.push(group.field.clone());
        fields.extend(group.order.field().map(str::to_owned));
        let link = Link {
            client: &client,
            config,
            similar: &similar,
            index: &index,
            meta: &meta,
            group: &group,
            method,
            // An aligned lookup's candidates, where the texts decide.
            near: match aligner {
                Some(_) => aligned_candidates(),
                None => near,
            },
            aligner: aligner.as_ref(),
            text_fields: &text_fields,
            forest: &forest,
            pace: &pace,
            stop,
            progress,
            total,
            spec: WalkSpec {
                index: index.clone(),
                query: json!({ "match_all": {} }),
                fields,
                page_size: config.page_size,
                preference: None,
                keep_alive: config.keep_alive,
                slice: None,
            },
        };
        let linked = match config.linking {
            Linking::Join => link.by_join(&mut report).await?,
            Linking::Search => link.by_search(&mut report).await?,
        };
        if !linked {
            report.interrupted = true;
            return finish(report, &forest, started);
        }
        forest.set_phase(Phase::Choose)?;
    }

    if forest.phase()? == Phase::Choose {
        let rank = match group.order {
            GroupOrder::Fingerprinted => Rank::MostCarried,
            GroupOrder::Earliest { .. } => Rank::Earliest,
        };
        forest.choose(rank, CHOOSE_CHUNK, config.dry_run, |done| {
            progress(&RegroupProgress {
                phase: Phase::Choose,
                done,
                total,
            })
        })?;
        forest.set_phase(Phase::Write)?;
    }

    if forest.phase()? == Phase::Write {
        let mut from = forest.written_upto()?;
        loop {
            if stop.load(Ordering::Relaxed) {
                report.interrupted = true;
                return finish(report, &forest, started);
            }
            let (changes, next) = forest.changes(from, config.bulk_size.max(1))?;
            let upto = next.unwrap_or(u64::MAX);
            if config.dry_run {
                forest.mark_written(upto, &[("changed", changes.len() as u64)])?;
            } else if !changes.is_empty() {
                pace.take(changes.len()).await;
                let labels: Vec<GroupLabel> = changes
                    .iter()
                    .map(|c| GroupLabel {
                        id: c.id.clone(),
                        guard: Some((c.seq_no, c.primary_term)),
                        label: c.label.clone(),
                    })
                    .collect();
                let r = indexer.write_group_labels(&labels).await?;
                forest.mark_written(
                    upto,
                    &[
                        ("changed", changes.len() as u64),
                        ("written", r.updated + r.noop),
                        ("conflicts", r.conflicts.len() as u64),
                        ("deleted", r.missing.len() as u64),
                    ],
                )?;
                report
                    .failed
                    .extend(r.failed.into_iter().map(ItemFailureReport::from));
            } else {
                forest.mark_written(upto, &[])?;
            }
            progress(&RegroupProgress {
                phase: Phase::Write,
                done: upto.min(total.unwrap_or(u64::MAX)),
                total,
            });
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        if config.dry_run {
            forest.components(|c| each_group(&c).map_err(RegroupError::Output))?;
        }
        forest.set_phase(Phase::Done)?;
    }
    finish(report, &forest, started)
}

/// What the link phase works with.
struct Link<'a> {
    client: &'a Elasticsearch,
    config: &'a RegroupConfig,
    similar: &'a Similar,
    index: &'a String,
    meta: &'a IndexMeta,
    group: &'a GroupMeta,
    method: neardup_core::Method,
    /// The writers' tolerance, or an aligned lookup's candidates.
    near: Near,
    aligner: Option<&'a Arc<Aligner>>,
    text_fields: &'a [String],
    forest: &'a Forest,
    pace: &'a Pace,
    stop: &'a AtomicBool,
    progress: &'a (dyn Fn(&RegroupProgress) + Sync),
    total: Option<u64>,
    /// The walk: the sketch fields, the label, the order field.
    spec: WalkSpec,
}

/// What a walk brings next.
enum Next {
    Page(Vec<Hit>),
    /// The walk was lost and starts again from the first page.
    Restarted,
    End,
    /// Asked to stop: the walk is closed.
    Stopped,
}

/// The pages of the index, a lost walk started again (up to [`MAX_LOST_WALKS`] in a row).
struct Pages<'a> {
    link: &'a Link<'a>,
    spec: WalkSpec,
    walker: Option<Walker>,
    lost: u32,
}

impl Pages<'_> {
    async fn next(&mut self) -> Result<Next, RegroupError> {
        if self.link.stopped() {
            self.close().await;
            return Ok(Next::Stopped);
        }
        let walker = self.walker.get_or_insert_with(|| {
            Walker::open(
                self.link.similar.scanner(),
                self.link.config.paging,
                self.spec.clone(),
            )
        });
        match walker.next_page().await {
            Ok(p) if p.is_empty() => {
                self.close().await;
                Ok(Next::End)
            }
            Ok(p) => {
                self.lost = 0;
                Ok(Next::Page(p))
            }
            Err(WalkError::Lost(e)) if self.lost < MAX_LOST_WALKS => {
                self.lost += 1;
                self.walker = None;
                tracing::warn!(index = %self.spec.index, error = %e, "walk lost, starting a new one");
                Ok(Next::Restarted)
            }
            Err(e) => Err(e.into_inner().into()),
        }
    }

    async fn close(&mut self) {
        if let Some(w) = self.walker.take() {
            w.close().await;
        }
    }
}

impl Link<'_> {
    fn pages(&self, spec: WalkSpec) -> Pages<'_> {
        Pages {
            link: self,
            spec,
            walker: None,
            lost: 0,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A page's articles as the work file keeps them, and their stored sketches.
    async fn read(&self, page: &[Hit]) -> Result<(Vec<Node>, Vec<Option<StoredQuery>>), EsError> {
        let mut nodes = Vec::with_capacity(page.len());
        let mut sketches = Vec::with_capacity(page.len());
        for hit in page {
            let raw = json!({ "_id": hit.id, "_index": self.index, "_source": hit.source });
            let sketch = self
                .similar
                .stored_sketch(self.index.as_str(), &raw, self.method)
                .await?;
            nodes.push(Node {
                id: hit.id.clone(),
                seq_no: hit.seq_no,
                primary_term: hit.primary_term,
                label: hit.source[&self.group.field].as_str().map(str::to_owned),
                has_sketch: sketch.is_some(),
                order: self
                    .group
                    .order
                    .field()
                    .and_then(|f| order_key_at(&hit.source, f)),
            });
            sketches.push(sketch);
        }
        Ok((nodes, sketches))
    }

    fn report_progress(&self, done: u64) {
        (self.progress)(&RegroupProgress {
            phase: Phase::Link,
            done,
            total: self.total,
        });
    }

    /// One `similar` search per article ([`Linking::Search`]). `false` when stopped.
    async fn by_search(&self, report: &mut RegroupReport) -> Result<bool, RegroupError> {
        let mut spec = self.spec.clone();
        if self.aligner.is_some() {
            spec.fields.extend(self.text_fields.iter().cloned());
        }
        let mut pages = self.pages(spec);
        let mut read = 0u64;
        loop {
            let page = match pages.next().await? {
                Next::Page(p) => p,
                Next::Stopped => return Ok(false),
                // Pages already linked are not searched again.
                Next::Restarted => {
                    read = 0;
                    continue;
                }
                Next::End => return Ok(true),
            };
            read += page.len() as u64;
            let (nodes, sketches) = self.read(&page).await?;
            let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
            // Each with its place in the page, not a borrow of it: a stream of borrowed items
            // would not be `Send`.
            let todo: Vec<(String, StoredQuery, usize)> = self
                .forest
                .unsearched(&ids)?
                .into_iter()
                .zip(nodes.iter().zip(sketches))
                .enumerate()
                .filter_map(|(at, (todo, (n, s)))| Some((n.id.clone(), s.filter(|_| todo)?, at)))
                .collect();
            self.pace.take(todo.len()).await;
            let page = &page;
            let found: Vec<Result<(String, Vec<String>), EsError>> =
                futures_util::stream::iter(todo)
                    .map(|(id, sketch, at)| async move {
                        let source = &page[at].source;
                        let (similar, index) = (self.similar, self.index.as_str());
                        let s = match self.aligner {
                            Some(a) => similar.aligned_by_stored(index, sketch, source, a).await?,
                            None => similar.by_stored(index, sketch, self.near).await?,
                        };
                        let matches = s.matches.into_iter().filter(|m| {
                            m.id != id && m.index.as_deref().is_none_or(|i| i == index)
                        });
                        let links = group_links(matches);
                        Ok((id, links))
                    })
                    .buffered(self.config.searches_in_flight.max(1))
                    .collect()
                    .await;
            let links = found.into_iter().collect::<Result<Vec<_>, _>>()?;
            report.searched += links.len() as u64;
            self.forest.record_page(&nodes, &links)?;
            tracing::debug!(index = %self.index, read, linked = self.forest.linked()?, "regroup: page linked");
            self.report_progress(read);
        }
    }

    /// The join's walk: each article's sketch and the terms its own search would send, into
    /// the terms file in `dir`; with `--common-above`, the common minima learned on the way
    /// (recorded in `_meta` unless a dry run). The list the join is built with is saved
    /// beside the terms, so that a resumed join uses the same one. `false` when stopped.
    async fn walk_terms(&self, dir: &Path) -> Result<bool, RegroupError> {
        self.forest.set_join_walked(false)?;
        let mut terms = join::TermsWriter::create(dir)?;
        let mut counter = self
            .config
            .common_above
            .map(|_| common::MinimaCounter::new());
        let mut pages = self.pages(self.spec.clone());
        let mut read = 0u64;
        loop {
            let page = match pages.next().await? {
                Next::Page(p) => p,
                Next::Stopped => return Ok(false),
                // The terms file starts over with the walk: no article twice in it.
                Next::Restarted => {
                    terms = join::TermsWriter::create(dir)?;
                    counter = counter.map(|_| common::MinimaCounter::new());
                    read = 0;
                    continue;
                }
                Next::End => break,
            };
            read += page.len() as u64;
            let (nodes, sketches) = self.read(&page).await?;
            let nums = self.forest.record_nodes(&nodes)?;
            for (num, stored) in nums.into_iter().zip(sketches) {
                let Some(stored) = stored else { continue };
                let query = stored_query(
                    stored.sketch.clone(),
                    stored.terms.as_ref(),
                    self.near.tolerance,
                )?;
                let t =
                    candidate_terms(self.meta, &query, stored.terms.as_ref(), &self.near.options);
                terms.push(num, &stored.sketch, &t)?;
                if let (Some(counter), Sketch::MinHash(sig), Some(m)) =
                    (&mut counter, &stored.sketch, &self.meta.minhash)
                {
                    if let Some(minima) = held_minima(m, sig, stored.terms.as_ref()) {
                        counter.add(&minima)?;
                    }
                }
            }
            self.report_progress(read);
        }
        terms.finish()?;
        let common = match (&counter, self.config.common_above) {
            (Some(counter), Some(above)) => {
                let learned = counter.common(above);
                if !self.config.dry_run {
                    record_common_minima(
                        self.client,
                        &self.config.retry,
                        self.index,
                        Some(learned.clone()),
                    )
                    .await?;
                }
                Some(learned)
            }
            _ => self.meta.common_minima.as_deref().cloned(),
        };
        common::save(dir, common.as_ref())?;
        self.forest.set_join_walked(true)?;
        Ok(true)
    }

    /// The index's stored terms joined on this machine ([`Linking::Join`], module `join`).
    /// `false` when stopped.
    async fn by_join(&self, report: &mut RegroupReport) -> Result<bool, RegroupError> {
        let dir = join::dir_of(&self.config.state);
        if !self.forest.join_walked()? && !self.walk_terms(&dir).await? {
            return Ok(false);
        }
        let common = common::load(&dir)?;
        report.common_minima = common.as_ref().map(|c| CommonMinimaReport {
            above: c.above,
            terms: c.terms.len(),
            learned: self.config.common_above.is_some(),
        });
        let common_keys = common
            .as_ref()
            .map(|c| common_keys(self.meta, c))
            .unwrap_or_default();
        let articles = self.forest.count("next")?;
        let built = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || join::Join::build(&dir, articles, common_keys))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?
        };
        report.join_bytes = join::dir_bytes(&dir);
        let mut records = built.records();
        let mut done = 0u64;
        loop {
            if self.stopped() {
                return Ok(false);
            }
            let chunk: Vec<join::Record<'_>> = records
                .by_ref()
                .take(self.config.page_size.max(1))
                .collect::<Result<_, _>>()?;
            if chunk.is_empty() {
                break;
            }
            done += chunk.len() as u64;
            self.pace.take(chunk.len()).await;
            let candidates: Vec<Vec<u64>> = chunk
                .par_iter()
                .map_init(|| built.tally(), |tally, r| built.candidates(r, tally))
                .collect();
            let mut nums: Vec<u64> = chunk.iter().map(|r| r.num).collect();
            nums.extend(candidates.iter().flatten());
            nums.sort_unstable();
            nums.dedup();
            let articles: HashMap<u64, (String, bool)> = nums
                .iter()
                .copied()
                .zip(self.forest.articles(&nums)?)
                .collect();
            let mut found: Vec<(String, Vec<Match>)> = Vec::new();
            for (r, cands) in chunk.iter().zip(&candidates) {
                let (id, linked) = &articles[&r.num];
                if *linked {
                    continue;
                }
                let query = Query::new(r.sketch.clone(), self.near.tolerance)
                    .map_err(|e| EsError::Config(e.to_string()))?;
                let mut matches = Vec::new();
                for &c in cands {
                    let other = built.sketch(c)?;
                    matches.extend(judged_match(
                        &query,
                        &other,
                        &self.near.options,
                        &articles[&c].0,
                        self.index,
                    ));
                }
                found.push((id.clone(), matches));
            }
            if let Some(aligner) = self.aligner {
                found = self.judged_by_texts(aligner, found).await?;
            }
            let links: Vec<(String, Vec<String>)> = found
                .into_iter()
                .map(|(id, matches)| (id, group_links(matches)))
                .collect();
            report.searched += links.len() as u64;
            self.forest.record_page(&[], &links)?;
            tracing::debug!(index = %self.index, done, linked = self.forest.linked()?, "regroup: page joined");
            self.report_progress(done);
        }
        drop(records);
        drop(built);
        // The files are the link phase's: gone once every article is linked.
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the join's files");
        }
        Ok(true)
    }

    /// Each article's candidates judged against it by the texts, as an aligned search judges
    /// the candidates it brings back; the texts are read in one multi-get a page. An article
    /// (or a candidate) gone since the walk has no text: it links nothing.
    async fn judged_by_texts(
        &self,
        aligner: &Arc<Aligner>,
        found: Vec<(String, Vec<Match>)>,
    ) -> Result<Vec<(String, Vec<Match>)>, RegroupError> {
        let index = Some(self.index.as_str());
        let wanted: Vec<(Option<&str>, &str)> = found
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .flat_map(|(id, m)| std::iter::once(id.as_str()).chain(m.iter().map(|m| m.id.as_str())))
            .map(|id| (index, id))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let sources = self.similar.texts_of(aligner, &wanted).await?;
        let aligner = Arc::clone(aligner);
        let index = self.index.clone();
        let judged = tokio::task::spawn_blocking(move || {
            let key = |id: &str| (index.clone(), id.to_owned());
            // Each text prepared once, however many pairs it is in.
            let batch = found
                .iter()
                .map(|(id, m)| match sources.get(&key(id)) {
                    Some(source) if !m.is_empty() => aligner.text(source).map(Some),
                    _ => Ok(None),
                })
                .collect::<Result<Vec<_>, EsError>>()?;
            let mut texts = BatchTexts::new(&aligner, batch, &sources);
            found
                .into_iter()
                .enumerate()
                .map(|(i, (id, matches))| {
                    let mut judged = Vec::new();
                    for m in matches {
                        if let Some(r) = texts.relate_stored(i, &key(&m.id))? {
                            judged.push(aligned_match(m, r));
                        }
                    }
                    Ok::<_, EsError>((id, judged))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Ok(judged)
    }
}

/// What a regroup unites an article with, of what its search found: every near-duplicate,
/// and, of the articles it is contained in, the one it is most contained in (ties: the
/// smaller id). A part is united with one container only, so a short item contained in two
/// different reports (a statement both quote) does not join their groups; the parts an
/// article contains (`contains`) are left to their own searches, which choose.
fn group_links(matches: impl IntoIterator<Item = Match>) -> Vec<String> {
    let mut links = Vec::new();
    let mut container: Option<(f64, String)> = None;
    for m in matches {
        match m.relation {
            None | Some(Relation::NearDuplicate) => links.push(m.id),
            Some(Relation::ContainedIn) => {
                // Estimated, or, where the texts decided, the share of it in runs.
                let c = m
                    .containment
                    .or(m.shared.as_ref().map(|s| s.query_copied))
                    .unwrap_or(0.0);
                let better = container
                    .as_ref()
                    .is_none_or(|(bc, bid)| better_container(c, &m.id, (*bc, bid)));
                if better {
                    container = Some((c, m.id));
                }
            }
            // The parts an article contains choose for themselves; a shared passage never
            // joins two groups.
            Some(Relation::Contains) | Some(Relation::SharesPassage) => {}
        }
    }
    links.extend(container.map(|(_, id)| id));
    links
}

fn finish(
    mut report: RegroupReport,
    forest: &Forest,
    started: Instant,
) -> Result<RegroupReport, RegroupError> {
    let t = forest.tally()?;
    report.articles = t.articles;
    report.groups = t.groups;
    report.shared_groups = t.shared;
    report.largest_group = t.largest;
    report.changed = forest.count("changed")?;
    report.written = forest.count("written")?;
    report.conflicts = forest.count("conflicts")?;
    report.deleted = forest.count("deleted")?;
    report.elapsed_secs = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The one concrete index `pattern` names.
async fn one_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    pattern: &str,
) -> Result<String, RegroupError> {
    let mut indices = resolve_indices(client, retry, pattern).await?;
    indices.sort();
    indices.dedup();
    match indices.len() {
        0 => Err(RegroupError::NoIndex(pattern.to_owned())),
        1 => Ok(indices.remove(0)),
        _ => Err(RegroupError::SeveralIndices {
            pattern: pattern.to_owned(),
            indices,
        }),
    }
}

async fn count(client: &Elasticsearch, retry: &RetryPolicy, index: &str) -> Result<u64, EsError> {
    let r: Value = search(
        client,
        retry,
        &format!("index `{index}`: count"),
        &format!("/{}/_count", path_segment(index)),
        &[],
        None,
    )
    .await?;
    Ok(r["count"].as_u64().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::Score;

    fn m(id: &str, relation: Relation, containment: f64) -> Match {
        let mut m = Match::new(id, Score::Similarity(0.2));
        m.relation = Some(relation);
        m.containment = Some(containment);
        m
    }

    #[test]
    fn a_part_is_united_with_its_near_duplicates_and_its_best_container_only() {
        let found = [
            m("report-b", Relation::ContainedIn, 0.92),
            m("copy", Relation::NearDuplicate, 0.95),
            m("report-a", Relation::ContainedIn, 0.97),
            m("report-c", Relation::ContainedIn, 0.97),
            m("its-own-lead", Relation::Contains, 1.0),
            Match::new("simhash-near", Score::Distance(2)),
        ];
        assert_eq!(
            group_links(found),
            ["copy", "simhash-near", "report-a"],
            "near-duplicates, then the container it is most in (ties: the smaller id)"
        );
        assert!(group_links([m("part", Relation::Contains, 1.0)]).is_empty());
    }
}

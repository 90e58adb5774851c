//! Writing fingerprints: with the article in one request, or as bulk partial updates of
//! existing documents that never touch their other fields.
//!
//! Every write carries every field of every method the index holds ([`fingerprint_fields_json`]:
//! the seven SimHash fields, the four MinHash fields), computed in one pass over the text
//! ([`Fingerprinter::sketch_fields`]): a document whose text became too short loses its old
//! blocks, band terms and signature (they are set to `null`) instead of keeping a fingerprint
//! of a text it no longer has. What the index holds comes from its `_meta`
//! ([`EsIndexer::open`]); a fingerprinter that makes other versions is refused.
//!
//! Bulk updates are guarded by the `_seq_no`/`_primary_term` the text was read with: when the
//! document changed in between, Elasticsearch answers 409 and the stale fingerprint is dropped
//! ([`BulkReport::conflicts`]); whoever changed it (or the next worker pass) writes a fresh one.

use std::fmt::Write as _;
use std::sync::Arc;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Map, Value};

use super::group::{GroupItem, Grouper, OrderKey};
use super::schema::minhash_fields_json;
use super::schema::GroupMeta;
use super::{
    check, path_segment, request, send, verify_index, Body, EsError, FieldNames, IndexMeta,
    RetryPolicy,
};
use neardup_core::fingerprint::{Methods, Sketches};
use neardup_core::input::{field_texts, BadTextField};
use neardup_core::{Fingerprinter, Outcome};

/// When writes become visible to search (`refresh` parameter). Ordered from the cheapest:
/// the stronger of two is their `max`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refresh {
    /// At the index's next periodic refresh (the cheapest; the default).
    #[default]
    No,
    /// The request returns once its writes are searchable.
    WaitFor,
    /// Refresh the touched shards immediately (expensive; for tests).
    Now,
}

impl std::str::FromStr for Refresh {
    type Err = String;

    /// Elasticsearch's values: `false`, `wait_for`, `true`.
    fn from_str(s: &str) -> Result<Refresh, String> {
        match s {
            "false" => Ok(Refresh::No),
            "wait_for" => Ok(Refresh::WaitFor),
            "true" => Ok(Refresh::Now),
            other => Err(format!(
                "`refresh` is `true`, `false` or `wait_for` (as in Elasticsearch), not `{other}`"
            )),
        }
    }
}

impl Refresh {
    /// The value of Elasticsearch's `refresh` parameter.
    pub fn param(self) -> &'static str {
        match self {
            Refresh::No => "false",
            Refresh::WaitFor => "wait_for",
            Refresh::Now => "true",
        }
    }
}

/// An Elasticsearch time value (`500ms`, `1s`, `2m`…); `Some(None)` for `-1` (disabled).
fn parse_time_value(v: &str) -> Option<Option<std::time::Duration>> {
    use std::time::Duration;
    let v = v.trim();
    match v {
        "-1" => return Some(None),
        "0" => return Some(Some(Duration::ZERO)),
        _ => {}
    }
    let split = v.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().ok()?;
    let seconds = match unit {
        "nanos" => n / 1e9,
        "micros" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return None,
    };
    Some(Some(Duration::from_secs_f64(seconds)))
}

/// The seven SimHash fields for `outcome`, as a JSON object to merge into a document.
/// A too-short text gets `version` (the fingerprinter's), its reason and `null` blocks, so it
/// is not fingerprinted again under the same version.
pub fn simhash_fields_json(
    names: &FieldNames,
    outcome: &Outcome,
    version: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    match outcome {
        Ok(f) => {
            for (name, block) in names.blocks.iter().zip(f.simhash.blocks16()) {
                m.insert(name.clone(), json!(block));
            }
            m.insert(names.simhash.clone(), json!(f.simhash.as_i64()));
            m.insert(names.version.clone(), json!(&*f.version));
            m.insert(names.reason.clone(), Value::Null);
        }
        Err(why) => {
            for name in &names.blocks {
                m.insert(name.clone(), Value::Null);
            }
            m.insert(names.simhash.clone(), Value::Null);
            m.insert(names.version.clone(), json!(version));
            m.insert(names.reason.clone(), json!(why.code()));
        }
    }
    m
}

/// The fields of every method `meta` holds, for `sketches`, as a JSON object to merge into a
/// document: [`simhash_fields_json`] and [`minhash_fields_json`] under the index's field names.
/// A too-short text gets each method's version (the index's), its reason and `null` values.
/// A method the index holds whose sketch was not computed is left out (compute `sketches`
/// with [`IndexMeta::methods`]).
pub fn fingerprint_fields_json(meta: &IndexMeta, sketches: &Sketches) -> Map<String, Value> {
    let mut m = Map::new();
    if let (Some(s), Some(outcome)) = (&meta.simhash, &sketches.simhash) {
        m.extend(simhash_fields_json(&s.fields, outcome, &s.version));
    }
    if let (Some(h), Some(outcome)) = (&meta.minhash, &sketches.minhash) {
        m.extend(minhash_fields_json(h, outcome));
    }
    m
}

/// Sketches the text fields of a `_source` with `methods`, in one pass, by the one
/// document-to-text rule ([`neardup_core::input::field_texts`]: dotted paths, strings and arrays of
/// strings; absent fields skipped, so a document with none is too short). A field holding a
/// number, boolean or object is an error.
pub fn sketch_source(
    fp: &Fingerprinter,
    methods: Methods,
    source: &Value,
    fields: &[String],
) -> Result<Sketches, BadTextField> {
    Ok(fp.sketch_fields(methods, &field_texts(source, fields)?))
}

/// The update of a document read back (`source`, its version `guard`): its text `fields`
/// sketched with `methods`, and what the index's `group` reads of it (its order key, its
/// group texts). The worker and `backfill` prepare their writes with it.
pub(crate) fn fingerprint_update(
    fp: &Fingerprinter,
    methods: Methods,
    fields: &[String],
    group: Option<&GroupMeta>,
    (id, guard): (String, Option<(u64, u64)>),
    source: &Value,
) -> Result<FingerprintUpdate, BadTextField> {
    Ok(FingerprintUpdate {
        sketches: sketch_source(fp, methods, source, fields)?,
        order: group.and_then(|g| g.order_key(source)),
        texts: group.map_or(Ok(None), |g| g.texts(source))?,
        id,
        guard,
    })
}

/// The SimHash fingerprint of a `_source`'s text fields ([`sketch_source`]).
pub fn fingerprint_source(
    fp: &Fingerprinter,
    source: &Value,
    fields: &[String],
) -> Result<Outcome, BadTextField> {
    let sketches = sketch_source(
        fp,
        Methods::only(neardup_core::Method::SimHash),
        source,
        fields,
    )?;
    Ok(sketches.simhash.expect("SimHash was asked for"))
}

/// The result of [`EsIndexer::index_article`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedArticle {
    pub id: String,
    /// `created` or `updated`.
    pub result: String,
    pub seq_no: u64,
    pub primary_term: u64,
}

/// The fingerprints of one document to write into it: every method the index holds, in one
/// partial update.
#[derive(Clone, Debug)]
pub struct FingerprintUpdate {
    pub id: String,
    /// `(_seq_no, _primary_term)` of the document version whose text was fingerprinted. With
    /// it the update only applies if the document has not changed since; without it, always.
    pub guard: Option<(u64, u64)>,
    pub sketches: Sketches,
    /// Where the index orders duplicate groups by a field (`es-init --group-order`): the
    /// document's order key, read with its text ([`EsIndexer::order_key`]; add
    /// [`EsIndexer::group_source_fields`] to the `_source` fields read). `None` otherwise, and
    /// when the document has no value there (it then comes after every dated one).
    pub order: Option<OrderKey>,
    /// Where the index links duplicate groups by texts (`es-init --group-by texts`): the
    /// document's text fields the groups read ([`EsIndexer::group_texts`]; add
    /// [`EsIndexer::group_source_fields`] to the `_source` fields read). `None` otherwise.
    pub texts: Option<Vec<String>>,
}

/// How a fingerprint write ([`EsIndexer::update_fingerprints_labelled`]) labels the
/// duplicate groups of its documents, where the index keeps groups.
#[derive(Clone, Copy, Debug)]
pub enum Labelling<'a> {
    /// Each document joins the group of its best stored link, found by the search every
    /// writer runs ([`super::group`]'s rules).
    Search,
    /// No search: each document is its own group for now (its label is its own id), except
    /// those in `labelled`, which already carry a label and keep it. One regroup by the join
    /// links them afterwards (a back-fill that labels by the join,
    /// [`crate::backfill::BackfillConfig::linking`]).
    Own {
        labelled: &'a std::collections::HashSet<String>,
    },
}

/// The group label to write into an existing document ([`EsIndexer::write_group_labels`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLabel {
    pub id: String,
    /// `(_seq_no, _primary_term)` of the document version read: the label is written only if
    /// the document has not changed since; without it, always.
    pub guard: Option<(u64, u64)>,
    pub label: String,
}

/// One partial update of a bulk: the document's id, its guard (`_seq_no`, `_primary_term`)
/// and the fields to merge into its `_source`.
type PartialUpdate<'a> = (&'a str, Option<(u64, u64)>, Map<String, Value>);

/// A document a bulk update could not write, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemFailure {
    pub id: String,
    pub status: u16,
    pub error_type: String,
    pub reason: String,
}

impl std::fmt::Display for ItemFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "document `{}`: HTTP {} {}: {}",
            self.id, self.status, self.error_type, self.reason
        )
    }
}

/// What a bulk update did, item by item. Nothing is swallowed: every id is in exactly one of
/// the counts or lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Documents whose fingerprint fields were written.
    pub updated: u64,
    /// Documents that already had exactly these values (nothing written).
    pub noop: u64,
    /// Documents changed since their text was read (409): the stale fingerprint was dropped.
    pub conflicts: Vec<String>,
    /// Documents deleted since their text was read (404).
    pub missing: Vec<String>,
    /// Documents that failed for another reason (a mapping error, a rejection that outlasted
    /// the retries…).
    pub failed: Vec<ItemFailure>,
    /// Times Elasticsearch pushed back with 429 (the whole request or single items) and the
    /// work was sent again: a signal for callers to slow down.
    pub rejections: u64,
}

impl BulkReport {
    /// Adds another report's counts to this one.
    pub fn merge(&mut self, other: BulkReport) {
        self.updated += other.updated;
        self.noop += other.noop;
        self.conflicts.extend(other.conflicts);
        self.missing.extend(other.missing);
        self.failed.extend(other.failed);
        self.rejections += other.rejections;
    }

    /// Items seen.
    pub fn total(&self) -> u64 {
        self.updated
            + self.noop
            + (self.conflicts.len() + self.missing.len() + self.failed.len()) as u64
    }
}

/// Writes articles and fingerprints into one index: every method its `_meta` records, under
/// its field names. Cheap to clone; share one per index.
#[derive(Clone, Debug)]
pub struct EsIndexer {
    client: Elasticsearch,
    index: String,
    meta: IndexMeta,
    fp: Fingerprinter,
    retry: RetryPolicy,
    refresh: Refresh,
    detect_noop: bool,
    /// Labels articles with their duplicate group where the index keeps groups.
    grouper: Option<Arc<Grouper>>,
}

impl EsIndexer {
    /// An indexer for `index`, which holds what `meta` says (read it with
    /// [`verify_index`], or use [`EsIndexer::open`]), with the default retry policy and no
    /// forced refresh. `fp` sketches articles ([`EsIndexer::sketch`]); an error
    /// ([`EsError::VersionMismatch`]) when it makes another version of a method the index holds.
    pub fn new(
        client: Elasticsearch,
        index: impl Into<String>,
        meta: IndexMeta,
        fp: Fingerprinter,
    ) -> Result<EsIndexer, EsError> {
        let index = index.into();
        meta.validate()?;
        meta.check_fingerprinter(&index, &fp)?;
        let mut indexer = EsIndexer {
            client,
            index,
            meta,
            fp,
            retry: RetryPolicy::default(),
            refresh: Refresh::No,
            detect_noop: true,
            grouper: None,
        };
        indexer.regroup_with_settings();
        Ok(indexer)
    }

    /// A new grouper for the current `_meta`, retry policy and fingerprinter (it remembers
    /// nothing yet).
    fn regroup_with_settings(&mut self) {
        self.grouper = self.meta.group.clone().map(|g| {
            Arc::new(Grouper::new(
                g,
                self.client.clone(),
                self.retry.clone(),
                self.fp.clone(),
            ))
        });
    }

    /// The group labels of articles about to be written (id, sketches, order key where the
    /// index orders groups by a field: [`EsIndexer::order_key`]), where the index keeps
    /// groups ([`super::group`]); `None` where it does not.
    pub async fn group_labels(
        &self,
        items: &[GroupItem<'_>],
    ) -> Result<Option<Vec<String>>, EsError> {
        let Some(g) = &self.grouper else {
            return Ok(None);
        };
        if items.is_empty() {
            return Ok(Some(Vec::new()));
        }
        g.labels(&self.index, &self.meta, items, self.refresh_interval())
            .await
            .map(Some)
    }

    /// For a dedupe write at `near` that found nothing linked to `items`: where the index
    /// keeps groups of what `near` links, each is its own group (remembered as such, see
    /// [`super::group`]), with no search of its own; `None` otherwise.
    pub(crate) fn own_group_labels(
        &self,
        items: &[(&str, &Sketches)],
        near: super::Near,
    ) -> Option<Vec<String>> {
        self.grouper.as_ref()?.own_labels(&self.meta, items, near)
    }

    /// The group field, where the index keeps groups.
    pub fn group_field(&self) -> Option<&str> {
        self.grouper.as_deref().map(Grouper::field)
    }

    /// The document field duplicate groups are ordered by, where the index keeps groups
    /// ordered by one (`es-init --group-order`): writers that read documents back read it
    /// with their text.
    pub fn group_order_field(&self) -> Option<&str> {
        self.meta.group.as_ref()?.order.field()
    }

    /// The text fields duplicate groups are linked by, where the index links them by texts
    /// (`es-init --group-by texts`).
    pub fn group_text_fields(&self) -> Option<&[String]> {
        self.meta.group.as_ref()?.link.text_fields()
    }

    /// What a writer that reads documents back reads of each for its group, beside its
    /// text: the field groups are ordered by and the text fields they are linked by, where
    /// the index has them.
    pub fn group_source_fields(&self) -> Vec<String> {
        self.meta
            .group
            .as_ref()
            .map(GroupMeta::source_fields)
            .unwrap_or_default()
    }

    /// A document's text fields the groups read ([`EsIndexer::group_text_fields`]), in
    /// order; `None` where groups are not linked by texts. A field holding a number or an
    /// object is an error.
    pub fn group_texts(&self, doc: &Value) -> Result<Option<Vec<String>>, BadTextField> {
        self.meta.group.as_ref().map_or(Ok(None), |g| g.texts(doc))
    }

    /// A document's order key in the index's group order ([`super::group::order_key`] of its
    /// [`EsIndexer::group_order_field`]); `None` where groups are not ordered by a field or
    /// the document has no value there.
    pub fn order_key(&self, doc: &Value) -> Option<OrderKey> {
        self.meta.group.as_ref()?.order_key(doc)
    }

    /// An indexer for `index` (a name or alias): reads what it holds from its `_meta` and
    /// checks its mapping ([`verify_index`]; `legacy_fields` names the SimHash fields of an
    /// index without `_meta`), with the fingerprinter that makes exactly that
    /// ([`IndexMeta::fingerprinter`]).
    pub async fn open(
        client: Elasticsearch,
        index: impl Into<String>,
        retry: RetryPolicy,
        legacy_fields: &FieldNames,
    ) -> Result<EsIndexer, EsError> {
        let index = index.into();
        let meta = verify_index(&client, &retry, &index, legacy_fields).await?;
        let fp = meta.fingerprinter(&index)?;
        Ok(EsIndexer::new(client, index, meta, fp)?.with_retry(retry))
    }

    /// The same indexer with another fingerprinter (other thresholds, say); an error when it
    /// makes another version of a method the index holds.
    pub fn with_fingerprinter(mut self, fp: Fingerprinter) -> Result<Self, EsError> {
        self.meta.check_fingerprinter(&self.index, &fp)?;
        self.fp = fp;
        self.regroup_with_settings();
        Ok(self)
    }

    /// Reads the index's `_meta` and mapping again ([`verify_index`]; an index without `_meta`
    /// is read with the SimHash field names it had): a method `es-init` added since is
    /// written from now on. The fingerprinter is kept where it makes what the index now holds,
    /// else rebuilt from `_meta` with the same thresholds. Returns whether anything changed.
    pub async fn reload(&mut self) -> Result<bool, EsError> {
        let legacy = self
            .meta
            .simhash
            .as_ref()
            .map(|s| s.fields.clone())
            .unwrap_or_default();
        let meta = verify_index(&self.client, &self.retry, &self.index, &legacy).await?;
        if meta == self.meta {
            return Ok(false);
        }
        if meta.check_fingerprinter(&self.index, &self.fp).is_err() {
            let config = neardup_core::FingerprintConfig {
                thresholds: self.fp.config().thresholds.clone(),
                ..meta.fingerprint_config()
            };
            let fp = Fingerprinter::new(config);
            meta.check_fingerprinter(&self.index, &fp)?;
            self.fp = fp;
        }
        tracing::info!(index = %self.index, holds = %meta, "the index's _meta changed: writing what it holds now");
        self.meta = meta;
        self.regroup_with_settings();
        Ok(true)
    }

    /// The longest time the index leaves between two refreshes (the largest
    /// `index.refresh_interval` of the indices behind its name); `None` when one of them has
    /// periodic refresh disabled (`-1`).
    pub async fn refresh_interval(&self) -> Result<Option<std::time::Duration>, EsError> {
        let path = format!(
            "/{}/_settings/index.refresh_interval",
            path_segment(&self.index)
        );
        let what = format!("index `{}`: read refresh_interval", self.index);
        let query = [("include_defaults", "true"), ("flat_settings", "true")];
        let reply = request(
            &self.client,
            &self.retry,
            &what,
            Method::Get,
            &path,
            &query,
            None,
        )
        .await?;
        let mut longest = Some(std::time::Duration::ZERO);
        for (index, s) in reply.as_object().into_iter().flatten() {
            let v = s["settings"]["index.refresh_interval"]
                .as_str()
                .or_else(|| s["defaults"]["index.refresh_interval"].as_str())
                .unwrap_or("1s");
            let interval = parse_time_value(v).ok_or_else(|| EsError::BadResponse {
                what: what.clone(),
                detail: format!("`{index}` has refresh_interval `{v}`, not a time value"),
            })?;
            longest = match (longest, interval) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        Ok(longest)
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self.regroup_with_settings();
        self
    }

    pub fn with_refresh(mut self, refresh: Refresh) -> Self {
        self.refresh = refresh;
        self
    }

    /// With `false`, updates that write the values a document already has still make a new
    /// document version (and `_seq_no`) instead of being a `noop`. The back-fill's `--all`
    /// mode relies on that to tell rewritten documents from the rest after a restart.
    pub fn with_detect_noop(mut self, detect_noop: bool) -> Self {
        self.detect_noop = detect_noop;
        self
    }

    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    pub fn index(&self) -> &str {
        &self.index
    }

    /// What the index holds: the methods written, their versions and field names.
    pub fn meta(&self) -> &IndexMeta {
        &self.meta
    }

    pub fn client(&self) -> &Elasticsearch {
        &self.client
    }

    pub fn fingerprinter(&self) -> &Fingerprinter {
        &self.fp
    }

    /// Sketches an article's text fields with every method the index holds, in one pass (see
    /// [`sketch_source`]). CPU-bound (about a millisecond per article); call it from
    /// `spawn_blocking` when that matters.
    pub fn sketch(
        &self,
        article: &Value,
        text_fields: &[String],
    ) -> Result<Sketches, BadTextField> {
        sketch_source(&self.fp, self.meta.methods(), article, text_fields)
    }

    /// Indexes `article` (a JSON object) with the fields of every method the index holds in
    /// one request, replacing the document `id`; with `id = None` Elasticsearch picks one, or,
    /// where the index keeps duplicate groups, neardup does (a new article's group label may
    /// be its own id) and creates the document with it. Either way the request is then not
    /// retried, since a retry after a lost answer could create a second copy (or be refused
    /// as a conflict with the first).
    pub async fn index_article(
        &self,
        id: Option<&str>,
        article: &Value,
        sketches: &Sketches,
    ) -> Result<IndexedArticle, EsError> {
        self.index_article_refresh(id, article, sketches, self.refresh)
            .await
    }

    /// [`EsIndexer::index_article`] with another `refresh` than the indexer's.
    pub async fn index_article_refresh(
        &self,
        id: Option<&str>,
        article: &Value,
        sketches: &Sketches,
        refresh: Refresh,
    ) -> Result<IndexedArticle, EsError> {
        let Value::Object(fields) = article else {
            return Err(EsError::BadDocument {
                id: id.unwrap_or("(new)").to_owned(),
                reason: "an article must be a JSON object".into(),
            });
        };
        let mut doc = fields.clone();
        doc.extend(fingerprint_fields_json(&self.meta, sketches));
        self.meta.mark_own_write(&mut doc, false);
        // A new article's group may be its own: it needs its id before it is written.
        let made_id;
        let (id, create) = match (id, &self.grouper) {
            (None, Some(_)) => {
                made_id = new_id();
                (Some(made_id.as_str()), true)
            }
            (id, _) => (id, false),
        };
        if let (Some(id), Some(field)) = (id, self.group_field()) {
            let key = self.order_key(article);
            let texts = self.group_texts(article)?;
            let item = GroupItem {
                id,
                sketches,
                order: key.as_ref(),
                texts: texts.as_deref(),
            };
            let labels = self.group_labels(&[item]).await?;
            if let Some(label) = labels.and_then(|l| l.into_iter().next()) {
                doc.insert(field.to_owned(), json!(label));
            }
        }
        let body = Body::Json(Value::Object(doc));
        let index = path_segment(&self.index);
        // A create with an id neardup made is not retried either: after a lost answer the
        // retry would be refused as a conflict with the article it had written.
        let no_retry = RetryPolicy::none();
        let (method, path, retry) = match id {
            Some(id) => (
                Method::Put,
                format!("/{index}/_doc/{}", path_segment(id)),
                if create { &no_retry } else { &self.retry },
            ),
            None => (Method::Post, format!("/{index}/_doc"), &no_retry),
        };
        let what = format!(
            "index `{}`: index document `{}`",
            self.index,
            id.unwrap_or("(new)")
        );
        let mut query = vec![("refresh", refresh.param())];
        if create {
            query.push(("op_type", "create"));
        }
        let reply = retry
            .run(|| async {
                let r = send(&self.client, method, &path, &query, Some(&body)).await?;
                check(&what, r)
            })
            .await
            .map_err(|e| match e {
                // The path and query are ours: a 400 is about the article's own fields (an
                // empty field name, a value its mapping cannot take, …).
                EsError::Status {
                    status: 400,
                    error_type,
                    reason,
                    ..
                } => EsError::BadDocument {
                    id: id.unwrap_or("(new)").to_owned(),
                    reason: format!(
                        "Elasticsearch refused it ({error_type}: {reason}); fix or leave out the field it names"
                    ),
                },
                e => e,
            })?;
        let bad = |detail: &str| EsError::BadResponse {
            what: what.clone(),
            detail: detail.into(),
        };
        Ok(IndexedArticle {
            id: reply["_id"]
                .as_str()
                .ok_or_else(|| bad("no _id"))?
                .to_owned(),
            result: reply["result"].as_str().unwrap_or_default().to_owned(),
            seq_no: reply["_seq_no"].as_u64().ok_or_else(|| bad("no _seq_no"))?,
            primary_term: reply["_primary_term"]
                .as_u64()
                .ok_or_else(|| bad("no _primary_term"))?,
        })
    }

    /// Indexes articles (JSON objects) with the fields of every method the index holds, in
    /// one `_bulk`, each replacing the document of its id; the answer per article, in order:
    /// what [`EsIndexer::index_article`] returns, or why it was not written (a 400 is the
    /// article's own fault: [`EsError::BadDocument`]). Transient failures of the whole request
    /// are retried (every article has its id, so a retry writes nothing twice).
    pub async fn index_articles(
        &self,
        articles: &[(&str, &Value, &Sketches)],
        refresh: Refresh,
    ) -> Result<Vec<Result<IndexedArticle, EsError>>, EsError> {
        if articles.is_empty() {
            return Ok(Vec::new());
        }
        // An article whose group text fields are not text is refused alone; the others are
        // written.
        let mut good: Vec<(&str, &Value, &Sketches)> = Vec::with_capacity(articles.len());
        let mut texts: Vec<Option<Vec<String>>> = Vec::with_capacity(articles.len());
        let mut refused: Vec<Option<BadTextField>> = Vec::with_capacity(articles.len());
        for a in articles {
            match self.group_texts(a.1) {
                Ok(t) => {
                    good.push(*a);
                    texts.push(t);
                    refused.push(None);
                }
                Err(bad) => refused.push(Some(bad)),
            }
        }
        let keys: Vec<Option<OrderKey>> = good.iter().map(|(_, a, _)| self.order_key(a)).collect();
        let objects: Vec<GroupItem> = good
            .iter()
            .zip(keys.iter().zip(&texts))
            .filter(|((_, a, _), _)| a.is_object())
            .map(|((id, _, s), (k, t))| GroupItem {
                id,
                sketches: s,
                order: k.as_ref(),
                texts: t.as_deref(),
            })
            .collect();
        let labels = self.group_labels(&objects).await?;
        let mut written = self
            .index_labelled_articles(&good, refresh, labels)
            .await?
            .into_iter();
        Ok(articles
            .iter()
            .zip(refused)
            .map(|((id, ..), bad)| match bad {
                None => written.next().expect("one answer per article written"),
                Some(bad) => Err(EsError::BadDocument {
                    id: (*id).to_owned(),
                    reason: bad.to_string(),
                }),
            })
            .collect())
    }

    /// [`EsIndexer::index_articles`] with the group labels known (one per article that is a
    /// JSON object, in order), or none where the index keeps no groups.
    pub(crate) async fn index_labelled_articles(
        &self,
        articles: &[(&str, &Value, &Sketches)],
        refresh: Refresh,
        labels: Option<Vec<String>>,
    ) -> Result<Vec<Result<IndexedArticle, EsError>>, EsError> {
        let mut body = String::new();
        let mut refused: Vec<Option<EsError>> = articles.iter().map(|_| None).collect();
        let mut labels = labels.map(Vec::into_iter);
        for (i, (id, article, sketches)) in articles.iter().enumerate() {
            let Value::Object(fields) = article else {
                refused[i] = Some(EsError::BadDocument {
                    id: (*id).to_owned(),
                    reason: "an article must be a JSON object".into(),
                });
                continue;
            };
            let mut doc = fields.clone();
            doc.extend(fingerprint_fields_json(&self.meta, sketches));
            self.meta.mark_own_write(&mut doc, false);
            if let (Some(labels), Some(field)) = (&mut labels, self.group_field()) {
                let label = labels.next().expect("one label per article");
                doc.insert(field.to_owned(), json!(label));
            }
            let _ = writeln!(body, "{}", json!({ "index": { "_id": id } }));
            let _ = writeln!(body, "{}", Value::Object(doc));
        }
        let sent = refused.iter().filter(|r| r.is_none()).count();
        let mut items = Vec::new();
        if sent > 0 {
            let path = format!("/{}/_bulk", path_segment(&self.index));
            let query = [("refresh", refresh.param())];
            let what = format!("index `{}`: bulk index of {sent} articles", self.index);
            let body = Body::NdJson(body);
            let reply = request(
                &self.client,
                &self.retry,
                &what,
                Method::Post,
                &path,
                &query,
                Some(&body),
            )
            .await?;
            items = reply["items"].as_array().cloned().unwrap_or_default();
            if items.len() != sent {
                return Err(EsError::BadResponse {
                    what,
                    detail: format!("{} items for {sent} articles", items.len()),
                });
            }
        }
        let mut items = items.into_iter();
        let mut out = Vec::with_capacity(articles.len());
        for ((id, ..), refused) in articles.iter().zip(refused) {
            if let Some(e) = refused {
                out.push(Err(e));
                continue;
            }
            let item = items.next().expect("one item per article sent");
            let r = &item["index"];
            let status = r["status"].as_u64().unwrap_or(0) as u16;
            out.push(match (status, r["_seq_no"].as_u64(), r["_primary_term"].as_u64()) {
                (200 | 201, Some(seq_no), Some(primary_term)) => Ok(IndexedArticle {
                    id: (*id).to_owned(),
                    result: r["result"].as_str().unwrap_or_default().to_owned(),
                    seq_no,
                    primary_term,
                }),
                _ => {
                    let (error_type, reason) = super::error_type_reason(r);
                    let blocked = super::blocked(status, &error_type, &reason, Some(&self.index));
                    Err(if let Some(blocked) = blocked {
                        blocked
                    } else if status == 400 {
                        EsError::BadDocument {
                            id: (*id).to_owned(),
                            reason: format!(
                                "Elasticsearch refused it ({error_type}: {reason}); fix or leave out the field it names"
                            ),
                        }
                    } else {
                        EsError::Status {
                            what: format!("index `{}`: index document `{id}`", self.index),
                            status,
                            error_type,
                            reason,
                        }
                    })
                }
            });
        }
        Ok(out)
    }

    /// Writes the fingerprint fields of existing documents, every method the index holds in
    /// the same partial update, with one `_bulk` request (`doc` merges; every other field of
    /// `_source` is left as it is). Transient
    /// failures of the whole request, and items rejected with 429, are retried with backoff;
    /// every other per-item failure is reported with its document id.
    pub async fn update_fingerprints(
        &self,
        updates: &[FingerprintUpdate],
    ) -> Result<BulkReport, EsError> {
        self.update_fingerprints_labelled(updates, Labelling::Search)
            .await
    }

    /// [`EsIndexer::update_fingerprints`], with the documents' group labels chosen as
    /// `labelling` says (where the index keeps groups; ignored where it does not).
    pub async fn update_fingerprints_labelled(
        &self,
        updates: &[FingerprintUpdate],
        labelling: Labelling<'_>,
    ) -> Result<BulkReport, EsError> {
        let labels: Option<std::collections::HashMap<&str, String>> = match labelling {
            Labelling::Search => {
                let items: Vec<GroupItem> = updates
                    .iter()
                    .map(|u| GroupItem {
                        id: &u.id,
                        sketches: &u.sketches,
                        order: u.order.as_ref(),
                        texts: u.texts.as_deref(),
                    })
                    .collect();
                self.group_labels(&items)
                    .await?
                    .map(|l| items.iter().map(|it| it.id).zip(l).collect())
            }
            Labelling::Own { labelled } => self.group_field().map(|_| {
                updates
                    .iter()
                    .filter(|u| !labelled.contains(u.id.as_str()))
                    .map(|u| (u.id.as_str(), u.id.clone()))
                    .collect()
            }),
        };
        let docs = updates
            .iter()
            .map(|u| {
                let mut doc = fingerprint_fields_json(&self.meta, &u.sketches);
                if let (Some(label), Some(field)) = (
                    labels.as_ref().and_then(|l| l.get(u.id.as_str())),
                    self.group_field(),
                ) {
                    doc.insert(field.to_owned(), json!(label));
                }
                (u.id.as_str(), u.guard, doc)
            })
            .collect();
        self.bulk_update(docs, "fingerprints").await
    }

    /// Writes the group labels of existing documents (`neardup regroup`): one guarded partial
    /// update each (with `(_seq_no, _primary_term)`, only if the document has not changed
    /// since it was read), in one `_bulk` request, reported item by item like
    /// [`EsIndexer::update_fingerprints`]. [`EsError::Config`] where the index keeps no groups.
    pub async fn write_group_labels(&self, labels: &[GroupLabel]) -> Result<BulkReport, EsError> {
        let Some(field) = self.group_field() else {
            return Err(EsError::Config(format!(
                "index `{}` keeps no duplicate groups (`neardup es-init` adds them)",
                self.index
            )));
        };
        let docs = labels
            .iter()
            .map(|l| {
                let mut doc = Map::new();
                doc.insert(field.to_owned(), json!(l.label));
                (l.id.as_str(), l.guard, doc)
            })
            .collect();
        self.bulk_update(docs, "group labels").await
    }

    /// Partial updates (`doc` merges; every other field of `_source` is left as it is) in one
    /// `_bulk` request: transient failures of the whole request, and items rejected with 429,
    /// are retried with backoff; every other per-item failure is reported with its id, except
    /// a block that refuses every write to the index ([`EsError::Blocked`]), which ends the
    /// call with that error: the one rule that stops every bulk writer (the back-fill, the
    /// worker, regroup) at the first such answer. Where the index tracks edits and the cluster
    /// runs its final pipeline for a bulk's update actions, each carries neardup's marker
    /// ([`IndexMeta::mark_own_write`]): the pipeline then keeps the versions the merged
    /// document has (fresh ones in a fingerprint write, the stored ones, or none, in a label
    /// write), and the update is never a `noop` (the marker is a change until the pipeline
    /// strips it).
    async fn bulk_update(
        &self,
        mut docs: Vec<PartialUpdate<'_>>,
        what: &str,
    ) -> Result<BulkReport, EsError> {
        for (_, _, doc) in &mut docs {
            self.meta.mark_own_write(doc, true);
        }
        let mut report = BulkReport::default();
        let mut pending: Vec<&PartialUpdate<'_>> = docs.iter().collect();
        let mut retry = 0u32;
        while !pending.is_empty() {
            let body = self.bulk_body(&pending);
            let path = format!("/{}/_bulk", path_segment(&self.index));
            let query = [("refresh", self.refresh.param())];
            let what = format!(
                "index `{}`: bulk update of {} {what}",
                self.index,
                pending.len()
            );
            let pushed_back = std::sync::atomic::AtomicU64::new(0);
            let reply = self
                .retry
                .run(|| async {
                    let r = send(&self.client, Method::Post, &path, &query, Some(&body)).await?;
                    if r.status.as_u16() == 429 {
                        pushed_back.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    check(&what, r)
                })
                .await?;
            report.rejections += pushed_back.into_inner();
            let items = reply["items"]
                .as_array()
                .ok_or_else(|| EsError::BadResponse {
                    what: what.clone(),
                    detail: "no items in the bulk response".into(),
                })?;
            if items.len() != pending.len() {
                return Err(EsError::BadResponse {
                    what,
                    detail: format!("{} items for {} actions", items.len(), pending.len()),
                });
            }
            let mut rejected = Vec::new();
            for (item, update) in items.iter().zip(&pending) {
                let item = &item["update"];
                let status = item["status"].as_u64().unwrap_or(0) as u16;
                let (error_type, reason) = super::error_type_reason(item);
                // A block on the index refuses every item of this bulk and of every bulk
                // after it: stop here rather than fail each document one by one.
                if let Some(e) = super::blocked(status, &error_type, &reason, Some(&self.index)) {
                    return Err(e);
                }
                match status {
                    200 | 201 => {
                        if item["result"] == "noop" {
                            report.noop += 1;
                        } else {
                            report.updated += 1;
                        }
                    }
                    409 => report.conflicts.push(update.0.to_owned()),
                    404 if item["error"]["type"] == "document_missing_exception" => {
                        report.missing.push(update.0.to_owned())
                    }
                    429 if retry < self.retry.max_retries => rejected.push(*update),
                    _ => {
                        report.failed.push(ItemFailure {
                            id: update.0.to_owned(),
                            status,
                            error_type,
                            reason,
                        });
                    }
                }
            }
            if !rejected.is_empty() {
                report.rejections += rejected.len() as u64;
                let wait = self.retry.backoff(retry);
                tracing::warn!(
                    index = %self.index,
                    rejected = rejected.len(),
                    wait_ms = wait.as_millis() as u64,
                    "bulk items rejected (429), retrying them"
                );
                tokio::time::sleep(wait).await;
                retry += 1;
            }
            pending = rejected;
        }
        Ok(report)
    }

    fn bulk_body(&self, docs: &[&PartialUpdate<'_>]) -> Body {
        let mut s = String::with_capacity(docs.len() * 256);
        for (id, guard, doc) in docs {
            let mut action = json!({ "_id": id });
            if let Some((seq_no, term)) = guard {
                action["if_seq_no"] = json!(seq_no);
                action["if_primary_term"] = json!(term);
            }
            // serde_json output has no raw newlines, as NDJSON needs.
            let _ = writeln!(s, "{}", json!({ "update": action }));
            let doc = if self.detect_noop {
                json!({ "doc": doc })
            } else {
                json!({ "doc": doc, "detect_noop": false })
            };
            let _ = writeln!(s, "{doc}");
        }
        Body::NdJson(s)
    }
}

/// A new document id, for an article written without one into an index that keeps groups
/// (and a claimant's token, `claims.rs`): 22 base64url characters of a 128-bit hash of the
/// time, the process and a counter.
pub(super) fn new_id() -> String {
    use base64::Engine as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let seed = format!(
        "{nanos}:{}:{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let h = xxhash_rust::xxh3::xxh3_128(seed.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ContainmentMeta;
    use neardup_core::{Fingerprint, SimHash, TooShort};
    use std::sync::Arc;

    /// The fields `meta`'s writers write for one fixed article.
    fn golden_fields(meta: &IndexMeta) -> Map<String, Value> {
        let fp = meta.fingerprinter("golden").unwrap();
        let article = serde_json::json!({
            "title": "国家统计局发布十月经济数据",
            "content": "国家统计局今天发布了最新的经济数据，显示上个月工业生产继续保持增长，消费市场稳步恢复，就业形势总体稳定。专家表示，随着一系列政策措施落地见效，经济运行有望延续回升向好态势。"
        });
        let fields = ["title".to_string(), "content".to_string()];
        let sketches = sketch_source(&fp, meta.methods(), &article, &fields).unwrap();
        fingerprint_fields_json(meta, &sketches)
    }

    /// xxh3-64 of the JSON text of the MinHash fields, in hex.
    fn minhash_hash(m: &Map<String, Value>) -> String {
        let minhash: Map<String, Value> = m
            .iter()
            .filter(|(k, _)| k.starts_with("minHash"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = Value::Object(minhash).to_string();
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
    }

    /// Fingerprints live in indices for years: the fields written for one fixed article must
    /// never change without a new version. The full MinHash fields are pinned by their hash
    /// (xxh3-64 of the JSON text), a few values in the clear.
    #[test]
    fn golden_fields_of_a_fixed_article() {
        let m = golden_fields(&IndexMeta::default().with_layout(crate::MinHashLayout::Full));
        let fp = IndexMeta::default().fingerprinter("golden").unwrap();
        assert_eq!(m.len(), 11);
        assert_eq!(m["minHashVersion"], fp.minhash_version());
        assert!(m["minHashReason"].is_null());
        let bands = m["minHashBands"].as_array().unwrap();
        assert_eq!(bands.len(), 42);
        assert_eq!(
            bands[..3],
            [
                json!("7a6b490a6565082f"),
                json!("6af6c32a2b25de85"),
                json!("a09b578c62b58bc2")
            ]
        );
        let sig = m["minHashSignature"].as_str().unwrap();
        assert_eq!(sig.len(), 684);
        assert_eq!(&sig[..24], "2I2DopdWuYW+bWYy1/kgGuBt");
        assert_eq!(minhash_hash(&m), "9a06391185a78993");
        assert_eq!(m["simHash"], json!(-2155170680333690452i64));
    }

    /// The same article's fields in the compact layout (8-bit minima, the default of a new
    /// index): the same band keys cut to 36 bits, the signature's lowest bytes, a version code.
    #[test]
    fn golden_compact_fields_of_a_fixed_article() {
        // Fields format 2 (no containment fields) is written as before containment existed.
        let m = golden_fields(&IndexMeta::default().with_containment(false));
        assert_eq!(m.len(), 11);
        assert_eq!(m["minHashVersion"], "m13f6b70e");
        let bands = m["minHashBands"].as_array().unwrap();
        assert_eq!(bands.len(), 42);
        // 0x7a6b490a6 (the full layout's first key, highest 36 bits) in base64url.
        assert_eq!(
            bands[..3],
            [json!("emtJCm"), json!("avbDKi"), json!("oJtXjG")]
        );
        let sig = m["minHashSignature"].as_str().unwrap();
        assert_eq!(sig.len(), 172);
        assert_eq!(&sig[..24], "2Je+1+C010uXl0ZVEBCGRtjK");
        assert_eq!(minhash_hash(&m), "e7e3c8b28484063f");
        assert_eq!(m["simHash"], json!(-2155170680333690452i64));
    }

    /// Fields format 4, a new index's: format 2's fields with another version code, one
    /// 4-character term for each of the first 64 minima (its position and lowest 18 bits) and
    /// the distinct shingle count. Fields format 3 (every minimum, 10 bits) is still written
    /// for an index that records it.
    #[test]
    fn golden_containment_fields_of_a_fixed_article() {
        let meta = IndexMeta::default();
        assert_eq!(crate::FieldsFormat::of(&meta), crate::FieldsFormat::V4);
        let m = golden_fields(&meta);
        let two = golden_fields(&IndexMeta::default().with_containment(false));
        assert_eq!(m.len(), 13);
        for f in ["minHashBands", "minHashSignature", "simHash"] {
            assert_eq!(m[f], two[f], "{f}");
        }
        assert_eq!(m["minHashVersion"], "m4cf96e92");
        let minima: Vec<&str> = m["minHashMinima"].as_str().unwrap().split(' ').collect();
        assert_eq!(minima.len(), 64);
        // The lowest 10 bits of each are format 3's terms below.
        assert_eq!(minima[..3], ["A43Y", "BVaX", "Cm2-"]);
        assert_eq!(m["minHashDistinct"], json!(32));
        let three = IndexMeta::default().with_containment_terms(ContainmentMeta::format_3());
        assert_eq!(crate::FieldsFormat::of(&three), crate::FieldsFormat::V3);
        let m = golden_fields(&three);
        assert_eq!(m["minHashVersion"], "mc28f40bf");
        let minima: Vec<&str> = m["minHashMinima"].as_str().unwrap().split(' ').collect();
        assert_eq!(minima.len(), 128);
        assert_eq!(minima[..3], ["AHY", "AaX", "Am-"]);
        assert_eq!(m["minHashDistinct"], json!(32));
    }

    /// The same article in Traditional characters (OpenCC s2t, s2twp, s2hk) writes the same
    /// fingerprint fields, by default; an index recorded before folding (`fold` absent from
    /// its `_meta`) keeps its own version and does not fold.
    #[test]
    fn golden_fields_of_the_article_in_traditional_characters() {
        use neardup_core::text::{Folder, TraditionalStyle};
        let article =
            |title: &str, content: &str| serde_json::json!({ "title": title, "content": content });
        let (title, content) = (
            "国家统计局发布十月经济数据，软件和信息服务业增长",
            "国家统计局今天发布了最新的经济数据，显示上个月工业生产继续保持增长，软件和信息技术服务业收入增长较快，网络零售稳步恢复。专家表示，随着一系列政策措施落地见效，经济运行有望延续回升向好态势。",
        );
        let fields = ["title".to_string(), "content".to_string()];
        let fields_of = |meta: &IndexMeta, a: &Value| {
            let fp = meta.fingerprinter("golden").unwrap();
            let sketches = sketch_source(&fp, meta.methods(), a, &fields).unwrap();
            fingerprint_fields_json(meta, &sketches)
        };
        let meta = IndexMeta::default().with_layout(crate::MinHashLayout::Full);
        assert!(meta.fold);
        let original = fields_of(&meta, &article(title, content));
        let f = Folder::shared();
        for style in [
            TraditionalStyle::Characters,
            TraditionalStyle::Taiwan,
            TraditionalStyle::HongKong,
        ] {
            let copy = article(
                &f.to_traditional(title, style),
                &f.to_traditional(content, style),
            );
            assert_ne!(copy, article(title, content));
            assert_eq!(fields_of(&meta, &copy), original, "{style:?}");
        }
        assert_eq!(
            original["minHashVersion"],
            "minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;hash=xxh3-64-s0;text=html-1,nfkc,lower,t2s-1,jieba-0.11+hmm,stop-iso-1.1"
        );

        let old = IndexMeta::new(
            &neardup_core::FingerprintConfig {
                fold: false,
                ..neardup_core::FingerprintConfig::default()
            },
            meta.methods(),
            crate::BlockType::Short,
            crate::FieldNames::default(),
            crate::MinHashFieldNames::default(),
        )
        .with_layout(crate::MinHashLayout::Full);
        // What an index recorded before folding existed: no `fold` key, read as `false`.
        assert!(old.to_json().get("fold").is_none());
        assert!(meta.to_json()["fold"] == true);
        let old: IndexMeta = serde_json::from_value(old.to_json()).unwrap();
        assert!(!old.fold);
        let unfolded = fields_of(&old, &article(title, content));
        assert_eq!(
            unfolded["minHashVersion"],
            "minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;hash=xxh3-64-s0;text=html-1,nfkc,lower,jieba-0.11+hmm,stop-iso-1.1"
        );
        assert_eq!(unfolded["minHashBands"], original["minHashBands"]);
        let taiwan = article(
            &f.to_traditional(title, TraditionalStyle::Taiwan),
            &f.to_traditional(content, TraditionalStyle::Taiwan),
        );
        assert_ne!(
            fields_of(&old, &taiwan)["minHashBands"],
            original["minHashBands"]
        );
    }

    #[test]
    fn time_values_and_refresh_parameters() {
        use std::time::Duration;
        assert_eq!(parse_time_value("1s"), Some(Some(Duration::from_secs(1))));
        assert_eq!(
            parse_time_value("500ms"),
            Some(Some(Duration::from_millis(500)))
        );
        assert_eq!(parse_time_value("2m"), Some(Some(Duration::from_secs(120))));
        assert_eq!(parse_time_value("-1"), Some(None));
        assert_eq!(parse_time_value("soon"), None);
        assert_eq!(parse_time_value("5"), None);
        assert_eq!("wait_for".parse(), Ok(Refresh::WaitFor));
        assert_eq!("true".parse(), Ok(Refresh::Now));
        assert!("yes".parse::<Refresh>().is_err());
        assert_eq!(Refresh::No.max(Refresh::WaitFor), Refresh::WaitFor);
        assert_eq!(Refresh::Now.max(Refresh::WaitFor), Refresh::Now);
    }

    #[test]
    fn fields_of_a_fingerprint_and_of_a_too_short_text() {
        let names = FieldNames::default();
        let f = Fingerprint {
            simhash: SimHash(0xFFFF_0001_8000_7FFF),
            version: Arc::from("v1"),
        };
        let m = simhash_fields_json(&names, &Ok(f), "ignored");
        assert_eq!(m["simHashA"], json!(-1));
        assert_eq!(m["simHashB"], json!(1));
        assert_eq!(m["simHashC"], json!(-32768));
        assert_eq!(m["simHashD"], json!(32767));
        assert_eq!(m["simHash"], json!(0xFFFF_0001_8000_7FFFu64 as i64));
        assert_eq!(m["simHashVersion"], json!("v1"));
        assert_eq!(m["simHashReason"], Value::Null);

        let m = simhash_fields_json(&names, &Err(TooShort::NoWords), "v2");
        assert_eq!(m.len(), 7);
        assert_eq!(m["simHashA"], Value::Null);
        assert_eq!(m["simHash"], Value::Null);
        assert_eq!(m["simHashVersion"], json!("v2"));
        assert_eq!(m["simHashReason"], json!("too_short"));
    }
}

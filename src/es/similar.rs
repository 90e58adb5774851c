//! The query path: every document within Hamming distance k of an article, from the
//! fingerprint fields stored next to the articles.
//!
//! Two fingerprints within distance 3 share at least one of the four 16-bit blocks
//! (pigeonhole), so a `bool` `should` of four `term` queries on the block fields finds every
//! candidate. The candidates are read page by page ([`Scanner`]: point in time +
//! `search_after`, or scroll where the cluster has no PIT), fetching only the block values,
//! never `_source` bodies, and the exact distance decides:
//!
//! - [`FilterMode::Client`]: every candidate crosses the network; neardup keeps those within k.
//! - [`FilterMode::Server`]: a painless script filter (`Long.bitCount(v ^ q) <= k`) drops the
//!   false candidates inside Elasticsearch, so only true matches cross the network.
//!
//! Results are sorted by distance, then id, then index; the query document itself is left out.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde::Serialize;
use serde_json::{json, Value};

use super::mapping::path_segment_keep_patterns;
use super::scan::{Paging, ScanOptions, ScanStats, Scanner};
use super::write::fingerprint_source;
use super::{request, Body, EsError, FieldNames, RetryPolicy};
use crate::{Fingerprinter, SimHash, TooShort};

/// The largest k the four 16-bit blocks answer exactly.
pub const MAX_K: u32 = 3;

/// Where the exact distance is checked.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FilterMode {
    /// Fetch every candidate's blocks and keep those within k here.
    Client,
    /// A painless script filter keeps only true matches inside Elasticsearch. The default:
    /// measured faster (`docs/elasticsearch.md`). On a cluster that refuses inline scripts,
    /// [`Similar`] switches to [`FilterMode::Client`] for good after the first refusal.
    #[default]
    Server,
}

impl FilterMode {
    pub fn name(self) -> &'static str {
        match self {
            FilterMode::Client => "client",
            FilterMode::Server => "server",
        }
    }
}

impl fmt::Display for FilterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FilterMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "client" => Ok(FilterMode::Client),
            "server" => Ok(FilterMode::Server),
            _ => Err(format!("unknown filter `{s}`: use `client` or `server`")),
        }
    }
}

/// How [`Similar`] queries.
#[derive(Clone, Debug)]
pub struct SimilarOptions {
    pub filter: FilterMode,
    /// Candidates per page.
    pub page_size: usize,
    /// How to page when the candidates do not fit in one page.
    pub paging: Paging,
    /// How long a PIT or scroll lives between two pages.
    pub keep_alive: Duration,
    /// Text fields (dotted paths allowed) fingerprinted, in order, when the query document
    /// has no stored fingerprint.
    pub text_fields: Vec<String>,
    pub names: FieldNames,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        SimilarOptions {
            filter: FilterMode::default(),
            page_size: 1000,
            paging: Paging::Auto,
            keep_alive: Duration::from_secs(60),
            text_fields: vec!["title".into(), "content".into()],
            names: FieldNames::default(),
        }
    }
}

/// One near duplicate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Match {
    pub id: String,
    /// The concrete index that holds it (not the alias or pattern queried).
    pub index: String,
    /// Hamming distance to the query fingerprint.
    pub distance: u32,
}

/// Where the query fingerprint came from.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryFingerprint {
    /// Read from the document's fingerprint fields.
    Stored(SimHash),
    /// Computed from text: a query text, or a document without a stored fingerprint.
    Computed(SimHash),
    /// Given by the caller.
    Given(SimHash),
    /// The text is too short to have a fingerprint: nothing can be near it, and `matches` is
    /// empty.
    TooShort(TooShort),
}

impl QueryFingerprint {
    pub fn simhash(&self) -> Option<SimHash> {
        match self {
            QueryFingerprint::Stored(s)
            | QueryFingerprint::Computed(s)
            | QueryFingerprint::Given(s) => Some(*s),
            QueryFingerprint::TooShort(_) => None,
        }
    }
}

/// The answer to one query.
#[derive(Clone, Debug)]
pub struct Similarity {
    pub query: QueryFingerprint,
    /// Within distance k, sorted by distance, id, index; without the query document.
    pub matches: Vec<Match>,
    /// Documents whose blocks crossed the network (all candidates with the client filter,
    /// only true matches with the server filter; the query document included).
    pub transferred: u64,
    pub scan: ScanStats,
}

/// What the fingerprint fields of the queried indices allow.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldInfo {
    /// Every index has doc values for the four blocks (Elasticsearch's default).
    blocks_doc_values: bool,
    /// Every index maps the whole fingerprint as a `long` with doc values.
    long_doc_values: bool,
}

/// Finds near duplicates in Elasticsearch. Build one per process and share it: it remembers
/// which indices were checked and whether the cluster has point in time.
///
/// ```no_run
/// use neardup::es::{EsConfig, Similar, SimilarOptions};
/// use neardup::{Fingerprinter, Profile};
///
/// # async fn demo() -> Result<(), neardup::es::EsError> {
/// let client = EsConfig::new("http://127.0.0.1:9200")?.client()?;
/// let similar = Similar::new(client, Fingerprinter::for_profile(Profile::Default));
/// let found = similar.by_id("articles-2024,articles-2025", "article-42", 3).await?;
/// for m in &found.matches {
///     println!("{} in {} at distance {}", m.id, m.index, m.distance);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Similar {
    scanner: Scanner,
    fingerprinter: Fingerprinter,
    options: SimilarOptions,
    checked: Mutex<HashMap<String, Arc<FieldInfo>>>,
    /// The cluster refused the server-side script once: filter on the client from then on.
    scripts_refused: AtomicBool,
}

impl Similar {
    /// A query function with the default options (client-side filter, default field names,
    /// `title` and `content` as text fields) and the default retry policy.
    pub fn new(client: Elasticsearch, fingerprinter: Fingerprinter) -> Similar {
        Similar::with_options(
            client,
            fingerprinter,
            SimilarOptions::default(),
            RetryPolicy::default(),
        )
    }

    pub fn with_options(
        client: Elasticsearch,
        fingerprinter: Fingerprinter,
        options: SimilarOptions,
        retry: RetryPolicy,
    ) -> Similar {
        Similar {
            scanner: Scanner::new(client, retry),
            fingerprinter,
            options,
            checked: Mutex::new(HashMap::new()),
            scripts_refused: AtomicBool::new(false),
        }
    }

    pub fn options(&self) -> &SimilarOptions {
        &self.options
    }

    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// Near duplicates of the document `id`, looked up in `indices` (comma-separated names,
    /// aliases or patterns). Its stored fingerprint is used; without one, its text fields are
    /// fingerprinted now. Errors: [`EsError::DocumentNotFound`], [`EsError::AmbiguousId`]
    /// (the id is in several of the indices), and those of [`Similar::by_fingerprint`].
    pub async fn by_id(
        &self,
        indices: impl Into<IndexList>,
        id: &str,
        k: u32,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        check_k(k)?;
        let info = self.field_info(&indices).await?;
        let (index, query) = self.query_document(&indices, id).await?;
        match query.simhash() {
            None => Ok(Similarity {
                query,
                matches: Vec::new(),
                transferred: 0,
                scan: ScanStats::default(),
            }),
            Some(fp) => {
                let mut s = self
                    .search(&indices, &info, fp, k, Some((&index, id)))
                    .await?;
                s.query = query;
                Ok(s)
            }
        }
    }

    /// Near duplicates of a text that need not be in the index (fingerprinted with this
    /// query function's fingerprinter).
    pub async fn by_text(
        &self,
        indices: impl Into<IndexList>,
        text: &str,
        k: u32,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        check_k(k)?;
        match self.fingerprinter.fingerprint(text) {
            Ok(f) => {
                let info = self.field_info(&indices).await?;
                let mut s = self.search(&indices, &info, f.simhash, k, None).await?;
                s.query = QueryFingerprint::Computed(f.simhash);
                Ok(s)
            }
            Err(why) => Ok(Similarity {
                query: QueryFingerprint::TooShort(why),
                matches: Vec::new(),
                transferred: 0,
                scan: ScanStats::default(),
            }),
        }
    }

    /// Every document within distance `k` of `fp`.
    pub async fn by_fingerprint(
        &self,
        indices: impl Into<IndexList>,
        fp: SimHash,
        k: u32,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        check_k(k)?;
        let info = self.field_info(&indices).await?;
        self.search(&indices, &info, fp, k, None).await
    }

    /// The candidate query for `fp` (see the module docs), without paging.
    pub fn query_body(&self, fp: SimHash, k: u32) -> Value {
        query_body(
            &self.options.names,
            &FieldInfo {
                blocks_doc_values: true,
                long_doc_values: true,
            },
            self.options.filter,
            fp,
            k,
        )
    }

    /// The filter mode in effect: the configured one, unless the cluster refused scripts.
    pub fn effective_filter(&self) -> FilterMode {
        if self.scripts_refused.load(Ordering::Relaxed) {
            FilterMode::Client
        } else {
            self.options.filter
        }
    }

    async fn search(
        &self,
        indices: &IndexList,
        info: &FieldInfo,
        fp: SimHash,
        k: u32,
        exclude: Option<(&str, &str)>,
    ) -> Result<Similarity, EsError> {
        let filter = self.effective_filter();
        match self
            .search_with(filter, indices, info, fp, k, exclude)
            .await
        {
            Err(e) if filter == FilterMode::Server && script_refused(&e) => {
                tracing::warn!(error = %e, "the cluster refused the server-side filter script; filtering on the client from now on");
                self.scripts_refused.store(true, Ordering::Relaxed);
                self.search_with(FilterMode::Client, indices, info, fp, k, exclude)
                    .await
            }
            r => r,
        }
    }

    async fn search_with(
        &self,
        filter: FilterMode,
        indices: &IndexList,
        info: &FieldInfo,
        fp: SimHash,
        k: u32,
        exclude: Option<(&str, &str)>,
    ) -> Result<Similarity, EsError> {
        let names = &self.options.names;
        let body = query_body(names, info, filter, fp, k);
        let scan_options = ScanOptions {
            page_size: self.options.page_size,
            keep_alive: self.options.keep_alive,
            single_request_first: true,
            paging: self.options.paging,
        };
        let mut matches = Vec::new();
        let mut transferred = 0u64;
        let mut bad: Option<EsError> = None;
        let scan = self
            .scanner
            .scan(indices.as_str(), &body, &scan_options, |hits| {
                for h in hits {
                    transferred += 1;
                    let (Some(index), Some(id)) = (h["_index"].as_str(), h["_id"].as_str()) else {
                        continue;
                    };
                    if exclude == Some((index, id)) {
                        continue;
                    }
                    match stored_fingerprint(&h, names) {
                        Ok(Some(v)) => {
                            let distance = v.distance(fp);
                            if distance <= k {
                                matches.push(Match {
                                    id: id.to_owned(),
                                    index: index.to_owned(),
                                    distance,
                                });
                            }
                        }
                        // A candidate matched a block term, so it has blocks; none here means
                        // it changed between the match and the fetch. It is not a match now.
                        Ok(None) => {}
                        Err(e) => {
                            bad = Some(e);
                            return false;
                        }
                    }
                }
                true
            })
            .await?;
        if let Some(e) = bad {
            return Err(e);
        }
        matches.sort_by(|a, b| (a.distance, &a.id, &a.index).cmp(&(b.distance, &b.id, &b.index)));
        Ok(Similarity {
            query: QueryFingerprint::Given(fp),
            matches,
            transferred,
            scan,
        })
    }

    /// The index holding `id` and its fingerprint: stored, or computed from its text.
    async fn query_document(
        &self,
        indices: &IndexList,
        id: &str,
    ) -> Result<(String, QueryFingerprint), EsError> {
        let names = &self.options.names;
        let mut fields: Vec<&str> = names.blocks.iter().map(String::as_str).collect();
        fields.push(&names.simhash);
        let hit = self.find_document(indices, id, &fields).await?;
        let index = hit["_index"].as_str().unwrap_or_default().to_owned();
        if let Some(fp) =
            source_fingerprint(&hit["_source"], names).map_err(|detail| EsError::BadDocument {
                id: id.to_owned(),
                reason: format!("in `{index}`: {detail}"),
            })?
        {
            return Ok((index, QueryFingerprint::Stored(fp)));
        }
        let fields: Vec<&str> = self
            .options
            .text_fields
            .iter()
            .map(String::as_str)
            .collect();
        let hit = self.find_document(indices, id, &fields).await?;
        let outcome = fingerprint_source(
            &self.fingerprinter,
            &hit["_source"],
            &self.options.text_fields,
        )
        .map_err(|bad| EsError::BadDocument {
            id: id.to_owned(),
            reason: format!("{bad}; it has no stored fingerprint to compare"),
        })?;
        Ok((
            index,
            match outcome {
                Ok(f) => QueryFingerprint::Computed(f.simhash),
                Err(why) => QueryFingerprint::TooShort(why),
            },
        ))
    }

    /// The one hit for `id` in `indices`, with `_source` limited to `fields`.
    async fn find_document(
        &self,
        indices: &IndexList,
        id: &str,
        fields: &[&str],
    ) -> Result<Value, EsError> {
        let body = json!({
            "query": { "ids": { "values": [id] } },
            "size": 10,
            "_source": fields,
        });
        let r = request(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("index `{indices}`: get document `{id}`"),
            Method::Post,
            &format!("/{}/_search", path_segment_keep_patterns(indices.as_str())),
            &[],
            Some(&Body::Json(body)),
        )
        .await?;
        let hits = r["hits"]["hits"].as_array().cloned().unwrap_or_default();
        match hits.len() {
            0 => Err(EsError::DocumentNotFound {
                id: id.to_owned(),
                index: indices.to_string(),
            }),
            1 => Ok(hits.into_iter().next().expect("one hit")),
            _ => Err(EsError::AmbiguousId {
                id: id.to_owned(),
                indices: hits
                    .iter()
                    .filter_map(|h| h["_index"].as_str().map(str::to_owned))
                    .collect(),
            }),
        }
    }

    /// Checks once per index list that the block fields are mapped, and learns what can be
    /// fetched from doc values.
    async fn field_info(&self, indices: &IndexList) -> Result<Arc<FieldInfo>, EsError> {
        if let Some(info) = self.checked.lock().expect("lock").get(indices.as_str()) {
            return Ok(info.clone());
        }
        let names = &self.options.names;
        names.validate()?;
        let mut wanted: Vec<&str> = names.blocks.iter().map(String::as_str).collect();
        wanted.push(&names.simhash);
        let r = request(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("index `{indices}`: mapping of the fingerprint fields"),
            Method::Get,
            &format!(
                "/{}/_mapping/field/{}",
                path_segment_keep_patterns(indices.as_str()),
                wanted.join(",")
            ),
            &[],
            None,
        )
        .await
        .map_err(|e| match e {
            // A pattern that matches no index: 404 with an empty body.
            EsError::Status { status: 404, .. } => EsError::NoIndexMatches {
                pattern: indices.as_str().to_owned(),
            },
            other => other,
        })?;
        let info = Arc::new(field_info_from_mapping(&r, indices.as_str(), names)?);
        self.checked
            .lock()
            .expect("lock")
            .insert(indices.as_str().to_owned(), info.clone());
        Ok(info)
    }
}

/// One or more indices, aliases or patterns, as one comma-separated string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexList(String);

impl IndexList {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IndexList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for IndexList {
    fn from(s: &str) -> Self {
        IndexList(
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(","),
        )
    }
}

impl From<String> for IndexList {
    fn from(s: String) -> Self {
        IndexList::from(s.as_str())
    }
}

impl From<&String> for IndexList {
    fn from(s: &String) -> Self {
        IndexList::from(s.as_str())
    }
}

impl<S: AsRef<str>> From<&[S]> for IndexList {
    fn from(list: &[S]) -> Self {
        IndexList::from(
            list.iter()
                .map(|s| s.as_ref())
                .collect::<Vec<_>>()
                .join(",")
                .as_str(),
        )
    }
}

impl<S: AsRef<str>> From<Vec<S>> for IndexList {
    fn from(list: Vec<S>) -> Self {
        IndexList::from(list.as_slice())
    }
}

/// A search refused because of the script (inline scripts disabled, painless missing, a
/// script error): the client-side filter gives the same answer without it.
fn script_refused(e: &EsError) -> bool {
    match e {
        EsError::Status {
            status: 400 | 500,
            error_type,
            reason,
            ..
        } => error_type.contains("script") || reason.contains("script"),
        _ => false,
    }
}

fn check_k(k: u32) -> Result<(), EsError> {
    if k > MAX_K {
        return Err(EsError::DistanceTooLarge { k });
    }
    Ok(())
}

/// The painless filter: the whole fingerprint from the `long` where a document has it, else
/// (documents written by the older Java service, which has no `long`) from the four blocks.
/// `short` block doc values are numbers, `keyword` ones decimal strings.
const SCRIPT_LONG_OR_BLOCKS: &str = "long v; \
if (doc[params.f].size() != 0) { v = doc[params.f].value; } else { \
v = 0L; for (String b : params.b) { if (doc[b].size() == 0) { return false; } \
def x = doc[b].value; long l = x instanceof String ? Long.parseLong((String) x) : ((Number) x).longValue(); \
v = (v << 16) | (l & 0xFFFFL); } } \
return Long.bitCount(v ^ params.q) <= params.k;";

/// The painless filter on the four blocks alone (no `long` doc values in some index).
const SCRIPT_BLOCKS: &str = "long v = 0L; for (String b : params.b) { \
if (doc[b].size() == 0) { return false; } \
def x = doc[b].value; long l = x instanceof String ? Long.parseLong((String) x) : ((Number) x).longValue(); \
v = (v << 16) | (l & 0xFFFFL); } \
return Long.bitCount(v ^ params.q) <= params.k;";

/// The painless filter on the `long` alone (blocks without doc values). A document without
/// the `long` passes, and the client-side check (always applied) decides on its `_source`
/// blocks.
const SCRIPT_LONG: &str =
    "doc[params.f].size() == 0 || Long.bitCount(doc[params.f].value ^ params.q) <= params.k";

fn query_body(
    names: &FieldNames,
    info: &FieldInfo,
    filter: FilterMode,
    fp: SimHash,
    k: u32,
) -> Value {
    let should: Vec<Value> = names
        .blocks
        .iter()
        .zip(fp.blocks16())
        .map(|(f, b)| json!({ "term": { f: b } }))
        .collect();
    let mut filters = vec![json!({ "bool": { "should": should, "minimum_should_match": 1 } })];
    let script = match (info.long_doc_values, info.blocks_doc_values) {
        (true, true) => Some(SCRIPT_LONG_OR_BLOCKS),
        (false, true) => Some(SCRIPT_BLOCKS),
        (true, false) => Some(SCRIPT_LONG),
        // No doc values to script on: the client-side check does all the filtering.
        (false, false) => None,
    };
    if let (FilterMode::Server, Some(source)) = (filter, script) {
        filters.push(json!({ "script": { "script": {
            "lang": "painless",
            "source": source,
            "params": { "q": fp.as_i64(), "k": k, "f": &names.simhash, "b": &names.blocks },
        } } }));
    }
    let mut body = json!({ "query": { "bool": { "filter": filters } } });
    if info.blocks_doc_values {
        body["_source"] = json!(false);
        body["docvalue_fields"] = json!(&names.blocks);
    } else {
        // Blocks mapped with `doc_values: false` (as the older Java service did): read them
        // from `_source`, limited to the four fields.
        body["_source"] = json!(&names.blocks);
    }
    body
}

/// A hit's fingerprint from its block doc values (or `_source` blocks).
fn stored_fingerprint(hit: &Value, names: &FieldNames) -> Result<Option<SimHash>, EsError> {
    let fields = &hit["fields"];
    let from = if fields.is_object() {
        names
            .blocks
            .iter()
            .map(|b| fields[b].get(0))
            .collect::<Vec<_>>()
    } else {
        names.blocks.iter().map(|b| hit["_source"].get(b)).collect()
    };
    blocks_value(&from).map_err(|detail| EsError::BadDocument {
        id: hit["_id"].as_str().unwrap_or("?").to_owned(),
        reason: format!("in `{}`: {detail}", hit["_index"].as_str().unwrap_or("?")),
    })
}

/// A stored fingerprint in a `_source`: the `long` if present, else the four blocks.
fn source_fingerprint(source: &Value, names: &FieldNames) -> Result<Option<SimHash>, String> {
    match source.get(&names.simhash) {
        Some(Value::Null) | None => {}
        Some(v) => {
            return int_value(v)
                .map(|i| Some(SimHash::from_i64(i)))
                .ok_or_else(|| format!("`{}` is not a 64-bit integer: {v}", names.simhash))
        }
    }
    let blocks: Vec<Option<&Value>> = names.blocks.iter().map(|b| source.get(b)).collect();
    blocks_value(&blocks)
}

/// Four block values (numbers, or decimal strings from `keyword` doc values) into a
/// fingerprint; `None` when any is missing or null.
fn blocks_value(blocks: &[Option<&Value>]) -> Result<Option<SimHash>, String> {
    let mut out = [0i16; 4];
    for (i, b) in blocks.iter().enumerate() {
        let v = match b {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let n = int_value(v).ok_or_else(|| format!("block {i} is not an integer: {v}"))?;
        // Accepts both the signed form neardup and the Java service write and the unsigned
        // form (0..=65535) a hand-written document might hold.
        out[i] = match n {
            -32768..=32767 => n as i16,
            32768..=65535 => n as u16 as i16,
            _ => return Err(format!("block {i} is out of 16-bit range: {n}")),
        };
    }
    Ok(Some(SimHash::from_blocks16(out)))
}

fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Reads `GET /{indices}/_mapping/field/…`: the blocks must be mapped in every index.
fn field_info_from_mapping(
    r: &Value,
    indices: &str,
    names: &FieldNames,
) -> Result<FieldInfo, EsError> {
    let Some(per_index) = r.as_object().filter(|m| !m.is_empty()) else {
        return Err(EsError::IndexNotFound {
            index: indices.to_owned(),
        });
    };
    let mut info = FieldInfo {
        blocks_doc_values: true,
        long_doc_values: true,
    };
    for (index, m) in per_index {
        let mapping_of = |f: &str| m["mappings"][f]["mapping"][f].as_object().cloned();
        let missing: Vec<String> = names
            .blocks
            .iter()
            .filter(|b| mapping_of(b).is_none())
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(EsError::NotInitialised {
                index: index.clone(),
                fields: missing,
            });
        }
        for b in &names.blocks {
            let m = mapping_of(b).expect("checked above");
            let ty = m.get("type").and_then(Value::as_str).unwrap_or("object");
            if !matches!(ty, "short" | "keyword") {
                return Err(EsError::MappingConflict {
                    index: index.clone(),
                    field: b.clone(),
                    existing: ty.to_owned(),
                    wanted: "short".to_owned(),
                    hint: "the block fields must be `short` or `keyword`: pass the right names with --block-fields, or reindex".to_owned(),
                });
            }
            if m.get("doc_values") == Some(&Value::Bool(false)) {
                info.blocks_doc_values = false;
            }
        }
        match mapping_of(&names.simhash) {
            Some(m)
                if m.get("type").and_then(Value::as_str) == Some("long")
                    && m.get("doc_values") != Some(&Value::Bool(false)) => {}
            _ => info.long_doc_values = false,
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_signed_unsigned_and_keyword_strings() {
        let fp = SimHash(0xFFFF_0001_8000_7FFF);
        let [a, b, c, d] = fp.blocks16();
        let (ja, jb, jc, jd) = (json!(a), json!(b), json!(c), json!(d));
        assert_eq!(
            blocks_value(&[Some(&ja), Some(&jb), Some(&jc), Some(&jd)]),
            Ok(Some(fp))
        );
        let strings: Vec<Value> = fp.blocks16().iter().map(|x| json!(x.to_string())).collect();
        let refs: Vec<Option<&Value>> = strings.iter().map(Some).collect();
        assert_eq!(blocks_value(&refs), Ok(Some(fp)));
        let unsigned = json!(65535);
        assert_eq!(
            blocks_value(&[Some(&unsigned), Some(&jb), Some(&jc), Some(&jd)]),
            Ok(Some(fp))
        );
        assert_eq!(
            blocks_value(&[Some(&Value::Null), Some(&jb), Some(&jc), Some(&jd)]),
            Ok(None)
        );
        assert!(blocks_value(&[Some(&json!(70000)), Some(&jb), Some(&jc), Some(&jd)]).is_err());
    }

    #[test]
    fn the_long_wins_in_a_source() {
        let names = FieldNames::default();
        let fp = SimHash(0x0123_4567_89AB_CDEF);
        let src = json!({ "simHash": fp.as_i64(), "simHashA": 0, "simHashB": 0, "simHashC": 0, "simHashD": 0 });
        assert_eq!(source_fingerprint(&src, &names), Ok(Some(fp)));
        let src = json!({ "simHash": null, "simHashReason": "too_short", "simHashA": null });
        assert_eq!(source_fingerprint(&src, &names), Ok(None));
    }

    #[test]
    fn query_shapes() {
        let names = FieldNames::default();
        let fp = SimHash(0x0001_0002_0003_0004);
        let all = FieldInfo {
            blocks_doc_values: true,
            long_doc_values: true,
        };
        let b = query_body(&names, &all, FilterMode::Client, fp, 3);
        let filters = b["query"]["bool"]["filter"].as_array().unwrap();
        assert_eq!(filters.len(), 1);
        assert_eq!(filters[0]["bool"]["minimum_should_match"], 1);
        assert_eq!(
            filters[0]["bool"]["should"][3],
            json!({ "term": { "simHashD": 4 } })
        );
        assert_eq!(b["_source"], false);
        assert_eq!(b["docvalue_fields"][0], "simHashA");

        let b = query_body(&names, &all, FilterMode::Server, fp, 2);
        let script = &b["query"]["bool"]["filter"][1]["script"]["script"];
        assert_eq!(script["params"]["k"], 2);
        assert_eq!(script["params"]["q"], fp.as_i64());
        assert_eq!(script["source"], SCRIPT_LONG_OR_BLOCKS);

        let java = FieldInfo {
            blocks_doc_values: false,
            long_doc_values: false,
        };
        let b = query_body(&names, &java, FilterMode::Client, fp, 3);
        assert_eq!(b["_source"][0], "simHashA");
        assert!(b.get("docvalue_fields").is_none());
    }

    #[test]
    fn k_above_three_is_refused_with_the_mapping_that_would_allow_it() {
        let e = check_k(4).unwrap_err().to_string();
        assert!(e.contains("8 blocks of 8 bits"), "{e}");
        assert!(check_k(3).is_ok());
    }

    #[test]
    fn script_refusals_fall_back_to_the_client_filter() {
        let refused = EsError::Status {
            what: "search".into(),
            status: 400,
            error_type: "illegal_argument_exception".into(),
            reason: "cannot execute [inline] scripts".into(),
        };
        assert!(script_refused(&refused));
        let other = EsError::Status {
            what: "search".into(),
            status: 400,
            error_type: "parsing_exception".into(),
            reason: "unknown query [term]".into(),
        };
        assert!(!script_refused(&other));
        assert_eq!(FilterMode::default(), FilterMode::Server);
    }

    #[test]
    fn index_lists() {
        assert_eq!(IndexList::from("a, b,,c").as_str(), "a,b,c");
        assert_eq!(IndexList::from(vec!["x", "y"]).as_str(), "x,y");
        assert_eq!(IndexList::from(&["x".to_string()][..]).as_str(), "x");
    }

    #[test]
    fn mapping_checks() {
        let names = FieldNames::default();
        let field =
            |t: &str, dv: bool| json!({ "mapping": { "F": { "type": t, "doc_values": dv } } });
        let mapping = |fields: &[(&str, Value)]| {
            let mut m = serde_json::Map::new();
            for (name, v) in fields {
                let mut v = v.clone();
                let inner = v["mapping"]["F"].take();
                v["mapping"] = json!({ *name: inner });
                m.insert(name.to_string(), v);
            }
            json!({ "idx": { "mappings": m } })
        };
        let full = mapping(&[
            ("simHashA", field("short", true)),
            ("simHashB", field("short", true)),
            ("simHashC", field("short", true)),
            ("simHashD", field("short", true)),
            ("simHash", field("long", true)),
        ]);
        assert_eq!(
            field_info_from_mapping(&full, "idx", &names).unwrap(),
            FieldInfo {
                blocks_doc_values: true,
                long_doc_values: true
            }
        );
        let java = mapping(&[
            ("simHashA", field("short", false)),
            ("simHashB", field("short", true)),
            ("simHashC", field("short", true)),
            ("simHashD", field("short", true)),
        ]);
        assert_eq!(
            field_info_from_mapping(&java, "idx", &names).unwrap(),
            FieldInfo {
                blocks_doc_values: false,
                long_doc_values: false
            }
        );
        let partial = mapping(&[("simHashA", field("short", true))]);
        let e = field_info_from_mapping(&partial, "idx", &names).unwrap_err();
        assert!(e.to_string().contains("es-init"), "{e}");
        assert!(matches!(
            field_info_from_mapping(&json!({}), "nope*", &names),
            Err(EsError::IndexNotFound { .. })
        ));
    }
}

//! The query path: every document near an article, from the fingerprint fields stored next to
//! the articles, with the method the indices hold.
//!
//! [`Similar`] reads what the queried indices hold from their mappings' `_meta`
//! ([`IndexMeta`], once per index list) and queries with MinHash where they hold it, unless
//! the caller asks for SimHash (a [`Tolerance::Distance`]). Its fingerprinter makes exactly
//! what the indices hold: built from `_meta`, or, when one is given, checked against it
//! ([`EsError::VersionMismatch`]), so a fingerprint is never compared with stored ones of
//! another version. Indices without `_meta` (the older Java service's) read as SimHash
//! `seed000`.
//!
//! - **MinHash**: a `terms` query on the band field with the query's band terms finds every
//!   document sharing at least one band; the estimated Jaccard similarity (agreeing signature
//!   positions / signature length) must reach the threshold, the rule the store and `dedupe`
//!   use ([`Sketch::score`]).
//! - **SimHash**, Hamming distance ≤ k on the four 16-bit block fields: for k ≤ 3 two
//!   fingerprints share a whole block (pigeonhole), so a `bool` `should` of four `term`s finds
//!   every candidate; for 4 ≤ k ≤ 7 some block is within distance 1, so each block field is
//!   probed with 17 values (itself and its 16 one-bit flips, [`query::block_probes`]).
//!
//! The candidates are read page by page ([`Scanner`]: point in time + `search_after`, or
//! scroll where the cluster has no PIT), fetching only the fingerprint doc values, never
//! `_source` bodies, and the exact rule decides:
//!
//! - [`FilterMode::Client`]: every candidate crosses the network; neardup keeps the matches.
//! - [`FilterMode::Server`]: a painless script filter applies the same rule inside
//!   Elasticsearch (Hamming distance with `Long.bitCount`; for MinHash the agreeing `u32`s of
//!   the `binary` signature doc value counted against the smallest number of agreements that
//!   reaches the threshold, [`query::min_agreements`]), so only true matches cross the network. Every
//!   transferred candidate is checked here again, so both filters give the same answer.
//!
//! Results are sorted nearest first, then by id and index; the query document is left out,
//! by the candidate query itself (`must_not` its `_id` in its `_index`), so that it is
//! neither collected nor sent back.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use elasticsearch::http::Method as HttpMethod;
use elasticsearch::Elasticsearch;
use serde_json::{json, Map, Value};

use super::init::mappings;
use super::scan::{Paging, ScanOptions, ScanStats, Scanner};
use super::schema::{FieldsFormat, IndexMeta, MinHashMeta, SimHashMeta};
use super::{mget, request, search, BlockType, Body, EsError, FieldNames, RetryPolicy};
use super::{path_segment, path_segment_keep_patterns};
use neardup_core::fingerprint::Methods;
use neardup_core::input::field_texts;
pub use neardup_core::method::Match;
use neardup_core::method::{sort_matches, Query};
use neardup_core::minhash::Threshold;
use neardup_core::relation::{AlignRule, MatchOptions};
use neardup_core::{Fingerprinter, Method, SimHash, Sketch, Tolerance, TooShort};

mod aligned;
mod hit;
mod query;
mod scripts;

pub(crate) use aligned::{
    aligned_match, candidates as aligned_candidates, Aligner, BatchTexts, Marked,
};
use hit::{hit_sketch, source_sketch};
pub(crate) use query::{
    candidate_terms, common_keys, held_minima, CandidateTerms, StoredQuery, StoredTerms,
};
use query::{keep_source, leave_out, query_body, sketch_fields, stored_terms};

/// The largest k the four 16-bit blocks answer exactly: a pair within distance 7 has some
/// block within distance 1.
pub const FLIPPED_BLOCK_K: u32 = 7;

/// The largest k a whole-block `term` answers (pigeonhole: some block is equal); above it
/// each block is probed with its one-bit flips too.
pub const WHOLE_BLOCK_K: u32 = 3;

pub use neardup_core::simhash::DEFAULT_K;

/// Where the exact rule is checked.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FilterMode {
    /// Fetch every candidate's fingerprint and keep the matches here.
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
    /// The SimHash field names of indices without `_meta.neardup` (the older Java service's
    /// layout); indices with `_meta` name their own fields.
    pub names: FieldNames,
    /// How long what an index list holds (its `_meta` and mapping) is remembered before it is
    /// read again: a long-lived `Similar` (a service) sees a method `es-init` adds, or an
    /// alias moved to another index, within this time.
    pub describe_ttl: Duration,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        SimilarOptions {
            filter: FilterMode::default(),
            page_size: 1000,
            paging: Paging::Auto,
            keep_alive: Duration::from_secs(60),
            text_fields: neardup_core::input::default_text_fields(),
            names: FieldNames::default(),
            describe_ttl: Duration::from_secs(60),
        }
    }
}

/// Where the query sketch came from.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryFingerprint {
    /// Read from the document's fingerprint fields.
    Stored(Sketch),
    /// Computed from text: a query text, or a document without a stored fingerprint.
    Computed(Sketch),
    /// Given by the caller.
    Given(Sketch),
    /// The text is too short to have a fingerprint: nothing can be near it, and `matches` is
    /// empty.
    TooShort(TooShort),
}

impl QueryFingerprint {
    /// The query sketch, unless the text was too short.
    pub fn sketch(&self) -> Option<&Sketch> {
        match self {
            QueryFingerprint::Stored(s)
            | QueryFingerprint::Computed(s)
            | QueryFingerprint::Given(s) => Some(s),
            QueryFingerprint::TooShort(_) => None,
        }
    }

    /// The query's SimHash, for SimHash queries.
    pub fn simhash(&self) -> Option<SimHash> {
        match self.sketch() {
            Some(Sketch::SimHash(f)) => Some(*f),
            _ => None,
        }
    }
}

/// The `_source` fields a search brought back for each match (by index and id), where it was
/// asked to keep some ([`Ask::keep`]).
pub(crate) type Sources = HashMap<(String, String), Value>;

/// A lookup's document: its index, its sketch, the terms stored beside a compact one, and its
/// `_source` (the fields read).
type QueryDocument = (String, QueryFingerprint, Option<StoredTerms>, Value);

/// What a candidate search asks besides its query.
#[derive(Clone, Copy, Default)]
struct Ask<'a> {
    /// The band (and minima) terms of a compact stored signature, which cannot make them.
    terms: Option<&'a StoredTerms>,
    /// A document (index, id) to leave out: a lookup's own.
    exclude: Option<(&'a str, &'a str)>,
    /// `_source` fields to bring back with each match (an aligned lookup's texts).
    keep: &'a [String],
}

/// The answer to one query.
#[derive(Clone, Debug)]
pub struct Similarity {
    pub query: QueryFingerprint,
    /// What counted as near: its method is the one queried.
    pub tolerance: Tolerance,
    /// Within the tolerance, nearest first, then by id and index; without the query
    /// document. Each has its `index`.
    pub matches: Vec<Match>,
    /// Documents whose fingerprints crossed the network (all candidates with the client
    /// filter, only true matches with the server filter; never the query document of a
    /// lookup by id, which the candidate query leaves out).
    pub transferred: u64,
    pub scan: ScanStats,
    /// The id of the formula an aligned lookup ([`Similar::aligned_by_id`]) left out, when
    /// the indices record one.
    pub formula: Option<String>,
}

impl Similarity {
    fn empty(query: QueryFingerprint, tolerance: Tolerance) -> Similarity {
        Similarity {
            query,
            tolerance,
            matches: Vec::new(),
            transferred: 0,
            scan: ScanStats::default(),
            formula: None,
        }
    }
}

/// What counts as near in a query: the [`Tolerance`], and whether partial copies count too
/// ([`MatchOptions`]). A bare tolerance (a [`Tolerance`], a SimHash `u32` k, a MinHash
/// [`Threshold`]) asks for near-duplicates only ([`MatchOptions::NEAR_DUPLICATES_ONLY`]), the
/// answers of every release before containment; [`Near::new`] with
/// [`MatchOptions::default`] also asks for partial copies, and every match then says its
/// relation and, where both articles carry their distinct shingle counts (indices in fields
/// format 4 or 3), the containment estimate. Containment is a MinHash relation: a SimHash query
/// answers near-duplicates whatever the options.
///
/// Dedupe on insert ([`crate::insert_unless_near`]) can also ask the texts to decide
/// ([`Near::aligned`]): what the tolerance finds is then refused only when the rule on the
/// aligned texts calls it a copy. Lookups ask that with [`Similar::aligned_by_id`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Near {
    pub tolerance: Tolerance,
    pub options: MatchOptions,
    /// Dedupe on insert: the rule on aligned texts that confirms a refusal.
    pub align: Option<AlignRule>,
}

impl Near {
    pub fn new(tolerance: impl Into<Tolerance>, options: MatchOptions) -> Near {
        Near {
            tolerance: tolerance.into(),
            options,
            align: None,
        }
    }

    /// The same, a refusal on insert confirmed by `rule` on the aligned texts.
    pub fn aligned(self, rule: AlignRule) -> Near {
        Near {
            align: Some(rule),
            ..self
        }
    }
}

impl From<Tolerance> for Near {
    fn from(tolerance: Tolerance) -> Near {
        Near::new(tolerance, MatchOptions::NEAR_DUPLICATES_ONLY)
    }
}

impl From<u32> for Near {
    fn from(k: u32) -> Near {
        Near::from(Tolerance::Distance(k))
    }
}

impl From<Threshold> for Near {
    fn from(t: Threshold) -> Near {
        Near::from(Tolerance::Similarity(t))
    }
}

/// What the queried indices hold and allow, read once per index list.
#[derive(Debug)]
struct Described {
    meta: IndexMeta,
    /// Makes what the indices hold (checked against `meta`).
    fingerprinter: Fingerprinter,
    /// Every index has doc values for the four blocks (Elasticsearch's default).
    blocks_doc_values: bool,
    /// Every index maps the whole SimHash as a `long` with doc values.
    long_doc_values: bool,
    /// Every index has doc values for the MinHash signature.
    signature_doc_values: bool,
}

/// Finds near duplicates in Elasticsearch. Build one per process and share it: it remembers
/// what each index list holds and whether the cluster has point in time and scripts.
///
/// ```no_run
/// use neardup_core::Tolerance;
/// use neardup_es::{EsConfig, Similar};
///
/// # async fn demo() -> Result<(), neardup_es::EsError> {
/// let client = EsConfig::new("http://127.0.0.1:9200")?.client()?;
/// // The fingerprinter is built from what the indices record in `_meta`.
/// let similar = Similar::new(client, None);
/// let indices = "articles-2024,articles-2025";
/// // MinHash at the default threshold where the indices hold it, else SimHash at k = 3.
/// let tolerance = similar.default_tolerance(indices).await?;
/// let found = similar.by_id(indices, "article-42", tolerance).await?;
/// for m in &found.matches {
///     println!("{} in {:?}: {:?}", m.id, m.index, m.score);
/// }
/// // SimHash explicitly, up to distance 7.
/// let found = similar.by_id(indices, "article-42", Tolerance::Distance(7)).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Similar {
    scanner: Scanner,
    /// Given by the caller: checked against each index list's `_meta`.
    fingerprinter: Option<Fingerprinter>,
    options: SimilarOptions,
    /// What each index list holds, and when it was read.
    described: Mutex<HashMap<String, (Instant, Arc<Described>)>>,
    /// The cluster refused the server-side script once: filter on the client from then on.
    scripts_refused: AtomicBool,
    /// Whether a query asked for containment on indices without its fields has been warned
    /// about (once per `Similar`).
    containment_warned: AtomicBool,
}

impl Similar {
    /// A query function with the default options and retry policy. `fingerprinter`: `None`
    /// builds one from each index list's `_meta`; a given one must make what the indices
    /// hold.
    pub fn new(client: Elasticsearch, fingerprinter: impl Into<Option<Fingerprinter>>) -> Similar {
        Similar::with_options(
            client,
            fingerprinter,
            SimilarOptions::default(),
            RetryPolicy::default(),
        )
    }

    pub fn with_options(
        client: Elasticsearch,
        fingerprinter: impl Into<Option<Fingerprinter>>,
        options: SimilarOptions,
        retry: RetryPolicy,
    ) -> Similar {
        Similar {
            scanner: Scanner::new(client, retry),
            fingerprinter: fingerprinter.into(),
            options,
            described: Mutex::new(HashMap::new()),
            scripts_refused: AtomicBool::new(false),
            containment_warned: AtomicBool::new(false),
        }
    }

    pub fn options(&self) -> &SimilarOptions {
        &self.options
    }

    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// What the indices behind `indices` hold in common (read once, then remembered).
    pub async fn index_meta(&self, indices: impl Into<IndexList>) -> Result<IndexMeta, EsError> {
        Ok(self.describe(&indices.into()).await?.meta.clone())
    }

    /// The tolerance of a query that names none: MinHash at
    /// [`neardup_core::minhash::DEFAULT_THRESHOLD`] where the indices hold it, else SimHash at
    /// [`DEFAULT_K`].
    pub async fn default_tolerance(
        &self,
        indices: impl Into<IndexList>,
    ) -> Result<Tolerance, EsError> {
        let d = self.describe(&indices.into()).await?;
        Ok(Tolerance::default_for(d.meta.default_method(), DEFAULT_K))
    }

    /// Near duplicates of the document `id`, looked up in `indices` (comma-separated names,
    /// aliases or patterns), by the method of `tolerance` (a bare `u32` is a SimHash k). Its
    /// stored sketch is used; without one, its text fields are fingerprinted now. Errors:
    /// [`EsError::DocumentNotFound`], [`EsError::AmbiguousId`] (the id is in several of the
    /// indices), and those of [`Similar::by_fingerprint`].
    pub async fn by_id(
        &self,
        indices: impl Into<IndexList>,
        id: &str,
        near: impl Into<Near>,
    ) -> Result<Similarity, EsError> {
        let (s, _, _) = self
            .by_id_keeping(indices.into(), id, near.into(), &[])
            .await?;
        Ok(s)
    }

    /// [`Similar::by_id`], bringing back the `keep` fields of `_source` of the document
    /// (read with its sketch) and of each match (read with the match): what an aligned lookup
    /// reads its texts from, in the same requests.
    async fn by_id_keeping(
        &self,
        indices: IndexList,
        id: &str,
        near: Near,
        keep: &[String],
    ) -> Result<(Similarity, Value, Sources), EsError> {
        let tolerance = near.tolerance;
        check_tolerance(tolerance)?;
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, tolerance.method())?;
        let (index, query, terms, source) = self
            .query_document(&indices, &d, id, tolerance.method(), keep)
            .await?;
        match query.sketch() {
            None => Ok((Similarity::empty(query, tolerance), source, Sources::new())),
            Some(q) => {
                let q = stored_query(q.clone(), terms.as_ref(), tolerance)?;
                let ask = Ask {
                    terms: terms.as_ref(),
                    exclude: Some((&index, id)),
                    keep,
                };
                let (mut s, sources) = self.search(&indices, &d, &q, &near.options, ask).await?;
                s.query = query;
                Ok((s, source, sources))
            }
        }
    }

    /// Near duplicates of a text that need not be in the index (plain text or HTML,
    /// fingerprinted as the indices' documents are).
    pub async fn by_text(
        &self,
        indices: impl Into<IndexList>,
        text: &str,
        near: impl Into<Near>,
    ) -> Result<Similarity, EsError> {
        let (s, _) = self
            .by_texts(indices.into(), &[text], near.into(), &[])
            .await?;
        Ok(s)
    }

    /// Near duplicates of an article (a JSON object) that need not be in the index: its text
    /// fields ([`SimilarOptions::text_fields`]) are fingerprinted by the one document-to-text
    /// rule, as the indices' documents are. A text field holding a number or an object is
    /// [`EsError::BadText`].
    pub async fn by_article(
        &self,
        indices: impl Into<IndexList>,
        article: &Value,
        near: impl Into<Near>,
    ) -> Result<Similarity, EsError> {
        let texts = field_texts(article, &self.options.text_fields)?;
        let (s, _) = self
            .by_texts(indices.into(), &texts, near.into(), &[])
            .await?;
        Ok(s)
    }

    /// Near duplicates of an article's text fields, bringing back the `keep` fields of each
    /// match's `_source`.
    async fn by_texts(
        &self,
        indices: IndexList,
        texts: &[&str],
        near: Near,
        keep: &[String],
    ) -> Result<(Similarity, Sources), EsError> {
        let tolerance = near.tolerance;
        check_tolerance(tolerance)?;
        let d = self.describe(&indices).await?;
        let method = tolerance.method();
        check_method(&indices, &d.meta, method)?;
        let query = match d
            .fingerprinter
            .sketch_fields(Methods::only(method), texts)
            .into_sketch(method)
        {
            Ok(q) => q,
            Err(why) => {
                return Ok((
                    Similarity::empty(QueryFingerprint::TooShort(why), tolerance),
                    Sources::new(),
                ))
            }
        };
        let ask = Ask {
            keep,
            ..Ask::default()
        };
        let (mut s, sources) = self
            .search(
                &indices,
                &d,
                &es_query(query.clone(), tolerance)?,
                &near.options,
                ask,
            )
            .await?;
        s.query = QueryFingerprint::Computed(query);
        Ok((s, sources))
    }

    /// Every document near a given sketch: a SimHash (with a [`Tolerance::Distance`]) or a
    /// MinHash signature of the indices' parameters (with a [`Tolerance::Similarity`]).
    pub async fn by_fingerprint(
        &self,
        indices: impl Into<IndexList>,
        query: impl Into<Sketch>,
        near: impl Into<Near>,
    ) -> Result<Similarity, EsError> {
        let (s, _) = self
            .by_fingerprint_keeping(indices.into(), query.into(), near.into(), &[])
            .await?;
        Ok(s)
    }

    /// [`Similar::by_fingerprint`], bringing back the `keep` fields of each match's `_source`.
    pub(crate) async fn by_fingerprint_keeping(
        &self,
        indices: IndexList,
        query: Sketch,
        near: Near,
        keep: &[String],
    ) -> Result<(Similarity, Sources), EsError> {
        let tolerance = near.tolerance;
        check_tolerance(tolerance)?;
        let query = es_query(query, tolerance)?;
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, query.method())?;
        if let (Query::MinHash { signature: sig, .. }, Some(m)) = (&query, &d.meta.minhash) {
            let want = usize::from(m.params.hashes);
            if sig.len() != want {
                return Err(EsError::Config(format!(
                    "the MinHash signature has {} values, but `{indices}` holds signatures of {want} ({})",
                    sig.len(),
                    m.params
                )));
            }
        }
        let ask = Ask {
            keep,
            ..Ask::default()
        };
        self.search(&indices, &d, &query, &near.options, ask).await
    }

    /// For each of `queries`, the documents among `ids` in `index` near it, read by id once
    /// for all (a realtime multi-get, which sees writes no refresh has made searchable yet):
    /// what [`Similar::by_fingerprint`] would find among them, by the same rule (a MinHash
    /// candidate must also share a band with the query, or with containment asked and held
    /// agree in the index's [`crate::ContainmentMeta::agreeing`] minima terms, as a search needs). Ids that are not
    /// stored are skipped. Dedupe on insert reads the articles its keys' records list this way
    /// ([`super::Claims`]).
    pub async fn among_ids(
        &self,
        index: &str,
        ids: &[String],
        queries: &[Sketch],
        near: impl Into<Near>,
    ) -> Result<Vec<Vec<Match>>, EsError> {
        let near = near.into();
        let tolerance = near.tolerance;
        check_tolerance(tolerance)?;
        let queries = queries
            .iter()
            .map(|q| es_query(q.clone(), tolerance))
            .collect::<Result<Vec<Query>, _>>()?;
        let mut found = vec![Vec::new(); queries.len()];
        if ids.is_empty() || queries.is_empty() {
            return Ok(found);
        }
        let method = tolerance.method();
        let indices = IndexList::from(index);
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, method)?;
        let mut fields = sketch_fields(&d.meta, method);
        if let (Method::MinHash, Some(m)) = (method, &d.meta.minhash) {
            if !fields.contains(&m.fields.bands.as_str()) {
                fields.push(&m.fields.bands);
            }
        }
        let fields = fields.join(",");
        let r = mget(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("index `{index}`: read {} recent articles", ids.len()),
            &format!("/{}/_mget", super::path_segment(index)),
            &[("_source_includes", &fields)],
            Some(&Body::Json(json!({ "ids": ids }))),
        )
        .await?;
        // A MinHash candidate must share a band term with the query: the query's terms, and
        // the document's as stored (a compact signature cannot make them again).
        let query_bands: Vec<HashSet<String>> = queries
            .iter()
            .map(|q| match (q.sketch(), &d.meta.minhash) {
                (Sketch::MinHash(sig), Some(m)) => m.query_terms(&sig).into_iter().collect(),
                _ => HashSet::new(),
            })
            .collect();
        let bands_field = d.meta.minhash.as_ref().map(|m| m.fields.bands.as_str());
        // With containment asked and held: the query's minima terms, and where they are
        // stored.
        let relations = near.options.containment.is_some() && method == Method::MinHash;
        let containment = d
            .meta
            .minhash
            .as_ref()
            .and_then(|m| m.containment.as_ref())
            .filter(|_| relations);
        let query_minima: Vec<HashSet<String>> = queries
            .iter()
            .map(|q| match (q.sketch(), containment) {
                (Sketch::MinHash(sig), Some(c)) => c.minima_terms(&sig).into_iter().collect(),
                _ => HashSet::new(),
            })
            .collect();
        for (index, id, doc) in found_docs(&r) {
            let Some(other) = hit_sketch(doc, &d, method)? else {
                continue;
            };
            let other_bands: HashSet<&str> = bands_field
                .and_then(|f| doc["_source"][f].as_array())
                .map(|terms| terms.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let other_minima: Vec<&str> = containment
                .and_then(|c| doc["_source"][&c.fields.minima].as_str())
                .map(|s| s.split(' ').collect())
                .unwrap_or_default();
            for (((q, qb), qm), out) in queries
                .iter()
                .zip(&query_bands)
                .zip(&query_minima)
                .zip(&mut found)
            {
                let shares_band = other_bands.iter().any(|t| qb.contains(*t));
                let agrees = containment.is_some_and(|c| {
                    other_minima.iter().filter(|t| qm.contains(**t)).count() >= c.agreeing()
                });
                if method == Method::MinHash && !shares_band && !agrees {
                    continue;
                }
                out.extend(judged_match(q, &other, &near.options, id, index));
            }
        }
        for m in &mut found {
            sort_matches(m);
        }
        Ok(found)
    }

    /// The `_source` fields a walk of `indices` reads to get each document's stored sketch
    /// of `method` ([`Similar::stored_sketch`]).
    pub(crate) async fn sketch_source_fields(
        &self,
        indices: impl Into<IndexList>,
        method: Method,
    ) -> Result<Vec<String>, EsError> {
        let indices = indices.into();
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, method)?;
        Ok(sketch_fields(&d.meta, method)
            .into_iter()
            .map(str::to_owned)
            .collect())
    }

    /// A walked document's stored sketch of `method` (`hit`: `_id`, `_index` and the
    /// `_source` of [`Similar::sketch_source_fields`]), as [`Similar::by_id`] reads it:
    /// `None` without one of the indices' version.
    pub(crate) async fn stored_sketch(
        &self,
        indices: impl Into<IndexList>,
        hit: &Value,
        method: Method,
    ) -> Result<Option<StoredQuery>, EsError> {
        let indices = indices.into();
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, method)?;
        let bad = |detail: String| EsError::BadDocument {
            id: hit["_id"].as_str().unwrap_or("?").to_owned(),
            reason: format!("in `{}`: {detail}", hit["_index"].as_str().unwrap_or("?")),
        };
        Ok(source_sketch(&hit["_source"], &d.meta, method)
            .map_err(bad)?
            .map(|sketch| StoredQuery {
                terms: stored_terms(&hit["_source"], &d.meta, &sketch),
                sketch,
            }))
    }

    /// Every document near a stored sketch ([`Similar::stored_sketch`]): what
    /// [`Similar::by_id`] finds for its document, that document included.
    pub(crate) async fn by_stored(
        &self,
        indices: impl Into<IndexList>,
        stored: StoredQuery,
        near: impl Into<Near>,
    ) -> Result<Similarity, EsError> {
        let (s, _) = self
            .by_stored_keeping(indices.into(), stored, near.into(), &[])
            .await?;
        Ok(s)
    }

    /// [`Similar::by_stored`], bringing back the `keep` fields of each match's `_source`.
    async fn by_stored_keeping(
        &self,
        indices: IndexList,
        stored: StoredQuery,
        near: Near,
        keep: &[String],
    ) -> Result<(Similarity, Sources), EsError> {
        let tolerance = near.tolerance;
        check_tolerance(tolerance)?;
        let d = self.describe(&indices).await?;
        check_method(&indices, &d.meta, tolerance.method())?;
        let query = stored_query(stored.sketch, stored.terms.as_ref(), tolerance)?;
        let ask = Ask {
            terms: stored.terms.as_ref(),
            exclude: None,
            keep,
        };
        self.search(&indices, &d, &query, &near.options, ask).await
    }

    /// The filter mode in effect: the configured one, unless the cluster refused scripts.
    pub fn effective_filter(&self) -> FilterMode {
        if self.scripts_refused.load(Ordering::Relaxed) {
            FilterMode::Client
        } else {
            self.options.filter
        }
    }

    /// `terms`: the band (and minima) terms of a compact stored signature (which cannot make
    /// them); the query's own otherwise. With containment asked (`options`) and held by the
    /// indices, the candidates are those sharing a band or agreeing in
    /// the index's [`crate::ContainmentMeta::agreeing`] minima, and each match says its relation.
    async fn search(
        &self,
        indices: &IndexList,
        d: &Described,
        query: &Query,
        options: &MatchOptions,
        ask: Ask<'_>,
    ) -> Result<(Similarity, Sources), EsError> {
        if options.containment.is_some() && query.method() == Method::MinHash {
            let format = FieldsFormat::of(&d.meta);
            if let Some(why) = format.containment_advice() {
                if !self.containment_warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        index = %indices,
                        "`{indices}` ({format}) {why}, run `neardup es-init --upgrade` and then `neardup backfill` on it",
                    );
                }
            }
        }
        let filter = self.effective_filter();
        match self
            .search_with(filter, indices, d, query, options, ask)
            .await
        {
            Err(e) if filter == FilterMode::Server && script_refused(&e) => {
                tracing::warn!(error = %e, "the cluster refused the server-side filter script; filtering on the client from now on");
                self.scripts_refused.store(true, Ordering::Relaxed);
                self.search_with(FilterMode::Client, indices, d, query, options, ask)
                    .await
            }
            r => r,
        }
    }

    async fn search_with(
        &self,
        filter: FilterMode,
        indices: &IndexList,
        d: &Described,
        query: &Query,
        options: &MatchOptions,
        ask: Ask<'_>,
    ) -> Result<(Similarity, Sources), EsError> {
        let mut body = query_body(d, filter, query, options, ask.terms);
        let exclude = ask.exclude;
        if let Some((index, id)) = exclude {
            leave_out(&mut body, index, id);
        }
        keep_source(&mut body, ask.keep);
        let mut sources = Sources::new();
        let scan_options = ScanOptions {
            page_size: self.options.page_size,
            keep_alive: self.options.keep_alive,
            single_request_first: true,
            paging: self.options.paging,

            slice: None,
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
                    // The query leaves it out; a hit of a remote cluster (`cluster:index`)
                    // names its index otherwise there.
                    if exclude == Some((index, id)) {
                        continue;
                    }
                    match hit_sketch(&h, d, query.method()) {
                        Ok(Some(other)) => {
                            let found = matches.len();
                            matches.extend(judged_match(query, &other, options, id, index));
                            if matches.len() > found && !ask.keep.is_empty() {
                                sources.insert(
                                    (index.to_owned(), id.to_owned()),
                                    h["_source"].clone(),
                                );
                            }
                        }
                        // A candidate matched a block or band term, so it has a sketch; none
                        // here means it changed between the match and the fetch. It is not a
                        // match now.
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
        sort_matches(&mut matches);
        let s = Similarity {
            query: QueryFingerprint::Given(query.sketch()),
            tolerance: query.tolerance(),
            matches,
            transferred,
            scan,
            formula: None,
        };
        Ok((s, sources))
    }

    /// The index holding `id`, its sketch for `method` (stored, or computed from its text)
    /// and the terms stored beside a compact one, and its `_source` with the `keep` fields.
    async fn query_document(
        &self,
        indices: &IndexList,
        d: &Described,
        id: &str,
        method: Method,
        keep: &[String],
    ) -> Result<QueryDocument, EsError> {
        let mut fields = sketch_fields(&d.meta, method);
        fields.extend(keep.iter().map(String::as_str));
        let hit = self.find_document(indices, id, &fields).await?;
        let index = hit["_index"].as_str().unwrap_or_default().to_owned();
        if let Some(s) = source_sketch(&hit["_source"], &d.meta, method).map_err(|detail| {
            EsError::BadDocument {
                id: id.to_owned(),
                reason: format!("in `{index}`: {detail}"),
            }
        })? {
            let terms = stored_terms(&hit["_source"], &d.meta, &s);
            return Ok((
                index,
                QueryFingerprint::Stored(s),
                terms,
                hit["_source"].clone(),
            ));
        }
        // No stored sketch: its text, read now unless `keep` brought it.
        let text_fields = &self.options.text_fields;
        let hit = if text_fields.iter().all(|f| keep.contains(f)) {
            hit
        } else {
            let mut fields: Vec<&str> = text_fields.iter().map(String::as_str).collect();
            fields.extend(keep.iter().map(String::as_str));
            self.find_document(indices, id, &fields).await?
        };
        let texts =
            field_texts(&hit["_source"], text_fields).map_err(|bad| EsError::BadDocument {
                id: id.to_owned(),
                reason: format!("{bad}; it has no stored fingerprint to compare"),
            })?;
        let outcome = d
            .fingerprinter
            .sketch_fields(Methods::only(method), &texts)
            .into_sketch(method);
        let query = match outcome {
            Ok(s) => QueryFingerprint::Computed(s),
            Err(why) => QueryFingerprint::TooShort(why),
        };
        Ok((index, query, None, hit["_source"].clone()))
    }

    /// The one hit for `id` in `indices` (`_index`, `_id`, `_source` limited to `fields`).
    /// Errors: [`EsError::DocumentNotFound`], [`EsError::AmbiguousId`].
    ///
    /// `indices` naming one index (or an alias of one) is read with a realtime get, one
    /// lookup by id; anything else, or a get that finds nothing (the document may have been
    /// routed elsewhere, or the alias may name several indices), with an `ids` search of
    /// them all, which also finds an id stored twice.
    pub async fn find_document(
        &self,
        indices: &IndexList,
        id: &str,
        fields: &[&str],
    ) -> Result<Value, EsError> {
        if let Some(hit) = self.get_document(indices, id, fields).await? {
            return Ok(hit);
        }
        let body = json!({
            "query": { "ids": { "values": [id] } },
            "size": 10,
            "_source": fields,
        });
        let r = search(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("index `{indices}`: get document `{id}`"),
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

    /// The document `id` by a realtime get when `indices` is one name (no pattern, no
    /// list): `Some` when it is found; `None` when it is not, or when the name cannot be
    /// read that way (an alias of several indices), for [`Similar::find_document`] to
    /// search. Other errors are returned.
    async fn get_document(
        &self,
        indices: &IndexList,
        id: &str,
        fields: &[&str],
    ) -> Result<Option<Value>, EsError> {
        let name = indices.as_str();
        if name.is_empty() || name.contains([',', '*']) || name.starts_with(['_', '-']) {
            return Ok(None);
        }
        let source = fields.join(",");
        match request(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("index `{indices}`: get document `{id}`"),
            HttpMethod::Get,
            &format!("/{}/_doc/{}", path_segment(name), path_segment(id)),
            &[("_source_includes", &source)],
            None,
        )
        .await
        {
            Ok(hit) => Ok(Some(hit).filter(|h| h["found"] == true)),
            // Not found (or no such index), or an alias of several indices: the search says
            // which.
            Err(EsError::Status {
                status: 400 | 404, ..
            })
            | Err(EsError::IndexNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads what the indices hold (`_meta`, or the Java layout) and which fingerprint fields
    /// have doc values, and settles the fingerprinter; remembered for
    /// [`SimilarOptions::describe_ttl`].
    async fn describe(&self, indices: &IndexList) -> Result<Arc<Described>, EsError> {
        if let Some((at, d)) = self.described.lock().expect("lock").get(indices.as_str()) {
            if at.elapsed() < self.options.describe_ttl {
                return Ok(d.clone());
            }
        }
        self.options.names.validate()?;
        let mappings = mappings(
            self.scanner.client(),
            self.scanner.retry(),
            indices.as_str(),
        )
        .await?;
        let d = Arc::new(describe_mappings(
            indices.as_str(),
            &mappings,
            &self.options.names,
            self.fingerprinter.as_ref(),
        )?);
        self.described
            .lock()
            .expect("lock")
            .insert(indices.as_str().to_owned(), (Instant::now(), d.clone()));
        Ok(d)
    }
}

/// The documents a `_mget` answer found, as `(_index, _id, the document)`.
fn found_docs(r: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    r["docs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter_map(|doc| {
            match (
                doc["found"] == true,
                doc["_index"].as_str(),
                doc["_id"].as_str(),
            ) {
                (true, Some(index), Some(id)) => Some((index, id, doc)),
                _ => None,
            }
        })
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

/// k ≤ [`FLIPPED_BLOCK_K`] (a [`neardup_core::minhash::Threshold`] is in range by construction).
fn check_tolerance(tolerance: Tolerance) -> Result<(), EsError> {
    match tolerance {
        Tolerance::Distance(k) if k > FLIPPED_BLOCK_K => Err(EsError::DistanceTooLarge { k }),
        _ => Ok(()),
    }
}

/// What a candidate `other` (`id` in `index`) is to `query`: a match within the query's
/// tolerance, with its relation and estimated containment where partial copies are asked
/// (`options`) of a MinHash query; `None` when it is not near. The one judgement of a
/// candidate, whoever found it: a search, a multi-get of recent articles, a regroup's join.
pub(crate) fn judged_match(
    query: &Query,
    other: &Sketch,
    options: &MatchOptions,
    id: &str,
    index: &str,
) -> Option<Match> {
    // Relations are a MinHash answer, given where partial copies are asked for.
    if options.containment.is_none() || query.method() != Method::MinHash {
        return query
            .score(other)
            .map(|score| Match::in_index(id, index, score));
    }
    let r = query.relate(other, options)?;
    let mut m = Match::in_index(id, index, r.score);
    m.relation = Some(r.relation);
    m.containment = r.containment;
    Some(m)
}

/// The [`Query`] of a sketch at a tolerance, or [`EsError::Config`] when their methods differ
/// or the sketch is a b-bit signature (it cannot make the band terms a search needs).
fn es_query(sketch: Sketch, tolerance: Tolerance) -> Result<Query, EsError> {
    if let Sketch::MinHash(sig) = &sketch {
        if !sig.is_full() {
            return Err(EsError::Config(format!(
                "a signature of {}-bit minima cannot be searched for: its band keys need whole minima; give the article's text (or a whole signature)",
                sig.bits()
            )));
        }
    }
    Query::new(sketch, tolerance).map_err(|e| EsError::Config(e.to_string()))
}

/// The [`Query`] of a stored sketch: a compact signature comes with its stored band `terms`
/// (it cannot make them, so [`es_query`] would refuse it); any other is [`es_query`]'s.
pub(crate) fn stored_query(
    sketch: Sketch,
    terms: Option<&StoredTerms>,
    tolerance: Tolerance,
) -> Result<Query, EsError> {
    match terms {
        Some(_) => Query::new(sketch, tolerance).map_err(|e| EsError::Config(e.to_string())),
        None => es_query(sketch, tolerance),
    }
}

/// [`EsError::MethodNotHeld`] unless the indices hold `method`.
fn check_method(indices: &IndexList, meta: &IndexMeta, method: Method) -> Result<(), EsError> {
    if meta.has(method) {
        return Ok(());
    }
    Err(EsError::MethodNotHeld {
        index: indices.to_string(),
        held: meta.default_method(),
        asked: method,
    })
}

/// The SimHash part of a description that holds SimHash (see [`check_method`]).
fn simhash_meta(meta: &IndexMeta) -> &SimHashMeta {
    meta.simhash
        .as_ref()
        .expect("check_method: SimHash is held")
}

/// The MinHash part of a description that holds MinHash (see [`check_method`]).
fn minhash_meta(meta: &IndexMeta) -> &MinHashMeta {
    meta.minhash
        .as_ref()
        .expect("check_method: MinHash is held")
}

/// `NotInitialised`, naming them, unless every one of `fields` is mapped in `props`.
fn require_mapped<'a>(
    index: &str,
    props: &Value,
    fields: impl IntoIterator<Item = &'a String>,
) -> Result<(), EsError> {
    let missing: Vec<String> = fields
        .into_iter()
        .filter(|f| props[f.as_str()]["type"].as_str().is_none())
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(EsError::NotInitialised {
        index: index.to_owned(),
        fields: missing,
    })
}

/// What the indices of `GET /{indices}/_mapping` hold in common, which fingerprint fields have
/// doc values, and the fingerprinter: `given` checked against the description, else built
/// from it.
fn describe_mappings(
    indices: &str,
    mappings: &Map<String, Value>,
    legacy_fields: &FieldNames,
    given: Option<&Fingerprinter>,
) -> Result<Described, EsError> {
    let mut per_index = BTreeMap::new();
    let (mut blocks_dv, mut long_dv, mut signature_dv) = (true, true, true);
    for (index, m) in mappings {
        let m = &m["mappings"];
        let mut meta = IndexMeta::from_mapping(index, m, legacy_fields)?;
        let props = &m["properties"];
        // `short` and `keyword` blocks answer the same queries (a number term matches both),
        // so indices that differ only in block type are queried together.
        if let Some(s) = &mut meta.simhash {
            s.block_type = BlockType::Short;
        }
        let doc_values = |field: &str| props[field]["doc_values"] != Value::Bool(false);
        if let Some(s) = &meta.simhash {
            let names = &s.fields;
            require_mapped(index, props, &names.blocks)?;
            for b in &names.blocks {
                let ty = props[b.as_str()]["type"].as_str().unwrap_or("object");
                if !matches!(ty, "short" | "keyword") {
                    return Err(EsError::MappingConflict {
                        index: index.clone(),
                        field: b.clone(),
                        existing: ty.to_owned(),
                        wanted: "short".to_owned(),
                        hint: "the block fields must be `short` or `keyword`: pass the right names with --block-fields, or reindex".to_owned(),
                    });
                }
                blocks_dv &= doc_values(b);
            }
            long_dv &= props[names.simhash.as_str()]["type"].as_str() == Some("long")
                && doc_values(&names.simhash);
        }
        if let Some(mh) = &meta.minhash {
            let names = &mh.fields;
            require_mapped(index, props, [&names.bands, &names.signature])?;
            signature_dv &= doc_values(&names.signature);
        }
        per_index.insert(index.clone(), meta);
    }
    let meta = IndexMeta::common(&per_index)?;
    let fingerprinter = match given {
        Some(fp) => {
            meta.check_fingerprinter(indices, fp)?;
            fp.clone()
        }
        None => meta.fingerprinter(indices)?,
    };
    Ok(Described {
        meta,
        fingerprinter,
        blocks_doc_values: blocks_dv,
        long_doc_values: long_dv,
        signature_doc_values: signature_dv,
    })
}

#[cfg(test)]
mod tests {
    use super::hit::{blocks_value, source_fingerprint};
    use super::query::{block_probes, min_agreements};
    use super::scripts::{
        SCRIPT_LONG_OR_BLOCKS, SCRIPT_MINHASH, SCRIPT_MINHASH_BITS, SCRIPT_MINHASH_RELATE,
    };
    use super::*;
    use crate::schema::MinHashLayout;
    use crate::ContainmentMeta;
    use neardup_core::relation::CANDIDATE_AGREEING_MINIMA;
    use neardup_core::Profile;
    use neardup_core::Signature;
    use proptest::prelude::*;

    /// Both methods, MinHash in the full layout.
    fn both() -> IndexMeta {
        IndexMeta::default().with_layout(MinHashLayout::Full)
    }

    /// `GET _mapping`'s answer for one index holding `meta`'s fields (as es-init maps them).
    fn mapping_of(meta: &IndexMeta, with_meta: bool) -> Map<String, Value> {
        let mut m = meta.mapping();
        if with_meta {
            m["_meta"] = json!({ crate::schema::META_KEY: meta.to_json() });
        }
        let mut out = Map::new();
        out.insert("idx".into(), json!({ "mappings": m }));
        out
    }

    fn described(meta: &IndexMeta) -> Described {
        describe_mappings("idx", &mapping_of(meta, true), &FieldNames::default(), None).unwrap()
    }

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
    fn a_stored_signature_counts_only_in_the_indices_version() {
        let meta = both();
        let m = meta.minhash.as_ref().unwrap();
        let sig = Signature::from_values((0..128).collect::<Vec<u32>>());
        let b64 = crate::schema::signature_base64(&sig);
        let src = json!({ "minHashSignature": b64, "minHashVersion": m.version });
        assert_eq!(
            source_sketch(&src, &meta, Method::MinHash),
            Ok(Some(Sketch::MinHash(sig.clone())))
        );
        let stale = json!({ "minHashSignature": b64, "minHashVersion": "minhash-0" });
        assert_eq!(source_sketch(&stale, &meta, Method::MinHash), Ok(None));
        let short = Signature::from_values(vec![1u32, 2]);
        let src = json!({ "minHashSignature": crate::schema::signature_base64(&short), "minHashVersion": m.version });
        let e = source_sketch(&src, &meta, Method::MinHash).unwrap_err();
        assert!(e.contains("128 values"), "{e}");
        let src = json!({ "minHashSignature": 7, "minHashVersion": m.version });
        assert!(source_sketch(&src, &meta, Method::MinHash).is_err());
    }

    fn th(t: f64) -> Threshold {
        Threshold::new(t).unwrap()
    }

    #[test]
    fn simhash_query_shapes() {
        let d = described(&both());
        let fp = SimHash(0x0001_0002_0003_0004);
        let q = Sketch::SimHash(fp);
        let b = query_body(
            &d,
            FilterMode::Client,
            &Query::new(q.clone(), 3).unwrap(),
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let filters = b["query"]["bool"]["filter"].as_array().unwrap();
        assert_eq!(filters.len(), 1);
        assert_eq!(filters[0]["bool"]["minimum_should_match"], 1);
        assert_eq!(
            filters[0]["bool"]["should"][3],
            json!({ "term": { "simHashD": 4 } })
        );
        assert_eq!(b["_source"], false);
        assert_eq!(b["docvalue_fields"][0], "simHashA");

        let b = query_body(
            &d,
            FilterMode::Server,
            &Query::new(q.clone(), 2).unwrap(),
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let script = &b["query"]["bool"]["filter"][1]["script"]["script"];
        assert_eq!(script["params"]["k"], 2);
        assert_eq!(script["params"]["q"], fp.as_i64());
        assert_eq!(script["source"], SCRIPT_LONG_OR_BLOCKS);

        // k ≥ 4: each block with its 16 one-bit flips.
        let b = query_body(
            &d,
            FilterMode::Server,
            &Query::new(q.clone(), 7).unwrap(),
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let terms = &b["query"]["bool"]["filter"][0]["bool"]["should"][3]["terms"]["simHashD"];
        let probes: Vec<i64> = terms
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(probes.len(), 17);
        assert_eq!(probes[..4], [4, 5, 6, 0]);
        assert_eq!(probes[16], i64::from(4i16 ^ i16::MIN));
        assert_eq!(
            b["query"]["bool"]["filter"][1]["script"]["script"]["params"]["k"],
            7
        );
    }

    #[test]
    fn minhash_query_shapes() {
        let meta = both();
        let d = described(&meta);
        let params = meta.minhash.as_ref().unwrap().params;
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x0300_0001))
                .collect::<Vec<u32>>(),
        );
        let q = Sketch::MinHash(sig.clone());
        let b = query_body(
            &d,
            FilterMode::Client,
            &Query::new(q.clone(), th(0.3)).unwrap(),
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let filters = b["query"]["bool"]["filter"].as_array().unwrap();
        assert_eq!(filters.len(), 1);
        let terms = filters[0]["terms"]["minHashBands"].as_array().unwrap();
        assert_eq!(terms.len(), 42);
        assert_eq!(
            terms[5],
            json!(crate::schema::band_term(sig.band_key(&params, 5)))
        );
        assert_eq!(b["docvalue_fields"], json!(["minHashSignature"]));
        assert_eq!(b["_source"], false);

        let b = query_body(
            &d,
            FilterMode::Server,
            &Query::new(q.clone(), th(0.3)).unwrap(),
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let script = &b["query"]["bool"]["filter"][1]["script"]["script"];
        assert_eq!(script["source"], SCRIPT_MINHASH);
        assert_eq!(script["params"]["m"], 39);
        assert_eq!(
            script["params"]["q"][127],
            json!(127u32.wrapping_mul(0x0300_0001) as i32)
        );
        assert_eq!(script["params"]["f"], "minHashSignature");
    }

    #[test]
    fn min_agreements_is_the_score_rule_in_integers() {
        for n in [1usize, 4, 100, 128] {
            for t in [0.01, 0.25, 0.296875, 0.3, 0.5, 0.75, 0.9, 1.0] {
                let m = min_agreements(n, 32, th(t));
                for a in 0..=n {
                    let s = a as f64 / n as f64;
                    assert_eq!(
                        a >= m,
                        s >= t - neardup_core::minhash::SIMILARITY_EPSILON,
                        "n {n} t {t} a {a}"
                    );
                }
            }
        }
        // 38/128 = 0.296875 reaches 0.296875 itself, never less.
        assert_eq!(min_agreements(128, 32, th(0.296875)), 38);
        assert_eq!(min_agreements(128, 32, th(0.3)), 39);
        // b bits: (P − 2^-b) / (1 − 2^-b) ≥ t.
        for bits in [1u8, 4, 8, 16] {
            let c = 1.0 / f64::from(1u32 << bits);
            for t in [0.1, 0.3, 0.5, 0.9] {
                let m = min_agreements(128, bits, th(t));
                for a in 0..=128usize {
                    let j = ((a as f64 / 128.0 - c) / (1.0 - c)).max(0.0);
                    assert_eq!(
                        a >= m,
                        j >= t - neardup_core::minhash::SIMILARITY_EPSILON,
                        "b {bits} t {t} a {a}"
                    );
                }
            }
        }
        assert_eq!(min_agreements(128, 8, th(0.3)), 39);
        assert_eq!(min_agreements(128, 4, th(0.3)), 44);
    }

    #[test]
    fn compact_query_shapes() {
        let meta = IndexMeta::default();
        let m = meta.minhash.as_ref().unwrap();
        let d = described(&meta);
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x0300_0001))
                .collect::<Vec<u32>>(),
        );
        let q = Query::new(Sketch::MinHash(sig.clone()), th(0.3)).unwrap();
        let b = query_body(
            &d,
            FilterMode::Server,
            &q,
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let terms = b["query"]["bool"]["filter"][0]["terms"]["minHashBands"]
            .as_array()
            .unwrap();
        assert_eq!(terms.len(), 42);
        assert_eq!(
            terms[3],
            json!(m.layout.band_term(sig.band_key(&m.params, 3)))
        );
        let script = &b["query"]["bool"]["filter"][1]["script"]["script"];
        assert_eq!(script["source"], SCRIPT_MINHASH_BITS);
        assert_eq!(script["params"]["b"], 8);
        assert_eq!(script["params"]["m"], 39);
        assert_eq!(
            script["params"]["q"][127],
            json!(127u32.wrapping_mul(0x0300_0001) & 255)
        );
        // A stored b-bit signature cannot make its band terms: a caller's is refused; by id,
        // the stored terms come with it (none during an upgrade from the full layout, when
        // the text makes the query).
        let reduced = Sketch::MinHash(sig.reduced(8));
        assert!(es_query(reduced.clone(), Tolerance::Similarity(th(0.3))).is_err());
        let terms = m.band_terms(&sig);
        let src = json!({
            "minHashSignature": m.layout.signature_base64(&sig),
            "minHashVersion": m.stored_version(),
            "minHashBands": terms,
        });
        assert_eq!(
            source_sketch(&src, &meta, Method::MinHash),
            Ok(Some(reduced.clone()))
        );
        let stored = StoredTerms {
            bands: terms.clone(),
            minima: None,
        };
        assert_eq!(stored_terms(&src, &meta, &reduced), Some(stored.clone()));
        let stored_q = Query::new(reduced.clone(), th(0.3)).unwrap();
        let b = query_body(
            &d,
            FilterMode::Server,
            &stored_q,
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            Some(&stored),
        );
        assert_eq!(
            b["query"]["bool"]["filter"][0]["terms"]["minHashBands"],
            json!(terms)
        );
        assert_eq!(
            b["query"]["bool"]["filter"][1]["script"]["script"]["params"]["q"][127],
            json!(127u32.wrapping_mul(0x0300_0001) & 255)
        );
        let stale =
            json!({ "minHashSignature": src["minHashSignature"], "minHashVersion": m.version });
        assert_eq!(source_sketch(&stale, &meta, Method::MinHash), Ok(None));
        let mut upgrading = meta.clone();
        upgrading.minhash.as_mut().unwrap().from_full = true;
        assert_eq!(source_sketch(&src, &upgrading, Method::MinHash), Ok(None));
        let both_terms = upgrading.minhash.as_ref().unwrap().query_terms(&sig);
        assert_eq!(both_terms.len(), 84);
        assert_eq!(both_terms[..42], terms[..]);
        assert_eq!(
            both_terms[42],
            crate::schema::band_term(sig.band_key(&m.params, 0))
        );
        // A candidate's stored signature reads reduced, and scores by the b-bit rule.
        let hit = json!({ "_id": "a", "_index": "i", "fields": { "minHashSignature": [m.layout.signature_base64(&sig)] } });
        let got = hit_sketch(&hit, &d, Method::MinHash).unwrap().unwrap();
        assert_eq!(got, Sketch::MinHash(sig.reduced(8)));
        assert_eq!(q.score(&got), Some(neardup_core::Score::Similarity(1.0)));
    }

    /// The terms a regroup's join asks of an article are those its search sends: the band
    /// terms, the minima terms and how many must agree, the SimHash block probes.
    #[test]
    fn a_join_asks_the_terms_the_query_sends() {
        use super::query::term_key;
        let key_of = |f: &str, v: &Value| {
            term_key(f, &v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        };
        // `{"term"|"terms": {field: value(s)}}` as term keys.
        let keys = |clause: &Value| -> Vec<u64> {
            let (_, inner) = clause.as_object().unwrap().iter().next().unwrap();
            let (f, v) = inner.as_object().unwrap().iter().next().unwrap();
            match v.as_array() {
                Some(vs) => vs.iter().map(|v| key_of(f, v)).collect(),
                None => vec![key_of(f, v)],
            }
        };
        // A `should` list of such clauses.
        let all_keys = |should: &Value| -> Vec<u64> {
            should.as_array().unwrap().iter().flat_map(keys).collect()
        };
        let meta = IndexMeta::default();
        let d = described(&meta);
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x0300_0001))
                .collect::<Vec<u32>>(),
        );
        let q = Query::new(Sketch::MinHash(sig.clone()), th(0.3)).unwrap();
        let options = MatchOptions::default();
        let t = candidate_terms(&meta, &q, None, &options);
        let b = query_body(&d, FilterMode::Server, &q, &options, None);
        let either = &b["query"]["bool"]["filter"][0]["bool"]["should"];
        assert_eq!(t.any, keys(&either[0]));
        let agree = &either[1]["bool"];
        assert_eq!(t.agree, all_keys(&agree["should"]));
        assert_eq!(json!(t.agreeing), agree["minimum_should_match"]);
        assert_eq!(t.held, None);
        // With common minima recorded: the others are asked (the keys the join leaves out of
        // its walk are the common ones).
        let c = meta.minhash.as_ref().unwrap().containment.as_ref().unwrap();
        let terms = c.minima_terms(&sig);
        let mut common = vec![terms[3].clone(), terms[40].clone(), "zzzz".to_owned()];
        common.sort_unstable();
        let list = crate::schema::CommonMinima {
            above: 1000,
            articles: 5000,
            terms: common,
        };
        let mut with_common = meta.clone();
        with_common.common_minima = Some(std::sync::Arc::new(list.clone()));
        let dc = described(&with_common);
        let tc = candidate_terms(&with_common, &q, None, &options);
        let b = query_body(&dc, FilterMode::Server, &q, &options, None);
        let either = &b["query"]["bool"]["filter"][0]["bool"]["should"];
        assert_eq!(tc.any, keys(&either[0]));
        let agree = &either[1]["bool"];
        assert_eq!(json!(tc.agreeing), agree["minimum_should_match"]);
        let common_keys = super::common_keys(&with_common, &list);
        let light: Vec<u64> = tc
            .agree
            .iter()
            .copied()
            .filter(|k| !common_keys.contains(k))
            .collect();
        assert_eq!(light.len(), tc.agree.len() - 2);
        assert_eq!(all_keys(&agree["should"]), light);
        // Every minimum common: the bands alone.
        let mut all = terms.clone();
        all.sort_unstable();
        with_common.common_minima = Some(std::sync::Arc::new(crate::schema::CommonMinima {
            terms: all,
            ..list
        }));
        let b = query_body(
            &described(&with_common),
            FilterMode::Server,
            &q,
            &options,
            None,
        );
        let either = b["query"]["bool"]["filter"][0]["bool"]["should"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(either.len(), 1);
        assert_eq!(tc.any, keys(&either[0]));
        // Near-duplicates only: the bands alone.
        let near = MatchOptions::NEAR_DUPLICATES_ONLY;
        let t = candidate_terms(&meta, &q, None, &near);
        let b = query_body(&d, FilterMode::Server, &q, &near, None);
        assert_eq!(t.any, keys(&b["query"]["bool"]["filter"][0]));
        assert!(t.agree.is_empty());
        // SimHash: whole blocks up to k = 3, their one-bit flips above; held, the blocks.
        for k in [3, 5] {
            let q = Query::new(Sketch::SimHash(SimHash(0x0123_4567_89ab_cdef)), k).unwrap();
            let t = candidate_terms(&meta, &q, None, &options);
            let b = query_body(&d, FilterMode::Server, &q, &options, None);
            let should = all_keys(&b["query"]["bool"]["filter"][0]["bool"]["should"]);
            assert_eq!(t.any, should, "k = {k}");
            let blocks: Vec<u64> = simhash_meta(&meta)
                .fields
                .blocks
                .iter()
                .zip(SimHash(0x0123_4567_89ab_cdef).blocks16())
                .map(|(f, b)| term_key(f, &b.to_string()))
                .collect();
            assert_eq!(t.held.clone().unwrap_or(t.any.clone()), blocks, "k = {k}");
        }
    }

    #[test]
    fn containment_query_shapes() {
        let meta = IndexMeta::default();
        let m = meta.minhash.as_ref().unwrap();
        let c = m.containment.as_ref().unwrap();
        let d = described(&meta);
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x0300_0001))
                .collect::<Vec<u32>>(),
        );
        let q = Query::new(Sketch::MinHash(sig.clone()), th(0.3)).unwrap();
        let near_only = query_body(
            &d,
            FilterMode::Server,
            &q,
            &MatchOptions::NEAR_DUPLICATES_ONLY,
            None,
        );
        let b = query_body(&d, FilterMode::Server, &q, &MatchOptions::default(), None);
        let filters = b["query"]["bool"]["filter"].as_array().unwrap();
        assert_eq!(filters.len(), 2);
        let either = &filters[0]["bool"];
        assert_eq!(either["minimum_should_match"], 1);
        // The bands branch holds today's band terms; one script judges both branches, near
        // duplicates as today's and partial copies by the rule's containment half.
        let near_filters = near_only["query"]["bool"]["filter"].as_array().unwrap();
        assert_eq!(either["should"][0], near_filters[0]);
        let script = &filters[1]["script"]["script"];
        assert_eq!(script["source"], SCRIPT_MINHASH_RELATE);
        let near_script = &near_filters[1]["script"]["script"];
        for p in ["f", "q", "b", "m"] {
            assert_eq!(script["params"][p], near_script["params"][p], "{p}");
        }
        assert_eq!(script["params"]["d"], "minHashDistinct");
        assert_eq!(
            script["params"]["s"],
            neardup_core::relation::DEFAULT_MIN_SHINGLES
        );
        let agree = &either["should"][1]["bool"];
        assert_eq!(agree["minimum_should_match"], 4);
        let terms = agree["should"].as_array().unwrap();
        assert_eq!(terms.len(), 64);
        // The client filter sends no script: the rule judges every candidate.
        let client = query_body(&d, FilterMode::Client, &q, &MatchOptions::default(), None);
        assert_eq!(
            client["query"]["bool"]["filter"].as_array().unwrap().len(),
            1
        );
        // An index of fields format 3 searches all 128 minima, 10 of them agreeing.
        let three = IndexMeta::default().with_containment_terms(ContainmentMeta::format_3());
        let b3 = query_body(
            &described(&three),
            FilterMode::Server,
            &q,
            &MatchOptions::default(),
            None,
        );
        let agree3 = &b3["query"]["bool"]["filter"][0]["bool"]["should"][1]["bool"];
        assert_eq!(agree3["minimum_should_match"], CANDIDATE_AGREEING_MINIMA);
        assert_eq!(agree3["should"].as_array().unwrap().len(), 128);
        assert_eq!(
            terms[5],
            json!({ "term": { "minHashMinima": c.minima_terms(&sig)[5] } })
        );
        assert_eq!(
            b["docvalue_fields"],
            json!(["minHashSignature", "minHashDistinct"])
        );
        // An index without the fields gets today's query whatever is asked.
        let two = IndexMeta::default().with_containment(false);
        let d2 = described(&two);
        assert_eq!(
            query_body(&d2, FilterMode::Server, &q, &MatchOptions::default(), None),
            query_body(
                &d2,
                FilterMode::Server,
                &q,
                &MatchOptions::NEAR_DUPLICATES_ONLY,
                None
            )
        );
        // By id: the stored minima's terms and distinct count come with the signature.
        let minima = c.minima_value(&sig);
        let src = json!({
            "minHashSignature": m.layout.signature_base64(&sig),
            "minHashVersion": m.stored_version(),
            "minHashBands": m.band_terms(&sig),
            "minHashMinima": minima,
            "minHashDistinct": 400,
        });
        let stored = source_sketch(&src, &meta, Method::MinHash)
            .unwrap()
            .unwrap();
        let Sketch::MinHash(s) = &stored else {
            panic!("{stored:?}")
        };
        assert_eq!(s.distinct(), Some(400));
        let terms = stored_terms(&src, &meta, &stored).unwrap();
        assert_eq!(terms.minima, Some(c.minima_terms(&sig)));
        let hit = json!({ "_id": "a", "_index": "i", "fields": {
            "minHashSignature": [m.layout.signature_base64(&sig)], "minHashDistinct": [90] } });
        let Some(Sketch::MinHash(h)) = hit_sketch(&hit, &d, Method::MinHash).unwrap() else {
            panic!()
        };
        assert_eq!(h.distinct(), Some(90));
    }

    proptest! {
        /// The probe set is complete: any two fingerprints within distance 7 have some block
        /// pair where one block is among the other's 17 probes (and within 3, an equal block).
        #[test]
        fn block_probes_find_every_pair_within_seven(a in any::<u64>(), bits in proptest::collection::btree_set(0u32..64, 0..=7)) {
            let b = bits.iter().fold(a, |v, i| v ^ (1u64 << i));
            let (qa, qb) = (SimHash(a), SimHash(b));
            let k = qa.distance(qb);
            prop_assert!(k <= FLIPPED_BLOCK_K);
            let found = qa
                .blocks16()
                .iter()
                .zip(qb.blocks16())
                .any(|(&x, y)| block_probes(x, FLIPPED_BLOCK_K).contains(&y));
            prop_assert!(found);
            if k <= WHOLE_BLOCK_K {
                let whole = qa
                    .blocks16()
                    .iter()
                    .zip(qb.blocks16())
                    .any(|(&x, y)| block_probes(x, k) == vec![y]);
                prop_assert!(whole);
            }
        }
    }

    #[test]
    fn too_large_k_and_bad_thresholds_are_refused() {
        let e = check_tolerance(Tolerance::Distance(8))
            .unwrap_err()
            .to_string();
        assert!(e.contains("k ≤ 7"), "{e}");
        assert!(check_tolerance(Tolerance::Distance(7)).is_ok());
        assert!(Tolerance::similarity(0.0).is_err());
        assert!(Tolerance::similarity(1.5).is_err());
        assert!(check_tolerance(Tolerance::similarity(1.0).unwrap()).is_ok());
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
    fn descriptions_from_mappings() {
        let meta = both();
        let d = described(&meta);
        assert_eq!(d.meta, meta);
        assert!(d.blocks_doc_values && d.long_doc_values && d.signature_doc_values);
        assert_eq!(
            d.fingerprinter.version(),
            meta.version(Method::SimHash).unwrap()
        );

        // A given fingerprinter of another profile is refused, naming both versions.
        let other = Fingerprinter::for_profile(Profile::Seed000);
        let e = describe_mappings(
            "idx",
            &mapping_of(&meta, true),
            &FieldNames::default(),
            Some(&other),
        )
        .unwrap_err();
        assert!(matches!(e, EsError::VersionMismatch { .. }), "{e}");

        // The Java layout: no _meta, blocks without doc values, no long: seed000.
        let short = json!({"type": "short", "doc_values": false});
        let mut java = Map::new();
        java.insert(
            "old".into(),
            json!({ "mappings": { "properties": {
                "simHashA": short, "simHashB": short, "simHashC": short, "simHashD": short } } }),
        );
        let d = describe_mappings("old", &java, &FieldNames::default(), None).unwrap();
        assert!(!d.blocks_doc_values && !d.long_doc_values);
        assert_eq!(d.meta.default_method(), Method::SimHash);
        assert_eq!(
            d.fingerprinter.version(),
            Fingerprinter::for_profile(Profile::Seed000).version()
        );
        let e = check_method(&IndexList::from("old"), &d.meta, Method::MinHash).unwrap_err();
        assert!(
            matches!(
                e,
                EsError::MethodNotHeld {
                    held: Method::SimHash,
                    asked: Method::MinHash,
                    ..
                }
            ),
            "{e}"
        );

        let mut bare = Map::new();
        bare.insert("bare".into(), json!({ "mappings": { "properties": {} } }));
        let e = describe_mappings("bare", &bare, &FieldNames::default(), None).unwrap_err();
        assert!(e.to_string().contains("es-init"), "{e}");

        let mut long_blocks = java.clone();
        long_blocks["old"]["mappings"]["properties"]["simHashA"] = json!({"type": "long"});
        let e = describe_mappings("old", &long_blocks, &FieldNames::default(), None).unwrap_err();
        assert!(matches!(e, EsError::MappingConflict { .. }), "{e}");
    }
}

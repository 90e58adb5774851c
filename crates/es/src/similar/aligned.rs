//! Aligned lookups (issue 43): MinHash finds, alignment decides, on Elasticsearch. The
//! candidates of a document are those a MinHash search with the containment step returns at
//! [`CANDIDATE_THRESHOLD`]; the texts of the document and of each candidate are read from
//! `_source` ([`SimilarOptions::text_fields`](super::SimilarOptions::text_fields)) in the
//! requests that read the document's sketch and the candidates (two requests for a lookup by
//! id, one for a text; with the client filter every candidate's texts cross), prepared
//! as the indices' fingerprints prepare them (their folding and boilerplate), aligned
//! ([`neardup_core::align`]) and related by an [`AlignRule`], not counting the formula text
//! the indices record ([`IndexMeta::formula`](crate::IndexMeta::formula)). The same rule and
//! the same candidates as `neardup dedupe --align`. Dedupe on insert confirms its refusals
//! the same way ([`Aligner`], [`crate::insert_unless_near`] with [`super::Near::aligned`]).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{IndexList, Near, Similar, Similarity, Sources, StoredQuery};
use crate::{mget, Body, EsError};
use neardup_core::align::{align_letters, AlignParams, Formula, Letters, Mark};
use neardup_core::allpairs::aligned::CANDIDATE_THRESHOLD;
use neardup_core::input::field_texts;
use neardup_core::method::{Match, Shared};
use neardup_core::minhash::Threshold;
use neardup_core::relation::{AlignRule, MatchOptions, TextMatch};
use neardup_core::Fingerprinter;

/// Relates texts of the indices by a rule on their alignment: their text preparation, their
/// formula, the text fields read.
#[derive(Debug)]
pub(crate) struct Aligner {
    fingerprinter: Fingerprinter,
    formula: Arc<Formula>,
    rule: AlignRule,
    fields: Vec<String>,
}

/// A text ready to be judged against others: its letters, and which of them the indices'
/// formula covers (marked once, however many texts it is judged against).
pub(crate) struct Marked {
    letters: Letters,
    marks: Vec<Mark>,
}

impl Aligner {
    /// A document's `_source` (or a new article) ready to be judged: its text fields,
    /// prepared as the indices prepare them, and marked. A text field holding a number or an
    /// object is [`EsError::BadText`].
    pub(crate) fn text(&self, source: &Value) -> Result<Marked, EsError> {
        Ok(self.texts(&field_texts(source, &self.fields)?))
    }

    /// Text fields already read, in the order of the indices' text fields, ready to be
    /// judged.
    pub(crate) fn texts<S: AsRef<str>>(&self, texts: &[S]) -> Marked {
        let letters = Letters::prepared(texts, self.fingerprinter.segmenter());
        Marked {
            marks: self.formula.marks(&letters),
            letters,
        }
    }

    /// How `other` relates to `query` by the rule, and what they share; `None` when
    /// unrelated.
    pub(crate) fn relate(&self, query: &Marked, other: &Marked) -> Option<(TextMatch, Shared)> {
        let al = align_letters(&query.letters, &other.letters, &AlignParams::DEFAULT);
        let t = self.rule.relate_marked(&query.marks, &other.marks, &al)?;
        Some((t, Shared::new(&t, &al.passages)))
    }

    /// `m` judged by the rule against `query`: its relation and what it shares replaced by
    /// the alignment's; `None` when the rule relates them not.
    pub(crate) fn judge(&self, query: &Marked, m: Match, other: &Marked) -> Option<Match> {
        Some(aligned_match(m, self.relate(query, other)?))
    }

    /// The id of the formula it leaves out, if the indices record one.
    pub(crate) fn formula_id(&self) -> Option<String> {
        (!self.formula.is_empty()).then(|| self.formula.id())
    }
}

impl Similar {
    /// The [`Aligner`] of `indices` with `rule`.
    pub(crate) async fn aligner(
        &self,
        indices: &IndexList,
        rule: AlignRule,
    ) -> Result<Aligner, EsError> {
        let d = self.describe(indices).await?;
        Ok(Aligner {
            fingerprinter: d.fingerprinter.clone(),
            formula: d.meta.formula.clone().unwrap_or_default(),
            rule,
            fields: self.options.text_fields.clone(),
        })
    }

    /// The text fields of the stored documents `docs` name (index and id: their `_source`),
    /// read in one realtime multi-get (which sees writes no refresh has made searchable
    /// yet), as dedupe on insert and a regroup's join need them; a document no longer there
    /// is left out.
    pub(crate) async fn texts_of(
        &self,
        aligner: &Aligner,
        docs: &[(Option<&str>, &str)],
    ) -> Result<Sources, EsError> {
        let mut out = Sources::new();
        if docs.is_empty() {
            return Ok(out);
        }
        let docs: Vec<Value> = docs
            .iter()
            .map(|(index, id)| json!({ "_index": index, "_id": id }))
            .collect();
        let r = mget(
            self.scanner.client(),
            self.scanner.retry(),
            &format!("read the texts of {} articles", docs.len()),
            "/_mget",
            &[("_source_includes", &aligner.fields.join(","))],
            Some(&Body::Json(json!({ "docs": docs }))),
        )
        .await?;
        for (index, id, doc) in super::found_docs(&r) {
            out.insert((index.to_owned(), id.to_owned()), doc["_source"].clone());
        }
        Ok(out)
    }

    /// What the document `id` shares with the documents of `indices` by aligned text: each
    /// match of [`Similar::by_id`] at [`CANDIDATE_THRESHOLD`] (partial copies included)
    /// that `rule` relates, with the alignment's relation (read from the query: "the query
    /// contains the match") and what the two share ([`Shared`]: how much of each is copied,
    /// the passages as spans of both). A copy is `near_duplicate`, `contains` or
    /// `contained_in`; a passage reused without either being a copy is `shares_passage`.
    /// Formula text counts only where the indices record one (`es-init --formula`); the
    /// answer names it ([`Similarity::formula`]). A candidate without text fields is left out.
    pub async fn aligned_by_id(
        &self,
        indices: impl Into<IndexList>,
        id: &str,
        rule: &AlignRule,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        let aligner = self.aligner(&indices, *rule).await?;
        // The texts come with the sketch and with each candidate: two requests in all.
        let (mut s, query, sources) = self
            .by_id_keeping(indices, id, candidates(), &aligner.fields)
            .await?;
        if s.matches.is_empty() {
            // Nothing to judge: the query's text need not be prepared.
            s.formula = aligner.formula_id();
            return Ok(s);
        }
        let q = aligner.text(&query)?;
        self.judged(s, Arc::new(aligner), q, sources).await
    }

    /// [`Similar::aligned_by_id`] for an article (a JSON object) that need not be in the
    /// index: its text fields ([`SimilarOptions::text_fields`](super::SimilarOptions::text_fields))
    /// are fingerprinted, read and prepared as the indices' documents are. Stored, it finds
    /// itself too. A text field holding a number or an object is [`EsError::BadText`].
    pub async fn aligned_by_article(
        &self,
        indices: impl Into<IndexList>,
        article: &Value,
        rule: &AlignRule,
    ) -> Result<Similarity, EsError> {
        let texts = field_texts(article, &self.options.text_fields)?;
        self.aligned_by_texts(indices, &texts, rule).await
    }

    /// [`Similar::aligned_by_article`] for a text (plain text or HTML), as one field.
    pub async fn aligned_by_text(
        &self,
        indices: impl Into<IndexList>,
        text: &str,
        rule: &AlignRule,
    ) -> Result<Similarity, EsError> {
        self.aligned_by_texts(indices, &[text], rule).await
    }

    /// [`Similar::aligned_by_article`] for an article's text fields, already read (in the
    /// order of [`SimilarOptions::text_fields`](super::SimilarOptions::text_fields)): spans of
    /// the query name these texts.
    pub async fn aligned_by_texts<S: AsRef<str>>(
        &self,
        indices: impl Into<IndexList>,
        texts: &[S],
        rule: &AlignRule,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        let aligner = self.aligner(&indices, *rule).await?;
        let q = aligner.texts(texts);
        let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        let (s, sources) = self
            .by_texts(indices, &texts, candidates(), &aligner.fields)
            .await?;
        self.judged(s, Arc::new(aligner), q, sources).await
    }

    /// [`Similar::aligned_by_id`] for a walked document: its stored sketch
    /// ([`Similar::stored_sketch`], as a regroup reads it) and its `_source` holding its text
    /// fields; every document the search finds is judged, itself included (the caller leaves
    /// it out). Reads no document again: the candidates' texts come with the search.
    pub(crate) async fn aligned_by_stored(
        &self,
        indices: impl Into<IndexList>,
        stored: StoredQuery,
        source: &Value,
        aligner: &Arc<Aligner>,
    ) -> Result<Similarity, EsError> {
        let indices = indices.into();
        let (s, sources) = self
            .by_stored_keeping(indices, stored, candidates(), &aligner.fields)
            .await?;
        if s.matches.is_empty() {
            return Ok(s);
        }
        let q = aligner.text(source)?;
        self.judged(s, Arc::clone(aligner), q, sources).await
    }

    /// `s`'s candidates judged against the query's text `q` by `aligner`, each prepared
    /// from its text fields as the search brought them back (`sources`): those the rule
    /// relates, with the alignment's relation and what they share.
    async fn judged(
        &self,
        mut s: Similarity,
        aligner: Arc<Aligner>,
        q: Marked,
        sources: Sources,
    ) -> Result<Similarity, EsError> {
        s.formula = aligner.formula_id();
        // Preparing and aligning is CPU work (about a millisecond a pair): on the blocking
        // pool, so that a service's other requests go on meanwhile.
        let matches = std::mem::take(&mut s.matches);
        s.matches = tokio::task::spawn_blocking(move || {
            let mut judged = Vec::new();
            for m in matches {
                let Some(source) = m
                    .index
                    .clone()
                    .and_then(|i| sources.get(&(i, m.id.clone())))
                else {
                    continue;
                };
                let other = aligner.text(source)?;
                judged.extend(aligner.judge(&q, m, &other));
            }
            Ok::<_, EsError>(judged)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Ok(s)
    }
}

/// The texts a batch of new articles is judged by, each prepared once however many pairs it
/// is in: the batch's own (by position; `None` for an article not judged) and the stored
/// documents' it is near (by index and id, from the text fields a search or a multi-get
/// brought back). What dedupe on insert and groups linked by texts judge a batch with. A
/// stored text field that is not text is not kept: it fails again each time it is met.
pub(crate) struct BatchTexts<'a> {
    aligner: &'a Aligner,
    batch: Vec<Option<Marked>>,
    sources: &'a Sources,
    stored: HashMap<&'a (String, String), Marked>,
}

impl<'a> BatchTexts<'a> {
    pub(crate) fn new(
        aligner: &'a Aligner,
        batch: Vec<Option<Marked>>,
        sources: &'a Sources,
    ) -> Self {
        BatchTexts {
            aligner,
            batch,
            sources,
            stored: HashMap::new(),
        }
    }

    /// The batch's article `i`, prepared; `None` when it is not judged.
    pub(crate) fn article(&self, i: usize) -> Option<&Marked> {
        self.batch.get(i)?.as_ref()
    }

    /// How the stored document `key` relates to the batch's article `i` by the rule, and
    /// what they share: `Ok(None)` when the rule relates them not, or when either has no
    /// text to judge. A stored text field holding a number or an object is
    /// [`EsError::BadText`].
    pub(crate) fn relate_stored(
        &mut self,
        i: usize,
        key: &(String, String),
    ) -> Result<Option<(TextMatch, Shared)>, EsError> {
        let Some(q) = self.batch.get(i).and_then(Option::as_ref) else {
            return Ok(None);
        };
        let Some((key, source)) = self.sources.get_key_value(key) else {
            return Ok(None);
        };
        let other = match self.stored.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(self.aligner.text(source)?),
        };
        Ok(self.aligner.relate(q, other))
    }

    /// How the batch's articles `i` and `j` relate by the rule (read from `i`), and what they
    /// share; `None` when unrelated or either is not judged.
    pub(crate) fn relate_in_batch(&self, i: usize, j: usize) -> Option<(TextMatch, Shared)> {
        self.aligner.relate(self.article(i)?, self.article(j)?)
    }
}

/// `m` as the rule on the aligned texts answers it (`relate`'s answer): its relation, and what
/// the two share in place of the estimated containment.
pub(crate) fn aligned_match(mut m: Match, (t, shared): (TextMatch, Shared)) -> Match {
    m.relation = Some(t.relation);
    m.containment = None;
    m.shared = Some(shared);
    m
}

/// What an aligned lookup asks MinHash for: candidates down to [`CANDIDATE_THRESHOLD`],
/// partial copies included.
pub(crate) fn candidates() -> Near {
    Near::new(
        Threshold::new(CANDIDATE_THRESHOLD).expect("the candidate threshold is in range"),
        MatchOptions::default(),
    )
}

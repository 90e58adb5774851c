//! Aligned lookups (issue 43): MinHash finds, alignment decides, on Elasticsearch. The
//! candidates of a document are those a MinHash search with the containment step returns at
//! [`CANDIDATE_THRESHOLD`]; the texts of the document and of each candidate are read from
//! `_source` ([`SimilarOptions::text_fields`](super::SimilarOptions::text_fields)), prepared
//! as the indices' fingerprints prepare them (their folding and boilerplate), aligned
//! ([`neardup_core::align`]) and related by an [`AlignRule`], not counting the formula text
//! the indices record ([`IndexMeta::formula`](crate::IndexMeta::formula)). The same rule and
//! the same candidates as `neardup dedupe --align`.

use elasticsearch::http::Method as HttpMethod;
use serde_json::{json, Value};

use super::{IndexList, Near, Similar, Similarity};
use crate::{request, Body, EsError};
use neardup_core::align::{align_letters, AlignParams, Formula, Letters};
use neardup_core::allpairs::aligned::CANDIDATE_THRESHOLD;
use neardup_core::input::field_texts;
use neardup_core::method::Shared;
use neardup_core::minhash::Threshold;
use neardup_core::relation::{AlignRule, MatchOptions};

impl Similar {
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
        let near = Near::new(
            Threshold::new(CANDIDATE_THRESHOLD).expect("the candidate threshold is in range"),
            MatchOptions::default(),
        );
        let mut s = self.by_id(indices.clone(), id, near).await?;
        let d = self.describe(&indices).await?;
        s.formula = d.meta.formula.as_ref().map(|f| f.id());
        if s.matches.is_empty() {
            return Ok(s);
        }
        let fields: Vec<&str> = self
            .options
            .text_fields
            .iter()
            .map(String::as_str)
            .collect();
        let query = self.find_document(&indices, id, &fields).await?;
        let segmenter = d.fingerprinter.segmenter();
        let letters = |source: &Value| -> Result<Letters, EsError> {
            Ok(Letters::prepared(
                &field_texts(source, &self.options.text_fields)?,
                segmenter,
            ))
        };
        let q = letters(&query["_source"])?;
        let docs: Vec<Value> = s
            .matches
            .iter()
            .map(|m| json!({ "_index": m.index, "_id": m.id }))
            .collect();
        let r = request(
            self.scanner.client(),
            self.scanner.retry(),
            &format!(
                "index `{indices}`: read the texts of {} candidates",
                docs.len()
            ),
            HttpMethod::Post,
            "/_mget",
            &[("_source_includes", &fields.join(","))],
            Some(&Body::Json(json!({ "docs": docs }))),
        )
        .await?;
        let none = Formula::default();
        let formula = d.meta.formula.as_deref().unwrap_or(&none);
        let found = r["docs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let mut kept = Vec::with_capacity(s.matches.len());
        for (mut m, doc) in std::mem::take(&mut s.matches).into_iter().zip(found) {
            if doc["found"] != true {
                continue;
            }
            let other = letters(&doc["_source"])?;
            let al = align_letters(&q, &other, &AlignParams::DEFAULT);
            let Some(t) = rule.relate(&q, &other, &al, formula) else {
                continue;
            };
            m.relation = Some(t.relation);
            m.containment = None;
            m.shared = Some(Shared::new(&t, &al.passages));
            kept.push(m);
        }
        s.matches = kept;
        Ok(s)
    }
}

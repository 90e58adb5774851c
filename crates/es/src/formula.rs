//! The formula text of an index (issue 43), learned from the index itself and kept current
//! as it grows, recorded in `_meta.neardup.formula`: what aligned lookups
//! ([`crate::Similar::aligned_by_id`]) and dedupe on insert with the texts deciding do not
//! count as copied. `neardup formula learn --index` learns it on demand ([`learn_formula`]);
//! the worker keeps it current without a step to remember ([`FormulaUpkeep`],
//! [`crate::Worker::keep_formula`]). A formula decides no fingerprint, so replacing it needs
//! no back-fill.

use std::sync::Arc;
use std::time::Duration;

use elasticsearch::Elasticsearch;
use neardup_core::align::Formula;
use neardup_core::Fingerprinter;

use crate::{init_index, read_meta, EsError, FieldNames, RetryPolicy, Scanner};

/// Documents read to learn a formula, by default: the first this many of the index, in its
/// own order (about 200 MB of texts held while learning).
pub const FORMULA_SAMPLE: u64 = 50_000;

/// When the formula an index records is learned again from the index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FormulaUpkeep {
    /// Documents read to learn it.
    pub sample: u64,
    /// Learned again once the documents it could read exceed the texts the recorded one was
    /// learned from by this share (0.1: ten per cent).
    pub growth: f64,
    /// Fewest documents an index holds before a formula is learned from it: formula is text
    /// found in at least [`neardup_core::allpairs::aligned::FORMULA_GROUPS`] unrelated
    /// documents, which a small index says little about.
    pub min_docs: u64,
    /// How often the worker looks whether one is due (a count and a mapping read).
    pub every: Duration,
}

impl Default for FormulaUpkeep {
    fn default() -> Self {
        FormulaUpkeep {
            sample: FORMULA_SAMPLE,
            growth: 0.1,
            min_docs: 1_000,
            every: Duration::from_secs(600),
        }
    }
}

impl FormulaUpkeep {
    /// Whether a formula is to be learned from an index of `docs` documents that records
    /// `recorded`: none recorded, or one learned from a tenth (`growth`) fewer texts than the
    /// sample would read now. A formula learned elsewhere from more texts (`es-init
    /// --formula`) stays until the index outgrows it.
    pub fn due(&self, recorded: Option<&Formula>, docs: u64) -> bool {
        let readable = docs.min(self.sample);
        if readable < self.min_docs {
            return false;
        }
        match recorded {
            None => true,
            Some(f) => f.texts() as f64 * (1.0 + self.growth) <= readable as f64,
        }
    }
}

/// The formula of `index`, learned from the text `fields` of up to `sample` of its documents
/// prepared by `fp` (the index's fingerprinter: its folding and boilerplate): what
/// `neardup formula learn --index` writes, the same as learning from a file of those texts.
/// The counting runs on the blocking pool.
pub async fn learn_formula(
    scanner: &Scanner,
    index: &str,
    fields: &[String],
    sample: u64,
    fp: &Fingerprinter,
) -> Result<LearnedFormula, EsError> {
    let mut texts: Vec<Vec<String>> = Vec::new();
    scanner
        .each_text(index, fields, |t| {
            texts.push(t.into_iter().map(str::to_owned).collect());
            (texts.len() as u64) < sample
        })
        .await?;
    let fp = fp.clone();
    let read = texts.len();
    let formula = tokio::task::spawn_blocking(move || {
        neardup_core::pipeline::learn_formula_of_texts(&texts, &fp)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    Ok(LearnedFormula { formula, read })
}

/// A formula learned from an index, and how many documents were read.
#[derive(Clone, Debug)]
pub struct LearnedFormula {
    pub formula: Formula,
    /// Documents read (those whose text fields hold text).
    pub read: usize,
}

/// Records `formula` in `_meta.neardup.formula` of every index `index` names, what they
/// record otherwise unchanged (as `es-init --formula`).
pub async fn record_formula(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    formula: Formula,
) -> Result<(), EsError> {
    let mut wanted = read_meta(client, retry, index, &FieldNames::default()).await?;
    wanted.formula = Some(Arc::new(formula));
    init_index(client, retry, index, &wanted).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::align::{AlignParams, Formula};

    fn learned_from(texts: usize) -> Formula {
        let letters: Vec<_> = (0..texts)
            .map(|i| neardup_core::align::Letters::new(&[format!("第{i}篇")]))
            .collect();
        Formula::learn(&letters, [], 10, AlignParams::DEFAULT.anchor)
    }

    #[test]
    fn a_formula_is_due_when_none_is_recorded_or_the_index_outgrew_it() {
        let u = FormulaUpkeep::default();
        // Too small an index: none.
        assert!(!u.due(None, 999));
        assert!(u.due(None, 1_000));
        // Learned from 2,000: again at 2,200, not before.
        let f = learned_from(2_000);
        assert!(!u.due(Some(&f), 2_199));
        assert!(u.due(Some(&f), 2_200));
        // Learned from a whole sample: never again, however large the index.
        let f = learned_from(50_000);
        assert!(!u.due(Some(&f), 10_000_000));
        // Learned elsewhere from more texts than the index holds: kept.
        assert!(!u.due(Some(&learned_from(3_000)), 2_500));
    }
}

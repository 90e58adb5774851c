//! The alignment detector (issue 43): MinHash finds, alignment decides. A pair is compared
//! when today's candidate step reaches it ([`super::minhash::candidates`]: a shared band, or
//! enough agreeing minima); the two texts are then aligned ([`neardup_core::align`]) and
//! related by [`AlignRule::DEFAULT`], with the formula windows ([`Formula`]) learned from the
//! texts measured. It has one operating point, [`POINT`]: a copy claim is `near_duplicate`,
//! `contains` or `contained_in` (a partial reprint counts with its direction, as for
//! MinHash), and a `shares_passage` report finds a pair of that relation.
//!
//! Formula windows are those found in at least [`FORMULA_GROUPS`] groups of the texts
//! measured, a group being texts MinHash relates at its default threshold whose smaller one
//! is at least [`GROUP_SHARE`] in runs (copies of one story count once): the texts play the
//! part of an index that learns from what it holds.

use rayon::prelude::*;

use super::minhash::{self, candidates};
use super::{unique_texts, LabelledPair, Scored, CONTAINED_IN};
use neardup_core::align::{align_letters, AlignParams, Formula, Letters};
use neardup_core::allpairs::minhash::all_pairs_related;
use neardup_core::minhash::{Signature, Threshold};
use neardup_core::relation::{AlignRule, MatchOptions, MatchRule, Relation, TextMatch};
use neardup_core::Fingerprinter;

/// The one operating point.
pub const POINT: &str = "aligned";

/// Groups a window must be found in to be formula.
pub const FORMULA_GROUPS: usize = 10;

/// Share of the smaller text in runs that joins two texts into one group.
pub const GROUP_SHARE: f64 = 0.8;

/// The detector's name: `aligned` and the MinHash candidate step's.
pub fn name(fp: &Fingerprinter, options: &MatchOptions) -> String {
    format!("aligned ({})", minhash::name(fp, options))
}

/// The texts prepared once: signatures, letters, and the formula windows they hold.
pub(crate) struct Prepared {
    pub(crate) sigs: Vec<Option<Signature>>,
    letters: Vec<Letters>,
    formula: Formula,
}

pub(crate) fn prepare(fp: &Fingerprinter, texts: &[Vec<String>]) -> Prepared {
    let sigs = minhash::signatures(fp, texts);
    let letters: Vec<Letters> = texts
        .par_iter()
        .map(|t| Letters::prepared(t, fp.segmenter()))
        .collect();
    let (docs, present): (Vec<usize>, Vec<Signature>) = sigs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.clone()?)))
        .unzip();
    let rule = MatchRule::new(Threshold::default(), MatchOptions::default());
    let related = all_pairs_related(&present, &fp.config().minhash, &rule);
    let params = AlignParams::DEFAULT;
    let pairs: Vec<(u32, u32, f64)> = related.pairs().collect();
    let joined: Vec<(usize, usize)> = pairs
        .par_iter()
        .filter_map(|&(a, b, _)| {
            let (a, b) = (docs[a as usize], docs[b as usize]);
            let al = align_letters(&letters[a], &letters[b], &params);
            let small = if al.a_len <= al.b_len {
                al.a_matched_share()
            } else {
                al.b_matched_share()
            };
            (small >= GROUP_SHARE).then_some((a, b))
        })
        .collect();
    let formula = Formula::learn(&letters, joined, FORMULA_GROUPS, params.anchor);
    Prepared {
        sigs,
        letters,
        formula,
    }
}

impl Prepared {
    /// How text `b` relates to text `a` by the rule, `None` when unrelated.
    pub(crate) fn relate(&self, a: usize, b: usize) -> Option<TextMatch> {
        let al = align_letters(&self.letters[a], &self.letters[b], &AlignParams::DEFAULT);
        AlignRule::DEFAULT.relate(&self.letters[a], &self.letters[b], &al, &self.formula)
    }
}

/// Scores labelled pairs (see the module docs).
pub fn score(
    fp: &Fingerprinter,
    options: &MatchOptions,
    fields: &[String],
    pairs: &[LabelledPair],
) -> Scored {
    let params = fp.config().minhash;
    let (texts, refs) = unique_texts(pairs, fields);
    let prepared = prepare(fp, &texts);
    // Outer `None`: a text too short; inner: the relation, when a candidate and related.
    let judged: Vec<Option<Option<Relation>>> = refs
        .par_iter()
        .map(|&[a, b]| {
            let (sa, sb) = (prepared.sigs[a].as_ref()?, prepared.sigs[b].as_ref()?);
            Some(
                candidates(sa, sb, &params, options)
                    .then(|| prepared.relate(a, b).map(|m| m.relation))
                    .flatten(),
            )
        })
        .collect();
    let found: Vec<bool> = judged
        .iter()
        .zip(pairs)
        .map(|(r, p)| {
            let r = r.flatten();
            if p.relation() == CONTAINED_IN {
                r == Some(Relation::Contains)
            } else {
                r.is_some_and(Relation::is_copy)
            }
        })
        .collect();
    let passages: Vec<bool> = judged
        .iter()
        .map(|r| r.flatten() == Some(Relation::SharesPassage))
        .collect();
    Scored {
        name: name(fp, options),
        points: vec![(POINT.to_owned(), found)],
        passages: vec![passages],
        too_short: judged.iter().map(Option::is_none).collect(),
        texts_too_short: (
            prepared.sigs.iter().filter(|s| s.is_none()).count(),
            prepared.sigs.len(),
        ),
        distances: vec![None; pairs.len()],
    }
}

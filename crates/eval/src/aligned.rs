//! The alignment detector (issue 43): MinHash and the anchors find, alignment decides. A
//! pair is compared when today's candidate step reaches it ([`super::minhash::candidates`]:
//! a shared band, or enough agreeing minima) or its texts share enough anchors among the
//! texts measured ([`aligned::AnchorIndex`], as `dedupe --align` finds them among its
//! input's); the two texts are then aligned ([`neardup_core::align`]) and
//! related by [`AlignRule::DEFAULT`], with the formula windows ([`Formula`]) learned from the
//! texts measured. It has one operating point, [`POINT`]: a copy claim is `near_duplicate`,
//! `contains` or `contained_in` (a partial reprint counts with its direction, as for
//! MinHash), and a `shares_passage` report finds a pair of that relation.
//!
//! Formula windows and groups are learned as `neardup formula learn` learns them
//! ([`neardup_core::allpairs::aligned`]): the texts measured play the part of an input.

use rayon::prelude::*;

use super::minhash::{self, candidates};
use super::{unique_texts, LabelledPair, Scored, CONTAINED_IN};
use neardup_core::align::{align_letters, AlignParams, Alignment, Formula, Letters};
use neardup_core::allpairs::aligned;
use neardup_core::minhash::Signature;
use neardup_core::relation::{AlignRule, MatchOptions, Relation, TextMatch};
use neardup_core::Fingerprinter;

/// Whether `relation`, the alignment's answer for the pair `p` read from `a` (`None`: not
/// related), claims it as the copy it is: a partial reprint ([`CONTAINED_IN`]: `b` a part of
/// `a`) as `contains`, any other pair as any copy. For a pair that is no copy, a wrong claim.
pub fn claimed_as(p: &LabelledPair, relation: Option<Relation>) -> bool {
    if p.relation() == CONTAINED_IN {
        relation == Some(Relation::Contains)
    } else {
        relation.is_some_and(Relation::is_copy)
    }
}

/// The one operating point.
pub const POINT: &str = "aligned";

/// The detector's name: `aligned` and the MinHash candidate step's.
pub fn name(fp: &Fingerprinter, options: &MatchOptions) -> String {
    format!("aligned ({})", minhash::name(fp, options))
}

/// The texts prepared once: signatures, letters, the candidate pairs aligned, and the
/// formula windows they hold.
pub(crate) struct Prepared {
    pub(crate) sigs: Vec<Option<Signature>>,
    pub(crate) letters: Vec<Letters>,
    pub(crate) formula: Formula,
    /// Every candidate pair of MinHash `(a, b, similarity, alignment)`, as text indices.
    pub(crate) aligned: Vec<(u32, u32, f64, Alignment)>,
    /// The pairs `(a, b, similarity)`, `a < b`, only the anchors find, not aligned yet.
    pub(crate) by_anchors: Vec<(u32, u32, f64)>,
}

pub(crate) fn prepare(fp: &Fingerprinter, texts: &[Vec<String>]) -> Prepared {
    let sigs = minhash::signatures(fp, texts);
    let letters: Vec<Letters> = texts
        .par_iter()
        .map(|t| Letters::prepared(t, fp.segmenter()))
        .collect();
    let (docs, present): (Vec<u32>, Vec<Signature>) = sigs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i as u32, s.clone()?)))
        .unzip();
    let found: Vec<(u32, u32, f64)> = aligned::candidates(&present, &fp.config().minhash)
        .pairs()
        .map(|(a, b, s)| (docs[a as usize], docs[b as usize], s))
        .collect();
    let aligned = aligned::align_pairs(&found, |i| letters.get(i as usize));
    // The formula `formula learn` would write for these texts, from the candidates already
    // aligned: every text counted, the joined ones once per group.
    let formula = Formula::learn(
        &letters,
        aligned::joined_pairs(&aligned),
        aligned::FORMULA_GROUPS,
        AlignParams::DEFAULT.anchor,
    )
    .folded(fp.config().fold);
    let anchors: Vec<Vec<u32>> = letters.par_iter().map(aligned::anchors).collect();
    let mut index = aligned::AnchorIndex::default();
    for &i in &docs {
        index.add(i, &anchors[i as usize]);
    }
    let by_anchors = aligned::anchor_candidates(index, &found, |a, b| {
        let (sa, sb) = (sigs[a as usize].as_ref()?, sigs[b as usize].as_ref()?);
        Some(sa.similarity(sb))
    });
    Prepared {
        sigs,
        letters,
        formula,
        aligned,
        by_anchors,
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
    let by_anchors: std::collections::HashSet<(usize, usize)> = prepared
        .by_anchors
        .iter()
        .map(|&(a, b, _)| (a as usize, b as usize))
        .collect();
    // Outer `None`: a text too short; inner: the relation, when a candidate and related.
    let judged: Vec<Option<Option<Relation>>> = refs
        .par_iter()
        .map(|&[a, b]| {
            let (sa, sb) = (prepared.sigs[a].as_ref()?, prepared.sigs[b].as_ref()?);
            Some(
                (candidates(sa, sb, &params, options)
                    || by_anchors.contains(&(a.min(b), a.max(b))))
                .then(|| prepared.relate(a, b).map(|m| m.relation))
                .flatten(),
            )
        })
        .collect();
    let found: Vec<bool> = judged
        .iter()
        .zip(pairs)
        .map(|(r, p)| claimed_as(p, r.flatten()))
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

//! Alignment decides what MinHash finds (issue 43): every candidate pair of a set of texts,
//! aligned ([`crate::align`]) and related by [`AlignRule`], with the passages they share.
//!
//! 1. **Candidates**: the pairs MinHash relates at [`CANDIDATE_THRESHOLD`] with the
//!    containment candidate step ([`candidates`]): a shared band or enough agreeing minima.
//! 2. **Groups**: candidates whose smaller text is at least [`GROUP_SHARE`] in runs are
//!    copies of one story ([`joined`]); their connected components count once when formula
//!    is learned.
//! 3. **Formula** ([`crate::align::Formula`]): windows found in at least [`FORMULA_GROUPS`]
//!    groups of the corpus, counted by [`crate::align::FormulaCounter`] over every text.
//! 4. **Relation**: [`AlignRule::relate`] with that formula ([`judge`]); a pair it does not
//!    relate is dropped.
//!
//! [`crate::pipeline::align_candidates`] runs the steps over an input read from a file, the
//! way `neardup dedupe --align` does; the evaluation runs them over texts in memory. The
//! figures that chose the constants are in `docs/measurements/copied-text.md`.

use rayon::prelude::*;

use crate::align::{align_letters, AlignParams, Alignment, Formula, Letters, Passage};
use crate::minhash::{MinHashParams, Signature, Threshold};
use crate::relation::{AlignRule, MatchOptions, MatchRule, Relation, TextMatch};

use super::minhash::{all_pairs_related, MinHashCluster, MinHashMatches};

/// The smallest MinHash similarity of a candidate: low, so that a shared passage, a round-up
/// or a heavily wrapped excerpt still reaches the alignment, which decides.
pub const CANDIDATE_THRESHOLD: f64 = 0.1;

/// Groups a window must be found in to be formula.
pub const FORMULA_GROUPS: usize = 10;

/// Share of the smaller text in runs that makes two texts copies of one story, one group
/// when formula is learned.
pub const GROUP_SHARE: f64 = 0.8;

/// The candidate pairs of `sigs` (see the module docs).
pub fn candidates(sigs: &[Signature], params: &MinHashParams) -> MinHashMatches {
    let t = Threshold::new(CANDIDATE_THRESHOLD).expect("the candidate threshold is in range");
    all_pairs_related(sigs, params, &MatchRule::new(t, MatchOptions::default()))
}

/// Whether an alignment joins its two texts into one group (the smaller is at least
/// [`GROUP_SHARE`] in runs).
pub fn joined(alignment: &Alignment) -> bool {
    let small = if alignment.a_len <= alignment.b_len {
        alignment.a_matched_share()
    } else {
        alignment.b_matched_share()
    };
    small >= GROUP_SHARE
}

/// The aligned candidates `(a, b, similarity, alignment)` that [`joined`] makes copies of one
/// story, as pairs of indices: the groups formula is counted over.
pub fn joined_pairs(
    aligned: &[(u32, u32, f64, Alignment)],
) -> impl Iterator<Item = (usize, usize)> + '_ {
    aligned
        .iter()
        .filter(|p| joined(&p.3))
        .map(|p| (p.0 as usize, p.1 as usize))
}

/// A candidate pair the alignment relates: `b` read from `a`, as every relation.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedPair {
    /// The first text (an index of the caller's).
    pub a: u32,
    /// The second text.
    pub b: u32,
    /// MinHash's estimated similarity, which made it a candidate.
    pub similarity: f64,
    /// The relation and how much of each text is copied.
    pub matched: TextMatch,
    /// The passages they share, in the order of `a`.
    pub passages: Vec<Passage>,
}

/// Aligns every candidate `(a, b, similarity)` whose texts `letters` gives, on all cores, in
/// order; a pair whose texts it does not give is left out.
pub fn align_pairs<'a>(
    pairs: &[(u32, u32, f64)],
    letters: impl Fn(u32) -> Option<&'a Letters> + Sync,
) -> Vec<(u32, u32, f64, Alignment)> {
    pairs
        .par_iter()
        .filter_map(|&(a, b, s)| {
            let al = align_letters(letters(a)?, letters(b)?, &AlignParams::DEFAULT);
            Some((a, b, s, al))
        })
        .collect()
}

/// Relates aligned pairs by `rule` with `formula`, keeping those it relates, in order.
pub fn judge<'a>(
    aligned: Vec<(u32, u32, f64, Alignment)>,
    letters: impl Fn(u32) -> Option<&'a Letters> + Sync,
    formula: &Formula,
    rule: &AlignRule,
) -> Vec<AlignedPair> {
    aligned
        .into_par_iter()
        .filter_map(|(a, b, similarity, al)| {
            let matched = rule.relate(letters(a)?, letters(b)?, &al, formula)?;
            Some(AlignedPair {
                a,
                b,
                similarity,
                matched,
                passages: al.passages,
            })
        })
        .collect()
}

/// The clusters the copies among `pairs` link (a shared passage links nothing), over texts
/// `0..n`, ordered by their first member: the smallest MinHash similarity of a linking pair,
/// and how many linking pairs are containments.
pub fn clusters(n: usize, pairs: &[AlignedPair]) -> Vec<MinHashCluster> {
    let copies: Vec<&AlignedPair> = pairs
        .iter()
        .filter(|p| p.matched.relation.is_copy())
        .collect();
    let groups = crate::align::groups_of(n, copies.iter().map(|p| (p.a as usize, p.b as usize)));
    let mut of: Vec<Option<usize>> = vec![None; n];
    for (g, members) in groups.iter().enumerate() {
        for &m in members {
            of[m] = Some(g);
        }
    }
    let mut out: Vec<MinHashCluster> = groups
        .iter()
        .map(|members| MinHashCluster {
            members: members.iter().map(|&m| m as u32).collect(),
            min_similarity: 1.0,
            contained: 0,
        })
        .collect();
    for p in copies {
        let Some(g) = of[p.a as usize] else { continue };
        let c = &mut out[g];
        c.min_similarity = c.min_similarity.min(p.similarity);
        if p.matched.relation != Relation::NearDuplicate {
            c.contained += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: u32, b: u32, relation: Relation, similarity: f64) -> AlignedPair {
        AlignedPair {
            a,
            b,
            similarity,
            matched: TextMatch {
                relation,
                a_copied: 1.0,
                b_copied: 1.0,
            },
            passages: Vec::new(),
        }
    }

    #[test]
    fn copies_link_clusters_and_shared_passages_do_not() {
        let pairs = [
            pair(0, 2, Relation::NearDuplicate, 0.9),
            pair(2, 4, Relation::ContainedIn, 0.4),
            pair(1, 3, Relation::SharesPassage, 0.2),
            pair(3, 5, Relation::NearDuplicate, 0.7),
        ];
        let c = clusters(6, &pairs);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].members, [0, 2, 4]);
        assert_eq!((c[0].min_similarity, c[0].contained), (0.4, 1));
        assert_eq!(c[1].members, [3, 5]);
        assert_eq!((c[1].min_similarity, c[1].contained), (0.7, 0));
    }
}

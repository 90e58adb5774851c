//! Alignment decides what MinHash finds (issue 43): every candidate pair of a set of texts,
//! aligned ([`crate::align`]) and related by [`AlignRule`], with the passages they share.
//!
//! 1. **Candidates**: the pairs MinHash relates at [`CANDIDATE_THRESHOLD`] with the
//!    containment candidate step ([`candidates`]): a shared band or enough agreeing minima;
//!    and, where every text is read, the pairs sharing [`ANCHOR_PAIRS_MIN`] anchors
//!    ([`AnchorIndex`]): a passage MinHash cannot see, such as a short letter quoted whole
//!    in a transcript fifty times its length.
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

use std::collections::{HashMap, VecDeque};

use rayon::prelude::*;

use crate::align::{align_letters, AlignParams, Alignment, Formula, Letters, Mark, Passage};
use crate::hashing::BuildIdentity;
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

/// Windows in a winnowing window ([`anchors`]): two texts sharing a run of at least
/// `AlignParams::DEFAULT.anchor + ANCHOR_WINNOW - 1` letters share an anchor.
pub const ANCHOR_WINNOW: usize = 16;

/// Anchors two texts must share to be a candidate by anchors.
pub const ANCHOR_PAIRS_MIN: usize = 3;

/// An anchor found in more texts than this makes no candidates: common phrasing, formula, a
/// site's lines, a story reposted many times (whose copies MinHash finds).
pub const ANCHOR_MAX_TEXTS: usize = 24;

/// A text's anchors: of its windows of `AlignParams::DEFAULT.anchor` letters (hashed as
/// [`Letters::windows`] hashes them), those winnowing chooses (Schleimer, Wilkerson & Aiken
/// 2003: the smallest hash of every [`ANCHOR_WINNOW`] consecutive windows, the rightmost of
/// equal ones), each once, as the upper 32 bits of the hash.
pub fn anchors(letters: &Letters) -> Vec<u32> {
    let hashes: Vec<u64> = letters
        .windows(AlignParams::DEFAULT.anchor)
        .map(|(_, h)| h)
        .collect();
    anchors_of_windows(&hashes)
}

/// [`anchors`] of a text whose windows' hashes, in the order of the text, are `hashes`. The
/// minimum of each stretch of windows is kept in a queue of increasing hashes (a later equal
/// one replaces an earlier), so each window is looked at a constant number of times.
pub fn anchors_of_windows(hashes: &[u64]) -> Vec<u32> {
    let w = ANCHOR_WINNOW.min(hashes.len());
    let mut chosen = Vec::new();
    let mut queue: VecDeque<usize> = VecDeque::with_capacity(w);
    let mut last = None;
    for (j, &h) in hashes.iter().enumerate() {
        while queue.back().is_some_and(|&i| hashes[i] >= h) {
            queue.pop_back();
        }
        queue.push_back(j);
        let Some(start) = (j + 1).checked_sub(w) else {
            continue;
        };
        while queue.front().is_some_and(|&i| i < start) {
            queue.pop_front();
        }
        let min = queue[0];
        if last != Some(min) {
            chosen.push((hashes[min] >> 32) as u32);
            last = Some(min);
        }
    }
    chosen.sort_unstable();
    chosen.dedup();
    chosen
}

/// The anchors of a set of texts ([`anchors`]), to find the pairs that share passages
/// whatever their lengths: 8 bytes an anchor of a text, about 1.3 KB a text of news.
#[derive(Debug, Default)]
pub struct AnchorIndex {
    /// (anchor, text), sorted when pairs are asked for.
    entries: Vec<(u32, u32)>,
}

impl AnchorIndex {
    /// Adds the anchors of text `text`.
    pub fn add(&mut self, text: u32, anchors: &[u32]) {
        self.entries.extend(anchors.iter().map(|&a| (a, text)));
    }

    /// The pairs `(a, b)`, `a < b`, in order, that share at least [`ANCHOR_PAIRS_MIN`]
    /// anchors found in at most [`ANCHOR_MAX_TEXTS`] texts.
    pub fn pairs(mut self) -> Vec<(u32, u32)> {
        self.entries.par_sort_unstable();
        let mut shared: std::collections::HashMap<(u32, u32), u32, BuildIdentity> =
            std::collections::HashMap::default();
        for group in self.entries.chunk_by(|x, y| x.0 == y.0) {
            if group.len() > ANCHOR_MAX_TEXTS {
                continue;
            }
            for (i, &(_, a)) in group.iter().enumerate() {
                for &(_, b) in &group[i + 1..] {
                    if a != b {
                        *shared.entry((a.min(b), a.max(b))).or_default() += 1;
                    }
                }
            }
        }
        let mut out: Vec<(u32, u32)> = shared
            .into_iter()
            .filter(|&(_, n)| n as usize >= ANCHOR_PAIRS_MIN)
            .map(|(p, _)| p)
            .collect();
        out.sort_unstable();
        out
    }
}

/// The pairs `(a, b, similarity)` of `index` that are not among MinHash's `candidates`, with
/// the similarity `similarity` gives; a pair it gives none for (a text without a signature)
/// is left out.
pub fn anchor_candidates(
    index: AnchorIndex,
    candidates: &[(u32, u32, f64)],
    similarity: impl Fn(u32, u32) -> Option<f64>,
) -> Vec<(u32, u32, f64)> {
    let known: std::collections::HashSet<(u32, u32)> = candidates
        .iter()
        .map(|&(a, b, _)| (a.min(b), a.max(b)))
        .collect();
    index
        .pairs()
        .into_iter()
        .filter(|p| !known.contains(p))
        .filter_map(|(a, b)| Some((a, b, similarity(a, b)?)))
        .collect()
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

/// Which candidate step made a pair a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// MinHash ([`candidates`]), the step every path has.
    MinHash,
    /// Only the anchors ([`AnchorIndex`]), where every text is read.
    Anchors,
}

/// A candidate pair the alignment relates: `b` read from `a`, as every relation.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedPair {
    /// The first text (an index of the caller's).
    pub a: u32,
    /// The second text.
    pub b: u32,
    /// MinHash's estimated similarity (which made it a candidate, unless the anchors did).
    pub similarity: f64,
    /// The candidate step that found it.
    pub found_by: FoundBy,
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

/// Relates aligned pairs, each list found by the candidate step it names, by `rule` with
/// `formula`, keeping those it relates, in order. Each text's letters in formula windows are
/// marked once, however many pairs of any list it is in.
pub fn judge<'a>(
    found: impl IntoIterator<Item = (Vec<(u32, u32, f64, Alignment)>, FoundBy)>,
    letters: impl Fn(u32) -> Option<&'a Letters> + Sync,
    formula: &Formula,
    rule: &AlignRule,
) -> Vec<AlignedPair> {
    let aligned: Vec<(u32, u32, f64, Alignment, FoundBy)> = found
        .into_iter()
        .flat_map(|(pairs, by)| {
            pairs
                .into_iter()
                .map(move |(a, b, s, al)| (a, b, s, al, by))
        })
        .collect();
    let mut texts: Vec<u32> = aligned.iter().flat_map(|p| [p.0, p.1]).collect();
    texts.sort_unstable();
    texts.dedup();
    let marks: HashMap<u32, Vec<Mark>> = texts
        .into_par_iter()
        .filter_map(|t| Some((t, formula.marks(letters(t)?))))
        .collect();
    aligned
        .into_par_iter()
        .filter_map(|(a, b, similarity, al, found_by)| {
            let matched = rule.relate_marked(marks.get(&a)?, marks.get(&b)?, &al)?;
            Some(AlignedPair {
                a,
                b,
                similarity,
                found_by,
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
            found_by: FoundBy::MinHash,
            matched: TextMatch {
                relation,
                a_copied: 1.0,
                b_copied: 1.0,
            },
            passages: Vec::new(),
        }
    }

    fn letters(text: &str) -> Letters {
        Letters::new(&[text])
    }

    #[test]
    fn texts_sharing_anchors_are_pairs_and_common_anchors_make_none() {
        let mut index = AnchorIndex::default();
        index.add(0, &[1, 2, 3, 9]);
        index.add(1, &[1, 2, 3]);
        // Two shared anchors are too few.
        index.add(2, &[1, 2, 7]);
        index.add(3, &[5, 6, 8]);
        // Anchor 4 is in more texts than ANCHOR_MAX_TEXTS: texts sharing only it and two
        // others are no pair.
        for t in 4..(5 + ANCHOR_MAX_TEXTS as u32) {
            index.add(t, &[4]);
        }
        index.add(100, &[4, 5, 6]);
        index.add(101, &[4, 5, 6, 8]);
        assert_eq!(index.pairs(), [(0, 1), (3, 101)]);
    }

    #[test]
    fn an_empty_or_short_text_has_at_most_one_anchor() {
        assert!(anchors(&letters("")).is_empty());
        assert_eq!(anchors(&letters("短短的一句话而已了吧呢")).len(), 1);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn text(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
            proptest::collection::vec(0x4e00u32..0x9fa5, len)
                .prop_map(|v| v.into_iter().filter_map(char::from_u32).collect())
        }

        proptest! {
            /// Winnowing's guarantee: texts sharing a run of ANCHOR + WINNOW - 1 letters
            /// share an anchor, wherever the run lies in each.
            #[test]
            fn a_run_long_enough_is_always_anchored_in_both(
                run in text(AlignParams::DEFAULT.anchor + ANCHOR_WINNOW - 1..120),
                (a1, a2, b1, b2) in (text(0..300), text(0..300), text(0..300), text(0..300)),
            ) {
                let a = anchors(&letters(&format!("{a1}{run}{a2}")));
                let b = anchors(&letters(&format!("{b1}{run}{b2}")));
                prop_assert!(a.iter().any(|x| b.binary_search(x).is_ok()));
            }

            /// The anchors are winnowing's by its definition: the upper bits of the smallest
            /// hash of every stretch of ANCHOR_WINNOW windows (of all of them when fewer),
            /// each once. Few distinct values, so that stretches tie.
            #[test]
            fn anchors_are_the_least_hash_of_every_stretch(
                values in proptest::collection::vec(0u64..40, 0..80),
            ) {
                let hashes: Vec<u64> = values.iter().map(|&v| v << 32 | (v * 7919 % 13)).collect();
                let w = ANCHOR_WINNOW.min(hashes.len());
                let mut want: Vec<u32> = (0..(hashes.len() + 1).saturating_sub(w.max(1)))
                    .map(|start| {
                        let least = hashes[start..start + w].iter().min().expect("a stretch");
                        (least >> 32) as u32
                    })
                    .collect();
                want.sort_unstable();
                want.dedup();
                prop_assert_eq!(anchors_of_windows(&hashes), want);
            }

            /// A text's anchors are sorted, distinct, and a fraction of its windows.
            #[test]
            fn anchors_are_sorted_distinct_and_sparse(t in text(0..2000)) {
                let l = letters(&t);
                let a = anchors(&l);
                prop_assert!(a.windows(2).all(|w| w[0] < w[1]));
                let windows = l.windows(AlignParams::DEFAULT.anchor).count();
                prop_assert!(a.len() <= windows.div_ceil(ANCHOR_WINNOW / 4).max(1));
            }
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

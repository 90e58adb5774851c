//! How two MinHash-sketched articles relate: near-duplicates, or one mostly contained in the
//! other (a lead excerpt, a teaser, a passage reprinted under a title of its own).
//!
//! **Containment.** The containment of B in A is |A ∩ B| / |B|. From the estimated Jaccard
//! similarity Ĵ of the two signatures (b-bit corrected where a signature is reduced, see
//! [`Signature::similarity`]) and the numbers of distinct shingles |A| and |B| the signatures
//! carry ([`Signature::distinct`]): |A ∩ B| = Ĵ (|A| + |B|) / (1 + Ĵ), so
//! Ĉ(B ⊂ A) = Ĵ (|A| + |B|) / ((1 + Ĵ) |B|), clamped to [0, 1] ([`containment`], the one place
//! it is computed; Broder 1997 relates resemblance and containment the same way).
//!
//! **The rule** ([`MatchRule::relate`]): the smaller article is contained in the larger when
//! its containment reaches [`ContainmentRule::threshold`] and it has at least
//! [`ContainmentRule::min_shingles`] distinct shingles, so that a tiny item is never
//! "contained" by chance (and, with a [`ContainmentRule::margin`], judged on the Jaccard
//! estimate lowered by that many standard errors; none by default). When, besides, the larger one is not mostly in the smaller (its own
//! share of shared shingles, Ĉ |B| / |A|, is under the threshold: a teaser of half an
//! article), the pair is a containment even when Ĵ reaches the MinHash threshold, so that a
//! full article is never refused for a teaser of it. Otherwise two articles are
//! near-duplicates when Ĵ reaches the threshold (the rule of every release before this one),
//! and else, when the smaller is contained, a containment. A pair is linked exactly when Ĵ
//! reaches the threshold or the smaller is contained; only the name differs.
//!
//! **Order evidence** ([`MinimaOrder`]). Ĉ multiplies the noise of Ĵ by about |A| / |B|: a
//! part that is wholly in its article, a quarter of its size, falls under 0.7 about once in a
//! hundred. The minima say more where both signatures keep them whole (not Elasticsearch's
//! b-bit ones): at a position where both hold a minimum of their own bin, B's minimum is the
//! smaller only when B holds a shingle A lacks, and the two agree only on a shared one. So,
//! over those positions, agreeing / (agreeing + B's smaller) estimates |A ∩ B| / |B| directly,
//! with no factor |A| / |B|, and is exactly 1 for a part wholly in its article. The smaller
//! article is also contained when at least [`ORDER_AGREEING`] such positions agree, that
//! estimate reaches [`ORDER_CONTAINMENT`], and Ĉ (judged with the margin) is at least
//! [`ORDER_FLOOR`]: the figures that chose these are in `docs/evaluation.md` ("Containment
//! from the order of the minima"). The containment reported stays Ĉ, the one estimate every
//! backend gives.
//!
//! **Direction.** A relation reads from the query to the match, as a sentence: for
//! `similar --id X`, a match `M` with `contains` means "X contains M" (M is a piece of X), and
//! `contained_in` means "X is contained in M" (X is a piece of M). A pair `{"a", "b"}` of
//! `dedupe --pairs` reads "a relation b". The `containment` reported is always that of the
//! smaller article in the larger one.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::align::{share, Alignment, Formula, Letters, Mark, Run};
use crate::minhash::{MinimaOrder, Signature, Threshold, SIMILARITY_EPSILON};

/// The default containment threshold (see `docs/evaluation.md`).
pub const DEFAULT_CONTAINMENT: f64 = 0.7;

/// The default floor on the contained article's distinct shingles (word bigrams).
pub const DEFAULT_MIN_SHINGLES: u32 = 60;

/// The default evidence margin of the containment decision, in standard errors of the
/// Jaccard estimate ([`ContainmentRule::margin`]): none. A margin costs the held-out 20–30 %
/// parts their recall and unlinks real partial copies with the wrong ones (`docs/evaluation.md`,
/// "Containment on real news: the evidence margin").
pub const DEFAULT_CONTAINMENT_MARGIN: f64 = 0.0;

/// Order evidence (see the module docs): the fewest positions, each holding a minimum of its
/// own bin in both signatures, where the two agree.
pub const ORDER_AGREEING: u32 = 6;

/// Order evidence: the smallest share of those positions, among the agreeing ones and those
/// where the smaller article's minimum is the smaller, that agree.
pub const ORDER_CONTAINMENT: f64 = 0.9;

/// Order evidence: the smallest Ĉ it decides on.
pub const ORDER_FLOOR: f64 = 0.5;

/// The candidate step for containment: a stored article is a candidate for a query when at
/// least this many of the 128 positions of their signatures hold the same minimum. The bands
/// reach Jaccard ≈ 0.3 only; a 20 % excerpt has Jaccard ≈ 0.2 with its article. Measured in
/// `docs/evaluation.md`, "Partial reprints: the candidate step". [`is_candidate`] states the
/// step once; `dedupe` (`allpairs::minhash`), the local store, groups and `eval` take it, and
/// so do Elasticsearch indices of fields format 3 (`minimum_should_match`). An index of fields
/// format 4 keeps a cheaper step of its own, recorded in its `_meta` (the containment
/// fields' `positions`, `minimum_bits` and `agreeing`: 4 agreeing of the first 64 minima, 18
/// bits each, for a new index).
pub const CANDIDATE_AGREEING_MINIMA: usize = 10;

/// [`CANDIDATE_AGREEING_MINIMA`] for signatures of `hashes` minima: it is stated for 128, and
/// other lengths keep the same share, rounded up, at least 1.
pub fn candidate_agreeing_minima(hashes: usize) -> usize {
    (CANDIDATE_AGREEING_MINIMA * hashes).div_ceil(128).max(1)
}

/// The candidate step: whether the pair of `a` and `b` is compared at all. Near-duplicates are
/// reached through the LSH bands (`share_a_band`: the two share a band key); with a
/// containment rule in `options`, a pair is a candidate too when at least
/// [`candidate_agreeing_minima`] of its minima agree. The indexes reach the same pairs
/// through their tables (an inverted map in memory, the `bands` and `minima` tables of the
/// store), and their tests compare them with this function.
pub fn is_candidate(
    share_a_band: bool,
    a: &Signature,
    b: &Signature,
    options: &MatchOptions,
) -> bool {
    share_a_band || (options.containment.is_some() && agree_enough(a, b))
}

/// The containment half of [`is_candidate`]: whether at least [`candidate_agreeing_minima`]
/// minima of `a` and `b` agree. About 20 ns a pair against several times that for the band
/// test of two sorted key lists, so an index that finds its band sharers through a band map
/// tests every other article with this alone.
pub fn agree_enough(a: &Signature, b: &Signature) -> bool {
    a.agreements(b) as usize >= candidate_agreeing_minima(a.len())
}

/// How a match relates to the query (or `b` to `a` in a pair), read from the query's side.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// The two are near-duplicates: estimated Jaccard similarity at or above the threshold.
    NearDuplicate,
    /// The query is mostly contained in the match (the query is the smaller one).
    ContainedIn,
    /// The query mostly contains the match (the match is the smaller one).
    Contains,
    /// The two share at least one copied passage, but neither is mostly inside the other (a
    /// statement both quote, a paragraph reused in a round-up). Found only where the texts
    /// are aligned ([`AlignRule`]); never grouped, collapsed or refused on insert.
    SharesPassage,
}

impl Relation {
    /// The name in JSON: `near_duplicate`, `contained_in`, `contains` or `shares_passage`.
    pub fn name(self) -> &'static str {
        match self {
            Relation::NearDuplicate => "near_duplicate",
            Relation::ContainedIn => "contained_in",
            Relation::Contains => "contains",
            Relation::SharesPassage => "shares_passage",
        }
    }

    /// Whether the relation says one text is a copy of the other, whole or in part: every
    /// relation but [`Relation::SharesPassage`].
    pub fn is_copy(self) -> bool {
        !matches!(self, Relation::SharesPassage)
    }

    /// Whether dedupe-on-insert refuses a new article with a stored match of this relation:
    /// a near-duplicate, or an article contained in a stored one. A full article whose teaser
    /// is stored (`contains`) is not refused: it is stored, and joins the teaser's group.
    pub fn refuses_insert(self) -> bool {
        match self {
            Relation::NearDuplicate | Relation::ContainedIn => true,
            Relation::Contains | Relation::SharesPassage => false,
        }
    }

    /// The same relation read from the other side.
    pub fn reversed(self) -> Relation {
        match self {
            Relation::NearDuplicate => Relation::NearDuplicate,
            Relation::ContainedIn => Relation::Contains,
            Relation::Contains => Relation::ContainedIn,
            Relation::SharesPassage => Relation::SharesPassage,
        }
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The estimated containment of B in A, |A ∩ B| / |B|, from the estimated Jaccard similarity
/// `similarity` and the distinct shingle counts `container` = |A| and `contained` = |B|;
/// clamped to [0, 1], and 0 when `contained` is 0.
pub fn containment(similarity: f64, container: u32, contained: u32) -> f64 {
    if contained == 0 {
        return 0.0;
    }
    let j = similarity.clamp(0.0, 1.0);
    let both = j * (f64::from(container) + f64::from(contained)) / (1.0 + j);
    (both / f64::from(contained)).clamp(0.0, 1.0)
}

/// When the smaller of two articles counts as contained in the larger one.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainmentRule {
    /// The smallest estimated containment, above 0 and at most 1.
    pub threshold: f64,
    /// The fewest distinct shingles the smaller article must have.
    pub min_shingles: u32,
    /// The evidence the decision needs, in standard errors: the containment is judged on the
    /// Jaccard estimate lowered by `margin` of its standard errors, √(Ĵ(1 − Ĵ)/n) over the
    /// signature's n minima, so that a pair of very unequal sizes, whose containment
    /// estimate multiplies the noise of Ĵ by |A|/|B|, needs more agreeing minima. 0 judges
    /// the estimate itself. The containment reported is the estimate.
    #[serde(default)]
    pub margin: f64,
}

impl ContainmentRule {
    /// The defaults: [`DEFAULT_CONTAINMENT`] and [`DEFAULT_MIN_SHINGLES`].
    pub const DEFAULT: ContainmentRule = ContainmentRule {
        threshold: DEFAULT_CONTAINMENT,
        min_shingles: DEFAULT_MIN_SHINGLES,
        margin: DEFAULT_CONTAINMENT_MARGIN,
    };

    /// A rule with the default margin, or [`crate::Error::ThresholdOutOfRange`] unless
    /// 0 < `threshold` ≤ 1.
    pub fn new(threshold: f64, min_shingles: u32) -> crate::Result<ContainmentRule> {
        if threshold > 0.0 && threshold <= 1.0 {
            Ok(ContainmentRule {
                threshold,
                min_shingles,
                margin: DEFAULT_CONTAINMENT_MARGIN,
            })
        } else {
            Err(crate::Error::ThresholdOutOfRange(threshold))
        }
    }

    /// This rule with another evidence `margin` (standard errors, at least 0).
    pub fn with_margin(self, margin: f64) -> ContainmentRule {
        ContainmentRule {
            margin: margin.max(0.0),
            ..self
        }
    }

    /// The Jaccard estimate a containment decision is taken on: `similarity` lowered by
    /// [`ContainmentRule::margin`] standard errors over `hashes` minima, at least 0.
    pub fn judged_similarity(&self, similarity: f64, hashes: usize) -> f64 {
        let j = similarity.clamp(0.0, 1.0);
        let se = (j * (1.0 - j) / hashes.max(1) as f64).sqrt();
        (j - self.margin * se).max(0.0)
    }
}

impl Default for ContainmentRule {
    fn default() -> ContainmentRule {
        ContainmentRule::DEFAULT
    }
}

/// What a caller asks matches to be: near-duplicates only (`containment: None`), or also
/// partial copies under a [`ContainmentRule`] (the default).
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchOptions {
    pub containment: Option<ContainmentRule>,
}

impl MatchOptions {
    /// Near-duplicates only, as every release before containment.
    pub const NEAR_DUPLICATES_ONLY: MatchOptions = MatchOptions { containment: None };

    /// What a caller asks with one switch (the CLI's `--no-containment`, the service's
    /// `containment=false`): the default containment rule when `containment`, else
    /// [`MatchOptions::NEAR_DUPLICATES_ONLY`].
    pub fn with_containment(containment: bool) -> MatchOptions {
        if containment {
            MatchOptions::default()
        } else {
            MatchOptions::NEAR_DUPLICATES_ONLY
        }
    }
}

impl Default for MatchOptions {
    fn default() -> MatchOptions {
        MatchOptions {
            containment: Some(ContainmentRule::DEFAULT),
        }
    }
}

/// What [`MatchRule::relate`] found for a pair.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Related {
    /// The estimated Jaccard similarity.
    pub similarity: f64,
    pub relation: Relation,
    /// The estimated containment of the smaller article in the larger, when both
    /// signatures carry their distinct shingle counts.
    pub containment: Option<f64>,
}

/// The one rule that decides whether, and how, two signatures are related.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MatchRule {
    pub threshold: Threshold,
    pub options: MatchOptions,
}

impl MatchRule {
    pub fn new(threshold: Threshold, options: MatchOptions) -> MatchRule {
        MatchRule { threshold, options }
    }

    /// How `b` relates to `a`, read from `a` (see the module docs), or `None` when they are
    /// neither near-duplicates nor, under the containment rule, one contained in the other.
    /// Signatures without distinct counts can only be near-duplicates.
    pub fn relate(&self, a: &Signature, b: &Signature) -> Option<Related> {
        let similarity = a.similarity(b);
        let sizes = a.distinct().zip(b.distinct());
        let containment = sizes.map(|(x, y)| {
            if x <= y {
                containment(similarity, y, x)
            } else {
                containment(similarity, x, y)
            }
        });
        let related = |relation| {
            Some(Related {
                similarity,
                relation,
                containment,
            })
        };
        let direction = |x: u32, y: u32| {
            if x <= y {
                Relation::ContainedIn
            } else {
                Relation::Contains
            }
        };
        // Whether the smaller is contained (judged with the rule's evidence margin), and
        // whether the larger is not mostly in it (on the estimate).
        let contained = self
            .options
            .containment
            .zip(sizes.zip(containment))
            .and_then(|(rule, ((x, y), c))| {
                let (small, large) = (x.min(y), x.max(y));
                let at = rule.threshold - SIMILARITY_EPSILON;
                let judged =
                    self::containment(rule.judged_similarity(similarity, a.len()), large, small);
                let back = c * f64::from(small) / f64::from(large);
                let whole_by_order = || {
                    judged >= ORDER_FLOOR - SIMILARITY_EPSILON
                        && a.minima_order(b)
                            .is_some_and(|o| contained_by_order(o, x <= y))
                };
                (small >= rule.min_shingles && (judged >= at || whole_by_order()))
                    .then_some((direction(x, y), back < at))
            });
        match contained {
            Some((relation, true)) => related(relation),
            _ if self.threshold.admits(similarity) => related(Relation::NearDuplicate),
            Some((relation, false)) => related(relation),
            None => None,
        }
    }
}

/// Whether the order of the minima shows the smaller article contained in the larger:
/// `first_smaller` says whether the smaller one is the first signature of `order`.
fn contained_by_order(order: MinimaOrder, first_smaller: bool) -> bool {
    let outside = if first_smaller {
        order.less
    } else {
        order.greater
    };
    let share = f64::from(order.equal) / f64::from((order.equal + outside).max(1));
    order.equal >= ORDER_AGREEING && share >= ORDER_CONTAINMENT - SIMILARITY_EPSILON
}

/// How two aligned texts relate ([`crate::align`]): what they share letter for letter
/// decides, not shared words. Formula text ([`Formula`]) counts for nothing.
///
/// - The smaller text is a **copy** when at least [`AlignRule::copy_share`] of its letters
///   are in runs and at least [`AlignRule::own_share`] of its letters outside formula
///   windows are in runs too (a copy shares the variable parts, the names and numbers; two
///   instances of one template share the fixed text and differ exactly there):
///   [`Relation::NearDuplicate`] when the larger has [`AlignRule::copy_share`] of its letters
///   in runs too, else [`Relation::ContainedIn`] / [`Relation::Contains`].
/// - Otherwise the two **share a passage** ([`Relation::SharesPassage`]) when one passage
///   holds at least [`AlignRule::passage_letters`] letters in runs outside formula windows
///   (on both sides).
/// - Otherwise they are not related.
///
/// A field's list block ([`Mark::Listed`]: related links, headlines, tags after its prose)
/// counts nowhere: not in a text's letters, its copied share, its own letters or a passage's
/// letters, and not in which text is the smaller.
///
/// The figures that chose the defaults are in `docs/measurements/copied-text.md`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlignRule {
    /// Share of the smaller text in runs for a copy.
    pub copy_share: f64,
    /// Share of the smaller text's letters outside formula windows that are in runs, for a
    /// copy.
    pub own_share: f64,
    /// Letters in runs outside formula windows a passage needs to be shared.
    pub passage_letters: usize,
}

impl AlignRule {
    /// The defaults.
    pub const DEFAULT: AlignRule = AlignRule {
        copy_share: 0.6,
        own_share: 0.4,
        passage_letters: 50,
    };

    /// How `b` relates to `a` (read from `a`, as every relation), given their alignment and
    /// the corpus's formula windows; `None` when they are not related.
    pub fn relate(
        &self,
        a: &Letters,
        b: &Letters,
        alignment: &Alignment,
        formula: &Formula,
    ) -> Option<TextMatch> {
        self.relate_marked(&formula.marks(a), &formula.marks(b), alignment)
    }

    /// [`AlignRule::relate`] where each text's letters are marked already
    /// ([`Formula::marks`]), e.g. once for a text judged against several others.
    pub fn relate_marked(
        &self,
        a_marks: &[Mark],
        b_marks: &[Mark],
        alignment: &Alignment,
    ) -> Option<TextMatch> {
        let a = Side::of(alignment, a_marks, alignment.a_len, |r| r.a);
        let b = Side::of(alignment, b_marks, alignment.b_len, |r| r.b);
        let longest_own = a
            .passages
            .iter()
            .zip(&b.passages)
            .map(|(x, y)| *x.min(y))
            .max()
            .unwrap_or(0);
        let (a_copied, b_copied) = (a.copied, b.copied);
        let (a_own, b_own) = (a.own, b.own);
        let a_smaller = a.letters <= b.letters;
        let (small, large, small_own) = if a_smaller {
            (a_copied, b_copied, a_own)
        } else {
            (b_copied, a_copied, b_own)
        };
        let relation = if small >= self.copy_share && small_own >= self.own_share {
            if large >= self.copy_share {
                Relation::NearDuplicate
            } else if a_smaller {
                Relation::ContainedIn
            } else {
                Relation::Contains
            }
        } else if longest_own >= self.passage_letters {
            Relation::SharesPassage
        } else {
            return None;
        };
        Some(TextMatch {
            relation,
            a_copied,
            b_copied,
        })
    }
}

impl Default for AlignRule {
    fn default() -> Self {
        AlignRule::DEFAULT
    }
}

/// One text of an aligned pair as [`AlignRule`] counts it, its list blocks left out.
struct Side {
    /// Its letters outside list blocks.
    letters: usize,
    /// The share of those in runs.
    copied: f64,
    /// The share of its own letters (outside formula windows and list blocks) in runs.
    own: f64,
    /// Its own letters in runs, per passage.
    passages: Vec<usize>,
}

impl Side {
    /// The side of `alignment` whose letters are marked `marks`, `len` of them, whose runs
    /// start where `start` says.
    fn of(alignment: &Alignment, marks: &[Mark], len: usize, start: fn(&Run) -> usize) -> Side {
        // Each letter in runs counted once, however many passages hold it.
        let mut in_runs = vec![false; marks.len()];
        let passages = alignment
            .passages
            .iter()
            .map(|p| {
                p.runs
                    .iter()
                    .flat_map(|r| start(r)..start(r) + r.len)
                    .filter(|&i| {
                        in_runs[i] = true;
                        marks[i] == Mark::Own
                    })
                    .count()
            })
            .collect();
        // One pass: the letters of each mark, and those in runs.
        let (mut formula, mut listed, mut own_copied, mut formula_copied) = (0, 0, 0, 0);
        for (&r, &m) in in_runs.iter().zip(marks) {
            match m {
                Mark::Own => own_copied += usize::from(r),
                Mark::Formula => {
                    formula += 1;
                    formula_copied += usize::from(r);
                }
                Mark::Listed => listed += 1,
            }
        }
        Side {
            letters: len - listed,
            copied: share(own_copied + formula_copied, len - listed),
            own: share(own_copied, len - listed - formula),
            passages,
        }
    }
}

/// Two texts related by [`AlignRule`]: the relation, and how much of each is copied
/// (letters in runs ÷ letters, list blocks not counted; the passages themselves are the
/// alignment's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextMatch {
    /// How the second text relates to the first, read from the first.
    pub relation: Relation,
    /// Share of the first text's letters (outside its list blocks) in runs.
    pub a_copied: f64,
    /// Share of the second text's letters (outside its list blocks) in runs.
    pub b_copied: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::{MinHashParams, MinHasher};
    use proptest::prelude::*;
    use xxhash_rust::xxh3::xxh3_64;

    fn words(range: std::ops::Range<u64>) -> Vec<u64> {
        range.map(|i| xxh3_64(&i.to_le_bytes())).collect()
    }

    fn sig(range: std::ops::Range<u64>) -> Signature {
        MinHasher::new(MinHashParams::DEFAULT)
            .signature_of_hashes(&[words(range)])
            .unwrap()
    }

    fn rule() -> MatchRule {
        MatchRule::new(Threshold::new(0.3).unwrap(), MatchOptions::default())
    }

    /// `n` Simplified ideographs drawn from `seed`: texts that share nothing by chance.
    fn ideographs(seed: u64, n: usize) -> String {
        let folder = crate::text::Folder::shared();
        let mut out = String::new();
        let mut i = 0u64;
        while out.chars().count() < n {
            let h = xxh3_64(&[seed.to_le_bytes(), i.to_le_bytes()].concat());
            i += 1;
            let c = char::from_u32(0x4e00 + (h % 0x5000) as u32).unwrap();
            if !folder.is_traditional_char(c) {
                out.push(c);
            }
        }
        out
    }

    fn relate_texts(a: &str, b: &str, formula: &Formula) -> Option<TextMatch> {
        use crate::align::{align_letters, AlignParams};
        let (la, lb) = (Letters::new(&[a]), Letters::new(&[b]));
        let al = align_letters(&la, &lb, &AlignParams::DEFAULT);
        AlignRule::DEFAULT.relate(&la, &lb, &al, formula)
    }

    #[test]
    fn aligned_copies_whole_and_in_part() {
        let none = Formula::default();
        let text = ideographs(1, 600);
        let same = relate_texts(&text, &text, &none).unwrap();
        assert_eq!(same.relation, Relation::NearDuplicate);
        assert_eq!((same.a_copied, same.b_copied), (1.0, 1.0));
        // A lead of 40 % under a headline of its own, and a footer.
        let lead: String = text.chars().take(240).collect();
        let teaser = format!("{}。{lead}。{}", ideographs(2, 12), ideographs(3, 20));
        let r = relate_texts(&teaser, &text, &none).unwrap();
        assert_eq!(r.relation, Relation::ContainedIn);
        assert_eq!(
            relate_texts(&text, &teaser, &none).unwrap().relation,
            Relation::Contains
        );
    }

    #[test]
    fn a_lead_on_a_page_of_links_is_contained_in_its_article() {
        let none = Formula::default();
        let article = format!("{}。{}。", ideographs(30, 300), ideographs(31, 600));
        let lead: String = article.chars().take(301).collect();
        // Headlines of other articles, longer in all than the lead.
        let links: Vec<String> = (0..16)
            .map(|i| format!("· {}", ideographs(40 + i, 24)))
            .collect();
        let page = format!("{lead}\n相关阅读\n{}", links.join("\n"));
        let r = relate_texts(&page, &article, &none).unwrap();
        assert_eq!(r.relation, Relation::ContainedIn);
        assert_eq!(
            r.a_copied, 1.0,
            "the page's letters outside its links are all copied"
        );
        assert_eq!(
            relate_texts(&article, &page, &none).unwrap().relation,
            Relation::Contains
        );
        // The same lines read as prose (each a sentence) are the page's text: the two share a
        // passage, neither is inside the other.
        let prose = format!("{lead}\n相关阅读\n{}", links.join("。\n"));
        assert_eq!(
            relate_texts(&prose, &article, &none).unwrap().relation,
            Relation::SharesPassage
        );
        // So are list lines before the text's prose (an agenda, then the lead).
        let agenda = format!("相关阅读\n{}\n{lead}", links.join("\n"));
        assert_eq!(
            relate_texts(&agenda, &article, &none).unwrap().relation,
            Relation::SharesPassage
        );
    }

    #[test]
    fn a_quoted_statement_is_a_shared_passage_never_a_copy() {
        let none = Formula::default();
        let quote = ideographs(9, 60);
        let a = format!(
            "{}，他表示：“{quote}”{}",
            ideographs(10, 300),
            ideographs(11, 200)
        );
        let b = format!(
            "{}。“{quote}”，对此{}",
            ideographs(12, 150),
            ideographs(13, 400)
        );
        let r = relate_texts(&a, &b, &none).unwrap();
        assert_eq!(r.relation, Relation::SharesPassage);
        assert!(!r.relation.is_copy() && !r.relation.refuses_insert());
        // A phrase shorter than the floor relates nothing.
        let short = ideographs(14, 25);
        let a = format!("{}{short}{}", ideographs(15, 300), ideographs(16, 300));
        let b = format!("{}{short}{}", ideographs(17, 300), ideographs(18, 300));
        assert_eq!(relate_texts(&a, &b, &none), None);
    }

    #[test]
    fn formula_text_is_no_evidence_of_copying() {
        use crate::align::AlignParams;
        // Two notices made of one regulation paragraph and facts of their own.
        let clause = ideographs(20, 400);
        let a = format!("{}{clause}{}", ideographs(21, 80), ideographs(22, 60));
        let b = format!("{}{clause}{}", ideographs(23, 80), ideographs(24, 60));
        let none = Formula::default();
        assert_eq!(
            relate_texts(&a, &b, &none).unwrap().relation,
            Relation::NearDuplicate
        );
        let k = AlignParams::DEFAULT.anchor;
        let formula = Formula::new(k, Letters::new(&[&clause]).windows(k).map(|(_, h)| h));
        assert_eq!(relate_texts(&a, &b, &formula), None);
    }

    #[test]
    fn template_instances_with_their_own_facts_are_not_copies() {
        let none = Formula::default();
        // Fixed pieces of 8 letters (under an anchor) between slots filled differently.
        let fixed: Vec<String> = (0..40).map(|i| ideographs(100 + i, 8)).collect();
        let instance = |seed: u64| {
            fixed
                .iter()
                .enumerate()
                .map(|(i, f)| format!("{f}{}", ideographs(seed * 1000 + i as u64, 6)))
                .collect::<String>()
        };
        let r = relate_texts(&instance(1), &instance(2), &none);
        assert!(r.is_none_or(|m| !m.relation.is_copy()), "{r:?}");
    }

    #[test]
    fn a_margin_asks_more_evidence_of_a_small_part_of_a_large_article() {
        // Lowered by one standard error: 0.2 − √(0.2 × 0.8 / 128).
        let rule = ContainmentRule::DEFAULT.with_margin(1.0);
        assert!((rule.judged_similarity(0.2, 128) - 0.164_644_66).abs() < 1e-6);
        assert_eq!(ContainmentRule::DEFAULT.judged_similarity(0.2, 128), 0.2);
        assert_eq!(rule.with_margin(-3.0).margin, 0.0);
        let with = |margin: f64| {
            MatchRule::new(
                Threshold::new(0.3).unwrap(),
                MatchOptions {
                    containment: Some(ContainmentRule::DEFAULT.with_margin(margin)),
                },
            )
        };
        // A 100-word item wholly inside a 1,600-word article (Ĵ ≈ 0.06, estimated 0.07): contained
        // on the estimate, not with a margin of two standard errors.
        let (large, item) = (sig(0..1600), sig(0..100));
        let r = with(0.0).relate(&item, &large).unwrap();
        assert_eq!(r.relation, Relation::ContainedIn, "{r:?}");
        assert_eq!(with(2.0).relate(&item, &large), None);
        // A 20 % lead still is, and its reported containment is the estimate either way.
        let (full, lead) = (sig(0..1000), sig(0..200));
        let (a, b) = (
            with(0.0).relate(&lead, &full),
            with(1.0).relate(&lead, &full),
        );
        assert_eq!(a, b);
        assert_eq!(b.unwrap().relation, Relation::ContainedIn);
    }

    #[test]
    fn a_whole_part_is_contained_by_the_order_of_its_minima_where_its_estimate_falls_short() {
        let (mut short_estimates, mut found) = (0, 0);
        for n in 0..1000 {
            // A fifth of an article, wholly in it.
            let first = n * 10_000;
            let article = sig(first..first + 800);
            let start = first + n % 600;
            let part = sig(start..start + 160);
            let order = part.minima_order(&article).unwrap();
            assert_eq!(
                order.less, 0,
                "{start}: a part's minimum is never the smaller"
            );
            let c = containment(
                article.similarity(&part),
                article.distinct().unwrap(),
                part.distinct().unwrap(),
            );
            let Some(r) = rule().relate(&article, &part) else {
                assert!(c < DEFAULT_CONTAINMENT, "{start}: Ĉ {c} and not linked");
                short_estimates += 1;
                continue;
            };
            assert_eq!(r.relation, Relation::Contains, "{start}: {r:?}");
            let back = rule().relate(&part, &article).unwrap();
            assert_eq!(back.relation, Relation::ContainedIn, "{start}: {back:?}");
            if c < DEFAULT_CONTAINMENT {
                short_estimates += 1;
                found += 1;
                // Elasticsearch's b-bit signatures keep no order: there Ĉ alone decides.
                let (a8, p8) = (article.reduced(8), part.reduced(8));
                assert_eq!(a8.minima_order(&p8), None);
                if let Some(r8) = rule().relate(&a8, &p8) {
                    assert!(
                        r8.containment.unwrap() >= DEFAULT_CONTAINMENT - 1e-9,
                        "{start}: {r8:?}"
                    );
                }
            }
        }
        // About one whole part in a hundred has Ĉ under 0.7; the order finds nearly all.
        assert!(short_estimates >= 5, "{short_estimates} parts with Ĉ < 0.7");
        assert!(
            found * 10 >= short_estimates * 9,
            "{found} of {short_estimates}"
        );
    }

    #[test]
    fn the_order_of_the_minima_never_links_a_part_half_of_which_is_elsewhere() {
        for n in 0..1000 {
            let first = n * 10_000;
            let article = sig(first..first + 800);
            let start = first + n % 600;
            let mut half = words(start..start + 100);
            half.extend(words(start + 5_000..start + 5_100));
            let part = MinHasher::new(MinHashParams::DEFAULT)
                .signature_of_hashes(&[half])
                .unwrap();
            if let Some(r) = rule().relate(&article, &part) {
                assert!(
                    r.containment.unwrap() >= DEFAULT_CONTAINMENT - 1e-9,
                    "{start}: linked by the order evidence: {r:?}"
                );
            }
        }
    }

    #[test]
    fn names_and_directions() {
        assert_eq!(
            serde_json::to_string(&Relation::ContainedIn).unwrap(),
            r#""contained_in""#
        );
        assert_eq!(Relation::NearDuplicate.to_string(), "near_duplicate");
        assert_eq!(Relation::Contains.reversed(), Relation::ContainedIn);
        assert_eq!(Relation::NearDuplicate.reversed(), Relation::NearDuplicate);
        assert!(ContainmentRule::new(0.0, 60).is_err());
        assert!(ContainmentRule::new(1.2, 60).is_err());
    }

    #[test]
    fn an_excerpt_is_contained_in_its_article_and_not_near_duplicate() {
        // 1000 words; the excerpt is its first 200 (a 20 % lead): Jaccard ≈ 0.2.
        let full = sig(0..1000);
        let lead = sig(0..200);
        let r = rule().relate(&lead, &full).unwrap();
        assert_eq!(r.relation, Relation::ContainedIn);
        assert!(r.similarity < 0.3, "{r:?}");
        assert!(r.containment.unwrap() > 0.85, "{r:?}");
        let back = rule().relate(&full, &lead).unwrap();
        assert_eq!(back.relation, Relation::Contains);
        assert_eq!(back.containment, r.containment);
        // A passage from the middle, too.
        let middle = sig(400..650);
        assert_eq!(
            rule().relate(&full, &middle).unwrap().relation,
            Relation::Contains
        );
    }

    #[test]
    fn near_duplicates_stay_near_duplicates_and_strangers_stay_apart() {
        let a = sig(0..500);
        let b = sig(20..520);
        let r = rule().relate(&a, &b).unwrap();
        assert_eq!(r.relation, Relation::NearDuplicate);
        assert!(rule().relate(&a, &sig(5000..5100)).is_none());
        // Half of the small one is in the large one: not contained at 0.7.
        assert!(rule().relate(&sig(0..1000), &sig(900..1100)).is_none());
    }

    #[test]
    fn a_teaser_of_half_an_article_is_contained_not_a_near_duplicate() {
        let (full, half) = (sig(0..1000), sig(0..500));
        let r = rule().relate(&full, &half).unwrap();
        assert!(r.similarity >= 0.3, "{r:?}");
        assert_eq!(r.relation, Relation::Contains);
        assert!(!r.relation.refuses_insert());
        assert_eq!(
            rule().relate(&half, &full).unwrap().relation,
            Relation::ContainedIn
        );
        // Near-duplicates only: the same pair is a near-duplicate.
        let only = MatchRule::new(
            Threshold::new(0.3).unwrap(),
            MatchOptions::NEAR_DUPLICATES_ONLY,
        );
        assert_eq!(
            only.relate(&full, &half).unwrap().relation,
            Relation::NearDuplicate
        );
        // Most of each in the other (90 %): a near-duplicate.
        assert_eq!(
            rule().relate(&full, &sig(0..900)).unwrap().relation,
            Relation::NearDuplicate
        );
    }

    #[test]
    fn the_floor_and_the_option_keep_small_or_unwanted_containment_out() {
        let full = sig(0..1000);
        // 40 words: 39 bigrams, under the floor of 60.
        assert!(rule().relate(&full, &sig(100..140)).is_none());
        let only = MatchRule::new(
            Threshold::new(0.3).unwrap(),
            MatchOptions::NEAR_DUPLICATES_ONLY,
        );
        assert!(only.relate(&full, &sig(0..200)).is_none());
        // Without distinct counts (e.g. read from Elasticsearch) only near-duplicates count.
        let bare = Signature::from_values(sig(0..200).values().to_vec());
        assert!(rule().relate(&full, &bare).is_none());
    }

    proptest! {
        #[test]
        fn containment_inverts_exact_jaccard(a in 1u32..5000, b in 1u32..5000, frac in 0.0f64..=1.0) {
            let both = (f64::from(a.min(b)) * frac).floor();
            let j = both / (f64::from(a) + f64::from(b) - both);
            let c = containment(j, a, b);
            prop_assert!((c - both / f64::from(b)).abs() < 1e-9, "{c}");
        }

        #[test]
        fn containment_is_a_share_and_grows_with_similarity(
            a in 0u32..100_000, b in 0u32..100_000, j in -0.5f64..1.5, k in 0.0f64..1.0,
        ) {
            let c = containment(j, a, b);
            prop_assert!((0.0..=1.0).contains(&c));
            let (lo, hi) = (j.clamp(0.0, 1.0).min(k), j.clamp(0.0, 1.0).max(k));
            prop_assert!(containment(lo, a, b) <= containment(hi, a, b) + 1e-12);
        }

        #[test]
        fn relate_reads_the_same_from_both_sides(start in 0u64..600, len in 1u64..800) {
            let (x, y) = (sig(0..700), sig(start..start + len));
            let there = rule().relate(&x, &y);
            let back = rule().relate(&y, &x);
            prop_assert_eq!(there.map(|r| r.relation.reversed()), back.map(|r| r.relation));
            prop_assert_eq!(there.and_then(|r| r.containment), back.and_then(|r| r.containment));
        }
    }
}

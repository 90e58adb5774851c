//! The two detection methods behind one shape.
//!
//! Both methods are the same machine with different parts:
//!
//! | | SimHash | MinHash |
//! |---|---|---|
//! | [`Sketch`] of an article | 64 bits | `hashes` minima |
//! | keys an index files it under | `k + 1` block values | `bands` band keys |
//! | [`Tolerance`] | largest Hamming distance `k` | smallest estimated Jaccard `t` |
//! | [`Score`] of a match | `distance` | `similarity` |
//!
//! The store, `dedupe`, `check` and `similar` take a [`Sketch`] and a [`Tolerance`] and answer
//! with [`Score`]s, whatever the method.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::align::{Passage, Span};
use crate::minhash::{Signature, Threshold};
use crate::relation::{MatchOptions, MatchRule, Relation, TextMatch};
use crate::simhash::SimHash;

/// The detection methods.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// 64-bit SimHash of the profile's weighted features; matches within a Hamming distance.
    SimHash,
    /// MinHash signature of word shingles; matches above an estimated Jaccard similarity.
    #[default]
    MinHash,
}

impl Method {
    pub const ALL: [Method; 2] = [Method::SimHash, Method::MinHash];

    pub fn name(self) -> &'static str {
        match self {
            Method::SimHash => "simhash",
            Method::MinHash => "minhash",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| crate::Error::UnknownMethod(s.to_owned()))
    }
}

/// What a method makes of one article.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sketch {
    SimHash(SimHash),
    MinHash(Signature),
}

impl Sketch {
    pub fn method(&self) -> Method {
        match self {
            Sketch::SimHash(_) => Method::SimHash,
            Sketch::MinHash(_) => Method::MinHash,
        }
    }

    /// How close `other` is, if within `tolerance`; `None` when it is not, or when the two
    /// sketches or the tolerance belong to different methods.
    pub fn score(&self, other: &Sketch, tolerance: Tolerance) -> Option<Score> {
        Query::new(self.clone(), tolerance).ok()?.score(other)
    }
}

/// A query: a sketch and how close counts, of one method. A sketch of one method with the
/// tolerance of the other cannot be built, so a backend that takes a `Query` never meets
/// the mismatch; [`Query::new`] is where it is refused.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// Fingerprints within Hamming distance `k`.
    SimHash { fingerprint: SimHash, k: u32 },
    /// Signatures whose estimated Jaccard similarity reaches `threshold`.
    MinHash {
        signature: Signature,
        threshold: Threshold,
    },
}

/// A sketch of one method asked with the tolerance of the other ([`Query::new`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a {sketch} sketch cannot be queried with {tolerance}: give the tolerance of its method (SimHash: a distance k; MinHash: a threshold)")]
pub struct QueryMismatch {
    pub sketch: Method,
    pub tolerance: Tolerance,
}

impl Query {
    /// The query of `sketch` at `tolerance` (a bare `u32` is a SimHash `k`), or
    /// [`QueryMismatch`] when they belong to different methods.
    pub fn new(
        sketch: impl Into<Sketch>,
        tolerance: impl Into<Tolerance>,
    ) -> Result<Query, QueryMismatch> {
        match (sketch.into(), tolerance.into()) {
            (Sketch::SimHash(fingerprint), Tolerance::Distance(k)) => {
                Ok(Query::SimHash { fingerprint, k })
            }
            (Sketch::MinHash(signature), Tolerance::Similarity(threshold)) => Ok(Query::MinHash {
                signature,
                threshold,
            }),
            (s, tolerance) => Err(QueryMismatch {
                sketch: s.method(),
                tolerance,
            }),
        }
    }

    pub fn method(&self) -> Method {
        match self {
            Query::SimHash { .. } => Method::SimHash,
            Query::MinHash { .. } => Method::MinHash,
        }
    }

    /// The sketch looked for.
    pub fn sketch(&self) -> Sketch {
        match self {
            Query::SimHash { fingerprint, .. } => Sketch::SimHash(*fingerprint),
            Query::MinHash { signature, .. } => Sketch::MinHash(signature.clone()),
        }
    }

    /// How close counts.
    pub fn tolerance(&self) -> Tolerance {
        match self {
            Query::SimHash { k, .. } => Tolerance::Distance(*k),
            Query::MinHash { threshold, .. } => Tolerance::Similarity(*threshold),
        }
    }

    /// How close `other` is, if within the tolerance; `None` when it is not, or when it is
    /// a sketch of the other method.
    pub fn score(&self, other: &Sketch) -> Option<Score> {
        match (self, other) {
            (Query::SimHash { fingerprint, k }, Sketch::SimHash(b)) => {
                let d = fingerprint.distance(*b);
                (d <= *k).then_some(Score::Distance(d))
            }
            (
                Query::MinHash {
                    signature,
                    threshold,
                },
                Sketch::MinHash(b),
            ) => {
                let s = signature.similarity(b);
                threshold.admits(s).then_some(Score::Similarity(s))
            }
            _ => None,
        }
    }

    /// How `other` relates to the query's MinHash signature under `options` (see
    /// [`crate::relation`]): its score, relation and, for signatures that carry their
    /// distinct shingle counts, the containment estimate; `None` when it is not related, or
    /// for SimHash, which has no relation beyond near-duplicate (use [`Query::score`]).
    pub fn relate(&self, other: &Sketch, options: &MatchOptions) -> Option<Related> {
        match (self, other) {
            (
                Query::MinHash {
                    signature,
                    threshold,
                },
                Sketch::MinHash(b),
            ) => MatchRule::new(*threshold, *options)
                .relate(signature, b)
                .map(|r| Related {
                    score: Score::Similarity(r.similarity),
                    relation: r.relation,
                    containment: r.containment,
                }),
            _ => None,
        }
    }
}

/// A match's score with its relation to the query ([`Query::relate`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Related {
    pub score: Score,
    pub relation: Relation,
    pub containment: Option<f64>,
}

impl From<SimHash> for Sketch {
    fn from(s: SimHash) -> Sketch {
        Sketch::SimHash(s)
    }
}

impl From<Signature> for Sketch {
    fn from(s: Signature) -> Sketch {
        Sketch::MinHash(s)
    }
}

/// How close is close enough.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Tolerance {
    /// SimHash: at most this Hamming distance.
    Distance(u32),
    /// MinHash: at least this estimated Jaccard similarity.
    Similarity(Threshold),
}

impl Tolerance {
    pub fn method(&self) -> Method {
        match self {
            Tolerance::Distance(_) => Method::SimHash,
            Tolerance::Similarity(_) => Method::MinHash,
        }
    }

    /// The one default-tolerance rule: what a query that names no tolerance uses on an index
    /// of `method` built for distance `k` (a store's own `k`; [`crate::simhash::DEFAULT_K`]
    /// on Elasticsearch): MinHash at [`crate::minhash::DEFAULT_THRESHOLD`], SimHash at `k`.
    pub fn default_for(method: Method, k: u32) -> Tolerance {
        match method {
            Method::SimHash => Tolerance::Distance(k),
            Method::MinHash => Tolerance::Similarity(crate::minhash::DEFAULT_THRESHOLD),
        }
    }

    /// The tolerance a caller asked for: a distance `k` (SimHash), a threshold (MinHash), or
    /// neither (`None`: the index's default). Both at once is
    /// [`crate::Error::ToleranceConflict`].
    pub fn asked(k: Option<u32>, threshold: Option<Threshold>) -> crate::Result<Option<Tolerance>> {
        match (k, threshold) {
            (Some(_), Some(_)) => Err(crate::Error::ToleranceConflict),
            (Some(k), None) => Ok(Some(Tolerance::Distance(k))),
            (None, Some(t)) => Ok(Some(Tolerance::Similarity(t))),
            (None, None) => Ok(None),
        }
    }

    /// MinHash at threshold `t`, or [`crate::Error::ThresholdOutOfRange`].
    pub fn similarity(t: f64) -> crate::Result<Tolerance> {
        Threshold::new(t).map(Tolerance::Similarity)
    }
}

impl From<Threshold> for Tolerance {
    fn from(t: Threshold) -> Tolerance {
        Tolerance::Similarity(t)
    }
}

impl From<u32> for Tolerance {
    fn from(k: u32) -> Tolerance {
        Tolerance::Distance(k)
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Distance(k) => write!(f, "distance ≤ {k}"),
            Tolerance::Similarity(t) => write!(f, "similarity ≥ {t}"),
        }
    }
}

/// How close a match is. Serialised as `"distance": d` or `"similarity": s`.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Score {
    Distance(u32),
    Similarity(f64),
}

impl Score {
    /// Nearest first: smaller distances, larger similarities.
    pub fn nearest_first(&self, other: &Score) -> Ordering {
        match (self, other) {
            (Score::Distance(a), Score::Distance(b)) => a.cmp(b),
            (Score::Similarity(a), Score::Similarity(b)) => b.total_cmp(a),
            (Score::Distance(_), Score::Similarity(_)) => Ordering::Less,
            (Score::Similarity(_), Score::Distance(_)) => Ordering::Greater,
        }
    }

    /// The distance, for SimHash scores.
    pub fn distance(&self) -> Option<u32> {
        match self {
            Score::Distance(d) => Some(*d),
            Score::Similarity(_) => None,
        }
    }

    /// The similarity, for MinHash scores.
    pub fn similarity(&self) -> Option<f64> {
        match self {
            Score::Similarity(s) => Some(*s),
            Score::Distance(_) => None,
        }
    }
}

/// One result of a query, from a store or from Elasticsearch: `{"id", "distance"}` or
/// `{"id", "similarity"}`, with `"index"` where it was found when there is more than one place
/// to look (the concrete Elasticsearch index; the service names a store's index too). Both
/// backends answer with it, so neither imports the other.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Match {
    pub id: String,
    /// The concrete Elasticsearch index holding the document (not the alias or pattern
    /// queried), or the index name a service gives a store; `None` from a store itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    #[serde(flatten)]
    pub score: Score,
    /// How the match relates to the query, read from the query ("the query contains the
    /// match"), when the search asked for relations ([`Query::relate`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    /// The estimated containment of the smaller article in the larger, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containment: Option<f64>,
    /// What the match shares with the query letter for letter, when the texts were aligned
    /// (then `relation` is the alignment's: [`crate::relation::AlignRule`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub shared: Option<Shared>,
}

/// What a match shares with its query by aligned text: `{"query_copied", "match_copied",
/// "passages": [{"query": span, "match": span, "matched"}]}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shared {
    /// Share of the query's letters in runs shared with the match (four decimals), its list
    /// blocks ([`crate::align::Mark::Listed`]) not counted.
    pub query_copied: f64,
    /// Share of the match's letters in runs shared with the query (four decimals), its list
    /// blocks not counted.
    pub match_copied: f64,
    /// The passages both hold, in the query's order.
    pub passages: Vec<SharedPassage>,
}

/// A passage the query and a match both hold: where it is in each (field and character
/// range of its plain text, [`crate::align::Span`]), and its letters in runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SharedPassage {
    pub query: Span,
    #[serde(rename = "match")]
    pub found: Span,
    pub matched: usize,
}

impl Shared {
    /// From the query's side of an alignment and its relation.
    pub fn new(m: &TextMatch, passages: &[Passage]) -> Shared {
        Shared {
            query_copied: four_decimals(m.a_copied),
            match_copied: four_decimals(m.b_copied),
            passages: passages
                .iter()
                .map(|p| SharedPassage {
                    query: p.a,
                    found: p.b,
                    matched: p.matched,
                })
                .collect(),
        }
    }
}

/// A share as answers print it: to four decimals.
pub fn four_decimals(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl Match {
    /// A match in a store (no index).
    pub fn new(id: impl Into<String>, score: Score) -> Match {
        Match {
            id: id.into(),
            index: None,
            score,
            relation: None,
            containment: None,
            shared: None,
        }
    }

    /// A match in a store, with its relation to the query.
    pub fn related(id: impl Into<String>, related: Related) -> Match {
        Match {
            id: id.into(),
            index: None,
            score: related.score,
            relation: Some(related.relation),
            containment: related.containment,
            shared: None,
        }
    }

    /// A match in the index `index`.
    pub fn in_index(id: impl Into<String>, index: impl Into<String>, score: Score) -> Match {
        Match {
            id: id.into(),
            index: Some(index.into()),
            score,
            relation: None,
            containment: None,
            shared: None,
        }
    }

    /// SimHash matches: the Hamming distance.
    pub fn distance(&self) -> Option<u32> {
        self.score.distance()
    }

    /// MinHash matches: the estimated Jaccard similarity.
    pub fn similarity(&self) -> Option<f64> {
        self.score.similarity()
    }
}

/// Sorts matches nearest first, ties by id, then index.
pub fn sort_matches(m: &mut [Match]) {
    m.sort_unstable_by(|a, b| {
        a.score
            .nearest_first(&b.score)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.index.cmp(&b.index))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_serialise_by_method_and_sort_nearest_first() {
        assert_eq!(
            serde_json::to_string(&Score::Distance(2)).unwrap(),
            r#"{"distance":2}"#
        );
        let mut s = [Score::Similarity(0.5), Score::Similarity(0.9)];
        s.sort_by(Score::nearest_first);
        assert_eq!(s[0], Score::Similarity(0.9));
        assert_eq!("minhash".parse::<Method>().unwrap(), Method::MinHash);
        assert!("lsh".parse::<Method>().is_err());
    }

    #[test]
    fn score_needs_matching_methods() {
        let a = Sketch::SimHash(SimHash(0b111));
        let b = Sketch::SimHash(SimHash(0));
        assert_eq!(
            a.score(&b, Tolerance::Distance(3)),
            Some(Score::Distance(3))
        );
        assert_eq!(a.score(&b, Tolerance::Distance(2)), None);
        assert_eq!(a.score(&b, Tolerance::similarity(0.1).unwrap()), None);
        let m = Sketch::MinHash(Signature::from_values(vec![1, 2, 3, 4]));
        let n = Sketch::MinHash(Signature::from_values(vec![1, 2, 3, 5]));
        assert_eq!(
            m.score(&n, Tolerance::similarity(0.75).unwrap()),
            Some(Score::Similarity(0.75))
        );
        assert_eq!(m.score(&n, Tolerance::similarity(0.8).unwrap()), None);
        assert_eq!(m.score(&a, Tolerance::similarity(0.1).unwrap()), None);
        assert!(Tolerance::similarity(0.0).is_err());
        assert!(Query::new(m.clone(), 3).is_err());
        assert!(Query::new(a.clone(), 3).is_ok());
    }
}

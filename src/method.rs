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

use crate::minhash::Signature;
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
        match (self, other, tolerance) {
            (Sketch::SimHash(a), Sketch::SimHash(b), Tolerance::Distance(k)) => {
                let d = a.distance(*b);
                (d <= k).then_some(Score::Distance(d))
            }
            (Sketch::MinHash(a), Sketch::MinHash(b), Tolerance::Similarity(t)) => {
                let s = a.similarity(b);
                (s >= t - SIMILARITY_EPSILON).then_some(Score::Similarity(s))
            }
            _ => None,
        }
    }
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

/// Estimated similarities are multiples of 1 / hashes; a threshold such as 0.3 is compared
/// with this slack so that 38/128 vs 0.296875… rounding never decides.
pub const SIMILARITY_EPSILON: f64 = 1e-9;

/// How close is close enough.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Tolerance {
    /// SimHash: at most this Hamming distance.
    Distance(u32),
    /// MinHash: at least this estimated Jaccard similarity (0..=1).
    Similarity(f64),
}

impl Tolerance {
    pub fn method(&self) -> Method {
        match self {
            Tolerance::Distance(_) => Method::SimHash,
            Tolerance::Similarity(_) => Method::MinHash,
        }
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
}

impl Match {
    /// A match in a store (no index).
    pub fn new(id: impl Into<String>, score: Score) -> Match {
        Match {
            id: id.into(),
            index: None,
            score,
        }
    }

    /// A match in the index `index`.
    pub fn in_index(id: impl Into<String>, index: impl Into<String>, score: Score) -> Match {
        Match {
            id: id.into(),
            index: Some(index.into()),
            score,
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
        assert_eq!(a.score(&b, Tolerance::Similarity(0.1)), None);
        let m = Sketch::MinHash(Signature::from_values(vec![1, 2, 3, 4]));
        let n = Sketch::MinHash(Signature::from_values(vec![1, 2, 3, 5]));
        assert_eq!(
            m.score(&n, Tolerance::Similarity(0.75)),
            Some(Score::Similarity(0.75))
        );
        assert_eq!(m.score(&n, Tolerance::Similarity(0.8)), None);
        assert_eq!(m.score(&a, Tolerance::Similarity(0.0)), None);
    }
}

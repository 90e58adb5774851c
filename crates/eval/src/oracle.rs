//! The text-overlap oracle: whether two articles share text, independent of any fingerprint.
//!
//! The text of an article is its fields with markup dropped ([`neardup_core::text::plain_text`]),
//! NFKC and lower case ([`neardup_core::text::normalise()`]), and only letters and digits kept. Its
//! *runs* are the distinct [`RUN`]-character substrings of each field (hashed with xxh3). Two
//! articles are compared by the [`Overlap`] of their run sets:
//!
//! - **containment** `|A ∩ B| / min(|A|, |B|)`, the share of the shorter text found in the
//!   other: a reported pair below [`FALSE_POSITIVE_BELOW`] shares (almost) no text and is a
//!   false positive;
//! - **Jaccard** `|A ∩ B| / |A ∪ B|`: a pair at or above [`MUST_FIND_AT`] is a near-duplicate
//!   that a detector must find.
//!
//! Pairs in between are neither: reporting them is not an error, missing them is not either.
//! [`similar_pairs`] finds every pair at or above a Jaccard threshold exactly, with prefix
//! filtering, so recall can be measured over a whole corpus.

use std::collections::HashMap;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use neardup_core::hashing::BuildIdentity;

/// Characters per run.
pub const RUN: usize = 5;

/// A reported pair sharing less than this share of the shorter text is a false positive.
pub const FALSE_POSITIVE_BELOW: f64 = 0.2;

/// A pair with at least this Jaccard similarity of runs must be found.
pub const MUST_FIND_AT: f64 = 0.5;

/// The oracle's verdict on one pair.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Containment below [`FALSE_POSITIVE_BELOW`]: not a duplicate.
    Unrelated,
    /// Jaccard at least [`MUST_FIND_AT`]: a near-duplicate that must be found.
    NearDuplicate,
    /// Shares text, but not enough to be required.
    Related,
}

/// How much text two run sets share.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Overlap {
    /// Runs in both.
    pub shared: usize,
    /// `shared / |A ∪ B|`; 0 when both are empty.
    pub jaccard: f64,
    /// `shared / min(|A|, |B|)`; 0 when either is empty.
    pub containment: f64,
}

impl Overlap {
    pub fn verdict(&self) -> Verdict {
        if self.jaccard >= MUST_FIND_AT {
            Verdict::NearDuplicate
        } else if self.containment < FALSE_POSITIVE_BELOW {
            Verdict::Unrelated
        } else {
            Verdict::Related
        }
    }
}

/// The letters and digits of `text` after markup is dropped, NFKC and lower case.
pub fn letters(text: &str) -> String {
    neardup_core::text::normalise(&neardup_core::text::plain_text(text))
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// The distinct runs of an article's fields, sorted (hashes). Runs do not cross fields; a
/// field shorter than [`RUN`] letters and digits gives none.
pub fn runs<S: AsRef<str>>(fields: &[S]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4 * RUN];
    for f in fields {
        let chars: Vec<char> = letters(f.as_ref()).chars().collect();
        for w in chars.windows(RUN) {
            let mut n = 0;
            for c in w {
                n += c.encode_utf8(&mut buf[n..]).len();
            }
            out.push(xxh3_64(&buf[..n]));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The number of values in both sorted, distinct slices.
fn intersection(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// The overlap of two sorted, distinct run sets (as [`runs`] returns them).
pub fn overlap(a: &[u64], b: &[u64]) -> Overlap {
    let shared = intersection(a, b);
    let union = a.len() + b.len() - shared;
    let min = a.len().min(b.len());
    Overlap {
        shared,
        jaccard: if union == 0 {
            0.0
        } else {
            shared as f64 / union as f64
        },
        containment: if min == 0 {
            0.0
        } else {
            shared as f64 / min as f64
        },
    }
}

/// Tokens of a set of size `n` that must hold a shared token of any set with Jaccard ≥ `t`:
/// `n − ⌈t·n⌉ + 1` (the small tolerance can only lengthen the prefix, never miss a pair).
fn prefix_len(n: usize, t: f64) -> usize {
    let need = (t * n as f64 - 1e-9).ceil().max(0.0) as usize;
    (n - need.min(n) + 1).min(n)
}

/// Every pair `(i, j, jaccard)` with `i < j` whose sets have Jaccard similarity ≥ `t`
/// (`0 < t ≤ 1`), sorted. Exact: each set's tokens are ordered by global frequency, rarest
/// first; two sets with Jaccard ≥ `t` share a token within each one's prefix (see
/// `prefix_len`), and a set can only match sets of size at least `t` times its own. So
/// candidates are pairs sharing a prefix token and passing the size filter, and each is
/// verified on the whole sets. Tokens of one set only can be shared by none and are not
/// indexed. Empty sets match nothing. The tokens are expected to be hashes (as [`runs`]
/// gives). Runs on the rayon pool.
pub fn similar_pairs(sets: &[Vec<u64>], t: f64) -> Vec<(u32, u32, f64)> {
    assert!(t > 0.0 && t <= 1.0, "Jaccard threshold must be in (0, 1]");
    assert!(sets.len() <= u32::MAX as usize, "at most 2^32 - 1 sets");
    let mut freq: HashMap<u64, u32, BuildIdentity> = HashMap::default();
    for s in sets {
        for &h in s {
            *freq.entry(h).or_default() += 1;
        }
    }
    // Rank tokens: rarest first, ties by value, so the order is total and deterministic.
    let mut order: Vec<(u32, u64)> = freq.iter().map(|(&h, &f)| (f, h)).collect();
    drop(freq);
    order.par_sort_unstable();
    let unique = order.partition_point(|&(f, _)| f < 2) as u32;
    let rank: HashMap<u64, u32, BuildIdentity> = order
        .iter()
        .enumerate()
        .map(|(r, &(_, h))| (h, r as u32))
        .collect();
    let ranked: Vec<Vec<u32>> = sets
        .par_iter()
        .map(|s| {
            let mut r: Vec<u32> = s.iter().map(|h| rank[h]).collect();
            r.sort_unstable();
            r
        })
        .collect();
    drop(rank);
    // The prefix tokens held by at least two sets, those that can be shared.
    let shareable = |r: &[u32]| -> std::ops::Range<usize> {
        let p = prefix_len(r.len(), t);
        r[..p].partition_point(|&tok| tok < unique)..p
    };
    // Postings of shareable prefix tokens, as one array cut at `start` (by rank − unique).
    let tokens = order.len() - unique as usize;
    let mut start = vec![0usize; tokens + 1];
    for r in &ranked {
        for &tok in &r[shareable(r)] {
            start[(tok - unique) as usize + 1] += 1;
        }
    }
    for x in 1..start.len() {
        start[x] += start[x - 1];
    }
    let mut fill = start.clone();
    let mut postings = vec![0u32; start[tokens]];
    for (i, r) in ranked.iter().enumerate() {
        for &tok in &r[shareable(r)] {
            let slot = &mut fill[(tok - unique) as usize];
            postings[*slot] = i as u32;
            *slot += 1;
        }
    }
    // A set is matched against the sets before it in (size, position) order.
    let before = |j: usize, i: usize| (ranked[j].len(), j) < (ranked[i].len(), i);
    let mut out: Vec<(u32, u32, f64)> = (0..ranked.len())
        .into_par_iter()
        .flat_map_iter(|i| {
            let r = &ranked[i];
            let min_size = (t * r.len() as f64 - 1e-9).ceil() as usize;
            let mut cands: Vec<u32> = r[shareable(r)]
                .iter()
                .flat_map(|&tok| {
                    let x = (tok - unique) as usize;
                    postings[start[x]..start[x + 1]].iter().copied()
                })
                .filter(|&j| {
                    let j = j as usize;
                    before(j, i) && ranked[j].len() >= min_size
                })
                .collect();
            cands.sort_unstable();
            cands.dedup();
            cands.into_iter().filter_map(move |j| {
                let o = overlap(&sets[i], &sets[j as usize]);
                (o.jaccard >= t).then(|| {
                    let (a, b) = (j.min(i as u32), j.max(i as u32));
                    (a, b, o.jaccard)
                })
            })
        })
        .collect();
    out.sort_unstable_by_key(|x| (x.0, x.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_lengths() {
        assert_eq!(prefix_len(10, 0.5), 6);
        assert_eq!(prefix_len(1, 0.5), 1);
        assert_eq!(prefix_len(3, 1.0), 1);
        assert_eq!(prefix_len(0, 0.5), 0);
    }

    #[test]
    fn letters_drop_markup_punctuation_and_width() {
        assert_eq!(letters("<p>Ａｂｃ，１２３。</p>"), "abc123");
    }
}

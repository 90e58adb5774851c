//! The baseline: MinHash estimates of the Jaccard similarity of word-shingle sets.
//!
//! Each text becomes the set of its shingles (runs of `shingle` adjacent kept words, from the
//! same segmentation and stop-word filter as the fingerprints); `hashes` independent
//! multiply-shift permutations keep their minimum each, and the share of equal minima
//! estimates the Jaccard similarity. A pair is a duplicate at threshold `t` when the estimate
//! is at least `t`.

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::{unique_texts, LabelledPair, Scored};
use crate::Fingerprinter;

/// Thresholds evaluated, as in the SimHash table's k = 0..8.
pub const THRESHOLDS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// MinHash signatures of `hashes` values over shingles of `shingle` words.
#[derive(Clone, Debug)]
pub struct MinHasher {
    /// Odd multipliers and offsets of the permutations, fixed by a seed.
    params: Vec<(u64, u64)>,
    shingle: usize,
}

impl MinHasher {
    pub fn new(hashes: usize, shingle: usize) -> MinHasher {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            // splitmix64: fixed, portable parameters.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let params = (0..hashes).map(|_| (next() | 1, next())).collect();
        MinHasher {
            params,
            shingle: shingle.max(1),
        }
    }

    /// The signature of a word sequence; `None` when it has no shingle.
    pub fn signature<S: AsRef<str>>(&self, words: &[S]) -> Option<Vec<u64>> {
        let hashes: Vec<u64> = words
            .iter()
            .map(|w| xxh3_64(w.as_ref().as_bytes()))
            .collect();
        if hashes.is_empty() {
            return None;
        }
        let n = self.shingle.min(hashes.len());
        let mut sig = vec![u64::MAX; self.params.len()];
        for win in hashes.windows(n) {
            let x = win.iter().fold(0u64, |acc, &h| acc.rotate_left(23) ^ h);
            for (s, &(a, b)) in sig.iter_mut().zip(&self.params) {
                *s = (*s).min(a.wrapping_mul(x).wrapping_add(b));
            }
        }
        Some(sig)
    }

    /// Estimated Jaccard similarity of two signatures.
    pub fn similarity(a: &[u64], b: &[u64]) -> f64 {
        let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
        same as f64 / a.len().max(1) as f64
    }

    pub fn name(&self) -> String {
        format!("minhash-{}x{}w", self.params.len(), self.shingle)
    }
}

/// The kept words of an article's fields, in order, from `fp`'s pipeline.
pub fn words<S: AsRef<str>>(fp: &Fingerprinter, fields: &[S]) -> Vec<String> {
    fields.iter().flat_map(|f| fp.words(f.as_ref())).collect()
}

/// Whether an estimate `s` reaches threshold `t` (a duplicate at that point).
pub fn reaches(s: f64, t: f64) -> bool {
    s >= t - 1e-12
}

/// The label of the operating point at threshold `t`, e.g. `J>=0.3`.
pub fn point_label(t: f64) -> String {
    format!("J>={t:.1}")
}

/// Scores pairs with MinHash at each of [`THRESHOLDS`]; words come from `fp`'s pipeline.
pub fn score(
    mh: &MinHasher,
    fp: &Fingerprinter,
    fields: &[String],
    pairs: &[LabelledPair],
) -> Scored {
    let (texts, refs) = unique_texts(pairs, fields);
    let sigs: Vec<Option<Vec<u64>>> = texts
        .par_iter()
        .map(|t| mh.signature(&words(fp, t)))
        .collect();
    let sims: Vec<Option<f64>> = refs
        .iter()
        .map(|&[a, b]| Some(MinHasher::similarity(sigs[a].as_ref()?, sigs[b].as_ref()?)))
        .collect();
    Scored {
        name: mh.name(),
        points: THRESHOLDS
            .iter()
            .map(|&t| {
                (
                    point_label(t),
                    sims.iter()
                        .map(|s| s.is_some_and(|s| reaches(s, t)))
                        .collect(),
                )
            })
            .collect(),
        too_short: sims.iter().map(Option::is_none).collect(),
        texts_too_short: (sigs.iter().filter(|s| s.is_none()).count(), sigs.len()),
        distances: vec![None; pairs.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_and_disjoint() {
        let mh = MinHasher::new(128, 2);
        let a = mh
            .signature(&["北京", "天气", "晴朗", "气温", "回升"])
            .unwrap();
        let b = mh
            .signature(&["上海", "股市", "收盘", "上涨", "两点"])
            .unwrap();
        assert_eq!(MinHasher::similarity(&a, &a), 1.0);
        assert!(MinHasher::similarity(&a, &b) < 0.05);
    }

    #[test]
    fn estimate_is_close_to_jaccard() {
        let mh = MinHasher::new(256, 1);
        let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
        // Sets of 150 words sharing 100: Jaccard 100/200 = 0.5.
        let a = mh.signature(&words[..150]).unwrap();
        let b = mh.signature(&words[50..]).unwrap();
        let j = MinHasher::similarity(&a, &b);
        assert!((j - 0.5).abs() < 0.1, "{j}");
    }
}

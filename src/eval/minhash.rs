//! MinHash in the evaluation: the library's method ([`crate::minhash`]), judged by the
//! decision the store and `dedupe` make.
//!
//! At threshold `t` a pair is a duplicate when its signatures share an LSH band **and** the
//! estimated Jaccard similarity is at least `t` — exactly what `neardup dedupe`, `check` and
//! `similar` on a store report, so the figures are those of what ships, band misses included.

use rayon::prelude::*;

use super::{unique_texts, LabelledPair, Scored};
use crate::minhash::{MinHashParams, Signature, Threshold};
use crate::Fingerprinter;

/// Thresholds evaluated, as in the SimHash table's k = 0..8.
pub const THRESHOLDS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// Whether an estimate `s` reaches threshold `t` (a duplicate at that point).
pub fn reaches(s: f64, t: f64) -> bool {
    Threshold::new(t).is_ok_and(|t| t.admits(s))
}

/// The label of the operating point at threshold `t`, e.g. `J>=0.3`.
pub fn point_label(t: f64) -> String {
    format!("J>={t:.1}")
}

/// The detector's name: `minhash` and its parameters, e.g. `minhash shingle=w2;n=128;…`.
pub fn name(fp: &Fingerprinter) -> String {
    format!("minhash {}", fp.config().minhash)
}

/// The signatures of `texts` (each the fields of one article); `None` for a text too short.
pub fn signatures(fp: &Fingerprinter, texts: &[Vec<String>]) -> Vec<Option<Signature>> {
    texts
        .par_iter()
        .map(|t| fp.minhash_fields(t).ok().map(|m| m.signature))
        .collect()
}

/// The similarity of two signatures if they share a band under `params`; `None` if not (the
/// LSH index would never compare them).
pub fn banded_similarity(a: &Signature, b: &Signature, params: &MinHashParams) -> Option<f64> {
    let shared = a
        .band_keys(params)
        .iter()
        .zip(b.band_keys(params).iter())
        .any(|(x, y)| x == y);
    shared.then(|| a.similarity(b))
}

/// Scores pairs with MinHash at each of [`THRESHOLDS`].
pub fn score(fp: &Fingerprinter, fields: &[String], pairs: &[LabelledPair]) -> Scored {
    let params = fp.config().minhash;
    let (texts, refs) = unique_texts(pairs, fields);
    let sigs = signatures(fp, &texts);
    // Outer `None`: a text too short; inner `None`: no shared band.
    let sims: Vec<Option<Option<f64>>> = refs
        .iter()
        .map(|&[a, b]| {
            Some(banded_similarity(
                sigs[a].as_ref()?,
                sigs[b].as_ref()?,
                &params,
            ))
        })
        .collect();
    Scored {
        name: name(fp),
        points: THRESHOLDS
            .iter()
            .map(|&t| {
                (
                    point_label(t),
                    sims.iter()
                        .map(|s| s.flatten().is_some_and(|s| reaches(s, t)))
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
    use crate::minhash::MinHasher;

    #[test]
    fn only_pairs_sharing_a_band_count() {
        let params = MinHashParams::DEFAULT;
        let a = Signature::from_values(vec![1u32; 128]);
        let mut v = vec![2u32; 128];
        // Agree on one value of every band but never on a whole band: similarity 42/128,
        // yet no shared band, so the index would never compare them.
        for band in 0..42 {
            v[band * 3] = 1;
        }
        let b = Signature::from_values(v);
        assert!((a.similarity(&b) - 42.0 / 128.0).abs() < 1e-12);
        assert_eq!(banded_similarity(&a, &b, &params), None);
        let mh = MinHasher::new(params);
        let words: Vec<u64> = (0..100).collect();
        let s = mh.signature_of_hashes(&[words]).unwrap();
        assert_eq!(banded_similarity(&s, &s, &params), Some(1.0));
    }
}

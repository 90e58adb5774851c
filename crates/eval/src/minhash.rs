//! MinHash in the evaluation: the library's method ([`neardup_core::minhash`]), judged by the
//! decision the store and `dedupe` make.
//!
//! At threshold `t` a pair is linked when its signatures are candidates — they share an LSH
//! band, or, with a containment rule, at least
//! [`neardup_core::relation::candidate_agreeing_minima`] minima — **and**
//! [`neardup_core::relation::MatchRule::relate`] relates them at `t` — exactly what `neardup
//! dedupe`, `check` and `similar` on a store report, so the figures are those of what ships,
//! candidate misses included. A partial reprint ([`super::CONTAINED_IN`]: `b` is a part of
//! `a`) counts as found only with its direction, from both sides: the query `a` finds `b`
//! as `contains`, and the query `b` finds `a` as `contained_in`. Any other pair counts as
//! linked with any relation.

use rayon::prelude::*;

use super::{unique_texts, LabelledPair, Scored, CONTAINED_IN};
use neardup_core::minhash::{MinHashParams, Signature, Threshold};
use neardup_core::relation::{is_candidate, MatchOptions, MatchRule, Relation};
use neardup_core::Fingerprinter;

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

/// The detector's name: `minhash` and its parameters, e.g. `minhash shingle=w2;n=128;…`,
/// then its relations unless they are the default ones: `near-duplicates only`, or another
/// containment rule, e.g. `contained≥0.8,60`.
pub fn name(fp: &Fingerprinter, options: &MatchOptions) -> String {
    let params = fp.config().minhash;
    match options.containment {
        _ if *options == MatchOptions::default() => format!("minhash {params}"),
        Some(c) => format!(
            "minhash {params} contained≥{},{}",
            c.threshold, c.min_shingles
        ),
        None => format!("minhash {params} near-duplicates only"),
    }
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

/// Whether the store's candidate step under `options` reaches the pair: a shared band, or,
/// with a containment rule, enough agreeing minima.
pub fn candidates(
    a: &Signature,
    b: &Signature,
    params: &MinHashParams,
    options: &MatchOptions,
) -> bool {
    is_candidate(banded_similarity(a, b, params).is_some(), a, b, options)
}

/// Whether the pair `p` of signatures `a` and `b` counts as found under `rule` (see the
/// module docs): a partial reprint with its direction from both sides, any other pair linked.
fn found(p: &LabelledPair, a: &Signature, b: &Signature, rule: &MatchRule) -> bool {
    let there = rule.relate(a, b).map(|r| r.relation);
    if p.relation() == CONTAINED_IN {
        there == Some(Relation::Contains)
            && rule.relate(b, a).map(|r| r.relation) == Some(Relation::ContainedIn)
    } else {
        there.is_some()
    }
}

/// Scores pairs with MinHash at each of [`THRESHOLDS`], under `options`.
pub fn score(
    fp: &Fingerprinter,
    options: &MatchOptions,
    fields: &[String],
    pairs: &[LabelledPair],
) -> Scored {
    let params = fp.config().minhash;
    let (texts, refs) = unique_texts(pairs, fields);
    let sigs = signatures(fp, &texts);
    // Outer `None`: a text too short; inner: the two signatures when they are candidates.
    let both: Vec<Option<Option<(&Signature, &Signature)>>> = refs
        .iter()
        .map(|&[a, b]| {
            let (a, b) = (sigs[a].as_ref()?, sigs[b].as_ref()?);
            Some(candidates(a, b, &params, options).then_some((a, b)))
        })
        .collect();
    Scored {
        name: name(fp, options),
        points: THRESHOLDS
            .iter()
            .map(|&t| {
                let rule = MatchRule::new(
                    Threshold::new(t).expect("the thresholds are in range"),
                    *options,
                );
                (
                    point_label(t),
                    both.iter()
                        .zip(pairs)
                        .map(|(s, p)| s.flatten().is_some_and(|(a, b)| found(p, a, b, &rule)))
                        .collect(),
                )
            })
            .collect(),
        passages: Vec::new(),
        too_short: both.iter().map(Option::is_none).collect(),
        texts_too_short: (sigs.iter().filter(|s| s.is_none()).count(), sigs.len()),
        distances: vec![None; pairs.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::minhash::MinHasher;

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

    /// A partial reprint is found only with its direction: `b` a part of `a`; the same pair
    /// written the wrong way round, or measured for near-duplicates only, is not found.
    #[test]
    fn a_partial_reprint_counts_only_with_its_direction() {
        use crate::{LabelledPair, CONTAINED_IN};
        let mh = MinHasher::new(MinHashParams::DEFAULT);
        let text = |r: std::ops::Range<u64>| {
            let words: Vec<u64> = r.map(|w| w.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
            mh.signature_of_hashes(&[words]).unwrap()
        };
        let (full, lead) = (text(0..1000), text(0..220));
        let pair = LabelledPair {
            a: Default::default(),
            b: Default::default(),
            duplicate: true,
            kind: Some("positive".into()),
            transformation: Some("lead_excerpt".into()),
            size: Some(0.2),
            relation: Some(CONTAINED_IN.into()),
            a_span: None,
            b_span: None,
        };
        let t = Threshold::new(0.3).unwrap();
        let rule = MatchRule::new(t, MatchOptions::default());
        assert!(candidates(
            &full,
            &lead,
            &MinHashParams::DEFAULT,
            &MatchOptions::default()
        ));
        assert!(found(&pair, &full, &lead, &rule));
        assert!(!found(&pair, &lead, &full, &rule));
        let near = MatchRule::new(t, MatchOptions::NEAR_DUPLICATES_ONLY);
        assert!(!found(&pair, &full, &lead, &near));
        // Another kind of positive counts with any relation.
        let repost = LabelledPair {
            relation: None,
            ..pair
        };
        assert!(found(&repost, &lead, &full, &rule));
    }
}

//! Every pair of MinHash signatures at or above a similarity, in memory: the engine of
//! `neardup dedupe --method minhash`.
//!
//! The LSH rule of the store, applied to a whole set at once: for each band, the signatures
//! are grouped by that band's key and only signatures in one group are compared. A pair is
//! reported when it shares a band and its estimated Jaccard similarity reaches the threshold
//! — exactly what `neardup_store::Store::similar` answers for each member, so `dedupe` and a
//! store agree. A pair sharing several bands is compared only in the first, so every pair
//! comes out once without a set of pairs seen. Identical signatures are merged first, so a
//! thousand copies of one article cost one entry, not a million comparisons.
//! [`all_pairs_related`] applies [`crate::relation::MatchRule`] to the same candidates
//! instead of the threshold alone: it links containments too, each pair with its relation.
//! With a containment rule it adds the store's containment candidate step: a pair of
//! signatures with at least [`crate::relation::candidate_agreeing_minima`] agreeing minima
//! is compared too (found through an inverted map from (position, minimum) to signatures,
//! counting agreements per pair), as a store's `minima` table finds it for each member.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::minhash::{MinHashParams, Signature, Threshold};
use crate::relation::{candidate_agreeing_minima, MatchOptions, MatchRule, Related, Relation};

/// A linked pair of distinct signatures `u < v` (positions in `holders`): their similarity,
/// and how `v` relates to `u`, read from `u`.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Link {
    u: u32,
    v: u32,
    related: Related,
}

/// One input pair `a < b` of [`MinHashMatches::related_pairs`]: how `b` relates to `a`, read
/// from `a` ("a contains b").
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RelatedPair {
    pub a: u32,
    pub b: u32,
    pub related: Related,
}

/// The pairs found, and counters. Pairs are kept between distinct signatures, with the
/// inputs holding each, so a thousand copies of one article cost a thousand entries, not
/// half a million pairs; [`MinHashMatches::pairs`] lists the input pairs in order.
#[derive(Clone, Debug, Default)]
pub struct MinHashMatches {
    /// Pairs of distinct signatures, `u < v`, as positions in `holders`, in order.
    linked: Vec<Link>,
    /// For each distinct signature, the input positions holding it, ascending.
    holders: Vec<Vec<u32>>,
    /// For each input position, its distinct signature.
    of_input: Vec<u32>,
    /// Distinct signatures among the inputs.
    pub unique: usize,
    /// Signature comparisons made.
    pub comparisons: u64,
    /// The largest group of distinct signatures sharing one band key.
    pub largest_group: usize,
}

/// A connected component of the "similar enough" graph with at least two members.
#[derive(Clone, Debug, PartialEq)]
pub struct MinHashCluster {
    /// Input positions, ascending.
    pub members: Vec<u32>,
    /// The smallest similarity among the pairs that link the cluster. Members linked only
    /// through others (A–B and B–C) can be less similar than that.
    pub min_similarity: f64,
    /// Links of the cluster (between distinct signatures) that are containments, not
    /// near-duplicates: 0 when every link is a near-duplicate.
    pub contained: u64,
}

impl MinHashMatches {
    /// Number of input pairs, copies of one signature included, without listing them.
    pub fn pair_count(&self) -> u64 {
        let n = |u: u32| self.holders[u as usize].len() as u64;
        let same: u64 = (0..self.holders.len() as u32)
            .map(|u| n(u) * n(u).saturating_sub(1) / 2)
            .sum();
        same + self.linked.iter().map(|l| n(l.u) * n(l.v)).sum::<u64>()
    }

    /// Every pair of input positions `(a, b, similarity)`, `a < b`, in order of `a` then
    /// `b`. Made one input at a time: memory grows with the linked signatures and one
    /// input's partners, not with the number of pairs.
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32, f64)> + '_ {
        self.related_pairs()
            .map(|p| (p.a, p.b, p.related.similarity))
    }

    /// [`MinHashMatches::pairs`] with each pair's relation, read from `a`. Copies of one
    /// signature are near-duplicates of similarity 1.
    pub fn related_pairs(&self) -> impl Iterator<Item = RelatedPair> + '_ {
        let mut adjacent: Vec<Vec<(u32, Related)>> = vec![Vec::new(); self.holders.len()];
        for l in &self.linked {
            adjacent[l.u as usize].push((l.v, l.related));
            let back = Related {
                relation: l.related.relation.reversed(),
                ..l.related
            };
            adjacent[l.v as usize].push((l.u, back));
        }
        let copy = Related {
            similarity: 1.0,
            relation: Relation::NearDuplicate,
            containment: None,
        };
        (0..self.of_input.len() as u32).flat_map(move |a| {
            let u = self.of_input[a as usize];
            let later = |h: &[u32]| {
                h.iter()
                    .copied()
                    .filter(move |&b| b > a)
                    .collect::<Vec<_>>()
            };
            let mut partners: Vec<(u32, Related)> = later(&self.holders[u as usize])
                .into_iter()
                .map(|b| (b, copy))
                .collect();
            for &(v, r) in &adjacent[u as usize] {
                partners.extend(later(&self.holders[v as usize]).into_iter().map(|b| (b, r)));
            }
            partners.sort_unstable_by_key(|&(b, _)| b);
            partners
                .into_iter()
                .map(move |(b, related)| RelatedPair { a, b, related })
        })
    }

    /// The clusters the pairs link, ordered by their first member.
    pub fn clusters(&self) -> Vec<MinHashCluster> {
        let n = self.holders.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for &Link { u, v, .. } in &self.linked {
            let (ru, rv) = (root(&mut parent, u as usize), root(&mut parent, v as usize));
            if ru != rv {
                parent[ru.max(rv)] = ru.min(rv);
            }
        }
        let mut groups: HashMap<usize, MinHashCluster> = HashMap::new();
        for u in 0..n {
            let r = root(&mut parent, u);
            groups
                .entry(r)
                .or_insert_with(|| MinHashCluster {
                    members: Vec::new(),
                    min_similarity: 1.0,
                    contained: 0,
                })
                .members
                .extend(&self.holders[u]);
        }
        for l in &self.linked {
            let r = root(&mut parent, l.u as usize);
            let c = groups.get_mut(&r).expect("every signature has a group");
            c.min_similarity = c.min_similarity.min(l.related.similarity);
            if l.related.relation != Relation::NearDuplicate {
                c.contained += 1;
            }
        }
        let mut out: Vec<MinHashCluster> = groups
            .into_values()
            .filter(|c| c.members.len() > 1)
            .collect();
        for c in &mut out {
            c.members.sort_unstable();
        }
        out.sort_unstable_by_key(|c| c.members[0]);
        out
    }
}

/// One band's links, comparisons and largest group.
type BandResult = (Vec<Link>, u64, usize);

/// All pairs of `sigs` sharing a band under `params` whose estimated similarity reaches `t`.
/// Input positions must fit in `u32`.
pub fn all_pairs(sigs: &[Signature], params: &MinHashParams, t: Threshold) -> MinHashMatches {
    all_pairs_related(
        sigs,
        params,
        &MatchRule::new(t, MatchOptions::NEAR_DUPLICATES_ONLY),
    )
}

/// All pairs of `sigs` sharing a band under `params` that `rule` relates (near-duplicates,
/// and, with a containment rule, containments). Input positions must fit in `u32`.
pub fn all_pairs_related(
    sigs: &[Signature],
    params: &MinHashParams,
    rule: &MatchRule,
) -> MinHashMatches {
    assert!(
        sigs.len() <= u32::MAX as usize,
        "at most 2^32 - 1 signatures"
    );
    // Merge identical signatures: holders[u] lists the inputs holding unique signature u.
    let mut index: HashMap<&Signature, u32> = HashMap::with_capacity(sigs.len());
    let mut unique: Vec<&Signature> = Vec::new();
    let mut holders: Vec<Vec<u32>> = Vec::new();
    let mut of_input = Vec::with_capacity(sigs.len());
    for (i, s) in sigs.iter().enumerate() {
        let u = *index.entry(s).or_insert_with(|| {
            unique.push(s);
            holders.push(Vec::new());
            (unique.len() - 1) as u32
        });
        holders[u as usize].push(i as u32);
        of_input.push(u);
    }
    let keys: Vec<Vec<u64>> = unique.par_iter().map(|s| s.band_keys(params)).collect();

    let per_band: Vec<BandResult> = (0..usize::from(params.bands))
        .into_par_iter()
        .map(|band| {
            let mut order: Vec<(u64, u32)> = keys
                .iter()
                .enumerate()
                .map(|(u, k)| (k[band], u as u32))
                .collect();
            order.sort_unstable();
            let mut found = Vec::new();
            let mut comparisons = 0u64;
            let mut largest = 0usize;
            for group in order.chunk_by(|a, b| a.0 == b.0) {
                largest = largest.max(group.len());
                for (x, &(_, a)) in group.iter().enumerate() {
                    for &(_, b) in &group[x + 1..] {
                        let (ka, kb) = (&keys[a as usize], &keys[b as usize]);
                        if (0..band).any(|e| ka[e] == kb[e]) {
                            continue; // compared in an earlier band
                        }
                        comparisons += 1;
                        let (u, v) = (a.min(b), a.max(b));
                        if let Some(related) = rule.relate(unique[u as usize], unique[v as usize]) {
                            found.push(Link { u, v, related });
                        }
                    }
                }
            }
            (found, comparisons, largest)
        })
        .collect();

    let by_minima = if rule.options.containment.is_some() {
        agreeing_pairs(&unique, &keys, rule)
    } else {
        (Vec::new(), 0)
    };

    let mut out = MinHashMatches {
        unique: unique.len(),
        holders,
        of_input,
        ..MinHashMatches::default()
    };
    for (found, comparisons, largest) in per_band {
        out.comparisons += comparisons;
        out.largest_group = out.largest_group.max(largest);
        out.linked.extend(found);
    }
    out.comparisons += by_minima.1;
    out.linked.extend(by_minima.0);
    out.linked.sort_unstable_by_key(|l| (l.u, l.v));
    out
}

/// The containment candidate step over a whole set: every pair `u < v` of distinct
/// signatures with at least [`candidate_agreeing_minima`] agreeing minima and no shared band
/// (those were compared already) that `rule` relates, and the comparisons made.
fn agreeing_pairs(unique: &[&Signature], keys: &[Vec<u64>], rule: &MatchRule) -> (Vec<Link>, u64) {
    let Some(len) = unique.first().map(|s| s.len()) else {
        return (Vec::new(), 0);
    };
    let m = candidate_agreeing_minima(len);
    // For each position, (minimum, signature) in order: a key's holders are one run.
    let postings: Vec<Vec<(u32, u32)>> = (0..len)
        .into_par_iter()
        .map(|i| {
            let mut p: Vec<(u32, u32)> = unique
                .iter()
                .enumerate()
                .map(|(u, s)| (s.values()[i], u as u32))
                .collect();
            p.sort_unstable();
            p
        })
        .collect();
    let per_signature: Vec<(Vec<Link>, u64)> = (0..unique.len() as u32)
        .into_par_iter()
        .map_init(
            || (vec![0u16; unique.len()], Vec::new()),
            |(counts, touched), u| {
                let sig = unique[u as usize];
                for (i, p) in postings.iter().enumerate() {
                    let v = sig.values()[i];
                    let from = p.partition_point(|&x| x < (v, u + 1));
                    for &(value, w) in &p[from..] {
                        if value != v {
                            break;
                        }
                        if counts[w as usize] == 0 {
                            touched.push(w);
                        }
                        counts[w as usize] += 1;
                    }
                }
                let mut found = Vec::new();
                let mut comparisons = 0u64;
                touched.sort_unstable();
                for &v in touched.iter() {
                    let n = std::mem::take(&mut counts[v as usize]);
                    let (ku, kv) = (&keys[u as usize], &keys[v as usize]);
                    if usize::from(n) < m || ku.iter().zip(kv).any(|(a, b)| a == b) {
                        continue;
                    }
                    comparisons += 1;
                    if let Some(related) = rule.relate(sig, unique[v as usize]) {
                        found.push(Link { u, v, related });
                    }
                }
                touched.clear();
                (found, comparisons)
            },
        )
        .collect();
    let comparisons = per_signature.iter().map(|x| x.1).sum();
    (
        per_signature.into_iter().flat_map(|x| x.0).collect(),
        comparisons,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::{MinHasher, Scheme};

    #[test]
    fn equals_brute_force_over_shared_band_and_threshold() {
        let params = MinHashParams {
            shingle: 1,
            hashes: 32,
            bands: 16,
            rows: 2,
            scheme: Scheme::Oph,
        };
        let mh = MinHasher::new(params);
        // Overlapping word ranges give a spread of similarities; a copy gives identity.
        let mut sigs: Vec<Signature> = (0..60u64)
            .map(|i| {
                let words: Vec<u64> = (i * 3..i * 3 + 40).collect();
                mh.signature_of_hashes(&[words]).unwrap()
            })
            .collect();
        sigs.push(sigs[5].clone());
        for t in [0.2, 0.5, 0.8] {
            let got = all_pairs(&sigs, &params, Threshold::new(t).unwrap());
            let mut want = Vec::new();
            for a in 0..sigs.len() {
                for b in a + 1..sigs.len() {
                    let (ka, kb) = (sigs[a].band_keys(&params), sigs[b].band_keys(&params));
                    let s = sigs[a].similarity(&sigs[b]);
                    if ka.iter().zip(&kb).any(|(x, y)| x == y) && s >= t {
                        want.push((a as u32, b as u32, s));
                    }
                }
            }
            let pairs: Vec<(u32, u32, f64)> = got.pairs().collect();
            assert_eq!(pairs, want, "t = {t}");
            assert_eq!(got.pair_count(), want.len() as u64);
            let clusters = got.clusters();
            let linked: usize = clusters.iter().map(|c| c.members.len()).sum();
            let mut nodes: Vec<u32> = want.iter().flat_map(|&(a, b, _)| [a, b]).collect();
            nodes.sort_unstable();
            nodes.dedup();
            assert_eq!(
                linked,
                nodes.len(),
                "every linked input in exactly one cluster"
            );
            assert!(pairs.iter().any(|&(a, b, _)| (a, b) == (5, 60)));
        }
    }

    /// With a containment rule, a pair is compared when it shares a band or at least
    /// `candidate_agreeing_minima` minima, and linked when the rule relates it: the same
    /// pairs as a brute force over every pair.
    #[test]
    fn containment_candidates_equal_brute_force_over_agreeing_minima() {
        use crate::relation::{is_candidate, MatchOptions, MatchRule};
        let params = MinHashParams::DEFAULT;
        let mh = MinHasher::new(params);
        // Articles and pieces of them of every size, leads and passages, and strangers.
        let mut sigs: Vec<Signature> = Vec::new();
        for a in 0..6u64 {
            let base = a * 10_000;
            sigs.push(
                mh.signature_of_hashes(&[(base..base + 1000).collect::<Vec<_>>()])
                    .unwrap(),
            );
            for (start, len) in [
                (0, 150),
                (0, 250),
                (300, 200),
                (500, 400),
                (900, 60),
                (100, 120),
            ] {
                let words: Vec<u64> = (base + start..base + start + len).collect();
                sigs.push(mh.signature_of_hashes(&[words]).unwrap());
            }
        }
        sigs.push(sigs[3].clone());
        let rule = MatchRule::new(Threshold::new(0.3).unwrap(), MatchOptions::default());
        let got = all_pairs_related(&sigs, &params, &rule);
        let mut want = Vec::new();
        for a in 0..sigs.len() {
            for b in a + 1..sigs.len() {
                let (ka, kb) = (sigs[a].band_keys(&params), sigs[b].band_keys(&params));
                let band = ka.iter().zip(&kb).any(|(x, y)| x == y);
                if sigs[a] == sigs[b] {
                    want.push((a as u32, b as u32, Relation::NearDuplicate));
                } else if is_candidate(band, &sigs[a], &sigs[b], &MatchOptions::default()) {
                    if let Some(r) = rule.relate(&sigs[a], &sigs[b]) {
                        want.push((a as u32, b as u32, r.relation));
                    }
                }
            }
        }
        let pairs: Vec<(u32, u32, Relation)> = got
            .related_pairs()
            .map(|p| (p.a, p.b, p.related.relation))
            .collect();
        assert_eq!(pairs, want);
        // Some pairs are found only through the minima.
        let only_minima = want
            .iter()
            .filter(|&&(a, b, _)| {
                let (ka, kb) = (
                    sigs[a as usize].band_keys(&params),
                    sigs[b as usize].band_keys(&params),
                );
                !ka.iter().zip(&kb).any(|(x, y)| x == y)
            })
            .count();
        assert!(only_minima > 0, "{want:?}");
        // Near-duplicates only: no pair without a shared band.
        let near = all_pairs(&sigs, &params, Threshold::new(0.3).unwrap());
        assert!(near.pairs().all(|(a, b, _)| {
            let (ka, kb) = (
                sigs[a as usize].band_keys(&params),
                sigs[b as usize].band_keys(&params),
            );
            ka.iter().zip(&kb).any(|(x, y)| x == y)
        }));
    }

    #[test]
    fn related_pairs_read_from_a_and_clusters_count_containments() {
        use crate::relation::{MatchOptions, MatchRule, Relation};
        // 128 bands of one row: every agreeing minimum makes a candidate.
        let params = MinHashParams {
            bands: 128,
            rows: 1,
            ..MinHashParams::DEFAULT
        };
        let mh = MinHasher::new(params);
        let text = |r: std::ops::Range<u64>| {
            let words: Vec<u64> = r.map(|w| w.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
            mh.signature_of_hashes(&[words]).unwrap()
        };
        // 0: a lead of 1; 1: the full article; 2: a stranger; 3: a copy of the full article.
        let sigs = vec![text(0..250), text(0..1000), text(5000..5400), text(0..1000)];
        let t = Threshold::new(0.3).unwrap();
        let rule = MatchRule::new(t, MatchOptions::default());
        let got = all_pairs_related(&sigs, &params, &rule);
        let pairs: Vec<(u32, u32, Relation)> = got
            .related_pairs()
            .map(|p| (p.a, p.b, p.related.relation))
            .collect();
        assert_eq!(
            pairs,
            [
                (0, 1, Relation::ContainedIn),
                (0, 3, Relation::ContainedIn),
                (1, 3, Relation::NearDuplicate),
            ]
        );
        let clusters = got.clusters();
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0].members, [0, 1, 3]);
        assert_eq!(clusters[0].contained, 1);
        // Near-duplicates only: the lead stays apart.
        let near = all_pairs(&sigs, &params, t);
        assert_eq!(
            near.pairs().map(|(a, b, _)| (a, b)).collect::<Vec<_>>(),
            [(1, 3)]
        );
    }
}

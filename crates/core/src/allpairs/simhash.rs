//! Every pair of fingerprints within distance k, in memory: the engine of `neardup dedupe`.
//!
//! The pigeonhole rule (see [`BlockLayout`]) says two fingerprints within `k` agree on at least
//! one of `k + 1` blocks. So for each block, the fingerprints are grouped by that block's value
//! and only fingerprints in the same group are compared. A pair that agrees on several blocks
//! is reported only in the first block where it agrees, so every pair comes out exactly once
//! without a set of pairs seen.
//!
//! Real SimHash values cluster: many pages of one site share boilerplate, and a single block
//! value can hold thousands of fingerprints. Comparing all of them is quadratic, so a large
//! group is split again by the same rule: its members agree on one block and are within `k` on
//! the remaining bits, so they agree on one of `k + 1` sub-blocks of those bits. Splitting
//! goes on while groups are large and bits remain; only small groups are compared pair by
//! pair. Identical fingerprints are merged first, so a thousand copies of one page cost one
//! entry, not a million comparisons. What stays quadratic is inherent: a group whose members
//! really are all within `k` of each other has that many pairs.
//!
//! Memory: one working copy of the values (8 bytes per fingerprint) beside the caller's slice,
//! plus per-block counters and the result.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::simhash::{BlockLayout, SimHash};

/// Groups at most this large are compared pair by pair; larger ones are split again.
pub const DEFAULT_LEAF_SIZE: usize = 256;

/// Sub-blocks narrower than this are not worth splitting on.
const MIN_SUB_BITS: u32 = 4;

/// Finds all pairs within distance `k`.
///
/// ```
/// use neardup_core::allpairs::simhash::AllPairs;
/// use neardup_core::SimHash;
///
/// let fps = [SimHash(0b0000), SimHash(0xffff_0000), SimHash(0b0111)];
/// let m = AllPairs::new(3).unwrap().run(&fps);
/// assert_eq!(m.pairs().collect::<Vec<_>>(), vec![(0, 2, 3)]);
/// ```
#[derive(Clone, Debug)]
pub struct AllPairs {
    layout: BlockLayout,
    leaf: usize,
}

/// Counters of one run, including how skewed the block values were.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllPairsStats {
    /// Fingerprints given.
    pub fingerprints: usize,
    /// Distinct fingerprint values among them.
    pub unique: usize,
    /// Per block: the largest number of distinct fingerprints sharing one block value.
    pub largest_bucket: Vec<usize>,
    /// Per block: the block value of that largest bucket.
    pub largest_bucket_value: Vec<u64>,
    /// Full-distance comparisons made (pair by pair, in small groups).
    pub comparisons: u64,
    /// Groups that were split again because they were large.
    pub splits: u64,
}

/// The result of [`AllPairs::run`].
#[derive(Clone, Debug, Default)]
pub struct Matches {
    /// Pairs of distinct fingerprint values within `k`, each once, smaller value first.
    edges: Vec<(u64, u64, u32)>,
    /// For each value in an edge or held by several inputs: the input positions holding it,
    /// ascending.
    holders: HashMap<u64, Vec<u32>>,
    pub stats: AllPairsStats,
}

/// A connected component of the "within k" graph with at least two members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Input positions, ascending.
    pub members: Vec<u32>,
    /// The largest distance between any two members. It can exceed `k`: A–B and B–C within
    /// `k` put A and C in one cluster however far apart they are.
    pub max_distance: u32,
}

impl AllPairs {
    /// A finder for distance `k` (at most [`crate::simhash::MAX_K`]).
    pub fn new(k: u32) -> crate::Result<AllPairs> {
        Ok(AllPairs {
            layout: BlockLayout::for_distance(k)?,
            leaf: DEFAULT_LEAF_SIZE,
        })
    }

    /// Groups up to this size are compared pair by pair (default [`DEFAULT_LEAF_SIZE`]).
    /// Results do not depend on it, only speed does; tests use small values to exercise
    /// the splitting.
    pub fn leaf_size(mut self, n: usize) -> AllPairs {
        self.leaf = n.max(2);
        self
    }

    /// The distance this finder looks for.
    pub fn k(&self) -> u32 {
        self.layout.k()
    }

    /// Finds all pairs of `fps` within `k`, on the current rayon pool. Input positions must
    /// fit in `u32`.
    pub fn run(&self, fps: &[SimHash]) -> Matches {
        assert!(
            fps.len() <= u32::MAX as usize,
            "at most 2^32 - 1 fingerprints per run"
        );
        let k = self.layout.k();
        let mut work: Vec<u64> = fps.iter().map(|f| f.0).collect();
        let dups = sort_dedup(&mut work);
        let mut stats = AllPairsStats {
            fingerprints: fps.len(),
            unique: work.len(),
            ..AllPairsStats::default()
        };

        let block_masks: Vec<u64> = (0..self.layout.len()).map(|i| self.block_mask(i)).collect();
        let mut edges = Vec::new();
        for (i, &mask) in block_masks.iter().enumerate() {
            let shift = mask.trailing_zeros();
            // Block 0 holds the highest bits, so the sort by full value above already
            // grouped it.
            let (largest, value) = if i == 0 {
                largest_group(&work, mask)
            } else {
                group_by_mask(&mut work, mask)
            };
            stats.largest_bucket.push(largest);
            stats.largest_bucket_value.push(value >> shift);
            if k == 0 {
                // One block of 64 bits: agreeing on it means being identical, and identical
                // values were merged above.
                continue;
            }
            let runs = equal_runs(&mut work, mask);
            let ctx = Ctx { k, leaf: self.leaf };
            let earlier = &block_masks[..i];
            let (mut e, c, s) = runs
                .into_par_iter()
                .fold(
                    || (Vec::new(), 0u64, 0u64),
                    |mut acc, run| {
                        let mut done = earlier.to_vec();
                        ctx.scan(run, &mut done, !mask, &mut acc);
                        acc
                    },
                )
                .reduce(
                    || (Vec::new(), 0, 0),
                    |mut a, mut b| {
                        a.0.append(&mut b.0);
                        (a.0, a.1 + b.1, a.2 + b.2)
                    },
                );
            edges.append(&mut e);
            stats.comparisons += c;
            stats.splits += s;
        }
        edges.sort_unstable();
        drop(work);

        let mut holders: HashMap<u64, Vec<u32>> = HashMap::new();
        for &v in &dups {
            holders.insert(v, Vec::new());
        }
        for &(a, b, _) in &edges {
            holders.entry(a).or_default();
            holders.entry(b).or_default();
        }
        if !holders.is_empty() {
            for (pos, fp) in fps.iter().enumerate() {
                if let Some(h) = holders.get_mut(&fp.0) {
                    h.push(pos as u32);
                }
            }
        }
        Matches {
            edges,
            holders,
            stats,
        }
    }

    fn block_mask(&self, i: usize) -> u64 {
        let w = self.layout.width(i);
        let shift: u32 = (i + 1..self.layout.len())
            .map(|j| self.layout.width(j))
            .sum();
        low_bits(w) << shift
    }
}

fn low_bits(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// Sorts `v` and removes repeated values; returns the values that were repeated.
fn sort_dedup(v: &mut Vec<u64>) -> Vec<u64> {
    radix_sort_by(v, &|x| x, 64, true);
    let mut dups = Vec::new();
    let mut w = 0;
    for r in 0..v.len() {
        if w > 0 && v[w - 1] == v[r] {
            if dups.last() != Some(&v[r]) {
                dups.push(v[r]);
            }
        } else {
            v[w] = v[r];
            w += 1;
        }
    }
    v.truncate(w);
    v.shrink_to_fit();
    dups
}

/// Reorders `v` so that values with equal `x & mask` are contiguous (sorted by the masked
/// value, with an in-place radix sort). Returns the size and masked value of the largest
/// group.
fn group_by_mask(v: &mut [u64], mask: u64) -> (usize, u64) {
    let shift = mask.trailing_zeros();
    let bits = 64 - mask.leading_zeros() - shift;
    radix_sort_by(v, &|x| (x & mask) >> shift, bits, true);
    largest_group(v, mask)
}

/// Size and masked value of the largest group of `v`, which is grouped by `mask`.
fn largest_group(v: &[u64], mask: u64) -> (usize, u64) {
    let mut best = (0, 0);
    let mut i = 0;
    while i < v.len() {
        let key = v[i] & mask;
        let mut j = i + 1;
        while j < v.len() && v[j] & mask == key {
            j += 1;
        }
        if j - i > best.0 {
            best = (j - i, key);
        }
        i = j;
    }
    best
}

/// Sorts `v` by the low `bits` bits of `key` (higher bits of `key` must be equal or zero),
/// most significant byte first, in place. One byte at a time keeps the 256 write positions
/// of a pass in cache; small buckets are finished with a comparison sort.
fn radix_sort_by<F: Fn(u64) -> u64 + Sync>(v: &mut [u64], key: &F, bits: u32, parallel: bool) {
    if bits == 0 || v.len() < 2 {
        return;
    }
    if v.len() <= 64 {
        v.sort_unstable_by_key(|&x| key(x));
        return;
    }
    let step = bits.min(8);
    let shift = bits - step;
    let digit_mask = (1u64 << step) - 1;
    let starts = american_flag(v, 1 << step, |x| ((key(x) >> shift) & digit_mask) as usize);
    if shift == 0 {
        return;
    }
    let mut buckets = Vec::with_capacity(starts.len() - 1);
    let mut rest = v;
    for w in starts.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        rest = tail;
        buckets.push(head);
    }
    if parallel {
        buckets
            .into_par_iter()
            .for_each(|b| radix_sort_by(b, key, shift, false));
    } else {
        for b in buckets {
            radix_sort_by(b, key, shift, false);
        }
    }
}

/// In-place MSD radix step: permutes `v` into `buckets` contiguous buckets by `digit`.
/// Returns the bucket start offsets (`buckets + 1` entries).
fn american_flag(v: &mut [u64], buckets: usize, digit: impl Fn(u64) -> usize) -> Vec<usize> {
    let mut starts = vec![0usize; buckets + 1];
    for &x in v.iter() {
        starts[digit(x) + 1] += 1;
    }
    for b in 0..buckets {
        starts[b + 1] += starts[b];
    }
    let mut next = starts[..buckets].to_vec();
    for b in 0..buckets {
        let end = starts[b + 1];
        while next[b] < end {
            let x = v[next[b]];
            let d = digit(x);
            if d == b {
                next[b] += 1;
            } else {
                v.swap(next[b], next[d]);
                next[d] += 1;
            }
        }
    }
    starts
}

/// Splits `v` (grouped by `mask`) into its runs of equal `x & mask` with at least two members.
fn equal_runs(v: &mut [u64], mask: u64) -> Vec<&mut [u64]> {
    let mut runs = Vec::new();
    let mut rest = v;
    while !rest.is_empty() {
        let key = rest[0] & mask;
        let n = rest
            .iter()
            .position(|&x| x & mask != key)
            .unwrap_or(rest.len());
        let (head, tail) = rest.split_at_mut(n);
        if n > 1 {
            runs.push(head);
        }
        rest = tail;
    }
    runs
}

#[derive(Clone, Copy)]
struct Ctx {
    k: u32,
    leaf: usize,
}

/// Edges, comparisons, splits.
type Acc = (Vec<(u64, u64, u32)>, u64, u64);

impl Ctx {
    /// Finds the pairs within `k` in `run`, whose members agree on every bit outside `free`.
    /// A pair is reported only if it agrees on none of the `done` masks (those groupings were
    /// searched before and reported it there).
    fn scan(&self, run: &mut [u64], done: &mut Vec<u64>, free: u64, acc: &mut Acc) {
        let bits = free.count_ones();
        if run.len() <= self.leaf || bits < (self.k + 1) * MIN_SUB_BITS {
            acc.1 += compare_all(run, done, self.k, &mut acc.0);
            return;
        }
        acc.2 += 1;
        let subs = split_mask(free, self.k + 1);
        let base = done.len();
        for (j, &sub) in subs.iter().enumerate() {
            done.truncate(base);
            done.extend_from_slice(&subs[..j]);
            run.sort_unstable_by_key(|&x| x & sub);
            for r in equal_runs(run, sub) {
                self.scan(r, done, free & !sub, acc);
            }
        }
        done.truncate(base);
    }
}

/// `n` masks of near-equal bit counts that partition the set bits of `free`, lowest first.
fn split_mask(free: u64, n: u32) -> Vec<u64> {
    let total = free.count_ones();
    let (q, r) = (total / n, total % n);
    let mut out = Vec::with_capacity(n as usize);
    let mut rest = free;
    for i in 0..n {
        let want = if i < r { q + 1 } else { q };
        let mut m = 0u64;
        for _ in 0..want {
            let bit = rest & rest.wrapping_neg();
            m |= bit;
            rest &= !bit;
        }
        out.push(m);
    }
    out
}

/// Compares every pair of `run`; returns the number of comparisons.
fn compare_all(run: &[u64], done: &[u64], k: u32, out: &mut Vec<(u64, u64, u32)>) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU supports the instructions this copy is compiled with.
            return unsafe { compare_all_avx2(run, done, k, out) };
        }
    }
    compare_all_portable(run, done, k, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn compare_all_avx2(
    run: &[u64],
    done: &[u64],
    k: u32,
    out: &mut Vec<(u64, u64, u32)>,
) -> u64 {
    compare_all_portable(run, done, k, out)
}

/// Written so the compiler vectorises the common case: count the hits of one value against
/// all later ones (almost always zero), and only then look at which they are.
#[inline(always)]
fn compare_all_portable(run: &[u64], done: &[u64], k: u32, out: &mut Vec<(u64, u64, u32)>) -> u64 {
    match k {
        0 => compare_all_k::<0>(run, done, out),
        1 => compare_all_k::<1>(run, done, out),
        2 => compare_all_k::<2>(run, done, out),
        3 => compare_all_k::<3>(run, done, out),
        4 => compare_all_k::<4>(run, done, out),
        5 => compare_all_k::<5>(run, done, out),
        6 => compare_all_k::<6>(run, done, out),
        _ => compare_all_k::<7>(run, done, out),
    }
}

/// Whether `x` has at most `K` bits set: clearing the lowest set bit `K` times leaves zero.
/// Cheaper than a population count where that is not one instruction, and vectorises.
#[inline(always)]
fn within<const K: u32>(mut x: u64) -> bool {
    for _ in 0..K {
        x &= x.wrapping_sub(1);
    }
    x == 0
}

#[inline(always)]
fn compare_all_k<const K: u32>(run: &[u64], done: &[u64], out: &mut Vec<(u64, u64, u32)>) -> u64 {
    let m = run.len();
    for i in 0..m {
        let a = run[i];
        let rest = &run[i + 1..];
        let hits: u32 = rest.iter().map(|&b| u32::from(within::<K>(a ^ b))).sum();
        if hits == 0 {
            continue;
        }
        for &b in rest {
            let x = a ^ b;
            if within::<K>(x) && !done.iter().any(|&mask| x & mask == 0) {
                out.push((a.min(b), a.max(b), x.count_ones()));
            }
        }
    }
    (m * (m.saturating_sub(1)) / 2) as u64
}

impl Matches {
    /// Number of pairs of input positions within `k` (identical fingerprints included),
    /// without listing them.
    pub fn pair_count(&self) -> u64 {
        let n = |v: u64| self.holders.get(&v).map_or(0, |h| h.len() as u64);
        let same: u64 = self
            .holders
            .values()
            .map(|h| {
                let c = h.len() as u64;
                c * c.saturating_sub(1) / 2
            })
            .sum();
        same + self.edges.iter().map(|&(a, b, _)| n(a) * n(b)).sum::<u64>()
    }

    /// Every pair of input positions within `k`: `(i, j, distance)` with `i < j`, in order
    /// of `i` then `j`. Made one input at a time: memory grows with the linked values and
    /// one input's partners, not with the number of pairs (identical fingerprints held by
    /// many inputs give many pairs; see [`Matches::clusters`] for a compact view).
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        let mut adjacent: HashMap<u64, Vec<(u64, u32)>> = HashMap::new();
        for &(a, b, d) in &self.edges {
            adjacent.entry(a).or_default().push((b, d));
            adjacent.entry(b).or_default().push((a, d));
        }
        let mut positions: Vec<(u32, u64)> = self
            .holders
            .iter()
            .flat_map(|(&v, h)| h.iter().map(move |&i| (i, v)))
            .collect();
        positions.sort_unstable();
        positions.into_iter().flat_map(move |(i, v)| {
            let later = |h: &[u32], d: u32| {
                h.iter()
                    .copied()
                    .filter(move |&j| j > i)
                    .map(move |j| (j, d))
                    .collect::<Vec<_>>()
            };
            let mut partners = later(&self.holders[&v], 0);
            for &(w, d) in adjacent.get(&v).map_or(&[][..], Vec::as_slice) {
                partners.extend(later(&self.holders[&w], d));
            }
            partners.sort_unstable();
            partners.into_iter().map(move |(j, d)| (i, j, d))
        })
    }

    /// Pairs of distinct fingerprint values within `k`: `(a, b, distance)`, `a < b`, sorted.
    pub fn value_pairs(&self) -> impl Iterator<Item = (SimHash, SimHash, u32)> + '_ {
        self.edges
            .iter()
            .map(|&(a, b, d)| (SimHash(a), SimHash(b), d))
    }

    /// Connected components of the "within k" graph with two or more members, ordered by
    /// their first member.
    pub fn clusters(&self) -> Vec<Cluster> {
        let values: Vec<u64> = {
            let mut v: Vec<u64> = self.holders.keys().copied().collect();
            v.sort_unstable();
            v
        };
        let index = |x: u64| values.binary_search(&x).expect("edge values have holders");
        let mut parent: Vec<usize> = (0..values.len()).collect();
        fn root(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for &(a, b, _) in &self.edges {
            let (ra, rb) = (root(&mut parent, index(a)), root(&mut parent, index(b)));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
        let mut comps: HashMap<usize, Vec<u64>> = HashMap::new();
        for (i, &v) in values.iter().enumerate() {
            comps.entry(root(&mut parent, i)).or_default().push(v);
        }
        let mut clusters: Vec<Cluster> = comps
            .into_values()
            .filter_map(|vals| {
                let mut members: Vec<u32> = vals
                    .iter()
                    .flat_map(|v| self.holders[v].iter().copied())
                    .collect();
                if members.len() < 2 {
                    return None;
                }
                members.sort_unstable();
                let mut max_distance = 0;
                for (i, &a) in vals.iter().enumerate() {
                    for &b in &vals[i + 1..] {
                        max_distance = max_distance.max((a ^ b).count_ones());
                    }
                }
                Some(Cluster {
                    members,
                    max_distance,
                })
            })
            .collect();
        clusters.sort_unstable_by_key(|c| c.members[0]);
        clusters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_come_in_input_order_without_collecting_them() {
        // Copies of two values one bit apart, interleaved, plus strangers: every input pair
        // among the copies, in (i, j) order, straight from the iterator.
        let fps: Vec<SimHash> = (0..120u64)
            .map(|i| match i % 3 {
                0 => SimHash(0xdead_beef),
                1 => SimHash(0xdead_beee),
                _ => SimHash(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            })
            .collect();
        let m = AllPairs::new(3).unwrap().run(&fps);
        let got: Vec<(u32, u32, u32)> = m.pairs().collect();
        assert_eq!(got, brute(&fps, 3));
        assert_eq!(m.pair_count(), got.len() as u64);
    }

    fn brute(fps: &[SimHash], k: u32) -> Vec<(u32, u32, u32)> {
        let mut out = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = fps[i].distance(fps[j]);
                if d <= k {
                    out.push((i as u32, j as u32, d));
                }
            }
        }
        out
    }

    fn sorted(mut v: Vec<(u32, u32, u32)>) -> Vec<(u32, u32, u32)> {
        v.sort_unstable();
        v
    }

    #[test]
    fn split_mask_partitions() {
        let free = !(0xffffu64 << 16);
        let subs = split_mask(free, 4);
        assert_eq!(subs.iter().map(|m| m.count_ones()).sum::<u32>(), 48);
        assert_eq!(subs.iter().fold(0, |a, m| a | m), free);
        assert_eq!(subs.iter().fold(0, |a, m| a ^ m), free);
    }

    #[test]
    fn identical_values_form_one_cluster() {
        let fps = vec![SimHash(7), SimHash(1 << 40), SimHash(7), SimHash(7)];
        let m = AllPairs::new(3).unwrap().run(&fps);
        assert_eq!(
            sorted(m.pairs().collect()),
            vec![(0, 2, 0), (0, 3, 0), (2, 3, 0)]
        );
        assert_eq!(m.pair_count(), 3);
        assert_eq!(
            m.clusters(),
            vec![Cluster {
                members: vec![0, 2, 3],
                max_distance: 0
            }]
        );
    }

    #[test]
    fn skewed_group_is_split_and_still_exact() {
        // 400 values sharing block A and B, random-ish elsewhere, with planted neighbours.
        let mut fps = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..400u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (0xabcd_1234u64 << 32) | (x & 0xffff_ffff);
            fps.push(SimHash(v));
            if i % 10 == 0 {
                fps.push(SimHash(v ^ (1 << (i % 32)) ^ (1 << ((i + 5) % 32))));
            }
        }
        for k in 0..=7 {
            let m = AllPairs::new(k).unwrap().leaf_size(8).run(&fps);
            assert_eq!(sorted(m.pairs().collect()), brute(&fps, k), "k={k}");
            assert_eq!(m.pair_count(), brute(&fps, k).len() as u64);
            if k >= 3 {
                assert!(m.stats.splits > 0, "k={k}: the big group should be split");
            }
        }
    }
}

//! Queries: the block and band lookups, and the snapshots they read.

use std::collections::HashSet;
use std::path::Path;

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};

use super::error::{DbContext, StoreResult};
use super::tables::{
    band_prefix, block_fingerprint, block_range, find, fingerprint_of, signature_of, Keys, BANDS,
    BLOCKS, DOCS, IDS,
};
use super::{query_mismatch, store_query, Store};
use crate::method::{sort_matches, Match, Query, Score, Sketch, Tolerance};
use crate::minhash::MinHashParams;
use crate::relation::MatchOptions;
use crate::simhash::{hamming, BlockLayout, SimHash};

/// How a query finds candidates. Results never depend on it; only speed does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Plan {
    /// Block lookups, or a scan of all documents when a query far beyond the store's `k`
    /// would need more lookups than the store has documents to read.
    #[default]
    Auto,
    /// Always block lookups (their number grows fast with the distance beyond the
    /// store's `k`: far beyond it, this is much slower than a scan).
    Index,
    /// Always read every document.
    Scan,
}

/// A consistent read-only view of a store (one read transaction). Cheap to make; make a
/// new one to see later writes.
pub struct Snapshot<'s> {
    pub(super) store: &'s Store,
    pub(super) txn: ReadTransaction,
}

impl Snapshot<'_> {
    /// Number of documents.
    pub fn len(&self) -> StoreResult<u64> {
        let path = &self.store.path;
        self.txn.open_table(DOCS).at(path)?.len().at(path)
    }

    /// Whether the store holds no document.
    pub fn is_empty(&self) -> StoreResult<bool> {
        Ok(self.len()? == 0)
    }

    /// The sketch stored for `id`.
    pub fn get(&self, id: &str) -> StoreResult<Option<Sketch>> {
        let path = &self.store.path;
        let keys = &self.store.keys;
        let ids = self.txn.open_table(IDS).at(path)?;
        let docs = self.txn.open_table(DOCS).at(path)?;
        Ok(find(&ids, &docs, keys, id, path)?.map(|(doc, bytes)| {
            let (sketch, _) = keys.split(&bytes, doc, path).expect("checked by find");
            keys.sketch(sketch)
        }))
    }

    /// See [`Store::similar`].
    pub fn similar(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        self.similar_with(sketch, tolerance, exclude, Plan::Auto, options)
    }

    /// [`Snapshot::similar`] with a chosen [`Plan`].
    pub fn similar_with(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        plan: Plan,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        self.find(sketch, tolerance, exclude, plan, options)
    }

    /// See [`Store::similar_to_id`].
    pub fn similar_to_id(
        &self,
        id: &str,
        tolerance: Tolerance,
        options: &MatchOptions,
    ) -> StoreResult<Option<Vec<Match>>> {
        match self.get(id)? {
            Some(s) => Ok(Some(self.similar(&s, tolerance, Some(id), options)?)),
            None => Ok(None),
        }
    }

    /// The matches of `sketch`: MinHash ones related under `options`, each with its
    /// relation; SimHash ones within the distance (SimHash has no relation but
    /// near-duplicate, and no containment).
    pub(super) fn find(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        plan: Plan,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        let path = &self.store.path;
        let query = store_query(path, self.store.method(), sketch, tolerance)?;
        let docs = self.txn.open_table(DOCS).at(path)?;
        match (&self.store.keys, &query) {
            (keys @ Keys::Blocks(layout), &Query::SimHash { fingerprint, k }) => {
                let blocks = self.txn.open_table(BLOCKS).at(path)?;
                let probe = BlockProbe {
                    layout,
                    fp: fingerprint,
                    k,
                    exclude,
                    plan,
                };
                probe.run(&blocks, &docs, keys, path)
            }
            (keys @ Keys::Bands(p), Query::MinHash { .. }) => {
                let bands = self.txn.open_table(BANDS).at(path)?;
                probe_bands(&bands, &docs, keys, p, &query, exclude, plan, options, path)
            }
            (_, q) => Err(query_mismatch(path, self.store.method(), q.method())),
        }
    }

    /// Every document, in id order.
    pub fn documents(&self) -> StoreResult<Vec<(String, Sketch)>> {
        let path = &self.store.path;
        let keys = &self.store.keys;
        let docs = self.txn.open_table(DOCS).at(path)?;
        let mut out = Vec::new();
        for entry in docs.iter().at(path)? {
            let (doc, bytes) = entry.at(path)?;
            let (sketch, id) = keys.split(bytes.value(), doc.value(), path)?;
            out.push((id.to_owned(), keys.sketch(sketch)));
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The MinHash query: every document sharing a band with the query's signature that is
/// related to it under `options` (a near-duplicate: estimated Jaccard similarity at its
/// threshold; or, with a containment rule, one contained in the other), with its relation
/// (or, with [`Plan::Scan`], every such document, band or not). Each candidate
/// is scored once, however many bands it shares. A document under the query's 32-bit key
/// prefix in band `i` shares band `i` only if its full key, recomputed from its signature, is
/// the query's: prefix collisions are read and dropped, never answered. A SimHash query finds
/// nothing here.
#[allow(clippy::too_many_arguments)]
pub(super) fn probe_bands<B, D>(
    bands: &B,
    docs: &D,
    keys: &Keys,
    params: &MinHashParams,
    query: &Query,
    exclude: Option<&str>,
    plan: Plan,
    options: &MatchOptions,
    path: &Path,
) -> StoreResult<Vec<Match>>
where
    B: ReadableTable<(u8, u32, u32), ()>,
    D: ReadableTable<u32, &'static [u8]>,
{
    let Query::MinHash { signature: sig, .. } = query else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut consider = |id: &str, other: Sketch| {
        if exclude != Some(id) {
            out.extend(query.relate(&other, options).map(|r| Match::related(id, r)));
        }
    };
    if plan == Plan::Scan {
        for entry in docs.iter().at(path)? {
            let (doc, bytes) = entry.at(path)?;
            let (sketch, id) = keys.split(bytes.value(), doc.value(), path)?;
            consider(id, keys.sketch(sketch));
        }
    } else {
        let mut seen = HashSet::new();
        for (i, key) in sig.band_keys(params).into_iter().enumerate() {
            let (band, prefix) = (i as u8, band_prefix(key));
            for entry in bands
                .range((band, prefix, 0)..=(band, prefix, u32::MAX))
                .at(path)?
            {
                let doc = entry.at(path)?.0.value().2;
                if seen.contains(&doc) {
                    continue;
                }
                let Some(bytes) = docs.get(doc).at(path)? else {
                    return Err(missing_doc(path, doc));
                };
                let (sketch, id) = keys.split(bytes.value(), doc, path)?;
                let other = signature_of(sketch);
                if other.band_key(params, i) != key {
                    // Only the 32-bit prefix is shared: not a band.
                    continue;
                }
                seen.insert(doc);
                consider(id, Sketch::MinHash(other));
            }
        }
    }
    sort_matches(&mut out);
    Ok(out)
}

pub(super) fn missing_doc(path: &Path, doc: u32) -> super::StoreError {
    super::StoreError::Inconsistent {
        path: path.to_owned(),
        detail: format!("a key table lists document #{doc}, which is not stored"),
    }
}

/// Number of values within `r` bits of a `width`-bit value: Σ C(width, j), j ≤ r.
fn ball_size(width: u32, r: u32) -> u64 {
    let mut total = 0u64;
    let mut c = 1u64;
    for j in 0..=r.min(width) {
        total = total.saturating_add(c);
        c = c.saturating_mul(u64::from(width - j)) / u64::from(j + 1);
    }
    total
}

/// Calls `f` with every value that differs from `v` in at most `r` of its low `width` bits.
fn for_each_within<E>(
    v: u64,
    width: u32,
    r: u32,
    f: &mut impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    f(v)?;
    if r > 0 {
        for bit in 0..width {
            flip_from(v ^ (1 << bit), bit + 1, width, r - 1, f)?;
        }
    }
    Ok(())
}

fn flip_from<E>(
    v: u64,
    from: u32,
    width: u32,
    left: u32,
    f: &mut impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    f(v)?;
    if left > 0 {
        for bit in from..width {
            flip_from(v ^ (1 << bit), bit + 1, width, left - 1, f)?;
        }
    }
    Ok(())
}

/// A SimHash query. With `k + 1` blocks of the store's layout and a query distance `d`, two
/// fingerprints within `d` have a block in which they differ in at most `r = d / (k + 1)`
/// bits (pigeonhole). So probing, for each block, every value within `r` bits of the query's
/// finds every neighbour; with `d ≤ k` that is just the query's own block values. A candidate
/// is counted only in the first block where it is within `r`, so none comes out twice.
pub(super) struct BlockProbe<'a> {
    pub layout: &'a BlockLayout,
    pub fp: SimHash,
    pub k: u32,
    pub exclude: Option<&'a str>,
    pub plan: Plan,
}

impl BlockProbe<'_> {
    pub(super) fn run<B, D>(
        &self,
        blocks: &B,
        docs: &D,
        keys: &Keys,
        path: &Path,
    ) -> StoreResult<Vec<Match>>
    where
        B: ReadableTable<(u8, u64, u32), ()>,
        D: ReadableTable<u32, &'static [u8]>,
    {
        let (layout, fp, k) = (self.layout, self.fp, self.k);
        let r = k / layout.len() as u32;
        let lookups: u64 = (0..layout.len())
            .map(|i| ball_size(layout.width(i), r))
            .sum();
        let scan = match self.plan {
            Plan::Scan => true,
            Plan::Index => false,
            // A lookup costs about as much as reading a few dozen documents in order.
            Plan::Auto => r > 0 && lookups.saturating_mul(32) > docs.len().at(path)?,
        };
        let mut out = Vec::new();
        if scan {
            for entry in docs.iter().at(path)? {
                let (doc, bytes) = entry.at(path)?;
                let (sketch, id) = keys.split(bytes.value(), doc.value(), path)?;
                let c = fingerprint_of(sketch);
                let d = hamming(c.0, fp.0);
                if d <= k && self.exclude != Some(id) {
                    out.push(Match::new(id, Score::Distance(d)));
                }
            }
        } else {
            let q: Vec<u64> = layout.blocks(fp).collect();
            for (i, &qi) in q.iter().enumerate() {
                for_each_within(qi, layout.width(i), r, &mut |value| {
                    let (lo, hi) = block_range(layout, i, value);
                    let b = i as u8;
                    for entry in blocks.range((b, lo, 0)..=(b, hi, u32::MAX)).at(path)? {
                        let (key, doc) = {
                            let e = entry.at(path)?;
                            let v = e.0.value();
                            (v.1, v.2)
                        };
                        let c = block_fingerprint(layout, key, i);
                        let d = hamming(c.0, fp.0);
                        if d > k || (0..i).any(|j| hamming(layout.block(c, j), q[j]) <= r) {
                            continue;
                        }
                        let Some(bytes) = docs.get(doc).at(path)? else {
                            return Err(missing_doc(path, doc));
                        };
                        let (_, id) = keys.split(bytes.value(), doc, path)?;
                        if self.exclude != Some(id) {
                            out.push(Match::new(id, Score::Distance(d)));
                        }
                    }
                    Ok::<(), super::StoreError>(())
                })?;
            }
        }
        sort_matches(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two documents whose band keys share their stored 32-bit prefix but not the full key
    /// do not share the band: the index must not answer one for the other.
    #[test]
    fn a_band_key_prefix_collision_is_not_a_shared_band() {
        use crate::minhash::{MinHashParams, Signature};
        use crate::store::StoreConfig;
        use crate::Method;
        let p: MinHashParams = "n=6;bands=2x3".parse().unwrap();
        // Birthday search for two band-0 triples with the same key prefix.
        let mut seen = std::collections::HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (a, b) = loop {
            x = x.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1);
            let t = [(x >> 32) as u32, x as u32, (x >> 16) as u32];
            let sig = Signature::from_values(vec![t[0], t[1], t[2], 7, 8, 9]);
            let key = sig.band_key(&p, 0);
            match seen.insert(band_prefix(key), (t, key)) {
                Some((other, k)) if k != key => break (other, t),
                _ => {}
            }
        };
        // They agree on the second band's values, but its key is made to differ too.
        let sa = Signature::from_values(vec![a[0], a[1], a[2], 7, 8, 9]);
        let sb = Signature::from_values(vec![b[0], b[1], b[2], 7, 8, 10]);
        let config = StoreConfig {
            method: Method::MinHash,
            profile: "minhash".into(),
            version: "t".into(),
            k: 0,
            minhash: Some(p),
            fold: false,
            boilerplate: None,
        };
        let store = Store::in_memory(&config).unwrap();
        store.upsert_batch(&[("a", sa.clone()), ("b", sb)]).unwrap();
        assert_eq!(store.verify().unwrap(), 2);
        let t = Tolerance::Similarity(crate::Threshold::new(0.3).unwrap());
        let snap = store.snapshot().unwrap();
        let q = Sketch::MinHash(sa);
        // b estimates 2/6 ≥ 0.3 but shares no band with a: only a scan finds it.
        let only = MatchOptions::NEAR_DUPLICATES_ONLY;
        let index = snap
            .similar_with(&q, t, Some("a"), Plan::Index, &only)
            .unwrap();
        assert!(index.is_empty(), "{index:?}");
        let scan = snap
            .similar_with(&q, t, Some("a"), Plan::Scan, &only)
            .unwrap();
        assert_eq!(scan.len(), 1);
    }

    #[test]
    fn ball_sizes() {
        assert_eq!(ball_size(16, 0), 1);
        assert_eq!(ball_size(16, 1), 17);
        assert_eq!(ball_size(16, 2), 137);
        assert_eq!(ball_size(3, 5), 8);
    }

    #[test]
    fn for_each_within_visits_the_ball_once() {
        for r in 0..=3 {
            let mut seen = Vec::new();
            for_each_within(0b1010_1010u64, 8, r, &mut |v| {
                seen.push(v);
                Ok::<(), ()>(())
            })
            .unwrap();
            let n = seen.len();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), n, "r={r}: no value twice");
            assert_eq!(n as u64, ball_size(8, r));
            assert!(seen
                .iter()
                .all(|v| (v ^ 0b1010_1010).count_ones() <= r && *v < 256));
        }
    }
}

//! Queries: the block and band lookups, and the snapshots they read.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};

use super::error::{DbContext, StoreResult};
use super::tables::{
    band_prefix, block_fingerprint, block_range, find, fingerprint_of, signature_of, Keys, BANDS,
    BLOCKS, DOCS, IDS, MINIMA,
};
use crate::store::{query_mismatch, store_query, Store};
use neardup_core::method::{sort_matches, Match, Query, Score, Sketch, Tolerance};
use neardup_core::minhash::{MinHashParams, Signature};
use neardup_core::relation::{candidate_agreeing_minima, MatchOptions};
use neardup_core::simhash::{hamming, BlockLayout, SimHash};

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
                let minima = if wants_containment(options) && plan != Plan::Scan {
                    Some(self.txn.open_table(MINIMA).at(path)?)
                } else {
                    None
                };
                probe_bands(
                    &bands,
                    minima.as_ref(),
                    &docs,
                    keys,
                    p,
                    &query,
                    exclude,
                    plan,
                    options,
                    path,
                )
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

/// Whether a query under `options` asks for containment, and so reads the `minima` table:
/// near-duplicate queries never do.
pub(super) fn wants_containment(options: &MatchOptions) -> bool {
    options.containment.is_some()
}

/// The MinHash query: every document sharing a band with the query's signature that is
/// related to it under `options` (a near-duplicate: estimated Jaccard similarity at its
/// threshold; or, with a containment rule, one contained in the other), with its relation
/// (or, with [`Plan::Scan`], every such document, band or not). With `minima`
/// (given only when `options` ask for containment), the documents with at least
/// [`candidate_agreeing_minima`] of the query's minima ([`agreeing`]) are candidates too, and
/// kept when related. Each candidate is scored once, however many bands it shares. A document
/// under the query's 32-bit key prefix in band `i` shares band `i` only if its full key,
/// recomputed from its signature, is the query's: prefix collisions are read and dropped,
/// never answered. A SimHash query finds nothing here.
#[allow(clippy::too_many_arguments)]
pub(super) fn probe_bands<B, M, D>(
    bands: &B,
    minima: Option<&M>,
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
    M: ReadableTable<(u16, u32, u32), ()>,
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
        if let Some(minima) = minima {
            let m = candidate_agreeing_minima(sig.len());
            for doc in agreeing(minima, sig, m, path)? {
                if seen.contains(&doc) {
                    continue;
                }
                let Some(bytes) = docs.get(doc).at(path)? else {
                    return Err(missing_doc(path, doc));
                };
                let (sketch, id) = keys.split(bytes.value(), doc, path)?;
                consider(id, Sketch::MinHash(signature_of(sketch)));
            }
        }
    }
    sort_matches(&mut out);
    Ok(out)
}

/// The containment candidate step: the documents filed in `minima` with at least `m` of
/// `sig`'s minima at the same positions, in number order.
pub(super) fn agreeing<M>(
    minima: &M,
    sig: &Signature,
    m: usize,
    path: &Path,
) -> StoreResult<Vec<u32>>
where
    M: ReadableTable<(u16, u32, u32), ()>,
{
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for (i, &v) in sig.values().iter().enumerate() {
        let i = i as u16;
        for entry in minima.range((i, v, 0)..=(i, v, u32::MAX)).at(path)? {
            *counts.entry(entry.at(path)?.0.value().2).or_default() += 1;
        }
    }
    let mut out: Vec<u32> = counts
        .into_iter()
        .filter(|&(_, n)| n >= m)
        .map(|(doc, _)| doc)
        .collect();
    out.sort_unstable();
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

impl Store {
    /// A consistent read-only view as of now; concurrent writes do not affect it.
    pub fn snapshot(&self) -> StoreResult<Snapshot<'_>> {
        Ok(Snapshot {
            store: self,
            txn: self.db.begin_read().at(&self.path)?,
        })
    }

    /// Number of documents.
    pub fn len(&self) -> StoreResult<u64> {
        self.snapshot()?.len()
    }

    /// Whether the store holds no document.
    pub fn is_empty(&self) -> StoreResult<bool> {
        Ok(self.len()? == 0)
    }

    /// The sketch stored for `id`.
    pub fn get(&self, id: &str) -> StoreResult<Option<Sketch>> {
        self.snapshot()?.get(id)
    }

    /// Stored documents related to `sketch` under `options`, nearest first (ties by id):
    /// near-duplicates within `tolerance` and, with a containment rule, articles contained in
    /// it or containing it; each MinHash match says its relation, read from the query, and
    /// the containment estimate (see [`neardup_core::relation`]). Under
    /// [`MatchOptions::NEAR_DUPLICATES_ONLY`], near-duplicates only. SimHash matches are
    /// near-duplicates within the distance, without a relation. `exclude` leaves one id out,
    /// e.g. the document the query came from. A `u32` tolerance is a SimHash distance.
    pub fn similar(
        &self,
        sketch: impl Into<Sketch>,
        tolerance: impl Into<Tolerance>,
        exclude: Option<&str>,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        self.snapshot()?
            .similar(&sketch.into(), tolerance.into(), exclude, options)
    }

    /// [`Store::similar`] for the stored document `id`, itself excluded; `None` if `id` is
    /// not stored.
    pub fn similar_to_id(
        &self,
        id: &str,
        tolerance: impl Into<Tolerance>,
        options: &MatchOptions,
    ) -> StoreResult<Option<Vec<Match>>> {
        self.snapshot()?
            .similar_to_id(id, tolerance.into(), options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Op, StoreConfig};
    use neardup_core::minhash::{MinHasher, Signature};
    use neardup_core::relation::{MatchOptions, Relation};
    use neardup_core::{Method, Threshold};
    use proptest::prelude::*;

    fn minhash_store(params: &str) -> Store {
        Store::in_memory(&StoreConfig {
            method: Method::MinHash,
            profile: "minhash".into(),
            version: "t".into(),
            k: 0,
            minhash: Some(params.parse().unwrap()),
            fold: false,
            boilerplate: None,
        })
        .unwrap()
    }

    fn agreeing_ids(store: &Store, sig: &Signature, m: usize) -> Vec<String> {
        let snap = store.snapshot().unwrap();
        let path = &store.path;
        let minima = snap.txn.open_table(MINIMA).unwrap();
        let docs = snap.txn.open_table(DOCS).unwrap();
        let mut ids: Vec<String> = agreeing(&minima, sig, m, path)
            .unwrap()
            .into_iter()
            .map(|doc| {
                let bytes = docs.get(doc).unwrap().unwrap();
                store
                    .keys
                    .split(bytes.value(), doc, path)
                    .unwrap()
                    .1
                    .to_owned()
            })
            .collect();
        ids.sort_unstable();
        ids
    }

    proptest! {
        /// The candidate step returns exactly the stored documents with at least `m` minima
        /// equal to the query's at the same positions, after inserts, replacements and
        /// deletions; the tables stay consistent.
        #[test]
        fn agreeing_is_exactly_the_documents_with_m_agreeing_minima(
            docs in proptest::collection::vec(proptest::collection::vec(0u32..4, 16), 1..24),
            replaced in proptest::collection::vec(proptest::collection::vec(0u32..4, 16), 0..6),
            deleted in proptest::collection::vec(0usize..24, 0..6),
            query in proptest::collection::vec(0u32..4, 16),
            m in 1usize..=16,
        ) {
            let store = minhash_store("n=16;bands=4x4");
            let mut held: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
            let sketches: Vec<(String, Sketch)> = docs
                .iter()
                .chain(&replaced)
                .enumerate()
                .map(|(i, v)| {
                    let id = format!("d{}", i % docs.len());
                    held.insert(id.clone(), v.clone());
                    (id, Sketch::MinHash(Signature::from_values(v.clone())))
                })
                .collect();
            let ops: Vec<Op<'_>> = sketches.iter().map(|(id, s)| Op::Upsert(id, s)).collect();
            store.write(&ops).unwrap();
            let gone: Vec<String> = deleted.iter().map(|i| format!("d{i}")).collect();
            store.delete(&gone.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
            for id in &gone {
                held.remove(id);
            }
            prop_assert_eq!(store.verify().unwrap(), held.len() as u64);
            let want: Vec<String> = held
                .iter()
                .filter(|(_, v)| v.iter().zip(&query).filter(|(a, b)| a == b).count() >= m)
                .map(|(id, _)| id.clone())
                .collect();
            let got = agreeing_ids(&store, &Signature::from_values(query), m);
            prop_assert_eq!(got, want);
        }
    }

    fn text(mh: &MinHasher, r: std::ops::Range<u64>) -> Signature {
        let words: Vec<u64> = r.map(|w| w.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        mh.signature_of_hashes(&[words]).unwrap()
    }

    /// A 20 % lead and a 20 % passage share no band with their article at the default
    /// parameters here, and are found from either side, with their direction, only through
    /// the minima; near-duplicate queries neither find them nor read the minima.
    #[test]
    fn containment_queries_find_small_excerpts_from_either_side_through_the_minima() {
        let store = minhash_store("n=128;bands=42x3");
        let Keys::Bands(p) = store.keys.clone() else {
            panic!("a MinHash store")
        };
        let mh = MinHasher::new(p);
        let full = text(&mh, 0..1000);
        // Excerpts that share no band with the full article (so only the minima find them).
        let mut excerpts = Vec::new();
        for start in (0..=800).step_by(200) {
            let e = text(&mh, start..start + 200);
            let kf = full.band_keys(&p);
            if !e.band_keys(&p).iter().zip(&kf).any(|(a, b)| a == b) {
                excerpts.push((format!("x{start}"), e));
            }
            if excerpts.len() == 3 {
                break;
            }
        }
        assert_eq!(excerpts.len(), 3, "excerpts without a shared band");
        let mut docs = vec![("full".to_owned(), full.clone())];
        docs.extend(excerpts.iter().cloned());
        let refs: Vec<(&str, Signature)> =
            docs.iter().map(|(i, s)| (i.as_str(), s.clone())).collect();
        store.upsert_batch(&refs).unwrap();
        let t = Tolerance::Similarity(Threshold::new(0.3).unwrap());
        let all = MatchOptions::default();
        let from_full = store.similar_to_id("full", t, &all).unwrap().unwrap();
        let mut found: Vec<(&str, Relation)> = from_full
            .iter()
            .map(|m| (m.id.as_str(), m.relation.unwrap()))
            .collect();
        found.sort_unstable_by_key(|x| x.0);
        let mut want: Vec<(&str, Relation)> = excerpts
            .iter()
            .map(|(id, _)| (id.as_str(), Relation::Contains))
            .collect();
        want.sort_unstable_by_key(|x| x.0);
        assert_eq!(found, want);
        for (id, _) in &excerpts {
            let back = store.similar_to_id(id, t, &all).unwrap().unwrap();
            let full_match = back.iter().find(|m| m.id == "full").unwrap();
            assert_eq!(full_match.relation, Some(Relation::ContainedIn));
        }
        let near = MatchOptions::NEAR_DUPLICATES_ONLY;
        assert!(store
            .similar_to_id("full", t, &near)
            .unwrap()
            .unwrap()
            .is_empty());
        // Without the minima table, near-duplicate queries answer as before: they never read it.
        let txn = store.begin_write().unwrap();
        assert!(txn.delete_table(MINIMA).unwrap());
        txn.commit().unwrap();
        assert!(store
            .similar_to_id("full", t, &near)
            .unwrap()
            .unwrap()
            .is_empty());
        assert_eq!(
            store
                .similar_to_id(&excerpts[0].0, t, &near)
                .unwrap()
                .unwrap(),
            Vec::<Match>::new()
        );
        assert!(store.similar_to_id("full", t, &all).is_err());
    }

    /// Two documents whose band keys share their stored 32-bit prefix but not the full key
    /// do not share the band: the index must not answer one for the other.
    #[test]
    fn a_band_key_prefix_collision_is_not_a_shared_band() {
        use crate::StoreConfig;
        use neardup_core::minhash::{MinHashParams, Signature};
        use neardup_core::Method;
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
        let t = Tolerance::Similarity(neardup_core::Threshold::new(0.3).unwrap());
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

//! Queries: the block and band lookups, and the snapshots they read.

use std::path::Path;

use redb::{ReadTransaction, ReadableMultimapTable, ReadableTable, ReadableTableMetadata};

use super::error::{DbContext, StoreResult};
use super::tables::{decode_signature, Keys, BANDS, BLOCKS, DOCS, SIGNATURES};
use super::{query_mismatch, store_query, Store};
use crate::method::{sort_matches, Match, Query, Score, Sketch, Tolerance};
use crate::minhash::MinHashParams;
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
        match &self.store.keys {
            Keys::Blocks(_) => self.txn.open_table(DOCS).at(path)?.len().at(path),
            Keys::Bands(_) => self.txn.open_table(SIGNATURES).at(path)?.len().at(path),
        }
    }

    /// Whether the store holds no document.
    pub fn is_empty(&self) -> StoreResult<bool> {
        Ok(self.len()? == 0)
    }

    /// The sketch stored for `id`.
    pub fn get(&self, id: &str) -> StoreResult<Option<Sketch>> {
        let path = &self.store.path;
        match &self.store.keys {
            Keys::Blocks(_) => {
                let docs = self.txn.open_table(DOCS).at(path)?;
                Ok(docs
                    .get(id)
                    .at(path)?
                    .map(|g| Sketch::SimHash(SimHash(g.value()))))
            }
            Keys::Bands(p) => {
                let sigs = self.txn.open_table(SIGNATURES).at(path)?;
                let found = sigs.get(id).at(path)?;
                found
                    .map(|g| decode_signature(g.value(), p, id, path).map(Sketch::MinHash))
                    .transpose()
            }
        }
    }

    /// See [`Store::similar`].
    pub fn similar(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
    ) -> StoreResult<Vec<Match>> {
        self.similar_with(sketch, tolerance, exclude, Plan::Auto)
    }

    /// [`Snapshot::similar`] with a chosen [`Plan`].
    pub fn similar_with(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        plan: Plan,
    ) -> StoreResult<Vec<Match>> {
        let path = &self.store.path;
        let query = store_query(path, self.store.method(), sketch, tolerance)?;
        match (&self.store.keys, &query) {
            (Keys::Blocks(layout), &Query::SimHash { fingerprint, k }) => {
                let docs = self.txn.open_table(DOCS).at(path)?;
                let blocks = self.txn.open_multimap_table(BLOCKS).at(path)?;
                probe_blocks(&blocks, &docs, layout, fingerprint, k, exclude, plan).at(path)
            }
            (Keys::Bands(p), Query::MinHash { .. }) => {
                let sigs = self.txn.open_table(SIGNATURES).at(path)?;
                let bands = self.txn.open_multimap_table(BANDS).at(path)?;
                probe_bands(&bands, &sigs, p, &query, exclude, plan, path)
            }
            (_, q) => Err(query_mismatch(path, self.store.method(), q.method())),
        }
    }

    /// See [`Store::similar_to_id`].
    pub fn similar_to_id(&self, id: &str, tolerance: Tolerance) -> StoreResult<Option<Vec<Match>>> {
        match self.get(id)? {
            Some(s) => Ok(Some(self.similar(&s, tolerance, Some(id))?)),
            None => Ok(None),
        }
    }

    /// Every document, in id order.
    pub fn documents(&self) -> StoreResult<Vec<(String, Sketch)>> {
        let path = &self.store.path;
        let mut out = Vec::new();
        match &self.store.keys {
            Keys::Blocks(_) => {
                let docs = self.txn.open_table(DOCS).at(path)?;
                for entry in docs.iter().at(path)? {
                    let (id, fp) = entry.at(path)?;
                    out.push((id.value().to_owned(), Sketch::SimHash(SimHash(fp.value()))));
                }
            }
            Keys::Bands(p) => {
                let sigs = self.txn.open_table(SIGNATURES).at(path)?;
                for entry in sigs.iter().at(path)? {
                    let (id, sig) = entry.at(path)?;
                    let id = id.value();
                    let sig = decode_signature(sig.value(), p, id, path)?;
                    out.push((id.to_owned(), Sketch::MinHash(sig)));
                }
            }
        }
        Ok(out)
    }
}

/// The MinHash query: every document sharing a band with the query's signature whose
/// estimated Jaccard similarity reaches its threshold (or, with [`Plan::Scan`], every document
/// that reaches it, band or not). Each candidate is read once, however many bands it shares.
/// A SimHash query finds nothing here.
pub(super) fn probe_bands<B, S>(
    bands: &B,
    sigs: &S,
    params: &MinHashParams,
    query: &Query,
    exclude: Option<&str>,
    plan: Plan,
    path: &Path,
) -> StoreResult<Vec<Match>>
where
    B: ReadableMultimapTable<(u8, u64), &'static str>,
    S: ReadableTable<&'static str, &'static [u8]>,
{
    let Query::MinHash { signature: sig, .. } = query else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut consider = |id: &str, bytes: &[u8]| -> StoreResult<()> {
        if exclude == Some(id) {
            return Ok(());
        }
        let other = Sketch::MinHash(decode_signature(bytes, params, id, path)?);
        if let Some(score) = query.score(&other) {
            out.push(Match::new(id, score));
        }
        Ok(())
    };
    if plan == Plan::Scan {
        for entry in sigs.iter().at(path)? {
            let (id, bytes) = entry.at(path)?;
            consider(id.value(), bytes.value())?;
        }
    } else {
        let mut seen = std::collections::HashSet::new();
        for (i, key) in sig.band_keys(params).into_iter().enumerate() {
            for entry in bands.get((i as u8, key)).at(path)? {
                let entry = entry.at(path)?;
                let id = entry.value();
                if !seen.insert(id.to_owned()) {
                    continue;
                }
                if let Some(bytes) = sigs.get(id).at(path)? {
                    consider(id, bytes.value())?;
                }
            }
        }
    }
    sort_matches(&mut out);
    Ok(out)
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

/// The query. With `k + 1` blocks of the store's layout and a query distance `d`, two
/// fingerprints within `d` have a block in which they differ in at most `r = d / (k + 1)`
/// bits (pigeonhole). So probing, for each block, every value within `r` bits of the query's
/// finds every neighbour; with `d ≤ k` that is just the query's own block values. A candidate
/// is counted only in the first block where it is within `r`, so none comes out twice.
pub(super) fn probe_blocks<B, D>(
    blocks: &B,
    docs: &D,
    layout: &BlockLayout,
    fp: SimHash,
    k: u32,
    exclude: Option<&str>,
    plan: Plan,
) -> Result<Vec<Match>, redb::StorageError>
where
    B: ReadableMultimapTable<(u8, u64), (u64, &'static str)>,
    D: ReadableTable<&'static str, u64>,
{
    let r = k / layout.len() as u32;
    let lookups: u64 = (0..layout.len())
        .map(|i| ball_size(layout.width(i), r))
        .sum();
    let scan = match plan {
        Plan::Scan => true,
        Plan::Index => false,
        // A lookup costs about as much as reading a few dozen documents in order.
        Plan::Auto => r > 0 && lookups.saturating_mul(32) > docs.len()?,
    };
    let mut out = Vec::new();
    if scan {
        for entry in docs.iter()? {
            let (id, v) = entry?;
            let d = hamming(v.value(), fp.0);
            let id = id.value();
            if d <= k && exclude != Some(id) {
                out.push(Match::new(id, Score::Distance(d)));
            }
        }
    } else {
        let q: Vec<u64> = layout.blocks(fp).collect();
        for (i, &qi) in q.iter().enumerate() {
            for_each_within(qi, layout.width(i), r, &mut |value| {
                for entry in blocks.get((i as u8, value))? {
                    let entry = entry?;
                    let (c, id) = entry.value();
                    let d = hamming(c, fp.0);
                    if d > k || exclude == Some(id) {
                        continue;
                    }
                    let c = SimHash(c);
                    if (0..i).any(|j| hamming(layout.block(c, j), q[j]) <= r) {
                        continue;
                    }
                    out.push(Match::new(id, Score::Distance(d)));
                }
                Ok::<(), redb::StorageError>(())
            })?;
        }
    }
    sort_matches(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

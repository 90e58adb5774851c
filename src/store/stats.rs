//! What a store holds and how evenly: counts, key-table spread, and the consistency check.

use std::path::Path;

use redb::{ReadableMultimapTable, ReadableTableMetadata};
use serde::Serialize;

use super::config::{StoreConfig, FILE_NAME};
use super::error::{DbContext, StoreError, StoreResult};
use super::tables::{decode_signature, Keys, BANDS, BLOCKS, DOCS, SIGNATURES};
use super::Store;
use crate::simhash::SimHash;

/// Size and skew of the key tables (SimHash blocks or MinHash bands).
#[derive(Clone, Debug, Serialize)]
pub struct StoreStats {
    pub path: String,
    pub documents: u64,
    #[serde(flatten)]
    pub config: StoreConfig,
    /// Size of the database file, bytes (none for in-memory stores).
    pub file_bytes: Option<u64>,
    /// `file_bytes` per document.
    pub bytes_per_document: Option<f64>,
    /// SimHash blocks or MinHash bands.
    pub blocks: Vec<BlockStats>,
}

/// One key table (a SimHash block or a MinHash band): how evenly documents spread over its
/// values.
#[derive(Clone, Debug, Serialize)]
pub struct BlockStats {
    /// Block number (0 = highest bits) or band number.
    pub block: usize,
    /// Width in bits (SimHash blocks; 64 for band keys).
    pub width: u32,
    /// Distinct block values in use.
    pub buckets: u64,
    /// Documents in the fullest bucket. A query that shares this block value reads them all.
    pub largest: u64,
    /// The block value of the fullest bucket.
    pub largest_value: u64,
    /// Mean documents per bucket in use.
    pub mean: f64,
}

/// A bucket is reported as skewed when it holds at least this many documents…
const SKEW_MIN: u64 = 1000;
/// …and this many times the mean bucket.
const SKEW_FACTOR: f64 = 20.0;

impl StoreStats {
    /// A warning naming the fullest skewed bucket, if any. Skewed buckets (e.g. many pages
    /// sharing boilerplate) keep answers exact but make queries that hit them slower.
    pub fn skew_warning(&self) -> Option<String> {
        let worst = self
            .blocks
            .iter()
            .filter(|b| b.largest >= SKEW_MIN && b.largest as f64 >= SKEW_FACTOR * b.mean)
            .max_by_key(|b| b.largest)?;
        Some(format!(
            "bucket skew: block {} value {:#x} holds {} documents (mean bucket {:.1}); queries sharing that block value read all of them",
            worst.block, worst.largest_value, worst.largest, worst.mean
        ))
    }
}

impl Store {
    /// Document count and the spread of every key table (cheap: one read per bucket).
    pub fn stats(&self) -> StoreResult<StoreStats> {
        let snap = self.snapshot()?;
        let path = &self.path;
        let mut blocks = Vec::new();
        match &self.keys {
            Keys::Blocks(layout) => {
                let t = snap.txn.open_multimap_table(BLOCKS).at(path)?;
                for i in 0..layout.len() {
                    blocks.push(key_stats(&t, i, layout.width(i), path)?);
                }
            }
            Keys::Bands(p) => {
                let t = snap.txn.open_multimap_table(BANDS).at(path)?;
                for i in 0..usize::from(p.bands) {
                    blocks.push(key_stats(&t, i, 64, path)?);
                }
            }
        }
        let documents = snap.len()?;
        let file_bytes = std::fs::metadata(self.path.join(FILE_NAME))
            .ok()
            .map(|m| m.len());
        Ok(StoreStats {
            path: self.path.display().to_string(),
            documents,
            config: self.config.clone(),
            file_bytes,
            bytes_per_document: file_bytes
                .filter(|_| documents > 0)
                .map(|b| b as f64 / documents as f64),
            blocks,
        })
    }

    /// Checks that the key tables and the documents agree exactly: every document is filed
    /// under each of its keys and nothing else is filed. Returns the document count.
    pub fn verify(&self) -> StoreResult<u64> {
        let snap = self.snapshot()?;
        let path = &self.path;
        let bad = |detail: String| StoreError::Inconsistent {
            path: self.path.clone(),
            detail,
        };
        let (n, entries, per_doc) = match &self.keys {
            Keys::Blocks(layout) => {
                let docs = snap.txn.open_table(DOCS).at(path)?;
                let blocks = snap.txn.open_multimap_table(BLOCKS).at(path)?;
                let mut entries = 0u64;
                for entry in blocks.iter().at(path)? {
                    let (key, values) = entry.at(path)?;
                    let (block, value) = key.value();
                    for v in values {
                        let v = v.at(path)?;
                        let (fp, id) = v.value();
                        entries += 1;
                        let stored = docs.get(id).at(path)?.map(|g| g.value());
                        if stored != Some(fp) {
                            return Err(bad(format!(
                                "block {block} lists `{id}` with {fp:016x}, but the document table has {stored:?}"
                            )));
                        }
                        if layout.block(SimHash(fp), block as usize) != value {
                            return Err(bad(format!(
                                "`{id}` is filed under the wrong value of block {block}"
                            )));
                        }
                    }
                }
                (docs.len().at(path)?, entries, layout.len() as u64)
            }
            Keys::Bands(p) => {
                let sigs = snap.txn.open_table(SIGNATURES).at(path)?;
                let bands = snap.txn.open_multimap_table(BANDS).at(path)?;
                let mut entries = 0u64;
                for entry in bands.iter().at(path)? {
                    let (key, values) = entry.at(path)?;
                    let (band, value) = key.value();
                    for v in values {
                        let v = v.at(path)?;
                        let id = v.value();
                        entries += 1;
                        let sig = match sigs.get(id).at(path)? {
                            Some(g) => decode_signature(g.value(), p, id, path)?,
                            None => {
                                return Err(bad(format!(
                                    "band {band} lists `{id}`, which has no signature"
                                )))
                            }
                        };
                        if sig.band_key(p, usize::from(band)) != value {
                            return Err(bad(format!(
                                "`{id}` is filed under the wrong key of band {band}"
                            )));
                        }
                    }
                }
                (sigs.len().at(path)?, entries, u64::from(p.bands))
            }
        };
        if entries != n * per_doc {
            return Err(bad(format!(
                "{n} documents need {} key entries, found {entries}",
                n * per_doc
            )));
        }
        Ok(n)
    }
}

/// The spread of one key table's values.
fn key_stats<T, V>(t: &T, i: usize, width: u32, path: &Path) -> StoreResult<BlockStats>
where
    T: ReadableMultimapTable<(u8, u64), V>,
    V: redb::Key + 'static,
{
    let mut b = BlockStats {
        block: i,
        width,
        buckets: 0,
        largest: 0,
        largest_value: 0,
        mean: 0.0,
    };
    let mut total = 0u64;
    for entry in t.range((i as u8, 0u64)..=(i as u8, u64::MAX)).at(path)? {
        let (key, values) = entry.at(path)?;
        let n = values.len();
        b.buckets += 1;
        total += n;
        if n > b.largest {
            b.largest = n;
            b.largest_value = key.value().1;
        }
    }
    if b.buckets > 0 {
        b.mean = total as f64 / b.buckets as f64;
    }
    Ok(b)
}

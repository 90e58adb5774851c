//! What a store holds and how evenly: counts, key-table spread, and the consistency check.

use std::path::Path;

use redb::{ReadableTable, ReadableTableMetadata};
use serde::Serialize;

use super::config::{StoreConfig, FILE_NAME, FORMAT};
use super::error::{DbContext, StoreError, StoreResult};
use super::tables::{
    band_prefix, block_fingerprint, block_key, fingerprint_of, id_hash, signature_of, Keys, BANDS,
    BLOCKS, DOCS, IDS, META, MINIMA, NEXT_DOC,
};
use super::Store;

/// Size and skew of the key tables (SimHash blocks or MinHash bands).
#[derive(Clone, Debug, Serialize)]
pub struct StoreStats {
    pub path: String,
    /// The store's on-disk format ([`FORMAT`]: a store of another one does not open).
    pub format: &'static str,
    pub documents: u64,
    #[serde(flatten)]
    pub config: StoreConfig,
    /// Size of the database file, bytes (none for in-memory stores).
    pub file_bytes: Option<u64>,
    /// `file_bytes` per document.
    pub bytes_per_document: Option<f64>,
    /// Bytes of the database's pages in use. The rest of the file is free pages that redb
    /// keeps for later writes: it shortens a file only when at least half of it is free at
    /// its end, so after a compaction the file can still be up to about twice this.
    pub used_bytes: u64,
    /// SimHash blocks or MinHash bands.
    pub blocks: Vec<BlockStats>,
    /// MinHash: the `minima` table of the containment candidate step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minima: Option<MinimaStats>,
}

/// The `minima` table of a MinHash store: every document under each (position, minimum).
#[derive(Clone, Debug, Serialize)]
pub struct MinimaStats {
    /// Entries: documents × minima per signature.
    pub entries: u64,
    /// Distinct (position, minimum) keys in use.
    pub keys: u64,
    /// Documents under the fullest key; a containment query sharing it reads them all.
    pub largest: u64,
    /// The position of the fullest key.
    pub largest_position: u16,
    /// The minimum of the fullest key.
    pub largest_value: u32,
}

/// One key table (a SimHash block or a MinHash band): how evenly documents spread over its
/// values.
#[derive(Clone, Debug, Serialize)]
pub struct BlockStats {
    /// Block number (0 = highest bits) or band number.
    pub block: usize,
    /// Width in bits (SimHash blocks; 32 for the stored prefix of band keys).
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
    /// Document count and the spread of every key table (cheap: one pass over the keys).
    pub fn stats(&self) -> StoreResult<StoreStats> {
        let snap = self.snapshot()?;
        let path = &self.path;
        let mut blocks = Vec::new();
        let mut minima = None;
        match &self.keys {
            Keys::Blocks(layout) => {
                let t = snap.txn.open_table(BLOCKS).at(path)?;
                for i in 0..layout.len() {
                    let b = i as u8;
                    let w = layout.width(i);
                    let values = t.range((b, 0, 0)..=(b, u64::MAX, u32::MAX)).at(path)?;
                    let values = values.map(|e| {
                        e.map(|(k, _)| {
                            let key = k.value().1;
                            if w >= 64 {
                                key
                            } else {
                                key >> (64 - w)
                            }
                        })
                    });
                    blocks.push(key_stats(values, i, w, path)?);
                }
            }
            Keys::Bands(p) => {
                let t = snap.txn.open_table(BANDS).at(path)?;
                for i in 0..usize::from(p.bands) {
                    let b = i as u8;
                    let values = t.range((b, 0, 0)..=(b, u32::MAX, u32::MAX)).at(path)?;
                    let values = values.map(|e| e.map(|(k, _)| u64::from(k.value().1)));
                    blocks.push(key_stats(values, i, 32, path)?);
                }
                minima = Some(minima_stats(&snap.txn.open_table(MINIMA).at(path)?, path)?);
            }
        }
        let documents = snap.len()?;
        drop(snap);
        let used_bytes = {
            let txn = self.db.begin_write().at(path)?;
            let s = txn.stats().at(path)?;
            txn.abort().at(path)?;
            s.allocated_pages() * s.page_size() as u64
        };
        let file_bytes = std::fs::metadata(self.path.join(FILE_NAME))
            .ok()
            .map(|m| m.len());
        Ok(StoreStats {
            path: self.path.display().to_string(),
            format: FORMAT,
            documents,
            config: self.config.clone(),
            file_bytes,
            bytes_per_document: file_bytes
                .filter(|_| documents > 0)
                .map(|b| b as f64 / documents as f64),
            used_bytes,
            blocks,
            minima,
        })
    }

    /// Checks that the tables agree exactly: every document is found by its id and filed
    /// under each of its keys, nothing else is listed, and no document has a number the
    /// store would hand out again. Returns the document count.
    pub fn verify(&self) -> StoreResult<u64> {
        let snap = self.snapshot()?;
        let path = &self.path;
        let keys = &self.keys;
        let bad = |detail: String| StoreError::Inconsistent {
            path: self.path.clone(),
            detail,
        };
        let docs = snap.txn.open_table(DOCS).at(path)?;
        let ids = snap.txn.open_table(IDS).at(path)?;
        let meta = snap.txn.open_table(META).at(path)?;
        let next: u64 = meta
            .get(NEXT_DOC)
            .at(path)?
            .and_then(|g| g.value().parse().ok())
            .ok_or_else(|| bad("its next document number is missing".into()))?;
        let n = docs.len().at(path)?;
        // The sketch bytes of a listed document, checking that it is stored.
        let sketch_of = |doc: u32| -> StoreResult<(Vec<u8>, String)> {
            let bytes = docs
                .get(doc)
                .at(path)?
                .ok_or_else(|| bad(format!("document #{doc} is listed but not stored")))?;
            let (sketch, id) = keys.split(bytes.value(), doc, path)?;
            Ok((sketch.to_vec(), id.to_owned()))
        };
        let mut seen_ids = std::collections::HashSet::new();
        for entry in docs.iter().at(path)? {
            let (doc, bytes) = entry.at(path)?;
            let doc = doc.value();
            if u64::from(doc) >= next {
                return Err(bad(format!(
                    "document #{doc} is not below the next number {next}"
                )));
            }
            let (_, id) = keys.split(bytes.value(), doc, path)?;
            if !seen_ids.insert(id.to_owned()) {
                return Err(bad(format!("`{id}` is stored twice")));
            }
            if ids.get((id_hash(id), doc)).at(path)?.is_none() {
                return Err(bad(format!("`{id}` (#{doc}) is missing from the id table")));
            }
        }
        if ids.len().at(path)? != n {
            return Err(bad(format!(
                "{n} documents, but the id table lists {}",
                ids.len().at(path)?
            )));
        }
        let mut entries = 0u64;
        match keys {
            Keys::Blocks(layout) => {
                let blocks = snap.txn.open_table(BLOCKS).at(path)?;
                for entry in blocks.iter().at(path)? {
                    let (block, key, doc) = entry.at(path)?.0.value();
                    entries += 1;
                    let i = usize::from(block);
                    let (sketch, id) = sketch_of(doc)?;
                    let fp = fingerprint_of(&sketch);
                    if i >= layout.len() || block_key(layout, fp, i) != key {
                        return Err(bad(format!(
                            "block {block} lists `{id}` with {:016x}, but the document table has {:016x}",
                            block_fingerprint(layout, key, i.min(layout.len() - 1)).0,
                            fp.0
                        )));
                    }
                }
            }
            Keys::Bands(p) => {
                let bands = snap.txn.open_table(BANDS).at(path)?;
                for entry in bands.iter().at(path)? {
                    let (band, prefix, doc) = entry.at(path)?.0.value();
                    entries += 1;
                    let (sketch, id) = sketch_of(doc)?;
                    let sig = signature_of(&sketch);
                    if u16::from(band) >= p.bands
                        || band_prefix(sig.band_key(p, usize::from(band))) != prefix
                    {
                        return Err(bad(format!(
                            "`{id}` is filed under the wrong key of band {band}"
                        )));
                    }
                }
                let minima = snap.txn.open_table(MINIMA).at(path)?;
                for entry in minima.iter().at(path)? {
                    let (position, value, doc) = entry.at(path)?.0.value();
                    entries += 1;
                    let (sketch, id) = sketch_of(doc)?;
                    let sig = signature_of(&sketch);
                    if sig.values().get(usize::from(position)) != Some(&value) {
                        return Err(bad(format!(
                            "`{id}` is filed under the wrong minimum at position {position}"
                        )));
                    }
                }
            }
        }
        let per_doc = keys.per_doc();
        if entries != n * per_doc {
            return Err(bad(format!(
                "{n} documents need {} key entries, found {entries}",
                n * per_doc
            )));
        }
        Ok(n)
    }
}

/// The size of the `minima` table and its fullest key.
fn minima_stats(
    t: &impl ReadableTable<(u16, u32, u32), ()>,
    path: &Path,
) -> StoreResult<MinimaStats> {
    let mut out = MinimaStats {
        entries: 0,
        keys: 0,
        largest: 0,
        largest_position: 0,
        largest_value: 0,
    };
    let mut current: Option<((u16, u32), u64)> = None;
    let close = |out: &mut MinimaStats, ((position, value), n): ((u16, u32), u64)| {
        out.keys += 1;
        if n > out.largest {
            (out.largest, out.largest_position, out.largest_value) = (n, position, value);
        }
    };
    for entry in t.iter().at(path)? {
        let (position, value, _) = entry.at(path)?.0.value();
        out.entries += 1;
        current = match current {
            Some((key, n)) if key == (position, value) => Some((key, n + 1)),
            Some(done) => {
                close(&mut out, done);
                Some(((position, value), 1))
            }
            None => Some(((position, value), 1)),
        };
    }
    if let Some(done) = current {
        close(&mut out, done);
    }
    Ok(out)
}

/// The spread of one key table's values, given in order.
fn key_stats(
    values: impl Iterator<Item = Result<u64, redb::StorageError>>,
    i: usize,
    width: u32,
    path: &Path,
) -> StoreResult<BlockStats> {
    let mut b = BlockStats {
        block: i,
        width,
        buckets: 0,
        largest: 0,
        largest_value: 0,
        mean: 0.0,
    };
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    let mut close = |b: &mut BlockStats, (value, n): (u64, u64)| {
        b.buckets += 1;
        total += n;
        if n > b.largest {
            b.largest = n;
            b.largest_value = value;
        }
    };
    for v in values {
        let v = v.at(path)?;
        current = match current {
            Some((value, n)) if value == v => Some((value, n + 1)),
            Some(done) => {
                close(&mut b, done);
                Some((v, 1))
            }
            None => Some((v, 1)),
        };
    }
    if let Some(done) = current {
        close(&mut b, done);
    }
    if b.buckets > 0 {
        b.mean = total as f64 / b.buckets as f64;
    }
    Ok(b)
}

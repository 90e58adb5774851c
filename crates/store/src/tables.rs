//! The redb tables of a store (format 4) and how its sketches are filed in them.
//!
//! Documents are numbered internally (`u32`, never reused) and every key table holds the
//! number, not the id string:
//!
//! - `docs`: number → the sketch (SimHash: 8 bytes; MinHash: 4 bytes per minimum, then 4
//!   bytes of the signature's distinct shingle count, 0 when unknown; all little-endian)
//!   followed by the id (UTF-8). Format 2 was the same without the distinct count.
//! - `ids`: (xxh3-64 of the id, number) → `()`, to find a document by id. Two ids with the same
//!   hash are both listed and told apart by the id in `docs`.
//! - SimHash `blocks`: (block, fingerprint rotated so that the block's bits lead, number) →
//!   `()`. A block value is a key prefix, read by a range; the full fingerprint is in the key,
//!   so a query checks the distance without a second lookup.
//! - MinHash `bands`: (band, the high 32 bits of the band key, number) → `()`. A shared
//!   32-bit prefix is only a candidate: the full 64-bit key is recomputed from the candidate's
//!   signature before it counts as sharing the band.
//! - MinHash `minima`: (position, the minimum at that position, number) → `()`: every
//!   document under each of its 128 minima. Read only by queries that ask for containment:
//!   a document is a containment candidate when at least
//!   [`neardup_core::relation::CANDIDATE_AGREEING_MINIMA`] of its minima are the query's (the bands
//!   reach Jaccard ≈ 0.3 only; a 20 % excerpt has Jaccard ≈ 0.2 with its article). Format 3
//!   was the same without this table.
//!
//! All key tables have fixed-width keys and empty values: redb stores them with no per-entry
//! overhead (9, 10 or 13 bytes an entry).

use std::path::Path;

use redb::{ReadableTable, TableDefinition};
use xxhash_rust::xxh3::xxh3_64;

use super::error::{DbContext, StoreError, StoreResult};
use neardup_core::method::Sketch;
use neardup_core::minhash::{MinHashParams, Signature};
use neardup_core::simhash::{BlockLayout, SimHash};

pub(super) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
pub(super) const DOCS: TableDefinition<u32, &[u8]> = TableDefinition::new("docs");
pub(super) const IDS: TableDefinition<(u64, u32), ()> = TableDefinition::new("ids");
pub(super) const BLOCKS: TableDefinition<(u8, u64, u32), ()> = TableDefinition::new("blocks");
pub(super) const BANDS: TableDefinition<(u8, u32, u32), ()> = TableDefinition::new("bands");
pub(super) const MINIMA: TableDefinition<(u16, u32, u32), ()> = TableDefinition::new("minima");

/// The meta key of the next document number.
pub(super) const NEXT_DOC: &str = "next_doc";

/// How a store files its sketches.
#[derive(Clone, Debug)]
pub(super) enum Keys {
    /// SimHash: blocks of the store's `k`.
    Blocks(BlockLayout),
    /// MinHash: LSH bands.
    Bands(MinHashParams),
}

impl Keys {
    /// Bytes of a stored sketch.
    pub(super) fn sketch_len(&self) -> usize {
        match self {
            Keys::Blocks(_) => 8,
            Keys::Bands(p) => 4 * usize::from(p.hashes) + 4,
        }
    }

    /// Key entries per document (MinHash: bands, then minima).
    pub(super) fn per_doc(&self) -> u64 {
        match self {
            Keys::Blocks(l) => l.len() as u64,
            Keys::Bands(p) => u64::from(p.bands) + u64::from(p.hashes),
        }
    }

    /// The stored form of a document: its sketch, then its id.
    pub(super) fn encode(&self, sketch: &Sketch, id: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.sketch_len() + id.len());
        match sketch {
            Sketch::SimHash(fp) => out.extend_from_slice(&fp.0.to_le_bytes()),
            Sketch::MinHash(sig) => {
                for v in sig.values() {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&sig.distinct().unwrap_or(0).to_le_bytes());
            }
        }
        out.extend_from_slice(id.as_bytes());
        out
    }

    /// Splits a stored document into its sketch bytes and id.
    pub(super) fn split<'a>(
        &self,
        bytes: &'a [u8],
        doc: u32,
        path: &Path,
    ) -> StoreResult<(&'a [u8], &'a str)> {
        let n = self.sketch_len();
        let bad = |what: &str| StoreError::Inconsistent {
            path: path.to_owned(),
            detail: format!("document #{doc} {what}"),
        };
        if bytes.len() < n {
            return Err(bad(&format!(
                "has {} bytes, less than a sketch",
                bytes.len()
            )));
        }
        let id =
            std::str::from_utf8(&bytes[n..]).map_err(|_| bad("has an id that is not UTF-8"))?;
        Ok((&bytes[..n], id))
    }

    /// Decodes sketch bytes (see [`Keys::split`]).
    pub(super) fn sketch(&self, bytes: &[u8]) -> Sketch {
        match self {
            Keys::Blocks(_) => Sketch::SimHash(fingerprint_of(bytes)),
            Keys::Bands(_) => Sketch::MinHash(signature_of(bytes)),
        }
    }

    /// Bytes of a sketch stored by a format-2 store (no distinct count).
    pub(super) fn sketch_len_2(&self) -> usize {
        match self {
            Keys::Blocks(_) => 8,
            Keys::Bands(p) => 4 * usize::from(p.hashes),
        }
    }
}

/// The fingerprint in a SimHash store's sketch bytes (see [`Keys::split`]): what a block
/// table's documents hold.
pub(super) fn fingerprint_of(bytes: &[u8]) -> SimHash {
    SimHash(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

/// The signature in a MinHash store's sketch bytes (see [`Keys::split`]), with its distinct
/// shingle count when known: what a band table's documents hold.
pub(super) fn signature_of(bytes: &[u8]) -> Signature {
    let (values, distinct) = bytes.split_at(bytes.len() - 4);
    let sig = Signature::from_values(
        values
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect::<Vec<u32>>(),
    );
    match u32::from_le_bytes(distinct.try_into().expect("4 bytes")) {
        0 => sig,
        n => sig.with_distinct(n),
    }
}

/// The hash under which an id is filed in `ids`.
pub(super) fn id_hash(id: &str) -> u64 {
    xxh3_64(id.as_bytes())
}

/// The band table's key prefix of a full 64-bit band key.
pub(super) fn band_prefix(key: u64) -> u32 {
    (key >> 32) as u32
}

/// How far block `i` is rotated left to lead the fingerprint.
fn block_rotation(layout: &BlockLayout, i: usize) -> u32 {
    layout.shift(i) + layout.width(i)
}

/// The `blocks` key value of `fp` for block `i`: `fp` rotated so that the block's bits lead.
pub(super) fn block_key(layout: &BlockLayout, fp: SimHash, i: usize) -> u64 {
    fp.0.rotate_right(block_rotation(layout, i))
}

/// Inverse of [`block_key`].
pub(super) fn block_fingerprint(layout: &BlockLayout, key: u64, i: usize) -> SimHash {
    SimHash(key.rotate_left(block_rotation(layout, i)))
}

/// The range of `blocks` key values whose block `i` has `value`.
pub(super) fn block_range(layout: &BlockLayout, i: usize, value: u64) -> (u64, u64) {
    let w = layout.width(i);
    if w >= 64 {
        return (value, value);
    }
    let lo = value << (64 - w);
    (lo, lo | (u64::MAX >> w))
}

/// Finds a stored document by id: its number and stored bytes.
pub(super) fn find<I, D>(
    ids: &I,
    docs: &D,
    keys: &Keys,
    id: &str,
    path: &Path,
) -> StoreResult<Option<(u32, Vec<u8>)>>
where
    I: ReadableTable<(u64, u32), ()>,
    D: ReadableTable<u32, &'static [u8]>,
{
    let h = id_hash(id);
    for entry in ids.range((h, 0)..=(h, u32::MAX)).at(path)? {
        let doc = entry.at(path)?.0.value().1;
        let Some(bytes) = docs.get(doc).at(path)? else {
            return Err(StoreError::Inconsistent {
                path: path.to_owned(),
                detail: format!("the id table lists document #{doc}, which is not stored"),
            });
        };
        let bytes = bytes.value();
        if keys.split(bytes, doc, path)?.1 == id {
            return Ok(Some((doc, bytes.to_vec())));
        }
    }
    Ok(None)
}

/// Checks a MinHash signature's length against the store's parameters.
pub(super) fn check_signature(sig: &Signature, p: &MinHashParams, path: &Path) -> StoreResult<()> {
    if sig.len() != usize::from(p.hashes) {
        return Err(StoreError::Mismatch {
            path: path.to_owned(),
            what: "signature length",
            stored: p.hashes.to_string(),
            requested: sig.len().to_string(),
            hint: "signatures of other MinHash parameters are not comparable: index into a new --store",
        });
    }
    Ok(())
}

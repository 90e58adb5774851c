//! The redb tables of a store and how its sketches are filed in them.

use std::path::Path;

use redb::{MultimapTableDefinition, TableDefinition};

use super::error::{StoreError, StoreResult};
use crate::minhash::{MinHashParams, Signature};
use crate::simhash::BlockLayout;

pub(super) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
pub(super) const DOCS: TableDefinition<&str, u64> = TableDefinition::new("docs");
pub(super) const BLOCKS: MultimapTableDefinition<(u8, u64), (u64, &str)> =
    MultimapTableDefinition::new("blocks");
pub(super) const SIGNATURES: TableDefinition<&str, &[u8]> = TableDefinition::new("signatures");
pub(super) const BANDS: MultimapTableDefinition<(u8, u64), &str> =
    MultimapTableDefinition::new("bands");

/// How a store files its sketches.
#[derive(Clone, Debug)]
pub(super) enum Keys {
    /// SimHash: blocks of the store's `k`.
    Blocks(BlockLayout),
    /// MinHash: LSH bands.
    Bands(MinHashParams),
}

pub(super) fn decode_signature(
    bytes: &[u8],
    p: &MinHashParams,
    id: &str,
    path: &Path,
) -> StoreResult<Signature> {
    Signature::from_le_bytes(bytes)
        .filter(|s| s.len() == usize::from(p.hashes))
        .ok_or_else(|| StoreError::Inconsistent {
            path: path.to_owned(),
            detail: format!(
                "the signature of `{id}` has {} bytes, not {}",
                bytes.len(),
                4 * p.hashes
            ),
        })
}

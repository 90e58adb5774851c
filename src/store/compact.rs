//! Giving space back after a bulk load: dense tables, then a shorter file.
//!
//! redb splits a full B-tree page in half. Keys that arrive in order (document numbers)
//! leave every page half full; random keys (band and block keys) about two thirds full.
//! [`Store::compact`] rewrites each data table in one transaction so that its pages end up
//! nearly full, then lets redb move the pages to the front of the file and truncate it.
//!
//! The rewrite inserts the entries in key order in two passes: first a share `f` just over
//! half of them, evenly spread, then the rest. In the first pass a page fills, splits in
//! half, and is never touched again, so each page holds about half a page of first-pass
//! entries; the second pass puts the entries between them into the same pages, which then
//! hold `1/(2f)` of a page — full, without splitting, when `f` is chosen from the entry size.
//! Only the size depends on this; the content is the same entries whatever the page layout.

use redb::{Key, ReadableTable, ReadableTableMetadata, TableDefinition, Value, WriteTransaction};

use super::error::{DbContext, StoreResult};
use super::tables::{BANDS, BLOCKS, DOCS, IDS};
use super::Store;

/// redb's page size, and the header of a leaf page.
const PAGE: usize = 4096;
const LEAF_HEADER: usize = 4;

impl Store {
    /// Rewrites the tables densely (one transaction: all or nothing) and shortens the file
    /// to what they use. Costs about one pass over the store; worth it after writes that
    /// changed a good share of it. Needs no other handle on the store (`&mut`); fails with
    /// an error if a snapshot is still alive.
    pub fn compact(&mut self) -> StoreResult<()> {
        let path = self.path.clone();
        let mut txn = self.db.begin_write().at(&path)?;
        txn.set_quick_repair(true);
        repack(&txn, DOCS, "docs.repack", &path)?;
        repack(&txn, IDS, "ids.repack", &path)?;
        match &self.keys {
            super::tables::Keys::Blocks(_) => repack(&txn, BLOCKS, "blocks.repack", &path)?,
            super::tables::Keys::Bands(_) => repack(&txn, BANDS, "bands.repack", &path)?,
        }
        txn.commit().at(&path)?;
        self.db.compact().at(&path)?;
        Ok(())
    }
}

/// Rewrites `def` densely (see the module docs) under its own name.
fn repack<K: Key + 'static, V: Value + 'static>(
    txn: &WriteTransaction,
    def: TableDefinition<K, V>,
    tmp: &str,
    path: &std::path::Path,
) -> StoreResult<()> {
    let tmp_def: TableDefinition<K, V> = TableDefinition::new(tmp);
    {
        let old = txn.open_table(def).at(path)?;
        let n = old.len().at(path)?;
        if n == 0 {
            return Ok(());
        }
        let entry_bytes = match (K::fixed_width(), V::fixed_width()) {
            (Some(k), Some(v)) => k + v,
            _ => {
                let mut total = 0usize;
                for e in old.iter().at(path)? {
                    let (k, v) = e.at(path)?;
                    total += K::as_bytes(&k.value()).as_ref().len()
                        + V::as_bytes(&v.value()).as_ref().len();
                }
                total / n as usize
                    + 4 * usize::from(K::fixed_width().is_none())
                    + 4 * usize::from(V::fixed_width().is_none())
            }
        };
        let first = FirstPass::for_entry(entry_bytes.max(1));
        let mut new = txn.open_table(tmp_def).at(path)?;
        for pass in [true, false] {
            for (i, e) in old.iter().at(path)?.enumerate() {
                if first.takes(i as u64) != pass {
                    continue;
                }
                let (k, v) = e.at(path)?;
                new.insert(k.value(), v.value()).at(path)?;
            }
        }
    }
    txn.delete_table(def).at(path)?;
    txn.rename_table(tmp_def, def).at(path)?;
    Ok(())
}

/// Which entries go into the first pass: a share `num / den`, spread evenly (any run of
/// `m` entries holds `m · num / den` of them, give or take one).
#[derive(Clone, Copy, Debug, PartialEq)]
struct FirstPass {
    num: u64,
    den: u64,
}

impl FirstPass {
    /// For entries of `bytes` each: a page holds `c` of them; the first pass leaves `l`
    /// (just over half) in each page, and the share is chosen so that the `l / f` entries
    /// between two pages' first-pass entries still fit in `c`, with a margin of `c / 64`
    /// for large pages and none for small ones, whose split is exact.
    fn for_entry(bytes: usize) -> FirstPass {
        let c = ((PAGE - LEAF_HEADER) / bytes).max(1) as u64;
        let l = (c + 2) / 2;
        FirstPass {
            num: (l + c / 64).min(c),
            den: c,
        }
    }

    fn takes(self, i: u64) -> bool {
        (i + 1) * self.num / self.den > i * self.num / self.den
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_pass_share_is_just_over_half_and_spread() {
        // Signature documents: 7 a page, 4 after a split; 4 of every 7.
        let f = FirstPass::for_entry(543);
        assert_eq!((f.num, f.den), (4, 7));
        let taken: Vec<u64> = (0..70).filter(|&i| f.takes(i)).collect();
        assert_eq!(taken.len(), 40);
        for w in 0..63 {
            assert_eq!((w..w + 7).filter(|&i| f.takes(i)).count(), 4, "{w}");
        }
        // Band entries: 454 a page; a bit over half goes first.
        let f = FirstPass::for_entry(9);
        let share = f.num as f64 / f.den as f64;
        assert!(share > 0.5 && share < 0.52, "{share}");
        assert!(228.0 / share + 1.0 < 454.0);
        // Huge entries: everything in the first pass.
        assert!((0..10).all(|i| FirstPass::for_entry(10_000).takes(i)));
    }
}

//! `neardup migrate`: rewriting a format-1, 2 or 3 store in the current format.
//!
//! Format 1 filed the id string in every key table (42 times per MinHash document). Its
//! table definitions live only here, to read such a store (and, for tests, to write one).
//! Format 2 stored MinHash signatures without their distinct shingle count: its documents are
//! copied with the count unknown (stored as 0), so they are found as near-duplicates but
//! never as contained until indexed again. Format 3 had no `minima` table: its documents are
//! copied as they are, and filed under their minima on the way.
//!
//! The migration is crash-safe: the new database is built beside the old one
//! (`neardup.redb.migrating` in the store's directory), checked, made durable, and then
//! renamed over `neardup.redb` in one step. Killed before the rename, the old store is
//! untouched (the next migration starts the new file again); after it, the new one is
//! complete. The old store stays locked throughout, so no other process writes to it
//! meanwhile.

use std::path::Path;

use redb::{MultimapTableDefinition, ReadableTable, TableDefinition};
use serde::Serialize;

use super::config::{
    open_db, open_db_file, settings_of_any_format, write_settings, FILE_NAME, FORMAT_1, FORMAT_2,
    FORMAT_3,
};
use super::error::{DbContext, StoreError, StoreResult};
use super::tables::{signature_of, DOCS, META, MINIMA};
use super::writer::Op;
use super::{OpenOptions, Store, StoreConfig, FORMAT};
use crate::store::{remove_if_present, sync};
use neardup_core::method::{Method, Sketch};
use neardup_core::minhash::Signature;
use neardup_core::simhash::{BlockLayout, SimHash};

/// The format-1 tables.
const DOCS_1: TableDefinition<&str, u64> = TableDefinition::new("docs");
const BLOCKS_1: MultimapTableDefinition<(u8, u64), (u64, &str)> =
    MultimapTableDefinition::new("blocks");
const SIGNATURES_1: TableDefinition<&str, &[u8]> = TableDefinition::new("signatures");
const BANDS_1: MultimapTableDefinition<(u8, u64), &str> = MultimapTableDefinition::new("bands");

/// Documents copied per transaction into the new database.
const BATCH: usize = 4096;

/// The name of the database being built by a migration, in the store's directory.
pub const MIGRATING_FILE_NAME: &str = "neardup.redb.migrating";

/// What [`migrate`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Migration {
    pub path: String,
    /// The format found.
    pub from: String,
    /// The format written ([`FORMAT`]); equal to `from` when there was nothing to do.
    pub to: &'static str,
    pub documents: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Rewrites the format-1, 2 or 3 store in `dir` in the current format, keeping every
/// document. A store already in the current format is left alone.
pub fn migrate(dir: &Path, opts: &OpenOptions) -> StoreResult<Migration> {
    let file = dir.join(FILE_NAME);
    if !file.is_file() {
        return Err(StoreError::NotFound {
            path: dir.to_owned(),
        });
    }
    let size = |f: &Path| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
    let bytes_before = size(&file);
    let old = open_db(dir, false, opts.wait)?;
    let txn = old.begin_read().at(dir)?;
    let settings = match txn.open_table(META) {
        Ok(meta) => settings_of_any_format(&meta, dir)?,
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e).at(dir),
    };
    let Some((format, config)) = settings else {
        return Err(StoreError::NotAStore {
            path: dir.to_owned(),
            reason: "it has no settings (the process creating it stopped early); delete it and index again".into(),
        });
    };
    let done = |documents| Migration {
        path: dir.display().to_string(),
        from: format.clone(),
        to: FORMAT,
        documents,
        bytes_before,
        bytes_after: size(&file),
    };
    if format == FORMAT {
        drop(txn);
        let n = Store::with(old, dir.to_owned(), Some(file.clone()), config)?.len()?;
        return Ok(done(n));
    }
    if format != FORMAT_1 && format != FORMAT_2 && format != FORMAT_3 {
        return Err(StoreError::Format {
            path: dir.to_owned(),
            found: format,
            supported: FORMAT,
        });
    }

    let tmp = dir.join(MIGRATING_FILE_NAME);
    remove_if_present(&tmp)?;
    let mut new = Store::create_file(dir, &tmp, &config)?;
    let documents = if format == FORMAT_1 {
        copy_documents(&txn, &new, &config, dir)?
    } else {
        copy_documents_2(&txn, &new, &config, dir, format == FORMAT_3)?
    };
    new.compact()?;
    let copied = new.verify()?;
    if copied != documents {
        return Err(StoreError::Inconsistent {
            path: tmp.clone(),
            detail: format!("{documents} documents read, {copied} written"),
        });
    }
    drop(new);
    sync(&tmp)?;
    std::fs::rename(&tmp, &file).map_err(|source| StoreError::Io {
        path: file.clone(),
        source,
    })?;
    sync(dir)?;
    drop(txn);
    drop(old);
    Ok(done(documents))
}

/// Writes a batch of documents into `new` and empties it; adds their count to `n`.
fn flush(
    new: &Store,
    batch: &mut Vec<(String, Sketch)>,
    n: &mut u64,
    dir: &Path,
) -> StoreResult<()> {
    let ops: Vec<Op<'_>> = batch.iter().map(|(id, s)| Op::Upsert(id, s)).collect();
    let counts = new.write(&ops)?;
    if counts.inserted != ops.len() as u64 {
        return Err(StoreError::Inconsistent {
            path: dir.to_owned(),
            detail: "an id is stored twice".into(),
        });
    }
    *n += counts.inserted;
    batch.clear();
    Ok(())
}

/// Copies every document of a format-2 or (`counted`) format-3 store's `docs` table into
/// `new`, in batches; returns the count. Format 3's documents are those of the current
/// format, distinct counts included; format 2's have none.
fn copy_documents_2(
    txn: &redb::ReadTransaction,
    new: &Store,
    config: &StoreConfig,
    dir: &Path,
    counted: bool,
) -> StoreResult<u64> {
    let keys = config.keys(dir)?;
    let len = if counted {
        keys.sketch_len()
    } else {
        keys.sketch_len_2()
    };
    let mut batch: Vec<(String, Sketch)> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    for entry in txn.open_table(DOCS).at(dir)?.iter().at(dir)? {
        let (doc, bytes) = entry.at(dir)?;
        let bytes = bytes.value();
        let bad = |what: &str| StoreError::Inconsistent {
            path: dir.to_owned(),
            detail: format!("document #{} {what}", doc.value()),
        };
        if bytes.len() < len {
            return Err(bad("is shorter than a sketch of its format"));
        }
        let (sketch, id) = bytes.split_at(len);
        let id = std::str::from_utf8(id).map_err(|_| bad("has an id that is not UTF-8"))?;
        let sketch = match config.method {
            Method::SimHash => Sketch::SimHash(SimHash(u64::from_le_bytes(
                sketch.try_into().expect("8 bytes"),
            ))),
            Method::MinHash if counted => Sketch::MinHash(signature_of(sketch)),
            Method::MinHash => Sketch::MinHash(
                Signature::from_le_bytes(sketch).ok_or_else(|| bad("is not whole minima"))?,
            ),
        };
        batch.push((id.to_owned(), sketch));
        if batch.len() == BATCH {
            flush(new, &mut batch, &mut n, dir)?;
        }
    }
    flush(new, &mut batch, &mut n, dir)?;
    Ok(n)
}

/// Copies every document of the format-1 tables into `new`, in batches; returns the count.
fn copy_documents(
    txn: &redb::ReadTransaction,
    new: &Store,
    config: &StoreConfig,
    dir: &Path,
) -> StoreResult<u64> {
    let mut batch: Vec<(String, Sketch)> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    match config.method {
        Method::SimHash => {
            for entry in txn.open_table(DOCS_1).at(dir)?.iter().at(dir)? {
                let (id, fp) = entry.at(dir)?;
                batch.push((id.value().to_owned(), Sketch::SimHash(SimHash(fp.value()))));
                if batch.len() == BATCH {
                    flush(new, &mut batch, &mut n, dir)?;
                }
            }
        }
        Method::MinHash => {
            for entry in txn.open_table(SIGNATURES_1).at(dir)?.iter().at(dir)? {
                let (id, bytes) = entry.at(dir)?;
                let id = id.value();
                let sig = Signature::from_le_bytes(bytes.value()).ok_or_else(|| {
                    StoreError::Inconsistent {
                        path: dir.to_owned(),
                        detail: format!("the signature of `{id}` is not whole minima"),
                    }
                })?;
                batch.push((id.to_owned(), Sketch::MinHash(sig)));
                if batch.len() == BATCH {
                    flush(new, &mut batch, &mut n, dir)?;
                }
            }
        }
    }
    flush(new, &mut batch, &mut n, dir)?;
    Ok(n)
}

/// Writes a store in format 1 (as neardup wrote them before format 2) holding `docs`: for
/// tests of the migration only.
#[doc(hidden)]
pub fn write_format_1(
    dir: &Path,
    config: &StoreConfig,
    docs: &[(&str, Sketch)],
) -> StoreResult<()> {
    std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let db = open_db_file(dir, &dir.join(FILE_NAME), true, Default::default())?;
    let mut txn = db.begin_write().at(dir)?;
    txn.set_quick_repair(true);
    {
        let mut meta = txn.open_table(META).at(dir)?;
        write_settings(&mut meta, config, super::config::FORMAT_1, dir)?;
        match config.method {
            Method::SimHash => {
                let layout = BlockLayout::for_distance(config.k)?;
                let mut t = txn.open_table(DOCS_1).at(dir)?;
                let mut blocks = txn.open_multimap_table(BLOCKS_1).at(dir)?;
                for (id, s) in docs {
                    let Sketch::SimHash(fp) = s else {
                        panic!("a SimHash store holds fingerprints")
                    };
                    t.insert(*id, fp.0).at(dir)?;
                    for (i, v) in layout.blocks(*fp).enumerate() {
                        blocks.insert((i as u8, v), (fp.0, *id)).at(dir)?;
                    }
                }
            }
            Method::MinHash => {
                let p = config.minhash.expect("MinHash parameters");
                let mut t = txn.open_table(SIGNATURES_1).at(dir)?;
                let mut bands = txn.open_multimap_table(BANDS_1).at(dir)?;
                for (id, s) in docs {
                    let Sketch::MinHash(sig) = s else {
                        panic!("a MinHash store holds signatures")
                    };
                    t.insert(*id, sig.to_le_bytes().as_slice()).at(dir)?;
                    for (i, key) in sig.band_keys(&p).into_iter().enumerate() {
                        bands.insert((i as u8, key), *id).at(dir)?;
                    }
                }
            }
        }
    }
    txn.commit().at(dir)?;
    Ok(())
}

/// Writes a store in format 2 (as neardup wrote them before signatures carried their distinct
/// shingle count) holding `docs`: for tests of the migration only.
#[doc(hidden)]
pub fn write_format_2(
    dir: &Path,
    config: &StoreConfig,
    docs: &[(&str, Sketch)],
) -> StoreResult<()> {
    let store = Store::create_or_open(dir, config, &OpenOptions::default())?;
    let ops: Vec<Op<'_>> = docs.iter().map(|(id, s)| Op::Upsert(id, s)).collect();
    store.write(&ops)?;
    let keys = store.keys.clone();
    drop(store);
    let (len, len_2) = (keys.sketch_len(), keys.sketch_len_2());
    let db = open_db_file(dir, &dir.join(FILE_NAME), false, Default::default())?;
    let mut txn = db.begin_write().at(dir)?;
    txn.set_quick_repair(true);
    {
        let mut meta = txn.open_table(META).at(dir)?;
        meta.insert("format", FORMAT_2).at(dir)?;
        let mut table = txn.open_table(DOCS).at(dir)?;
        let mut rows = Vec::new();
        for entry in table.iter().at(dir)? {
            let (doc, bytes) = entry.at(dir)?;
            let bytes = bytes.value();
            rows.push((doc.value(), [&bytes[..len_2], &bytes[len..]].concat()));
        }
        for (doc, bytes) in rows {
            table.insert(doc, bytes.as_slice()).at(dir)?;
        }
    }
    txn.commit().at(dir)?;
    Ok(())
}

/// Writes a store in format 3 (as neardup wrote them before the `minima` table) holding
/// `docs`: for tests of the migration only.
#[doc(hidden)]
pub fn write_format_3(
    dir: &Path,
    config: &StoreConfig,
    docs: &[(&str, Sketch)],
) -> StoreResult<()> {
    let store = Store::create_or_open(dir, config, &OpenOptions::default())?;
    let ops: Vec<Op<'_>> = docs.iter().map(|(id, s)| Op::Upsert(id, s)).collect();
    store.write(&ops)?;
    drop(store);
    let db = open_db_file(dir, &dir.join(FILE_NAME), false, Default::default())?;
    let mut txn = db.begin_write().at(dir)?;
    txn.set_quick_repair(true);
    {
        let mut meta = txn.open_table(META).at(dir)?;
        meta.insert("format", FORMAT_3).at(dir)?;
    }
    txn.delete_table(MINIMA).at(dir)?;
    txn.commit().at(dir)?;
    Ok(())
}

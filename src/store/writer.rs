//! Writes: one transaction per call, all or nothing.

use std::path::Path;

use redb::WriteTransaction;
use serde::Serialize;

use super::error::{DbContext, StoreError, StoreResult};
use super::probe::{probe_bands, probe_blocks, Plan};
use super::tables::{decode_signature, Keys, BANDS, BLOCKS, DOCS, SIGNATURES};
use super::{method_mismatch, query_mismatch, store_query, Store};
use crate::method::{Match, Method, Query, Sketch, Tolerance};
use crate::minhash::{MinHashParams, Signature};
use crate::simhash::{BlockLayout, SimHash};

/// A change to apply with [`Store::write`].
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Insert the document, or replace its sketch everywhere if the id is stored.
    Upsert(&'a str, &'a Sketch),
    /// Remove the document if stored.
    Delete(&'a str),
}

/// What a write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriteCounts {
    /// New ids.
    pub inserted: u64,
    /// Stored ids whose fingerprint changed.
    pub replaced: u64,
    /// Stored ids upserted with the fingerprint they already had.
    pub unchanged: u64,
    /// Stored ids removed.
    pub deleted: u64,
    /// Deletions of ids that were not stored.
    pub missing: u64,
}

impl WriteCounts {
    fn add(&mut self, o: WriteCounts) {
        self.inserted += o.inserted;
        self.replaced += o.replaced;
        self.unchanged += o.unchanged;
        self.deleted += o.deleted;
        self.missing += o.missing;
    }
}

/// The answer of [`Store::check`] for one document.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    /// Stored documents (other than the same id) within the distance, nearest first.
    pub matches: Vec<Match>,
    /// The document was added (only with `insert`, and only when `matches` is empty).
    pub inserted: bool,
    /// Its id was stored already, and its sketch was replaced (only when `inserted`).
    pub replaced: bool,
}

impl Store {
    /// Applies `ops` in order, in one transaction: all or nothing, durable on return.
    pub fn write(&self, ops: &[Op<'_>]) -> StoreResult<WriteCounts> {
        let txn = self.begin_write()?;
        let mut counts = WriteCounts::default();
        {
            let mut w = self.writer(&txn)?;
            for op in ops {
                counts.add(match *op {
                    Op::Upsert(id, sketch) => w.upsert(id, sketch)?,
                    Op::Delete(id) => w.delete(id).at(&self.path)?,
                });
            }
        }
        txn.commit().at(&self.path)?;
        Ok(counts)
    }

    /// Inserts or replaces documents, in one transaction.
    pub fn upsert_batch<S: Into<Sketch> + Clone>(
        &self,
        docs: &[(&str, S)],
    ) -> StoreResult<WriteCounts> {
        let sketches: Vec<Sketch> = docs.iter().map(|(_, s)| s.clone().into()).collect();
        let ops: Vec<Op<'_>> = docs
            .iter()
            .zip(&sketches)
            .map(|(&(id, _), s)| Op::Upsert(id, s))
            .collect();
        self.write(&ops)
    }

    /// Inserts or replaces one document.
    pub fn upsert(&self, id: &str, sketch: impl Into<Sketch>) -> StoreResult<WriteCounts> {
        self.write(&[Op::Upsert(id, &sketch.into())])
    }

    /// Removes documents, in one transaction.
    pub fn delete(&self, ids: &[&str]) -> StoreResult<WriteCounts> {
        let ops: Vec<Op<'_>> = ids.iter().map(|&id| Op::Delete(id)).collect();
        self.write(&ops)
    }

    /// For each document in order: which stored documents (other than the same id) are
    /// within `tolerance`? With `insert`, a document with none is added (or replaces its old
    /// sketch), and the checks and inserts of the whole batch are one transaction: writers
    /// take turns, so two concurrent checkers never both insert near-duplicates of each
    /// other, and a later document in the batch sees the earlier ones.
    pub fn check<S: Into<Sketch> + Clone>(
        &self,
        docs: &[(&str, S)],
        tolerance: impl Into<Tolerance>,
        insert: bool,
    ) -> StoreResult<Vec<CheckResult>> {
        let tolerance = tolerance.into();
        if !insert {
            let snap = self.snapshot()?;
            return docs
                .iter()
                .map(|(id, s)| {
                    Ok(CheckResult {
                        matches: snap.similar(&s.clone().into(), tolerance, Some(id))?,
                        inserted: false,
                        replaced: false,
                    })
                })
                .collect();
        }
        let txn = self.begin_write()?;
        let mut out = Vec::with_capacity(docs.len());
        {
            let mut w = self.writer(&txn)?;
            for (id, s) in docs {
                let sketch: Sketch = s.clone().into();
                let matches = w.probe(&sketch, tolerance, Some(id), Plan::Auto)?;
                let inserted = matches.is_empty();
                let replaced = inserted && w.upsert(id, &sketch)?.inserted == 0;
                out.push(CheckResult {
                    matches,
                    inserted,
                    replaced,
                });
            }
        }
        txn.commit().at(&self.path)?;
        Ok(out)
    }

    pub(super) fn begin_write(&self) -> StoreResult<WriteTransaction> {
        let mut txn = self.db.begin_write().at(&self.path)?;
        txn.set_quick_repair(true);
        Ok(txn)
    }

    pub(super) fn writer<'t>(&'t self, txn: &'t WriteTransaction) -> StoreResult<Writer<'t>> {
        let path = &self.path;
        Ok(match &self.keys {
            Keys::Blocks(layout) => Writer::Blocks {
                docs: txn.open_table(DOCS).at(path)?,
                blocks: txn.open_multimap_table(BLOCKS).at(path)?,
                layout,
                path,
            },
            Keys::Bands(params) => Writer::Bands {
                sigs: txn.open_table(SIGNATURES).at(path)?,
                bands: txn.open_multimap_table(BANDS).at(path)?,
                params,
                path,
            },
        })
    }
}

/// The data tables of a write transaction.
pub(super) enum Writer<'t> {
    Blocks {
        docs: redb::Table<'t, &'static str, u64>,
        blocks: redb::MultimapTable<'t, (u8, u64), (u64, &'static str)>,
        layout: &'t BlockLayout,
        path: &'t Path,
    },
    Bands {
        sigs: redb::Table<'t, &'static str, &'static [u8]>,
        bands: redb::MultimapTable<'t, (u8, u64), &'static str>,
        params: &'t MinHashParams,
        path: &'t Path,
    },
}

impl Writer<'_> {
    fn path(&self) -> &Path {
        match self {
            Writer::Blocks { path, .. } | Writer::Bands { path, .. } => path,
        }
    }

    /// The method of the store being written.
    fn method(&self) -> Method {
        match self {
            Writer::Blocks { .. } => Method::SimHash,
            Writer::Bands { .. } => Method::MinHash,
        }
    }

    fn upsert(&mut self, id: &str, sketch: &Sketch) -> StoreResult<WriteCounts> {
        let path = self.path().to_owned();
        let mut c = WriteCounts::default();
        match (self, sketch) {
            (
                Writer::Blocks {
                    docs,
                    blocks,
                    layout,
                    ..
                },
                Sketch::SimHash(fp),
            ) => {
                let old = docs.insert(id, fp.0).at(&path)?.map(|g| g.value());
                match old {
                    Some(o) if o == fp.0 => {
                        c.unchanged = 1;
                        return Ok(c);
                    }
                    Some(o) => {
                        for (i, v) in layout.blocks(SimHash(o)).enumerate() {
                            blocks.remove((i as u8, v), (o, id)).at(&path)?;
                        }
                        c.replaced = 1;
                    }
                    None => c.inserted = 1,
                }
                for (i, v) in layout.blocks(*fp).enumerate() {
                    blocks.insert((i as u8, v), (fp.0, id)).at(&path)?;
                }
            }
            (
                Writer::Bands {
                    sigs,
                    bands,
                    params,
                    ..
                },
                Sketch::MinHash(sig),
            ) => {
                if sig.len() != usize::from(params.hashes) {
                    return Err(StoreError::Mismatch {
                        path,
                        what: "signature length",
                        stored: params.hashes.to_string(),
                        requested: sig.len().to_string(),
                        hint: "signatures of other MinHash parameters are not comparable: index into a new --store",
                    });
                }
                let bytes = sig.to_le_bytes();
                let old = sigs
                    .insert(id, bytes.as_slice())
                    .at(&path)?
                    .map(|g| g.value().to_vec());
                match old {
                    Some(o) if o == bytes => {
                        c.unchanged = 1;
                        return Ok(c);
                    }
                    Some(o) => {
                        let old = decode_signature(&o, params, id, &path)?;
                        for (i, key) in old.band_keys(params).into_iter().enumerate() {
                            bands.remove((i as u8, key), id).at(&path)?;
                        }
                        c.replaced = 1;
                    }
                    None => c.inserted = 1,
                }
                for (i, key) in sig.band_keys(params).into_iter().enumerate() {
                    bands.insert((i as u8, key), id).at(&path)?;
                }
            }
            (w, s) => return Err(method_mismatch(&path, w.method(), s.method())),
        }
        Ok(c)
    }

    fn delete(&mut self, id: &str) -> Result<WriteCounts, redb::StorageError> {
        let mut c = WriteCounts::default();
        let found = match self {
            Writer::Blocks {
                docs,
                blocks,
                layout,
                ..
            } => match docs.remove(id)?.map(|g| g.value()) {
                Some(o) => {
                    for (i, v) in layout.blocks(SimHash(o)).enumerate() {
                        blocks.remove((i as u8, v), (o, id))?;
                    }
                    true
                }
                None => false,
            },
            Writer::Bands {
                sigs,
                bands,
                params,
                ..
            } => match sigs.remove(id)?.map(|g| g.value().to_vec()) {
                Some(o) => {
                    if let Some(old) = Signature::from_le_bytes(&o) {
                        if old.len() == usize::from(params.hashes) {
                            for (i, key) in old.band_keys(params).into_iter().enumerate() {
                                bands.remove((i as u8, key), id)?;
                            }
                        }
                    }
                    true
                }
                None => false,
            },
        };
        if found {
            c.deleted = 1;
        } else {
            c.missing = 1;
        }
        Ok(c)
    }

    /// Stored documents within `tolerance` of `sketch`, as of this transaction.
    fn probe(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        plan: Plan,
    ) -> StoreResult<Vec<Match>> {
        let query = store_query(self.path(), self.method(), sketch, tolerance)?;
        match (self, &query) {
            (
                Writer::Blocks {
                    docs,
                    blocks,
                    layout,
                    path,
                },
                &Query::SimHash { fingerprint, k },
            ) => probe_blocks(blocks, docs, layout, fingerprint, k, exclude, plan).at(path),
            (
                Writer::Bands {
                    sigs,
                    bands,
                    params,
                    path,
                },
                Query::MinHash { .. },
            ) => probe_bands(bands, sigs, params, &query, exclude, plan, path),
            (w, q) => Err(query_mismatch(w.path(), w.method(), q.method())),
        }
    }
}

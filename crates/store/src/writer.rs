//! Writes: one transaction per call, all or nothing.

use std::path::Path;

use redb::{ReadableTable, WriteTransaction};
use serde::Serialize;

use super::error::{DbContext, StoreError, StoreResult};
use super::probe::{probe_bands, wants_containment, BlockProbe, Plan};
use super::tables::{
    band_prefix, block_key, check_signature, find, id_hash, Keys, BANDS, BLOCKS, DOCS, IDS, META,
    MINIMA, NEXT_DOC,
};
use crate::store::{method_mismatch, query_mismatch, store_query, Store};
use neardup_core::method::{Match, Method, Query, Sketch, Tolerance};
use neardup_core::relation::MatchOptions;

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
    /// Stored documents (other than the same id) related to it, nearest first.
    pub matches: Vec<Match>,
    /// The document was added (only with `insert`, and only when it is not a duplicate).
    pub inserted: bool,
    /// Its id was stored already, and its sketch was replaced (only when `inserted`).
    pub replaced: bool,
}

impl CheckResult {
    /// Whether the document is a duplicate of a stored one: a match without a relation (a
    /// SimHash near-duplicate) or one whose relation refuses an insert
    /// ([`neardup_core::relation::Relation::refuses_insert`]: a near-duplicate, or the document is
    /// contained in the match). A document that only contains stored ones is not.
    pub fn is_duplicate(&self) -> bool {
        refused(&self.matches)
    }
}

/// See [`CheckResult::is_duplicate`].
fn refused(matches: &[Match]) -> bool {
    matches
        .iter()
        .any(|m| m.relation.is_none_or(|r| r.refuses_insert()))
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
                    Op::Delete(id) => w.delete(id)?,
                });
            }
            w.finish()?;
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
    /// related to it under `options` ([`Store::similar`]: near-duplicates within `tolerance`
    /// and, with a containment rule, partial copies), each with its relation. With `insert`,
    /// a document is added (or replaces its old sketch) unless it is a near-duplicate of a
    /// stored one or contained in one ([`neardup_core::relation::Relation::refuses_insert`]; a full
    /// article whose teaser is stored, `contains`, is inserted), and the checks and inserts of
    /// the whole batch are one transaction: writers take turns, so two concurrent checkers
    /// never both insert near-duplicates of each other, and a later document in the batch
    /// sees the earlier ones.
    pub fn check<S: Into<Sketch> + Clone>(
        &self,
        docs: &[(&str, S)],
        tolerance: impl Into<Tolerance>,
        insert: bool,
        options: &MatchOptions,
    ) -> StoreResult<Vec<CheckResult>> {
        let tolerance = tolerance.into();
        if !insert {
            let snap = self.snapshot()?;
            return docs
                .iter()
                .map(|(id, s)| {
                    Ok(CheckResult {
                        matches: snap.find(
                            &s.clone().into(),
                            tolerance,
                            Some(id),
                            Plan::Auto,
                            options,
                        )?,
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
                let matches = w.probe(&sketch, tolerance, Some(id), Plan::Auto, options)?;
                let inserted = !refused(&matches);
                let replaced = inserted && w.upsert(id, &sketch)?.inserted == 0;
                out.push(CheckResult {
                    matches,
                    inserted,
                    replaced,
                });
            }
            w.finish()?;
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
        let key_table = match &self.keys {
            Keys::Blocks(_) => KeyTable::Blocks(txn.open_table(BLOCKS).at(path)?),
            Keys::Bands(_) => KeyTable::Bands(
                txn.open_table(BANDS).at(path)?,
                txn.open_table(MINIMA).at(path)?,
            ),
        };
        Ok(Writer {
            docs: txn.open_table(DOCS).at(path)?,
            ids: txn.open_table(IDS).at(path)?,
            meta: txn.open_table(META).at(path)?,
            key_table,
            keys: &self.keys,
            next: None,
            path,
            method: self.config.method,
        })
    }
}

/// The key tables of a write transaction: SimHash blocks, or MinHash bands and minima.
pub(super) enum KeyTable<'t> {
    Blocks(redb::Table<'t, (u8, u64, u32), ()>),
    Bands(
        redb::Table<'t, (u8, u32, u32), ()>,
        redb::Table<'t, (u16, u32, u32), ()>,
    ),
}

/// The tables of a write transaction.
pub(super) struct Writer<'t> {
    docs: redb::Table<'t, u32, &'static [u8]>,
    ids: redb::Table<'t, (u64, u32), ()>,
    meta: redb::Table<'t, &'static str, &'static str>,
    key_table: KeyTable<'t>,
    keys: &'t Keys,
    /// The next document number, once read (and written back by [`Writer::finish`]).
    next: Option<(u32, bool)>,
    path: &'t Path,
    method: Method,
}

impl Writer<'_> {
    fn path(&self) -> &Path {
        self.path
    }

    /// The method of the store being written.
    fn method(&self) -> Method {
        self.method
    }

    /// A new document number.
    fn number(&mut self) -> StoreResult<u32> {
        let (next, _) = match self.next {
            Some(n) => n,
            None => {
                let text = self
                    .meta
                    .get(NEXT_DOC)
                    .at(self.path)?
                    .map(|g| g.value().to_owned());
                let n = text.as_deref().unwrap_or("0").parse::<u32>().map_err(|_| {
                    StoreError::Inconsistent {
                        path: self.path.to_owned(),
                        detail: format!("its next document number {text:?} is not a number"),
                    }
                })?;
                (n, false)
            }
        };
        let after = next
            .checked_add(1)
            .ok_or_else(|| StoreError::Inconsistent {
                path: self.path.to_owned(),
                detail: "all 2³² document numbers are used; `neardup migrate` renumbers a store"
                    .into(),
            })?;
        self.next = Some((after, true));
        Ok(next)
    }

    /// Writes back the next document number; call once, before committing.
    pub(super) fn finish(&mut self) -> StoreResult<()> {
        if let Some((n, true)) = self.next {
            self.meta
                .insert(NEXT_DOC, n.to_string().as_str())
                .at(self.path)?;
            self.next = Some((n, false));
        }
        Ok(())
    }

    /// Files document `doc` under every key of `sketch` (`insert`) or removes it from them.
    fn file(&mut self, doc: u32, sketch: &Sketch, insert: bool) -> StoreResult<()> {
        let path = self.path;
        match (&mut self.key_table, self.keys, sketch) {
            (KeyTable::Blocks(t), Keys::Blocks(layout), Sketch::SimHash(fp)) => {
                for i in 0..layout.len() {
                    let key = (i as u8, block_key(layout, *fp, i), doc);
                    if insert {
                        t.insert(key, ()).at(path)?;
                    } else {
                        t.remove(key).at(path)?;
                    }
                }
            }
            (KeyTable::Bands(t, minima), Keys::Bands(p), Sketch::MinHash(sig)) => {
                for (i, k) in sig.band_keys(p).into_iter().enumerate() {
                    let key = (i as u8, band_prefix(k), doc);
                    if insert {
                        t.insert(key, ()).at(path)?;
                    } else {
                        t.remove(key).at(path)?;
                    }
                }
                for (i, &v) in sig.values().iter().enumerate() {
                    let key = (i as u16, v, doc);
                    if insert {
                        minima.insert(key, ()).at(path)?;
                    } else {
                        minima.remove(key).at(path)?;
                    }
                }
            }
            (_, _, s) => return Err(method_mismatch(path, self.method, s.method())),
        }
        Ok(())
    }

    fn upsert(&mut self, id: &str, sketch: &Sketch) -> StoreResult<WriteCounts> {
        let path = self.path;
        if sketch.method() != self.method {
            return Err(method_mismatch(path, self.method, sketch.method()));
        }
        if let (Keys::Bands(p), Sketch::MinHash(sig)) = (self.keys, sketch) {
            check_signature(sig, p, path)?;
        }
        let mut c = WriteCounts::default();
        let bytes = self.keys.encode(sketch, id);
        let doc = match find(&self.ids, &self.docs, self.keys, id, path)? {
            Some((_, old)) if old == bytes => {
                c.unchanged = 1;
                return Ok(c);
            }
            Some((doc, old)) => {
                let (old_sketch, _) = self.keys.split(&old, doc, path)?;
                let old_sketch = self.keys.sketch(old_sketch);
                self.file(doc, &old_sketch, false)?;
                c.replaced = 1;
                doc
            }
            None => {
                let doc = self.number()?;
                self.ids.insert((id_hash(id), doc), ()).at(path)?;
                c.inserted = 1;
                doc
            }
        };
        self.docs.insert(doc, bytes.as_slice()).at(path)?;
        self.file(doc, sketch, true)?;
        Ok(c)
    }

    fn delete(&mut self, id: &str) -> StoreResult<WriteCounts> {
        let path = self.path;
        let mut c = WriteCounts::default();
        match find(&self.ids, &self.docs, self.keys, id, path)? {
            Some((doc, old)) => {
                let (old_sketch, _) = self.keys.split(&old, doc, path)?;
                let old_sketch = self.keys.sketch(old_sketch);
                self.file(doc, &old_sketch, false)?;
                self.ids.remove((id_hash(id), doc)).at(path)?;
                self.docs.remove(doc).at(path)?;
                c.deleted = 1;
            }
            None => c.missing = 1,
        }
        Ok(c)
    }

    /// Stored documents related to `sketch` under `options` ([`Store::similar`]), as of this
    /// transaction.
    fn probe(
        &self,
        sketch: &Sketch,
        tolerance: Tolerance,
        exclude: Option<&str>,
        plan: Plan,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        let path = self.path();
        let query = store_query(path, self.method(), sketch, tolerance)?;
        match (&self.key_table, self.keys, &query) {
            (
                KeyTable::Blocks(blocks),
                Keys::Blocks(layout),
                &Query::SimHash { fingerprint, k },
            ) => BlockProbe {
                layout,
                fp: fingerprint,
                k,
                exclude,
                plan,
            }
            .run(blocks, &self.docs, self.keys, path),
            (KeyTable::Bands(bands, minima), Keys::Bands(p), Query::MinHash { .. }) => {
                let minima = wants_containment(options).then_some(minima);
                probe_bands(
                    bands, minima, &self.docs, self.keys, p, &query, exclude, plan, options, path,
                )
            }
            (_, _, q) => Err(query_mismatch(path, self.method(), q.method())),
        }
    }
}

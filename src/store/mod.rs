//! The local near-duplicate index: fingerprints on disk in one directory, no server.
//!
//! A store is a [redb](https://docs.rs/redb) database (`neardup.redb` inside the store's
//! directory). It holds the sketches of one [`Method`]:
//!
//! - `meta`: the store's format, method, fingerprint profile, version, and the method's
//!   parameters (`k` for SimHash, the MinHash parameters). A store only ever holds sketches
//!   of one version, so they are all comparable; opening it with another method, profile,
//!   version or `k` is an error ([`StoreError::Mismatch`]), never silent mixing.
//! - SimHash: `docs` (document id → fingerprint) and `blocks`, the pigeonhole tables. For
//!   `k + 1` blocks (see [`BlockLayout`]), the key `(block number, block value)` lists
//!   `(fingerprint, id)` of every document with that block value. Two fingerprints within
//!   `k` share at least one block, so looking up the query's `k + 1` blocks finds every
//!   neighbour; the full fingerprint next to the id lets the distance be checked without a
//!   second lookup.
//! - MinHash: `signatures` (document id → signature, 4 bytes per minimum) and `bands`, the
//!   LSH tables: the key `(band number, band key)` lists the ids of every document with that
//!   band. A query looks up its bands and keeps the candidates whose estimated Jaccard
//!   similarity reaches the threshold: exactly "shares a band and estimated Jaccard ≥ t".
//!
//! Every change ([`Store::write`], [`Store::check`] with `insert`) is one ACID transaction:
//! a process killed mid-write leaves the store as of its last commit, with no document
//! half-written (in `docs` but missing from a block table, or the reverse). Commits use
//! redb's quick-repair mode so reopening after a crash is immediate.
//!
//! Concurrency: within a process, share one [`Store`] between threads. Readers
//! ([`Store::snapshot`]) see a consistent snapshot and are never blocked by the writer;
//! writers take turns. Across processes, redb locks the file: a second process that opens a
//! store in use gets [`StoreError::InUse`], or waits for it with [`OpenOptions::wait`].

mod error;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::backends::InMemoryBackend;
use redb::{
    Database, DatabaseError, MultimapTableDefinition, ReadTransaction, ReadableMultimapTable,
    ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde::Serialize;

/// The one match type of both backends, kept here under its old path too.
pub use crate::method::{sort_matches, Match};
pub use error::{StoreError, StoreResult};

use crate::method::{Method, Score, Sketch, Tolerance};
use crate::minhash::{MinHashParams, Signature};
use crate::simhash::{hamming, BlockLayout, SimHash};
use crate::Fingerprinter;
use error::DbContext;

/// Name of the database file inside a store's directory.
pub const FILE_NAME: &str = "neardup.redb";

/// Version of the on-disk layout described in the module docs.
pub const FORMAT: &str = "1";

const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
const DOCS: TableDefinition<&str, u64> = TableDefinition::new("docs");
const BLOCKS: MultimapTableDefinition<(u8, u64), (u64, &str)> =
    MultimapTableDefinition::new("blocks");
const SIGNATURES: TableDefinition<&str, &[u8]> = TableDefinition::new("signatures");
const BANDS: MultimapTableDefinition<(u8, u64), &str> = MultimapTableDefinition::new("bands");

/// What a store is built for. Fixed when the store is created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    pub method: Method,
    /// SimHash profile name (`default`, `seed000`, …); `minhash` for MinHash stores.
    pub profile: String,
    /// Sketch version (see [`Fingerprinter::version_of`]).
    pub version: String,
    /// SimHash: the distance the block tables guarantee to find with `k + 1` blocks (at
    /// most [`crate::simhash::MAX_K`]). Queries may ask for a larger distance; they stay
    /// exact but probe more. MinHash stores record 0.
    pub k: u32,
    /// MinHash: the signature and band parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashParams>,
}

impl StoreConfig {
    /// The configuration for SimHash fingerprints made by `fp`, from text or (with
    /// `pre_tokenized`) from words segmented elsewhere, which carry another version.
    pub fn new(fp: &Fingerprinter, pre_tokenized: bool, k: u32) -> StoreConfig {
        StoreConfig::for_method(fp, Method::SimHash, pre_tokenized, k)
    }

    /// The configuration for `method`'s sketches made by `fp`; `k` only matters for SimHash.
    pub fn for_method(
        fp: &Fingerprinter,
        method: Method,
        pre_tokenized: bool,
        k: u32,
    ) -> StoreConfig {
        let version = fp.version_of(method, pre_tokenized).to_owned();
        match method {
            Method::SimHash => StoreConfig {
                method,
                profile: fp.config().profile.name().to_owned(),
                version,
                k,
                minhash: None,
            },
            Method::MinHash => StoreConfig {
                method,
                profile: MINHASH_PROFILE.to_owned(),
                version,
                k: 0,
                minhash: Some(fp.config().minhash),
            },
        }
    }
}

/// The `profile` recorded by MinHash stores (SimHash profiles do not apply to them).
pub const MINHASH_PROFILE: &str = "minhash";

/// How to open a store.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// When another process has the store open, retry for this long before failing with
    /// [`StoreError::InUse`]. Zero (the default) fails at once.
    pub wait: Duration,
}

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

/// An open store. Share it between threads (it is `Send + Sync`); open it once per process.
pub struct Store {
    db: Database,
    path: PathBuf,
    config: StoreConfig,
    keys: Keys,
}

/// How a store files its sketches.
#[derive(Clone, Debug)]
enum Keys {
    /// SimHash: blocks of the store's `k`.
    Blocks(BlockLayout),
    /// MinHash: LSH bands.
    Bands(MinHashParams),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("config", &self.config)
            .finish()
    }
}

impl Store {
    /// Whether `dir` holds a store's database file.
    pub fn exists(dir: &Path) -> bool {
        dir.join(FILE_NAME).is_file()
    }

    /// Opens an existing store, whatever it was built for (see [`Store::config`]).
    pub fn open(dir: &Path, opts: &OpenOptions) -> StoreResult<Store> {
        if !Store::exists(dir) {
            return Err(StoreError::NotFound {
                path: dir.to_owned(),
            });
        }
        let db = open_db(dir, false, opts.wait)?;
        let config = read_meta(&db, dir)?.ok_or_else(|| StoreError::NotAStore {
            path: dir.to_owned(),
            reason: "it has no settings (the process creating it stopped early); delete it and index again".into(),
        })?;
        Store::with(db, dir.to_owned(), config)
    }

    /// Opens the store in `dir`, creating the directory and store if missing. An existing
    /// store must have been built for `config` (profile, version and `k`).
    pub fn create_or_open(
        dir: &Path,
        config: &StoreConfig,
        opts: &OpenOptions,
    ) -> StoreResult<Store> {
        Keys::of(config, dir)?;
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let db = open_db(dir, true, opts.wait)?;
        let stored = init_meta(&db, dir, config)?;
        let store = Store::with(db, dir.to_owned(), stored)?;
        store.ensure_config(config)?;
        Ok(store)
    }

    /// A store in memory only, gone when dropped: for tests and short-lived jobs.
    pub fn in_memory(config: &StoreConfig) -> StoreResult<Store> {
        let path = PathBuf::from("<memory>");
        Keys::of(config, &path)?;
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .at(&path)?;
        let stored = init_meta(&db, &path, config)?;
        Store::with(db, path, stored)
    }

    fn with(db: Database, path: PathBuf, config: StoreConfig) -> StoreResult<Store> {
        let keys = Keys::of(&config, &path)?;
        Ok(Store {
            db,
            path,
            config,
            keys,
        })
    }

    /// The directory of the store (`<memory>` for in-memory stores).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the store was built for.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The block layout of a SimHash store's `k`.
    pub fn layout(&self) -> Option<&BlockLayout> {
        match &self.keys {
            Keys::Blocks(l) => Some(l),
            Keys::Bands(_) => None,
        }
    }

    /// The store's method.
    pub fn method(&self) -> Method {
        self.config.method
    }

    /// Errors unless the store holds sketches of this method.
    pub fn ensure_method(&self, method: Method) -> StoreResult<()> {
        if self.config.method != method {
            return Err(method_mismatch(&self.path, self.config.method, method));
        }
        Ok(())
    }

    /// Errors unless the store holds fingerprints of this profile and version.
    pub fn ensure_fingerprints(&self, profile: &str, version: &str) -> StoreResult<()> {
        if self.config.method == Method::SimHash && self.config.profile != profile {
            return Err(self.mismatch(
                "profile",
                &self.config.profile,
                profile,
                "pass --profile with the store's profile, or use another --store",
            ));
        }
        if self.config.version != version {
            return Err(self.mismatch(
                "fingerprint version",
                &self.config.version,
                version,
                "its fingerprints are not comparable with these: use the flags (--profile, --no-hmm, --pre-tokenized) and neardup release it was built with, or index into a new --store",
            ));
        }
        Ok(())
    }

    /// Errors unless the store was built for exactly `config`.
    pub fn ensure_config(&self, config: &StoreConfig) -> StoreResult<()> {
        self.ensure_method(config.method)?;
        self.ensure_fingerprints(&config.profile, &config.version)?;
        if self.config.k != config.k {
            return Err(self.mismatch(
                "k",
                &self.config.k.to_string(),
                &config.k.to_string(),
                "a store's block tables are fixed when it is created: pass its -k, or index into a new --store",
            ));
        }
        Ok(())
    }

    fn mismatch(
        &self,
        what: &'static str,
        stored: &str,
        requested: &str,
        hint: &'static str,
    ) -> StoreError {
        StoreError::Mismatch {
            path: self.path.clone(),
            what,
            stored: stored.to_owned(),
            requested: requested.to_owned(),
            hint,
        }
    }

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

    /// Stored documents within `tolerance` of `sketch`, nearest first (ties by id).
    /// `exclude` leaves one id out, e.g. the document the query came from. A `u32`
    /// tolerance is a SimHash distance.
    pub fn similar(
        &self,
        sketch: impl Into<Sketch>,
        tolerance: impl Into<Tolerance>,
        exclude: Option<&str>,
    ) -> StoreResult<Vec<Match>> {
        self.snapshot()?
            .similar(&sketch.into(), tolerance.into(), exclude)
    }

    /// Documents within `tolerance` of the stored document `id`, itself excluded; `None` if
    /// `id` is not stored.
    pub fn similar_to_id(
        &self,
        id: &str,
        tolerance: impl Into<Tolerance>,
    ) -> StoreResult<Option<Vec<Match>>> {
        self.snapshot()?.similar_to_id(id, tolerance.into())
    }

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

    fn begin_write(&self) -> StoreResult<WriteTransaction> {
        let mut txn = self.db.begin_write().at(&self.path)?;
        txn.set_quick_repair(true);
        Ok(txn)
    }

    fn writer<'t>(&'t self, txn: &'t WriteTransaction) -> StoreResult<Writer<'t>> {
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

impl Keys {
    fn of(config: &StoreConfig, path: &Path) -> StoreResult<Keys> {
        Ok(match config.method {
            Method::SimHash => Keys::Blocks(BlockLayout::for_distance(config.k)?),
            Method::MinHash => {
                let p = config.minhash.ok_or_else(|| StoreError::NotAStore {
                    path: path.to_owned(),
                    reason: "a MinHash store without its parameters".into(),
                })?;
                p.validate().map_err(|reason| StoreError::NotAStore {
                    path: path.to_owned(),
                    reason: format!("bad MinHash parameters: {reason}"),
                })?;
                Keys::Bands(p)
            }
        })
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

fn decode_signature(
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

/// A consistent read-only view of a store (one read transaction). Cheap to make; make a
/// new one to see later writes.
pub struct Snapshot<'s> {
    store: &'s Store,
    txn: ReadTransaction,
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
        match &self.store.keys {
            Keys::Blocks(layout) => {
                let (fp, k) = self.store.simhash_query(sketch, tolerance)?;
                let docs = self.txn.open_table(DOCS).at(path)?;
                let blocks = self.txn.open_multimap_table(BLOCKS).at(path)?;
                probe_blocks(&blocks, &docs, layout, fp, k, exclude, plan).at(path)
            }
            Keys::Bands(p) => {
                let (sig, t) = self.store.minhash_query(sketch, tolerance)?;
                let sigs = self.txn.open_table(SIGNATURES).at(path)?;
                let bands = self.txn.open_multimap_table(BANDS).at(path)?;
                probe_bands(&bands, &sigs, p, sig, t, exclude, plan, path)
            }
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

impl Store {
    /// The SimHash query of a sketch and tolerance, or the mismatch error.
    fn simhash_query(&self, sketch: &Sketch, tolerance: Tolerance) -> StoreResult<(SimHash, u32)> {
        match (sketch, tolerance) {
            (Sketch::SimHash(fp), Tolerance::Distance(k)) => Ok((*fp, k)),
            (s, t) => Err(self.query_mismatch(s.method(), t)),
        }
    }

    /// The MinHash query of a sketch and tolerance, or the mismatch error.
    fn minhash_query<'q>(
        &self,
        sketch: &'q Sketch,
        tolerance: Tolerance,
    ) -> StoreResult<(&'q Signature, f64)> {
        match (sketch, tolerance) {
            (Sketch::MinHash(sig), Tolerance::Similarity(t)) => Ok((sig, t)),
            (s, t) => Err(self.query_mismatch(s.method(), t)),
        }
    }

    fn query_mismatch(&self, sketch: Method, tolerance: Tolerance) -> StoreError {
        query_mismatch(&self.path, self.config.method, sketch, tolerance)
    }
}

/// A write or an open asks a store of `stored` for sketches of `requested`.
fn method_mismatch(path: &Path, stored: Method, requested: Method) -> StoreError {
    StoreError::Mismatch {
        path: path.to_owned(),
        what: "method",
        stored: stored.name().to_owned(),
        requested: requested.name().to_owned(),
        hint: "a store holds the sketches of one method: pass its --method, or use another --store",
    }
}

/// A query of a store of `stored` with a sketch or a tolerance of another method: names the
/// method that does not fit (the sketch's, else the tolerance's).
fn query_mismatch(path: &Path, stored: Method, sketch: Method, tolerance: Tolerance) -> StoreError {
    let asked = if sketch == stored {
        tolerance.method()
    } else {
        sketch
    };
    StoreError::Mismatch {
        path: path.to_owned(),
        what: "method",
        stored: stored.name().to_owned(),
        requested: asked.name().to_owned(),
        hint:
            "query it with its own method (SimHash: -k DISTANCE; MinHash: --threshold SIMILARITY)",
    }
}

/// The data tables of a write transaction.
enum Writer<'t> {
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
        match (self, sketch, tolerance) {
            (
                Writer::Blocks {
                    docs,
                    blocks,
                    layout,
                    path,
                },
                Sketch::SimHash(fp),
                Tolerance::Distance(k),
            ) => probe_blocks(blocks, docs, layout, *fp, k, exclude, plan).at(path),
            (
                Writer::Bands {
                    sigs,
                    bands,
                    params,
                    path,
                },
                Sketch::MinHash(sig),
                Tolerance::Similarity(t),
            ) => probe_bands(bands, sigs, params, sig, t, exclude, plan, path),
            (w, s, t) => Err(query_mismatch(w.path(), w.method(), s.method(), t)),
        }
    }
}

/// The MinHash query: every document sharing a band with `sig` whose estimated Jaccard
/// similarity is at least `t` (or, with [`Plan::Scan`], every document at least `t`,
/// band or not). Each candidate is read once, however many bands it shares.
#[allow(clippy::too_many_arguments)]
fn probe_bands<B, S>(
    bands: &B,
    sigs: &S,
    params: &MinHashParams,
    sig: &Signature,
    t: f64,
    exclude: Option<&str>,
    plan: Plan,
    path: &Path,
) -> StoreResult<Vec<Match>>
where
    B: ReadableMultimapTable<(u8, u64), &'static str>,
    S: ReadableTable<&'static str, &'static [u8]>,
{
    let query = Sketch::MinHash(sig.clone());
    let tolerance = Tolerance::Similarity(t);
    let mut out = Vec::new();
    let mut consider = |id: &str, bytes: &[u8]| -> StoreResult<()> {
        if exclude == Some(id) {
            return Ok(());
        }
        let other = Sketch::MinHash(decode_signature(bytes, params, id, path)?);
        if let Some(score) = query.score(&other, tolerance) {
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
fn probe_blocks<B, D>(
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

fn open_db(dir: &Path, create: bool, wait: Duration) -> StoreResult<Database> {
    let file = dir.join(FILE_NAME);
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(10);
    loop {
        let builder = Database::builder();
        let result = if create {
            builder.create(&file)
        } else {
            builder.open(&file)
        };
        match result {
            Ok(db) => return Ok(db),
            Err(DatabaseError::DatabaseAlreadyOpen) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(StoreError::InUse {
                        path: dir.to_owned(),
                    });
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(DatabaseError::Storage(redb::StorageError::Io(source)))
                if source.kind() != std::io::ErrorKind::InvalidData =>
            {
                return Err(StoreError::Io { path: file, source })
            }
            Err(e) => {
                return Err(StoreError::NotAStore {
                    path: file,
                    reason: format!("{e} (if it is a damaged store, delete it and index again)"),
                })
            }
        }
    }
}

/// Reads the settings; `None` for a database without them.
fn read_meta(db: &Database, path: &Path) -> StoreResult<Option<StoreConfig>> {
    let txn = db.begin_read().at(path)?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e).at(path),
    };
    meta_from(&meta, path)
}

fn meta_from(
    meta: &impl ReadableTable<&'static str, &'static str>,
    path: &Path,
) -> StoreResult<Option<StoreConfig>> {
    let get = |key: &str| -> StoreResult<Option<String>> {
        Ok(meta.get(key).at(path)?.map(|g| g.value().to_owned()))
    };
    let Some(format) = get("format")? else {
        return Ok(None);
    };
    if format != FORMAT {
        return Err(StoreError::Format {
            path: path.to_owned(),
            found: format,
            supported: FORMAT,
        });
    }
    let missing = |key: &str| StoreError::NotAStore {
        path: path.to_owned(),
        reason: format!("its settings lack `{key}`"),
    };
    let k_text = get("k")?.ok_or_else(|| missing("k"))?;
    // Stores made before MinHash have no `method`: they are SimHash stores.
    let method = match get("method")? {
        None => Method::SimHash,
        Some(m) => m.parse().map_err(|_| StoreError::NotAStore {
            path: path.to_owned(),
            reason: format!("its method `{m}` is not one this neardup knows"),
        })?,
    };
    let minhash = match get("minhash")? {
        None => None,
        Some(text) => Some(
            serde_json::from_str(&text).map_err(|e| StoreError::NotAStore {
                path: path.to_owned(),
                reason: format!("its MinHash parameters `{text}` do not parse: {e}"),
            })?,
        ),
    };
    Ok(Some(StoreConfig {
        method,
        profile: get("profile")?.ok_or_else(|| missing("profile"))?,
        version: get("version")?.ok_or_else(|| missing("version"))?,
        k: k_text.parse().map_err(|_| StoreError::NotAStore {
            path: path.to_owned(),
            reason: format!("its k `{k_text}` is not a number"),
        })?,
        minhash,
    }))
}

/// Writes the settings and creates the tables if the database has none yet; returns the
/// settings it has.
fn init_meta(db: &Database, path: &Path, config: &StoreConfig) -> StoreResult<StoreConfig> {
    if let Some(stored) = read_meta(db, path)? {
        return Ok(stored);
    }
    let mut txn = db.begin_write().at(path)?;
    txn.set_quick_repair(true);
    let stored = {
        let mut meta = txn.open_table(META).at(path)?;
        // Another handle may have initialised it between the read and this write.
        if let Some(stored) = meta_from(&meta, path)? {
            stored
        } else {
            let k = config.k.to_string();
            let minhash = config
                .minhash
                .map(|p| serde_json::to_string(&p).expect("parameters serialise"));
            for (key, value) in [
                ("format", FORMAT),
                ("method", config.method.name()),
                ("profile", config.profile.as_str()),
                ("version", config.version.as_str()),
                ("k", k.as_str()),
                ("created_by", concat!("neardup ", env!("CARGO_PKG_VERSION"))),
            ] {
                meta.insert(key, value).at(path)?;
            }
            if let Some(m) = &minhash {
                meta.insert("minhash", m.as_str()).at(path)?;
            }
            match config.method {
                Method::SimHash => {
                    txn.open_table(DOCS).at(path)?;
                    txn.open_multimap_table(BLOCKS).at(path)?;
                }
                Method::MinHash => {
                    txn.open_table(SIGNATURES).at(path)?;
                    txn.open_multimap_table(BANDS).at(path)?;
                }
            }
            config.clone()
        }
    };
    txn.commit().at(path)?;
    Ok(stored)
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

//! The local near-duplicate index: fingerprints on disk in one directory, no server.
//!
//! A store is a [redb](https://docs.rs/redb) database (`neardup.redb` inside the store's
//! directory) with three tables:
//!
//! - `meta`: the store's format, fingerprint profile, fingerprint version and `k`. A store
//!   only ever holds fingerprints of one version, so they are all comparable; opening it with
//!   another profile, version or `k` is an error ([`StoreError::Mismatch`]), never silent
//!   mixing.
//! - `docs`: document id → fingerprint.
//! - `blocks`: the pigeonhole tables. For `k + 1` blocks (see [`BlockLayout`]), the key
//!   `(block number, block value)` lists `(fingerprint, id)` of every document with that
//!   block value. Two fingerprints within `k` share at least one block, so looking up the
//!   query's `k + 1` blocks finds every neighbour; the full fingerprint next to the id lets
//!   the distance be checked without a second lookup.
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

pub use error::{StoreError, StoreResult};

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

/// What a store is built for. Fixed when the store is created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    /// Fingerprint profile name (`default`, `seed000`).
    pub profile: String,
    /// Fingerprint version (see [`Fingerprinter::version`]).
    pub version: String,
    /// The distance the block tables guarantee to find with `k + 1` blocks (at most
    /// [`crate::simhash::MAX_K`]). Queries may ask for a larger distance; they stay exact
    /// but probe more.
    pub k: u32,
}

impl StoreConfig {
    /// The configuration for fingerprints made by `fp`, from text or (with `pre_tokenized`)
    /// from words segmented elsewhere, which carry another version.
    pub fn new(fp: &Fingerprinter, pre_tokenized: bool, k: u32) -> StoreConfig {
        StoreConfig {
            profile: fp.config().profile.name().to_owned(),
            version: if pre_tokenized {
                fp.version_pretokenized()
            } else {
                fp.version()
            }
            .to_owned(),
            k,
        }
    }
}

/// How to open a store.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// When another process has the store open, retry for this long before failing with
    /// [`StoreError::InUse`]. Zero (the default) fails at once.
    pub wait: Duration,
}

/// One result of a query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Match {
    pub id: String,
    pub distance: u32,
}

/// A change to apply with [`Store::write`].
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Insert the document, or replace its fingerprint everywhere if the id is stored.
    Upsert(&'a str, SimHash),
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// Stored documents (other than the same id) within the distance, nearest first.
    pub matches: Vec<Match>,
    /// The document was added (only with `insert`, and only when `matches` is empty).
    pub inserted: bool,
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

/// Size and skew of the block tables.
#[derive(Clone, Debug, Serialize)]
pub struct StoreStats {
    pub path: String,
    pub documents: u64,
    #[serde(flatten)]
    pub config: StoreConfig,
    /// Size of the database file, bytes (none for in-memory stores).
    pub file_bytes: Option<u64>,
    pub blocks: Vec<BlockStats>,
}

/// One block table: how evenly documents spread over its values.
#[derive(Clone, Debug, Serialize)]
pub struct BlockStats {
    /// Block number, 0 = highest bits.
    pub block: usize,
    /// Width in bits.
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
    layout: BlockLayout,
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
        BlockLayout::for_distance(config.k)?;
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
        BlockLayout::for_distance(config.k)?;
        let path = PathBuf::from("<memory>");
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .at(&path)?;
        let stored = init_meta(&db, &path, config)?;
        Store::with(db, path, stored)
    }

    fn with(db: Database, path: PathBuf, config: StoreConfig) -> StoreResult<Store> {
        let layout = BlockLayout::for_distance(config.k)?;
        Ok(Store {
            db,
            path,
            config,
            layout,
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

    /// The block layout of the store's `k`.
    pub fn layout(&self) -> &BlockLayout {
        &self.layout
    }

    /// Errors unless the store holds fingerprints of this profile and version.
    pub fn ensure_fingerprints(&self, profile: &str, version: &str) -> StoreResult<()> {
        if self.config.profile != profile {
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

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: &str) -> StoreResult<Option<SimHash>> {
        self.snapshot()?.get(id)
    }

    /// Stored documents within `k` of `fp`, nearest first (ties by id). `exclude` leaves one
    /// id out, e.g. the document the query came from.
    pub fn similar(&self, fp: SimHash, k: u32, exclude: Option<&str>) -> StoreResult<Vec<Match>> {
        self.snapshot()?.similar(fp, k, exclude)
    }

    /// Documents within `k` of the stored document `id`, itself excluded; `None` if `id` is
    /// not stored.
    pub fn similar_to_id(&self, id: &str, k: u32) -> StoreResult<Option<Vec<Match>>> {
        self.snapshot()?.similar_to_id(id, k)
    }

    /// Applies `ops` in order, in one transaction: all or nothing, durable on return.
    pub fn write(&self, ops: &[Op<'_>]) -> StoreResult<WriteCounts> {
        let txn = self.begin_write()?;
        let mut counts = WriteCounts::default();
        {
            let mut w = Writer::open(&txn, &self.layout).at(&self.path)?;
            for op in ops {
                counts.add(
                    match *op {
                        Op::Upsert(id, fp) => w.upsert(id, fp),
                        Op::Delete(id) => w.delete(id),
                    }
                    .at(&self.path)?,
                );
            }
        }
        txn.commit().at(&self.path)?;
        Ok(counts)
    }

    /// Inserts or replaces documents, in one transaction.
    pub fn upsert_batch(&self, docs: &[(&str, SimHash)]) -> StoreResult<WriteCounts> {
        let ops: Vec<Op<'_>> = docs.iter().map(|&(id, fp)| Op::Upsert(id, fp)).collect();
        self.write(&ops)
    }

    /// Inserts or replaces one document.
    pub fn upsert(&self, id: &str, fp: SimHash) -> StoreResult<WriteCounts> {
        self.write(&[Op::Upsert(id, fp)])
    }

    /// Removes documents, in one transaction.
    pub fn delete(&self, ids: &[&str]) -> StoreResult<WriteCounts> {
        let ops: Vec<Op<'_>> = ids.iter().map(|&id| Op::Delete(id)).collect();
        self.write(&ops)
    }

    /// For each document in order: which stored documents (other than the same id) are
    /// within `k`? With `insert`, a document with none is added (or replaces its old
    /// fingerprint), and the checks and inserts of the whole batch are one transaction:
    /// writers take turns, so two concurrent checkers never both insert near-duplicates of
    /// each other, and a later document in the batch sees the earlier ones.
    pub fn check(
        &self,
        docs: &[(&str, SimHash)],
        k: u32,
        insert: bool,
    ) -> StoreResult<Vec<CheckResult>> {
        if !insert {
            let snap = self.snapshot()?;
            return docs
                .iter()
                .map(|&(id, fp)| {
                    Ok(CheckResult {
                        matches: snap.similar(fp, k, Some(id))?,
                        inserted: false,
                    })
                })
                .collect();
        }
        let txn = self.begin_write()?;
        let mut out = Vec::with_capacity(docs.len());
        {
            let mut w = Writer::open(&txn, &self.layout).at(&self.path)?;
            for &(id, fp) in docs {
                let matches = probe(
                    &w.blocks,
                    &w.docs,
                    &self.layout,
                    fp,
                    k,
                    Some(id),
                    Plan::Auto,
                )
                .at(&self.path)?;
                let inserted = matches.is_empty();
                if inserted {
                    w.upsert(id, fp).at(&self.path)?;
                }
                out.push(CheckResult { matches, inserted });
            }
        }
        txn.commit().at(&self.path)?;
        Ok(out)
    }

    /// Document count and the spread of every block table (cheap: one read per bucket).
    pub fn stats(&self) -> StoreResult<StoreStats> {
        let snap = self.snapshot()?;
        let blocks_t = snap.txn.open_multimap_table(BLOCKS).at(&self.path)?;
        let mut blocks = Vec::with_capacity(self.layout.len());
        for i in 0..self.layout.len() {
            let mut b = BlockStats {
                block: i,
                width: self.layout.width(i),
                buckets: 0,
                largest: 0,
                largest_value: 0,
                mean: 0.0,
            };
            let mut total = 0u64;
            for entry in blocks_t
                .range((i as u8, 0u64)..=(i as u8, u64::MAX))
                .at(&self.path)?
            {
                let (key, values) = entry.at(&self.path)?;
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
            blocks.push(b);
        }
        Ok(StoreStats {
            path: self.path.display().to_string(),
            documents: snap.len()?,
            config: self.config.clone(),
            file_bytes: std::fs::metadata(self.path.join(FILE_NAME))
                .ok()
                .map(|m| m.len()),
            blocks,
        })
    }

    /// Checks that the block tables and the documents agree exactly: every document is filed
    /// under each of its blocks and nothing else is filed. Returns the document count.
    pub fn verify(&self) -> StoreResult<u64> {
        let snap = self.snapshot()?;
        let docs = snap.txn.open_table(DOCS).at(&self.path)?;
        let blocks = snap.txn.open_multimap_table(BLOCKS).at(&self.path)?;
        let bad = |detail: String| StoreError::Inconsistent {
            path: self.path.clone(),
            detail,
        };
        let mut entries = 0u64;
        for entry in blocks.iter().at(&self.path)? {
            let (key, values) = entry.at(&self.path)?;
            let (block, value) = key.value();
            for v in values {
                let v = v.at(&self.path)?;
                let (fp, id) = v.value();
                entries += 1;
                let stored = docs.get(id).at(&self.path)?.map(|g| g.value());
                if stored != Some(fp) {
                    return Err(bad(format!(
                        "block {block} lists `{id}` with {fp:016x}, but the document table has {stored:?}"
                    )));
                }
                if self.layout.block(SimHash(fp), block as usize) != value {
                    return Err(bad(format!(
                        "`{id}` is filed under the wrong value of block {block}"
                    )));
                }
            }
        }
        let n = docs.len().at(&self.path)?;
        if entries != n * self.layout.len() as u64 {
            return Err(bad(format!(
                "{n} documents need {} block entries, found {entries}",
                n * self.layout.len() as u64
            )));
        }
        Ok(n)
    }

    fn begin_write(&self) -> StoreResult<WriteTransaction> {
        let mut txn = self.db.begin_write().at(&self.path)?;
        txn.set_quick_repair(true);
        Ok(txn)
    }
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
        let docs = self.txn.open_table(DOCS).at(&self.store.path)?;
        docs.len().at(&self.store.path)
    }

    /// Whether the store holds no document.
    pub fn is_empty(&self) -> StoreResult<bool> {
        Ok(self.len()? == 0)
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: &str) -> StoreResult<Option<SimHash>> {
        let docs = self.txn.open_table(DOCS).at(&self.store.path)?;
        Ok(docs
            .get(id)
            .at(&self.store.path)?
            .map(|g| SimHash(g.value())))
    }

    /// See [`Store::similar`].
    pub fn similar(&self, fp: SimHash, k: u32, exclude: Option<&str>) -> StoreResult<Vec<Match>> {
        self.similar_with(fp, k, exclude, Plan::Auto)
    }

    /// [`Snapshot::similar`] with a chosen [`Plan`].
    pub fn similar_with(
        &self,
        fp: SimHash,
        k: u32,
        exclude: Option<&str>,
        plan: Plan,
    ) -> StoreResult<Vec<Match>> {
        let path = &self.store.path;
        let docs = self.txn.open_table(DOCS).at(path)?;
        let blocks = self.txn.open_multimap_table(BLOCKS).at(path)?;
        probe(&blocks, &docs, &self.store.layout, fp, k, exclude, plan).at(path)
    }

    /// See [`Store::similar_to_id`].
    pub fn similar_to_id(&self, id: &str, k: u32) -> StoreResult<Option<Vec<Match>>> {
        match self.get(id)? {
            Some(fp) => Ok(Some(self.similar(fp, k, Some(id))?)),
            None => Ok(None),
        }
    }

    /// Every document, in id order.
    pub fn documents(&self) -> StoreResult<Vec<(String, SimHash)>> {
        let path = &self.store.path;
        let docs = self.txn.open_table(DOCS).at(path)?;
        let mut out = Vec::with_capacity(docs.len().at(path)? as usize);
        for entry in docs.iter().at(path)? {
            let (id, fp) = entry.at(path)?;
            out.push((id.value().to_owned(), SimHash(fp.value())));
        }
        Ok(out)
    }
}

/// The two data tables of a write transaction.
struct Writer<'t> {
    docs: redb::Table<'t, &'static str, u64>,
    blocks: redb::MultimapTable<'t, (u8, u64), (u64, &'static str)>,
    layout: &'t BlockLayout,
}

impl<'t> Writer<'t> {
    fn open(
        txn: &'t WriteTransaction,
        layout: &'t BlockLayout,
    ) -> Result<Writer<'t>, redb::TableError> {
        Ok(Writer {
            docs: txn.open_table(DOCS)?,
            blocks: txn.open_multimap_table(BLOCKS)?,
            layout,
        })
    }

    fn upsert(&mut self, id: &str, fp: SimHash) -> Result<WriteCounts, redb::StorageError> {
        let old = self.docs.insert(id, fp.0)?.map(|g| g.value());
        let mut c = WriteCounts::default();
        match old {
            Some(o) if o == fp.0 => {
                c.unchanged = 1;
                return Ok(c);
            }
            Some(o) => {
                self.unfile(id, SimHash(o))?;
                c.replaced = 1;
            }
            None => c.inserted = 1,
        }
        for (i, v) in self.layout.blocks(fp).enumerate() {
            self.blocks.insert((i as u8, v), (fp.0, id))?;
        }
        Ok(c)
    }

    fn delete(&mut self, id: &str) -> Result<WriteCounts, redb::StorageError> {
        let old = self.docs.remove(id)?.map(|g| g.value());
        let mut c = WriteCounts::default();
        match old {
            Some(o) => {
                self.unfile(id, SimHash(o))?;
                c.deleted = 1;
            }
            None => c.missing = 1,
        }
        Ok(c)
    }

    fn unfile(&mut self, id: &str, fp: SimHash) -> Result<(), redb::StorageError> {
        for (i, v) in self.layout.blocks(fp).enumerate() {
            self.blocks.remove((i as u8, v), (fp.0, id))?;
        }
        Ok(())
    }
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
fn probe<B, D>(
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
                out.push(Match {
                    id: id.to_owned(),
                    distance: d,
                });
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
                    out.push(Match {
                        id: id.to_owned(),
                        distance: d,
                    });
                }
                Ok::<(), redb::StorageError>(())
            })?;
        }
    }
    out.sort_unstable_by(|a, b| a.distance.cmp(&b.distance).then_with(|| a.id.cmp(&b.id)));
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
    Ok(Some(StoreConfig {
        profile: get("profile")?.ok_or_else(|| missing("profile"))?,
        version: get("version")?.ok_or_else(|| missing("version"))?,
        k: k_text.parse().map_err(|_| StoreError::NotAStore {
            path: path.to_owned(),
            reason: format!("its k `{k_text}` is not a number"),
        })?,
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
            for (key, value) in [
                ("format", FORMAT),
                ("profile", config.profile.as_str()),
                ("version", config.version.as_str()),
                ("k", k.as_str()),
                ("created_by", concat!("neardup ", env!("CARGO_PKG_VERSION"))),
            ] {
                meta.insert(key, value).at(path)?;
            }
            txn.open_table(DOCS).at(path)?;
            txn.open_multimap_table(BLOCKS).at(path)?;
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

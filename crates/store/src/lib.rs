//! The local near-duplicate index: fingerprints on disk in one directory, no server.
//!
//! A store is a [redb](https://docs.rs/redb) database (`neardup.redb` inside the store's
//! directory). It holds the sketches of one [`Method`]:
//!
//! - `meta`: the store's format, method, fingerprint profile, version, and the method's
//!   parameters (`k` for SimHash, the MinHash parameters). A store only ever holds sketches
//!   of one version, so they are all comparable; opening it with another method, profile,
//!   version or `k` is an error ([`StoreError::Mismatch`]), never silent mixing.
//! - `docs` and `ids`: documents are numbered inside the store (never reused); `docs` maps a
//!   number to the sketch and the id, `ids` finds the number of an id. The key tables hold
//!   numbers, not ids (see the `tables` module for the exact layout, format 4).
//! - SimHash: `blocks`, the pigeonhole table. For `k + 1` blocks (see [`BlockLayout`]),
//!   every document is filed under each of its block values, with its full fingerprint in
//!   the key. Two fingerprints within `k` share at least one block, so looking up the query's
//!   `k + 1` blocks finds every neighbour, and the distance is checked without a second
//!   lookup.
//! - MinHash: `bands`, the LSH table: every document is filed under the 32-bit prefix of
//!   each of its band keys. A query looks up its bands, keeps the candidates whose full band
//!   key is the query's, and of those the ones whose estimated Jaccard similarity reaches
//!   the threshold: exactly "shares a band and estimated Jaccard ≥ t". With a containment
//!   rule ([`MatchOptions`]), [`Store::similar`] also keeps the candidates
//!   [`neardup_core::relation::MatchRule`] finds contained in the query or containing it; every
//!   match says its relation.
//! - MinHash: `minima`, every document under each of its (position, minimum) pairs. Read only
//!   when a query asks for containment: a document with at least
//!   [`neardup_core::relation::CANDIDATE_AGREEING_MINIMA`] of the query's 128 minima is a candidate
//!   too (the bands reach Jaccard ≈ 0.3, a 20 % excerpt has ≈ 0.2), and is answered when
//!   [`neardup_core::relation::MatchRule`] relates it — as near-duplicate too, when its estimate
//!   reaches the threshold without a shared band. Near-duplicate queries
//!   ([`neardup_core::relation::MatchOptions::NEAR_DUPLICATES_ONLY`]) never read it.
//!
//! Stores of format 1 (ids in every key table), 2 (signatures without their distinct
//! shingle count) and 3 (no `minima` table) are refused with
//! [`StoreError::NeedsMigration`]; [`migrate`] rewrites them. [`Store::compact`] gives back
//! the space a bulk load leaves.
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

mod compact;
mod config;
mod error;
mod migrate;
mod probe;
mod stats;
mod tables;
mod writer;

use std::path::{Path, PathBuf};

use redb::backends::InMemoryBackend;
use redb::Database;

pub use config::{OpenOptions, StoreConfig, FILE_NAME, FORMAT, MINHASH_PROFILE};
pub use error::{StoreError, StoreResult};
pub use migrate::{
    migrate, write_format_1, write_format_2, write_format_3, Migration, MIGRATING_FILE_NAME,
};
pub use neardup_core::method::{sort_matches, Match};
pub use probe::{Plan, Snapshot};
pub use stats::{BlockStats, MinimaStats, StoreStats};
pub use writer::{CheckResult, Op, WriteCounts};

use config::{init_meta, open_db, open_db_file, read_meta};
use error::DbContext;
use neardup_core::method::Sketch;
use neardup_core::method::{Method, Query, Tolerance};
use neardup_core::relation::MatchOptions;
use neardup_core::simhash::BlockLayout;
use tables::Keys;

/// An open store. Share it between threads (it is `Send + Sync`); open it once per process.
pub struct Store {
    db: Database,
    path: PathBuf,
    /// The database file (none for in-memory stores).
    file: Option<PathBuf>,
    config: StoreConfig,
    keys: Keys,
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
        Store::with(db, dir.to_owned(), Some(dir.join(FILE_NAME)), config)
    }

    /// Opens the store in `dir`, creating the directory and store if missing. An existing
    /// store must have been built for `config` (profile, version and `k`).
    pub fn create_or_open(
        dir: &Path,
        config: &StoreConfig,
        opts: &OpenOptions,
    ) -> StoreResult<Store> {
        config.keys(dir)?;
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let db = open_db(dir, true, opts.wait)?;
        let stored = init_meta(&db, dir, config)?;
        let store = Store::with(db, dir.to_owned(), Some(dir.join(FILE_NAME)), stored)?;
        store.ensure_config(config)?;
        Ok(store)
    }

    /// A new store for `config` in the database file `file` (which must not exist), named
    /// `dir` in errors: the store a migration builds beside the one it replaces.
    fn create_file(dir: &Path, file: &Path, config: &StoreConfig) -> StoreResult<Store> {
        let db = open_db_file(dir, file, true, Default::default())?;
        let stored = init_meta(&db, dir, config)?;
        Store::with(db, dir.to_owned(), Some(file.to_owned()), stored)
    }

    /// A store in memory only, gone when dropped: for tests and short-lived jobs.
    pub fn in_memory(config: &StoreConfig) -> StoreResult<Store> {
        let path = PathBuf::from("<memory>");
        config.keys(&path)?;
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .at(&path)?;
        let stored = init_meta(&db, &path, config)?;
        Store::with(db, path, None, stored)
    }

    fn with(
        db: Database,
        path: PathBuf,
        file: Option<PathBuf>,
        config: StoreConfig,
    ) -> StoreResult<Store> {
        let keys = config.keys(&path)?;
        if let Some(file) = &file {
            compact::remove_stale_copy(file)?;
        }
        Ok(Store {
            db,
            path,
            file,
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
                "its fingerprints are not comparable with these: use the flags (--profile, --no-hmm, --no-fold, --pre-tokenized) and neardup release it was built with, or index into a new --store",
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

    /// Stored documents related to `sketch` under `options`, nearest first (ties by id):
    /// near-duplicates within `tolerance` and, with a containment rule, articles contained in
    /// it or containing it; each MinHash match says its relation, read from the query, and
    /// the containment estimate (see [`neardup_core::relation`]). Under
    /// [`MatchOptions::NEAR_DUPLICATES_ONLY`], near-duplicates only. SimHash matches are
    /// near-duplicates within the distance, without a relation. `exclude` leaves one id out,
    /// e.g. the document the query came from. A `u32` tolerance is a SimHash distance.
    pub fn similar(
        &self,
        sketch: impl Into<Sketch>,
        tolerance: impl Into<Tolerance>,
        exclude: Option<&str>,
        options: &MatchOptions,
    ) -> StoreResult<Vec<Match>> {
        self.snapshot()?
            .similar(&sketch.into(), tolerance.into(), exclude, options)
    }

    /// [`Store::similar`] for the stored document `id`, itself excluded; `None` if `id` is
    /// not stored.
    pub fn similar_to_id(
        &self,
        id: &str,
        tolerance: impl Into<Tolerance>,
        options: &MatchOptions,
    ) -> StoreResult<Option<Vec<Match>>> {
        self.snapshot()?
            .similar_to_id(id, tolerance.into(), options)
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

/// The [`Query`] of `sketch` at `tolerance` on a store of `stored`, or the mismatch error
/// naming the method that does not fit (the sketch's, else the tolerance's).
fn store_query(
    path: &Path,
    stored: Method,
    sketch: &Sketch,
    tolerance: Tolerance,
) -> StoreResult<Query> {
    match Query::new(sketch.clone(), tolerance) {
        Ok(q) if q.method() == stored => Ok(q),
        _ => {
            let asked = if sketch.method() == stored {
                tolerance.method()
            } else {
                sketch.method()
            };
            Err(query_mismatch(path, stored, asked))
        }
    }
}

/// A query of a store of `stored` by the method `asked`.
fn query_mismatch(path: &Path, stored: Method, asked: Method) -> StoreError {
    StoreError::Mismatch {
        path: path.to_owned(),
        what: "method",
        stored: stored.name().to_owned(),
        requested: asked.name().to_owned(),
        hint:
            "query it with its own method (SimHash: -k DISTANCE; MinHash: --threshold SIMILARITY)",
    }
}

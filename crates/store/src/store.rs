//! The open store: the handle ([`Store`]), how a store is opened or created and checked
//! against what it was built for, the method errors of its queries, and the files beside its
//! database that a compaction or a migration leaves.

use std::path::{Path, PathBuf};

use redb::backends::InMemoryBackend;
use redb::Database;

use crate::config::{
    init_meta, open_db, open_db_file, read_meta, OpenOptions, StoreConfig, FILE_NAME,
};
use crate::error::{DbContext, StoreError, StoreResult};
use crate::tables::Keys;
use neardup_core::method::{Method, Query, Sketch, Tolerance};
use neardup_core::simhash::BlockLayout;

/// An open store. Share it between threads (it is `Send + Sync`); open it once per process.
pub struct Store {
    pub(crate) db: Database,
    pub(crate) path: PathBuf,
    /// The database file (none for in-memory stores).
    pub(crate) file: Option<PathBuf>,
    pub(crate) config: StoreConfig,
    pub(crate) keys: Keys,
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
    pub(crate) fn create_file(dir: &Path, file: &Path, config: &StoreConfig) -> StoreResult<Store> {
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

    pub(crate) fn with(
        db: Database,
        path: PathBuf,
        file: Option<PathBuf>,
        config: StoreConfig,
    ) -> StoreResult<Store> {
        let keys = config.keys(&path)?;
        if let Some(file) = &file {
            remove_stale_copy(file)?;
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
}

/// A write or an open asks a store of `stored` for sketches of `requested`.
pub(crate) fn method_mismatch(path: &Path, stored: Method, requested: Method) -> StoreError {
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
pub(crate) fn store_query(
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
pub(crate) fn query_mismatch(path: &Path, stored: Method, asked: Method) -> StoreError {
    StoreError::Mismatch {
        path: path.to_owned(),
        what: "method",
        stored: stored.name().to_owned(),
        requested: asked.name().to_owned(),
        hint:
            "query it with its own method (SimHash: -k DISTANCE; MinHash: --threshold SIMILARITY)",
    }
}

/// The suffix of the copy a compaction builds beside the database file.
const COPY_SUFFIX: &str = ".compacting";

/// Where a compaction of the database file `file` builds its copy.
pub(crate) fn copy_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(COPY_SUFFIX);
    PathBuf::from(name)
}

/// Removes what a compaction of `file` killed before its rename left behind. Called once
/// the store's file is open, so no live compaction can own the copy: that one would hold
/// the store's file, which redb lets one process open at a time.
pub(crate) fn remove_stale_copy(file: &Path) -> StoreResult<()> {
    remove_if_present(&copy_path(file))
}

pub(crate) fn remove_if_present(file: &Path) -> StoreResult<()> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Io {
            path: file.to_owned(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Makes a file's (or a directory's entries') contents durable.
pub(crate) fn sync(path: &Path) -> StoreResult<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })
}

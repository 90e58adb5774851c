//! What opening, reading and writing a store can fail with.

use std::path::{Path, PathBuf};

/// Errors of the local index. Messages name the store and say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("no store at {}: create one with `neardup index --store {} --input FILE`", .path.display(), .path.display())]
    NotFound { path: PathBuf },

    #[error("store {} is in use by another process (a store is open in one process at a time); wait for it to finish, or pass --wait SECONDS to queue behind it", .path.display())]
    InUse { path: PathBuf },

    #[error("store {} was built with {what} `{stored}`, not `{requested}`; {hint}", .path.display())]
    Mismatch {
        path: PathBuf,
        /// `method`, `profile`, `fingerprint version`, `k` or `signature length`.
        what: &'static str,
        stored: String,
        requested: String,
        hint: &'static str,
    },

    #[error("{} is not a neardup store: {reason}", .path.display())]
    NotAStore { path: PathBuf, reason: String },

    #[error("store {} has format {found}, this neardup reads format {supported}; use the neardup that wrote it, or rebuild the store", .path.display())]
    Format {
        path: PathBuf,
        found: String,
        supported: &'static str,
    },

    #[error("store {} has format {found}, which this neardup no longer reads; run `neardup migrate --store {}` to rewrite it in format 4 (it keeps every document)", .path.display(), .path.display())]
    NeedsMigration { path: PathBuf, found: String },

    #[error("store {} is inconsistent: {detail}", .path.display())]
    Inconsistent { path: PathBuf, detail: String },

    #[error("store {}", .path.display())]
    Db {
        path: PathBuf,
        #[source]
        source: Box<redb::Error>,
    },

    #[error("I/O error on {}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Core(#[from] neardup_core::Error),
}

/// Result with [`StoreError`].
pub type StoreResult<T> = std::result::Result<T, StoreError>;

/// Attaches the store's path to any redb error.
pub(crate) trait DbContext<T> {
    fn at(self, path: &Path) -> StoreResult<T>;
}

impl<T, E: Into<redb::Error>> DbContext<T> for std::result::Result<T, E> {
    fn at(self, path: &Path) -> StoreResult<T> {
        self.map_err(|e| StoreError::Db {
            path: path.to_owned(),
            source: Box::new(e.into()),
        })
    }
}

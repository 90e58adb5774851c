//! The root package's Elasticsearch test helpers (`tests/it/common/es.rs`), with the two paths
//! they ask their parent for.
#![allow(dead_code)]

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The read-only `shared/` folder beside the repository (`NEARDUP_SHARED` overrides).
pub fn shared_dir() -> PathBuf {
    std::env::var_os("NEARDUP_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"))
}

/// Path of the example corpus shipped in the repository.
pub fn examples() -> PathBuf {
    root().join("examples/articles.jsonl")
}

#[path = "../../../tests/it/common/es.rs"]
pub mod es;

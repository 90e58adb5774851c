//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The read-only `shared/` folder beside the repository (`NEARDUP_SHARED` overrides).
/// Tests that need it fail when it is missing: CI always has it.
pub fn shared_dir() -> PathBuf {
    let dir = std::env::var_os("NEARDUP_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    assert!(
        dir.join("compat").is_dir(),
        "shared data not found at {}: put the shared/ folder beside the repository or set NEARDUP_SHARED",
        dir.display()
    );
    dir
}

/// Path of the example corpus shipped in the repository.
pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/articles.jsonl")
}

//! The local near-duplicate index: fingerprints on disk in one directory, no server.
//!
//! A store is a [redb](https://docs.rs/redb) database (`neardup.redb` inside the store's
//! directory). It holds the sketches of one [`Method`](neardup_core::Method):
//!
//! - `meta`: the store's format, method, fingerprint profile, version, and the method's
//!   parameters (`k` for SimHash, the MinHash parameters). A store only ever holds sketches
//!   of one version, so they are all comparable; opening it with another method, profile,
//!   version or `k` is an error ([`StoreError::Mismatch`]), never silent mixing.
//! - `docs` and `ids`: documents are numbered inside the store (never reused); `docs` maps a
//!   number to the sketch and the id, `ids` finds the number of an id. The key tables hold
//!   numbers, not ids (see the `tables` module for the exact layout, format 4).
//! - SimHash: `blocks`, the pigeonhole table. For `k + 1` blocks (see [`BlockLayout`](neardup_core::BlockLayout)),
//!   every document is filed under each of its block values, with its full fingerprint in
//!   the key. Two fingerprints within `k` share at least one block, so looking up the query's
//!   `k + 1` blocks finds every neighbour, and the distance is checked without a second
//!   lookup.
//! - MinHash: `bands`, the LSH table: every document is filed under the 32-bit prefix of
//!   each of its band keys. A query looks up its bands, keeps the candidates whose full band
//!   key is the query's, and of those the ones whose estimated Jaccard similarity reaches
//!   the threshold: exactly "shares a band and estimated Jaccard ≥ t". With a containment
//!   rule ([`MatchOptions`](neardup_core::relation::MatchOptions)), [`Store::similar`] also keeps the candidates
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
mod store;
mod tables;
mod writer;

pub use config::{OpenOptions, StoreConfig, FILE_NAME, FORMAT, MINHASH_PROFILE};
pub use error::{StoreError, StoreResult};
pub use migrate::{
    migrate, write_format_1, write_format_2, write_format_3, Migration, MIGRATING_FILE_NAME,
};
pub use neardup_core::method::{sort_matches, Match};
pub use probe::{Plan, Snapshot};
pub use stats::{BlockStats, MinimaStats, StoreStats};
pub use store::Store;
pub use writer::{CheckResult, Op, WriteCounts};

//! # neardup-core
//!
//! The part of neardup that does no network, database or async work: an article's text
//! becomes fingerprints, and two fingerprints are related by one rule. The local store
//! (`neardup-store`), Elasticsearch (`neardup-es`), the service (`neardup-serve`) and the
//! `neardup` command line all build on it; an article service that needs only fingerprints
//! depends on this crate alone.
//!
//! - [`text`]: HTML → text, normalisation, Traditional → Simplified folding, learned
//!   boilerplate, segmentation.
//! - [`align`]: the passages two texts share, as spans of both.
//! - [`fingerprint`]: profiles, schemes and versions; [`Fingerprinter`] turns a text into a
//!   [`SimHash`] and/or a MinHash [`Signature`] in one pass.
//! - [`minhash`] and [`simhash`]: the two methods, with their in-memory all-pairs.
//! - [`method`]: the two methods behind one shape ([`Method`], [`Sketch`], [`Query`],
//!   [`Match`]); [`relation`]: near-duplicate or contained, the one rule.
//! - [`input`]: JSON Lines articles and the one document-to-text rule; [`pipeline`]: a stream
//!   of documents fingerprinted on all cores. Reading a file the caller names
//!   ([`input::open`]) is the only I/O here.

pub mod align;
pub mod allpairs;
pub mod error;
pub mod fingerprint;
pub mod hashing;
pub mod input;
pub mod method;
pub mod minhash;
pub mod pipeline;
pub mod relation;
pub mod simhash;
pub mod text;

pub use allpairs::simhash::AllPairs;
pub use error::{Error, Result};
pub use fingerprint::{
    Features, Fingerprint, FingerprintConfig, FingerprintRecord, Fingerprinter, Methods,
    MinHashFingerprint, MinHashOutcome, Outcome, Profile, Scheme, Sketches, Thresholds, TooShort,
    Versions, Weight,
};
pub use method::{Match, Method, Query, Score, Sketch, Tolerance};
pub use minhash::{MinHashParams, MinHasher, MinimaOrder, Signature, Threshold};
pub use simhash::{hamming, BlockLayout, SimHash};

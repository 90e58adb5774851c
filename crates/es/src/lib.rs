//! Elasticsearch: connection, the fingerprint fields' mapping, writing fingerprints next to
//! articles, and the worker that keeps an index's fingerprints current.
//!
//! - [`EsConfig`] says where the cluster is and how to log in; [`EsConfig::client`] builds the
//!   official [`Elasticsearch`](elasticsearch::Elasticsearch) client from it.
//! - [`schema`]: the fields as data: names ([`FieldNames`], [`MinHashFieldNames`]), block type
//!   ([`BlockType`]), what `_meta` records ([`IndexMeta`]), the fields formats in one table
//!   ([`FieldsFormat`]), the JSON mappings shipped in `mappings/`, and how values are encoded
//!   and decoded. No cluster calls.
//! - `init`: what talks to the cluster about the schema: [`init_index`] (`neardup es-init`),
//!   [`upgrade_index`] (`es-init --upgrade`),
//!   [`verify_index`], [`read_meta`], [`existing_profile`].
//! - `write`: [`EsIndexer`] indexes articles with their fingerprint and updates fingerprint
//!   fields in bulk, guarded by sequence numbers so a stale fingerprint never wins.
//! - `worker`: one pass of "find documents whose fingerprint is missing, outdated or older
//!   than their text, and write a fresh one".
//! - [`feed`]: the changes feed the worker follows: every document written since its last
//!   look, by `_seq_no` above each shard's checkpoint, checkpoints kept in Elasticsearch.
//! - `similar`: the query path: [`Similar`] finds every document near a document, a text
//!   or a fingerprint, with the method the indices record in `_meta` ([`IndexMeta`]): MinHash
//!   above a similarity, or SimHash within Hamming distance k ≤ 7.
//! - `scan`: the one paging layer: every read of many hits (similar, worker, back-fill)
//!   goes through a [`Scanner`] (point in time + `search_after`, or scroll on clusters without
//!   PIT); a scroll page is never re-sent after a failure.
//! - `retry`: the backoff policy every request goes through ([`request`]).
//!
//! Every request is sent with plain `application/json` (the client's default; bulk bodies as
//! `application/x-ndjson`) and the client does not check the `X-Elastic-Product` header, so the
//! same code talks to Elasticsearch 7.10+ and 8.x. See `docs/elasticsearch.md`.

pub mod backfill;
mod claims;
mod client;
mod dedupe;
mod error;
pub mod feed;
mod formula;
pub mod group;
mod init;
mod nodes;
mod pace;
pub mod regroup;
mod retry;
mod scan;
pub mod schema;
mod similar;
mod tracking;
mod walk;
mod worker;
mod write;

pub use claims::{claims_index_name, ClaimError, Claims, Held, RecentInsert};
pub use client::{
    check, first_contact, path_segment, redact_url, request, send, server_version, Auth, Body,
    EsConfig, Reply, Secret,
};
pub(crate) use client::{mget, path_segment_keep_patterns, search};
pub use dedupe::{claim_keys, insert_unless_near, DedupeError, Inserted, NewArticle};
pub(crate) use error::blocked;
pub use error::{error_type_reason, EsError};
pub use formula::{learn_formula, record_formula, FormulaUpkeep, LearnedFormula, FORMULA_SAMPLE};
pub use init::{
    existing_profile, finish_layout_upgrade, init_index, read_each, read_meta,
    record_common_minima, upgrade_index, verify_index, InitOutcome,
};
pub use retry::RetryPolicy;
pub use scan::{Cursor, Paging, ScanOptions, ScanStats, Scanner, Slice};
pub use schema::{
    stale_query, tracking_pipeline, tracking_pipeline_name, BlockType, CommonMinima,
    ContainmentFieldNames, ContainmentMeta, FieldNames, FieldsFormat, FormatRequest, GroupLink,
    GroupMeta, GroupOrder, IndexMeta, LayoutRequest, MetaSource, MinHashFieldNames, MinHashLayout,
    MinHashMeta, SimHashMeta, TrackingMeta, TRACKING_MARKER,
};
pub use similar::{
    FilterMode, IndexList, Match, Near, QueryFingerprint, Similar, SimilarOptions, Similarity,
    DEFAULT_K, FLIPPED_BLOCK_K,
};
pub use tracking::{track_edits, untrack_edits, Tracking};
pub use worker::{FeedReport, FormulaReport, PassReport, Watermark, Worker, WorkerConfig};
pub use write::{
    fingerprint_fields_json, fingerprint_source, simhash_fields_json, sketch_source, BulkReport,
    EsIndexer, FingerprintUpdate, GroupLabel, IndexedArticle, ItemFailure, Labelling, Refresh,
};

//! The integration tests: one binary (`cargo test --test it`), one module per area.
//!
//! Tests that need a live node sit under [`live_es`]: `scripts/test` starts one for the
//! whole suite, and CI runs them again on every engine with `--test it live_es::`. A
//! test that needs Elasticsearch and finds none fails; none skips.

mod common;

mod architecture;
mod blocks_prop;
mod boilerplate;
mod cli_es_errors;
mod cli_fingerprint;
mod cli_store;
mod cli_usage;
mod compat_seed000;
mod dedupe_align;
mod eval;
mod eval_copies;
mod eval_messy;
mod eval_partial;
mod fingerprint;
mod serve_store;
mod stability;
mod store;
mod store_crash;
mod store_migrate;

/// Against a live node (`NEARDUP_TEST_ES`, started by `scripts/es-up`).
mod live_es {
    mod aligned;
    mod backfill;
    mod claims;
    mod containment;
    mod deploy;
    mod feed;
    mod groups;
    mod init;
    mod layout;
    mod nodes;
    mod regroup;
    mod rule_agreement;
    mod scan;
    mod serve;
    mod similar;
    mod tracking;
    mod worker;
    mod write;
}

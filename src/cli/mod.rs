//! The `neardup` command line (feature `cli`): parsing and dispatch. Each subcommand lives in
//! its own module and only translates flags into library calls and results into output.
//!
//! It sits in the library so that the development tools of the workspace (`neardup-bench`,
//! `neardup-fuzz`) parse the same argument groups ([`common`], [`es_args`], [`store_args`])
//! and end the same way ([`common::finish`]) without a copy; `src/main.rs` only calls [`main`].

mod backfill;
mod boilerplate;
mod check;
pub mod common;
mod dedupe;
mod delete;
pub mod es_args;
mod es_init;
pub mod eval;
#[cfg(feature = "eval-plot")]
pub mod eval_plot;
mod fingerprint;
mod formula;
mod index;
mod migrate;
mod regroup;
#[cfg(feature = "serve")]
mod serve;
mod similar;
mod stats;
pub mod store_args;
mod worker;

use clap::{Parser, Subcommand};

/// Near-duplicate detection for news articles with MinHash and 64-bit SimHash.
#[derive(Parser, Debug)]
#[command(name = "neardup", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: 0 success; 1 error; 2 usage error; 3 finished, but some input lines (or, for backfill and regroup, documents) were rejected; 4 similar: the query is too short to have a fingerprint."
)]
struct Cli {
    /// Log lines on stderr as `text` or as `json` (one object per line, for log collectors).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "NEARDUP_LOG_FORMAT",
        display_order = 1000
    )]
    log_format: common::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Fingerprint JSON Lines articles; one JSON line out per line in, in input order.
    Fingerprint(fingerprint::Args),
    /// Give an Elasticsearch index the fingerprint fields (creates the index if needed).
    EsInit(es_init::Args),
    /// Keep an Elasticsearch index's fingerprints current: fill missing, outdated and changed ones.
    Worker(worker::Args),
    /// Fingerprint JSON Lines articles and upsert them into a local store (created if missing).
    Index(index::Args),
    /// Documents near a stored id, a text, one article or a fingerprint, in a local store
    /// (`--store DIR`) or in Elasticsearch (`--index NAME`, cluster from `--es URL`).
    Similar(similar::Args),
    /// For each article: is it a near-duplicate of something stored? `--insert` adds the rest.
    Check(check::Args),
    /// Remove documents from a local store.
    Delete(delete::Args),
    /// Near-duplicate clusters of one file, in memory (no store): JSON lines `{"cluster", "min_similarity"}` (MinHash) or `{"cluster", "max_distance"}` (SimHash).
    Dedupe(dedupe::Args),
    /// Size, settings and bucket skew of a local store (JSON).
    Stats(stats::Args),
    /// Rewrite a local store made by an older neardup (formats 1, 2 and 3) in the current format, keeping every document.
    Migrate(migrate::Args),
    /// Learn the boilerplate lines of a corpus or an index (a site's disclaimer, links, footer).
    Boilerplate(boilerplate::Args),
    /// Learn the formula text of a corpus (clauses and formulas many unrelated documents share), for `dedupe --align --formula`.
    Formula(formula::Args),
    /// Measure detection quality on labelled pairs, or generate the synthetic benchmark.
    Eval(eval::Args),
    /// Fingerprint the existing documents of Elasticsearch indices: resumable, throttled, guarded.
    Backfill(backfill::Args),
    /// Recompute an index's duplicate groups as connected components; write the labels that change.
    Regroup(regroup::Args),
    /// Serve near-duplicate lookups over HTTP (JSON API, metrics, health) from Elasticsearch or a local store.
    ///
    /// A local store (`--store DIR`) is served as one index named after its directory:
    /// `--store /srv/news` answers `/v1/news/…`. See docs/service.md.
    #[cfg(feature = "serve")]
    Serve(serve::Args),
}

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    common::init_logging(cli.log_format);
    let result = match cli.command {
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Boilerplate(args) => boilerplate::run(args),
        Command::Formula(args) => formula::run(args),
        Command::EsInit(args) => es_init::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Index(args) => index::run(args),
        Command::Similar(args) => similar::run(args),
        Command::Check(args) => check::run(args),
        Command::Delete(args) => delete::run(args),
        Command::Dedupe(args) => dedupe::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Backfill(args) => backfill::run(args),
        Command::Regroup(args) => regroup::run(args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::run(args),
    };
    common::finish(result)
}

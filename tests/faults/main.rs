//! The fault suite (issue 32): a cluster of 3 es7 nodes, each in a JVM of its own
//! (`scripts/es-up --nodes 3`), whose nodes die, pause and restart in the middle of neardup's
//! jobs. Each scenario checks the figures (acknowledged writes lost, wrong or missing
//! fingerprints against the library's own fingerprint of every document, ...) as assertions
//! and prints them as a row of the table in docs/elasticsearch.md.
//!
//! Not part of `cargo test` (its target has `test = false`): run it on its own,
//! `cargo test --test faults` (CI: its own step in `.ci/run`). It starts and stops its own
//! cluster on `NEARDUP_FAULTS_PORT` (default 9230; nodes on that port and the next two,
//! transport ports +100) and fails when it cannot. Arguments pick scenarios by a part of
//! their name (`cargo test --test faults -- pause`); `NEARDUP_FAULTS_DOCS` sets the number of
//! articles (default 2,000) for a longer figure run.

#[path = "../it/common/mod.rs"]
mod common;

mod backfill;
mod check;
mod cluster;
mod jobs;
mod lost;
mod serve;

use std::time::Instant;

use backfill::Fault;
use check::Row;
use cluster::Cluster;
use jobs::RegroupFault;

fn main() {
    let port: u16 = std::env::var("NEARDUP_FAULTS_PORT")
        .ok()
        .map(|p| p.parse().expect("NEARDUP_FAULTS_PORT is a port"))
        .unwrap_or(9230);
    let docs: usize = std::env::var("NEARDUP_FAULTS_DOCS")
        .ok()
        .map(|n| n.parse().expect("NEARDUP_FAULTS_DOCS is a number"))
        .unwrap_or(2000);
    let picks: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let scenarios: Vec<(&str, Scenario)> = vec![
        (
            "backfill-kill-primary",
            Scenario::Backfill(Fault::KillPrimary),
        ),
        (
            "backfill-pause-primary",
            Scenario::Backfill(Fault::PausePrimary),
        ),
        (
            "backfill-full-restart",
            Scenario::Backfill(Fault::FullRestart),
        ),
        ("worker-kill-primary", Scenario::Worker),
        (
            "regroup-kill-primary",
            Scenario::Regroup(RegroupFault::KillPrimary),
        ),
        (
            "regroup-neardup-sigkill",
            Scenario::Regroup(RegroupFault::KillNeardup),
        ),
        (
            "regroup-align-kill-primary",
            Scenario::Regroup(RegroupFault::KillPrimaryAligned),
        ),
        ("serve-dedupe-kill-primary", Scenario::ServeDedupe),
        ("serve-two-dedupe-kill-primary", Scenario::ServeTwoDedupe),
        ("serve-bulk-kill-primary", Scenario::ServeBulk),
        ("serve-neardup-sigkill", Scenario::ServeSigkill),
        ("lost-answer-bulk", Scenario::LostBulk),
        ("lost-answer-claim-create", Scenario::LostClaimCreate),
        ("lost-answer-mget", Scenario::LostMget),
        ("lost-answer-dedupe-put", Scenario::LostDedupePut),
    ];
    let chosen: Vec<_> = scenarios
        .into_iter()
        .filter(|(name, _)| picks.is_empty() || picks.iter().any(|p| name.contains(p.as_str())))
        .collect();
    assert!(!chosen.is_empty(), "no scenario matches {picks:?}");

    let start = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = Cluster::start(port, 3);
    // The shared test helpers (the regroup fixture, its `neardup` runs, `TestIndex`) take the
    // cluster from here: every node's URL.
    std::env::set_var("NEARDUP_TEST_ES", cluster.urls());
    let mut rows: Vec<Row> = Vec::new();
    for (name, scenario) in chosen {
        eprintln!("faults: {name} ({docs} articles)");
        let row = rt.block_on(scenario.run(&cluster, docs));
        eprintln!("{}", row.markdown());
        rows.push(row);
    }
    drop(cluster);
    println!("{}", check::HEADER);
    for row in &rows {
        println!("{}", row.markdown());
    }
    println!(
        "faults: {} scenario(s), {} articles each, {} s with the cluster's start and stop",
        rows.len(),
        docs,
        start.elapsed().as_secs()
    );
    for row in &rows {
        row.assert_targets();
    }
}

enum Scenario {
    Backfill(Fault),
    Worker,
    Regroup(RegroupFault),
    ServeDedupe,
    ServeTwoDedupe,
    ServeBulk,
    ServeSigkill,
    LostBulk,
    LostClaimCreate,
    LostMget,
    LostDedupePut,
}

impl Scenario {
    async fn run(&self, c: &Cluster, docs: usize) -> Row {
        match self {
            Scenario::Backfill(f) => backfill::run(c, *f, docs).await,
            Scenario::Worker => jobs::worker(c, docs).await,
            Scenario::Regroup(f) => jobs::regroup(c, *f).await,
            Scenario::ServeDedupe => serve::dedupe(c).await,
            Scenario::ServeTwoDedupe => serve::dedupe_two_processes(c).await,
            Scenario::ServeBulk => serve::bulk(c, docs).await,
            Scenario::ServeSigkill => serve::neardup_sigkill(c, docs).await,
            Scenario::LostBulk => lost::bulk(c, docs).await,
            Scenario::LostClaimCreate => lost::claim_create(c).await,
            Scenario::LostMget => lost::mget(c).await,
            Scenario::LostDedupePut => lost::dedupe_put(c).await,
        }
    }
}

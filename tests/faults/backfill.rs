//! Faults during a back-fill (`neardup backfill` against every node's URL): the node holding
//! the primary SIGKILLed then restarted, the primary paused (SIGSTOP ~40 s, SIGCONT), the
//! whole cluster restarted. The job is rerun (the same command, which resumes from its state
//! file) until it completes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{init_index, IndexMeta, RetryPolicy};
use serde_json::{json, Value};

use crate::check::{self, Row};
use crate::cluster::Cluster;
use crate::common::es as t;

#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// SIGKILL the node holding the primary, restart it.
    KillPrimary,
    /// SIGSTOP the node holding the primary for `PAUSE`, then SIGCONT.
    PausePrimary,
    /// es-down, es-up of every node.
    FullRestart,
}

/// How long a paused primary stays paused: longer than Elasticsearch's fault detection
/// (3 failed follower checks of 10 s) takes to drop it from the cluster.
const PAUSE: Duration = Duration::from_secs(40);

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::KillPrimary => "back-fill: node holding the primary SIGKILLed, restarted",
            Fault::PausePrimary => "back-fill: primary paused (SIGSTOP 40 s, SIGCONT)",
            Fault::FullRestart => "back-fill: full cluster restart",
        }
    }
}

/// A fresh index of one shard and one replica (one node holds the primary), es-init's fields
/// of both methods, `docs` loaded (acknowledged by a refreshing bulk).
pub async fn index_with(c: &Cluster, client: &Elasticsearch, name: &str, docs: &[(String, Value)]) {
    t::delete_index(client, name).await;
    t::call(
        client,
        Method::Put,
        &format!("/{name}"),
        Some(json!({"settings": {"number_of_shards": 1, "number_of_replicas": 1}})),
    )
    .await;
    init_index(client, &RetryPolicy::none(), name, &IndexMeta::default())
        .await
        .unwrap();
    for chunk in docs.chunks(500) {
        t::load(client, name, chunk).await;
    }
    c.wait_green(client, name).await;
}

pub fn spawn_backfill(es: &str, index: &str, dir: &Path, run: u32) -> Child {
    let log = std::fs::File::create(dir.join(format!("run-{run}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["backfill", "--es", es, "--index", index, "--quiet"])
        .arg("--state")
        .arg(dir.join("state.jsonl"))
        .arg("--failed")
        .arg(dir.join("failed.jsonl"))
        .arg("--report-json")
        .arg(dir.join("report.json"))
        .args(["--bulk-size", "50", "--max-docs-per-sec", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

/// Finished batches in the state file so far.
fn batches_done(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("state.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("{\"t\":\"done\"") && !l.contains("\"b\":0,"))
        .count()
}

/// Documents the job's report counts as stored (written or recorded too short), all runs.
pub fn acknowledged(dir: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(dir.join("report.json")) else {
        return 0;
    };
    let r: Value = serde_json::from_str(&text).unwrap();
    r["counts"]["written"].as_u64().unwrap() + r["counts"]["too_short"].as_u64().unwrap()
}

pub async fn run(c: &Cluster, fault: Fault, n: usize) -> Row {
    let start = Instant::now();
    let client = c.client();
    let index = format!("faults-backfill-{}", format!("{fault:?}").to_lowercase());
    let docs = t::shared_articles(n);
    index_with(c, &client, &index, &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let es = c.urls();

    let mut runs = 1;
    let mut child = spawn_backfill(&es, &index, dir.path(), runs);
    while batches_done(dir.path()) < 4 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{}: the back-fill ended ({status}) before the fault",
                fault.name()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match fault {
        Fault::KillPrimary => {
            let node = c.primary_node(&client, &index).await;
            c.kill(node);
            // the job goes on against the promoted replica for a while, then the node is back
            std::thread::sleep(Duration::from_secs(5));
            c.restart(node);
        }
        Fault::PausePrimary => {
            let node = c.primary_node(&client, &index).await;
            c.pause(node);
            std::thread::sleep(PAUSE);
            c.resume(node);
        }
        Fault::FullRestart => c.restart_all(),
    }
    let mut status = child.wait().unwrap();
    // Everything the first run acknowledged is there once the cluster is whole again.
    c.wait_green(&client, &index).await;
    let acked = acknowledged(dir.path());
    let now = check::fingerprints(&client, &index, &docs).await;
    let mut lost = acked.saturating_sub(now.right);
    // Resume: the same command again, until it completes.
    while !status.success() && runs < 4 {
        runs += 1;
        status = spawn_backfill(&es, &index, dir.path(), runs)
            .wait()
            .unwrap();
    }
    let f = check::fingerprints(&client, &index, &docs).await;
    lost += f.absent + acknowledged(dir.path()).saturating_sub(f.right);
    let logs: String = (1..=runs)
        .map(|r| {
            std::fs::read_to_string(dir.path().join(format!("run-{r}.log"))).unwrap_or_default()
        })
        .collect();
    assert_eq!(
        f.extra,
        0,
        "{}: no document doubled or made up",
        fault.name()
    );
    t::delete_index(&client, &index).await;
    let row = Row {
        scenario: fault.name().to_owned(),
        lost,
        wrong_or_missing: f.wrong + f.missing,
        completed: status.success(),
        runs,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    };
    if !row.completed || row.lost + row.wrong_or_missing > 0 {
        eprintln!("{}: the back-fill's output:\n{logs}", fault.name());
    }
    row
}

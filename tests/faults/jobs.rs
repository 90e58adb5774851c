//! Faults during the other jobs: `neardup regroup` (group labels afterwards = the connected
//! components of what `similar` links, computed by brute force, and = what a fresh
//! `regroup --dry-run` lists) and `neardup worker --once` (every document's fingerprint).
//! The node holding the primary is SIGKILLed in the middle and restarted (or, for `regroup`,
//! neardup itself is SIGKILLed); a job that gave up is rerun with the same command until it
//! completes.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use elasticsearch::http::Method;
use serde_json::{json, Value};

use crate::backfill::index_with;
use crate::check::{self, Row};
use crate::cluster::Cluster;
use crate::common::es as t;
use crate::common::regroup::{fixture, label_mismatches, labels_and_components, listed_groups, ok};

fn neardup(es: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.args(args).env("NEARDUP_ES_URL", es);
    cmd
}

/// Waits for a job, then reruns the same command until it succeeds (three reruns at most);
/// returns the last status and the number of runs.
fn resume(mut child: Child, rerun: impl Fn() -> Command) -> (ExitStatus, u32) {
    let mut status = child.wait().unwrap();
    let mut runs = 1;
    while !status.success() && runs < 4 {
        runs += 1;
        status = rerun().stdout(Stdio::null()).status().unwrap();
    }
    (status, runs)
}

/// The SIGKILL of the node holding the primary, then its restart, while a job runs.
async fn kill_primary_and_restart(c: &Cluster, index: &str) {
    let node = c.primary_node(&c.client(), index).await;
    c.kill(node);
    std::thread::sleep(Duration::from_secs(5));
    c.restart(node);
}

/// What dies in the middle of `regroup`.
#[derive(Clone, Copy, Debug)]
pub enum RegroupFault {
    /// The node holding the primary: SIGKILLed, restarted.
    KillPrimary,
    /// neardup itself: SIGKILLed, then the same command run again.
    KillNeardup,
    /// The node holding the primary, during `regroup --align` (the texts decide what is
    /// joined): the labels afterwards are what a fresh `regroup --align --dry-run` lists.
    KillPrimaryAligned,
}

pub async fn regroup(c: &Cluster, fault: RegroupFault) -> Row {
    let start = Instant::now();
    let client = c.client();
    let es = c.urls();
    let idx = fixture(&client, "faults-regroup").await;
    c.wait_green(&client, &idx.name).await;
    let before = check::all_docs(&client, &idx.name).await;
    let loaded: Vec<(String, Value)> = before.clone().into_iter().collect();
    let (_, components) = labels_and_components(&client, &idx.name).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.redb");
    let report = dir.path().join("report.json");
    let aligned = matches!(fault, RegroupFault::KillPrimaryAligned);
    let mut args = vec![
        "regroup",
        "--index",
        &idx.name,
        "--quiet",
        "--state",
        state.to_str().unwrap(),
        "--report-json",
        report.to_str().unwrap(),
        "--page-size",
        "10",
        "--max-docs-per-sec",
        "20",
    ];
    if aligned {
        args.push("--align");
    }
    let mut child = neardup(&es, &args)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "neardup_es::regroup=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once 30 articles are linked (a log line per page), the rest of its log drained.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut linked = 0;
    let mut line = String::new();
    while linked < 30 && stderr.read_line(&mut line).unwrap() > 0 {
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            linked = v["fields"]["linked"].as_u64().unwrap_or(linked);
        }
        line.clear();
    }
    assert!(linked >= 30, "regroup logged its pages before the fault");
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "regroup still runs at the fault"
    );
    match fault {
        RegroupFault::KillPrimary | RegroupFault::KillPrimaryAligned => {
            kill_primary_and_restart(c, &idx.name).await
        }
        RegroupFault::KillNeardup => child.kill().unwrap(),
    }
    let (status, runs) = resume(child, || neardup(&es, &args));
    let log = drain.join().unwrap();

    let (labels, again) = labels_and_components(&client, &idx.name).await;
    let mismatches = label_mismatches(&labels, &components);
    // A fresh dry run lists the same groups (the components of two or more).
    let dry_state = dir.path().join("dry.redb");
    std::env::set_var("NEARDUP_ES_URL", &es);
    let mut dry = vec![
        "regroup",
        "--index",
        &idx.name,
        "--dry-run",
        "--quiet",
        "--state",
        dry_state.to_str().unwrap(),
    ];
    if aligned {
        dry.push("--align");
    }
    let out = ok(&dry);
    let listed = listed_groups(&out);
    let shared: BTreeSet<BTreeSet<String>> = components
        .iter()
        .filter(|g| g.len() >= 2)
        .cloned()
        .collect();
    // Aligned, the labels (groups of two or more) are what the fresh aligned dry run lists;
    // otherwise they are the brute-force components, as the dry run lists them.
    let consistent = if aligned {
        let mut by_label: std::collections::BTreeMap<&str, BTreeSet<String>> = Default::default();
        for (id, label) in &labels {
            by_label.entry(label).or_default().insert(id.clone());
        }
        let labelled: BTreeSet<BTreeSet<String>> =
            by_label.into_values().filter(|g| g.len() >= 2).collect();
        labelled == listed
    } else {
        mismatches.is_empty() && again == components && listed == shared
    };
    if !consistent || !status.success() {
        eprintln!("regroup: {mismatches:?}\nits log after the fault:\n{log}");
    }
    let f = check::fingerprints(&client, &idx.name, &loaded).await;
    assert_eq!(f.extra, 0, "regroup: no document made up");
    Row {
        scenario: match fault {
            RegroupFault::KillPrimary => "regroup: node holding the primary SIGKILLed, restarted",
            RegroupFault::KillNeardup => "regroup: neardup itself SIGKILLed, rerun",
            RegroupFault::KillPrimaryAligned => {
                "regroup --align: node holding the primary SIGKILLed, restarted"
            }
        }
        .into(),
        lost: f.absent,
        wrong_or_missing: f.wrong + f.missing,
        groups_consistent: Some(consistent),
        completed: status.success(),
        runs,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

/// Documents of `index` the worker has written a fingerprint to (progress, not correctness).
async fn fingerprinted(client: &elasticsearch::Elasticsearch, index: &str) -> u64 {
    let body = json!({"query": {"exists": {"field": "simHashVersion"}}});
    t::call(
        client,
        Method::Post,
        &format!("/{index}/_count"),
        Some(body),
    )
    .await["count"]
        .as_u64()
        .unwrap()
}

pub async fn worker(c: &Cluster, n: usize) -> Row {
    let start = Instant::now();
    let client = c.client();
    let es = c.urls();
    let index = "faults-worker";
    let docs = t::shared_articles(n);
    index_with(c, &client, index, &docs).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["worker", "--once", "--index", index, "--batch-size", "50"];
    let log = dir.path().join("worker.log");
    let mut child = neardup(&es, &args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The fault once the worker has written some pages, well before it is done.
    while fingerprinted(&client, index).await < 200 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the worker ended ({status}) before the fault: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        fingerprinted(&client, index).await < n as u64,
        "the worker was done before the fault: give it more articles"
    );
    kill_primary_and_restart(c, index).await;
    let (status, runs) = resume(child, || neardup(&es, &args));
    c.wait_green(&client, index).await;
    let f = check::fingerprints(&client, index, &docs).await;
    assert_eq!(f.extra, 0, "worker: no document doubled or made up");
    t::delete_index(&client, index).await;
    Row {
        scenario: "worker --once: node holding the primary SIGKILLed, restarted".into(),
        lost: f.absent,
        wrong_or_missing: f.wrong + f.missing,
        completed: status.success(),
        runs,
        seconds: start.elapsed().as_secs(),
        ..Row::default()
    }
}

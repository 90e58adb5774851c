//! The soak's short version (`neardup-bench soak`, issue 45): 90 seconds of mixed traffic
//! through `neardup serve` on a cluster of its own (`scripts/es-up --nodes 3`, es7, on
//! `NEARDUP_SOAK_PORT`, default 9270..9272), node 1 SIGKILLed a quarter in and started again.
//! The bench checks every answer and write itself and exits non-zero on any wrong answer,
//! lost or doubled write, wrong fingerprint or claim left held; this test runs it and reads
//! its report. Nothing here is timed.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benchsuite sits in the repository")
        .to_path_buf()
}

/// The cluster, stopped with `scripts/es-down` when dropped (also when the test fails).
struct Cluster(u16);

impl Cluster {
    fn start(port: u16) -> Cluster {
        let status = Command::new(root().join("scripts/es-up"))
            .args(["--clean", "--nodes", "3", "--port", &port.to_string()])
            .env("ES_ENGINE", "es7")
            .stdout(Stdio::null())
            .status()
            .expect("scripts/es-up runs");
        assert!(
            status.success(),
            "scripts/es-up --nodes 3 --port {port} failed: the soak needs its own es7 cluster \
             there (ports {port}..{} and {}.. free, Java and Maven; NEARDUP_SOAK_PORT moves it)",
            port + 2,
            port + 100
        );
        Cluster(port)
    }

    fn urls(&self) -> String {
        (0..3)
            .map(|i| format!("http://127.0.0.1:{}", self.0 + i))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/es-down"))
            .env("ES_PORT", self.0.to_string())
            .stdout(Stdio::null())
            .status();
    }
}

#[test]
fn ninety_seconds_of_traffic_through_a_node_restart_lose_nothing_and_answer_right() {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_neardup-bench"));
    let neardup = bench.with_file_name("neardup");
    assert!(
        neardup.is_file(),
        "{}: the service binary is missing (cargo build --bin neardup, or run the workspace's tests)",
        neardup.display()
    );
    let port: u16 = std::env::var("NEARDUP_SOAK_PORT")
        .ok()
        .map(|p| p.parse().expect("NEARDUP_SOAK_PORT is a port"))
        .unwrap_or(9270);
    let cluster = Cluster::start(port);
    let out_dir = tempfile::tempdir().unwrap();
    let corpus = root().join("../shared/data/zh_articles.jsonl.gz");
    let out = Command::new(&bench)
        .args(["soak", "--es", &cluster.urls()])
        .arg("--input")
        .arg(&corpus)
        .args(["--base", "1000", "--queries", "100", "--duration", "90s"])
        .args(["--rate", "10", "--concurrency", "6", "--interval", "15s"])
        .args([
            "--restart-node",
            "1",
            "--restart-at",
            "0.25",
            "--down",
            "10s",
        ])
        .arg("--neardup")
        .arg(&neardup)
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .expect("neardup-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the soak failed:\n{stdout}\n{stderr}");
    eprintln!("{stdout}");
    assert!(
        stdout.contains("- wrong answers: 0; lost writes: 0; wrong fingerprint fields: 0; doubled"),
        "{stdout}"
    );
    assert!(stdout.contains("SIGKILLed at minute"), "{stdout}");
    assert!(stdout.contains("back in the cluster at minute"), "{stdout}");
    // Every kind of traffic ran, and some of each was answered.
    for kind in ["lookup", "put", "dedupe", "bulk"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("- {kind}: ")))
            .unwrap_or_else(|| panic!("no line for {kind}: {stdout}"));
        let answered: u64 = line
            .trim_start_matches(&format!("- {kind}: "))
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(answered > 0, "{kind}: nothing answered: {line}");
    }
    assert!(out_dir.path().join("soak.png").is_file());
    let csv = std::fs::read_to_string(out_dir.path().join("soak.csv")).unwrap();
    assert!(csv.lines().count() >= 6, "{csv}");
}

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

/// Runs the `neardup` binary with `args`, feeding `stdin`; returns (exit code, stdout, stderr).
pub fn neardup(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the neardup binary runs");
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

/// Parses JSON Lines output.
pub fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad output line {l:?}: {e}")))
        .collect()
}

pub mod es;

/// `neardup ARGS --es URL --index INDEX` against the test node: exit code, stdout, stderr.
pub fn es_cli(index: &str, args: &[&str]) -> (i32, String, String) {
    let url = es::url();
    let mut all = args.to_vec();
    all.extend(["--es", url.as_str(), "--index", index]);
    neardup(&all, b"")
}
pub mod regroup;
pub mod serve;

/// `neardup backfill --quiet` of `index` on the test node, its state and failed files in a
/// temporary directory; it must exit 0. Then a refresh.
pub async fn backfill(client: &elasticsearch::Elasticsearch, index: &str) {
    backfill_with(client, index, &[]).await
}

/// [`backfill`] with more flags (`extra`).
pub async fn backfill_with(client: &elasticsearch::Elasticsearch, index: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (state, failed) = (dir.path().join("s.jsonl"), dir.path().join("f.jsonl"));
    let url = es::url();
    let mut args = vec![
        "backfill",
        "--quiet",
        "--es",
        &url,
        "--index",
        index,
        "--state",
        state.to_str().unwrap(),
        "--failed",
        failed.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = neardup(&args, b"");
    assert_eq!(code, 0, "{err}");
    es::refresh(client, index).await;
}

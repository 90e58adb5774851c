//! One command shape: `similar` shows every flag of both backends, `-k/--max-distance` is one
//! flag with one policy, and every usage error (clap's or a flag value checked after parsing)
//! exits 2.

use crate::common;

use common::neardup;

fn examples() -> String {
    common::examples().to_str().unwrap().to_owned()
}

#[test]
fn similar_help_shows_store_and_elasticsearch_flags() {
    let (code, out, err) = neardup(&["similar", "--help"], b"");
    assert_eq!(code, 0, "{err}");
    for flag in [
        "--store",
        "--wait",
        "--index",
        "--es ",
        "--es-api-key",
        "--filter",
        "--paging",
        "--page-size",
        "--block-fields",
        "--id ",
        "--text",
        "--input",
        "--fingerprint",
        "--ids-from",
        "--threshold",
        "--max-distance",
        "--format",
        "--profile",
    ] {
        assert!(out.contains(flag), "`similar --help` lacks {flag}:\n{out}");
    }
    let (code, _, _) = neardup(&["similar-es", "--help"], b"");
    assert_eq!(code, 2, "no second, hidden similar command");
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let ex = examples();
    for (args, needle) in [
        (vec!["dedupe", "-i", &ex, "-k", "8"], "at most 7"),
        (
            vec!["dedupe", "-i", &ex, "--max-distance", "9"],
            "at most 7",
        ),
        (
            vec!["index", "--store", store, "-i", &ex, "-k", "8"],
            "at most 7",
        ),
        (
            vec!["similar", "--store", store, "--index", "x", "--id", "a"],
            "cannot be used with",
        ),
        (
            vec![
                "similar",
                "--es",
                "http://127.0.0.1:1",
                "--index",
                "x",
                "--id",
                "a",
                "-k",
                "8",
            ],
            "at most 7",
        ),
        (
            vec!["similar", "--store", store, "--id", "a", "--page-size", "0"],
            "--page-size",
        ),
        (
            vec!["fingerprint", "-i", &ex, "--profile", "nope"],
            "unknown profile",
        ),
        (
            vec![
                "eval",
                "--pairs",
                &ex,
                "--minhash",
                "--containment-margin=-0.5",
            ],
            "is not a margin",
        ),
    ] {
        let (code, _, err) = neardup(&args, b"");
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(
        !std::path::Path::new(store).exists(),
        "no store made by a refused -k"
    );
}

#[test]
fn a_missing_elasticsearch_url_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["similar", "--index", "x", "--id", "a"])
        .env_remove("NEARDUP_ES_URL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--es URL") && err.contains("NEARDUP_ES_URL"),
        "{err}"
    );
}

/// Every subcommand builds its parser: clap checks argument names only when a command is
/// parsed, so a clash would otherwise surface as a panic in front of a user. `--help` lists
/// the user's commands and nothing of the workshop (the benchmarks are `neardup-bench`, the
/// fuzzer `neardup-fuzz`, whose parsers their own crates check).
#[test]
fn every_subcommand_has_a_working_help() {
    fn commands(args: &[&str]) -> Vec<String> {
        let mut a = args.to_vec();
        a.push("--help");
        let (code, out, err) = neardup(&a, b"");
        assert_eq!(code, 0, "{args:?}: {err}");
        out.split("Commands:")
            .nth(1)
            .map(|s| {
                s.lines()
                    .skip(1)
                    .take_while(|l| l.starts_with("  "))
                    .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
                    .filter(|c| c != "help")
                    .collect()
            })
            .unwrap_or_default()
    }
    let top = commands(&[]);
    assert_eq!(
        top,
        [
            "fingerprint",
            "es-init",
            "worker",
            "index",
            "similar",
            "check",
            "delete",
            "dedupe",
            "stats",
            "migrate",
            "boilerplate",
            "formula",
            "eval",
            "backfill",
            "regroup",
            "serve"
        ],
        "only user commands"
    );
    for c in &top {
        for sub in commands(&[c]) {
            commands(&[c, &sub]);
        }
    }
}

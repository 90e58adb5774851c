//! The Elasticsearch benchmarks against a live node (`NEARDUP_TEST_ES`): `neardup-bench
//! es-recall` scores what `similar --id` finds against the labels, and `bench es-similar`
//! loads corpus and synthetic documents into the two indices it measures. Nothing here is
//! timed; the figures the commands print are not checked, only what they count.

mod common;

use std::process::Command;

use common::es::{shared_articles, unique_name, url};
use elasticsearch::http::Method;
use neardup::es;
use serde_json::{json, Value};

/// `(id, article)` with the id inside the article, as `neardup eval --generate` writes them.
fn with_id(n: usize) -> Vec<Value> {
    shared_articles(n)
        .into_iter()
        .map(|(id, mut v)| {
            v["id"] = json!(id);
            v
        })
        .collect()
}

/// Runs `neardup-bench es-similar` on the first 40 shared articles (written to a file in
/// `dir`), 100 documents and 10 timed lookups into indices named `prefix`-…, with `extra`
/// arguments: (exit code, stdout, stderr).
fn es_similar(dir: &std::path::Path, prefix: &str, extra: &[&str]) -> (i32, String, String) {
    let corpus = dir.join("corpus.jsonl");
    let lines: Vec<String> = with_id(40).iter().map(Value::to_string).collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
    let es = url();
    let mut args = vec![
        "es-similar",
        "--es",
        &es,
        "--input",
        corpus.to_str().unwrap(),
        "--docs",
        "100",
        "--queries",
        "10",
        "--warmup",
        "2",
        "--index-prefix",
        prefix,
    ];
    args.extend_from_slice(extra);
    bench(&args, b"")
}

/// Runs `neardup-bench` with `args`: (exit code, stdout, stderr).
fn bench(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    assert!(stdin.is_empty(), "the bench commands read no stdin");
    let out = Command::new(env!("CARGO_BIN_EXE_neardup-bench"))
        .args(args)
        .output()
        .expect("the neardup-bench binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pair(a: &Value, b: &Value, duplicate: bool) -> String {
    json!({ "a": a, "b": b, "duplicate": duplicate }).to_string()
}

/// Against a live node: CI runs these on every engine with the filter `live_es::`.
mod live_es {
    use super::*;

    #[test]
    fn es_recall_counts_found_and_missed_pairs_against_the_labels() {
        let arts = with_id(3);
        let mut copy = arts[0].clone();
        copy["id"] = json!(format!("{}~copy", arts[0]["id"].as_str().unwrap()));
        let lines = [
            // A verbatim repost: found at distance 0.
            pair(&arts[0], &copy, true),
            // Unrelated articles labelled as such: not found.
            pair(&arts[0], &arts[1], false),
            // Unrelated articles labelled duplicates: a missed positive.
            pair(&arts[2], &arts[1], true),
        ];
        let dir = tempfile::tempdir().unwrap();
        let pairs = dir.path().join("pairs.jsonl");
        std::fs::write(&pairs, lines.join("\n") + "\n").unwrap();
        let index = unique_name("bench-recall");
        let es = url();
        let (code, out, err) = bench(
            &[
                "es-recall",
                "--es",
                &es,
                "--pairs",
                pairs.to_str().unwrap(),
                "--index",
                &index,
            ],
            b"",
        );
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            out.contains("3 pairs of")
                && out.contains("(2 positive, 1 negative); 4 distinct articles"),
            "{out}"
        );
        assert!(out.contains("| all | 0.500 | 1.000 | 1 | 1 | 0 |"), "{out}");
        assert!(out.contains("| positive | 2 | 1 | 0.500 |"), "{out}");
        assert!(out.contains("| negative | 1 | 0 | 0.000 |"), "{out}");
    }

    #[test]
    fn es_similar_fills_word_walked_documents_into_indices_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = unique_name("bench-words");
        let lookups = dir.path().join("lookups.jsonl");
        let (code, out, err) = es_similar(
            dir.path(),
            &prefix,
            &[
                "-k",
                "3",
                "--fill",
                "words",
                "--corpus-queries",
                "--lookups",
                lookups.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            out.contains("100 documents per index (40 corpus articles, 60 synthetic of Words"),
            "{out}"
        );
        assert!(out.contains("corpus articles only"), "{out}");
        for suffix in ["both", "simhash"] {
            let start = format!("| {prefix}-words-{suffix} | ");
            let row = out.lines().find(|l| l.starts_with(&start));
            let cells: Vec<&str> = row
                .unwrap_or_else(|| panic!("no row {start}:\n{out}"))
                .split('|')
                .map(str::trim)
                .collect();
            assert_eq!(cells[3], "100", "documents: {out}");
        }
        // Every lookup is of a corpus article (the first 40 ids of the input).
        let ids: std::collections::HashSet<String> = with_id(40)
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect();
        let looked_up: Vec<Value> = std::fs::read_to_string(&lookups)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!looked_up.is_empty());
        for l in &looked_up {
            assert!(ids.contains(l["id"].as_str().unwrap()), "{l}");
        }
    }

    #[test]
    fn es_similar_loads_corpus_then_synthetic_documents_into_both_indices() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = unique_name("bench-similar");
        let (code, out, err) = es_similar(dir.path(), &prefix, &[]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            out.contains("100 documents per index (40 corpus articles, 60 synthetic"),
            "{out}"
        );
        let row = |index: &str| -> Vec<String> {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("| {index} |")))
                .unwrap_or_else(|| panic!("no row for {index}:\n{out}"));
            line.split('|').map(|c| c.trim().to_owned()).collect()
        };
        let both = row(&format!("{prefix}-both"));
        let simhash = row(&format!("{prefix}-simhash"));
        assert_eq!(both[2], "SimHash + MinHash");
        assert_eq!(simhash[2], "SimHash");
        for r in [&both, &simhash] {
            assert_eq!(r[3], "100", "documents: {out}");
            assert_eq!(r[4], "1", "one segment after the force merge: {out}");
        }
        let bytes = |r: &[String]| r[5].parse::<u64>().unwrap();
        assert!(
            bytes(&both) > bytes(&simhash),
            "MinHash fields cost space: {out}"
        );
        let lookups = [
            ("both", "MinHash t = 0.3"),
            ("both", "SimHash k = 3"),
            ("both", "SimHash k = 7"),
            ("simhash", "SimHash k = 3"),
            ("simhash", "SimHash k = 7"),
        ];
        for (suffix, query) in lookups {
            for filter in ["client", "server"] {
                let start = format!("| {prefix}-{suffix} | {query} | {filter} |");
                let line = out
                    .lines()
                    .find(|l| l.starts_with(&start))
                    .unwrap_or_else(|| panic!("no row {start}:\n{out}"));
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let cell = |i: usize| -> f64 {
                    cells[i]
                        .parse()
                        .unwrap_or_else(|_| panic!("cell {i} is not a number: {line}"))
                };
                // Candidates: median ≤ p99. What crosses the network is at most the
                // candidates (all of them with the client filter), and every match crossed it
                // (transferred has one decimal, matches two). The query document is none of
                // them: the query leaves it out.
                assert!(cell(7) <= cell(8), "{line}");
                assert!(cell(10) <= cell(9), "{line}");
                if filter == "client" {
                    assert_eq!(cells[10], cells[9], "{line}");
                }
                assert!(cell(11) <= cell(10) + 0.05, "{line}");
            }
        }
        assert!(
            !out.contains(&format!("| {prefix}-simhash | MinHash")),
            "no MinHash lookup in the SimHash-only index: {out}"
        );
        // Without --keep both indices are gone afterwards.
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let client = common::es::client().await;
            for suffix in ["both", "simhash"] {
                let path = format!("/{prefix}-{suffix}");
                let r = es::send(&client, Method::Get, &path, &[], None)
                    .await
                    .unwrap();
                assert_eq!(r.status.as_u16(), 404, "{path} was left behind");
            }
        });
    }

    /// `neardup-bench backfill` on an index that keeps groups: every pass links them by one
    /// regroup by the join, from articles whose labels the bench took off (so each changes
    /// as many), and with two slices one regroup after both, as a user runs it.
    #[test]
    fn backfill_links_the_groups_by_the_join_in_every_pass() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus.jsonl");
        let lines: Vec<String> = with_id(40).iter().map(Value::to_string).collect();
        std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
        let es = url();
        for slices in ["1", "2"] {
            let (code, out, err) = bench(
                &[
                    "backfill",
                    "--es",
                    &es,
                    "--input",
                    corpus.to_str().unwrap(),
                    "--docs",
                    "200",
                    "--runs",
                    "2",
                    "--groups",
                    "sketches",
                    "--slices",
                    slices,
                ],
                b"",
            );
            assert_eq!(code, 0, "{out}\n{err}");
            // Every pass starts from articles without a label: its regroup changes as many.
            let changed: Vec<u64> = out
                .lines()
                .filter_map(|l| l.split("| regroup by the join | 200 articles, ").nth(1))
                .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(changed.len(), 2, "one regroup a pass: {out}");
            assert!(
                changed[0] > 0 && changed[0] == changed[1],
                "{changed:?}: {out}"
            );
            assert!(out.contains("groups sketches (linked by Join)"), "{out}");
        }
    }
}

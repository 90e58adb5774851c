//! `neardup index`, `similar`, `check`, `delete`, `dedupe` and `stats` as a user runs them,
//! on the example corpus, checked against distances computed from `neardup fingerprint`.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{json_lines, neardup};
use neardup::store::{OpenOptions, Store};
use neardup::{MinHashParams, Signature, Sketch};
use serde_json::{json, Value};

fn examples() -> String {
    common::examples().to_str().unwrap().to_owned()
}

/// id → fingerprint of every fingerprinted example article, in input order.
fn example_fps() -> Vec<(String, u64)> {
    let (code, out, err) = neardup(&["fingerprint", "-i", &examples(), "-q"], b"");
    assert_eq!(code, 0, "{err}");
    json_lines(&out)
        .into_iter()
        .filter(|l| !l["simhash"].is_null())
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_owned(),
                l["u64"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// What `similar` must print for `q` at distance `k`: computed by brute force.
fn expected(fps: &[(String, u64)], q: u64, k: u32, exclude: Option<&str>) -> Vec<Value> {
    let mut v: Vec<(u32, &str)> = fps
        .iter()
        .filter(|(id, _)| Some(id.as_str()) != exclude)
        .map(|(id, fp)| ((fp ^ q).count_ones(), id.as_str()))
        .filter(|&(d, _)| d <= k)
        .collect();
    v.sort();
    v.into_iter()
        .map(|(d, id)| json!({"id": id, "distance": d}))
        .collect()
}

/// `neardup index --method METHOD` (an existing store must have that method).
fn index_with(method: &str, store: &Path, input: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "index",
        "--method",
        method,
        "--store",
        store.to_str().unwrap(),
        "--input",
        input,
    ];
    args.extend_from_slice(extra);
    neardup(&args, b"")
}

/// Indexes into a SimHash store.
fn index(store: &Path, input: &str, extra: &[&str]) -> (i32, String, String) {
    index_with("simhash", store, input, extra)
}

/// The fingerprint of a SimHash store's sketch.
fn simhash_of(s: &Sketch) -> u64 {
    match s {
        Sketch::SimHash(fp) => fp.0,
        Sketch::MinHash(_) => panic!("a SimHash store holds a MinHash sketch"),
    }
}

fn similar(store: &Path, extra: &[&str], stdin: &[u8]) -> (i32, Vec<Value>, String) {
    let mut args = vec!["similar", "--store", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, out, err) = neardup(&args, stdin);
    (code, if code == 0 { json_lines(&out) } else { vec![] }, err)
}

/// MinHash matches as the near-duplicate answers of the brute-force checks: each says it is a
/// near-duplicate, or a containment (≥ 0.7: a part whose article is not mostly in it, such as
/// the truncated lead `ex-014-trunc`, is named so however similar), and its relation and
/// containment are taken off.
fn near_only(matches: &[Value]) -> Vec<Value> {
    matches
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let o = m.as_object_mut().unwrap();
            let relation = o.remove("relation");
            let containment = o.remove("containment");
            if relation != Some(json!("near_duplicate")) {
                assert!(
                    matches!(
                        relation.as_ref().and_then(Value::as_str),
                        Some("contains" | "contained_in")
                    ) && containment.as_ref().and_then(Value::as_f64) >= Some(0.7),
                    "{relation:?} {containment:?} {o:?}"
                );
            }
            m
        })
        .collect()
}

/// [`similar`] on a MinHash store, near-duplicates only, as [`near_only`] gives them.
fn similar_near(store: &Path, extra: &[&str], stdin: &[u8]) -> (i32, Vec<Value>, String) {
    let mut args = vec!["--no-containment"];
    args.extend_from_slice(extra);
    let (code, got, err) = similar(store, &args, stdin);
    (code, near_only(&got), err)
}

#[test]
fn index_then_similar_by_id_matches_brute_force_at_k3_and_k7() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (code, _, err) = index(&store, &examples(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "index: 40 documents, 38 fingerprinted (38 new, 0 replaced, 0 unchanged), 2 too short"
        ),
        "{err}"
    );
    assert!(err.contains("holds 38 documents (simhash, k = 3)"), "{err}");

    let fps = example_fps();
    assert_eq!(fps.len(), 38);
    for (id, fp) in &fps {
        // k = 3 is the store's own k; 7 is beyond it and probes neighbouring block values.
        for k in ["3", "7"] {
            let (code, got, err) = similar(&store, &["--id", id, "-k", k], b"");
            assert_eq!(code, 0, "{err}");
            assert_eq!(
                got,
                expected(&fps, *fp, k.parse().unwrap(), Some(id)),
                "{id} k={k}"
            );
        }
    }
    // Variants the default SimHash profile (default-3, `tf`) keeps within 3 of their originals.
    let (_, got, _) = similar(&store, &["--id", "ex-009"], b"");
    assert_eq!(got, vec![json!({"id": "ex-009-halfwidth", "distance": 0})]);
    let (_, got, _) = similar(&store, &["--id", "ex-012-html"], b"");
    assert_eq!(got, vec![json!({"id": "ex-012", "distance": 2})]);
    let (_, got, _) = similar(&store, &["--id", "ex-010"], b"");
    assert_eq!(got, vec![json!({"id": "ex-010-edit", "distance": 2})]);
    let (_, got, _) = similar(&store, &["--id", "ex-008"], b"");
    assert_eq!(got, vec![json!({"id": "ex-008-numchange", "distance": 3})]);
}

#[test]
fn similar_to_a_text_or_one_article() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let fps = example_fps();
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    let line = corpus.lines().find(|l| l.contains("\"ex-012\"")).unwrap();

    // One article on stdin: its own id is left out.
    let (code, got, err) = similar(&store, &["--input", "-", "-k", "7"], line.as_bytes());
    assert_eq!(code, 0, "{err}");
    let own = fps.iter().find(|(id, _)| id == "ex-012").unwrap().1;
    assert_eq!(got, expected(&fps, own, 7, Some("ex-012")));
    assert!(got.iter().any(|m| m["id"] == "ex-012-html"));

    // A text: compared with what the library makes of it.
    let article: Value = serde_json::from_str(line).unwrap();
    let text = article["content"].as_str().unwrap();
    let q = neardup::Fingerprinter::for_profile(neardup::Profile::Default)
        .fingerprint(text)
        .unwrap()
        .simhash
        .0;
    let (code, got, err) = similar(&store, &["--text", text, "-k", "5"], b"");
    assert_eq!(code, 0, "{err}");
    assert_eq!(got, expected(&fps, q, 5, None));
}

#[test]
fn similar_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (code, _, err) = similar(&store, &["--id", "x"], b"");
    assert_eq!(code, 1);
    assert!(
        err.contains("no store at") && err.contains("neardup index"),
        "{err}"
    );

    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let (code, _, err) = similar(&store, &["--id", "nope"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("no fingerprint for `nope`"), "{err}");
    // Indexed but too short: the message says that may be why.
    let (code, _, err) = similar(&store, &["--id", "ex-029"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("too short to fingerprint"), "{err}");
    // Too short to fingerprint: exit 4, as on Elasticsearch, for a text and an article.
    let (code, _, err) = similar(&store, &["--text", "快讯"], b"");
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("too short"), "{err}");
    let (code, _, err) = similar(
        &store,
        &["--input", "-"],
        "{\"id\":\"s\",\"title\":\"快讯\"}\n".as_bytes(),
    );
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("article `s`") && err.contains("too short"),
        "{err}"
    );
    // One -k/--max-distance policy: at most 64 on a store, a usage error (exit 2) beyond.
    let (code, _, err) = similar(&store, &["--id", "ex-009", "--max-distance", "65"], b"");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most 64"), "{err}");
    let (code, got, err) = similar(&store, &["--id", "ex-009", "--max-distance", "0"], b"");
    assert_eq!(code, 0, "{err}");
    assert_eq!(got, vec![json!({"id": "ex-009-halfwidth", "distance": 0})]);
    let (code, got, err) = similar(
        &store,
        &["--fingerprint", "0000000000000000", "-k", "64"],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        got.len(),
        example_fps().len(),
        "every stored document is within 64"
    );
    let (code, _, err) = similar(
        &store,
        &["--input", "-"],
        b"{\"id\":1,\"content\":\"a\"}\n{\"id\":2,\"content\":\"b\"}\n",
    );
    assert_eq!(code, 1);
    assert!(err.contains("takes one"), "{err}");
    let (code, _, err) = similar(&store, &["--input", "-"], b"\n");
    assert_eq!(code, 1);
    assert!(err.contains("holds no article"), "{err}");
    let (code, _, err) = similar(&store, &[], b"");
    assert_eq!(code, 2, "a query is required: {err}");
    let (code, _, err) = similar(&store, &["--id", "ex-001", "--profile", "seed000"], b"");
    assert_eq!(code, 0, "--id needs no fingerprinting: {err}");
    let (code, _, err) = similar(
        &store,
        &[
            "--text",
            "市图书馆完成改造后重新开放",
            "--profile",
            "seed000",
        ],
        b"",
    );
    assert_eq!(code, 1);
    assert!(err.contains("profile `default`, not `seed000`"), "{err}");
}

#[test]
fn reindexing_replaces_changed_texts_and_removes_too_short_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    let mut changed = String::new();
    for line in corpus.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["id"] == "ex-009-halfwidth" {
            // Now a different article's text: its old fingerprint must go everywhere.
            let other: Value =
                serde_json::from_str(corpus.lines().find(|l| l.contains("\"ex-001\"")).unwrap())
                    .unwrap();
            v["content"] = other["content"].clone();
            v["title"] = other["title"].clone();
        }
        if v["id"] == "ex-005-edit" {
            v["content"] = json!("快讯");
            v["title"] = json!("");
        }
        changed.push_str(&v.to_string());
        changed.push('\n');
    }
    let changed_path = dir.path().join("changed.jsonl");
    std::fs::write(&changed_path, changed).unwrap();
    let (code, _, err) = index(&store, changed_path.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("(0 new, 1 replaced, 36 unchanged), 3 too short (1 removed from the store)"),
        "{err}"
    );
    let (_, got, _) = similar(&store, &["--id", "ex-009"], b"");
    assert!(
        got.is_empty(),
        "the old halfwidth fingerprint is gone: {got:?}"
    );
    let (_, got, _) = similar(&store, &["--id", "ex-009-halfwidth"], b"");
    assert_eq!(got, vec![json!({"id": "ex-001", "distance": 0})]);
    let (code, _, _) = similar(&store, &["--id", "ex-005-edit"], b"");
    assert_eq!(code, 1, "a text that became too short is removed");
}

#[test]
fn check_reports_duplicates_and_insert_keeps_one_of_each() {
    let dir = tempfile::tempdir().unwrap();
    let fps = example_fps();
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    // A store of the originals only.
    let originals: String = corpus
        .lines()
        .filter(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            !v["id"].as_str().unwrap()[4..].contains('-')
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let orig_path = dir.path().join("originals.jsonl");
    std::fs::write(&orig_path, &originals).unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, orig_path.to_str().unwrap(), &["-q"]).0, 0);
    let stored: Vec<(String, u64)> = fps
        .iter()
        .filter(|(id, _)| !id[4..].contains('-'))
        .cloned()
        .collect();

    let (code, out, err) = neardup(
        &[
            "check",
            "--store",
            store.to_str().unwrap(),
            "-i",
            &examples(),
            "-k",
            "7",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 40, "one line per article, in input order");
    for line in &lines {
        let id = line["id"].as_str().unwrap();
        match fps.iter().find(|(i, _)| i == id) {
            Some((_, fp)) => {
                let want = expected(&stored, *fp, 7, Some(id));
                assert_eq!(line["duplicate"], json!(!want.is_empty()), "{id}");
                assert_eq!(line["matches"], json!(want), "{id}");
                assert!(line.get("inserted").is_none());
            }
            None => {
                assert!(line["duplicate"].is_null());
                assert_eq!(line["reason"], "too_short");
            }
        }
    }
    let dup = |id: &str| lines.iter().find(|l| l["id"] == id).unwrap()["duplicate"].clone();
    assert_eq!(dup("ex-012-html"), json!(true));
    assert_eq!(
        dup("ex-001"),
        json!(false),
        "an original is not a duplicate of itself"
    );
    assert!(err.contains("check: 40 documents"), "{err}");

    // --insert into a new store: articles in input order; a variant within 7 of an earlier
    // stored article is not inserted. The result has no two stored articles within 7.
    let fresh = dir.path().join("fresh");
    let (code, out, err) = neardup(
        &[
            "check",
            "--store",
            fresh.to_str().unwrap(),
            "-i",
            &examples(),
            "-k",
            "7",
            "--insert",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let mut kept: Vec<(String, u64)> = Vec::new();
    for line in json_lines(&out) {
        let id = line["id"].as_str().unwrap();
        let Some((_, fp)) = fps.iter().find(|(i, _)| i == id) else {
            assert_eq!(line["inserted"], json!(false));
            continue;
        };
        let want = expected(&kept, *fp, 7, Some(id));
        assert_eq!(line["matches"], json!(want), "{id}");
        assert_eq!(line["inserted"], json!(want.is_empty()), "{id}");
        if want.is_empty() {
            kept.push((id.to_owned(), *fp));
        }
    }
    let s = Store::open(&fresh, &OpenOptions::default()).unwrap();
    assert_eq!(
        s.config().k,
        7,
        "a store made by check --insert -k 7 is built for 7"
    );
    assert_eq!(s.len().unwrap(), kept.len() as u64);
}

#[test]
fn delete_removes_and_reports_each_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let s = store.to_str().unwrap();
    let (code, out, err) = neardup(&["delete", "--store", s, "--id", "ex-009", "nope"], b"");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json_lines(&out),
        vec![
            json!({"id": "ex-009", "deleted": true}),
            json!({"id": "nope", "deleted": false})
        ]
    );
    assert!(
        err.contains("1 deleted, 1 not in the store") && err.contains("holds 37"),
        "{err}"
    );
    let (_, got, _) = similar(&store, &["--id", "ex-009-halfwidth"], b"");
    assert!(got.is_empty(), "{got:?}");
    let (code, out, err) = neardup(&["stats", "--store", s, "--verify"], b"");
    assert_eq!(code, 0, "{err}");
    let stats: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stats["documents"], 37);
    assert_eq!(stats["k"], 3);
    assert_eq!(stats["blocks"].as_array().unwrap().len(), 4);
    assert!(err.contains("verify: 37 documents"), "{err}");
}

#[test]
fn dedupe_clusters_are_the_components_within_k() {
    let fps = example_fps();
    for k in [3u32, 7] {
        let (code, out, err) = neardup(&["dedupe", "-i", &examples(), "-k", &k.to_string()], b"");
        assert_eq!(code, 0, "{err}");
        // Brute force: components of the "within k" graph, members in input order.
        let n = fps.len();
        let mut comp: Vec<usize> = (0..n).collect();
        for i in 0..n {
            for j in i + 1..n {
                if (fps[i].1 ^ fps[j].1).count_ones() <= k {
                    let (a, b) = (comp[i], comp[j]);
                    for c in comp.iter_mut() {
                        if *c == b {
                            *c = a;
                        }
                    }
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, &c) in comp.iter().enumerate() {
            groups.entry(c).or_default().push(i);
        }
        let mut want: Vec<Value> = groups
            .into_values()
            .filter(|g| g.len() > 1)
            .map(|g| {
                let mut max = 0;
                for &a in &g {
                    for &b in &g {
                        max = max.max((fps[a].1 ^ fps[b].1).count_ones());
                    }
                }
                json!({"cluster": g.iter().map(|&i| fps[i].0.clone()).collect::<Vec<_>>(), "max_distance": max})
            })
            .collect();
        want.sort_by_key(|c| {
            fps.iter()
                .position(|(id, _)| c["cluster"][0] == id.as_str())
        });
        assert_eq!(json_lines(&out), want, "k={k}");
        let dups: usize = want
            .iter()
            .map(|c| c["cluster"].as_array().unwrap().len() - 1)
            .sum();
        assert!(
            err.contains(&format!(
                "dedupe: 40 documents, 38 fingerprinted, 2 too short, 0 bad lines; {} cluster{} ",
                want.len(),
                if want.len() == 1 { "" } else { "s" }
            )),
            "{err}"
        );
        assert!(err.contains(&format!("{dups} duplicates")), "{err}");
    }
    let (_, out, _) = neardup(&["dedupe", "-i", &examples(), "-k", "3"], b"");
    let ids: Vec<Value> = json_lines(&out)
        .into_iter()
        .map(|c| c["cluster"].clone())
        .collect();
    assert_eq!(
        ids,
        vec![
            json!(["ex-008", "ex-008-numchange"]),
            json!(["ex-009", "ex-009-halfwidth"]),
            json!(["ex-010", "ex-010-edit"]),
            json!(["ex-012", "ex-012-html"])
        ]
    );
    let (_, out, _) = neardup(&["dedupe", "-i", &examples(), "-k", "3", "--pairs"], b"");
    assert_eq!(
        json_lines(&out),
        vec![
            json!({"a": "ex-008", "b": "ex-008-numchange", "distance": 3}),
            json!({"a": "ex-009", "b": "ex-009-halfwidth", "distance": 0}),
            json!({"a": "ex-010", "b": "ex-010-edit", "distance": 2}),
            json!({"a": "ex-012", "b": "ex-012-html", "distance": 2}),
        ]
    );
}

#[test]
fn a_store_refuses_other_profiles_and_k() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let (code, _, err) = index(&store, &examples(), &["--profile", "seed000"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("profile `default`, not `seed000`") && err.contains("--profile"),
        "{err}"
    );
    let (code, _, err) = index(&store, &examples(), &["-k", "4"]);
    assert_eq!(code, 1);
    assert!(err.contains("k `3`, not `4`"), "{err}");
    let (code, _, err) = index(&store, &examples(), &["--no-hmm"]);
    assert_eq!(code, 1);
    assert!(err.contains("fingerprint version"), "{err}");
    // A seed000 store is used with its own profile without naming it again.
    let seed = dir.path().join("seed");
    assert_eq!(
        index(&seed, &examples(), &["-q", "--profile", "seed000"]).0,
        0
    );
    let (code, _, err) = index(&seed, &examples(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 new") && err.contains("0 replaced"), "{err}");
}

#[test]
fn a_store_in_use_by_another_process_is_reported_or_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index(&store, &examples(), &["-q"]).0, 0);
    let held = Store::open(&store, &OpenOptions::default()).unwrap();
    let (code, _, err) = similar(&store, &["--id", "ex-009"], b"");
    assert_eq!(code, 1);
    assert!(
        err.contains("in use by another process") && err.contains("--wait"),
        "{err}"
    );

    let child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "similar",
            "--store",
            store.to_str().unwrap(),
            "--id",
            "ex-009",
            "--wait",
            "60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(held);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        json_lines(&String::from_utf8(out.stdout).unwrap()),
        vec![json!({"id": "ex-009-halfwidth", "distance": 0})]
    );
}

/// Two `check --insert` processes at once, each with every article: they take turns on the
/// store (the file lock, `--wait`), so near-duplicates are inserted once, not once each.
#[test]
fn concurrent_check_insert_processes_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    let mut reversed: Vec<&str> = corpus.lines().collect();
    reversed.reverse();
    let rev_path = dir.path().join("reversed.jsonl");
    std::fs::write(&rev_path, reversed.join("\n")).unwrap();
    let spawn = |input: &str| {
        Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["check", "--insert", "--wait", "120", "-k", "7", "-q"])
            .args([
                "--store",
                store.to_str().unwrap(),
                "-i",
                input,
                "--batch",
                "3",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&examples());
    let b = spawn(rev_path.to_str().unwrap());
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = Store::open(&store, &OpenOptions::default()).unwrap();
    let docs = s.snapshot().unwrap().documents().unwrap();
    let docs: Vec<(String, u64)> = docs
        .iter()
        .map(|(id, s)| (id.clone(), simhash_of(s)))
        .collect();
    for (i, (a, fa)) in docs.iter().enumerate() {
        for (b, fb) in &docs[i + 1..] {
            let d = (fa ^ fb).count_ones();
            assert!(d > 7, "{a} and {b} both stored at distance {d}");
        }
    }
    // Everything is covered: each fingerprinted article is stored or within 7 of a stored one.
    for (id, fp) in example_fps() {
        assert!(
            docs.iter().any(|(_, f)| (f ^ fp).count_ones() <= 7),
            "{id} neither stored nor matched"
        );
    }
}

/// id → MinHash signature of every example article long enough, from `neardup fingerprint`.
fn example_sigs() -> Vec<(String, Signature)> {
    let (code, out, err) = neardup(&["fingerprint", "-i", &examples(), "-q"], b"");
    assert_eq!(code, 0, "{err}");
    json_lines(&out)
        .into_iter()
        .filter(|l| !l["minhash"].is_null())
        .map(|l| {
            let values: Vec<u32> = l["minhash"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| u32::try_from(v.as_u64().unwrap()).unwrap())
                .collect();
            (
                l["id"].as_str().unwrap().to_owned(),
                Signature::from_values(values),
            )
        })
        .collect()
}

/// Share of equal positions: the estimated Jaccard similarity.
fn similarity(a: &Signature, b: &Signature) -> f64 {
    let same = a
        .values()
        .iter()
        .zip(b.values())
        .filter(|(x, y)| x == y)
        .count();
    same as f64 / a.len() as f64
}

/// Whether the signatures agree on a whole band of the default parameters.
fn share_a_band(a: &Signature, b: &Signature) -> bool {
    let p = MinHashParams::DEFAULT;
    let rows = usize::from(p.rows);
    (0..usize::from(p.bands))
        .any(|i| a.values()[i * rows..][..rows] == b.values()[i * rows..][..rows])
}

/// What a MinHash store must answer for `q` at threshold `t`, by brute force: documents
/// sharing a band with similarity ≥ t, most similar first, ties by id.
fn expected_minhash(
    sigs: &[(String, Signature)],
    q: &Signature,
    t: f64,
    exclude: Option<&str>,
) -> Vec<Value> {
    let mut v: Vec<(f64, &str)> = sigs
        .iter()
        .filter(|(id, s)| Some(id.as_str()) != exclude && share_a_band(q, s))
        .map(|(id, s)| (similarity(q, s), id.as_str()))
        .filter(|&(s, _)| s >= t - 1e-9)
        .collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    v.into_iter()
        .map(|(s, id)| json!({"id": id, "similarity": s}))
        .collect()
}

/// The planted near-duplicate pairs of examples/README.md, in input order.
const PLANTED: [(&str, &str); 10] = [
    ("ex-003", "ex-003-repost"),
    ("ex-005", "ex-005-edit"),
    ("ex-007", "ex-007-retitle"),
    ("ex-008", "ex-008-numchange"),
    ("ex-009", "ex-009-halfwidth"),
    ("ex-010", "ex-010-edit"),
    ("ex-012", "ex-012-html"),
    ("ex-013", "ex-013-repost"),
    ("ex-014", "ex-014-trunc"),
    ("ex-020", "ex-020-repost"),
];

#[test]
fn minhash_index_then_similar_by_id_matches_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // No --method: a new store is a MinHash store.
    let (code, _, err) = neardup(
        &[
            "index",
            "--store",
            store.to_str().unwrap(),
            "-i",
            &examples(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("38 fingerprinted (38 new, 0 replaced, 0 unchanged), 2 too short")
            && err.contains("holds 38 documents (minhash, shingle=w2;n=128;sig=oph;bands=42x3)"),
        "{err}"
    );
    let sigs = example_sigs();
    assert_eq!(sigs.len(), 38);
    for (id, sig) in &sigs {
        for t in [None, Some("0.2"), Some("0.9")] {
            let mut args = vec!["--id", id.as_str()];
            args.extend(t.iter().flat_map(|t| ["--threshold", *t]));
            let (code, got, err) = similar_near(&store, &args, b"");
            assert_eq!(code, 0, "{err}");
            let t: f64 = t.unwrap_or("0.3").parse().unwrap();
            assert_eq!(got, expected_minhash(&sigs, sig, t, Some(id)), "{id} t={t}");
            let scores: Vec<f64> = got
                .iter()
                .map(|m| m["similarity"].as_f64().unwrap())
                .collect();
            assert!(scores.iter().all(|&s| s >= t), "{id} t={t}: {got:?}");
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{id}: sorted");
            assert!(got.iter().all(|m| m.get("distance").is_none()), "{got:?}");
        }
    }
    // Every planted variant finds its original at the default threshold, and no original
    // finds another original.
    for (original, variant) in PLANTED {
        let (_, got, _) = similar_near(&store, &["--id", variant], b"");
        let ids: Vec<&str> = got.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, [original], "{variant}");
    }
    let (_, got, _) = similar_near(&store, &["--id", "ex-014-trunc"], b"");
    assert_eq!(got, vec![json!({"id": "ex-014", "similarity": 0.6875})]);
    let (_, got, _) = similar_near(&store, &["--id", "ex-001"], b"");
    assert!(got.is_empty(), "{got:?}");
    // A text is sketched with the store's method and compared the same way.
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    let line = corpus.lines().find(|l| l.contains("\"ex-013\"")).unwrap();
    let (code, got, err) = similar_near(&store, &["--input", "-"], line.as_bytes());
    assert_eq!(code, 0, "{err}");
    let own = &sigs.iter().find(|(id, _)| id == "ex-013").unwrap().1;
    assert_eq!(got, expected_minhash(&sigs, own, 0.3, Some("ex-013")));
    assert_eq!(got[0]["id"], "ex-013-repost");

    // The table says what the JSON says: each match's relation and containment.
    let (_, json, _) = similar(&store, &["--id", "ex-014"], b"");
    let trunc = json.iter().find(|m| m["id"] == "ex-014-trunc").unwrap();
    assert_eq!(trunc["relation"], "contains", "{json:?}");
    let (code, table, err) = neardup(
        &[
            "similar",
            "--store",
            store.to_str().unwrap(),
            "--id",
            "ex-014",
            "--format",
            "table",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].ends_with("with similarity ≥ 0.3 or containment ≥ 0.7"),
        "{table}"
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["similarity", "relation", "containment", "id"],
        "{table}"
    );
    let row = format!(
        "{:.3} contains {:.3} ex-014-trunc",
        trunc["similarity"].as_f64().unwrap(),
        trunc["containment"].as_f64().unwrap()
    );
    assert!(
        lines[2..]
            .iter()
            .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == row),
        "{row} in {table}"
    );
    assert_eq!(lines.len(), 2 + json.len(), "{table}");
}

#[test]
fn minhash_check_insert_keeps_one_of_each_planted_pair() {
    let dir = tempfile::tempdir().unwrap();
    let sigs = example_sigs();
    let fresh = dir.path().join("fresh");
    let (code, out, err) = neardup(
        &[
            "check",
            "--store",
            fresh.to_str().unwrap(),
            "-i",
            &examples(),
            "--insert",
            "--no-containment",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let mut kept: Vec<(String, Signature)> = Vec::new();
    let mut rejected = Vec::new();
    for line in json_lines(&out) {
        let id = line["id"].as_str().unwrap();
        let Some((_, sig)) = sigs.iter().find(|(i, _)| i == id) else {
            assert_eq!(line["inserted"], json!(false));
            assert_eq!(line["reason"], "too_short");
            continue;
        };
        let want = expected_minhash(&kept, sig, 0.3, Some(id));
        let got = near_only(line["matches"].as_array().unwrap());
        assert_eq!(json!(got), json!(want), "{id}");
        assert_eq!(line["duplicate"], json!(!want.is_empty()), "{id}");
        assert_eq!(line["inserted"], json!(want.is_empty()), "{id}");
        if want.is_empty() {
            kept.push((id.to_owned(), sig.clone()));
        } else {
            rejected.push(id.to_owned());
        }
    }
    assert_eq!(
        rejected,
        PLANTED.map(|(_, v)| v.to_owned()),
        "exactly the variants are duplicates"
    );
    {
        let s = Store::open(&fresh, &OpenOptions::default()).unwrap();
        assert_eq!(s.method(), neardup::Method::MinHash);
        assert_eq!(s.len().unwrap(), 28);
    }

    // Without --insert, against that store, at a higher threshold: nothing is added.
    let (code, out, err) = neardup(
        &[
            "check",
            "--store",
            fresh.to_str().unwrap(),
            "-i",
            &examples(),
            "--threshold",
            "0.9",
            "--no-containment",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    for line in json_lines(&out) {
        let id = line["id"].as_str().unwrap();
        if let Some((_, sig)) = sigs.iter().find(|(i, _)| i == id) {
            assert_eq!(
                json!(near_only(line["matches"].as_array().unwrap())),
                json!(expected_minhash(&kept, sig, 0.9, Some(id))),
                "{id}"
            );
        }
    }
    assert_eq!(
        Store::open(&fresh, &OpenOptions::default())
            .unwrap()
            .len()
            .unwrap(),
        28
    );
}

#[test]
fn stats_show_the_method_and_minhash_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(index_with("minhash", &store, &examples(), &["-q"]).0, 0);
    let (code, out, err) = neardup(
        &["stats", "--store", store.to_str().unwrap(), "--verify"],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let stats: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stats["method"], "minhash");
    assert_eq!(stats["profile"], "minhash");
    assert_eq!(
        stats["minhash"],
        json!({"shingle": 2, "hashes": 128, "bands": 42, "rows": 3, "scheme": "oph"})
    );
    assert!(
        stats["version"]
            .as_str()
            .unwrap()
            .starts_with("minhash-1;shingle=w2;n=128;sig=oph;bands=42x3;"),
        "{stats}"
    );
    assert_eq!(stats["documents"], 38);
    let bands = stats["blocks"].as_array().unwrap();
    assert_eq!(bands.len(), 42);
    assert!(bands.iter().all(|b| b["width"] == 32), "{stats}");
    assert!(err.contains("verify: 38 documents"), "{err}");

    // A SimHash store says so, and has no MinHash parameters.
    let sh = dir.path().join("sh");
    assert_eq!(index(&sh, &examples(), &["-q"]).0, 0);
    let (_, out, _) = neardup(&["stats", "--store", sh.to_str().unwrap()], b"");
    let stats: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stats["method"], "simhash");
    assert!(stats.get("minhash").is_none(), "{stats}");
}

/// A MinHash store asked for SimHash (or the reverse) fails with exit code 1 and says which
/// method the store has; the flags of the two methods do not mix.
#[test]
fn the_methods_and_their_flags_do_not_mix() {
    let dir = tempfile::tempdir().unwrap();
    let mh = dir.path().join("mh");
    let sh = dir.path().join("sh");
    assert_eq!(index_with("minhash", &mh, &examples(), &["-q"]).0, 0);
    assert_eq!(index(&sh, &examples(), &["-q"]).0, 0);
    let mh_s = mh.to_str().unwrap();
    let sh_s = sh.to_str().unwrap();

    let (code, _, err) = similar(&mh, &["--id", "ex-003", "--method", "simhash"], b"");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("method `minhash`, not `simhash`") && err.contains("--method"),
        "{err}"
    );
    let (code, _, err) = index(&mh, &examples(), &["-q"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("method `minhash`, not `simhash`"), "{err}");
    let (code, _, err) = index_with("minhash", &sh, &examples(), &["-q"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("method `simhash`, not `minhash`"), "{err}");
    let (code, _, err) = neardup(
        &[
            "check",
            "--store",
            sh_s,
            "-i",
            &examples(),
            "--method",
            "minhash",
        ],
        b"",
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("method `simhash`, not `minhash`"), "{err}");
    // -k on a MinHash store, --threshold on a SimHash store: the store's method wins, and the
    // other method's flag is a usage error (exit 2).
    let (code, _, err) = similar(&mh, &["--id", "ex-003", "-k", "3"], b"");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("-k/--max-distance belongs to --method simhash")
            && err.contains("--threshold"),
        "{err}"
    );
    let (code, _, err) = similar(&sh, &["--id", "ex-003", "--threshold", "0.5"], b"");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--threshold belongs to --method minhash") && err.contains("-k"),
        "{err}"
    );
    // Both stores were left as they were.
    for (s, n) in [(mh_s, 38), (sh_s, 38)] {
        let (code, out, err) = neardup(&["stats", "--store", s, "--verify"], b"");
        assert_eq!(code, 0, "{err}");
        let stats: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(stats["documents"], n);
    }

    // -k and --threshold together, or -k with --method minhash: usage errors.
    for cmd in [
        vec!["dedupe", "-i", &examples(), "-k", "3", "--threshold", "0.5"],
        vec![
            "similar",
            "--store",
            mh_s,
            "--id",
            "x",
            "-k",
            "3",
            "--threshold",
            "0.5",
        ],
        vec![
            "check",
            "--store",
            mh_s,
            "-i",
            &examples(),
            "-k",
            "3",
            "--threshold",
            "0.5",
        ],
    ] {
        let (code, _, err) = neardup(&cmd, b"");
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(
            err.contains("--threshold") && err.contains("--max-distance"),
            "{cmd:?}: {err}"
        );
    }
    let (code, _, err) = neardup(
        &[
            "dedupe",
            "-i",
            &examples(),
            "-k",
            "3",
            "--method",
            "minhash",
        ],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("-k/--max-distance belongs to --method simhash"),
        "{err}"
    );
}

/// A threshold outside 0 < T ≤ 1 is a usage error naming the flag, for every command that
/// takes one (also `index`, which only records the method).
#[test]
fn thresholds_outside_zero_to_one_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    for t in ["0", "1.5", "-0.2", "NaN", "high"] {
        let flag = format!("--threshold={t}");
        for cmd in [
            vec!["dedupe", "-i", &examples(), &flag],
            vec!["index", "--store", s, "-i", &examples(), &flag],
            vec!["check", "--store", s, "-i", &examples(), &flag],
            vec!["similar", "--store", s, "--id", "ex-001", &flag],
        ] {
            let (code, out, err) = neardup(&cmd, b"");
            assert_eq!(code, 2, "{cmd:?}: {err}");
            assert!(out.is_empty(), "{cmd:?}: {out}");
            assert!(
                err.contains("--threshold") && err.contains("at most 1"),
                "{cmd:?}: {err}"
            );
        }
    }
    assert!(!store.exists(), "no store was created");
    // The bounds themselves: 1 is allowed (identical signatures only).
    let (code, out, err) = neardup(
        &[
            "dedupe",
            "-i",
            &examples(),
            "--threshold",
            "1",
            "--no-containment",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let clusters: Vec<Value> = json_lines(&out)
        .into_iter()
        .map(|c| c["cluster"].clone())
        .collect();
    assert_eq!(
        clusters,
        vec![
            json!(["ex-009", "ex-009-halfwidth"]),
            json!(["ex-012", "ex-012-html"])
        ]
    );
}

/// `dedupe` without flags is MinHash at 0.3: exactly the ten planted pairs of
/// examples/README.md, none between originals. At any threshold its clusters are the
/// components of the "shares a band and similarity ≥ t" graph of the signatures.
#[test]
fn default_dedupe_finds_exactly_the_planted_pairs() {
    let (code, out, err) = neardup(&["dedupe", "-i", &examples()], b"");
    assert_eq!(code, 0, "{err}");
    let sigs = example_sigs();
    let sig = |id: &str| &sigs.iter().find(|(i, _)| i == id).unwrap().1;
    // The truncated lead (70 % of its article) is linked as contained in it.
    let want: Vec<Value> = PLANTED
        .iter()
        .map(|(a, b)| {
            let mut c = json!({"cluster": [a, b], "min_similarity": similarity(sig(a), sig(b))});
            if *b == "ex-014-trunc" {
                c["contained"] = json!(1);
            }
            c
        })
        .collect();
    assert_eq!(json_lines(&out), want);
    assert!(
        err.contains("10 clusters holding 20 documents, 10 duplicates")
            && err.contains("10 pairs with minhash similarity ≥ 0.3"),
        "{err}"
    );
    let (code, out, err) = neardup(&["dedupe", "-i", &examples(), "--pairs"], b"");
    assert_eq!(code, 0, "{err}");
    let want: Vec<Value> = PLANTED
        .iter()
        .map(|(a, b)| json!({"a": a, "b": b, "similarity": similarity(sig(a), sig(b))}))
        .collect();
    assert_eq!(near_only(&json_lines(&out)), want);

    for t in [0.1, 0.25, 0.4, 0.9] {
        let (code, out, err) = neardup(
            &[
                "dedupe",
                "-i",
                &examples(),
                "--threshold",
                &t.to_string(),
                "--no-containment",
            ],
            b"",
        );
        assert_eq!(code, 0, "{err}");
        let n = sigs.len();
        let linked = |i: usize, j: usize| {
            share_a_band(&sigs[i].1, &sigs[j].1) && similarity(&sigs[i].1, &sigs[j].1) >= t - 1e-9
        };
        let mut comp: Vec<usize> = (0..n).collect();
        for i in 0..n {
            for j in i + 1..n {
                if linked(i, j) {
                    let (a, b) = (comp[i], comp[j]);
                    for c in comp.iter_mut() {
                        if *c == b {
                            *c = a;
                        }
                    }
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, &c) in comp.iter().enumerate() {
            groups.entry(c).or_default().push(i);
        }
        let mut want: Vec<Value> = groups
            .into_values()
            .filter(|g| g.len() > 1)
            .map(|g| {
                let mut min = 1.0f64;
                for &a in &g {
                    for &b in &g {
                        if a < b && linked(a, b) {
                            min = min.min(similarity(&sigs[a].1, &sigs[b].1));
                        }
                    }
                }
                json!({"cluster": g.iter().map(|&i| sigs[i].0.clone()).collect::<Vec<_>>(), "min_similarity": min})
            })
            .collect();
        want.sort_by_key(|c| {
            sigs.iter()
                .position(|(id, _)| c["cluster"][0] == id.as_str())
        });
        assert_eq!(json_lines(&out), want, "t={t}");
    }
}

/// A store keeps the folding setting it was made with: one made with `--no-fold` (which is
/// also what a store made before folding existed records) is opened without the flag, and
/// asking a folding store for `--no-fold` is refused. A Taiwan-phrased copy of an article
/// finds it in a folding store.
#[test]
fn a_store_keeps_its_folding_setting() {
    use neardup::text::{Folder, TraditionalStyle};
    let dir = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(common::examples()).unwrap();
    let line = corpus.lines().find(|l| l.contains("\"ex-001\"")).unwrap();
    let article: Value = serde_json::from_str(line).unwrap();
    let taiwan = Folder::shared().to_traditional(
        article["content"].as_str().unwrap(),
        TraditionalStyle::Taiwan,
    );
    assert_ne!(taiwan, article["content"].as_str().unwrap());
    let found = |store: &Path| {
        let (code, got, err) = similar(store, &["--text", &taiwan], b"");
        assert_eq!(code, 0, "{err}");
        got.iter().any(|m| m["id"] == "ex-001")
    };

    let folding = dir.path().join("folding");
    assert_eq!(index_with("minhash", &folding, &examples(), &["-q"]).0, 0);
    let s = Store::open(&folding, &OpenOptions::default()).unwrap();
    assert!(s.config().fold);
    assert!(s.config().version.contains(",t2s-1,"), "{:?}", s.config());
    drop(s);
    assert!(found(&folding));
    let (code, _, err) = index_with("minhash", &folding, &examples(), &["--no-fold"]);
    assert_eq!(code, 1);
    assert!(err.contains("fingerprint version"), "{err}");

    let unfolded = dir.path().join("unfolded");
    assert_eq!(
        index_with("minhash", &unfolded, &examples(), &["-q", "--no-fold"]).0,
        0
    );
    let s = Store::open(&unfolded, &OpenOptions::default()).unwrap();
    assert!(!s.config().fold);
    assert!(!s.config().version.contains("t2s"), "{:?}", s.config());
    drop(s);
    let (code, _, err) = index_with("minhash", &unfolded, &examples(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 new") && err.contains("0 replaced"), "{err}");
    assert!(!found(&unfolded));
}

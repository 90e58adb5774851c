//! `neardup regroup` against a live node: its groups are the connected components of what
//! `similar` links (computed here by brute force over the stored fingerprints), it writes only
//! the labels that change, its dry run lists the same groups, and a run killed in the middle
//! goes on from its work file.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::es::{self as t, TestIndex};
use common::regroup::{assert_labels_are, fixture, labels_and_components, neardup, ok, set_labels};
use elasticsearch::http::Method;
use serde_json::{json, Value};

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regroup_makes_the_groups_the_connected_components_and_writes_only_what_changes() {
    let client = t::client().await;
    let idx = fixture(&client, "regroup").await;
    let dir = tempfile::tempdir().unwrap();
    let (before, components) = labels_and_components(&client, &idx.name).await;
    let shared: BTreeSet<BTreeSet<String>> = components
        .iter()
        .filter(|c| c.len() >= 2)
        .cloned()
        .collect();
    assert!(shared.len() >= 25, "the fixture has groups: {shared:?}");
    assert!(
        components.iter().any(|c| c.len() >= 4),
        "the fixture has chains or splices joining groups"
    );

    // The dry run lists exactly the components of two or more, and writes nothing.
    let dry_run = |linking: &str| {
        let state = dir.path().join(format!("dry-{linking}.redb"));
        ok(&[
            "regroup",
            "--index",
            &idx.name,
            "--dry-run",
            "--quiet",
            "--linking",
            linking,
            "--state",
            state.to_str().unwrap(),
        ])
    };
    let out = dry_run("join");
    let mut listed = BTreeSet::new();
    let mut representatives = BTreeMap::new();
    for line in out.lines() {
        let g: Value = serde_json::from_str(line).unwrap();
        let members: BTreeSet<String> = g["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(g["size"].as_u64(), Some(members.len() as u64));
        let rep = g["representative"].as_str().unwrap().to_owned();
        assert!(members.contains(&rep), "{line}");
        for m in &members {
            representatives.insert(m.clone(), rep.clone());
        }
        listed.insert(members);
    }
    assert_eq!(listed, shared);
    // One search per article finds the same links as the join (the default).
    let out = dry_run("search");
    assert_eq!(common::regroup::listed_groups(&out), listed);
    let (unchanged, _) = labels_and_components(&client, &idx.name).await;
    assert_eq!(unchanged, before, "a dry run writes nothing");

    // The run writes the labels that differ, and the groups are the components.
    let state = dir.path().join("state.redb");
    let rep_json = dir.path().join("report.json");
    let args = [
        "regroup",
        "--index",
        &idx.name,
        "--quiet",
        "--state",
        state.to_str().unwrap(),
        "--report-json",
        rep_json.to_str().unwrap(),
    ];
    ok(&args);
    let (after, again) = labels_and_components(&client, &idx.name).await;
    assert_eq!(again, components);
    assert_labels_are(&after, &components);
    assert_eq!(
        after["short"], "short",
        "a too-short article is its own group"
    );
    for (id, rep) in &representatives {
        assert_eq!(&after[id], rep, "the dry run said {id} goes to {rep}");
    }
    let changed = before.iter().filter(|(id, l)| &after[*id] != *l).count() as u64;
    let r = report(dir.path());
    assert_eq!(r["changed"].as_u64(), Some(changed), "{r}");
    assert_eq!(r["written"].as_u64(), Some(changed), "{r}");
    assert_eq!(
        r["groups"].as_u64(),
        Some(components.len() as u64 - 1),
        "{r}"
    ); // not `short`
    assert!(changed > 0);

    // Nothing left to change: a second run writes nothing.
    ok(&args);
    let r = report(dir.path());
    assert_eq!(
        (r["changed"].as_u64(), r["written"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    let (last, _) = labels_and_components(&client, &idx.name).await;
    assert_eq!(last, after);

    // The collapse search lists each component once.
    let r = t::call(
        &client,
        Method::Post,
        &format!("/{}/_search", idx.name),
        Some(json!({ "size": 1000, "_source": false, "collapse": { "field": "nearDupGroup" } })),
    )
    .await;
    assert_eq!(
        r["hits"]["hits"].as_array().unwrap().len(),
        components.len()
    );
}

/// The groups of two or more that `labels` (article → label) say.
fn labelled_groups(labels: &BTreeMap<String, String>) -> BTreeSet<BTreeSet<String>> {
    let mut by_label: BTreeMap<&String, BTreeSet<String>> = BTreeMap::new();
    for (id, label) in labels {
        by_label.entry(label).or_default().insert(id.clone());
    }
    by_label.into_values().filter(|g| g.len() >= 2).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn common_minima_learned_by_the_walk_are_recorded_and_asked_by_every_search() {
    let client = t::client().await;
    let idx = fixture(&client, "regroup-common").await;
    let dir = tempfile::tempdir().unwrap();
    let (_, components) = labels_and_components(&client, &idx.name).await;
    let without: BTreeSet<BTreeSet<String>> =
        components.into_iter().filter(|c| c.len() >= 2).collect();
    let mapping = format!("/{}/_mapping", idx.name);
    let common_minima = || async {
        let m = t::call(&client, Method::Get, &mapping, None).await;
        let (_, m) = m.as_object().unwrap().iter().next().unwrap();
        m["mappings"]["_meta"]["neardup"]["common_minima"].clone()
    };
    let run = |name: &str, extra: &[&str]| {
        let state = dir.path().join(format!("{name}.redb"));
        let rep_json = dir.path().join(format!("{name}.json"));
        let mut args = vec![
            "regroup",
            "--index",
            &idx.name,
            "--quiet",
            "--state",
            state.to_str().unwrap(),
            "--report-json",
            rep_json.to_str().unwrap(),
        ];
        args.extend(extra);
        let out = ok(&args);
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&rep_json).unwrap()).unwrap();
        (common::regroup::listed_groups(&out), report)
    };
    let mut changed_any = false;
    for above in ["1", "2"] {
        // A dry run learns them and records nothing.
        let before = common_minima().await;
        let (learned, r) = run(
            &format!("dry-{above}"),
            &["--dry-run", "--common-above", above],
        );
        let terms = r["common_minima"]["terms"].as_u64().unwrap();
        assert!(terms > 0, "terms held by more than {above}: {r}");
        assert_eq!(r["common_minima"]["learned"], true, "{r}");
        assert_eq!(common_minima().await, before, "a dry run");
        changed_any |= learned != without;

        // A run records them before it joins.
        let (_, r) = run(&format!("run-{above}"), &["--common-above", above]);
        let recorded = common_minima().await;
        assert_eq!(recorded["above"].as_u64(), above.parse().ok(), "{recorded}");
        assert_eq!(recorded["terms"].as_array().unwrap().len() as u64, terms);
        assert_eq!(r["common_minima"]["terms"].as_u64(), Some(terms), "{r}");
        let (labels, _) = labels_and_components(&client, &idx.name).await;
        assert_eq!(labelled_groups(&labels), learned, "the labels written");

        // The join built with the recorded ones, and one search per article asking them,
        // find the same groups.
        let (joined, r) = run(&format!("join-{above}"), &["--dry-run"]);
        assert_eq!(r["common_minima"]["learned"], false, "{r}");
        assert_eq!(joined, learned);
        let (searched, _) = run(
            &format!("search-{above}"),
            &["--dry-run", "--linking", "search"],
        );
        assert_eq!(searched, learned, "above {above}");
    }
    assert!(
        changed_any,
        "terms held by more than one article unlink some pair of the fixture"
    );
    // What needs the join's walk, or minima terms, says so.
    let (code, _, err) = neardup(&[
        "regroup",
        "--index",
        &idx.name,
        "--dry-run",
        "--linking",
        "search",
        "--common-above",
        "5",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--linking search"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regroup_killed_in_the_middle_goes_on_from_its_work_file() {
    let client = t::client().await;
    let idx = fixture(&client, "regroup-kill").await;
    let dir = tempfile::tempdir().unwrap();
    for linking in ["join", "search"] {
        let state = dir.path().join(format!("{linking}.redb"));
        let rep_json = dir.path().join("report.json");
        let args = [
            "regroup",
            "--index",
            &idx.name,
            "--quiet",
            "--linking",
            linking,
            "--state",
            state.to_str().unwrap(),
            "--report-json",
            rep_json.to_str().unwrap(),
            "--page-size",
            "10",
        ];
        // Slow (20 articles linked a second), with a log line per page linked: killed once
        // 30 are.
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(args)
            .args(["--max-docs-per-sec", "20", "--log-format", "json"])
            .env("NEARDUP_ES_URL", t::url())
            .env("RUST_LOG", "neardup_es::regroup=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut linked = 0;
        for line in stderr.lines() {
            let line = line.unwrap();
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                linked = v["fields"]["linked"].as_u64().unwrap_or(linked);
            }
            if linked >= 30 {
                break;
            }
        }
        assert!(linked >= 30, "{linking}: the run logged its pages");
        child.kill().unwrap(); // SIGKILL, between two pages or inside one
        child.wait().unwrap();

        ok(&args);
        let r = report(dir.path());
        assert_eq!(r["resumed"], true, "{r}");
        assert_eq!(r["linking"], linking, "{r}");
        let articles = r["articles"].as_u64().unwrap();
        let searched = r["searched"].as_u64().unwrap();
        assert!(
            searched + 30 <= articles,
            "{linking}: pages linked before the kill are not linked again: {r}"
        );
        let (labels, components) = labels_and_components(&client, &idx.name).await;
        assert_labels_are(&labels, &components);
        if linking == "join" {
            let files = common::regroup::join_dir(&state);
            assert!(
                !files.exists(),
                "the join's files are removed: {}",
                files.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regroup_refuses_an_index_without_groups_and_a_pattern_of_several() {
    let client = t::client().await;
    let a = TestIndex::new("regroup-nogroups");
    t::load(&client, &a.name, &t::shared_articles(2)).await;
    ok(&["es-init", "--index", &a.name, "--no-groups"]);
    let (code, _, err) = neardup(&["regroup", "--index", &a.name]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("keeps no duplicate groups") && err.contains("es-init"),
        "{err}"
    );
    let b = TestIndex::new("regroup-nogroups");
    t::load(&client, &b.name, &t::shared_articles(2)).await;
    let pattern = format!("{},{}", a.name, b.name);
    let (code, _, err) = neardup(&["regroup", "--index", &pattern]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("one index at a time"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_by_a_field_regroup_labels_each_group_with_its_earliest_article() {
    let client = t::client().await;
    let idx = TestIndex::new("regroup-ordered");
    let arts = t::shared_articles(3);
    let dated = |a: &Value, date: &str| {
        let mut a = a.clone();
        a["publishDate"] = json!(date);
        a
    };
    let a = &arts[0].1;
    let repost = json!({
        "title": a["title"],
        "content": format!("{}（来源：本网综合）", a["content"].as_str().unwrap()),
        "publishDate": "2024-05-01T08:00:00Z",
    });
    let docs = vec![
        ("a".to_owned(), dated(a, "2024-05-02T08:00:00Z")),
        ("a-repost".to_owned(), repost),
        ("b".to_owned(), dated(&arts[1].1, "2024-04-01T08:00:00Z")),
        ("undated".to_owned(), arts[2].1.clone()),
    ];
    t::load(&client, &idx.name, &docs).await;
    ok(&[
        "es-init",
        "--index",
        &idx.name,
        "--group-order",
        "publishDate",
    ]);
    ok(&["worker", "--once", "--index", &idx.name]);
    // As a first-fingerprinted writer would have left them: the later article's id.
    let relabel = ["a", "a-repost"].map(|id| (id.to_owned(), "a".to_owned()));
    set_labels(&client, &idx.name, &relabel).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.redb");
    ok(&[
        "regroup",
        "--index",
        &idx.name,
        "--quiet",
        "--state",
        state.to_str().unwrap(),
    ]);
    let (labels, components) = labels_and_components(&client, &idx.name).await;
    assert_labels_are(&labels, &components);
    assert_eq!(labels["a"], "a-repost");
    assert_eq!(labels["a-repost"], "a-repost");
    assert_eq!(
        (labels["b"].as_str(), labels["undated"].as_str()),
        ("b", "undated")
    );
}

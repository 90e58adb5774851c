//! The regroup fixture and its brute-force check, shared by `live_es::regroup` and the fault
//! suite (`tests/faults`): articles with reposts, chains of edits and splices, labelled and
//! then scrambled; the connected components of what `similar` links, computed from the stored
//! fingerprints.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::process::Command;

use super::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::MinHashLayout;
use neardup::es::DEFAULT_K;
use neardup::relation::{MatchOptions, MatchRule, Relation};
use neardup::{Method as FpMethod, Sketch, Tolerance};
use serde_json::{json, Value};

/// Runs the `neardup` binary against the test node (`NEARDUP_ES_URL`); returns (exit code,
/// stdout, stderr).
pub fn neardup(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn ok(args: &[&str]) -> String {
    let (code, out, err) = neardup(args);
    assert_eq!(code, 0, "neardup {args:?}: {err}");
    out
}

/// The sentences of a text, each with its full stop.
pub fn sentences(s: &str) -> Vec<String> {
    s.split_inclusive('。').map(str::to_owned).collect()
}

/// 70 real articles, reposts, chains of edits (each step near the last, the ends not always
/// near each other), articles that splice two stories, and a too-short one: loaded, given the
/// fields by `es-init` and labelled by `worker --once`; then half the labels are scrambled (a
/// writer's groups apart, a deleted representative) so that there is something to regroup.
pub async fn fixture(client: &Elasticsearch, prefix: &str) -> TestIndex {
    let idx = TestIndex::new(prefix);
    let originals = t::shared_articles(70);
    let mut docs = originals.clone();
    let text = |a: &Value| a["content"].as_str().unwrap_or("").to_owned();
    for (i, (id, a)) in originals.iter().enumerate().take(30) {
        let s = sentences(&text(a));
        let n = s.len();
        match i % 3 {
            0 => docs.push((
                format!("{id}-repost"),
                json!({ "title": a["title"], "content": format!("{}（来源：本网综合）", text(a)) }),
            )),
            1 => {
                // A chain: each step drops another fifth of the sentences.
                for step in 1..=3 {
                    let keep = s[(n * step / 5).min(n.saturating_sub(1))..].concat();
                    docs.push((
                        format!("{id}-edit{step}"),
                        json!({ "title": a["title"], "content": keep }),
                    ));
                }
            }
            _ => {
                // Half of this story and half of the next one.
                let (_, b) = &originals[i + 1];
                let sb = sentences(&text(b));
                let spliced = format!("{}{}", s[..n / 2].concat(), sb[sb.len() / 2..].concat());
                docs.push((
                    format!("{id}-spliced"),
                    json!({ "title": a["title"], "content": spliced }),
                ));
            }
        }
    }
    docs.push(("short".into(), json!({ "title": "短", "content": "" })));
    t::load(client, &idx.name, &docs).await;
    // Linked by sketches: the components the tests expect are `similar`'s links (groups
    // linked by texts are tested in `live_es::aligned`).
    ok(&["es-init", "--index", &idx.name, "--group-by", "sketches"]);
    ok(&["worker", "--once", "--index", &idx.name]);
    // Scramble: every other article its own group; a few under a label nobody carries.
    let labels: Vec<(String, String)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, (id, _))| match i % 4 {
            0 => Some((id.clone(), id.clone())),
            1 => Some((id.clone(), "deleted-representative".to_owned())),
            _ => None,
        })
        .collect();
    set_labels(client, &idx.name, &labels).await;
    idx
}

/// Sets the group label of each `(id, label)` with one bulk update and refreshes (a bulk
/// update: `_update_by_query` is a module some distributions leave out).
pub async fn set_labels(client: &Elasticsearch, index: &str, labels: &[(String, String)]) {
    let mut body = String::new();
    for (id, label) in labels {
        body += &format!(
            "{}\n{}\n",
            json!({ "update": { "_id": id } }),
            json!({ "doc": { "nearDupGroup": label } })
        );
    }
    let r = neardup::es::request(
        client,
        &neardup::es::RetryPolicy::none(),
        "set labels",
        Method::Post,
        &format!("/{index}/_bulk"),
        &[("refresh", "true")],
        Some(&neardup::es::Body::NdJson(body)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "{r}");
}

/// A stored MinHash signature and its band terms.
pub type Stored = (Sketch, HashSet<String>);

/// Every article's label, and the brute-force components of what a regroup unites, by id:
/// near-duplicates (a shared band and the estimate within the index's default tolerance; on
/// an index with the containment fields, any pair the rule names near-duplicates, as the
/// minima terms find them), and each part with the one article it is most contained in
/// (ties: the smaller id).
pub async fn labels_and_components(
    client: &Elasticsearch,
    index: &str,
) -> (BTreeMap<String, String>, BTreeSet<BTreeSet<String>>) {
    t::refresh(client, index).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{index}/_search"),
        Some(json!({ "size": 1000, "_source": ["nearDupGroup", "minHashSignature", "minHashBands", "minHashDistinct"] })),
    )
    .await;
    let mut containment = false;
    let tolerance = Tolerance::default_for(FpMethod::MinHash, DEFAULT_K);
    let mut labels = BTreeMap::new();
    let mut docs: Vec<(String, Option<Stored>)> = Vec::new();
    for h in r["hits"]["hits"].as_array().unwrap() {
        let id = h["_id"].as_str().unwrap().to_owned();
        let s = &h["_source"];
        labels.insert(
            id.clone(),
            s["nearDupGroup"].as_str().unwrap_or("").to_owned(),
        );
        let sketch = s["minHashSignature"].as_str().map(|b| {
            let bands = s["minHashBands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap().to_owned())
                .collect();
            let sig = MinHashLayout::NEW.signature_from_base64(b, 128).unwrap();
            let sig = match s["minHashDistinct"].as_u64() {
                Some(d) => {
                    containment = true;
                    sig.with_distinct(d as u32)
                }
                None => sig,
            };
            (Sketch::MinHash(sig), bands)
        });
        docs.push((id, sketch));
    }
    let n = docs.len();
    let mut comp: Vec<usize> = (0..n).collect();
    let mut edges = Vec::new();
    // Each part's best container: (containment, container's id, container).
    let mut container: BTreeMap<usize, (f64, String, usize)> = BTreeMap::new();
    let Tolerance::Similarity(threshold) = tolerance else {
        unreachable!("MinHash's default tolerance is a similarity")
    };
    let rule = MatchRule::new(threshold, MatchOptions::default());
    for i in 0..n {
        for j in i + 1..n {
            let (Some((Sketch::MinHash(a), ba)), Some((Sketch::MinHash(b), bb))) =
                (&docs[i].1, &docs[j].1)
            else {
                continue;
            };
            if !containment {
                if !ba.is_disjoint(bb) && rule.threshold.admits(a.similarity(b)) {
                    edges.push((i, j));
                }
                continue;
            }
            let Some(r) = rule.relate(a, b) else {
                continue;
            };
            let (part, whole) = match r.relation {
                Relation::NearDuplicate => {
                    edges.push((i, j));
                    continue;
                }
                Relation::ContainedIn => (i, j),
                Relation::Contains => (j, i),
                Relation::SharesPassage => continue,
            };
            let c = r.containment.unwrap_or(0.0);
            let candidate = (c, docs[whole].0.clone(), whole);
            let e = container.entry(part).or_insert(candidate.clone());
            if c > e.0 || (c == e.0 && candidate.1 < e.1) {
                *e = candidate;
            }
        }
    }
    edges.extend(
        container
            .into_iter()
            .map(|(part, (.., whole))| (part, whole)),
    );
    loop {
        let mut changed = false;
        for &(a, b) in &edges {
            let m = comp[a].min(comp[b]);
            for x in [a, b] {
                if comp[x] != m {
                    comp[x] = m;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut by: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for (i, c) in comp.iter().enumerate() {
        by.entry(*c).or_default().insert(docs[i].0.clone());
    }
    (labels, by.into_values().collect())
}

/// Where the labels differ from `components` (empty: they partition the articles exactly as
/// the components do, and each label is the id of a member of its component).
pub fn label_mismatches(
    labels: &BTreeMap<String, String>,
    components: &BTreeSet<BTreeSet<String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for c in components {
        let of: BTreeSet<&String> = c.iter().map(|id| &labels[id]).collect();
        if of.len() != 1 {
            out.push(format!("one label for the component {c:?}: {of:?}"));
        } else if let Some(label) = of.into_iter().find(|l| !c.contains(*l)) {
            out.push(format!("label {label} is a member of {c:?}"));
        }
    }
    let distinct: BTreeSet<&String> = labels.values().collect();
    if distinct.len() != components.len() {
        out.push(format!(
            "one label per component: {} labels, {} components",
            distinct.len(),
            components.len()
        ));
    }
    out
}

/// The labels partition the articles exactly as `components` do, and each label is the id of
/// a member of its component.
pub fn assert_labels_are(
    labels: &BTreeMap<String, String>,
    components: &BTreeSet<BTreeSet<String>>,
) {
    let wrong = label_mismatches(labels, components);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The groups a `regroup --dry-run` printed (its stdout: one `{"members": […]}` line each),
/// as sets of ids.
pub fn listed_groups(out: &str) -> BTreeSet<BTreeSet<String>> {
    out.lines()
        .map(|l| {
            let g: Value = serde_json::from_str(l).unwrap();
            g["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

/// Where a regroup's join keeps its files: beside the work file, `<state>.join`.
pub fn join_dir(state: &std::path::Path) -> std::path::PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".join");
    std::path::PathBuf::from(name)
}

//! Duplicate groups against a live node: `es-init` keeps them by default, the worker labels
//! every article (copies in one batch together), the library's writers label new articles
//! with the group of what they are near (also right after the write, before a refresh), and
//! the `collapse` search docs/elasticsearch.md gives lists each story once; an index whose
//! groups are ordered by a field (`es-init --group-order`) is labelled by the earliest.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::{
    insert_unless_near, Claims, Inserted, NewArticle, Refresh, RetryPolicy, Similar,
};
use serde_json::{json, Value};

/// A repost of `article`: the same story with a source line added and the title edited.
fn repost(article: &Value) -> Value {
    json!({
        "title": format!("转载：{}", article["title"].as_str().unwrap_or("")),
        "content": format!("{}（来源：本网综合）", article["content"].as_str().unwrap_or("")),
    })
}

/// `es-init` with its defaults, through the command line.
fn es_init(index: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["es-init", "--index", index])
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every document's group label, by id.
pub(super) async fn labels(
    client: &elasticsearch::Elasticsearch,
    index: &str,
) -> BTreeMap<String, String> {
    t::refresh(client, index).await;
    let r = t::call(
        client,
        Method::Post,
        &format!("/{index}/_search"),
        Some(json!({ "size": 1000, "_source": ["nearDupGroup"] })),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["_id"].as_str().unwrap().to_owned(),
                h["_source"]["nearDupGroup"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{} has no group: {h}", h["_id"]))
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_labels_every_article_and_a_collapse_lists_each_story_once() {
    let client = t::client().await;
    let idx = TestIndex::new("groups-worker");
    let originals = t::shared_articles(60);
    let mut docs = originals.clone();
    // Reposts of the first 20, loaded before their originals in the same batch of the
    // worker, and one too-short article.
    for (id, a) in originals.iter().take(20) {
        docs.insert(0, (format!("{id}-repost"), repost(a)));
    }
    docs.push(("short".into(), json!({ "title": "短", "content": "" })));
    t::load(&client, &idx.name, &docs).await;
    es_init(&idx.name);
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["worker", "--once", "--index", &idx.name])
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let got = labels(&client, &idx.name).await;
    assert_eq!(got.len(), docs.len(), "every article is labelled");
    assert_eq!(
        got["short"], "short",
        "a too-short article is its own group"
    );
    for (id, _) in originals.iter().take(20) {
        assert_eq!(
            got[id],
            got[&format!("{id}-repost")],
            "{id} and its repost share a group"
        );
    }
    // A label is the id of a member of its group.
    for label in got.values() {
        assert_eq!(
            got.get(label),
            Some(label),
            "label {label} names its representative"
        );
    }
    let groups: BTreeSet<&String> = got.values().collect();

    // The search an article API sends: one hit per group, the others as inner hits.
    let r = t::call(
        &client,
        Method::Post,
        &format!("/{}/_search", idx.name),
        Some(json!({
            "size": 1000,
            "_source": ["title"],
            "collapse": {
                "field": "nearDupGroup",
                "inner_hits": { "name": "other_sources", "size": 5, "_source": ["title"] }
            }
        })),
    )
    .await;
    let hits = r["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), groups.len(), "one hit per group");
    let shown: BTreeSet<&str> = hits.iter().map(|h| h["_id"].as_str().unwrap()).collect();
    for (id, _) in originals.iter().take(20) {
        let repost = format!("{id}-repost");
        assert!(
            shown.contains(id.as_str()) ^ shown.contains(repost.as_str()),
            "exactly one of {id} and its repost is listed"
        );
    }
    let with_others = hits
        .iter()
        .filter(|h| h["inner_hits"]["other_sources"]["hits"]["total"]["value"].as_u64() >= Some(2))
        .count();
    assert!(with_others >= 20, "{with_others} groups list other sources");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_articles_join_the_group_they_are_near_even_before_a_refresh() {
    let client = t::client().await;
    let idx = TestIndex::new("groups-write");
    es_init(&idx.name);
    // Refreshing once a minute: what the indexer wrote a moment ago is not searchable yet.
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_settings", idx.name),
        Some(json!({ "index": { "refresh_interval": "60s" } })),
    )
    .await;
    let indexer = t::indexer(&client, &idx.name).await;
    assert_eq!(indexer.group_field(), Some("nearDupGroup"));
    let arts = t::shared_articles(3);
    let fields = vec!["title".to_owned(), "content".to_owned()];
    let (a, b) = (&arts[0].1, &arts[1].1);
    let sk = |v: &Value| indexer.sketch(v, &fields).unwrap();
    let (sa, sa2, sb) = (sk(a), sk(&repost(a)), sk(b));
    // One batch: an article and its repost together, another story apart.
    let written = indexer
        .index_articles(
            &[("a", a, &sa), ("a-repost", &repost(a), &sa2), ("b", b, &sb)],
            Refresh::No,
        )
        .await
        .unwrap();
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    // Right after, unrefreshed: a second repost of `a` joins its group, by another writer
    // call of the same indexer.
    let again = repost(&repost(a));
    let s_again = sk(&again);
    indexer
        .index_article(Some("a-again"), &again, &s_again)
        .await
        .unwrap();
    // Written without an id: neardup makes one, and the article is its own group.
    let c = &arts[2].1;
    let made = indexer.index_article(None, c, &sk(c)).await.unwrap();

    let got = labels(&client, &idx.name).await;
    assert_eq!(got["a"], "a");
    assert_eq!(got["a-repost"], "a");
    assert_eq!(got["a-again"], "a");
    assert_eq!(got["b"], "b");
    assert_eq!(got[&made.id], made.id);

    // Later, from a fresh indexer (nothing in memory), a repost of `b` finds it by search.
    let fresh = t::indexer(&client, &idx.name).await;
    let rb = repost(b);
    fresh
        .index_article(Some("b-repost"), &rb, &sk(&rb))
        .await
        .unwrap();
    assert_eq!(labels(&client, &idx.name).await["b-repost"], "b");

    // A dedupe insert writes a new story as its own group without a search of its own, and
    // remembers it: its repost, written plainly a moment later, joins it.
    let claims = Claims::new(client.clone(), RetryPolicy::none(), &idx.name);
    claims.ensure_index().await.unwrap();
    let similar = Similar::new(client.clone(), fresh.fingerprinter().clone());
    let d = t::shared_articles(5).pop().unwrap().1;
    let sd = sk(&d);
    let tolerance = similar.default_tolerance(idx.name.as_str()).await.unwrap();
    let done = insert_unless_near(
        &fresh,
        &claims,
        &similar,
        &[NewArticle {
            id: "d",
            article: &d,
            sketches: &sd,
        }],
        tolerance,
        Refresh::No,
        "test",
        std::time::Instant::now() + std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(matches!(done[0], Inserted::Written(_)), "{done:?}");
    let rd = repost(&d);
    fresh
        .index_article(Some("d-repost"), &rd, &sk(&rd))
        .await
        .unwrap();
    let got = labels(&client, &idx.name).await;
    assert_eq!((got["d"].as_str(), got["d-repost"].as_str()), ("d", "d"));
    t::call(
        &client,
        Method::Delete,
        &format!("/neardup-claims-{}", idx.name),
        None,
    )
    .await;
}

/// `neardup es-init --index INDEX ARGS…`, with its output.
fn es_init_with(index: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["es-init", "--index", index])
        .args(args)
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap()
}

/// `article` published at `date`.
fn dated(article: &Value, date: &str) -> Value {
    let mut a = article.clone();
    a["publishDate"] = json!(date);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_ordered_by_a_field_are_labelled_by_their_earliest_article() {
    let client = t::client().await;
    let idx = TestIndex::new("groups-order");
    let out = es_init_with(&idx.name, &["--group-order", "publishDate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mapping = t::call(
        &client,
        Method::Get,
        &format!("/{}/_mapping", idx.name),
        None,
    )
    .await;
    assert_eq!(
        mapping[&idx.name]["mappings"]["_meta"]["neardup"]["group"],
        json!({ "field": "nearDupGroup", "order": { "field": "publishDate" },
                "link": { "by": "texts", "fields": ["title", "content"] } })
    );

    let indexer = t::indexer(&client, &idx.name).await;
    assert_eq!(indexer.group_order_field(), Some("publishDate"));
    let arts = t::shared_articles(4);
    let fields = vec!["title".to_owned(), "content".to_owned()];
    let sk = |v: &Value| indexer.sketch(v, &fields).unwrap();
    // One batch: a copy first, its repost second but published a day earlier.
    let a = dated(&arts[0].1, "2024-05-02T08:00:00Z");
    let ar = dated(&repost(&arts[0].1), "2024-05-01T08:00:00Z");
    let written = indexer
        .index_articles(
            &[("a", &a, &sk(&a)), ("a-repost", &ar, &sk(&ar))],
            Refresh::No,
        )
        .await
        .unwrap();
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    // Written later but dated earlier still: it joins the group under its label (a write
    // never relabels others).
    let older = dated(&repost(&repost(&arts[0].1)), "2020-01-01T00:00:00Z");
    indexer
        .index_article(Some("a-older"), &older, &sk(&older))
        .await
        .unwrap();
    let got = labels(&client, &idx.name).await;
    assert_eq!(got["a"], "a-repost");
    assert_eq!(got["a-repost"], "a-repost");
    assert_eq!(got["a-older"], "a-repost");

    // The worker reads the order field with the text: copies loaded without fingerprints,
    // the later one first, are labelled by the earlier.
    let (b, c) = (&arts[1].1, &arts[2].1);
    t::load(
        &client,
        &idx.name,
        &[
            ("b".into(), dated(b, "2024-06-02")),
            ("b-repost".into(), dated(&repost(b), "2024-06-01")),
            ("c".into(), c.clone()),
            ("c-repost".into(), dated(&repost(c), "2024-06-01")),
        ],
    )
    .await;
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["worker", "--once", "--index", &idx.name])
        .env("NEARDUP_ES_URL", t::url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = labels(&client, &idx.name).await;
    assert_eq!(got["b"], "b-repost");
    assert_eq!(got["b-repost"], "b-repost");
    // An article without a date comes after every dated one.
    assert_eq!(got["c"], "c-repost");
    assert_eq!(got["c-repost"], "c-repost");

    // So does the back-fill.
    let e = &arts[3].1;
    t::load(
        &client,
        &idx.name,
        &[
            ("e".into(), dated(e, "2024-07-02")),
            ("e-repost".into(), dated(&repost(e), "2024-07-01")),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = backfill_cli(&idx.name, dir.path(), &[]);
    assert_eq!(code, 0, "{err}");
    let got = labels(&client, &idx.name).await;
    assert_eq!(
        (got["e"].as_str(), got["e-repost"].as_str()),
        ("e-repost", "e-repost")
    );

    // es-init again keeps the recorded order; another order is a conflict naming the flag.
    let out = es_init_with(&idx.name, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("nothing changed"), "{said}");
    let out = es_init_with(&idx.name, &["--group-order", "updated_at"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("--group-order publishDate") && said.contains("updated_at"),
        "{said}"
    );
    // An index whose groups are first-fingerprinted keeps that order.
    let plain = TestIndex::new("groups-order-plain");
    es_init(&plain.name);
    let out = es_init_with(&plain.name, &["--group-order", "publishDate"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("leave out --group-order"), "{said}");
}

/// The first `share` of `article`'s sentences, with a "read more" line: a teaser.
fn teaser(article: &Value, share: f64) -> Value {
    let s = crate::common::regroup::sentences(article["content"].as_str().unwrap());
    let n = ((s.len() as f64 * share) as usize).max(1);
    json!({ "title": article["title"], "content": s[..n].concat() + "……阅读全文" })
}

/// Corpus articles of at least 40 sentences, longest first.
fn long_articles(n: usize) -> Vec<(String, Value)> {
    let mut all = t::shared_articles(60);
    all.retain(|(_, a)| {
        crate::common::regroup::sentences(a["content"].as_str().unwrap()).len() >= 40
    });
    all.sort_by_key(|(_, a)| std::cmp::Reverse(a["content"].as_str().unwrap().len()));
    assert!(all.len() >= n, "{} long articles", all.len());
    all.truncate(n);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_copy_joins_the_group_of_its_article_in_either_order_and_regroup_keeps_two_reports_apart(
) {
    let client = t::client().await;
    let idx = TestIndex::new("groups-partial");
    es_init(&idx.name);
    let indexer = t::indexer(&client, &idx.name).await;
    assert!(indexer.meta().has_containment(), "es-init gives format 4");
    let fields = vec!["title".to_owned(), "content".to_owned()];
    let sk = |v: &Value| indexer.sketch(v, &fields).unwrap();
    let long = long_articles(3);
    let ((a_id, a), (b_id, b)) = (&long[0], &long[1]);
    // A teaser stored first, its full article a moment later (unrefreshed: the memory), and
    // the reverse: a full article stored, refreshed, then its teaser (the search).
    let ta = teaser(a, 0.25);
    indexer
        .index_article(Some("a-teaser"), &ta, &sk(&ta))
        .await
        .unwrap();
    indexer.index_article(Some(a_id), a, &sk(a)).await.unwrap();
    indexer.index_article(Some(b_id), b, &sk(b)).await.unwrap();
    t::refresh(&client, &idx.name).await;
    let fresh = t::indexer(&client, &idx.name).await;
    let tb = teaser(b, 0.25);
    fresh
        .index_article(Some("b-teaser"), &tb, &sk(&tb))
        .await
        .unwrap();
    let got = labels(&client, &idx.name).await;
    assert_eq!(
        got[a_id], "a-teaser",
        "the full article joins its teaser's group"
    );
    assert_eq!(
        got["b-teaser"],
        got[b_id.as_str()],
        "the teaser joins its article's"
    );
    assert_ne!(got[a_id], got[b_id.as_str()]);

    // A statement quoted whole by two different reports, written in one batch: the
    // statement joins one report, and the two reports stay apart — in the batch and after a
    // regroup.
    let (_, c) = &long[2];
    let statement = crate::common::regroup::sentences(c["content"].as_str().unwrap())[..8].concat();
    let report = |from: &Value| {
        json!({
            "title": from["title"],
            "content": format!("{statement}{}", teaser(from, 0.6)["content"].as_str().unwrap()),
        })
    };
    let (r1, r2) = (report(a), report(b));
    let st = json!({ "title": "声明", "content": statement });
    let written = fresh
        .index_articles(
            &[
                ("report-1", &r1, &sk(&r1)),
                ("report-2", &r2, &sk(&r2)),
                ("statement", &st, &sk(&st)),
            ],
            Refresh::No,
        )
        .await
        .unwrap();
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let similar = Similar::new(client.clone(), fresh.fingerprinter().clone());
    t::refresh(&client, &idx.name).await;
    let found = similar
        .by_id(
            idx.name.as_str(),
            "statement",
            neardup::es::Near::new(
                similar.default_tolerance(idx.name.as_str()).await.unwrap(),
                neardup::relation::MatchOptions::default(),
            ),
        )
        .await
        .unwrap();
    let containers: BTreeSet<&str> = found
        .matches
        .iter()
        .filter(|m| m.relation == Some(neardup::relation::Relation::ContainedIn))
        .map(|m| m.id.as_str())
        .collect();
    assert!(
        containers.contains("report-1") && containers.contains("report-2"),
        "the statement is contained in both reports: {:?}",
        found.matches
    );
    let check = |got: &BTreeMap<String, String>| {
        assert_ne!(got["report-1"], got["report-2"], "{got:?}");
        assert!(
            got["statement"] == got["report-1"] || got["statement"] == got["report-2"],
            "{got:?}"
        );
        assert_eq!(got["a-teaser"], got[a_id.as_str()], "{got:?}");
        assert_eq!(got["b-teaser"], got[b_id.as_str()], "{got:?}");
    };
    check(&labels(&client, &idx.name).await);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("regroup.redb");
    crate::common::regroup::ok(&[
        "regroup",
        "--index",
        &idx.name,
        "--quiet",
        "--state",
        state.to_str().unwrap(),
    ]);
    check(&labels(&client, &idx.name).await);
}

/// What links an index's groups is chosen by `es-init --group-by` and recorded in `_meta`
/// (`group.link`). A new index holding MinHash links them by the texts of `title` and
/// `content` (or of `--group-text-field`), one holding SimHash only by the sketches; a
/// recorded link is kept by a later `es-init` without the flag and replaced by another (no
/// upgrade: it decides no stored field); `sketches` is recorded as no link. Texts need
/// MinHash; `--group-text-field` needs texts. A writer that does not read the fields the
/// groups align is refused with the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn es_init_records_what_links_the_groups() {
    let client = t::client().await;
    let idx = TestIndex::new("group-link");
    let simhash_only = TestIndex::new("group-link-simhash");
    let body_only = TestIndex::new("group-link-body");
    let link = |index: String| {
        let client = client.clone();
        async move {
            let m = t::call(&client, Method::Get, &format!("/{index}/_mapping"), None).await;
            m.as_object().unwrap().values().next().unwrap()["mappings"]["_meta"]["neardup"]["group"]
                ["link"]
                .clone()
        }
    };
    let texts_of = |fields: &[&str]| json!({"by": "texts", "fields": fields});
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);

    let (code, _, err) = common::es_cli(&simhash_only.name, &["es-init", "--methods", "simhash"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(link(simhash_only.name.clone()).await, Value::Null);
    let (code, _, err) = common::es_cli(
        &simhash_only.name,
        &["es-init", "--methods", "simhash", "--group-by", "texts"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("MinHash"), "{err}");
    let (code, _, err) =
        common::es_cli(&body_only.name, &["es-init", "--group-text-field", "body"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(link(body_only.name.clone()).await, texts_of(&["body"]));

    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        link(idx.name.clone()).await,
        texts_of(&["title", "content"])
    );
    let dir = tempfile::tempdir().unwrap();
    let (state, failed) = (dir.path().join("s.jsonl"), dir.path().join("f.jsonl"));
    let (state, failed) = (state.to_str().unwrap(), failed.to_str().unwrap());
    for writer in [
        &["worker", "--once", "--field", "title", "--field", "body"][..],
        &[
            "backfill", "--quiet", "--state", state, "--failed", failed, "--field", "title",
            "--field", "body",
        ][..],
    ] {
        let (code, _, err) = cli(writer);
        assert_eq!(code, 1, "{writer:?}: {err}");
        assert!(
            err.contains("by the texts of title, content")
                && err.contains("read from title, body")
                && err.contains("--group-text-field"),
            "{writer:?}: {err}"
        );
    }
    let (code, _, err) = cli(&["es-init", "--group-by", "sketches"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(link(idx.name.clone()).await, Value::Null);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(link(idx.name.clone()).await, Value::Null);
    let (code, _, err) = cli(&["es-init", "--group-text-field", "body"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--group-by texts"), "{err}");
    let (code, _, err) = cli(&["es-init", "--group-by", "texts"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        link(idx.name.clone()).await,
        texts_of(&["title", "content"])
    );
    let (code, _, err) = cli(&[
        "es-init",
        "--group-text-field",
        "headline",
        "--group-text-field",
        "body",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        link(idx.name.clone()).await,
        texts_of(&["headline", "body"])
    );
    let (code, _, err) = cli(&[
        "es-init",
        "--group-by",
        "sketches",
        "--group-text-field",
        "body",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = cli(&["es-init", "--group-by", "sketches"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(link(idx.name.clone()).await, Value::Null);
}

/// `neardup backfill --quiet` of `index` with its flags, its state, failed and report files
/// in `dir`: exit code, stderr.
fn backfill_cli(index: &str, dir: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (state, failed, report) = (
        path("state.jsonl"),
        path("failed.jsonl"),
        path("report.json"),
    );
    let mut args = vec![
        "backfill",
        "--quiet",
        "--state",
        &state,
        "--failed",
        &failed,
        "--report-json",
        &report,
    ];
    args.extend(extra);
    let (code, _, err) = common::es_cli(index, &args);
    (code, err)
}

/// The back-fill links groups by one join (the default): each article is written as its own
/// group, a label already there is kept, and once every article is fingerprinted one regroup
/// by the join (its work file beside the back-fill's state) links the copies; `--linking
/// search` labels them as it writes and ends with the same groups. Sliced, the articles stay
/// their own groups and the report says to run `neardup regroup` once every slice has
/// finished, which links them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backfill_links_groups_by_one_join_after_writing() {
    let client = t::client().await;
    let originals = t::shared_articles(40);
    let mut docs = originals.clone();
    for (id, a) in originals.iter().take(10) {
        docs.push((format!("{id}-repost"), repost(a)));
    }
    // Carried by both copies before the back-fill: kept, and the join's representative (the
    // label most members carry), so no label of the pair changes.
    let (kept_id, kept) = &originals[10];
    let mut labelled = |id: String, mut a: Value| {
        a["nearDupGroup"] = json!(format!("{kept_id}-repost"));
        docs.push((id, a));
    };
    labelled(format!("{kept_id}-repost"), repost(kept));
    docs.retain(|(id, _)| id != kept_id);
    let mut kept_original = kept.clone();
    kept_original["nearDupGroup"] = json!(format!("{kept_id}-repost"));
    docs.push((kept_id.clone(), kept_original));
    let copies = |labels: &BTreeMap<String, String>| {
        originals
            .iter()
            .take(11)
            .filter(|(id, _)| labels[id] != labels[&format!("{id}-repost")])
            .count()
    };

    let mut groups_by = BTreeMap::new();
    for linking in ["join", "search"] {
        let idx = TestIndex::new(&format!("groups-backfill-{linking}"));
        es_init(&idx.name);
        t::load(&client, &idx.name, &docs).await;
        let dir = tempfile::tempdir().unwrap();
        let (code, err) = backfill_cli(&idx.name, dir.path(), &["--linking", linking]);
        assert_eq!(code, 0, "{err}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["linking"], linking, "{report}");
        let got = labels(&client, &idx.name).await;
        assert_eq!(got.len(), docs.len());
        assert_eq!(
            copies(&got),
            0,
            "{linking}: every copy in its original's group: {got:?}"
        );
        let distinct: BTreeSet<&String> = got.values().collect();
        assert_eq!(distinct.len(), originals.len(), "{linking}: {got:?}");
        if linking == "join" {
            assert_eq!(got[kept_id], format!("{kept_id}-repost"));
            let g = &report["regroups"][&idx.name];
            assert_eq!(g["linking"], "join", "{report}");
            assert_eq!(g["articles"], docs.len() as u64, "{report}");
            // The ten reposts' pairs, each labelled by the smaller id (a tie of one label
            // each), and nothing else: the carried label was kept.
            assert_eq!(g["changed"], 10, "{report}");
            assert!(err.contains("duplicate groups linked by the join"), "{err}");
            let work = dir
                .path()
                .join(format!(".neardup-regroup-{}.redb", idx.name));
            assert!(
                work.exists(),
                "the regroup's work file beside the state file"
            );
        } else {
            assert!(report.get("regroups").is_none(), "{report}");
        }
        groups_by.insert(linking, got);
    }
    assert_eq!(
        partition(&groups_by["join"]),
        partition(&groups_by["search"])
    );

    // Sliced: own groups until the regroup, which the report asks for.
    let idx = TestIndex::new("groups-backfill-sliced");
    es_init(&idx.name);
    t::load(&client, &idx.name, &docs).await;
    let dir = tempfile::tempdir().unwrap();
    for slice in ["0/2", "1/2"] {
        let (code, err) = backfill_cli(&idx.name, dir.path(), &["--slice", slice]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains(&format!("until `neardup regroup --index {}`", idx.name)),
            "{err}"
        );
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["regroup_pending"], json!([idx.name]), "{report}");
    }
    let got = labels(&client, &idx.name).await;
    assert_eq!(
        copies(&got),
        10,
        "only the carried pair shares a label: {got:?}"
    );
    let carried = [kept_id.clone(), format!("{kept_id}-repost")];
    assert!(
        got.iter()
            .filter(|(id, _)| !carried.contains(id))
            .all(|(id, l)| id == l),
        "every other article its own group: {got:?}"
    );
    let work = dir.path().join("regroup.redb");
    let (code, _, err) = common::es_cli(
        &idx.name,
        &["regroup", "--quiet", "--state", work.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(labels(&client, &idx.name).await, groups_by["join"]);
}

/// The groups `labels` make, as sets of ids (whatever each is labelled).
fn partition(labels: &BTreeMap<String, String>) -> BTreeSet<BTreeSet<String>> {
    let mut by: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (id, label) in labels {
        by.entry(label).or_default().insert(id.clone());
    }
    by.into_values().collect()
}

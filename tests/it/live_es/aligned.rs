//! Aligned lookups on a live node (issue 43): `similar --id --align` answers for each
//! document what `dedupe --align` answers for its pairs over the same articles with the same
//! formula (recorded by `es-init --formula`): the same relations, the same shares copied,
//! the same passages, read from the query's side. Template instances are not copies; round-ups
//! share passages; reworded passages are contained.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use crate::common::{self, es as t, es::TestIndex};
use crate::eval_copies::{copies, sample};
use neardup::es::{RetryPolicy, Similar};
use neardup::eval::generate;
use neardup::relation::AlignRule;
use serde_json::{json, Value};

/// A relation read from the other side.
fn reversed(relation: &str) -> &str {
    match relation {
        "contains" => "contained_in",
        "contained_in" => "contains",
        r => r,
    }
}

/// An article as an index holds it: its title and content.
fn body(a: &generate::Article) -> Value {
    json!({"title": a.title, "content": a.content})
}

/// An article to load, under its id.
fn doc(a: &generate::Article) -> (String, Value) {
    (a.id.clone(), body(a))
}

/// What one answer says of a pair, from the query's side: the relation, the two shares and
/// the passages (query span, match span, matched letters), in one order: an answer lists
/// them in its first text's order.
type Said = (String, String, String, Vec<String>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aligned_lookups_answer_what_dedupe_align_answers() {
    // A sample of the real corpus, both sides of the copied-text pairs of three kinds, and a
    // month of one daily bulletin.
    let mut docs: BTreeMap<String, Value> = BTreeMap::new();
    for a in sample().iter().take(400) {
        docs.insert(a.id.clone(), body(a));
    }
    let kinds = ["template_instances", "compilation", "reworded_passage"];
    let mut queries: BTreeSet<String> = BTreeSet::new();
    for p in copies() {
        if !kinds.contains(&p.transformation.as_deref().unwrap()) {
            continue;
        }
        for m in [&p.a, &p.b] {
            let a = generate::Article::from_map(m).unwrap();
            queries.insert(a.id.clone());
            docs.insert(a.id.clone(), body(&a));
        }
    }
    for a in generate::template_series(sample(), "meeting_notice", 30, 5).unwrap() {
        queries.insert(a.id.clone());
        docs.insert(a.id.clone(), body(&a));
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("articles.jsonl");
    let mut f = std::fs::File::create(&input).unwrap();
    for (id, d) in &docs {
        let mut line = d.clone();
        line["id"] = json!(id);
        writeln!(f, "{line}").unwrap();
    }
    drop(f);
    let input = input.to_str().unwrap();
    let formula = dir.path().join("formula.json");
    let formula = formula.to_str().unwrap();

    // The file: the formula learned, then every pair by alignment.
    let (code, _, err) = common::neardup(&["formula", "learn", "-i", input, "-o", formula], b"");
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = common::neardup(
        &[
            "dedupe",
            "--align",
            "--pairs",
            "--no-boilerplate",
            "--formula",
            formula,
            "-i",
            input,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let span = |v: &Value| format!("{}:{}-{}", v["field"], v["start"], v["end"]);
    let mut want: BTreeMap<String, BTreeMap<String, Said>> = BTreeMap::new();
    let mut by_anchors = 0;
    for p in common::json_lines(&out) {
        // An index has no anchors: what only they found in the file is not a candidate there.
        if p["found_by"] == "anchors" {
            by_anchors += 1;
            continue;
        }
        assert_eq!(p["found_by"], "minhash", "{p}");
        let (a, b) = (p["a"].as_str().unwrap(), p["b"].as_str().unwrap());
        let relation = p["relation"].as_str().unwrap();
        let passages = |from_a: bool| {
            p["passages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    let (q, m) = if from_a { ("a", "b") } else { ("b", "a") };
                    format!("{} {} {}", span(&x[q]), span(&x[m]), x["matched"])
                })
                .collect::<BTreeSet<String>>()
                .into_iter()
                .collect()
        };
        let (ac, bc) = (p["a_copied"].to_string(), p["b_copied"].to_string());
        want.entry(a.to_owned()).or_default().insert(
            b.to_owned(),
            (relation.to_owned(), ac.clone(), bc.clone(), passages(true)),
        );
        want.entry(b.to_owned()).or_default().insert(
            a.to_owned(),
            (reversed(relation).to_owned(), bc, ac, passages(false)),
        );
    }

    // The compilations' passages and the notices' fixed text: some pairs only the anchors find.
    assert!(by_anchors > 0);

    // The index: the same articles, the formula recorded, fingerprinted by the worker.
    let client = t::client().await;
    let idx = TestIndex::new("aligned");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let (code, out, err) = cli(&["es-init", "--formula", formula]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("formula fm1-"), "{out}");
    let loaded: Vec<(String, Value)> = docs.clone().into_iter().collect();
    t::load(&client, &idx.name, &loaded).await;
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;
    // Learned from the index: the same formula as from the file (the same texts, in another
    // order).
    let (code, from_index, err) = cli(&["formula", "learn"]);
    assert_eq!(code, 0, "{err}");
    let id = |json: &str| serde_json::from_str::<Value>(json).unwrap()["id"].clone();
    assert_eq!(
        id(&from_index),
        id(&std::fs::read_to_string(formula).unwrap())
    );

    let similar = Similar::with_options(
        client.clone(),
        None,
        Default::default(),
        RetryPolicy::none(),
    );
    let mut copies_claimed = 0;
    for q in &queries {
        let found = similar
            .aligned_by_id(idx.name.as_str(), q, &AlignRule::DEFAULT)
            .await
            .unwrap();
        assert!(found
            .formula
            .as_deref()
            .is_some_and(|f| f.starts_with("fm1-")));
        let got: BTreeMap<String, Said> = found
            .matches
            .iter()
            .map(|m| {
                let v = serde_json::to_value(m).unwrap();
                let passages = v["passages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| {
                        format!(
                            "{} {} {}",
                            span(&x["query"]),
                            span(&x["match"]),
                            x["matched"]
                        )
                    })
                    .collect::<BTreeSet<String>>()
                    .into_iter()
                    .collect();
                (
                    m.id.clone(),
                    (
                        v["relation"].as_str().unwrap().to_owned(),
                        v["query_copied"].to_string(),
                        v["match_copied"].to_string(),
                        passages,
                    ),
                )
            })
            .collect();
        copies_claimed += got.values().filter(|s| s.0 != "shares_passage").count();
        assert_eq!(got, want.remove(q).unwrap_or_default(), "{q}");
    }
    assert!(copies_claimed > 0);

    // The service: `?align=true` answers what the library answers, with the formula named.
    let app = common::serve::es_router(client.clone(), neardup::serve::ServeConfig::default());
    let get = |uri: String| {
        let app = app.clone();
        async move {
            common::serve::call(
                &app,
                axum::http::Request::get(uri)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
        }
    };
    for q in queries.iter().take(12) {
        let (status, body, _) = get(format!("/v1/{}/similar/{q}?align=true", idx.name)).await;
        assert_eq!(status, axum::http::StatusCode::OK, "{body}");
        let lib = similar
            .aligned_by_id(idx.name.as_str(), q, &AlignRule::DEFAULT)
            .await
            .unwrap();
        assert_eq!(
            body["matches"],
            serde_json::to_value(&lib.matches).unwrap(),
            "{q}"
        );
        assert_eq!(body["formula"], json!(lib.formula), "{q}");
    }
    // An article posted (`POST …/similar?align=true`, `Similar::aligned_by_article`) is
    // answered as the stored one is, and finds itself, whole; the spans of a match count the
    // texts `GET …/articles/{id}` gives.
    for q in queries.iter().take(12) {
        let lib = similar
            .aligned_by_id(idx.name.as_str(), q, &AlignRule::DEFAULT)
            .await
            .unwrap();
        let posted = similar
            .aligned_by_article(idx.name.as_str(), &docs[q], &AlignRule::DEFAULT)
            .await
            .unwrap();
        let (itself, others): (Vec<_>, Vec<_>) = posted.matches.iter().partition(|m| &m.id == q);
        let itself = serde_json::to_value(itself[0]).unwrap();
        assert_eq!(itself["relation"], "near_duplicate", "{q}: {itself}");
        assert_eq!(itself["query_copied"], json!(1.0), "{q}: {itself}");
        assert_eq!(
            serde_json::to_value(&others).unwrap(),
            serde_json::to_value(&lib.matches).unwrap(),
            "{q}"
        );
        let app = app.clone();
        let (status, body, _) = common::serve::call(
            &app,
            common::serve::post_json(&format!("/v1/{}/similar?align=true", idx.name), &docs[q]),
        )
        .await;
        assert_eq!(status, axum::http::StatusCode::OK, "{body}");
        assert_eq!(
            body["matches"],
            serde_json::to_value(&posted.matches).unwrap(),
            "{q}"
        );
        for m in &lib.matches {
            let (status, article, _) = get(format!("/v1/{}/articles/{}", idx.name, m.id)).await;
            assert_eq!(status, axum::http::StatusCode::OK, "{article}");
            let texts: Vec<Vec<char>> = article["texts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().chars().collect())
                .collect();
            let mine: Vec<Vec<char>> = ["title", "content"]
                .iter()
                .map(|f| docs[q][f].as_str().unwrap().chars().collect())
                .collect();
            for p in &m.shared.as_ref().unwrap().passages {
                for (span, texts) in [(p.query, &mine), (p.found, &texts)] {
                    let text = &texts[span.field];
                    assert!(
                        span.start < span.end && span.end <= text.len(),
                        "{q} {span:?}"
                    );
                }
                // The first and last letters of a passage are in runs: alike on both sides.
                let first = |span: neardup::align::Span, texts: &Vec<Vec<char>>| {
                    texts[span.field][span.start]
                };
                assert_eq!(first(p.query, &mine), first(p.found, &texts), "{q} {p:?}");
            }
        }
    }

    let q = queries.first().unwrap();
    let (status, body, _) = get(format!(
        "/v1/{}/similar/{q}?align=true&threshold=0.5",
        idx.name
    ))
    .await;
    assert_eq!(status, axum::http::StatusCode::BAD_REQUEST, "{body}");

    // The command line: the same matches as JSON lines, the formula's note absent.
    let q = queries
        .iter()
        .find(|q| q.contains("~"))
        .unwrap_or_else(|| queries.first().unwrap());
    let (code, out, err) = cli(&["similar", "--id", q, "--align"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("records no formula"), "{err}");
    for line in common::json_lines(&out) {
        assert!(
            line["relation"].is_string() && line["passages"].is_array(),
            "{line}"
        );
    }
    // A store keeps no texts; --align looks up a stored document.
    let (code, _, err) = common::neardup(
        &[
            "similar",
            "--store",
            dir.path().to_str().unwrap(),
            "--id",
            q,
            "--align",
        ],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("keeps none"), "{err}");
    // --input answers what --id answers (its own id left out), --ids-from each id's answer.
    let (code, by_id, err) = cli(&["similar", "--id", q, "--align"]);
    assert_eq!(code, 0, "{err}");
    let mut line = docs[q].clone();
    line["id"] = json!(q);
    let one = dir.path().join("one.jsonl");
    std::fs::write(&one, format!("{line}\n")).unwrap();
    let (code, out, err) = cli(&["similar", "--input", one.to_str().unwrap(), "--align"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, by_id);
    let ids: Vec<&str> = queries.iter().take(5).map(String::as_str).collect();
    let ids_file = dir.path().join("ids.txt");
    std::fs::write(&ids_file, ids.join("\n")).unwrap();
    let (code, out, err) = cli(&[
        "similar",
        "--ids-from",
        ids_file.to_str().unwrap(),
        "--align",
    ]);
    assert_eq!(code, 0, "{err}");
    for (line, id) in common::json_lines(&out).iter().zip(&ids) {
        let lib = similar
            .aligned_by_id(idx.name.as_str(), id, &AlignRule::DEFAULT)
            .await
            .unwrap();
        assert_eq!(line["id"], json!(id));
        // Both read back from JSON, which rounds the similarities alike.
        let want: Value =
            serde_json::from_str(&serde_json::to_string(&lib.matches).unwrap()).unwrap();
        assert_eq!(line["matches"], want, "{id}");
    }
    // --text: one text, as the library's `aligned_by_text` answers it; too short, exit 4.
    let text = format!(
        "{}\n{}",
        docs[q]["title"].as_str().unwrap(),
        docs[q]["content"].as_str().unwrap()
    );
    let (code, out, err) = cli(&["similar", "--text", &text, "--align"]);
    assert_eq!(code, 0, "{err}");
    let lib = similar
        .aligned_by_text(idx.name.as_str(), &text, &AlignRule::DEFAULT)
        .await
        .unwrap();
    // As printed: JSON read back here would round the similarities.
    let lib: String = lib
        .matches
        .iter()
        .map(|m| serde_json::to_string(m).unwrap() + "\n")
        .collect();
    assert_eq!(out, lib);
    let (code, _, err) = cli(&["similar", "--text", "一段文字", "--align"]);
    assert_eq!(code, 4, "{err}");
    // A fingerprint has no text to align.
    let (code, _, err) = cli(&["similar", "--fingerprint", "0123456789abcdef", "--align"]);
    assert_eq!(code, 2, "{err}");
}

/// Dedupe on insert with the texts deciding (`PUT …?dedupe=true&align=true`): an index that
/// holds last month's daily bulletins, its formula learned from itself, stores every bulletin
/// of this month (201), and refuses a repost of one of them (409, `near_duplicate`, with what
/// the two share). Without `align`, the duplicate check refuses what MinHash links.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_bulletins_is_stored_and_a_repost_refused() {
    use common::serve::{call, put_json};
    let series = generate::template_series(sample(), "weather_forecast", 60, 23).unwrap();
    let (last_month, this_month) = series.split_at(30);
    let client = t::client().await;
    let idx = TestIndex::new("aligned-insert");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    let mut history: Vec<(String, Value)> = sample().iter().take(300).map(doc).collect();
    history.extend(last_month.iter().map(doc));
    t::load(&client, &idx.name, &history).await;
    fingerprint_and_record_formula(&client, &idx.name).await;

    let app = common::serve::es_router(client.clone(), neardup::serve::ServeConfig::default());
    let put = |id: &str, query: &str, a: &generate::Article| {
        put_json(
            &format!("/v1/{}/articles/{id}?dedupe=true{query}", idx.name),
            &body(a),
        )
    };
    // Without the texts: what MinHash's check alone would refuse (a copy of the index, so
    // nothing is written).
    let mut refused_by_minhash = 0;
    for a in this_month {
        let probe = format!("{}-probe", a.id);
        let (status, body, _) = call(&app, put(&probe, "&refresh=wait_for", a)).await;
        match status {
            axum::http::StatusCode::CREATED => {
                let path = format!("/{}/_doc/{}", idx.name, probe);
                t::call(&client, elasticsearch::http::Method::Delete, &path, None).await;
            }
            axum::http::StatusCode::CONFLICT => refused_by_minhash += 1,
            s => panic!("{s}: {body}"),
        }
    }
    t::refresh(&client, &idx.name).await;
    eprintln!("bulletins of this month refused by MinHash alone: {refused_by_minhash} of 30");

    // With the texts deciding: every bulletin stored. The first half in one batch
    // (`_bulk?dedupe=true&align=true`) with, after them, a retitled repost of one of them:
    // the repost refused as a copy of the batch's earlier article, saying what is copied.
    let repost_of = |day: &generate::Article| generate::Article {
        id: format!("{}-repost", day.id),
        title: format!("转载：{}", day.title),
        content: day.content.clone(),
    };
    let (first, rest) = this_month.split_at(15);
    let in_batch = repost_of(&first[5]);
    let lines: Vec<String> = first
        .iter()
        .chain([&in_batch])
        .map(|a| json!({"id": a.id, "title": a.title, "content": a.content}).to_string())
        .collect();
    let (status, body, _) = call(
        &app,
        common::serve::post_ndjson(
            &format!("/v1/{}/articles/_bulk?dedupe=true&align=true", idx.name),
            &lines,
        ),
    )
    .await;
    assert_eq!(status, axum::http::StatusCode::OK, "{body}");
    let items = body["items"].as_array().unwrap();
    for (item, a) in items.iter().zip(first) {
        assert_eq!(item["status"], 201, "{}: {body}", a.id);
    }
    let refused = &items[first.len()];
    assert_eq!(refused["status"], 409, "{body}");
    assert_eq!(refused["relation"], "near_duplicate", "{body}");
    assert_eq!(refused["matches"][0]["id"], json!(first[5].id), "{body}");
    assert!(
        refused["matches"][0]["passages"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{body}"
    );
    for a in rest {
        let (status, body, _) = call(&app, put(&a.id, "&align=true", a)).await;
        assert_eq!(status, axum::http::StatusCode::CREATED, "{}: {body}", a.id);
    }
    // A repost of one of them, retitled, alone: refused, saying what is copied.
    let day = &this_month[15];
    let repost = repost_of(day);
    let (status, body, _) = call(&app, put(&repost.id, "&align=true", &repost)).await;
    assert_eq!(status, axum::http::StatusCode::CONFLICT, "{body}");
    let m = &body["matches"][0];
    assert_eq!(m["id"], json!(day.id), "{body}");
    assert_eq!(m["relation"], "near_duplicate", "{body}");
    assert!(
        m["passages"].as_array().is_some_and(|p| !p.is_empty()),
        "{body}"
    );
    // `align` goes with `dedupe`.
    let (status, body, _) = call(
        &app,
        put_json(
            &format!("/v1/{}/articles/x?align=true", idx.name),
            &json!({"title": "t", "content": "c"}),
        ),
    )
    .await;
    assert_eq!(status, axum::http::StatusCode::BAD_REQUEST, "{body}");
}

/// The worker keeps the formula an index records current, learned from the index itself:
/// once the index holds 1,000 documents it records what `formula learn --index` learns; it
/// learns nothing again until the index has grown by a tenth, then replaces it; a formula
/// learned elsewhere from more texts stays; `--no-formula` leaves `_meta` alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_keeps_the_formula_current() {
    let client = t::client().await;
    let idx = TestIndex::new("formula-upkeep");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let recorded = || async {
        let m = t::call(
            &client,
            elasticsearch::http::Method::Get,
            &format!("/{}/_mapping", idx.name),
            None,
        )
        .await;
        let meta = &m[idx.name.as_str()]["mappings"]["_meta"]["neardup"]["formula"];
        (
            meta["id"].as_str().map(str::to_owned),
            meta["texts"].as_u64(),
        )
    };
    let docs: Vec<(String, Value)> = sample().iter().map(doc).collect();
    let (first, rest) = docs.split_at(1_200);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    // Too small an index: no formula.
    t::load(&client, &idx.name, &first[..900]).await;
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recorded().await, (None, None), "{err}");
    // 1,200 documents: learned and recorded, what `formula learn --index` learns.
    t::load(&client, &idx.name, &first[900..]).await;
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("formula learned from the index"), "{err}");
    let (id, texts) = recorded().await;
    assert_eq!(texts, Some(1_200));
    let (code, out, err) = cli(&["formula", "learn"]);
    assert_eq!(code, 0, "{err}");
    let learned: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(learned["id"].as_str().map(str::to_owned), id);
    // Nothing new: nothing learned.
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("formula learned"), "{err}");
    // Grown by more than a tenth, but the worker told to leave it: unchanged.
    t::load(&client, &idx.name, rest).await;
    let (code, _, err) = cli(&["worker", "--once", "--no-formula"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recorded().await, (id.clone(), Some(1_200)));
    // Then replaced.
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("replaced={}", id.as_deref().unwrap())),
        "{err}"
    );
    let (new_id, texts) = recorded().await;
    assert_eq!(texts, Some(docs.len() as u64));
    assert_ne!(new_id, id);
    // A formula learned elsewhere from more texts than the index holds stays.
    let dir = tempfile::tempdir().unwrap();
    let formula = dir.path().join("formula.json");
    let elsewhere = dir.path().join("elsewhere.jsonl");
    let mut f = std::fs::File::create(&elsewhere).unwrap();
    let others = crate::eval_messy::corpus()
        .iter()
        .skip(1)
        .step_by(8)
        .take(600);
    for a in sample().iter().chain(others) {
        let line = json!({"id": a.id, "title": a.title, "content": a.content});
        writeln!(f, "{line}").unwrap();
    }
    drop(f);
    let (code, _, err) = common::neardup(
        &[
            "formula",
            "learn",
            "-i",
            elsewhere.to_str().unwrap(),
            "-o",
            formula.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["es-init", "--formula", formula.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let given = recorded().await;
    assert!(given.1.unwrap() > docs.len() as u64);
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(recorded().await, given);
}

/// `regroup --align` joins copies only: over the corpus sample, daily bulletins of every
/// template family and retitled reposts of some of them, each repost shares its bulletin's
/// group, and at most the 1 % of the pairs of bulletins of one family share a group
/// (two instances of one template are not copies), whatever MinHash's regroup joins (counted
/// on stderr). The report names the formula the index records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regroup_with_the_texts_joins_copies_only() {
    let mut bulletins = Vec::new();
    for (n, family) in generate::TEMPLATE_FAMILIES.iter().enumerate() {
        bulletins.extend(generate::template_series(sample(), family, 8, 40 + n as u64).unwrap());
    }
    let reposts: Vec<(String, generate::Article)> = bulletins
        .iter()
        .step_by(13)
        .map(|b| {
            let repost = generate::Article {
                id: format!("{}-repost", b.id),
                title: format!("转载：{}", b.title),
                content: b.content.clone(),
            };
            (b.id.clone(), repost)
        })
        .collect();
    let client = t::client().await;
    let idx = TestIndex::new("aligned-regroup");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<(String, Value)> = sample()
        .iter()
        .take(300)
        .chain(&bulletins)
        .chain(reposts.iter().map(|(_, r)| r))
        .map(doc)
        .collect();
    t::load(&client, &idx.name, &docs).await;
    let learned = fingerprint_and_record_formula(&client, &idx.name).await;
    let dir = tempfile::tempdir().unwrap();

    // The groups of two or more a dry run prints, as sets of ids.
    let groups = |name: &str, extra: &[&str]| -> (Vec<BTreeSet<String>>, String) {
        let state = dir.path().join(name);
        let mut args = vec!["regroup", "--dry-run", "--quiet", "--state"];
        args.push(state.to_str().unwrap());
        args.extend(extra);
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        let groups = common::regroup::listed_groups(&out).into_iter().collect();
        (groups, err)
    };
    let bulletin = |id: &str| bulletins.iter().find(|b| b.id == id);
    // Pairs of bulletins that share a group.
    let bulletins_joined = |groups: &[BTreeSet<String>]| -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        for g in groups {
            let ids: Vec<&String> = g.iter().filter(|id| bulletin(id).is_some()).collect();
            for (n, a) in ids.iter().enumerate() {
                pairs.extend(ids[n + 1..].iter().map(|b| ((*a).clone(), (*b).clone())));
            }
        }
        pairs
    };
    let (minhash, _) = groups("minhash.redb", &[]);
    let (aligned, report) = groups("aligned.redb", &["--align"]);
    let joined = bulletins_joined(&aligned);
    eprintln!(
        "pairs of bulletins in one group: MinHash regroup {}, aligned {}",
        bulletins_joined(&minhash).len(),
        joined.len()
    );
    for (a, b) in &joined {
        for id in [a, b] {
            let x = bulletin(id).unwrap();
            eprintln!("{id}: {} | {}", x.title, x.content);
        }
    }
    // The bound for template instances: at most 1 % of the pairs of one template
    // family linked (8 families of 8 bulletins: 224 pairs).
    let pairs = generate::TEMPLATE_FAMILIES.len() * 8 * 7 / 2;
    assert!(
        joined.len() * 100 <= pairs,
        "{} of {pairs} pairs of bulletins joined: {joined:?}",
        joined.len()
    );
    for (bulletin, repost) in &reposts {
        assert!(
            aligned
                .iter()
                .any(|g| g.contains(bulletin) && g.contains(&repost.id)),
            "{} apart from {bulletin}: {aligned:?}",
            repost.id
        );
    }
    let id = learned["id"].as_str().unwrap();
    assert!(
        report.contains(&format!("texts aligned, formula {id}")),
        "{report}"
    );
}

/// Fingerprints `index` (`worker --once`), learns its formula (`formula learn`) and records
/// it (`es-init --formula`), as a user sets an index up for aligned answers; the formula.
async fn fingerprint_and_record_formula(
    client: &elasticsearch::Elasticsearch,
    index: &str,
) -> Value {
    let cli = |args: &[&str]| common::es_cli(index, args);
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(client, index).await;
    let dir = tempfile::tempdir().unwrap();
    let formula = dir.path().join("formula.json");
    let formula = formula.to_str().unwrap();
    let (code, _, err) = cli(&["formula", "learn", "-o", formula]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["es-init", "--formula", formula]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&std::fs::read_to_string(formula).unwrap()).unwrap()
}

/// Groups linked by texts (`es-init --group-by texts`): every writer joins copies only, as
/// `regroup --align` does. Over the corpus sample, daily bulletins of every template family
/// are written by every writer (`backfill`, the worker, the service's `_bulk` and its `PUT`),
/// then retitled reposts of some of them by `PUT`, each straight after its bulletin (found in
/// the group memory, before any refresh) or after a refresh (found by the search): each repost
/// joins its bulletin's group, and at most the 1 % of the pairs of bulletins of one
/// family share a group. A plain regroup of the index then aligns too, and moves no label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_linked_by_texts_join_copies_only_in_every_writer() {
    use common::serve::{call, post_ndjson, put_json};
    let mut bulletins = Vec::new();
    for (n, family) in generate::TEMPLATE_FAMILIES.iter().enumerate() {
        bulletins.extend(generate::template_series(sample(), family, 8, 70 + n as u64).unwrap());
    }
    let repost_of = |b: &generate::Article| generate::Article {
        id: format!("{}-repost", b.id),
        title: format!("转载：{}", b.title),
        content: b.content.clone(),
    };
    let client = t::client().await;
    let idx = TestIndex::new("aligned-groups");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    let history: Vec<(String, Value)> = sample().iter().take(300).map(doc).collect();
    t::load(&client, &idx.name, &history).await;
    fingerprint_and_record_formula(&client, &idx.name).await;
    let (code, out, err) = cli(&["es-init", "--group-by", "texts"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("linked by texts of `title`, `content`"),
        "{out}"
    );
    let meta = t::call(
        &client,
        elasticsearch::http::Method::Get,
        &format!("/{}/_mapping", idx.name),
        None,
    )
    .await;
    let recorded = meta
        .as_object()
        .and_then(|m| m.values().next())
        .map(|m| m["mappings"]["_meta"]["neardup"]["group"]["link"].clone())
        .unwrap();
    assert_eq!(
        recorded,
        json!({"by": "texts", "fields": ["title", "content"]})
    );

    // A sixth of the bulletins by `backfill`, a sixth by the worker, a third in one `_bulk`,
    // a third by `PUT`.
    let (by_job, rest) = bulletins.split_at(bulletins.len() / 3);
    let (in_bulk, by_put) = rest.split_at(rest.len() / 2);
    for (half, job) in by_job
        .chunks(by_job.len().div_ceil(2))
        .zip([&["backfill", "--quiet"][..], &["worker", "--once"]])
    {
        let raw: Vec<(String, Value)> = half.iter().map(doc).collect();
        t::load(&client, &idx.name, &raw).await;
        let (code, _, err) = cli(job);
        assert_eq!(code, 0, "{err}");
    }
    let app = common::serve::es_router(client.clone(), neardup::serve::ServeConfig::default());
    let lines: Vec<String> = in_bulk
        .iter()
        .map(|a| json!({"id": a.id, "title": a.title, "content": a.content}).to_string())
        .collect();
    let (status, answer, _) = call(
        &app,
        post_ndjson(&format!("/v1/{}/articles/_bulk", idx.name), &lines),
    )
    .await;
    assert_eq!(status, axum::http::StatusCode::OK, "{answer}");
    let put =
        |a: &generate::Article| put_json(&format!("/v1/{}/articles/{}", idx.name, a.id), &body(a));
    let mut reposts = Vec::new();
    for (n, a) in by_put.iter().enumerate() {
        let (status, answer, _) = call(&app, put(a)).await;
        assert!(status.is_success(), "{}: {answer}", a.id);
        // Every fifth one reposted at once: joined from the group memory.
        if n % 5 == 0 {
            let r = repost_of(a);
            let (status, answer, _) = call(&app, put(&r)).await;
            assert!(status.is_success(), "{}: {answer}", r.id);
            reposts.push((a.id.clone(), r.id));
        }
    }
    // Reposts of bulletins of each writer, after a refresh: joined by the search.
    t::refresh(&client, &idx.name).await;
    for a in bulletins.iter().step_by(9) {
        let r = repost_of(a);
        if reposts.iter().any(|(_, id)| *id == r.id) {
            continue;
        }
        let (status, answer, _) = call(&app, put(&r)).await;
        assert!(status.is_success(), "{}: {answer}", r.id);
        reposts.push((a.id.clone(), r.id));
    }

    let labels = crate::live_es::groups::labels(&client, &idx.name).await;
    for (bulletin, repost) in &reposts {
        assert_eq!(
            labels.get(bulletin),
            labels.get(repost),
            "{repost} apart from {bulletin}"
        );
    }
    let mut joined = Vec::new();
    for (n, a) in bulletins.iter().enumerate() {
        for b in &bulletins[n + 1..] {
            if labels.get(&a.id) == labels.get(&b.id) {
                joined.push((a.id.clone(), b.id.clone()));
            }
        }
    }
    eprintln!(
        "pairs of bulletins in one group, written with groups linked by texts: {} ({} reposts)",
        joined.len(),
        reposts.len()
    );
    let pairs = generate::TEMPLATE_FAMILIES.len() * 8 * 7 / 2;
    assert!(
        joined.len() * 100 <= pairs,
        "{} of {pairs} pairs of bulletins joined: {joined:?}",
        joined.len()
    );

    // A regroup follows the index: it aligns without --align, and finds nothing to move.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("regroup.redb");
    let report = dir.path().join("report.json");
    let (code, _, err) = cli(&[
        "regroup",
        "--quiet",
        "--state",
        state.to_str().unwrap(),
        "--report-json",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["aligned"], true, "{report}");
    let after = crate::live_es::groups::labels(&client, &idx.name).await;
    let groups = |l: &BTreeMap<String, String>| -> BTreeSet<BTreeSet<String>> {
        let mut by: BTreeMap<&String, BTreeSet<String>> = BTreeMap::new();
        for (id, g) in l {
            by.entry(g).or_default().insert(id.clone());
        }
        by.into_values().collect()
    };
    assert_eq!(groups(&labels), groups(&after), "{report}");
    // Other text fields than the recorded ones are refused.
    let (code, _, err) = cli(&["regroup", "--dry-run", "--align", "--field", "title"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("links its groups by the texts of title, content"),
        "{err}"
    );

    // Through the library, fingerprinting `content` only: an article whose `title` (a text
    // field the groups align) is not text is refused alone, naming the field; the other one
    // of the batch is written.
    let indexer = t::indexer(&client, &idx.name).await;
    let good = json!({"title": "一", "content": bulletins[0].content});
    let bad = json!({"title": 42, "content": bulletins[1].content});
    let text = vec!["content".to_string()];
    let (sg, sb) = (
        indexer.sketch(&good, &text).unwrap(),
        indexer.sketch(&bad, &text).unwrap(),
    );
    let answers = indexer
        .index_articles(
            &[("lib-good", &good, &sg), ("lib-bad", &bad, &sb)],
            neardup::es::Refresh::No,
        )
        .await
        .unwrap();
    assert!(answers[0].is_ok(), "{:?}", answers[0]);
    match &answers[1] {
        Err(neardup::es::EsError::BadDocument { id, reason }) => {
            assert_eq!(id, "lib-bad");
            assert!(reason.contains("`title` holds a number"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A lead on a page under a block of related links, longer than the lead: `similar --id
/// --align` finds the page contained in its article and the article containing the page,
/// and two pages that share only their links block are not related (the rule leaves out the
/// list block ending a field, `align::Mark::Listed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_under_related_links_is_contained_from_both_sides() {
    let sample = sample();
    let mut docs: BTreeMap<String, Value> = sample.iter().take(200).map(doc).collect();
    // Articles long enough that a lead of about a third is a few sentences.
    let mut long = sample
        .iter()
        .skip(200)
        .filter(|a| (1200..4000).contains(&a.content.chars().count()) && a.content.contains('。'));
    let (src, other) = (long.next().unwrap(), long.next().unwrap());
    let lead = |text: &str| -> String {
        let third = text.chars().count() / 3;
        let mut out = String::new();
        for s in text.split_inclusive('。') {
            out.push_str(s);
            if out.chars().count() >= third {
                break;
            }
        }
        out.replace('\n', "")
    };
    // Headlines of other articles, with a heading: more letters than the lead.
    let src_lead = lead(&src.content);
    let mut links = vec!["相关阅读".to_owned()];
    for a in sample.iter().skip(300) {
        let t = a.title.trim();
        if (8..=40).contains(&t.chars().count()) && !t.contains('。') && !t.ends_with(['，', '：'])
        {
            links.push(format!("· {t}"));
        }
        if links.iter().map(|l| l.chars().count()).sum::<usize>() > src_lead.chars().count() + 100 {
            break;
        }
    }
    let links = links.join("\n");
    docs.extend([doc(src), doc(other)]);
    let page = |lead: &str| format!("{lead}\n{links}");
    docs.insert(
        "page".into(),
        json!({"title": "转载", "content": page(&src_lead)}),
    );
    docs.insert(
        "other-page".into(),
        json!({"title": "转载", "content": page(&lead(&other.content))}),
    );

    let client = t::client().await;
    let idx = TestIndex::new("aligned-listed");
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let (code, _, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    let loaded: Vec<(String, Value)> = docs.into_iter().collect();
    t::load(&client, &idx.name, &loaded).await;
    let (code, _, err) = cli(&["worker", "--once"]);
    assert_eq!(code, 0, "{err}");
    t::refresh(&client, &idx.name).await;

    let similar = Similar::with_options(
        client.clone(),
        None,
        Default::default(),
        RetryPolicy::none(),
    );
    let relation = |s: &neardup::es::Similarity, id: &str| {
        s.matches
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.relation)
            .map(|r| r.name())
    };
    let from_page = similar
        .aligned_by_id(idx.name.as_str(), "page", &AlignRule::DEFAULT)
        .await
        .unwrap();
    assert_eq!(
        relation(&from_page, &src.id),
        Some("contained_in"),
        "{:?}",
        from_page.matches
    );
    assert_eq!(
        relation(&from_page, "other-page"),
        None,
        "{:?}",
        from_page.matches
    );
    let m = from_page.matches.iter().find(|m| m.id == src.id).unwrap();
    let shared = serde_json::to_value(m).unwrap();
    // All of the page but its own title ("转载") and its links.
    assert!(shared["query_copied"].as_f64().unwrap() > 0.99, "{shared}");
    let from_src = similar
        .aligned_by_id(idx.name.as_str(), &src.id, &AlignRule::DEFAULT)
        .await
        .unwrap();
    assert_eq!(
        relation(&from_src, "page"),
        Some("contains"),
        "{:?}",
        from_src.matches
    );
}

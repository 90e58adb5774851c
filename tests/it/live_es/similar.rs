//! The query path against a live node: near duplicates planted at known distances around real
//! articles are all found within k and never beyond it, the query document is left out,
//! several indices answer at once, paging through more candidates than one page loses
//! nothing, and deletions and new fingerprints show at once.

use crate::common;

use std::collections::BTreeSet;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::schema::minhash_fields_json;
use neardup::es::MinHashLayout;
use neardup::es::{
    simhash_fields_json, BlockType, EsConfig, EsError, FieldNames, FilterMode, IndexMeta, Match,
    Paging, QueryFingerprint, RetryPolicy, Similar, SimilarOptions,
};
use neardup::store::sort_matches;
use neardup::{
    Fingerprinter, MinHashParams, Profile, Score, Signature, SimHash, Sketch, Tolerance,
};
use serde_json::{json, Value};

fn fingerprinter() -> Fingerprinter {
    Fingerprinter::for_profile(Profile::Default)
}

/// A query function whose fingerprinter comes from the indices' `_meta`.
fn similar(client: &elasticsearch::Elasticsearch, filter: FilterMode, page_size: usize) -> Similar {
    Similar::with_options(
        client.clone(),
        None,
        SimilarOptions {
            filter,
            page_size,
            ..SimilarOptions::default()
        },
        RetryPolicy::none(),
    )
}

/// `fp` with the given bits (0 = lowest) flipped.
fn flip(fp: SimHash, bits: &[u32]) -> SimHash {
    SimHash(bits.iter().fold(fp.0, |v, b| v ^ (1u64 << b)))
}

/// Bits to flip for a planted copy at `d`. Up to 3 the flips are spread over the blocks
/// (block A = bits 48..64) so that at least one block stays whole, as pigeonhole promises;
/// from 4 on they all fall into blocks A and B, so C and D still match and the copy is a
/// candidate the exact distance must reject.
fn flips(d: u32, salt: u32) -> Vec<u32> {
    let spread = [63 - salt % 16, 40 - salt % 8, 20 + salt % 8];
    let ab = [48, 50, 53, 57, 33, 36];
    if d <= 3 {
        spread[..d as usize].to_vec()
    } else {
        ab[..d as usize].to_vec()
    }
}

fn doc_with(source: &Value, fp: SimHash) -> Value {
    let mut doc = source.clone();
    let fields = simhash_fields_json(
        &FieldNames::default(),
        &Ok(neardup::Fingerprint {
            simhash: fp,
            version: fingerprinter().version().into(),
        }),
        fingerprinter().version(),
    );
    doc.as_object_mut().unwrap().extend(fields);
    doc
}

async fn new_index(
    client: &elasticsearch::Elasticsearch,
    prefix: &str,
    bt: BlockType,
) -> TestIndex {
    t::initialised(
        client,
        prefix,
        &IndexMeta::simhash(Profile::Default, bt, FieldNames::default()),
    )
    .await
}

/// `(id, _source)` pairs to load.
type Docs = Vec<(String, Value)>;

/// Real articles with their fingerprints, and planted copies at distances 0..=6 around the
/// first `bases` of them. Returns every `(id, fingerprint)` written.
fn corpus(prefix: &str, articles: usize, bases: usize) -> (Docs, Vec<(String, SimHash)>) {
    let fp = fingerprinter();
    let mut docs = Vec::new();
    let mut all = Vec::new();
    let mut planted_for = 0;
    for (id, src) in t::shared_articles(articles) {
        let Ok(f) = fp.fingerprint_fields(&[
            src["title"].as_str().unwrap_or(""),
            src["content"].as_str().unwrap_or(""),
        ]) else {
            continue;
        };
        let id = format!("{prefix}{id}");
        if planted_for < bases {
            for d in 0..=6u32 {
                let planted = flip(f.simhash, &flips(d, planted_for as u32));
                assert_eq!(planted.distance(f.simhash), d);
                let pid = format!("{id}-planted-d{d}");
                docs.push((pid.clone(), doc_with(&json!({"title": "planted"}), planted)));
                all.push((pid, planted));
            }
            planted_for += 1;
        }
        docs.push((id.clone(), doc_with(&src, f.simhash)));
        all.push((id, f.simhash));
    }
    (docs, all)
}

/// What a correct answer is: every other document within k, by brute force.
fn expected(all: &[(String, SimHash)], index: &str, query: &str, k: u32) -> Vec<Match> {
    let q = all.iter().find(|(id, _)| id == query).unwrap().1;
    let mut m: Vec<Match> = all
        .iter()
        .filter(|(id, f)| id != query && f.distance(q) <= k)
        .map(|(id, f)| Match::in_index(id, index, Score::Distance(f.distance(q))))
        .collect();
    sort_matches(&mut m);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_duplicates_within_k_are_found_and_none_beyond() {
    let client = t::client().await;
    for bt in BlockType::ALL {
        let idx = new_index(&client, "similar", bt).await;
        let (docs, all) = corpus("", 120, 6);
        t::load(&client, &idx.name, &docs).await;
        let painless = t::capabilities(&client, &idx.name).await.painless;

        let bases: Vec<String> = all
            .iter()
            .filter(|(id, _)| id.ends_with("-planted-d0"))
            .map(|(id, _)| id.trim_end_matches("-planted-d0").to_owned())
            .collect();
        assert_eq!(bases.len(), 6);
        for filter in [FilterMode::Client, FilterMode::Server] {
            let s = similar(&client, filter, 1000);
            for base in &bases {
                for k in 0..=3 {
                    let found = s.by_id(idx.name.as_str(), base, k).await.unwrap();
                    let want = expected(&all, &idx.name, base, k);
                    assert_eq!(found.matches, want, "{bt} {filter} k={k} base {base}");
                    assert!(matches!(found.query, QueryFingerprint::Stored(_)));
                    for d in 0..=6 {
                        let planted = format!("{base}-planted-d{d}");
                        let hit = found.matches.iter().any(|m| m.id == planted);
                        assert_eq!(hit, d <= k, "{bt} {filter} k={k}: {planted}");
                    }
                    assert!(
                        found.matches.iter().all(|m| &m.id != base),
                        "query document left out"
                    );
                }
                // The distance-4..6 copies share blocks C and D: they are candidates, and the
                // exact distance rejects them. Server-side, only true matches cross the
                // network (the query leaves the query document out). A node without painless
                // refuses the script once, and the client-side filter answers from then on.
                let found = s.by_id(idx.name.as_str(), base, 3).await.unwrap();
                match s.effective_filter() {
                    FilterMode::Client => {
                        assert!(found.transferred >= found.matches.len() as u64 + 3)
                    }
                    FilterMode::Server => {
                        assert_eq!(found.transferred, found.matches.len() as u64)
                    }
                }
                let server = filter == FilterMode::Server && painless;
                let effective = if server {
                    FilterMode::Server
                } else {
                    FilterMode::Client
                };
                assert_eq!(
                    s.effective_filter(),
                    effective,
                    "{filter}, painless: {painless}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_indices_at_once_and_an_id_in_two_of_them() {
    let client = t::client().await;
    let a = new_index(&client, "similar-2024", BlockType::Short).await;
    let b = new_index(&client, "similar-2025", BlockType::Keyword).await;
    let (docs, all) = corpus("", 40, 2);
    // Split: the originals in `a`, the planted copies in `b`.
    let (planted, originals): (Vec<_>, Vec<_>) = docs
        .into_iter()
        .partition(|(id, _)| id.contains("-planted-"));
    t::load(&client, &a.name, &originals).await;
    t::load(&client, &b.name, &planted).await;
    let index_of = |id: &str| {
        if id.contains("-planted-") {
            &b.name
        } else {
            &a.name
        }
    };
    let base = all
        .iter()
        .find(|(id, _)| id.ends_with("-planted-d0"))
        .unwrap()
        .0
        .trim_end_matches("-planted-d0")
        .to_owned();
    let s = similar(&client, FilterMode::Client, 1000);
    let mut want = expected(&all, "", &base, 3);
    for m in &mut want {
        m.index = Some(index_of(&m.id).clone());
    }
    sort_matches(&mut want);
    let comma = format!("{},{}", a.name, b.name);
    let found = s.by_id(comma.as_str(), &base, 3).await.unwrap();
    assert_eq!(found.matches, want);
    assert!(found
        .matches
        .iter()
        .any(|m| m.index.as_ref() == Some(&b.name)));
    let list = vec![a.name.clone(), b.name.clone()];
    assert_eq!(s.by_id(list, &base, 3).await.unwrap().matches, want);

    // The same id in both indices is ambiguous: the message names both.
    t::load(
        &client,
        &b.name,
        &[(base.clone(), json!({"title": "same id, other index"}))],
    )
    .await;
    let e = s.by_id(comma.as_str(), &base, 3).await.unwrap_err();
    assert!(matches!(e, EsError::AmbiguousId { .. }), "{e}");
    assert!(
        e.to_string().contains(&a.name) && e.to_string().contains(&b.name),
        "{e}"
    );

    // One name is read by id (a get); an alias of both cannot be, and is searched: the same
    // answer as the list.
    let both = format!("{}-alias", a.name);
    let only_a = format!("{}-alias-a", a.name);
    t::call(
        &client,
        Method::Post,
        "/_aliases",
        Some(json!({ "actions": [
            { "add": { "indices": [&a.name, &b.name], "alias": &both } },
            { "add": { "index": &a.name, "alias": &only_a } },
        ] })),
    )
    .await;
    let e = s.by_id(both.as_str(), &base, 3).await.unwrap_err();
    assert!(matches!(e, EsError::AmbiguousId { .. }), "{e}");
    let planted = want
        .iter()
        .find(|m| m.index.as_ref() == Some(&b.name))
        .unwrap();
    let via_alias = s.by_id(both.as_str(), &planted.id, 3).await.unwrap();
    let via_list = s.by_id(comma.as_str(), &planted.id, 3).await.unwrap();
    assert_eq!(via_alias.matches, via_list.matches);
    assert!(!via_alias.matches.is_empty());
    assert_eq!(
        s.by_id(only_a.as_str(), &base, 3).await.unwrap().matches,
        s.by_id(a.name.as_str(), &base, 3).await.unwrap().matches,
    );
    let e = s.by_id(only_a.as_str(), "no-such-id", 3).await.unwrap_err();
    assert!(matches!(e, EsError::DocumentNotFound { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_candidates_than_a_page_are_all_read() {
    let client = t::client().await;
    let idx = new_index(&client, "similar-pages", BlockType::Short).await;
    // 40 documents sharing block D with the query, 12 of them within distance 3.
    let q = SimHash(0x1234_5678_9ABC_DEF0);
    let mut docs = vec![("query".to_string(), doc_with(&json!({}), q))];
    let mut all = vec![("query".to_string(), q)];
    for i in 0..40u32 {
        let bits: Vec<u32> = if i < 12 {
            (0..i % 4).map(|j| 20 + j * 7 + i % 5).collect()
        } else {
            (0..4 + i % 5).map(|j| 16 + j * 6).collect()
        };
        let f = flip(q, &bits);
        let id = format!("cand-{i:02}");
        docs.push((id.clone(), doc_with(&json!({}), f)));
        all.push((id, f));
    }
    t::load(&client, &idx.name, &docs).await;
    let want = expected(&all, &idx.name, "query", 3);
    assert_eq!(want.len(), 12);
    let pit = t::capabilities(&client, &idx.name).await.pit;
    let paging = if pit { Paging::Pit } else { Paging::Scroll };

    for filter in [FilterMode::Client, FilterMode::Server] {
        let small = similar(&client, filter, 3);
        let found = small.by_id(idx.name.as_str(), "query", 3).await.unwrap();
        assert_eq!(found.matches, want, "{filter}");
        // Point in time where the node has one (8.x, 9.x), scroll where not (the 7.10 node
        // without X-Pack, OpenSearch): detected, remembered, used for every page.
        assert_eq!(found.scan.paging, Some(paging), "{filter}");
        assert!(found.scan.requests > 2, "{:?}", found.scan);
        assert_eq!(small.scanner().pit_supported(), Some(pit));
        let again = small.by_id(idx.name.as_str(), "query", 3).await.unwrap();
        assert_eq!(again.matches, want);

        // One page that holds everything: no scroll at all.
        let big = similar(&client, filter, 1000);
        let found = big.by_id(idx.name.as_str(), "query", 3).await.unwrap();
        assert_eq!(found.matches, want);
        assert_eq!(found.scan.paging, None);
        assert_eq!(found.scan.requests, 1);
    }

    // Forcing a paging method: scroll works everywhere; point in time where the node has it,
    // and elsewhere it fails with the node's answer.
    for forced in [Paging::Scroll, Paging::Pit] {
        let s = Similar::with_options(
            client.clone(),
            fingerprinter(),
            SimilarOptions {
                page_size: 3,
                paging: forced,
                ..SimilarOptions::default()
            },
            RetryPolicy::none(),
        );
        match s.by_id(idx.name.as_str(), "query", 3).await {
            Ok(found) => {
                assert!(forced == Paging::Scroll || pit, "{forced} without PIT");
                assert_eq!(found.matches, want, "{forced}");
                assert_eq!(found.scan.paging, Some(forced));
            }
            Err(e) => {
                assert!(forced == Paging::Pit && !pit, "{forced}: {e}");
                assert!(e.to_string().contains("point in time"), "{e}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_and_new_fingerprints_show_at_once() {
    let client = t::client().await;
    let idx = new_index(&client, "similar-live", BlockType::Short).await;
    let (docs, all) = corpus("", 30, 1);
    t::load(&client, &idx.name, &docs).await;
    let base = all
        .iter()
        .find(|(id, _)| id.ends_with("-planted-d0"))
        .unwrap()
        .0
        .trim_end_matches("-planted-d0")
        .to_owned();
    let base_fp = all.iter().find(|(id, _)| *id == base).unwrap().1;
    let s = similar(&client, FilterMode::Client, 1000);
    let ids = |m: &[Match]| m.iter().map(|m| m.id.clone()).collect::<BTreeSet<_>>();
    let before = ids(&s.by_id(idx.name.as_str(), &base, 3).await.unwrap().matches);
    let d1 = format!("{base}-planted-d1");
    let d2 = format!("{base}-planted-d2");
    let d5 = format!("{base}-planted-d5");
    assert!(before.contains(&d1) && before.contains(&d2) && !before.contains(&d5));

    let write = |id: String, body: Value| {
        let client = client.clone();
        let index = idx.name.clone();
        async move {
            neardup::es::request(
                &client,
                &RetryPolicy::none(),
                "write",
                Method::Post,
                &format!("/{index}/_update/{id}"),
                &[("refresh", "true")],
                Some(&neardup::es::Body::Json(json!({ "doc": body }))),
            )
            .await
            .unwrap();
        }
    };
    // d1 deleted; d2 re-fingerprinted far away; d5 re-fingerprinted at distance 1.
    neardup::es::request(
        &client,
        &RetryPolicy::none(),
        "delete",
        Method::Delete,
        &format!("/{}/_doc/{d1}", idx.name),
        &[("refresh", "true")],
        None,
    )
    .await
    .unwrap();
    let far = SimHash(!base_fp.0);
    write(
        d2.clone(),
        Value::Object(doc_with(&json!({}), far).as_object().unwrap().clone()),
    )
    .await;
    let near = flip(base_fp, &[5]);
    write(
        d5.clone(),
        Value::Object(doc_with(&json!({}), near).as_object().unwrap().clone()),
    )
    .await;

    let after = s.by_id(idx.name.as_str(), &base, 3).await.unwrap();
    let after_ids = ids(&after.matches);
    assert!(!after_ids.contains(&d1), "deleted");
    assert!(!after_ids.contains(&d2), "moved away");
    assert!(
        after
            .matches
            .iter()
            .any(|m| m.id == d5 && m.distance() == Some(1)),
        "moved near"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_without_a_fingerprint_and_free_texts() {
    let client = t::client().await;
    let idx = new_index(&client, "similar-text", BlockType::Short).await;
    let fp = fingerprinter();
    let articles = t::shared_articles(20);
    // Stored with fingerprints, except the first (text only) and a too-short one.
    let mut docs: Vec<(String, Value)> = Vec::new();
    for (i, (id, src)) in articles.iter().enumerate() {
        if i == 0 {
            docs.push((id.clone(), src.clone()));
            continue;
        }
        let f = fp.fingerprint_fields(&[
            src["title"].as_str().unwrap(),
            src["content"].as_str().unwrap(),
        ]);
        if let Ok(f) = f {
            docs.push((id.clone(), doc_with(src, f.simhash)));
        }
    }
    let (id0, src0) = &articles[0];
    let f0 = fp
        .fingerprint_fields(&[
            src0["title"].as_str().unwrap(),
            src0["content"].as_str().unwrap(),
        ])
        .unwrap()
        .simhash;
    docs.push(("copy-of-0".into(), doc_with(&json!({}), flip(f0, &[1, 30]))));
    docs.push((
        "short".into(),
        json!({"title": "快讯", "content": "", "simHashReason": "too_short"}),
    ));
    t::load(&client, &idx.name, &docs).await;
    let s = similar(&client, FilterMode::Client, 1000);

    let found = s.by_id(idx.name.as_str(), id0, 3).await.unwrap();
    assert_eq!(found.query, QueryFingerprint::Computed(Sketch::SimHash(f0)));
    assert!(found
        .matches
        .iter()
        .any(|m| m.id == "copy-of-0" && m.distance() == Some(2)));

    let found = s.by_id(idx.name.as_str(), "short", 3).await.unwrap();
    assert!(
        matches!(found.query, QueryFingerprint::TooShort(_)),
        "{:?}",
        found.query
    );
    assert!(found.matches.is_empty());

    // A text not in the index: the article's own text finds the copy.
    let text = format!(
        "{}\n{}",
        src0["title"].as_str().unwrap(),
        src0["content"].as_str().unwrap()
    );
    let found = s.by_text(idx.name.as_str(), &text, 3).await.unwrap();
    assert!(matches!(found.query, QueryFingerprint::Computed(_)));
    assert!(
        found.matches.iter().any(|m| m.id == "copy-of-0"),
        "{:?}",
        found.matches
    );
    let found = s.by_text(idx.name.as_str(), "快讯", 3).await.unwrap();
    assert!(matches!(found.query, QueryFingerprint::TooShort(_)));

    let found = s.by_fingerprint(idx.name.as_str(), f0, 0).await.unwrap();
    assert!(found.matches.is_empty(), "{:?}", found.matches);
    let found = s
        .by_fingerprint(idx.name.as_str(), flip(f0, &[1, 30]), 0)
        .await
        .unwrap();
    assert_eq!(found.matches.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indices_of_the_older_java_service_work_with_both_filters() {
    // Four `short` blocks without doc values, no `long`, no version: as the Java service left
    // them. Candidates are read from `_source` (the four fields only).
    let client = t::client().await;
    let idx = TestIndex::new("similar-java");
    t::create_index(&client, &idx.name, t::java_blocks()).await;
    let q = SimHash(0xA5A5_0F0F_1234_8001);
    let blocks = |f: SimHash| {
        let [a, b, c, d] = f.blocks16();
        json!({"simHashA": a, "simHashB": b, "simHashC": c, "simHashD": d})
    };
    let docs = vec![
        ("q".to_string(), blocks(q)),
        ("near".to_string(), blocks(flip(q, &[0, 17, 40]))),
        ("far".to_string(), blocks(flip(q, &[48, 49, 50, 51]))),
    ];
    t::load(&client, &idx.name, &docs).await;
    for filter in [FilterMode::Client, FilterMode::Server] {
        // Without painless the server filter is refused once and the client filter answers.
        let found = similar(&client, filter, 1000)
            .by_id(idx.name.as_str(), "q", 3)
            .await
            .unwrap();
        assert_eq!(
            found.matches,
            vec![Match::in_index("near", &idx.name, Score::Distance(3))],
            "{filter}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_to_do() {
    let client = t::client().await;
    let idx = new_index(&client, "similar-errors", BlockType::Short).await;
    let q = SimHash(42);
    t::load(&client, &idx.name, &[("a".into(), doc_with(&json!({}), q))]).await;
    let s = similar(&client, FilterMode::Client, 1000);

    let e = s
        .by_id("neardup-test-no-such-index", "a", 3)
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::IndexNotFound { .. }), "{e}");
    let e = s.by_id(idx.name.as_str(), "nope", 3).await.unwrap_err();
    assert!(matches!(e, EsError::DocumentNotFound { .. }), "{e}");
    let e = s.by_id(idx.name.as_str(), "a", 8).await.unwrap_err();
    assert!(e.to_string().contains("k ≤ 7"), "{e}");

    let bare = TestIndex::new("similar-bare");
    t::load(
        &client,
        &bare.name,
        &[("x".into(), json!({"title": "no fingerprint fields"}))],
    )
    .await;
    let e = s.by_id(bare.name.as_str(), "x", 3).await.unwrap_err();
    assert!(matches!(e, EsError::NotInitialised { .. }), "{e}");
    assert!(e.to_string().contains("neardup es-init"), "{e}");

    // A block that is not a number (hand-written into a `keyword` block) breaks the script
    // (and a node without painless refuses it): the query falls back to the client-side
    // filter for good, and that names the document.
    let kw = new_index(&client, "similar-badblock", BlockType::Keyword).await;
    let [_, b, c, d] = q.blocks16();
    t::load(
        &client,
        &kw.name,
        &[(
            "bad".into(),
            json!({"simHashA": "abc", "simHashB": b, "simHashC": c, "simHashD": d}),
        )],
    )
    .await;
    let server = similar(&client, FilterMode::Server, 1000);
    let e = server
        .by_fingerprint(kw.name.as_str(), q, 3)
        .await
        .unwrap_err();
    assert_eq!(server.effective_filter(), FilterMode::Client, "{e:?}");
    assert!(e.to_string().contains("document `bad`"), "{e}");

    let nowhere = neardup::es::EsConfig::new("http://127.0.0.1:1")
        .unwrap()
        .client()
        .unwrap();
    let e = similar(&nowhere, FilterMode::Client, 10)
        .by_id("x", "y", 3)
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::Unreachable { .. }), "{e}");
}

/// An index holding both methods, as `es-init` makes it by default.
async fn new_both_index(client: &elasticsearch::Elasticsearch, prefix: &str) -> TestIndex {
    t::initialised(client, prefix, &both_meta()).await
}

fn both_meta() -> IndexMeta {
    IndexMeta::default()
}

fn texts(src: &Value) -> [&str; 2] {
    [
        src["title"].as_str().unwrap_or(""),
        src["content"].as_str().unwrap_or(""),
    ]
}

/// `src` with both methods' fields, as a writer of both makes them for `meta` (its MinHash
/// layout); and its whole signature.
fn doc_both(src: &Value, meta: &IndexMeta) -> (Value, Option<Signature>) {
    let fp = fingerprinter();
    let mut doc = src.clone();
    let sh = fp.fingerprint_fields(&texts(src));
    doc.as_object_mut().unwrap().extend(simhash_fields_json(
        &FieldNames::default(),
        &sh,
        fp.version(),
    ));
    let mh = fp.minhash_fields(&texts(src));
    doc.as_object_mut()
        .unwrap()
        .extend(minhash_fields_json(meta.minhash.as_ref().unwrap(), &mh));
    (doc, mh.ok().map(|f| f.signature))
}

/// The first `n` characters of a text.
fn prefix(s: &str, share: f64) -> String {
    let n = s.chars().count();
    s.chars().take((n as f64 * share) as usize).collect()
}

/// Real articles, and for the first `bases` of them edited copies at several similarities
/// (shortened, halved, spliced with the next article), plus one copy stored without
/// fingerprint fields. Returns the documents and every stored `(id, signature)`.
fn minhash_corpus(
    articles: usize,
    bases: usize,
    meta: &IndexMeta,
) -> (Docs, Vec<(String, Signature)>, Vec<String>) {
    let all_articles = t::shared_articles(articles);
    let mut docs = Vec::new();
    let mut sigs = Vec::new();
    let mut base_ids = Vec::new();
    let mut push = |id: String, src: Value, docs: &mut Docs| {
        let (doc, sig) = doc_both(&src, meta);
        if let Some(sig) = sig {
            sigs.push((id.clone(), sig));
        }
        docs.push((id, doc));
    };
    for (i, (id, src)) in all_articles.iter().enumerate() {
        push(id.clone(), src.clone(), &mut docs);
        if i < bases {
            base_ids.push(id.clone());
            let content = src["content"].as_str().unwrap_or("");
            let next = all_articles[(i + 1) % all_articles.len()].1["content"]
                .as_str()
                .unwrap_or("");
            for (tag, body) in [
                ("cut", prefix(content, 0.8)),
                ("half", prefix(content, 0.45)),
                (
                    "mix",
                    format!("{}{}", prefix(content, 0.5), prefix(next, 0.5)),
                ),
            ] {
                push(
                    format!("{id}-{tag}"),
                    json!({ "title": src["title"], "content": body }),
                    &mut docs,
                );
            }
        }
    }
    (docs, sigs, base_ids)
}

/// Every stored document sharing a band term with `q` and within `t`, by brute force, in
/// `layout` (its terms, and its signature bits: agreements of the lowest bits, corrected for
/// chance, Li & König); `exclude` left out.
fn expected_minhash(
    sigs: &[(String, Signature)],
    index: &str,
    q: &Signature,
    t: f64,
    exclude: Option<&str>,
    layout: MinHashLayout,
) -> Vec<Match> {
    let params = MinHashParams::DEFAULT;
    let terms = |s: &Signature| -> BTreeSet<String> {
        s.band_keys(&params)
            .into_iter()
            .map(|k| layout.band_term(k))
            .collect()
    };
    let bands = terms(q);
    let query = Sketch::MinHash(q.clone());
    let bits = layout.signature_bits();
    let mut m: Vec<Match> = sigs
        .iter()
        .filter(|(id, _)| Some(id.as_str()) != exclude)
        .filter(|(_, s)| !terms(s).is_disjoint(&bands))
        .filter_map(|(id, s)| {
            let stored: Vec<u32> = s
                .values()
                .iter()
                .map(|v| {
                    if bits == 32 {
                        *v
                    } else {
                        v & ((1 << bits) - 1)
                    }
                })
                .collect();
            let stored = if bits == 32 {
                Signature::from_values(stored)
            } else {
                Signature::from_reduced_values(stored, bits)
            };
            query
                .score(&Sketch::MinHash(stored), Tolerance::similarity(t).unwrap())
                .map(|score| Match::in_index(id, index, score))
        })
        .collect();
    sort_matches(&mut m);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_finds_exactly_the_brute_force_answer_with_both_filters() {
    minhash_brute_force(MinHashLayout::NEW).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_in_the_full_layout_finds_exactly_the_brute_force_answer() {
    minhash_brute_force(MinHashLayout::Full).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_with_4_bit_minima_finds_exactly_the_brute_force_answer() {
    minhash_brute_force(MinHashLayout::Compact { signature_bits: 4 }).await;
}

async fn minhash_brute_force(layout: MinHashLayout) {
    let client = t::client().await;
    let meta = both_meta().with_layout(layout);
    let idx = t::initialised(&client, "similar-minhash", &meta).await;
    let (mut docs, sigs, bases) = minhash_corpus(150, 8, &meta);
    // A copy stored with its text only (no bands, so never a candidate): its signature is
    // computed when it is the query.
    let (first, first_src) = &t::shared_articles(1)[0];
    docs.push(("text-only".into(), first_src.clone()));
    t::load(&client, &idx.name, &docs).await;
    let painless = t::capabilities(&client, &idx.name).await.painless;
    let sig_of = |id: &str| sigs.iter().find(|(i, _)| i == id).unwrap().1.clone();

    let mut transferred = [0u64; 2];
    let mut found_any = 0;
    for (f, filter) in [FilterMode::Client, FilterMode::Server]
        .into_iter()
        .enumerate()
    {
        let s = similar(&client, filter, 1000);
        assert_eq!(
            s.default_tolerance(idx.name.as_str()).await.unwrap(),
            Tolerance::Similarity(neardup::minhash::DEFAULT_THRESHOLD)
        );
        for t in [0.3, 0.5, 0.8] {
            for base in &bases {
                let found = s
                    .by_id(idx.name.as_str(), base, Tolerance::similarity(t).unwrap())
                    .await
                    .unwrap();
                // The stored signature is the query (the compact layout's lowest bits, with
                // its stored band terms).
                assert_eq!(
                    found.query,
                    QueryFingerprint::Stored(Sketch::MinHash(
                        sig_of(base).reduced(layout.signature_bits())
                    ))
                );
                let want = expected_minhash(&sigs, &idx.name, &sig_of(base), t, Some(base), layout);
                assert_eq!(found.matches, want, "{filter} t={t} base {base}");
                assert!(found.matches.iter().all(|m| m.similarity().is_some()));
                transferred[f] += found.transferred;
                found_any += found.matches.len();
            }
        }
        // The edited copies are near their base at 0.3.
        let found = s
            .by_id(
                idx.name.as_str(),
                &bases[0],
                Tolerance::similarity(0.3).unwrap(),
            )
            .await
            .unwrap();
        let ids: BTreeSet<&str> = found.matches.iter().map(|m| m.id.as_str()).collect();
        let cut = format!("{}-cut", bases[0]);
        assert!(ids.contains(cut.as_str()), "{ids:?}");

        // The text-only document: computed now, with the indices' fingerprinter.
        let found = s
            .by_id(
                idx.name.as_str(),
                "text-only",
                Tolerance::similarity(0.3).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            found.query,
            QueryFingerprint::Computed(Sketch::MinHash(sig_of(first)))
        );
        assert_eq!(
            found.matches,
            expected_minhash(&sigs, &idx.name, &sig_of(first), 0.3, None, layout)
        );
        assert!(found
            .matches
            .iter()
            .any(|m| &m.id == first && m.similarity() == Some(1.0)));

        // A free text and a given signature: the same answer, the article itself included.
        let text = format!("{}\n{}", texts(first_src)[0], texts(first_src)[1]);
        let want = expected_minhash(&sigs, &idx.name, &sig_of(first), 0.3, None, layout);
        let by_text = s
            .by_text(
                idx.name.as_str(),
                &text,
                Tolerance::similarity(0.3).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(by_text.matches, want);
        let by_sig = s
            .by_fingerprint(
                idx.name.as_str(),
                sig_of(first),
                Tolerance::similarity(0.3).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(by_sig.matches, want);

        // The same index answers SimHash queries when asked.
        let found = s.by_id(idx.name.as_str(), &bases[0], 3).await.unwrap();
        assert!(matches!(
            found.query,
            QueryFingerprint::Stored(Sketch::SimHash(_))
        ));
        assert!(found.matches.iter().all(|m| m.distance().is_some()));

        let effective = if filter == FilterMode::Server && painless {
            FilterMode::Server
        } else {
            FilterMode::Client
        };
        assert_eq!(
            s.effective_filter(),
            effective,
            "{filter}, painless {painless}"
        );
    }
    assert!(found_any > bases.len(), "the copies are found");
    // Server-side, only matches (and the query document) cross the network.
    if painless {
        assert!(transferred[1] < transferred[0], "{transferred:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprints_of_another_version_are_never_compared() {
    let client = t::client().await;
    let idx = new_both_index(&client, "similar-versions").await;
    let (docs, _, bases) = minhash_corpus(5, 1, &both_meta());
    t::load(&client, &idx.name, &docs).await;

    // A fingerprinter of another profile is refused, naming both versions.
    let seed = Fingerprinter::for_profile(Profile::Seed000);
    let s = Similar::with_options(
        client.clone(),
        seed.clone(),
        SimilarOptions::default(),
        RetryPolicy::none(),
    );
    let e = s.by_id(idx.name.as_str(), &bases[0], 3).await.unwrap_err();
    assert!(matches!(e, EsError::VersionMismatch { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(seed.version()) && msg.contains(fingerprinter().version()),
        "{msg}"
    );

    // An index recording a version this neardup does not compute.
    let mut meta = both_meta();
    meta.minhash.as_mut().unwrap().version = "minhash-0;from-the-future".into();
    let odd = t::initialised(&client, "similar-odd-version", &meta).await;
    t::load(&client, &odd.name, &docs).await;
    let e = similar(&client, FilterMode::Client, 1000)
        .by_id(
            odd.name.as_str(),
            &bases[0],
            Tolerance::similarity(0.3).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::VersionMismatch { .. }), "{e}");
    assert!(e.to_string().contains("minhash-0;from-the-future"), "{e}");

    // A SimHash-only index has no MinHash to query.
    let sim = new_index(&client, "similar-simhash-only", BlockType::Short).await;
    let e = similar(&client, FilterMode::Client, 1000)
        .by_id(sim.name.as_str(), "x", Tolerance::similarity(0.3).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            EsError::MethodNotHeld {
                held: neardup::Method::SimHash,
                asked: neardup::Method::MinHash,
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_indices_without_meta_are_seed000() {
    // The older Java service's layout: four `short` blocks, no `_meta`, seed000 fingerprints.
    let client = t::client().await;
    let idx = TestIndex::new("similar-legacy");
    t::create_index(&client, &idx.name, t::java_blocks()).await;
    let seed = Fingerprinter::for_profile(Profile::Seed000);
    let mut docs = Vec::new();
    let mut fps = Vec::new();
    for (id, src) in t::shared_articles(30) {
        let Ok(f) = seed.fingerprint_fields(&texts(&src)) else {
            continue;
        };
        let [a, b, c, d] = f.simhash.blocks16();
        let mut doc = src.clone();
        doc.as_object_mut().unwrap().extend(
            json!({"simHashA": a, "simHashB": b, "simHashC": c, "simHashD": d})
                .as_object()
                .unwrap()
                .clone(),
        );
        docs.push((id.clone(), doc));
        fps.push((id, f.simhash, src));
    }
    t::load(&client, &idx.name, &docs).await;
    let (id0, f0, src0) = &fps[0];
    for filter in [FilterMode::Client, FilterMode::Server] {
        let s = similar(&client, filter, 1000);
        assert_eq!(
            s.default_tolerance(idx.name.as_str()).await.unwrap(),
            Tolerance::Distance(3)
        );
        let text = format!("{}\n{}", texts(src0)[0], texts(src0)[1]);
        let found = s.by_text(idx.name.as_str(), &text, 0).await.unwrap();
        assert_eq!(
            found.query,
            QueryFingerprint::Computed(Sketch::SimHash(*f0))
        );
        assert!(
            found
                .matches
                .iter()
                .any(|m| &m.id == id0 && m.distance() == Some(0)),
            "{filter}: the seed000 fingerprint of the text is the stored one"
        );
        let found = s.by_id(idx.name.as_str(), id0, 7).await.unwrap();
        assert_eq!(found.query, QueryFingerprint::Stored(Sketch::SimHash(*f0)));
        let all: Vec<(String, SimHash)> = fps.iter().map(|(i, f, _)| (i.clone(), *f)).collect();
        assert_eq!(found.matches, expected(&all, &idx.name, id0, 7), "{filter}");
    }
}

/// xorshift64*: a seeded generator for test fingerprints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simhash_up_to_k_seven_is_exactly_the_brute_force_answer() {
    let client = t::client().await;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let q = SimHash(rng.next());
    let mut all = vec![("query".to_string(), q)];
    for i in 0..600u32 {
        let f = match i % 3 {
            // 0..=10 bits flipped anywhere.
            0 => {
                let n = rng.next() % 11;
                flip(
                    q,
                    &(0..n).map(|_| (rng.next() % 64) as u32).collect::<Vec<_>>(),
                )
            }
            // 2..=9 bits flipped, all within two blocks: the other two stay whole, so these
            // are candidates the exact distance must decide on.
            1 => {
                let base = 16 * (rng.next() % 3) as u32;
                let n = 2 + rng.next() % 8;
                flip(
                    q,
                    &(0..n)
                        .map(|_| base + (rng.next() % 32) as u32)
                        .collect::<Vec<_>>(),
                )
            }
            // One bit in every block, plus some: each block is within distance 1.
            _ => {
                let mut bits: Vec<u32> =
                    (0..4).map(|b| b * 16 + (rng.next() % 16) as u32).collect();
                bits.extend((0..rng.next() % 5).map(|_| (rng.next() % 64) as u32));
                flip(q, &bits)
            }
        };
        all.push((format!("doc-{i:03}"), f));
    }
    for bt in BlockType::ALL {
        let idx = new_index(&client, "similar-k7", bt).await;
        let docs: Docs = all
            .iter()
            .map(|(id, f)| (id.clone(), doc_with(&json!({}), *f)))
            .collect();
        t::load(&client, &idx.name, &docs).await;
        let painless = t::capabilities(&client, &idx.name).await.painless;
        // Candidates read per k with the client filter (every candidate crosses the network).
        let mut candidates = [0u64; 8];
        for filter in [FilterMode::Client, FilterMode::Server] {
            let s = similar(&client, filter, 200);
            for k in 0..=7 {
                let want = expected(&all, &idx.name, "query", k);
                let found = s.by_id(idx.name.as_str(), "query", k).await.unwrap();
                assert_eq!(found.matches, want, "{bt} {filter} k={k}");
                let given = s.by_fingerprint(idx.name.as_str(), q, k).await.unwrap();
                assert_eq!(given.matches.len(), want.len() + 1, "{bt} {filter} k={k}");
                match filter {
                    // Only the matches cross the network: the query leaves its document
                    // out, and the script every other candidate.
                    FilterMode::Server if painless => {
                        assert_eq!(found.transferred, want.len() as u64, "{bt} k={k}")
                    }
                    FilterMode::Server => {}
                    FilterMode::Client => candidates[k as usize] = found.transferred,
                }
            }
        }
        // Measured (`--nocapture` shows them): one probe set for k ≤ 3, a wider one above.
        eprintln!("{bt}: candidates read for k = 0..=7: {candidates:?}");
        assert!(
            candidates[..4].windows(2).all(|w| w[0] == w[1]),
            "{candidates:?}"
        );
        assert!(
            candidates[4..].windows(2).all(|w| w[0] == w[1]),
            "{candidates:?}"
        );
        assert!(candidates[3] < candidates[4], "{candidates:?}");
    }
}

#[test]
fn the_cli_prints_matches_and_one_line_errors() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(t::client());
    let idx = rt.block_on(new_index(&client, "similar-cli", BlockType::Short));
    let (src_id, src) = t::shared_articles(1).remove(0);
    let f = fingerprinter()
        .fingerprint_fields(&[
            src["title"].as_str().unwrap(),
            src["content"].as_str().unwrap(),
        ])
        .unwrap()
        .simhash;
    let docs = vec![
        (src_id.clone(), doc_with(&src, f)),
        ("b-copy".to_string(), doc_with(&json!({}), flip(f, &[3]))),
        ("a-copy".to_string(), doc_with(&json!({}), flip(f, &[9]))),
        ("copy2".to_string(), doc_with(&json!({}), flip(f, &[3, 20]))),
        ("short".to_string(), json!({"title": "快讯"})),
    ];
    rt.block_on(t::load(&client, &idx.name, &docs));
    let url = t::url();
    let base = [
        "similar",
        "--es",
        url.as_str(),
        "--index",
        idx.name.as_str(),
    ];
    let run = |extra: &[&str], stdin: &[u8]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        common::neardup(&args, stdin)
    };

    let (code, out, err) = run(&["--id", &src_id], b"");
    assert_eq!(code, 0, "{err}");
    let lines = common::json_lines(&out);
    let got: Vec<(String, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_owned(),
                l["distance"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a-copy".into(), 1),
            ("b-copy".into(), 1),
            ("copy2".into(), 2)
        ]
    );
    assert_eq!(lines[0]["index"], idx.name.as_str());

    let (code, out, _) = run(
        &[
            "--id", &src_id, "-k", "1", "--filter", "server", "--format", "table",
        ],
        b"",
    );
    assert_eq!(code, 0);
    assert!(out.starts_with("2 matches within distance 1"), "{out}");
    assert!(out.contains("a-copy") && !out.contains("copy2"), "{out}");

    // --input is one JSON Lines article, as on a local store: its own id is left out.
    let article = json!({"id": "draft", "title": src["title"], "content": src["content"]});
    let (code, out, err) = run(&["--input", "-"], format!("{article}\n").as_bytes());
    assert_eq!(code, 0, "{err}");
    let ids: Vec<Value> = common::json_lines(&out)
        .iter()
        .map(|l| l["id"].clone())
        .collect();
    assert!(
        ids.contains(&json!(src_id)) && ids.contains(&json!("a-copy")),
        "{out}"
    );
    let (code, out, _) = run(&["--fingerprint", &f.to_hex(), "-k", "0"], b"");
    assert_eq!((code, common::json_lines(&out).len()), (0, 1));

    let (code, out, _) = run(
        &["--input", "-"],
        format!(
            "{}\n",
            json!({"id": src_id, "title": src["title"], "content": src["content"]})
        )
        .as_bytes(),
    );
    assert_eq!(code, 0);
    assert!(
        !out.contains(&format!("\"{src_id}\"")),
        "its own id is left out: {out}"
    );

    let short_article = b"{\"id\": \"s\", \"title\": \"\xe5\xbf\xab\xe8\xae\xaf\"}\n";
    for (extra, stdin, code_want, needle) in [
        (vec!["--id", "short"], &b""[..], 4, "too short"),
        (vec!["--text", "快讯"], b"", 4, "too short"),
        (vec!["--input", "-"], short_article, 4, "too short"),
        (vec!["--id", "nope"], b"", 1, "no document with id `nope`"),
        (vec!["--id", &src_id, "-k", "8"], b"", 2, "at most 7"),
        (
            vec!["--id", &src_id, "--max-distance", "8"],
            b"",
            2,
            "within one bit",
        ),
    ] {
        let (code, out, err) = run(&extra, stdin);
        assert_eq!(code, code_want, "{extra:?}: {err}");
        assert!(out.is_empty());
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    let (code, _, err) = common::neardup(
        &[
            "similar",
            "--es",
            url.as_str(),
            "--index",
            "neardup-test-missing",
            "--id",
            "x",
        ],
        b"",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("does not exist") && err.trim_end().lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = common::neardup(
        &[
            "similar",
            "--es",
            url.as_str(),
            "--index",
            "neardup-test-nomatch-*",
            "--id",
            "x",
        ],
        b"",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("no index matches `neardup-test-nomatch-*`") && !err.contains("{}"),
        "{err}"
    );
    let (code, _, err) = common::neardup(
        &[
            "similar",
            "--es",
            "http://127.0.0.1:1",
            "--index",
            "x",
            "--id",
            "x",
        ],
        b"",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot reach Elasticsearch") && err.trim_end().lines().count() == 1,
        "{err}"
    );
    let (code, _, _) = common::neardup(&["similar", "--es", url.as_str(), "--index", "x"], b"");
    assert_eq!(
        code, 2,
        "one of --id, --text, --input, --fingerprint is required"
    );
}

#[test]
fn the_cli_uses_the_indices_method_and_looks_up_many_ids() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(t::client());
    let idx = rt.block_on(new_both_index(&client, "similar-cli-minhash"));
    let (docs, _, bases) = minhash_corpus(40, 3, &both_meta());
    rt.block_on(t::load(&client, &idx.name, &docs));
    let url = t::url();
    let base = [
        "similar",
        "--es",
        url.as_str(),
        "--index",
        idx.name.as_str(),
    ];
    let run = |extra: &[&str], stdin: &[u8]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        common::neardup(&args, stdin)
    };
    let library = Similar::with_options(
        client.clone(),
        None,
        SimilarOptions::default(),
        RetryPolicy::none(),
    );
    let answer = |id: &str, tolerance: Tolerance| {
        let found = rt
            .block_on(library.by_id(
                idx.name.as_str(),
                id,
                neardup::es::Near::new(tolerance, neardup::relation::MatchOptions::default()),
            ))
            .unwrap();
        serde_json::to_value(&found.matches).unwrap()
    };

    // MinHash by default (the index holds it): `similarity`, as the library answers.
    let (code, out, err) = run(&["--id", &bases[0]], b"");
    assert_eq!(code, 0, "{err}");
    let lines = common::json_lines(&out);
    assert!(!lines.is_empty() && lines.iter().all(|l| l["similarity"].is_number()));
    assert_eq!(
        Value::Array(lines),
        answer(&bases[0], Tolerance::similarity(0.3).unwrap())
    );
    // -k asks for SimHash on the same index, --threshold for another threshold.
    let (code, out, _) = run(&["--id", &bases[0], "-k", "7"], b"");
    assert_eq!(code, 0);
    assert!(common::json_lines(&out)
        .iter()
        .all(|l| l["distance"].is_number()));
    let (code, out, _) = run(
        &["--id", &bases[0], "--threshold", "0.9", "--format", "table"],
        b"",
    );
    assert_eq!(code, 0);
    assert!(out.contains("with similarity ≥ 0.9"), "{out}");

    // Many ids over one connection: one line per id, in order, a missing one as its error.
    let stdin = format!("{}\nnope\n\n{}\n", bases[0], bases[1]);
    let (code, out, err) = run(&["--ids-from", "-"], stdin.as_bytes());
    assert_eq!(code, 3, "exit 3: some ids failed: {err}");
    let lines = common::json_lines(&out);
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0]["id"], bases[0].as_str());
    assert_eq!(
        lines[0]["matches"],
        answer(&bases[0], Tolerance::similarity(0.3).unwrap())
    );
    assert_eq!(lines[1]["id"], "nope");
    assert!(
        lines[1]["error"]
            .as_str()
            .unwrap()
            .contains("no document with id `nope`"),
        "{out}"
    );
    assert_eq!(
        lines[2]["matches"],
        answer(&bases[1], Tolerance::similarity(0.3).unwrap())
    );
    let ids = std::env::temp_dir().join(format!("neardup-ids-{}", std::process::id()));
    std::fs::write(&ids, format!("{}\n{}\n", bases[1], bases[2])).unwrap();
    let (code, out, err) = run(
        &[
            "--ids-from",
            ids.to_str().unwrap(),
            "--method",
            "simhash",
            "-k",
            "5",
        ],
        b"",
    );
    std::fs::remove_file(&ids).unwrap();
    assert_eq!(code, 0, "{err}");
    let lines = common::json_lines(&out);
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1]["matches"],
        answer(&bases[2], Tolerance::Distance(5))
    );

    // --profile is read from the index; one that disagrees is a usage error naming both.
    let (code, _, err) = run(&["--id", &bases[0], "--profile", "default"], b"");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&["--id", &bases[0], "--profile", "seed000"], b"");
    assert_eq!(code, 2, "{err}");
    let seed = Fingerprinter::for_profile(Profile::Seed000);
    assert!(
        err.contains(seed.version()) && err.contains(fingerprinter().version()),
        "{err}"
    );
    // A SimHash fingerprint needs the SimHash method.
    let (code, _, err) = run(&["--fingerprint", "0123456789abcdef"], b"");
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["--fingerprint", "0123456789abcdef", "-k", "2"], b"");
    assert_eq!(code, 0, "{err}");
}

/// `--es-compress` (gzipped requests, gzipped answers asked for) writes and finds what a
/// plain client does: a gzipped bulk load, a back-fill, and `similar --id` of every article
/// through the command line, with and without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressing_client_writes_and_finds_what_a_plain_one_does() {
    let plain = t::client().await;
    let gzip = EsConfig {
        compression: true,
        ..EsConfig::new(&t::url()).unwrap()
    }
    .client()
    .unwrap();
    let idx = t::initialised(&plain, "similar-gzip", &IndexMeta::default()).await;
    let articles = t::example_articles();
    t::load(&gzip, &idx.name, &articles).await;
    common::backfill_with(&plain, &idx.name, &["--es-compress"]).await;
    let url = t::url();
    let mut found = 0;
    for (id, _) in &articles {
        let lookup = |extra: &[&str]| {
            let mut args = vec!["similar", "--es", &url, "--index", &idx.name, "--id", id];
            args.extend_from_slice(extra);
            common::neardup(&args, b"")
        };
        let (code, out, err) = lookup(&[]);
        assert!(code == 0 || code == 4, "{id}: {err}");
        let (gz_code, gz_out, gz_err) = lookup(&["--es-compress"]);
        assert_eq!((gz_code, &gz_out), (code, &out), "{id}: {gz_err}");
        found += common::json_lines(&out).len();
    }
    assert!(
        found > 0,
        "the examples hold near-duplicates and partial copies"
    );
}

/// A red index (shards without a copy) read with a green one: Elasticsearch answers a
/// lookup's searches with the green index's hits and a multi-get with an `error` in place of
/// each red document, all with 200. None of that is a short answer here: a lookup by id, by
/// text, and a read of stored articles by id (what dedupe on insert does) are errors that
/// name the shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_index_is_an_error_never_a_short_answer() {
    let client = t::client().await;
    let meta = both_meta();
    let idx = new_both_index(&client, "similar-green").await;
    let articles = t::shared_articles(30);
    let docs: Docs = articles
        .iter()
        .map(|(id, src)| (id.clone(), doc_both(src, &meta).0))
        .collect();
    t::load(&client, &idx.name, &docs).await;
    let mapping = t::call(
        &client,
        Method::Get,
        &format!("/{}/_mapping", idx.name),
        None,
    )
    .await;
    let red = TestIndex::new("similar-red");
    t::create_red_index(
        &client,
        &red.name,
        json!({ "mappings": mapping[&idx.name]["mappings"] }),
    )
    .await;
    let both = format!("{},{}", idx.name, red.name);
    let s = similar(&client, FilterMode::Server, 1000);
    let near = Tolerance::Similarity(neardup::minhash::DEFAULT_THRESHOLD);
    let (id, src) = &articles[0];
    s.by_id(idx.name.as_str(), id, near).await.unwrap();

    let shard_failed = |e: EsError| assert!(e.to_string().contains("shard(s) failed"), "{e}");
    shard_failed(s.by_id(both.as_str(), id, near).await.unwrap_err());
    let [title, content] = texts(src);
    let text = format!("{title}\n{content}");
    shard_failed(s.by_text(both.as_str(), &text, near).await.unwrap_err());
    let ids: Vec<String> = docs.iter().map(|(id, _)| id.clone()).collect();
    let sig = doc_both(src, &meta).1.expect("a signature");
    let e = s
        .among_ids(&red.name, &ids, &[Sketch::MinHash(sig)], near)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("documents could not be read"), "{e}");
    assert!(e.to_string().contains("no_shard_available"), "{e}");
}

//! `init_index` (`neardup es-init`) against a live node: new index, existing index with
//! articles, conflicting mapping, `_meta` (what the index holds) written and read back.

use crate::common;

use common::es::{self as t, TestIndex};
use elasticsearch::http::Method;
use neardup::es::{
    existing_profile, init_index, read_meta, verify_index, BlockType, EsError, FieldNames,
    IndexMeta, InitOutcome, MetaSource, MinHashFieldNames, RetryPolicy,
};
use neardup::{FingerprintConfig, Methods, Profile};
use serde_json::json;

async fn field_types(client: &elasticsearch::Elasticsearch, index: &str) -> serde_json::Value {
    let m = t::call(client, Method::Get, &format!("/{index}/_mapping"), None).await;
    m[index]["mappings"]["properties"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_a_new_index_with_the_fields_and_is_idempotent() {
    let client = t::client().await;
    let idx = TestIndex::new("init-new");
    let names = FieldNames::default();
    let retry = RetryPolicy::none();

    let r = init_index(
        &client,
        &retry,
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, names.clone()),
    )
    .await
    .unwrap();
    assert_eq!(r, InitOutcome::Created);
    let props = field_types(&client, &idx.name).await;
    for b in ["simHashA", "simHashB", "simHashC", "simHashD"] {
        assert_eq!(props[b]["type"], "short", "{b}: {props}");
    }
    assert_eq!(props["simHash"]["type"], "long");
    assert_eq!(props["simHashVersion"]["type"], "keyword");
    assert_eq!(props["simHashReason"]["type"], "keyword");

    let again = init_index(
        &client,
        &retry,
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, names.clone()),
    )
    .await
    .unwrap();
    assert_eq!(again, InitOutcome::Unchanged);
    let held = verify_index(&client, &retry, &idx.name, &names)
        .await
        .unwrap();
    assert_eq!(held.simhash.unwrap().block_type, BlockType::Short);
    assert!(held.minhash.is_none());

    // The keyword variant on the same (short) index is a conflict that names the fix.
    let e = init_index(
        &client,
        &retry,
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Keyword, names.clone()),
    )
    .await
    .unwrap_err();
    match &e {
        EsError::MappingConflict {
            field,
            existing,
            wanted,
            ..
        } => {
            assert_eq!(
                (field.as_str(), existing.as_str(), wanted.as_str()),
                ("simHashA", "short", "keyword")
            );
        }
        other => panic!("expected a mapping conflict, got {other:?}"),
    }
    assert!(e.to_string().contains("--block-type short"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_the_fields_to_an_existing_index_with_articles() {
    let client = t::client().await;
    let idx = TestIndex::new("init-existing");
    t::create_index(
        &client,
        &idx.name,
        json!({
            "title": {"type": "text"},
            "content": {"type": "text"},
            // already there, as the older Java service left it: kept as it is
            "simHashA": {"type": "short", "doc_values": false}
        }),
    )
    .await;
    let articles = t::example_articles();
    t::load(&client, &idx.name, &articles).await;
    let retry = RetryPolicy::none();
    let names = FieldNames::default();

    // Not initialised yet: writers refuse with a message naming es-init.
    let e = verify_index(&client, &retry, &idx.name, &names)
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::NotInitialised { .. }), "{e:?}");
    assert!(e.to_string().contains("neardup es-init"), "{e}");

    let r = init_index(
        &client,
        &retry,
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, names.clone()),
    )
    .await
    .unwrap();
    let mut added = match r {
        InitOutcome::Added { fields, meta: true } => fields,
        other => panic!("expected Added, got {other:?}"),
    };
    added.sort();
    assert_eq!(
        added,
        [
            "simHash",
            "simHashB",
            "simHashC",
            "simHashD",
            "simHashReason",
            "simHashVersion"
        ]
    );
    let props = field_types(&client, &idx.name).await;
    assert_eq!(
        props["simHashA"]["doc_values"], false,
        "existing field left alone: {props}"
    );
    assert_eq!(props["title"]["type"], "text");
    assert_eq!(t::count(&client, &idx.name).await, articles.len() as u64);
    let (src, _) = t::get(&client, &idx.name, "ex-001").await;
    assert_eq!(src, articles[0].1);

    let again = init_index(
        &client,
        &retry,
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, names.clone()),
    )
    .await
    .unwrap();
    assert_eq!(again, InitOutcome::Unchanged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_mapping_is_a_clear_error_and_changes_nothing() {
    let client = t::client().await;
    let idx = TestIndex::new("init-conflict");
    t::create_index(
        &client,
        &idx.name,
        json!({
            "content": {"type": "text"},
            "simHashVersion": {"type": "text"}
        }),
    )
    .await;
    let e = init_index(
        &client,
        &RetryPolicy::none(),
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default()),
    )
    .await
    .unwrap_err();
    match &e {
        EsError::MappingConflict {
            index,
            field,
            existing,
            wanted,
            ..
        } => {
            assert_eq!(index, &idx.name);
            assert_eq!(
                (field.as_str(), existing.as_str(), wanted.as_str()),
                ("simHashVersion", "text", "keyword")
            );
        }
        other => panic!("expected a mapping conflict, got {other:?}"),
    }
    assert!(e.to_string().contains("--version-field"), "{e}");
    let props = field_types(&client, &idx.name).await;
    assert!(
        props.get("simHashA").is_none(),
        "nothing added on conflict: {props}"
    );

    // Other names avoid the clash.
    let names = FieldNames {
        version: "fpVersion".into(),
        ..FieldNames::default()
    };
    let r = init_index(
        &client,
        &RetryPolicy::none(),
        &idx.name,
        &IndexMeta::simhash(Profile::Default, BlockType::Keyword, names.clone()),
    )
    .await
    .unwrap();
    assert!(
        matches!(r, InitOutcome::Added { ref fields, meta: true } if fields.len() == 7),
        "{r:?}"
    );
    assert_eq!(
        field_types(&client, &idx.name).await["simHashB"]["type"],
        "keyword"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_index_and_an_unreachable_node_say_what_to_do() {
    let client = t::client().await;
    let e = verify_index(
        &client,
        &RetryPolicy::none(),
        &t::unique_name("absent"),
        &FieldNames::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, EsError::IndexNotFound { .. }), "{e:?}");
    assert!(e.to_string().contains("es-init"), "{e}");

    // Port 9 (discard) on loopback: nothing listens there.
    let dead = neardup::es::EsConfig::new("http://127.0.0.1:9")
        .unwrap()
        .client()
        .unwrap();
    let e = neardup::es::server_version(&dead, &RetryPolicy::none())
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("NEARDUP_ES_URL"), "{e}");
}

async fn meta_json(client: &elasticsearch::Elasticsearch, index: &str) -> serde_json::Value {
    let m = t::call(client, Method::Get, &format!("/{index}/_mapping"), None).await;
    m[index]["mappings"]["_meta"].clone()
}

fn both(profile: Profile) -> IndexMeta {
    IndexMeta::new(
        &FingerprintConfig::for_profile(profile),
        Methods::BOTH,
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_records_what_it_holds_in_meta_and_every_reader_gets_it_back() {
    let client = t::client().await;
    let retry = RetryPolicy::none();
    let idx = TestIndex::new("init-meta");
    let wanted = both(Profile::Default);
    let r = init_index(&client, &retry, &idx.name, &wanted)
        .await
        .unwrap();
    assert_eq!(r, InitOutcome::Created);
    let props = field_types(&client, &idx.name).await;
    assert_eq!(props["minHashBands"]["type"], "keyword");
    assert_eq!(props["minHashSignature"]["type"], "binary");
    assert_eq!(props["simHashA"]["type"], "short");
    let meta = meta_json(&client, &idx.name).await;
    // MinHash in the compact layout with the containment fields, fields format 4.
    assert_eq!(meta["neardup"]["format"], 4);
    assert_eq!(props["minHashMinima"]["type"], "text");
    assert_eq!(props["minHashDistinct"]["type"], "integer");
    assert_eq!(
        meta["neardup"]["minhash"]["layout"],
        json!({ "compact": { "signature_bits": 8 } })
    );
    assert_eq!(
        meta["neardup"]["minhash"]["params"],
        "shingle=w2;n=128;sig=oph;bands=42x3"
    );
    let read = read_meta(&client, &retry, &idx.name, &FieldNames::default())
        .await
        .unwrap();
    assert_eq!(read, wanted);
    assert_eq!(read.default_method(), neardup::Method::MinHash);
    let fp = read.fingerprinter(&idx.name).unwrap();
    assert_eq!(
        read.version(neardup::Method::MinHash),
        Some(fp.minhash_version())
    );

    // Again: nothing changes. Another profile: refused, nothing changes.
    assert_eq!(
        init_index(&client, &retry, &idx.name, &wanted)
            .await
            .unwrap(),
        InitOutcome::Unchanged
    );
    let e = init_index(&client, &retry, &idx.name, &both(Profile::Seed000))
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::MetaConflict { .. }), "{e:?}");
    assert!(e.to_string().contains("seed000"), "{e}");
    assert_eq!(
        read_meta(&client, &retry, &idx.name, &FieldNames::default())
            .await
            .unwrap(),
        wanted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minhash_is_added_to_a_simhash_index_and_other_meta_keys_are_kept() {
    let client = t::client().await;
    let retry = RetryPolicy::none();
    let idx = TestIndex::new("init-add-minhash");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({"mappings": {"_meta": {"owner": "news-team"}, "properties": {"title": {"type": "text"}}}})),
    )
    .await;
    let simhash = IndexMeta::simhash(Profile::Default, BlockType::Short, FieldNames::default());
    init_index(&client, &retry, &idx.name, &simhash)
        .await
        .unwrap();
    let read = read_meta(&client, &retry, &idx.name, &FieldNames::default())
        .await
        .unwrap();
    assert_eq!(read.default_method(), neardup::Method::SimHash);
    assert!(read.minhash.is_none());

    let r = init_index(&client, &retry, &idx.name, &both(Profile::Default))
        .await
        .unwrap();
    match r {
        InitOutcome::Added { mut fields, meta } => {
            fields.sort();
            assert!(meta);
            assert_eq!(
                fields,
                [
                    "minHashBands",
                    "minHashDistinct",
                    "minHashMinima",
                    "minHashReason",
                    "minHashSignature",
                    "minHashVersion"
                ]
            );
        }
        other => panic!("expected Added, got {other:?}"),
    }
    let meta = meta_json(&client, &idx.name).await;
    assert_eq!(meta["owner"], "news-team", "{meta}");
    let read = read_meta(&client, &retry, &idx.name, &FieldNames::default())
        .await
        .unwrap();
    assert_eq!(read, both(Profile::Default));

    // SimHash only again: MinHash stays recorded.
    assert_eq!(
        init_index(&client, &retry, &idx.name, &simhash)
            .await
            .unwrap(),
        InitOutcome::Unchanged
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_the_java_service_reads_as_seed000_and_es_init_keeps_it_so() {
    let client = t::client().await;
    let retry = RetryPolicy::none();
    let idx = TestIndex::new("init-java");
    t::create_index(
        &client,
        &idx.name,
        json!({
            "title": {"type": "text"},
            "simHashA": {"type": "short"}, "simHashB": {"type": "short"},
            "simHashC": {"type": "short"}, "simHashD": {"type": "short"}
        }),
    )
    .await;
    let read = read_meta(&client, &retry, &idx.name, &FieldNames::default())
        .await
        .unwrap();
    assert_eq!(read.source, MetaSource::Legacy);
    assert_eq!(read.simhash.as_ref().unwrap().profile, Profile::Seed000);
    assert!(read.minhash.is_none());
    let kept = existing_profile(&client, &retry, &idx.name, &FieldNames::default(), true)
        .await
        .unwrap();
    assert_eq!(kept, Some(Profile::Seed000));

    // A pattern over the Java index and one of the other profile: nothing in common.
    let other = TestIndex::new("init-java-other");
    init_index(&client, &retry, &other.name, &both(Profile::Default))
        .await
        .unwrap();
    let pattern = format!("{},{}", idx.name, other.name);
    let e = read_meta(&client, &retry, &pattern, &FieldNames::default())
        .await
        .unwrap_err();
    assert!(matches!(e, EsError::MetaMismatch { .. }), "{e:?}");

    // A neardup index written before `_meta`: the profile its documents carry.
    let old = TestIndex::new("init-premeta");
    // Such documents predate folding as well.
    let fp = neardup::Fingerprinter::new(FingerprintConfig {
        fold: false,
        ..FingerprintConfig::for_profile(Profile::Keywords)
    });
    t::call(
        &client,
        Method::Put,
        &format!("/{}", old.name),
        Some(json!({"mappings": FieldNames::default().mapping(BlockType::Short)})),
    )
    .await;
    t::load(
        &client,
        &old.name,
        &[("a".to_owned(), json!({"simHashVersion": fp.version()}))],
    )
    .await;
    let kept = existing_profile(&client, &retry, &old.name, &FieldNames::default(), true)
        .await
        .unwrap();
    assert_eq!(kept, Some(Profile::Keywords));
}

/// An index recorded before folding existed (no `fold` in `_meta`) keeps its version through
/// `es-init` and the back-fill; `es-init --upgrade` records folding and the new versions, the
/// back-fill rewrites every document, and then a Taiwan-phrased repost is found. As a user
/// runs it, through the CLI.
#[test]
fn an_index_without_folding_keeps_it_until_an_explicit_upgrade() {
    use neardup::text::{Folder, TraditionalStyle};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(t::client());
    let retry = RetryPolicy::none();
    let idx = TestIndex::new("init-upgrade-fold");
    let unfolded = IndexMeta::new(
        &FingerprintConfig {
            fold: false,
            ..FingerprintConfig::default()
        },
        Methods::BOTH,
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    );
    rt.block_on(init_index(&client, &retry, &idx.name, &unfolded))
        .unwrap();
    assert!(rt.block_on(meta_json(&client, &idx.name))["neardup"]
        .get("fold")
        .is_none());
    let mut docs = t::example_articles();
    let (_, original) = docs.iter().find(|(id, _)| id == "ex-001").unwrap().clone();
    let f = Folder::shared();
    let taiwan = json!({
        "title": f.to_traditional(original["title"].as_str().unwrap(), TraditionalStyle::Taiwan),
        "content": f.to_traditional(original["content"].as_str().unwrap(), TraditionalStyle::Taiwan),
    });
    assert_ne!(taiwan, original);
    docs.push(("ex-001-tw".to_string(), taiwan));
    rt.block_on(t::load(&client, &idx.name, &docs));

    let cli = |args: &[&str]| common::es_cli(&idx.name, args);
    let similar_ids = || {
        let (code, out, err) = cli(&["similar", "--id", "ex-001"]);
        assert_eq!(code, 0, "{err}");
        common::json_lines(&out)
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let state = tempfile::tempdir().unwrap();
    let (state_file, failed_file) = (
        state.path().join("state.jsonl"),
        state.path().join("failed.jsonl"),
    );
    let backfill = || {
        let (code, _, err) = cli(&[
            "backfill",
            "--quiet",
            "--state",
            state_file.to_str().unwrap(),
            "--failed",
            failed_file.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        rt.block_on(t::refresh(&client, &idx.name));
    };
    let versions = || {
        let (src, _) = rt.block_on(t::get(&client, &idx.name, "ex-001-tw"));
        (src["simHashVersion"].clone(), src["minHashVersion"].clone())
    };

    // es-init again, without flags: it adds the duplicate group field (on by default), and
    // the index keeps not folding; a second time nothing changes.
    let (code, out, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nearDupGroup"), "{out}");
    let (code, out, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing changed"), "{out}");
    backfill();
    let (simhash_v, minhash_v) = versions();
    assert_eq!(
        simhash_v,
        unfolded.version(neardup::Method::SimHash).unwrap()
    );
    assert_eq!(
        minhash_v,
        unfolded.minhash.as_ref().unwrap().stored_version()
    );
    assert!(!unfolded
        .version(neardup::Method::MinHash)
        .unwrap()
        .contains("t2s"));
    assert!(!similar_ids().contains(&"ex-001-tw".to_string()));

    // Asking an unfolded index for folding without --upgrade is refused and changes nothing.
    let before = rt.block_on(meta_json(&client, &idx.name));
    let upgraded = IndexMeta::new(
        &FingerprintConfig::default(),
        Methods::BOTH,
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    );
    let e = rt
        .block_on(init_index(&client, &retry, &idx.name, &upgraded))
        .unwrap_err();
    assert!(matches!(e, EsError::MetaConflict { .. }), "{e:?}");
    assert_eq!(rt.block_on(meta_json(&client, &idx.name)), before);

    // The upgrade: _meta records folding and the new versions; the back-fill rewrites all.
    let (code, out, err) = cli(&["es-init", "--upgrade"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fold true"), "{out}");
    let read = rt
        .block_on(read_meta(
            &client,
            &retry,
            &idx.name,
            &FieldNames::default(),
        ))
        .unwrap();
    // The groups es-init added before are kept (linked by texts, a new index's default); the
    // upgrade adds edit tracking where the node runs it (live_es::tracking tests that).
    assert_eq!(
        read,
        IndexMeta {
            group: Some(neardup::es::GroupMeta {
                link: neardup::es::GroupLink::for_new_index(true),
                ..neardup::es::GroupMeta::default()
            }),
            tracking: read.tracking.clone(),
            ..upgraded.clone()
        }
    );
    assert_eq!(
        rt.block_on(meta_json(&client, &idx.name))["neardup"]["fold"],
        true
    );
    backfill();
    let (simhash_v, minhash_v) = versions();
    assert_eq!(
        simhash_v,
        upgraded.version(neardup::Method::SimHash).unwrap()
    );
    assert_eq!(
        minhash_v,
        upgraded.minhash.as_ref().unwrap().stored_version()
    );
    assert!(similar_ids().contains(&"ex-001-tw".to_string()));

    // --upgrade cannot drop a method, and --no-fold is now refused without it.
    let (code, _, err) = cli(&["es-init", "--upgrade", "--methods", "minhash"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--methods simhash,minhash"), "{err}");
    let (code, _, err) = cli(&["es-init", "--no-fold"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("t2s-1"), "{err}");
    assert_eq!(
        rt.block_on(meta_json(&client, &idx.name))["neardup"]["fold"],
        true
    );
}

/// Boilerplate learned from an index (`boilerplate learn --index`) is recorded by `es-init
/// --boilerplate` in `_meta` (the hashes, not the texts), used by the back-fill and
/// `similar`, kept by a plain es-init, refused when another is asked for without --upgrade,
/// and dropped by `--upgrade --no-boilerplate`. As a user runs it, through the CLI.
#[test]
fn boilerplate_learned_from_an_index_is_recorded_in_meta_and_used() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(t::client());
    let idx = TestIndex::new("init-boilerplate");
    let docs = crate::boilerplate::corpus();
    rt.block_on(t::load(&client, &idx.name, &docs));
    let dir = tempfile::tempdir().unwrap();
    let artefact = dir.path().join("bp.json");
    let bp = artefact.to_str().unwrap();
    let cli = |args: &[&str]| common::es_cli(&idx.name, args);

    let (code, _, err) = cli(&["boilerplate", "learn", "-o", bp]);
    assert_eq!(code, 0, "{err}");
    let learned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&artefact).unwrap()).unwrap();
    assert_eq!(learned["lines"].as_array().unwrap().len(), 28, "{learned}");
    let id = learned["id"].as_str().unwrap().to_owned();

    let (code, out, err) = cli(&["es-init", "--boilerplate", bp]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id), "{out}");
    let meta = rt.block_on(meta_json(&client, &idx.name));
    let recorded = &meta["neardup"]["boilerplate"];
    assert_eq!(recorded["id"], id.as_str());
    assert_eq!(recorded["lines"].as_array().unwrap().len(), 28);
    assert!(recorded["lines"][0].get("text").is_none(), "{recorded}");
    assert!(meta["neardup"]["minhash"]["version"]
        .as_str()
        .unwrap()
        .contains(&id));

    let state = dir.path().join("state.jsonl");
    let failed = dir.path().join("failed.jsonl");
    let (code, _, err) = cli(&[
        "backfill",
        "--quiet",
        "--state",
        state.to_str().unwrap(),
        "--failed",
        failed.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    rt.block_on(t::refresh(&client, &idx.name));
    let (code, out, err) = cli(&["similar", "--id", "ex-001"]);
    assert_eq!(code, 0, "{err}");
    let found: Vec<String> = common::json_lines(&out)
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(found, ["ex-001@other"]);

    // Kept as recorded; another artefact needs --upgrade; --upgrade --no-boilerplate drops it.
    let (code, out, err) = cli(&["es-init"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing changed"), "{out}");
    let other = dir.path().join("other.json");
    let (code, _, err) = cli(&[
        "boilerplate",
        "learn",
        "--min-docs",
        "2",
        "-o",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["es-init", "--boilerplate", other.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&id) && err.contains("es-init --upgrade"),
        "{err}"
    );
    // A writer asked for another artefact than the index records is refused, naming it.
    let (code, _, err) = cli(&[
        "backfill",
        "--boilerplate",
        other.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--failed",
        failed.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--boilerplate") && err.contains(&id), "{err}");
    let (code, _, err) = cli(&["es-init", "--upgrade", "--no-boilerplate"]);
    assert_eq!(code, 0, "{err}");
    let meta = rt.block_on(meta_json(&client, &idx.name));
    assert!(meta["neardup"].get("boilerplate").is_none(), "{meta}");
}

/// `docs` bulk-loaded without a refresh (`refresh_interval: -1` then keeps them unsearchable).
async fn load_unrefreshed(
    client: &elasticsearch::Elasticsearch,
    index: &str,
    docs: &[(String, serde_json::Value)],
) {
    let mut nd = String::new();
    for (id, doc) in docs {
        nd += &format!("{}\n{doc}\n", json!({ "index": { "_id": id } }));
    }
    let r = neardup::es::request(
        client,
        &RetryPolicy::none(),
        "load",
        Method::Post,
        &format!("/{index}/_bulk"),
        &[],
        Some(&neardup::es::Body::NdJson(nd)),
    )
    .await
    .unwrap();
    assert_eq!(r["errors"], false, "{r}");
}

/// Issue 32: settings that get in the way. A `strict` mapping: writers refuse an index whose
/// fields are not mapped (the first write never reaches it), es-init maps them, and every
/// write then goes through. A field limit with no room for the fields: es-init stops, changes
/// nothing, and says which setting to raise, to what; raised so, es-init goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_mapping_and_a_field_limit_are_met_with_clear_errors() {
    let client = t::client().await;
    let retry = RetryPolicy::none();
    let meta = IndexMeta {
        group: Some(neardup::es::GroupMeta::default()),
        ..IndexMeta::default()
    };
    let docs = t::shared_articles(20);
    let strict = TestIndex::new("init-strict");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", strict.name),
        Some(json!({ "mappings": { "dynamic": "strict", "properties": {
            "title": {"type": "text"}, "content": {"type": "text"} } } })),
    )
    .await;
    t::load(&client, &strict.name, &docs).await;
    let legacy = FieldNames::default();
    let open =
        || neardup::es::EsIndexer::open(client.clone(), &strict.name, retry.clone(), &legacy);
    match open().await {
        Err(e @ EsError::NotInitialised { .. }) => {
            assert!(e.to_string().contains("es-init"), "{e}")
        }
        other => panic!("a strict index without the fields: {other:?}"),
    }
    init_index(&client, &retry, &strict.name, &meta)
        .await
        .unwrap();
    let indexer = open().await.unwrap();
    let fields = vec!["title".to_string(), "content".to_string()];
    let updates: Vec<_> = docs
        .iter()
        .map(|(id, d)| neardup::es::FingerprintUpdate {
            id: id.clone(),
            guard: None,
            sketches: indexer.sketch(d, &fields).unwrap(),
            order: None,
            texts: None,
        })
        .collect();
    let r = indexer.update_fingerprints(&updates).await.unwrap();
    assert_eq!((r.updated, r.failed.len()), (20, 0), "{r:?}");

    let limited = TestIndex::new("init-limit");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", limited.name),
        Some(json!({
            "settings": { "index.mapping.total_fields.limit": 4 },
            "mappings": { "properties": { "title": {"type": "text"}, "content": {"type": "text"} } },
        })),
    )
    .await;
    let e = init_index(&client, &retry, &limited.name, &meta)
        .await
        .unwrap_err();
    let text = e.to_string();
    let EsError::FieldLimit {
        enough: Some(enough),
        ..
    } = e
    else {
        panic!("{e:?}");
    };
    assert!(
        text.contains(&format!(
            r#"`PUT /{}/_settings {{"index.mapping.total_fields.limit": {enough}}}`"#,
            limited.name
        )) && text.contains("es-init again"),
        "{text}"
    );
    assert!(
        field_types(&client, &limited.name)
            .await
            .get("simHash")
            .is_none(),
        "nothing added"
    );
    t::call(
        &client,
        Method::Put,
        &format!("/{}/_settings", limited.name),
        Some(json!({ "index.mapping.total_fields.limit": enough })),
    )
    .await;
    init_index(&client, &retry, &limited.name, &meta)
        .await
        .unwrap();
}

/// Issue 32: `refresh_interval: -1` (periodic refresh off, as during a bulk load). The
/// back-fill refreshes before it walks, and the worker refreshes such an index before each
/// pass: both write every document, none is left unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_correct_with_refresh_off() {
    use neardup::es::backfill::{Backfill, BackfillConfig};
    let client = t::client().await;
    let retry = RetryPolicy::none();
    let idx = TestIndex::new("init-norefresh");
    t::call(
        &client,
        Method::Put,
        &format!("/{}", idx.name),
        Some(json!({ "settings": { "number_of_shards": 2, "refresh_interval": "-1" } })),
    )
    .await;
    init_index(&client, &retry, &idx.name, &IndexMeta::default())
        .await
        .unwrap();
    let docs = t::shared_articles(300);
    load_unrefreshed(&client, &idx.name, &docs[..200]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = BackfillConfig::new(&idx.name);
    c.state_path = dir.path().join("state.jsonl");
    c.failed_path = dir.path().join("failed.jsonl");
    let fp = neardup::Fingerprinter::for_profile(Profile::Default);
    let r = Backfill::new(client.clone(), fp, c)
        .run(
            &std::sync::atomic::AtomicBool::new(false),
            std::sync::Arc::new(|_| {}),
        )
        .await
        .unwrap();
    assert_eq!(
        (r.counts.scanned, r.counts.written + r.counts.too_short),
        (200, 200),
        "{r:?}"
    );

    load_unrefreshed(&client, &idx.name, &docs[200..]).await;
    let indexer =
        neardup::es::EsIndexer::open(client.clone(), &idx.name, retry, &FieldNames::default())
            .await
            .unwrap();
    let mut worker = neardup::es::Worker::new(indexer, neardup::es::WorkerConfig::default());
    let pass = worker
        .pass(&std::sync::atomic::AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(pass.seen, 100, "{pass:?}");
    assert_eq!(pass.writes.failed.len(), 0, "{pass:?}");
    let pass = worker
        .pass(&std::sync::atomic::AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(pass.seen, 0, "everything written: {pass:?}");
}

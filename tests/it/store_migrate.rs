//! Format-1 stores: refused with the command that migrates them, migrated with every document
//! and the same answers; and compaction, which must not change an answer either.

use std::path::Path;

use neardup::relation::MatchOptions;
use neardup::store::{
    migrate, write_format_1, write_format_2, OpenOptions, Plan, Store, StoreConfig, StoreError,
    MIGRATING_FILE_NAME,
};
use neardup::{Method, MinHashParams, MinHasher, SimHash, Sketch, Tolerance};

use crate::common::{examples, json_lines, neardup};

/// Near-duplicates only: what these comparisons ask for.
const ONLY: MatchOptions = MatchOptions::NEAR_DUPLICATES_ONLY;

fn simhash_config() -> StoreConfig {
    StoreConfig {
        method: Method::SimHash,
        profile: "default".into(),
        version: "test-v1".into(),
        k: 3,
        minhash: None,
        fold: true,
        boilerplate: None,
    }
}

fn minhash_config() -> StoreConfig {
    StoreConfig {
        method: Method::MinHash,
        profile: "minhash".into(),
        version: "test-mh-v1".into(),
        k: 0,
        minhash: Some(MinHashParams::DEFAULT),
        fold: true,
        boilerplate: None,
    }
}

/// Fingerprints in clusters (a base and copies a few bits away), ids of varied lengths.
fn simhash_docs(n: usize) -> Vec<(String, Sketch)> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    while out.len() < n {
        let base = next();
        for c in 0..4 {
            let fp = base ^ (next() & next() & next() & next());
            let id = format!("{}-{c}", "s".repeat(out.len() % 7 + 1)) + &out.len().to_string();
            out.push((id, Sketch::SimHash(SimHash(if c == 0 { base } else { fp }))));
        }
    }
    out
}

/// Signatures of word sets with planted near copies.
fn minhash_docs(n: usize) -> Vec<(String, Sketch)> {
    let hasher = MinHasher::new(MinHashParams::DEFAULT);
    let mut out = Vec::new();
    for i in 0..n {
        let base = (i / 3) as u64 * 1000;
        let words: Vec<u64> = (base..base + 60)
            .map(|w| if w % 17 == (i % 3) as u64 { w + 500 } else { w })
            .map(|w| (w + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
            .collect();
        let sig = hasher.signature_of_hashes(&[words]).expect("words");
        out.push((format!("doc-{i:04}"), Sketch::MinHash(sig)));
    }
    out
}

fn tolerance(method: Method) -> Tolerance {
    match method {
        Method::SimHash => Tolerance::Distance(3),
        Method::MinHash => Tolerance::Similarity(neardup::Threshold::new(0.3).unwrap()),
    }
}

/// Every document's neighbours, as a fresh store of the same documents answers, without
/// their containment: a document migrated from format 1 or 2 has no distinct shingle count,
/// so its containment is unknown (docs/local-index.md); its near-duplicates and their
/// relations are the same.
fn answers(store: &Store, docs: &[(String, Sketch)]) -> Vec<Vec<neardup::store::Match>> {
    let t = tolerance(store.method());
    docs.iter()
        .map(|(id, _)| {
            let found = store.similar_to_id(id, t, &ONLY).unwrap().expect("stored");
            found
                .into_iter()
                .map(|m| neardup::store::Match {
                    containment: None,
                    ..m
                })
                .collect()
        })
        .collect()
}

fn reference(config: &StoreConfig, docs: &[(String, Sketch)]) -> Store {
    let store = Store::in_memory(config).unwrap();
    let refs: Vec<(&str, Sketch)> = docs
        .iter()
        .map(|(id, s)| (id.as_str(), s.clone()))
        .collect();
    store.upsert_batch(&refs).unwrap();
    store
}

fn migrate_and_compare(config: StoreConfig, mut docs: Vec<(String, Sketch)>) {
    let dir = tempfile::tempdir().unwrap();
    let refs: Vec<(&str, Sketch)> = docs
        .iter()
        .map(|(id, s)| (id.as_str(), s.clone()))
        .collect();
    write_format_1(dir.path(), &config, &refs).unwrap();

    let err = Store::open(dir.path(), &OpenOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::NeedsMigration { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("neardup migrate --store {}", dir.path().display())),
        "{msg}"
    );
    assert!(Store::create_or_open(dir.path(), &config, &OpenOptions::default()).is_err());

    let m = migrate(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(
        (m.from.as_str(), m.to, m.documents),
        ("1", "3", docs.len() as u64)
    );
    assert!(!dir.path().join(MIGRATING_FILE_NAME).exists());

    let store = Store::open(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(store.config(), &config);
    assert_eq!(store.verify().unwrap(), docs.len() as u64);
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(store.snapshot().unwrap().documents().unwrap(), docs);
    let fresh = reference(&config, &docs);
    let got = answers(&store, &docs);
    assert_eq!(got, answers(&fresh, &docs));
    assert!(
        got.iter().any(|m| !m.is_empty()),
        "the fixture has near-duplicates"
    );
    drop(store);

    // Migrating again is a no-op.
    let again = migrate(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(
        (again.from.as_str(), again.documents),
        ("3", docs.len() as u64)
    );
}

#[test]
fn a_format_1_simhash_store_is_refused_then_migrated_with_the_same_answers() {
    migrate_and_compare(simhash_config(), simhash_docs(400));
}

#[test]
fn a_format_1_minhash_store_is_refused_then_migrated_with_the_same_answers() {
    migrate_and_compare(minhash_config(), minhash_docs(300));
}

#[test]
fn a_format_2_minhash_store_is_refused_then_migrated_without_distinct_counts() {
    let config = minhash_config();
    let mut docs = minhash_docs(120);
    let dir = tempfile::tempdir().unwrap();
    let refs: Vec<(&str, Sketch)> = docs
        .iter()
        .map(|(id, s)| (id.as_str(), s.clone()))
        .collect();
    write_format_2(dir.path(), &config, &refs).unwrap();
    let err = Store::open(dir.path(), &OpenOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("has format 2") && msg.contains("neardup migrate --store"),
        "{msg}"
    );
    let m = migrate(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(
        (m.from.as_str(), m.to, m.documents),
        ("2", "3", docs.len() as u64)
    );
    let store = Store::open(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(store.verify().unwrap(), docs.len() as u64);
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    let got = store.snapshot().unwrap().documents().unwrap();
    assert_eq!(got, docs);
    assert!(got.iter().all(|(_, s)| match s {
        Sketch::MinHash(sig) => sig.distinct().is_none(),
        Sketch::SimHash(_) => false,
    }));
    assert_eq!(
        answers(&store, &docs),
        answers(&reference(&config, &docs), &docs)
    );
}

#[test]
fn a_migration_killed_before_its_rename_leaves_the_old_store_and_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let docs = simhash_docs(40);
    let refs: Vec<(&str, Sketch)> = docs
        .iter()
        .map(|(id, s)| (id.as_str(), s.clone()))
        .collect();
    write_format_1(dir.path(), &simhash_config(), &refs).unwrap();
    // What a killed migration leaves: a partial new database beside the old one.
    std::fs::write(dir.path().join(MIGRATING_FILE_NAME), b"half a database").unwrap();
    assert!(matches!(
        Store::open(dir.path(), &OpenOptions::default()),
        Err(StoreError::NeedsMigration { .. })
    ));
    let m = migrate(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(m.documents, 40);
    let store = Store::open(dir.path(), &OpenOptions::default()).unwrap();
    assert_eq!(store.verify().unwrap(), 40);
}

#[test]
fn compaction_keeps_every_answer_and_the_numbering() {
    for (config, docs) in [
        (simhash_config(), simhash_docs(2000)),
        (minhash_config(), minhash_docs(900)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            Store::create_or_open(dir.path(), &config, &OpenOptions::default()).unwrap();
        let refs: Vec<(&str, Sketch)> = docs
            .iter()
            .map(|(id, s)| (id.as_str(), s.clone()))
            .collect();
        for chunk in refs.chunks(300) {
            store.upsert_batch(chunk).unwrap();
        }
        // Some churn: deletions and replacements leave holes to give back.
        let gone: Vec<&str> = refs.iter().step_by(5).map(|(id, _)| *id).collect();
        store.delete(&gone).unwrap();
        let before = answers(&store, &docs[1..2]);
        let kept: Vec<(String, Sketch)> = docs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 != 0)
            .map(|(_, d)| d.clone())
            .collect();
        let want = answers(&store, &kept);
        let file = dir.path().join(neardup::store::FILE_NAME);
        let size = std::fs::metadata(&file).unwrap().len();
        store.compact().unwrap();
        assert!(std::fs::metadata(&file).unwrap().len() <= size);
        assert_eq!(store.verify().unwrap(), kept.len() as u64);
        assert_eq!(answers(&store, &kept), want);
        assert_eq!(answers(&store, &docs[1..2]), before);
        // Scans agree with the index after compaction too.
        let (_, q) = &kept[0];
        let snap = store.snapshot().unwrap();
        let t = tolerance(config.method);
        let scan = snap.similar_with(q, t, None, Plan::Scan, &ONLY).unwrap();
        let index = snap.similar_with(q, t, None, Plan::Index, &ONLY).unwrap();
        assert!(index.iter().all(|m| scan.contains(m)));
        drop(snap);
        // New documents get new numbers after compaction: nothing is overwritten.
        let (id, s) = &docs[0];
        assert_eq!(store.upsert(id, s.clone()).unwrap().inserted, 1);
        assert_eq!(store.verify().unwrap(), kept.len() as u64 + 1);
        drop(store);
        let store = Store::open(dir.path(), &OpenOptions::default()).unwrap();
        assert_eq!(store.verify().unwrap(), kept.len() as u64 + 1);
    }
}

fn index_examples(store: &Path, method: &str) {
    let s = store.to_str().unwrap();
    let (code, _, err) = neardup(
        &[
            "index",
            "--store",
            s,
            "-i",
            examples().to_str().unwrap(),
            "--method",
            method,
            "-q",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
}

#[test]
fn cli_refuses_a_format_1_store_naming_migrate_which_then_works() {
    for method in ["minhash", "simhash"] {
        let new = tempfile::tempdir().unwrap();
        index_examples(new.path(), method);
        let (config, docs) = {
            let store = Store::open(new.path(), &OpenOptions::default()).unwrap();
            let docs = store.snapshot().unwrap().documents().unwrap();
            (store.config().clone(), docs)
        };
        let old = tempfile::tempdir().unwrap();
        let refs: Vec<(&str, Sketch)> = docs
            .iter()
            .map(|(id, s)| (id.as_str(), s.clone()))
            .collect();
        write_format_1(old.path(), &config, &refs).unwrap();
        let old_s = old.path().to_str().unwrap();
        let new_s = new.path().to_str().unwrap();

        for args in [
            vec!["similar", "--store", old_s, "--id", "ex-009"],
            vec!["stats", "--store", old_s],
            vec![
                "index",
                "--store",
                old_s,
                "-i",
                examples().to_str().unwrap(),
                "-q",
            ],
        ] {
            let (code, _, err) = neardup(&args, b"");
            assert_ne!(code, 0, "{args:?}");
            assert!(
                err.contains(&format!("run `neardup migrate --store {old_s}`")),
                "{args:?}: {err}"
            );
        }
        let (code, out, err) = neardup(&["migrate", "--store", old_s], b"");
        assert_eq!(code, 0, "{err}");
        let report = &json_lines(&out)[0];
        assert_eq!(report["from"], "1");
        assert_eq!(report["documents"], docs.len() as u64);
        assert!(err.contains("rewritten from format 1 to 3"), "{err}");

        // A migrated store knows no distinct counts: the same near-duplicates, without a
        // containment estimate.
        let near = |store: &str, id: &str| -> Vec<serde_json::Value> {
            let (code, out, err) = neardup(
                &["similar", "--store", store, "--id", id, "--no-containment"],
                b"",
            );
            assert_eq!(code, 0, "{err}");
            json_lines(&out)
                .into_iter()
                .map(|mut m| {
                    if let Some(o) = m.as_object_mut() {
                        o.remove("containment");
                    }
                    m
                })
                .collect()
        };
        for (id, _) in &docs {
            assert_eq!(near(old_s, id), near(new_s, id), "{id}");
        }
        let (code, _, err) = neardup(&["migrate", "--store", old_s], b"");
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("nothing to do"), "{err}");
    }
}

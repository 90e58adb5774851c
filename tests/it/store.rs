//! The local index and the in-memory all-pairs finder: exact answers, for every k.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use neardup::allpairs::simhash::AllPairs;
use neardup::relation::{containment, MatchOptions, Relation};
use neardup::store::{Match, OpenOptions, Plan, Store, StoreConfig, StoreError};
use neardup::{Method, MinHashParams, MinHasher, Score, Signature, SimHash, Sketch, Tolerance};
use proptest::prelude::*;

/// Near-duplicates only: the relation every query of these tests asks for, unless it says.
const ONLY: MatchOptions = MatchOptions::NEAR_DUPLICATES_ONLY;

fn config(k: u32) -> StoreConfig {
    StoreConfig {
        method: Method::SimHash,
        profile: "default".into(),
        version: "test-v1".into(),
        k,
        minhash: None,
        fold: true,
        boilerplate: None,
    }
}

/// The fingerprint of a SimHash store's sketch.
fn simhash(s: &Sketch) -> SimHash {
    match s {
        Sketch::SimHash(fp) => *fp,
        Sketch::MinHash(_) => panic!("a SimHash store returned a MinHash sketch"),
    }
}

/// SimHash documents as a store lists them.
fn sketches(docs: &[(String, SimHash)]) -> Vec<(String, Sketch)> {
    docs.iter()
        .map(|(id, fp)| (id.clone(), Sketch::from(*fp)))
        .collect()
}

/// Every stored fingerprint within `k` of `q`, nearest first, ties by id.
fn brute(docs: &[(String, SimHash)], q: SimHash, k: u32, exclude: Option<&str>) -> Vec<Match> {
    let mut out: Vec<Match> = docs
        .iter()
        .filter(|(id, fp)| fp.distance(q) <= k && Some(id.as_str()) != exclude)
        .map(|(id, fp)| (fp.distance(q), id))
        .map(|(d, id)| Match::new(id.clone(), Score::Distance(d)))
        .collect();
    out.sort_by(|a, b| {
        a.distance()
            .cmp(&b.distance())
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

fn flip(fp: u64, bits: &[u32]) -> u64 {
    bits.iter().fold(fp, |v, &b| v ^ (1 << b))
}

/// Random fingerprints, each with a neighbour at most `k` bits away.
fn planted(k: u32) -> impl Strategy<Value = (u32, Vec<(u64, Vec<u32>)>)> {
    let pairs = prop::collection::vec(
        (
            any::<u64>(),
            prop::collection::hash_set(0u32..64, 0..=k as usize),
        ),
        1..40,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(fp, bits)| (fp, bits.into_iter().collect()))
            .collect()
    });
    (Just(k), pairs)
}

fn any_k_planted() -> impl Strategy<Value = (u32, Vec<(u64, Vec<u32>)>)> {
    (0u32..=7).prop_flat_map(planted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Recall 100 % within k and nothing beyond it: the index answers exactly what a scan
    /// of every document answers, for k = 0..7.
    #[test]
    fn index_finds_exactly_the_neighbours_within_k((k, set) in any_k_planted()) {
        let store = Store::in_memory(&config(k)).unwrap();
        let mut docs = Vec::new();
        for (i, (fp, bits)) in set.iter().enumerate() {
            docs.push((format!("b{i}"), SimHash(*fp)));
            docs.push((format!("n{i}"), SimHash(flip(*fp, bits))));
        }
        let refs: Vec<(&str, SimHash)> = docs.iter().map(|(id, fp)| (id.as_str(), *fp)).collect();
        store.upsert_batch(&refs).unwrap();
        // Ids are unique, so the model is the list itself.
        let model = docs.clone();
        for (i, (fp, bits)) in set.iter().enumerate() {
            let got = store.similar(SimHash(*fp), k, Some(&format!("b{i}")), &ONLY).unwrap();
            prop_assert!(got.iter().any(|m| m.id == format!("n{i}")), "k={k}: flipped neighbour n{i} missing");
            prop_assert!(got.iter().all(|m| m.distance().unwrap() <= k));
            prop_assert_eq!(&got, &brute(&model, SimHash(*fp), k, Some(&format!("b{i}"))));
            let q = SimHash(flip(*fp, bits));
            prop_assert_eq!(store.similar(q, k, None, &ONLY).unwrap(), brute(&model, q, k, None));
        }
        prop_assert_eq!(store.verify().unwrap(), docs.len() as u64);
    }

    /// Queries beyond the store's k probe values near each block and stay exact; the scan
    /// plan agrees.
    #[test]
    fn queries_beyond_the_stores_k_stay_exact(
        // Up to two bits per block beyond the store's k: forced block lookups stay feasible.
        (store_k, query_k) in (0u32..=7).prop_flat_map(|s| (Just(s), 0..3 * (s + 1))),
        centres in prop::collection::vec(any::<u64>(), 1..6),
        noise in prop::collection::vec((0usize..6, prop::collection::vec(0u32..64, 0..12)), 1..40),
    ) {
        let store = Store::in_memory(&config(store_k)).unwrap();
        let docs: Vec<(String, SimHash)> = noise
            .iter()
            .enumerate()
            .map(|(i, (c, bits))| (format!("d{i}"), SimHash(flip(centres[c % centres.len()], bits))))
            .collect();
        let refs: Vec<(&str, SimHash)> = docs.iter().map(|(id, fp)| (id.as_str(), *fp)).collect();
        store.upsert_batch(&refs).unwrap();
        let snap = store.snapshot().unwrap();
        for q in centres.iter().map(|&c| SimHash(c)).chain(docs.iter().map(|d| d.1).take(5)) {
            let want = brute(&docs, q, query_k, None);
            let (s, t) = (Sketch::from(q), Tolerance::Distance(query_k));
            prop_assert_eq!(&snap.similar_with(&s, t, None, Plan::Index, &ONLY).unwrap(), &want);
            prop_assert_eq!(&snap.similar_with(&s, t, None, Plan::Scan, &ONLY).unwrap(), &want);
            prop_assert_eq!(&snap.similar(&s, t, None, &ONLY).unwrap(), &want);
        }
    }

    /// Upsert replaces a fingerprint everywhere, delete removes it: after any sequence of
    /// operations the store equals a map of id → fingerprint, and answers as it would.
    #[test]
    fn upserts_and_deletes_match_a_map(
        k in 0u32..=7,
        ops in prop::collection::vec((0u8..12, prop::option::of(any::<u64>()), any::<bool>()), 1..80),
    ) {
        let store = Store::in_memory(&config(k)).unwrap();
        let mut model: BTreeMap<String, SimHash> = BTreeMap::new();
        // Batches of a few operations each, one transaction per batch.
        for chunk in ops.chunks(7) {
            let owned: Vec<(String, Option<Sketch>)> = chunk
                .iter()
                .map(|(id, fp, near)| {
                    let id = format!("id{id}");
                    // Half of the upserts land near an existing fingerprint, to share buckets.
                    let fp = fp.map(|v| match (near, model.values().next()) {
                        (true, Some(base)) => SimHash(base.0 ^ (v & 0x0101_0000_0000_0001)),
                        _ => SimHash(v),
                    });
                    (id, fp.map(Sketch::from))
                })
                .collect();
            let ops: Vec<neardup::store::Op<'_>> = owned
                .iter()
                .map(|(id, fp)| match fp {
                    Some(fp) => neardup::store::Op::Upsert(id, fp),
                    None => neardup::store::Op::Delete(id),
                })
                .collect();
            store.write(&ops).unwrap();
            for (id, fp) in owned {
                match fp {
                    Some(fp) => { model.insert(id, simhash(&fp)); }
                    None => { model.remove(&id); }
                }
            }
        }
        let snap = store.snapshot().unwrap();
        let docs: Vec<(String, SimHash)> = model.iter().map(|(i, f)| (i.clone(), *f)).collect();
        prop_assert_eq!(snap.documents().unwrap(), sketches(&docs));
        prop_assert_eq!(store.verify().unwrap(), docs.len() as u64);
        for id in 0..12 {
            let id = format!("id{id}");
            prop_assert_eq!(snap.get(&id).unwrap(), model.get(&id).map(|&fp| Sketch::from(fp)));
            if let Some(&fp) = model.get(&id) {
                prop_assert_eq!(
                    snap.similar_to_id(&id, Tolerance::Distance(k), &ONLY).unwrap().unwrap(),
                    brute(&docs, fp, k, Some(&id))
                );
            } else {
                prop_assert!(snap.similar_to_id(&id, Tolerance::Distance(k), &ONLY).unwrap().is_none());
            }
        }
    }

    /// All pairs in memory: exactly the pairs within k, whatever the grouping limit.
    #[test]
    fn all_pairs_are_exactly_the_pairs_within_k(
        (k, set) in any_k_planted(),
        extra in prop::collection::vec(any::<u64>(), 0..30),
        leaf in prop::sample::select(vec![2usize, 3, 8, 256]),
        copies in 0usize..3,
    ) {
        let mut fps: Vec<SimHash> = Vec::new();
        for (fp, bits) in &set {
            fps.push(SimHash(*fp));
            fps.push(SimHash(flip(*fp, bits)));
        }
        // Skew: many values sharing their high half, and exact copies.
        for (i, &e) in extra.iter().enumerate() {
            fps.push(SimHash((set[0].0 & 0xffff_ffff_0000_0000) | (e & 0xffff_ffff)));
            if i < copies {
                fps.push(fps[0]);
            }
        }
        let mut want = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = fps[i].distance(fps[j]);
                if d <= k {
                    want.push((i as u32, j as u32, d));
                }
            }
        }
        let m = AllPairs::new(k).unwrap().leaf_size(leaf).run(&fps);
        let mut got: Vec<_> = m.pairs().collect();
        got.sort_unstable();
        prop_assert_eq!(m.pair_count(), want.len() as u64);
        prop_assert_eq!(&got, &want);
        // Clusters are the connected components of those pairs.
        let mut comp: Vec<usize> = (0..fps.len()).collect();
        fn root(c: &mut [usize], mut x: usize) -> usize { while c[x] != x { x = c[x]; } x }
        for &(a, b, _) in &want {
            let (ra, rb) = (root(&mut comp, a as usize), root(&mut comp, b as usize));
            comp[ra.max(rb)] = ra.min(rb);
        }
        let mut groups: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for i in 0..fps.len() {
            let r = root(&mut comp, i);
            groups.entry(r).or_default().push(i as u32);
        }
        let want_clusters: Vec<Vec<u32>> = groups.into_values().filter(|g| g.len() > 1).collect();
        let got_clusters: Vec<Vec<u32>> = m.clusters().into_iter().map(|c| c.members).collect();
        prop_assert_eq!(got_clusters, want_clusters);
    }
}

#[test]
fn delete_really_removes_and_upsert_really_replaces() {
    let store = Store::in_memory(&config(3)).unwrap();
    let a = SimHash(0x1234_5678_9abc_def0);
    store
        .upsert_batch(&[("a", a), ("b", SimHash(a.0 ^ 1))])
        .unwrap();
    assert_eq!(
        store.similar_to_id("b", 3, &ONLY).unwrap().unwrap()[0].id,
        "a"
    );

    // Replace `a` with a far fingerprint: no trace of the old one in any block table.
    let far = SimHash(!a.0);
    let c = store.upsert("a", far).unwrap();
    assert_eq!((c.replaced, c.inserted), (1, 0));
    assert!(store
        .similar(a, 3, None, &ONLY)
        .unwrap()
        .iter()
        .all(|m| m.id != "a"));
    assert_eq!(store.similar(far, 0, None, &ONLY).unwrap()[0].id, "a");
    assert_eq!(store.upsert("a", far).unwrap().unchanged, 1);

    let c = store.delete(&["a", "nope"]).unwrap();
    assert_eq!((c.deleted, c.missing), (1, 1));
    assert_eq!(store.get("a").unwrap(), None);
    assert!(store
        .similar(far, 64, None, &ONLY)
        .unwrap()
        .iter()
        .all(|m| m.id != "a"));
    assert_eq!(store.verify().unwrap(), 1);
}

#[test]
fn a_store_remembers_what_it_was_built_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let opts = OpenOptions::default();
    {
        let store = Store::create_or_open(&path, &config(3), &opts).unwrap();
        store.upsert("x", SimHash(42)).unwrap();
    }
    let mismatch = |c: StoreConfig| Store::create_or_open(&path, &c, &opts).unwrap_err();

    let e = mismatch(StoreConfig {
        profile: "seed000".into(),
        ..config(3)
    });
    assert!(
        matches!(
            e,
            StoreError::Mismatch {
                what: "profile",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("--profile"), "{e}");

    let e = mismatch(StoreConfig {
        version: "test-v2".into(),
        ..config(3)
    });
    assert!(
        matches!(
            e,
            StoreError::Mismatch {
                what: "fingerprint version",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("test-v1"),
        "names the stored version: {e}"
    );

    let e = mismatch(config(4));
    assert!(matches!(e, StoreError::Mismatch { what: "k", .. }), "{e}");

    // Nothing was changed by the failed opens.
    let store = Store::open(&path, &opts).unwrap();
    assert_eq!(store.config(), &config(3));
    assert_eq!(store.get("x").unwrap(), Some(Sketch::from(SimHash(42))));
    store.ensure_fingerprints("default", "test-v1").unwrap();
    assert!(store.ensure_fingerprints("default", "other").is_err());
}

#[test]
fn opening_what_is_not_a_store_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let e = Store::open(&dir.path().join("missing"), &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::NotFound { .. }));
    assert!(e.to_string().contains("neardup index --store"), "{e}");

    let junk = dir.path().join("junk");
    std::fs::create_dir(&junk).unwrap();
    std::fs::write(
        junk.join(neardup::store::FILE_NAME),
        b"not a database at all",
    )
    .unwrap();
    let e = Store::open(&junk, &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::NotAStore { .. }), "{e}");

    assert!(
        Store::in_memory(&config(8)).is_err(),
        "k above 7 is refused"
    );
}

#[test]
fn a_store_open_elsewhere_is_in_use_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let first = Store::create_or_open(&path, &config(3), &OpenOptions::default()).unwrap();
    let e = Store::open(&path, &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, StoreError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("--wait"), "{e}");
    let short = OpenOptions {
        wait: Duration::from_millis(100),
    };
    assert!(matches!(
        Store::open(&path, &short),
        Err(StoreError::InUse { .. })
    ));

    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
    });
    let long = OpenOptions {
        wait: Duration::from_secs(30),
    };
    let second = Store::open(&path, &long).expect("opens once the first handle is dropped");
    releaser.join().unwrap();
    assert_eq!(second.len().unwrap(), 0);
}

/// Many values sharing one block value (boilerplate pages): answers stay exact and the
/// skew is reported.
#[test]
fn a_huge_bucket_is_answered_exactly_and_reported() {
    let store = Store::in_memory(&config(3)).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut docs = Vec::new();
    for i in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Block A (highest 16 bits) is 0 for all of them.
        let fp = SimHash(x & 0x0000_ffff_ffff_ffff);
        docs.push((format!("p{i}"), fp));
        if i % 100 == 0 {
            docs.push((format!("p{i}-near"), SimHash(fp.0 ^ (1 << 20) ^ (1 << 40))));
        }
    }
    for i in 0..200 {
        docs.push((
            format!("r{i}"),
            SimHash((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        ));
    }
    let refs: Vec<(&str, SimHash)> = docs.iter().map(|(id, fp)| (id.as_str(), *fp)).collect();
    store.upsert_batch(&refs).unwrap();
    for (id, fp) in docs.iter().step_by(97) {
        assert_eq!(
            store.similar(*fp, 3, Some(id), &ONLY).unwrap(),
            brute(&docs, *fp, 3, Some(id)),
            "{id}"
        );
    }
    let stats = store.stats().unwrap();
    assert_eq!(stats.blocks[0].largest, 3030);
    assert_eq!(stats.blocks[0].largest_value, 0);
    let warning = stats.skew_warning().expect("skew is reported");
    assert!(
        warning.contains("block 0") && warning.contains("3030"),
        "{warning}"
    );

    let fps: Vec<SimHash> = docs.iter().map(|d| d.1).collect();
    let m = AllPairs::new(3).unwrap().run(&fps);
    assert_eq!(m.stats.largest_bucket[0], 3030);
    assert!(
        m.stats.splits > 0,
        "the huge group is split, not compared pair by pair"
    );
    assert_eq!(m.pair_count(), 30);
}

/// Two checkers inserting near-duplicates of each other at the same time: each group of
/// near-duplicates ends up stored exactly once.
#[test]
fn concurrent_checkers_never_both_insert_near_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::create_or_open(&dir.path().join("s"), &config(3), &OpenOptions::default()).unwrap(),
    );
    let centres: Vec<u64> = (0..40u64)
        .map(|i| {
            (i + 1)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(i as u32)
        })
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            let centres = centres.clone();
            std::thread::spawn(move || {
                // Every thread sees every group, in its own order, with its own ids.
                let mut docs: Vec<(String, SimHash)> = Vec::new();
                for (g, &c) in centres.iter().enumerate() {
                    for j in 0..3u32 {
                        docs.push((format!("t{t}-g{g}-{j}"), SimHash(c ^ (1 << (j + t)))));
                    }
                }
                docs.rotate_left(t as usize * 17);
                if t % 2 == 1 {
                    docs.reverse();
                }
                let mut inserted = 0;
                for chunk in docs.chunks(5) {
                    let refs: Vec<(&str, SimHash)> =
                        chunk.iter().map(|(id, fp)| (id.as_str(), *fp)).collect();
                    inserted += store
                        .check(&refs, 3, true, &ONLY)
                        .unwrap()
                        .iter()
                        .filter(|r| r.inserted)
                        .count();
                }
                inserted
            })
        })
        .collect();
    let inserted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(inserted, centres.len(), "one document per group");
    let docs = store.snapshot().unwrap().documents().unwrap();
    assert_eq!(docs.len(), centres.len());
    let fps: Vec<SimHash> = docs.iter().map(|d| simhash(&d.1)).collect();
    assert_eq!(AllPairs::new(3).unwrap().run(&fps).pair_count(), 0);
    let groups: HashSet<&str> = docs
        .iter()
        .map(|(id, _)| id.split('-').nth(1).unwrap())
        .collect();
    assert_eq!(groups.len(), centres.len());
}

/// Readers running while a writer commits see whole batches only, and a consistent index.
#[test]
fn readers_see_whole_commits_while_a_writer_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::create_or_open(&dir.path().join("s"), &config(3), &OpenOptions::default()).unwrap(),
    );
    const BATCH: u64 = 50;
    const BATCHES: u64 = 30;
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            for b in 0..BATCHES {
                let docs: Vec<(String, SimHash)> = (0..BATCH)
                    .map(|i| {
                        let n = b * BATCH + i;
                        (
                            format!("d{n:05}"),
                            SimHash(n.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                        )
                    })
                    .collect();
                let refs: Vec<(&str, SimHash)> =
                    docs.iter().map(|(id, fp)| (id.as_str(), *fp)).collect();
                store.upsert_batch(&refs).unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut seen = 0;
                while seen < BATCH * BATCHES {
                    let snap = store.snapshot().unwrap();
                    let docs = snap.documents().unwrap();
                    let n = docs.len() as u64;
                    assert_eq!(n % BATCH, 0, "a reader saw part of a commit: {n} documents");
                    assert_eq!(snap.len().unwrap(), n);
                    for (id, fp) in docs.iter().step_by(7) {
                        let hits = snap
                            .similar(fp, Tolerance::Distance(0), None, &ONLY)
                            .unwrap();
                        assert!(
                            hits.iter().any(|m| &m.id == id),
                            "{id} not in its own buckets"
                        );
                    }
                    seen = n;
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(store.verify().unwrap(), BATCH * BATCHES);
}

/// A MinHash store's configuration for `params`.
fn minhash_config(params: MinHashParams) -> StoreConfig {
    StoreConfig {
        method: Method::MinHash,
        profile: "minhash".into(),
        version: "test-mh-v1".into(),
        k: 0,
        minhash: Some(params),
        fold: true,
        boilerplate: None,
    }
}

/// The default parameters, and two with few bands of many rows, where sharing a band is
/// rare enough that "shares a band" and "similar enough" often disagree.
fn any_params() -> impl Strategy<Value = MinHashParams> {
    prop::sample::select(vec![
        MinHashParams::DEFAULT,
        "n=32;bands=4x8".parse().unwrap(),
        "shingle=w1;n=24;sig=perm;bands=6x3".parse().unwrap(),
    ])
}

/// Articles as word sequences over a small vocabulary (so unrelated ones still share
/// shingles and similarities spread over 0..1), each with an optional near copy that has a
/// few words replaced.
fn any_word_docs() -> impl Strategy<Value = Vec<Vec<u64>>> {
    let vocab = prop::sample::select(vec![6u64, 12, 40, 1000]);
    vocab.prop_flat_map(|v| {
        prop::collection::vec(
            (
                prop::collection::vec(0..v, 4..40),
                prop::option::of(prop::collection::vec((any::<usize>(), 0..v), 1..6)),
            ),
            1..20,
        )
        .prop_map(|docs| {
            let mut out = Vec::new();
            for (words, edits) in docs {
                if let Some(edits) = edits {
                    let mut copy = words.clone();
                    for (pos, w) in edits {
                        let n = copy.len();
                        copy[pos % n] = w;
                    }
                    out.push(copy);
                }
                out.push(words);
            }
            out
        })
    })
}

/// The signatures of word sequences (a word's hash is a mix of its number).
fn signatures(params: MinHashParams, docs: &[Vec<u64>]) -> Vec<(String, Signature)> {
    let hasher = MinHasher::new(params);
    docs.iter()
        .enumerate()
        .map(|(i, words)| {
            let hashes: Vec<u64> = words
                .iter()
                .map(|w| (w + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
                .collect();
            let sig = hasher.signature_of_hashes(&[hashes]).expect("words");
            (format!("m{i:02}"), sig)
        })
        .collect()
}

/// Estimated Jaccard from scratch: the share of equal positions.
fn jaccard(a: &Signature, b: &Signature) -> f64 {
    let same = a
        .values()
        .iter()
        .zip(b.values())
        .filter(|(x, y)| x == y)
        .count();
    same as f64 / a.len() as f64
}

/// Whether two signatures agree on every value of at least one band.
fn share_a_band(a: &Signature, b: &Signature, p: &MinHashParams) -> bool {
    let rows = usize::from(p.rows);
    (0..usize::from(p.bands)).any(|band| {
        let r = band * rows..(band + 1) * rows;
        a.values()[r.clone()] == b.values()[r]
    })
}

/// What a MinHash query must answer: documents similar enough (and, when `banded`, sharing
/// a band), most similar first, ties by id.
fn brute_minhash(
    docs: &[(String, Signature)],
    q: &Signature,
    t: f64,
    banded: Option<&MinHashParams>,
    exclude: Option<&str>,
) -> Vec<Match> {
    let mut out: Vec<(f64, &String)> = docs
        .iter()
        .filter(|(id, _)| Some(id.as_str()) != exclude)
        .filter(|(_, s)| banded.is_none_or(|p| share_a_band(q, s, p)))
        .map(|(id, s)| (jaccard(q, s), id))
        .filter(|&(j, _)| j >= t - 1e-9)
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    out.into_iter()
        .map(|(j, id)| {
            let s = &docs.iter().find(|(i, _)| i == id).expect("listed").1;
            Match {
                relation: Some(Relation::NearDuplicate),
                containment: q.distinct().zip(s.distinct()).map(|(a, b)| {
                    if a <= b {
                        containment(j, b, a)
                    } else {
                        containment(j, a, b)
                    }
                }),
                ..Match::new(id.clone(), Score::Similarity(j))
            }
        })
        .collect()
}

const THRESHOLDS: [f64; 6] = [0.1, 0.3, 0.4, 0.5, 0.8, 1.0];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The index answers exactly "shares a band and estimated Jaccard ≥ t"; a scan answers
    /// exactly "estimated Jaccard ≥ t"; for several t.
    #[test]
    fn minhash_queries_are_exactly_the_banded_pairs_above_t(
        params in any_params(),
        words in any_word_docs(),
    ) {
        let docs = signatures(params, &words);
        let store = Store::in_memory(&minhash_config(params)).unwrap();
        let refs: Vec<(&str, Signature)> = docs.iter().map(|(id, s)| (id.as_str(), s.clone())).collect();
        store.upsert_batch(&refs).unwrap();
        prop_assert_eq!(store.verify().unwrap(), docs.len() as u64);
        let snap = store.snapshot().unwrap();
        for (id, sig) in &docs {
            let q = Sketch::from(sig.clone());
            for t in THRESHOLDS {
                let tol = Tolerance::similarity(t).unwrap();
                let auto = snap.similar_with(&q, tol, Some(id), Plan::Auto, &ONLY).unwrap();
                prop_assert_eq!(&auto, &brute_minhash(&docs, sig, t, Some(&params), Some(id)), "{} t={}", id, t);
                prop_assert_eq!(&snap.similar(&q, tol, Some(id), &ONLY).unwrap(), &auto);
                let scan = snap.similar_with(&q, tol, Some(id), Plan::Scan, &ONLY).unwrap();
                prop_assert_eq!(&scan, &brute_minhash(&docs, sig, t, None, Some(id)), "{} t={}", id, t);
                prop_assert!(auto.iter().all(|m| scan.contains(m)), "band lookups only drop matches");
                prop_assert!(auto.iter().all(|m| m.score.similarity().unwrap() >= t - 1e-9));
            }
            // Without `exclude` a document finds itself, at similarity 1.
            let own = snap.similar(&q, Tolerance::similarity(1.0).unwrap(), None, &ONLY).unwrap();
            prop_assert!(own.iter().any(|m| &m.id == id && m.score == Score::Similarity(1.0)));
        }
    }

    /// Upsert replaces a signature everywhere, delete removes it: after any sequence of
    /// operations a MinHash store equals a map of id → signature, and answers as it would.
    #[test]
    fn minhash_upserts_and_deletes_match_a_map(
        params in any_params(),
        words in any_word_docs(),
        ops in prop::collection::vec((0u8..10, prop::option::of(any::<prop::sample::Index>())), 1..60),
    ) {
        let pool = signatures(params, &words);
        let store = Store::in_memory(&minhash_config(params)).unwrap();
        let mut model: BTreeMap<String, Signature> = BTreeMap::new();
        for chunk in ops.chunks(6) {
            let owned: Vec<(String, Option<Sketch>)> = chunk
                .iter()
                .map(|(id, pick)| {
                    let sig = pick.as_ref().map(|i| Sketch::from(i.get(&pool).1.clone()));
                    (format!("id{id}"), sig)
                })
                .collect();
            let ops: Vec<neardup::store::Op<'_>> = owned
                .iter()
                .map(|(id, s)| match s {
                    Some(s) => neardup::store::Op::Upsert(id, s),
                    None => neardup::store::Op::Delete(id),
                })
                .collect();
            store.write(&ops).unwrap();
            for (id, s) in owned {
                match s {
                    Some(Sketch::MinHash(sig)) => { model.insert(id, sig); }
                    Some(Sketch::SimHash(_)) => unreachable!(),
                    None => { model.remove(&id); }
                }
            }
        }
        let docs: Vec<(String, Signature)> = model.iter().map(|(i, s)| (i.clone(), s.clone())).collect();
        let listed: Vec<(String, Sketch)> = docs.iter().map(|(i, s)| (i.clone(), Sketch::from(s.clone()))).collect();
        prop_assert_eq!(store.verify().unwrap(), docs.len() as u64);
        let snap = store.snapshot().unwrap();
        prop_assert_eq!(snap.documents().unwrap(), listed);
        for id in 0..10 {
            let id = format!("id{id}");
            prop_assert_eq!(snap.get(&id).unwrap(), model.get(&id).map(|s| Sketch::from(s.clone())));
            match model.get(&id) {
                Some(sig) => prop_assert_eq!(
                    snap.similar_to_id(&id, Tolerance::similarity(0.3).unwrap(), &ONLY).unwrap().unwrap(),
                    brute_minhash(&docs, sig, 0.3, Some(&params), Some(&id))
                ),
                None => prop_assert!(snap.similar_to_id(&id, Tolerance::similarity(0.3).unwrap(), &ONLY).unwrap().is_none()),
            }
        }
    }
}

/// A MinHash and a SimHash store each refuse to be opened as the other, and name `method`.
#[test]
fn a_store_of_one_method_refuses_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let opts = OpenOptions::default();
    let mh = dir.path().join("mh");
    let sh = dir.path().join("sh");
    let sig = signatures(MinHashParams::DEFAULT, &[vec![1, 2, 3, 4, 5, 6]])
        .pop()
        .unwrap()
        .1;
    {
        let s = Store::create_or_open(&mh, &minhash_config(MinHashParams::DEFAULT), &opts).unwrap();
        s.upsert("x", sig.clone()).unwrap();
        Store::create_or_open(&sh, &config(3), &opts)
            .unwrap()
            .upsert("y", SimHash(7))
            .unwrap();
    }
    for (path, wrong, stored, asked) in [
        (&mh, config(3), "minhash", "simhash"),
        (
            &sh,
            minhash_config(MinHashParams::DEFAULT),
            "simhash",
            "minhash",
        ),
    ] {
        let e = Store::create_or_open(path, &wrong, &opts).unwrap_err();
        match &e {
            StoreError::Mismatch {
                what,
                stored: s,
                requested,
                ..
            } => {
                assert_eq!(*what, "method", "{e}");
                assert_eq!((s.as_str(), requested.as_str()), (stored, asked), "{e}");
            }
            other => panic!("expected a method mismatch, got {other}"),
        }
        assert!(e.to_string().contains("--method"), "{e}");
    }
    // Nothing was changed, and the method is what the store was created with.
    let s = Store::open(&mh, &opts).unwrap();
    assert_eq!(s.method(), Method::MinHash);
    assert_eq!(s.config().minhash, Some(MinHashParams::DEFAULT));
    assert_eq!(s.get("x").unwrap(), Some(Sketch::from(sig)));
    assert!(s.ensure_method(Method::SimHash).is_err());
    s.ensure_method(Method::MinHash).unwrap();
    let s = Store::open(&sh, &opts).unwrap();
    assert_eq!(s.method(), Method::SimHash);
    assert_eq!(s.get("y").unwrap(), Some(Sketch::from(SimHash(7))));
}

/// Queries and writes of the other method's kind are errors naming `method`, and change
/// nothing.
#[test]
fn the_wrong_sketch_or_tolerance_kind_is_an_error() {
    let is_method_mismatch = |e: StoreError| {
        assert!(
            matches!(e, StoreError::Mismatch { what: "method", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("--threshold"), "{e}");
    };
    let params = MinHashParams::DEFAULT;
    let sig = signatures(params, &[vec![1, 2, 3, 4, 5, 6]])
        .pop()
        .unwrap()
        .1;
    let mh = Store::in_memory(&minhash_config(params)).unwrap();
    mh.upsert("x", sig.clone()).unwrap();
    is_method_mismatch(mh.similar(sig.clone(), 3u32, None, &ONLY).unwrap_err());
    is_method_mismatch(
        mh.similar(SimHash(1), Tolerance::similarity(0.5).unwrap(), None, &ONLY)
            .unwrap_err(),
    );
    is_method_mismatch(mh.similar_to_id("x", 3u32, &ONLY).unwrap_err());
    is_method_mismatch(
        mh.check(&[("y", sig.clone())], 3u32, true, &ONLY)
            .unwrap_err(),
    );
    assert!(matches!(
        mh.upsert("y", SimHash(1)).unwrap_err(),
        StoreError::Mismatch { what: "method", .. }
    ));
    assert_eq!(mh.verify().unwrap(), 1, "nothing was inserted");

    let sh = Store::in_memory(&config(3)).unwrap();
    sh.upsert("a", SimHash(5)).unwrap();
    is_method_mismatch(
        sh.similar(SimHash(5), Tolerance::similarity(0.5).unwrap(), None, &ONLY)
            .unwrap_err(),
    );
    is_method_mismatch(sh.similar(sig.clone(), 3u32, None, &ONLY).unwrap_err());
    is_method_mismatch(
        sh.check(
            &[("b", SimHash(5))],
            Tolerance::similarity(0.5).unwrap(),
            true,
            &ONLY,
        )
        .unwrap_err(),
    );
    assert!(matches!(
        sh.upsert("b", sig).unwrap_err(),
        StoreError::Mismatch { what: "method", .. }
    ));
    assert_eq!(sh.verify().unwrap(), 1, "nothing was inserted");
    // A signature of other parameters does not go into a MinHash store either.
    let short = signatures("n=32;bands=4x8".parse().unwrap(), &[vec![1, 2, 3]])
        .pop()
        .unwrap()
        .1;
    assert!(matches!(
        mh.upsert("z", short).unwrap_err(),
        StoreError::Mismatch {
            what: "signature length",
            ..
        }
    ));
}

/// 128 bands of one row: any agreeing minimum makes a candidate, so these tests of the
/// relation rule do not depend on which candidates the default bands reach.
fn every_minimum_a_band() -> MinHashParams {
    MinHashParams {
        bands: 128,
        rows: 1,
        ..MinHashParams::DEFAULT
    }
}

fn text_signature(words: std::ops::Range<u64>) -> Signature {
    let hashes: Vec<u64> = words
        .map(|w| (w + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
        .collect();
    MinHasher::new(every_minimum_a_band())
        .signature_of_hashes(&[hashes])
        .unwrap()
}

#[test]
fn a_store_keeps_distinct_counts_and_says_how_matches_relate() {
    let store = Store::in_memory(&minhash_config(every_minimum_a_band())).unwrap();
    let t = Tolerance::similarity(0.3).unwrap();
    let full = text_signature(0..1000);
    let lead = text_signature(0..250);
    store.upsert("full", full.clone()).unwrap();
    store.upsert("other", text_signature(5000..5300)).unwrap();
    let Some(Sketch::MinHash(back)) = store.get("full").unwrap() else {
        panic!("stored")
    };
    assert_eq!(back.distinct(), Some(999));

    // A quarter lead: not a near-duplicate, but contained in the full article.
    let found = store
        .similar(lead.clone(), t, None, &MatchOptions::default())
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let m = &found[0];
    assert_eq!(
        (m.id.as_str(), m.relation),
        ("full", Some(Relation::ContainedIn))
    );
    assert!(m.similarity().unwrap() < 0.3, "{m:?}");
    assert!(m.containment.unwrap() >= 0.7, "{m:?}");
    let json = serde_json::to_value(m).unwrap();
    assert_eq!(json["relation"], "contained_in");
    assert!(store
        .similar(lead.clone(), t, None, &ONLY)
        .unwrap()
        .is_empty());
    assert!(store
        .similar(lead.clone(), t, None, &MatchOptions::NEAR_DUPLICATES_ONLY)
        .unwrap()
        .is_empty());

    // Read from the full article, the lead is contained: "full contains lead".
    store.upsert("lead", lead).unwrap();
    let from_full = store
        .similar_to_id("full", t, &MatchOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(from_full.len(), 1);
    assert_eq!(from_full[0].relation, Some(Relation::Contains));
}

#[test]
fn check_refuses_near_duplicates_and_excerpts_but_not_the_full_story_of_a_stored_teaser() {
    let store = Store::in_memory(&minhash_config(every_minimum_a_band())).unwrap();
    let t = Tolerance::similarity(0.3).unwrap();
    let opts = MatchOptions::default();
    let teaser = text_signature(0..250);
    store.upsert("teaser", teaser.clone()).unwrap();

    let r = store
        .check(&[("story", text_signature(0..1000))], t, true, &opts)
        .unwrap();
    assert_eq!(r[0].matches.len(), 1);
    assert_eq!(r[0].matches[0].relation, Some(Relation::Contains));
    assert!(r[0].inserted && !r[0].is_duplicate(), "{r:?}");

    let r = store
        .check(
            &[("excerpt", text_signature(600..800)), ("copy", teaser)],
            t,
            true,
            &opts,
        )
        .unwrap();
    assert_eq!(r[0].matches[0].id, "story");
    assert_eq!(r[0].matches[0].relation, Some(Relation::ContainedIn));
    assert!(!r[0].inserted && r[0].is_duplicate(), "{r:?}");
    assert!(r[1]
        .matches
        .iter()
        .any(|m| m.id == "teaser" && m.relation == Some(Relation::NearDuplicate)));
    assert!(!r[1].inserted);
    assert_eq!(store.len().unwrap(), 2);
}

//! Each rule once (issue 44, item 3): the painless filter scripts of the query path admit
//! exactly what the library's rule admits.
//!
//! A property test on a live node. Each case is a random corpus in one fresh index holding both
//! methods in the default layout (compact 8-bit MinHash signatures with the containment fields
//! of fields format 4, SimHash as a `long` and four `short` blocks): a base text of synthetic
//! Chinese words, and variants of it whose overlaps fall on both sides of the rule's
//! boundaries: edited copies keeping a random share (0–100 %) of its words, excerpts (a random
//! 10–60 % span, lightly edited: partial copies around the containment threshold and the
//! minimum size), the base with words appended (it contains the base), unrelated texts, and
//! copies whose stored SimHash is the base's with random bits flipped (distances around every
//! k; they hold no MinHash fields, so a MinHash query by their id fingerprints their text).
//!
//! Every document is then the query, by id, of [`Similar`] with [`FilterMode::Server`] and
//! with [`FilterMode::Client`]: MinHash at the default threshold and at a random one, with
//! containment (the default [`MatchOptions`], `SCRIPT_MINHASH_RELATE`) and without
//! (`SCRIPT_MINHASH_BITS`); SimHash at k = 3 (whole blocks), 7 (flipped blocks) and a random
//! k (`SCRIPT_LONG_OR_BLOCKS`). Per query:
//!
//! - (a) both filters answer the same matches (ids, relations, scores, containments);
//! - (b) that answer is the library's own: the reference set is every stored document the
//!   *candidate step* proposes (computed here from the sketches the test wrote: a shared band
//!   term, or with containment at least [`ContainmentMeta::agreeing`] of the first minima's
//!   terms; for SimHash a block within distance 0 or 1 of the query's), and of those the ones
//!   [`Query::relate`] (containment asked) or [`Query::score`] (near-duplicates only) keeps,
//!   from the query sketch the answer reports and the candidate's stored (8-bit) sketch. The
//!   client filter's `transferred` must equal the number of those candidates, which checks
//!   that reference set against Elasticsearch's;
//! - (c) where the node runs painless, the server filter transfers exactly its matches: the
//!   script lets through nothing the rule refuses (and, by (a) and (b), refuses nothing it
//!   keeps). A node without painless (the Elasticsearch 8/9 test nodes) refuses the script
//!   once; the query path then filters on the client, so there the server-filter `Similar`
//!   must report [`FilterMode::Client`] as its effective filter and transfer every candidate,
//!   as the client filter does, while (a) and (b) still hold.
//!
//! The number of cases is bounded ([`CASES`]) and the random source fixed, so that every run
//! (and CI) tries the same corpora; a failing case is shrunk a few steps and printed.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use common::es::{self as t};
use neardup::es::schema::minhash_fields_json;
use neardup::es::{
    simhash_fields_json, ContainmentMeta, FieldNames, FilterMode, IndexMeta, Match, MinHashLayout,
    QueryFingerprint, RetryPolicy, Similar, SimilarOptions, Similarity,
};
use neardup::relation::MatchOptions;
use neardup::store::sort_matches;
use neardup::{Fingerprinter, Query, Signature, SimHash, Sketch, Tolerance};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};

/// Corpora tried per run: each is one index and a few hundred queries.
const CASES: u32 = 8;

/// The characters of the synthetic words (no stop words among them).
const CHARS: &str = "山水风云花草树木江河湖海星辰日月金银铜铁书画诗词歌舞春夏秋冬东南西北红黄蓝绿龙虎鹤鹿马牛羊鱼鸟虫松竹梅兰桃李杏柳琴棋剑茶酒城乡桥路";

/// How a document of a case is made from the base text.
#[derive(Clone, Debug)]
enum Variant {
    /// The base with each word kept with probability `keep` % (else replaced by a new word).
    Edited { keep: u8 },
    /// `len` % of the base's words from `start` % on, each kept with probability `keep` %.
    Excerpt { start: u8, len: u8, keep: u8 },
    /// The base followed by `extra` % as many new words: the base is contained in it.
    Extended { extra: u16 },
    /// `words` new words.
    Unrelated { words: u16 },
    /// The base's text, its stored SimHash the base's with these bits flipped, no MinHash
    /// fields.
    Flipped { bits: Vec<u8> },
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    base_words: usize,
    variants: Vec<Variant>,
    /// A MinHash threshold besides the default one.
    threshold: f64,
    /// A SimHash k besides 3 and 7.
    k: u32,
}

fn variant() -> impl Strategy<Value = Variant> {
    prop_oneof![
        3 => (0u8..=100).prop_map(|keep| Variant::Edited { keep }),
        4 => (0u8..=90, 10u8..=60, 60u8..=100).prop_map(|(start, len, keep)| Variant::Excerpt {
            start: start.min(100 - len),
            len,
            keep,
        }),
        1 => (5u16..=300).prop_map(|extra| Variant::Extended { extra }),
        1 => (3u16..=300).prop_map(|words| Variant::Unrelated { words }),
        2 => proptest::collection::vec(0u8..64, 0..=10).prop_map(|bits| Variant::Flipped { bits }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        40usize..=500,
        proptest::collection::vec(variant(), 5..=12),
        proptest::sample::select(vec![0.1, 0.2, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0]),
        0u32..=7,
    )
        .prop_map(|(seed, base_words, variants, threshold, k)| Case {
            seed,
            base_words,
            variants,
            threshold,
            k,
        })
}

/// The words of a case, drawn from its seed by proptest's ChaCha generator.
struct Words(TestRng);

impl Words {
    fn new(seed: u64) -> Words {
        Words(TestRng::from_seed(
            RngAlgorithm::ChaCha,
            &seed.to_le_bytes().repeat(4),
        ))
    }

    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    fn word(&mut self) -> String {
        let chars: Vec<char> = CHARS.chars().collect();
        let a = chars[self.below(chars.len())];
        let b = chars[self.below(chars.len())];
        format!("{a}{b}")
    }

    fn words(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.word()).collect()
    }

    /// Each word kept with probability `keep` %, else replaced by a new one.
    fn edit(&mut self, words: &[String], keep: u8) -> Vec<String> {
        words
            .iter()
            .map(|w| {
                if self.below(100) < usize::from(keep) {
                    w.clone()
                } else {
                    self.word()
                }
            })
            .collect()
    }
}

/// Words as a text: separated by commas, a sentence every 12 words.
fn text(words: &[String]) -> String {
    let mut s = String::new();
    for (i, w) in words.iter().enumerate() {
        s.push_str(w);
        s.push(if i % 12 == 11 { '。' } else { '，' });
    }
    s
}

/// One stored document: what the test wrote for it.
struct Doc {
    id: String,
    source: Value,
    simhash: Option<SimHash>,
    /// The whole signature (with its distinct shingle count), where MinHash fields are stored.
    signature: Option<Signature>,
}

fn docs(case: &Case, fp: &Fingerprinter, meta: &IndexMeta) -> Vec<Doc> {
    let mut rng = Words::new(case.seed);
    let base = rng.words(case.base_words);
    let base_text = text(&base);
    let minhash = meta.minhash.as_ref().unwrap();
    let make = |id: String, content: String, flipped: Option<&[u8]>| {
        let texts = ["", content.as_str()];
        let mut source = json!({ "title": "", "content": content });
        let fields = source.as_object_mut().unwrap();
        let mut sh = fp.fingerprint_fields(&texts);
        if let (Some(bits), Ok(f)) = (flipped, sh.as_mut()) {
            f.simhash = SimHash(bits.iter().fold(f.simhash.0, |v, b| v ^ (1u64 << b)));
        }
        fields.extend(simhash_fields_json(
            &FieldNames::default(),
            &sh,
            fp.version(),
        ));
        let mut signature = None;
        if flipped.is_none() {
            let mh = fp.minhash_fields(&texts);
            fields.extend(minhash_fields_json(minhash, &mh));
            signature = mh.ok().map(|f| f.signature);
        }
        Doc {
            id,
            source,
            simhash: sh.ok().map(|f| f.simhash),
            signature,
        }
    };
    let mut out = vec![make("base".into(), base_text.clone(), None)];
    for (i, v) in case.variants.iter().enumerate() {
        let id = format!("v{i}");
        let doc = match v {
            Variant::Edited { keep } => make(id, text(&rng.edit(&base, *keep)), None),
            Variant::Excerpt { start, len, keep } => {
                let n = base.len();
                let from = n * usize::from(*start) / 100;
                let to = (from + (n * usize::from(*len)).div_ceil(100)).min(n);
                make(id, text(&rng.edit(&base[from..to], *keep)), None)
            }
            Variant::Extended { extra } => {
                let mut words = base.clone();
                words.extend(rng.words(base.len() * usize::from(*extra) / 100));
                make(id, text(&words), None)
            }
            Variant::Unrelated { words } => make(id, text(&rng.words(usize::from(*words))), None),
            Variant::Flipped { bits } => make(id, base_text.clone(), Some(bits)),
        };
        out.push(doc);
    }
    out
}

/// How many of the first minima's terms of two signatures agree (the containment candidate
/// step: one `term` per query minimum, `minimum_should_match`).
fn agreeing_terms(c: &ContainmentMeta, a: &Signature, b: &Signature) -> usize {
    let b: HashSet<String> = c.minima_terms(b).into_iter().collect();
    c.minima_terms(a).iter().filter(|t| b.contains(*t)).count()
}

/// The library's answer to a MinHash query: of the stored documents other than `query_id`
/// the candidate step proposes, those the rule relates (or scores, without containment), as
/// the query path reports them; and the number of candidates.
fn expected_minhash(
    docs: &[Doc],
    index: &str,
    meta: &IndexMeta,
    query_id: &str,
    query: &Sketch,
    tolerance: Tolerance,
    options: &MatchOptions,
) -> (Vec<Match>, u64) {
    let m = meta.minhash.as_ref().unwrap();
    let containment = m
        .containment
        .as_ref()
        .filter(|_| options.containment.is_some());
    let Sketch::MinHash(q) = query else {
        panic!("{query:?}")
    };
    // The band terms and minima terms are those of the whole signature the query document
    // was made from: stored beside a compact signature, or made from a computed one.
    let whole = docs
        .iter()
        .find(|d| d.id == query_id)
        .and_then(|d| d.signature.clone())
        .unwrap_or_else(|| q.clone());
    let bands: HashSet<String> = m.query_terms(&whole).into_iter().collect();
    let rule = Query::new(query.clone(), tolerance).unwrap();
    let bits = m.layout.signature_bits();
    let mut candidates = 0;
    let mut matches = Vec::new();
    for d in docs.iter().filter(|d| d.id != query_id) {
        let Some(sig) = &d.signature else { continue };
        let shares_band = m.query_terms(sig).iter().any(|t| bands.contains(t));
        let agrees = containment.is_some_and(|c| agreeing_terms(c, &whole, sig) >= c.agreeing());
        if !(shares_band || agrees) {
            continue;
        }
        candidates += 1;
        let stored = Sketch::MinHash(sig.reduced(bits));
        if options.containment.is_some() {
            if let Some(r) = rule.relate(&stored, options) {
                let mut found = Match::in_index(&d.id, index, r.score);
                found.relation = Some(r.relation);
                found.containment = r.containment;
                matches.push(found);
            }
        } else if let Some(score) = rule.score(&stored) {
            matches.push(Match::in_index(&d.id, index, score));
        }
    }
    sort_matches(&mut matches);
    (matches, candidates)
}

/// The library's answer to a SimHash query within `k` (≤ 7), and the number of candidates
/// (a block of the query within distance 0, or for k > 3 within 1).
fn expected_simhash(
    docs: &[Doc],
    index: &str,
    query_id: &str,
    q: SimHash,
    k: u32,
) -> (Vec<Match>, u64) {
    let rule = Query::new(q, Tolerance::Distance(k)).unwrap();
    let reach = if k <= 3 { 0 } else { 1 };
    let mut candidates = 0;
    let mut matches = Vec::new();
    for d in docs.iter().filter(|d| d.id != query_id) {
        let Some(f) = d.simhash else { continue };
        let near_block = (0..4).any(|b| ((f.0 ^ q.0) >> (16 * b) & 0xffff).count_ones() <= reach);
        if !near_block {
            continue;
        }
        candidates += 1;
        if let Some(score) = rule.score(&Sketch::SimHash(f)) {
            matches.push(Match::in_index(&d.id, index, score));
        }
    }
    sort_matches(&mut matches);
    (matches, candidates)
}

fn similar(client: &elasticsearch::Elasticsearch, filter: FilterMode) -> Similar {
    Similar::with_options(
        client.clone(),
        None,
        SimilarOptions {
            filter,
            ..SimilarOptions::default()
        },
        RetryPolicy::none(),
    )
}

/// What the cases exercised, over the whole run: the test fails unless the scripts met
/// candidates on both sides of the rule and partial copies.
static CANDIDATES: AtomicU64 = AtomicU64::new(0);
static MATCHES: AtomicU64 = AtomicU64::new(0);
static PARTIAL: AtomicU64 = AtomicU64::new(0);

/// Checks one query's two answers against the library's (see the module docs).
fn check(
    what: &str,
    server: &Similarity,
    client: &Similarity,
    expected: &(Vec<Match>, u64),
    painless: bool,
) -> Result<(), String> {
    let (want, candidates) = expected;
    CANDIDATES.fetch_add(*candidates, Ordering::Relaxed);
    MATCHES.fetch_add(want.len() as u64, Ordering::Relaxed);
    let partial = want.iter().filter(|m| {
        m.relation
            .is_some_and(|r| r != neardup::relation::Relation::NearDuplicate)
    });
    PARTIAL.fetch_add(partial.count() as u64, Ordering::Relaxed);
    if server.matches != client.matches {
        return Err(format!(
            "{what}: the server filter answers\n{:?}\nthe client filter\n{:?}",
            server.matches, client.matches
        ));
    }
    if &client.matches != want {
        return Err(format!(
            "{what}: Elasticsearch answers\n{:?}\nthe library\n{want:?}",
            client.matches
        ));
    }
    if client.transferred != *candidates {
        return Err(format!(
            "{what}: the client filter read {} candidates, the candidate step proposes {candidates}",
            client.transferred
        ));
    }
    let server_transferred = if painless {
        want.len() as u64
    } else {
        *candidates
    };
    if server.transferred != server_transferred {
        return Err(format!(
            "{what}: the server filter (painless: {painless}) transferred {} documents for {} matches of {candidates} candidates",
            server.transferred,
            want.len()
        ));
    }
    Ok(())
}

/// Runs every query of one case on a fresh index.
async fn run_case(client: &elasticsearch::Elasticsearch, case: &Case) -> Result<(), String> {
    let meta = IndexMeta::default();
    assert_eq!(
        meta.minhash.as_ref().unwrap().layout,
        MinHashLayout::NEW,
        "the default layout"
    );
    let fp = Fingerprinter::for_profile(neardup::Profile::Default);
    let idx = t::initialised(client, "rule-agreement", &meta).await;
    let docs = docs(case, &fp, &meta);
    let sources: Vec<(String, Value)> = docs
        .iter()
        .map(|d| (d.id.clone(), d.source.clone()))
        .collect();
    t::load(client, &idx.name, &sources).await;
    let painless = t::capabilities(client, &idx.name).await.painless;
    let server = similar(client, FilterMode::Server);
    let local = similar(client, FilterMode::Client);
    let index = idx.name.as_str();
    let bits = meta.minhash.as_ref().unwrap().layout.signature_bits();

    for d in &docs {
        for th in [neardup::minhash::DEFAULT_THRESHOLD.get(), case.threshold] {
            let tolerance = Tolerance::similarity(th).unwrap();
            for options in [MatchOptions::default(), MatchOptions::NEAR_DUPLICATES_ONLY] {
                let near = neardup::es::Near::new(tolerance, options);
                let s = server.by_id(index, &d.id, near).await.unwrap();
                let c = local.by_id(index, &d.id, near).await.unwrap();
                let what = format!(
                    "MinHash t={th} containment={} query {}",
                    options.containment.is_some(),
                    d.id
                );
                // A stored signature is the query (its lowest bits, with its distinct count);
                // a document without one is fingerprinted from its text.
                let want_query = match &d.signature {
                    Some(sig) => QueryFingerprint::Stored(Sketch::MinHash(sig.reduced(bits))),
                    None => match fp.minhash_fields(&["", d.source["content"].as_str().unwrap()]) {
                        Ok(f) => QueryFingerprint::Computed(Sketch::MinHash(f.signature)),
                        Err(why) => QueryFingerprint::TooShort(why),
                    },
                };
                assert_eq!(c.query, want_query, "{what}");
                assert_eq!(s.query, want_query, "{what}");
                let expected = match want_query.sketch() {
                    Some(q) => expected_minhash(&docs, index, &meta, &d.id, q, tolerance, &options),
                    None => (Vec::new(), 0),
                };
                check(&what, &s, &c, &expected, painless)?;
            }
        }
        for k in [3, 7, case.k] {
            let s = server.by_id(index, &d.id, k).await.unwrap();
            let c = local.by_id(index, &d.id, k).await.unwrap();
            let what = format!("SimHash k={k} query {}", d.id);
            let expected = match d.simhash {
                Some(q) => {
                    assert_eq!(
                        c.query,
                        QueryFingerprint::Stored(Sketch::SimHash(q)),
                        "{what}"
                    );
                    expected_simhash(&docs, index, &d.id, q, k)
                }
                None => {
                    assert!(c.query.sketch().is_none(), "{what}: {:?}", c.query);
                    (Vec::new(), 0)
                }
            };
            check(&what, &s, &c, &expected, painless)?;
        }
    }
    let effective = if painless {
        FilterMode::Server
    } else {
        FilterMode::Client
    };
    assert_eq!(server.effective_filter(), effective, "painless: {painless}");
    assert_eq!(local.effective_filter(), FilterMode::Client);
    drop(idx);
    for layout in [SimHashLayout::BlocksOnly, SimHashLayout::LongOnly] {
        simhash_layout(client, case, &docs, layout, painless).await?;
    }
    Ok(())
}

/// The other two SimHash scripts: indices without `_meta` (the older Java service's, and
/// those an application mapped itself), whose doc values hold only the blocks or only the
/// `long`.
#[derive(Copy, Clone, Debug)]
enum SimHashLayout {
    /// Four `short` blocks with doc values, no `long`: `SCRIPT_BLOCKS`.
    BlocksOnly,
    /// The `long` with doc values, four `short` blocks without (read from `_source`):
    /// `SCRIPT_LONG`.
    LongOnly,
}

async fn simhash_layout(
    client: &elasticsearch::Elasticsearch,
    case: &Case,
    docs: &[Doc],
    layout: SimHashLayout,
    painless: bool,
) -> Result<(), String> {
    let idx = t::TestIndex::new("rule-agreement-simhash");
    let mut properties = match layout {
        SimHashLayout::BlocksOnly => {
            let short = json!({ "type": "short" });
            json!({ "simHashA": short, "simHashB": short, "simHashC": short, "simHashD": short })
        }
        SimHashLayout::LongOnly => t::java_blocks(),
    };
    if let SimHashLayout::LongOnly = layout {
        properties["simHash"] = json!({ "type": "long" });
    }
    t::create_index(client, &idx.name, properties).await;
    let stored: Vec<(String, Value)> = docs
        .iter()
        .filter_map(|d| {
            let f = d.simhash?;
            let [a, b, c, e] = f.blocks16();
            let mut src = json!({ "simHashA": a, "simHashB": b, "simHashC": c, "simHashD": e });
            if let SimHashLayout::LongOnly = layout {
                src["simHash"] = json!(f.as_i64());
            }
            Some((d.id.clone(), src))
        })
        .collect();
    t::load(client, &idx.name, &stored).await;
    let server = similar(client, FilterMode::Server);
    let local = similar(client, FilterMode::Client);
    let index = idx.name.as_str();
    for d in docs {
        let Some(q) = d.simhash else { continue };
        for k in [3, 7, case.k] {
            let s = server.by_id(index, &d.id, k).await.unwrap();
            let c = local.by_id(index, &d.id, k).await.unwrap();
            let what = format!("SimHash ({layout:?}) k={k} query {}", d.id);
            assert_eq!(
                c.query,
                QueryFingerprint::Stored(Sketch::SimHash(q)),
                "{what}"
            );
            let expected = expected_simhash(docs, index, &d.id, q, k);
            check(&what, &s, &c, &expected, painless)?;
        }
    }
    Ok(())
}

#[test]
fn painless_scripts_admit_exactly_what_the_rule_admits() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(t::client());
    let config = ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 40,
        ..ProptestConfig::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let outcome = runner.run(&case(), |case| {
        rt.block_on(run_case(&client, &case))
            .map_err(TestCaseError::fail)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    let (candidates, matches, partial) = (
        CANDIDATES.load(Ordering::Relaxed),
        MATCHES.load(Ordering::Relaxed),
        PARTIAL.load(Ordering::Relaxed),
    );
    eprintln!("{candidates} candidates, {matches} matches, {partial} partial copies");
    assert!(
        matches > 0 && partial > 0,
        "{matches} matches, {partial} partial"
    );
    assert!(candidates > matches, "no candidate was refused");
}

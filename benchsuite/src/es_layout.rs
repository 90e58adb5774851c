//! `neardup-bench es-layout`: what compact layouts of the fingerprint fields would cost on
//! Elasticsearch (issue 21, part 1). A measurement only: the layout neardup writes is
//! unchanged; the compact options exist here, in the bench.
//!
//! Each option is a mapping and a function giving one document's fields ([`Layout`]): today's
//! fields as the library writes them (`es::fingerprint_fields_json`), with one or more axes
//! changed (band terms, signature, versions). For each option a fresh index holds the
//! corpus articles as they are (their own fields) plus the option's fields; a baseline index
//! holds the articles alone. Each is bulk-loaded, force-merged to one segment, and measured
//! by `_stats` (primaries' store size): bytes per article of the option's fields = (option −
//! baseline) / articles. Where the engine has it (Elasticsearch ≥ 7.15), `_disk_usage` says
//! where the bytes go (inverted index, doc values, points, stored `_source`).
//!
//! `--offline` needs no Elasticsearch: for the b-bit signatures (Li & König: keep the lowest
//! b bits of each minimum, estimate Ĵ = (P̂ − C)/(1 − C) with C = 2^-b), the precision and
//! recall of the MinHash rule (shares a band, estimate ≥ t) against the full signature's
//! answer on the corpus pairs that share a band, and against labelled pairs (`--pairs`, as
//! `neardup eval --generate` writes them); and the random candidates per query that shorter
//! band terms add (expected at 1M and 20M documents, counted on the corpus).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufReader;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method as Http;
use elasticsearch::Elasticsearch;
use neardup::es::{
    self, fingerprint_fields_json, sketch_source, BlockType, Body, ContainmentMeta, FieldNames,
    IndexMeta, MinHashFieldNames, MinHashLayout, RetryPolicy, SimilarOptions,
};
use neardup::eval::minhash::banded_similarity;
use neardup::eval::{read_pairs, Confusion};
use neardup::input::{self, field_texts, Lines};
use neardup::minhash::Threshold;
use neardup::{Fingerprinter, MinHashParams, Sketches};
use neardup::{Method, Methods, Signature};
use rayon::prelude::*;
use serde_json::{json, Map, Value};

use crate::es_similar::{bulk_load, merge_to_one_segment, stats};
use neardup::cli::common::{self, CmdResult, ProfileArgs, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  neardup-bench es-layout --es http://127.0.0.1:9272 -i ../shared/data/zh_articles.jsonl.gz
  neardup-bench es-layout --offline -i ../shared/data/zh_articles.jsonl.gz --pairs pairs-seed12.jsonl
  neardup-bench es-layout --list")]
pub struct EsLayoutBench {
    #[command(flatten)]
    es: EsArgs,
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    /// Each document holds the article's own fields as the file gives them.
    #[arg(long, short, required_unless_present = "list")]
    input: Option<String>,
    /// Use only the first N articles (default: all).
    #[arg(long, value_name = "N")]
    docs: Option<usize>,
    /// The options to measure, comma-separated (default: all; the baseline is always
    /// measured). `--list` names them.
    #[arg(long, value_delimiter = ',', value_name = "OPTION")]
    only: Vec<String>,
    /// Print the options and what each writes, then exit.
    #[arg(long)]
    list: bool,
    /// No Elasticsearch: b-bit precision and recall, and random candidates of shorter band
    /// terms, computed in memory.
    #[arg(long)]
    offline: bool,
    /// With --offline: labelled pairs to score the b-bit estimates on (JSON Lines, as `neardup
    /// eval --generate` writes them; held out: `--seed 12`).
    #[arg(long, value_name = "PATH", requires = "offline")]
    pairs: Option<PathBuf>,
    /// MinHash threshold of the rule (shares a band, estimated Jaccard ≥ T).
    #[arg(long, default_value_t = neardup::minhash::DEFAULT_THRESHOLD, value_name = "T", value_parser = common::parse_threshold)]
    threshold: Threshold,
    /// Keep the indices afterwards (each is deleted once measured otherwise).
    #[arg(long)]
    keep: bool,
    /// The indices are named PREFIX-OPTION.
    #[arg(long, default_value = "neardup-layout", value_name = "PREFIX")]
    index_prefix: String,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// Articles per bulk request.
const CHUNK: usize = 1_000;

/// How the MinHash band terms are written.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Bands {
    /// Today: the 64-bit key as 16 hex digits, a `keyword` array ([`es::schema::band_term`]).
    Hex64,
    /// The key's highest bits in base64url ([`band_term_b64`]), a `keyword` array.
    Keyword(u32),
    /// The same terms as one space-separated string in a `text` field (`whitespace`
    /// analyzer, `index_options: docs`, no norms).
    Text(u32),
}

/// How the signature is kept.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Sig {
    /// Today's 128 32-bit minima, base64 in a `binary` field (today: with doc values).
    Full { doc_values: bool },
    /// The lowest `bits` bits of each minimum, packed ([`low_bits`]), base64 in `binary`.
    Low { bits: u32, doc_values: bool },
    /// No signature.
    None,
}

/// How the version strings are kept.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Versions {
    /// Today: each method's version string (~110 characters) in every document.
    Full,
    /// An 8-character code of it ([`version_code`]) in every document.
    Code,
    /// None in the documents: once in the mapping's `_meta`.
    None,
}

/// One option: what it holds and how.
#[derive(Clone, Debug)]
struct Layout {
    name: &'static str,
    methods: Methods,
    bands: Bands,
    sig: Sig,
    versions: Versions,
    /// The library's MinHash layout the fields start from: the full one for the options
    /// measured before neardup wrote another; the options `neardup-compact-b8`/`-b4` are the
    /// compact layout exactly as the library writes it (their axes stay at "today", which
    /// then changes nothing).
    library: MinHashLayout,
    /// The containment fields (fields format 4, or 3 with terms for every minimum) as the
    /// library records them; `None`: without them. Only the `neardup-containment-*` options
    /// hold them.
    containment: Option<ContainmentMeta>,
}

const NONE: Methods = Methods {
    simhash: false,
    minhash: false,
};
const TODAY_SIG: Sig = Sig::Full { doc_values: true };

/// Format 3's containment with `bits` of each minimum.
fn format_3(bits: u8) -> ContainmentMeta {
    ContainmentMeta {
        minimum_bits: bits,
        ..ContainmentMeta::format_3()
    }
}

/// Every option: the baseline, today's three, each axis against today's others (both
/// methods), then combinations.
fn layouts() -> Vec<Layout> {
    let both = |name, bands, sig, versions| Layout {
        name,
        methods: Methods::BOTH,
        bands,
        sig,
        versions,
        library: MinHashLayout::Full,
        containment: None,
    };
    let today = |name, methods| Layout {
        name,
        methods,
        bands: Bands::Hex64,
        sig: TODAY_SIG,
        versions: Versions::Full,
        library: MinHashLayout::Full,
        containment: None,
    };
    let library = |name, signature_bits| Layout {
        library: MinHashLayout::Compact { signature_bits },
        ..today(name, Methods::BOTH)
    };
    let (hex, full) = (Bands::Hex64, Versions::Full);
    let low = |bits, doc_values| Sig::Low { bits, doc_values };
    vec![
        today("baseline", NONE),
        today("today-both", Methods::BOTH),
        today("today-simhash", Methods::only(Method::SimHash)),
        today("today-minhash", Methods::only(Method::MinHash)),
        library("neardup-compact-b8", 8),
        library("neardup-compact-b4", 4),
        // Fields format 4 (the default): the compact layout with a term for each of the
        // first 64 minima (6 bits of position, 18 of the minimum: 4 characters) and the
        // distinct shingle count. Fields format 3: a term for every minimum (7 bits of
        // position and 11, 10 (format 3's) or 9 bits make 3 characters, 17 bits 4).
        Layout {
            containment: Some(ContainmentMeta::new()),
            ..library("neardup-containment-b8", 8)
        },
        Layout {
            containment: Some(ContainmentMeta::format_3()),
            ..library("neardup-containment-b8-f3", 8)
        },
        Layout {
            containment: Some(format_3(11)),
            ..library("neardup-containment-b8-f3-m11", 8)
        },
        Layout {
            containment: Some(format_3(17)),
            ..library("neardup-containment-b8-f3-m17", 8)
        },
        Layout {
            containment: Some(format_3(9)),
            ..library("neardup-containment-b8-f3-m9", 8)
        },
        both(
            "bands-b64url32-keyword",
            Bands::Keyword(32),
            TODAY_SIG,
            full,
        ),
        both("bands-b64url32-text", Bands::Text(32), TODAY_SIG, full),
        both(
            "bands-b64url64-keyword",
            Bands::Keyword(64),
            TODAY_SIG,
            full,
        ),
        both(
            "bands-b64url24-keyword",
            Bands::Keyword(24),
            TODAY_SIG,
            full,
        ),
        both("sig-full-nodv", hex, Sig::Full { doc_values: false }, full),
        both("sig-b8-dv", hex, low(8, true), full),
        both("sig-b8-nodv", hex, low(8, false), full),
        both("sig-b4-dv", hex, low(4, true), full),
        both("sig-b4-nodv", hex, low(4, false), full),
        both("sig-none", hex, Sig::None, full),
        both("versions-code", hex, TODAY_SIG, Versions::Code),
        both("versions-none", hex, TODAY_SIG, Versions::None),
        both(
            "compact-text32-b8-dv-meta",
            Bands::Text(32),
            low(8, true),
            Versions::None,
        ),
        both(
            "compact-text32-b4-dv-meta",
            Bands::Text(32),
            low(4, true),
            Versions::None,
        ),
        both(
            "compact-text32-b4-nodv-meta",
            Bands::Text(32),
            low(4, false),
            Versions::None,
        ),
        both(
            "compact-text32-nosig-meta",
            Bands::Text(32),
            Sig::None,
            Versions::None,
        ),
    ]
}

impl Layout {
    fn describe_bands(&self) -> String {
        if !self.methods.minhash {
            return "–".into();
        }
        match self.bands {
            Bands::Hex64 => "64-bit hex, keyword".into(),
            Bands::Keyword(b) => format!("{b}-bit base64url, keyword"),
            Bands::Text(b) => format!("{b}-bit base64url, text"),
        }
    }

    fn describe_sig(&self) -> String {
        if !self.methods.minhash {
            return "–".into();
        }
        let dv = |d: bool| if d { "doc values" } else { "no doc values" };
        match self.sig {
            Sig::Full { doc_values } => format!("32-bit minima, {}", dv(doc_values)),
            Sig::Low { bits, doc_values } => format!("{bits}-bit minima, {}", dv(doc_values)),
            Sig::None => "none".into(),
        }
    }

    fn describe_versions(&self) -> &'static str {
        if !self.methods.simhash && !self.methods.minhash {
            return "–";
        }
        match self.versions {
            Versions::Full => "strings",
            Versions::Code => "8-char code",
            Versions::None => "in _meta",
        }
    }

    /// The library's description of an index holding this option's methods (today's
    /// fields and names); the option changes what it writes from there.
    fn meta(&self, fp: &Fingerprinter) -> IndexMeta {
        let meta = IndexMeta::new(
            fp.config(),
            self.methods,
            BlockType::Short,
            FieldNames::default(),
            MinHashFieldNames::default(),
        )
        .with_layout(self.library)
        .with_containment(self.containment.is_some());
        match &self.containment {
            Some(c) => meta.with_containment_terms(c.clone()),
            None => meta,
        }
    }

    /// The `properties` of the option's fields: today's mapping, changed per axis.
    fn properties(&self, meta: &IndexMeta) -> Map<String, Value> {
        let mut props = match meta.mapping()["properties"].take() {
            Value::Object(p) => p,
            _ => Map::new(),
        };
        if let Some(h) = &meta.minhash {
            if let Bands::Text(_) = self.bands {
                props.insert(
                    h.fields.bands.clone(),
                    json!({ "type": "text", "analyzer": "whitespace",
                            "index_options": "docs", "norms": false }),
                );
            }
            match self.sig {
                Sig::Full { doc_values } | Sig::Low { doc_values, .. } => {
                    props[&h.fields.signature]["doc_values"] = json!(doc_values);
                }
                Sig::None => {
                    props.remove(&h.fields.signature);
                }
            }
        }
        if self.versions == Versions::None {
            for v in version_fields(meta) {
                props.remove(&v);
            }
        }
        props
    }

    /// One document's fields: what the library writes today, changed per axis.
    fn fields(&self, meta: &IndexMeta, sketches: &Sketches) -> Map<String, Value> {
        let mut m = fingerprint_fields_json(meta, sketches);
        if let Some(h) = &meta.minhash {
            if let Some(Ok(f)) = &sketches.minhash {
                let terms = || -> Vec<String> {
                    let bits = match self.bands {
                        Bands::Keyword(b) | Bands::Text(b) => b,
                        Bands::Hex64 => 64,
                    };
                    f.signature
                        .band_keys(&h.params)
                        .into_iter()
                        .map(|k| band_term_b64(k, bits))
                        .collect()
                };
                match self.bands {
                    Bands::Hex64 => {}
                    Bands::Keyword(_) => {
                        m.insert(h.fields.bands.clone(), json!(terms()));
                    }
                    Bands::Text(_) => {
                        m.insert(h.fields.bands.clone(), json!(terms().join(" ")));
                    }
                }
                if let Sig::Low { bits, .. } = self.sig {
                    let packed = low_bits(f.signature.values(), bits);
                    m.insert(h.fields.signature.clone(), json!(base64_std(&packed)));
                }
            }
            if self.sig == Sig::None {
                m.remove(&h.fields.signature);
            }
        }
        for v in version_fields(meta) {
            match self.versions {
                Versions::Full => {}
                Versions::Code => {
                    if let Some(Value::String(s)) = m.get(&v) {
                        let code = version_code(s);
                        m.insert(v, json!(code));
                    }
                }
                Versions::None => {
                    m.remove(&v);
                }
            }
        }
        m
    }
}

/// The names of the version fields of the methods `meta` holds.
fn version_fields(meta: &IndexMeta) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = &meta.simhash {
        out.push(s.fields.version.clone());
    }
    if let Some(h) = &meta.minhash {
        out.push(h.fields.version.clone());
    }
    out
}

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A compact band term: the key's highest `bits` bits (1–64) in base64url without padding,
/// 6 bits per character, highest first, the last character filled up with zero bits. For 32
/// bits that is the 6 characters base64url gives the key's 4 high bytes (big-endian); 64
/// bits give 11; 24 bits give 4.
fn band_term_b64(key: u64, bits: u32) -> String {
    assert!((1..=64).contains(&bits), "1 to 64 bits");
    let top = u128::from(key >> (64 - bits));
    let chars = bits.div_ceil(6);
    let filled = top << (chars * 6 - bits);
    (0..chars)
        .rev()
        .map(|i| char::from(B64URL[((filled >> (6 * i)) & 63) as usize]))
        .collect()
}

/// Standard base64 with padding, what a `binary` field takes.
fn base64_std(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let byte = |i: usize| u32::from(c.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(B64STD[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The lowest `bits` bits of each value, packed: value `i`'s bits start at bit `i × bits`
/// of the little-endian byte string (for 4 bits: value 0 in the low nibble of byte 0).
fn low_bits(values: &[u32], bits: u32) -> Vec<u8> {
    let b = bits as usize;
    let mut out = vec![0u8; (values.len() * b).div_ceil(8)];
    for (i, &v) in values.iter().enumerate() {
        for k in 0..b {
            if (v >> k) & 1 == 1 {
                let at = i * b + k;
                out[at / 8] |= 1 << (at % 8);
            }
        }
    }
    out
}

/// The mask of the lowest `bits` bits.
fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Li & König's b-bit estimate of the Jaccard similarity of two signatures from the lowest
/// `bits` bits of their minima: Ĵ = (P̂ − C) / (1 − C), where P̂ is the share of positions
/// whose low bits agree and C = 2^-bits the chance that two unrelated (uniform) minima's do.
/// It can be negative. For 32 bits it is the full estimate up to C = 2^-32.
fn bbit_similarity(a: &[u32], b: &[u32], bits: u32) -> f64 {
    let m = mask(bits);
    let agree = a
        .iter()
        .zip(b)
        .filter(|(x, y)| (**x ^ **y) & m == 0)
        .count();
    let p = agree as f64 / a.len().max(1) as f64;
    let c = 0.5f64.powi(bits as i32);
    (p - c) / (1.0 - c)
}

/// An 8-character code of a version string (FNV-1a, 32 bits, hex), standing for it in
/// every document (a table of codes would live in `_meta`).
fn version_code(version: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in version.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// The corpus: each article as the file gives it, and its id.
struct Corpus {
    docs: Vec<(String, Map<String, Value>)>,
}

fn read_corpus(path: &str, limit: Option<usize>) -> anyhow::Result<Corpus> {
    let source = input::open(path)?;
    let mut docs = Vec::new();
    for (line, raw) in Lines::new(source.reader) {
        if limit.is_some_and(|n| docs.len() >= n) {
            break;
        }
        let raw = raw.with_context(|| format!("{path}:{line}"))?;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Map<String, Value> = serde_json::from_slice(&raw)
            .with_context(|| format!("{path}:{line}: not a JSON object"))?;
        let id = match v.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => anyhow::bail!("{path}:{line}: no `id`"),
        };
        docs.push((id, v));
    }
    anyhow::ensure!(!docs.is_empty(), "{path} holds no article");
    Ok(Corpus { docs })
}

/// Sketches of every article with `methods` (rayon), from the text fields `similar` reads.
fn sketch_corpus(
    corpus: &Corpus,
    fp: &Fingerprinter,
    methods: Methods,
) -> anyhow::Result<Vec<Sketches>> {
    let fields = SimilarOptions::default().text_fields;
    corpus
        .docs
        .par_iter()
        .map(|(id, doc)| {
            sketch_source(fp, methods, &Value::Object(doc.clone()), &fields)
                .with_context(|| format!("article {id}"))
        })
        .collect()
}

pub fn run(args: EsLayoutBench) -> CmdResult {
    let all = layouts();
    if args.list {
        println!("| option | band terms | signature | versions |");
        println!("|---|---|---|---|");
        for l in &all {
            println!(
                "| {} | {} | {} | {} |",
                l.name,
                l.describe_bands(),
                l.describe_sig(),
                l.describe_versions()
            );
        }
        return Ok(Status::Done);
    }
    let path = args.input.clone().expect("clap requires --input");
    for o in &args.only {
        common::ensure_usage(
            all.iter().any(|l| l.name == o),
            &format!("unknown option `{o}`: see --list"),
        )?;
    }
    let fp = args.profile.fingerprinter()?;
    let started = Instant::now();
    let corpus = read_corpus(&path, args.docs)?;
    if args.offline {
        let sketches = sketch_corpus(&corpus, &fp, Methods::only(Method::MinHash))?;
        eprintln!(
            "read and sketched {} articles in {:.0} s",
            corpus.docs.len(),
            started.elapsed().as_secs_f64()
        );
        return offline(&args, &path, &sketches, &fp);
    }
    let sketches = sketch_corpus(&corpus, &fp, Methods::BOTH)?;
    eprintln!(
        "read and sketched {} articles in {:.0} s",
        corpus.docs.len(),
        started.elapsed().as_secs_f64()
    );
    let chosen: Vec<Layout> = all
        .into_iter()
        .filter(|l| {
            l.name == "baseline" || args.only.is_empty() || args.only.contains(&l.name.to_owned())
        })
        .collect();
    measure(&args, &path, &corpus, &sketches, &fp, &chosen)
}

/// What one index measured.
struct Measured {
    layout: Layout,
    store: u64,
    /// Mean bytes of the option's fields in a document's JSON (uncompressed `_source`).
    json: f64,
    load_secs: f64,
    usage: Option<Value>,
}

fn measure(
    args: &EsLayoutBench,
    path: &str,
    corpus: &Corpus,
    sketches: &[Sketches],
    fp: &Fingerprinter,
    chosen: &[Layout],
) -> CmdResult {
    let (es_config, client) = args.es.client()?;
    let retry = RetryPolicy::default();
    let n = corpus.docs.len();
    es_args::runtime()?.block_on(async {
        let version = es::server_version(&client, &retry).await?;
        let mut results = Vec::new();
        for layout in chosen {
            let index = format!("{}-{}", args.index_prefix, layout.name);
            let meta = layout.meta(fp);
            let t = Instant::now();
            let _ = es::send(&client, Http::Delete, &format!("/{index}"), &[], None).await?;
            let mut props = Map::new();
            props.insert("id".into(), json!({ "type": "keyword" }));
            props.insert("title".into(), json!({ "type": "text" }));
            props.insert("content".into(), json!({ "type": "text" }));
            props.extend(layout.properties(&meta));
            let body = json!({
                "settings": { "index": { "number_of_shards": 1, "number_of_replicas": 0,
                                         "refresh_interval": "-1" } },
                "mappings": {
                    "_meta": { "neardup_layout": {
                        "option": layout.name,
                        "versions": { "simhash": meta.version(Method::SimHash),
                                      "minhash": meta.version(Method::MinHash) } } },
                    "properties": props,
                },
            });
            es::request(
                &client,
                &retry,
                "create layout index",
                Http::Put,
                &format!("/{index}"),
                &[],
                Some(&Body::Json(body)),
            )
            .await?;
            let mut json_bytes = 0usize;
            for (docs, sk) in corpus.docs.chunks(CHUNK).zip(sketches.chunks(CHUNK)) {
                let mut nd = String::new();
                for ((id, article), s) in docs.iter().zip(sk) {
                    let fields = layout.fields(&meta, s);
                    let bare = Value::Object(article.clone()).to_string().len();
                    let mut doc = article.clone();
                    doc.extend(fields);
                    let doc = Value::Object(doc).to_string();
                    json_bytes += doc.len() - bare;
                    nd.push_str(&json!({ "index": { "_id": id } }).to_string());
                    nd.push('\n');
                    nd.push_str(&doc);
                    nd.push('\n');
                }
                bulk_load(&client, &retry, &index, nd).await?;
            }
            merge_to_one_segment(&client, &retry, &[&index]).await?;
            let s = stats(&client, &index).await?;
            anyhow::ensure!(
                s.docs == n as u64,
                "{index} holds {} documents, not {n}",
                s.docs
            );
            let usage = disk_usage(&client, &index).await?;
            results.push(Measured {
                layout: layout.clone(),
                store: s.bytes,
                json: json_bytes as f64 / n as f64,
                load_secs: t.elapsed().as_secs_f64(),
                usage,
            });
            eprintln!(
                "{index}: {} bytes in {:.0} s",
                s.bytes,
                t.elapsed().as_secs_f64()
            );
            if !args.keep {
                es::request(
                    &client,
                    &retry,
                    "delete layout index",
                    Http::Delete,
                    &format!("/{index}"),
                    &[],
                    None,
                )
                .await?;
            }
        }
        print_tables(&version, &es_config.display_urls(), path, n, &results);
        Ok(Status::Done)
    })
}

/// `POST /{index}/_disk_usage?run_expensive_tasks=true`, or `None` where the engine has no
/// such API (Elasticsearch before 7.15, OpenSearch).
async fn disk_usage(client: &Elasticsearch, index: &str) -> anyhow::Result<Option<Value>> {
    let r = es::send(
        client,
        Http::Post,
        &format!("/{index}/_disk_usage"),
        &[("run_expensive_tasks", "true")],
        None,
    )
    .await?;
    Ok((r.status.as_u16() == 200).then(|| r.body[index].clone()))
}

/// Bytes of one kind (`inverted_index`, `doc_values`, `points`, `norms`, `stored_fields`) of
/// a field in a `_disk_usage` answer (0 when absent).
fn usage_bytes(usage: &Value, field: &str, kind: &str) -> u64 {
    let f = &usage["fields"][field];
    match kind {
        "inverted_index" => f["inverted_index"]["total_in_bytes"].as_u64(),
        _ => f[format!("{kind}_in_bytes")].as_u64(),
    }
    .unwrap_or(0)
}

fn print_tables(version: &str, urls: &str, path: &str, n: usize, results: &[Measured]) {
    let base = results
        .iter()
        .find(|m| m.layout.name == "baseline")
        .expect("the baseline is always measured");
    let today = results.iter().find(|m| m.layout.name == "today-both");
    let per = |bytes: f64| bytes / n as f64;
    println!(
        "Elasticsearch {version} at {urls}; {n} articles of {path}, each with its own fields; one index per option, 1 shard, 0 replicas, force-merged to 1 segment; bytes per article = (store of the option − store of the baseline) / {n}"
    );
    println!();
    println!("| option | band terms | signature | versions | store bytes | B/article | × today-both | JSON B/article (uncompressed) | loaded + merged in s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for m in results {
        let delta = per(m.store as f64 - base.store as f64);
        let ratio = today
            .map(|t| {
                let t = per(t.store as f64 - base.store as f64);
                format!("{:.2}", delta / t)
            })
            .unwrap_or_else(|| "–".into());
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {:.0} | {:.0} |",
            m.layout.name,
            m.layout.describe_bands(),
            m.layout.describe_sig(),
            m.layout.describe_versions(),
            m.store,
            delta,
            ratio,
            m.json,
            m.load_secs
        );
    }
    let Some(base_usage) = &base.usage else {
        println!();
        println!("(no `_disk_usage` on this engine: Elasticsearch 7.15 or later has it)");
        return;
    };
    // Where the bytes go: the option's own fields, and what `_source` (stored fields) grew by.
    let kinds = ["inverted_index", "doc_values", "points", "norms"];
    let total_stored = |u: &Value| {
        u["all_fields"]["stored_fields_in_bytes"]
            .as_u64()
            .unwrap_or(0)
    };
    println!();
    println!("`_disk_usage` (B/article): the option's fields, and stored fields (`_source`) over the baseline's; `rest` = the store's growth not attributed to those:");
    println!();
    println!("| option | inverted index | doc values | points | norms | stored fields (`_source`) | rest | B/article (`_stats`) |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut per_field = BTreeMap::new();
    for m in results {
        let Some(u) = &m.usage else { continue };
        let names: Vec<String> = u["fields"]
            .as_object()
            .map(|f| {
                f.keys()
                    .filter(|k| base_usage["fields"].get(k.as_str()).is_none())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let sums: Vec<f64> = kinds
            .iter()
            .map(|k| per(names.iter().map(|f| usage_bytes(u, f, k)).sum::<u64>() as f64))
            .collect();
        let stored = per(total_stored(u) as f64 - total_stored(base_usage) as f64);
        let delta = per(m.store as f64 - base.store as f64);
        let rest = delta - sums.iter().sum::<f64>() - stored;
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            m.layout.name, sums[0], sums[1], sums[2], sums[3], stored, rest, delta
        );
        for f in names {
            let row: Vec<f64> = kinds
                .iter()
                .map(|k| per(usage_bytes(u, &f, k) as f64))
                .collect();
            per_field
                .entry(m.layout.name)
                .or_insert_with(Vec::new)
                .push((f, row));
        }
    }
    println!();
    println!("Per field (B/article):");
    println!();
    println!("| option | field | inverted index | doc values | points | norms |");
    println!("|---|---|---|---|---|---|");
    for m in results {
        for (f, row) in per_field.get(m.layout.name).into_iter().flatten() {
            println!(
                "| {} | {f} | {:.1} | {:.1} | {:.1} | {:.1} |",
                m.layout.name, row[0], row[1], row[2], row[3]
            );
        }
    }
}

/// b of the b-bit estimates scored offline.
const BBITS: [u32; 5] = [16, 8, 4, 2, 1];
/// Band-term widths whose random candidates are counted.
const TERM_BITS: [u32; 4] = [64, 36, 32, 24];

fn offline(
    args: &EsLayoutBench,
    path: &str,
    sketches: &[Sketches],
    fp: &Fingerprinter,
) -> CmdResult {
    let params = fp.config().minhash;
    let t = args.threshold;
    let sigs: Vec<Option<Signature>> = sketches
        .iter()
        .map(|s| {
            s.minhash
                .as_ref()
                .and_then(|m| m.as_ref().ok())
                .map(|f| f.signature.clone())
        })
        .collect();
    let n = sigs.len();
    let with_sig = sigs.iter().flatten().count();
    println!(
        "{n} articles of {path} ({with_sig} with a signature); MinHash {params}, threshold {t}; {}",
        fp.minhash_version()
    );

    // Random candidates of shorter band terms.
    let bands = f64::from(params.bands);
    println!();
    println!("Random candidates per query of band terms cut to `bits` bits, expected: all bands' terms in one field (today's `terms` query), N·bands²/2^bits; with the band number in the term, N·bands/2^bits:");
    println!();
    println!("| bits | N = 1M, one field | N = 20M, one field | N = 1M, band in term | N = 20M, band in term |");
    println!("|---|---|---|---|---|");
    for bits in TERM_BITS {
        let e = |docs: f64, per_doc: f64| docs * per_doc / 2f64.powi(bits as i32);
        println!(
            "| {bits} | {:.4} | {:.4} | {:.4} | {:.4} |",
            e(1e6, bands * bands),
            e(2e7, bands * bands),
            e(1e6, bands),
            e(2e7, bands)
        );
    }
    println!();
    println!("Counted on the corpus ({with_sig} queries, each article's own terms; one field, as today's query): candidates per query other than itself");
    println!();
    println!("| bits | candidates per query: mean | of which random (over 64 bits) | expected random (N − 1)·bands²/2^bits |");
    println!("|---|---|---|---|");
    let mut full_mean = None;
    for bits in TERM_BITS {
        let mean = candidates_per_query(&sigs, &params, bits);
        let full = *full_mean.get_or_insert(mean);
        println!(
            "| {bits} | {mean:.4} | {:.4} | {:.4} |",
            mean - full,
            (with_sig as f64 - 1.0) * bands * bands / 2f64.powi(bits as i32)
        );
    }

    // Corpus pairs sharing a band: the full answer against the b-bit ones.
    let started = Instant::now();
    let pairs = banded_pairs(&sigs, &params);
    let full: Vec<bool> = pairs
        .par_iter()
        .map(|&(a, b)| t.admits(sig(&sigs, a).similarity(sig(&sigs, b))))
        .collect();
    let full_count = full.iter().filter(|&&x| x).count();
    println!();
    println!(
        "Corpus pairs sharing a band: {} (found in {:.1} s); the full signature admits {full_count} (estimate ≥ {t}). Each b-bit rule against that answer:",
        pairs.len(),
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| score | admitted | of them in the full answer | precision vs full | recall vs full |"
    );
    println!("|---|---|---|---|---|");
    let row = |name: &str, decided: &[bool]| {
        let admitted = decided.iter().filter(|&&x| x).count();
        let both = decided
            .iter()
            .zip(&full)
            .filter(|(d, f)| **d && **f)
            .count();
        println!(
            "| {name} | {admitted} | {both} | {:.4} | {:.4} |",
            both as f64 / admitted.max(1) as f64,
            both as f64 / full_count.max(1) as f64
        );
    };
    row("full (32-bit minima)", &full);
    for bits in BBITS {
        let decided: Vec<bool> = pairs
            .par_iter()
            .map(|&(a, b)| {
                t.admits(bbit_similarity(
                    sig(&sigs, a).values(),
                    sig(&sigs, b).values(),
                    bits,
                ))
            })
            .collect();
        row(&format!("{bits}-bit"), &decided);
    }
    row("no signature (shares a band)", &vec![true; pairs.len()]);

    if let Some(p) = &args.pairs {
        labelled(p, fp, &params, t)?;
    }
    Ok(Status::Done)
}

fn sig(sigs: &[Option<Signature>], i: u32) -> &Signature {
    sigs[i as usize]
        .as_ref()
        .expect("only articles with a signature are paired")
}

/// Mean number of other articles sharing at least one band term with an article, the terms
/// cut to `bits` bits and all bands in one field (as today's query: one `terms` query).
fn candidates_per_query(sigs: &[Option<Signature>], params: &MinHashParams, bits: u32) -> f64 {
    let cut = |k: u64| k >> (64 - bits);
    let mut postings: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut terms: Vec<Vec<u64>> = Vec::with_capacity(sigs.len());
    for (i, s) in sigs.iter().enumerate() {
        let mut ts: Vec<u64> = s
            .as_ref()
            .map(|s| s.band_keys(params).into_iter().map(cut).collect())
            .unwrap_or_default();
        ts.sort_unstable();
        ts.dedup();
        for &term in &ts {
            postings.entry(term).or_default().push(i as u32);
        }
        terms.push(ts);
    }
    let queries = sigs.iter().flatten().count();
    let total: usize = (0..sigs.len())
        .into_par_iter()
        .map(|q| {
            let mut seen = HashSet::new();
            for t in &terms[q] {
                seen.extend(postings[t].iter().copied().filter(|&d| d as usize != q));
            }
            seen.len()
        })
        .sum();
    total as f64 / queries.max(1) as f64
}

/// Every pair of articles whose signatures share a band (full 64-bit keys), `a < b`.
fn banded_pairs(sigs: &[Option<Signature>], params: &MinHashParams) -> Vec<(u32, u32)> {
    let mut buckets: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, s) in sigs.iter().enumerate() {
        if let Some(s) = s {
            for k in s.band_keys(params) {
                buckets.entry(k).or_default().push(i as u32);
            }
        }
    }
    let mut pairs = HashSet::new();
    for docs in buckets.values() {
        for (x, &a) in docs.iter().enumerate() {
            for &b in &docs[x + 1..] {
                if a != b {
                    pairs.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    let mut pairs: Vec<(u32, u32)> = pairs.into_iter().collect();
    pairs.sort_unstable();
    pairs
}

/// Labelled pairs: the rule (shares a band, estimate ≥ t) with the full and the b-bit
/// estimates, and with no signature, scored against the labels.
fn labelled(
    path: &PathBuf,
    fp: &Fingerprinter,
    params: &MinHashParams,
    t: Threshold,
) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
    let pairs = read_pairs(BufReader::new(file), &name)?;
    anyhow::ensure!(!pairs.is_empty(), "{name} holds no pairs");
    let fields = SimilarOptions::default().text_fields;
    // Each distinct text once (generated pairs reuse their originals).
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut texts: Vec<Vec<String>> = Vec::new();
    let mut refs = Vec::with_capacity(pairs.len());
    for p in &pairs {
        let mut r = [0usize; 2];
        for (slot, art) in r.iter_mut().zip([&p.a, &p.b]) {
            let v = Value::Object(art.clone());
            let t: Vec<String> = field_texts(&v, &fields)
                .with_context(|| format!("{name}: an article's text fields"))?
                .into_iter()
                .map(str::to_owned)
                .collect();
            *slot = *index.entry(t.clone()).or_insert_with(|| {
                texts.push(t);
                texts.len() - 1
            });
        }
        refs.push(r);
    }
    let sigs = neardup::eval::minhash::signatures(fp, &texts);
    // Per pair: both signatures when both texts have one and they share a band.
    let banded: Vec<Option<(&Signature, &Signature)>> = refs
        .iter()
        .map(|&[a, b]| {
            let (a, b) = (sigs[a].as_ref()?, sigs[b].as_ref()?);
            banded_similarity(a, b, params).map(|_| (a, b))
        })
        .collect();
    let decide = |score: &dyn Fn(&Signature, &Signature) -> bool| -> Vec<bool> {
        banded
            .iter()
            .map(|p| p.is_some_and(|(a, b)| score(a, b)))
            .collect()
    };
    let mut rules: Vec<(String, Vec<bool>)> = vec![(
        "full (32-bit minima)".into(),
        decide(&|a, b| t.admits(a.similarity(b))),
    )];
    for bits in BBITS {
        rules.push((
            format!("{bits}-bit"),
            decide(&|a, b| t.admits(bbit_similarity(a.values(), b.values(), bits))),
        ));
    }
    rules.push(("no signature (shares a band)".into(), decide(&|_, _| true)));
    let all = Confusion::count(&pairs, &rules[0].1, |_| true);
    println!();
    println!(
        "Labelled pairs {name}: {} ({} positive, {} negative), {} distinct texts; rule: shares a band and estimate ≥ {t}",
        pairs.len(),
        all.positives(),
        all.negatives(),
        texts.len()
    );
    println!();
    println!("| score | recall | precision | found positives | missed positives | found negatives | decisions unlike the full signature's |");
    println!("|---|---|---|---|---|---|---|");
    for (rule, decided) in &rules {
        let c = Confusion::count(&pairs, decided, |_| true);
        let differ = decided
            .iter()
            .zip(&rules[0].1)
            .filter(|(a, b)| a != b)
            .count();
        println!(
            "| {rule} | {:.4} | {:.4} | {} | {} | {} | {differ} |",
            c.recall(),
            c.precision(),
            c.tp,
            c.fn_,
            c.fp
        );
    }
    // The groups where some b-bit rule decides otherwise than the full signature.
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        groups.entry(p.group()).or_default().push(i);
    }
    println!();
    println!("Pair groups where a b-bit rule (8, 4) finds another number than the full signature:");
    println!();
    println!("| group | pairs | full | 8-bit | 4-bit |");
    println!("|---|---|---|---|---|");
    let column = |rule: &str| &rules.iter().find(|(r, _)| r == rule).expect("a rule").1;
    let (full, b8, b4) = (
        column("full (32-bit minima)"),
        column("8-bit"),
        column("4-bit"),
    );
    for (g, members) in &groups {
        let found = |d: &[bool]| members.iter().filter(|&&i| d[i]).count();
        let (f, e, q) = (found(full), found(b8), found(b4));
        if f != e || f != q {
            println!("| {g} | {} | {f} | {e} | {q} |", members.len());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_terms_are_the_high_bits_in_base64url() {
        // 0x01234567 big-endian is [01 23 45 67]: base64url `ASNFZw` (no padding).
        assert_eq!(band_term_b64(0x0123_4567_89ab_cdef, 32), "ASNFZw");
        assert_eq!(band_term_b64(0xffff_ffff_0000_0000, 32), "_____w");
        assert_eq!(band_term_b64(0xfbff_ffff_ffff_ffff, 32), "-____w");
        // All 8 bytes: base64url of 01 23 45 67 89 ab cd ef.
        assert_eq!(band_term_b64(0x0123_4567_89ab_cdef, 64), "ASNFZ4mrze8");
        // 3 bytes: 4 characters; 36 bits fill 6 characters exactly.
        assert_eq!(band_term_b64(0x0123_4567_89ab_cdef, 24), "ASNF");
        assert_eq!(band_term_b64(0x0123_4567_89ab_cdef, 36), "ASNFZ4");
        for bits in [24, 32, 36, 64] {
            assert_eq!(
                band_term_b64(u64::MAX, bits).len(),
                bits.div_ceil(6) as usize
            );
        }
    }

    #[test]
    fn base64_is_the_librarys_for_a_full_signature() {
        let sig = Signature::from_values(
            (0..128u32)
                .map(|i| i.wrapping_mul(0x9e37_79b9))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            base64_std(&sig.to_le_bytes()),
            neardup::es::schema::signature_base64(&sig)
        );
        assert_eq!(base64_std(&[0xff]), "/w==");
        assert_eq!(base64_std(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn low_bits_are_packed_little_endian() {
        assert_eq!(low_bits(&[0x12, 0x34], 4), [0x42]);
        assert_eq!(low_bits(&[0x1234_5678, 0x9a], 8), [0x78, 0x9a]);
        assert_eq!(
            low_bits(&[1, 0, 1, 1, 0, 0, 0, 1, 1], 1),
            [0b1000_1101, 0b1]
        );
        assert_eq!(low_bits(&[0xffff_ffff; 128], 8).len(), 128);
        assert_eq!(low_bits(&[0xffff_ffff; 128], 4).len(), 64);
    }

    #[test]
    fn the_bbit_estimate_corrects_for_chance_agreements() {
        let a: Vec<u32> = (0..128).map(|i| i * 0x1_0001).collect();
        // Identical: 1 at every b.
        for bits in [1, 4, 8, 32] {
            assert_eq!(bbit_similarity(&a, &a, bits), 1.0);
        }
        // Half the positions equal, the other half differing in the lowest bit: P̂ = 1/2,
        // Ĵ = (1/2 − 1/16) / (15/16) = 7/15 at 4 bits, (1/2 − 2^-32)/(1 − 2^-32) at 32.
        let half: Vec<u32> = a
            .iter()
            .enumerate()
            .map(|(i, &v)| if i < 64 { v } else { v ^ 1 })
            .collect();
        assert!((bbit_similarity(&a, &half, 4) - 7.0 / 15.0).abs() < 1e-12);
        assert!((bbit_similarity(&a, &half, 32) - 0.5).abs() < 1e-9);
        assert_eq!(
            Signature::from_values(a.clone()).similarity(&Signature::from_values(half.clone())),
            0.5
        );
        // Minima that differ only above the kept bits agree in the b-bit estimate.
        let high: Vec<u32> = a.iter().map(|v| v ^ 0x100).collect();
        assert_eq!(bbit_similarity(&a, &high, 8), 1.0);
        assert!(bbit_similarity(&a, &high, 16) < 0.0);
    }

    #[test]
    fn every_option_has_a_distinct_name_and_the_baseline_is_first() {
        let all = layouts();
        assert_eq!(all[0].name, "baseline");
        let names: HashSet<&str> = all.iter().map(|l| l.name).collect();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn version_codes_have_eight_characters() {
        assert_eq!(version_code("minhash-1;shingle=w2").len(), 8);
        assert_ne!(version_code("a"), version_code("b"));
    }
}

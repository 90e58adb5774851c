//! `neardup-bench es-recall`: held-out labelled pairs through Elasticsearch.
//!
//! Every distinct article of a pairs file (`neardup eval --generate`) is written into a fresh
//! index holding both methods, by the real writer (`EsIndexer::index_article`, the article
//! with its fingerprint fields in one request); then `Similar::by_id` (the library call
//! behind `neardup similar --id`) looks up each pair's first article with the method the
//! index holds (MinHash; `--method simhash`/`-k` for SimHash), and the pair counts as found
//! when its second article is among the matches. Found/not found is scored against the
//! labels: recall, precision, and a table per pair group.

use std::collections::{BTreeMap, HashMap};
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use elasticsearch::http::Method as Http;
use neardup::es::{
    self, BlockType, EsIndexer, FieldNames, FilterMode, IndexMeta, MinHashFieldNames,
    MinHashLayout, Near, RetryPolicy, Similar, SimilarOptions,
};
use neardup::eval::aligned::claimed_as;
use neardup::eval::{read_pairs, Confusion, LabelledPair, DIFFERENT, SHARES_PASSAGE};
use neardup::input::field_texts;
use neardup::relation::{AlignRule, MatchOptions, Relation};
use neardup::Methods;
use rayon::prelude::*;
use serde_json::Value;
use tokio::task::JoinSet;

use neardup::cli::common::{self, CmdResult, MethodArgs, ProfileArgs, Searched, Status};
use neardup::cli::es_args::{self, EsArgs};

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:
  neardup eval --generate -i ../shared/data/zh_articles.jsonl.gz -o pairs.jsonl
  neardup-bench es-recall --es http://127.0.0.1:9200 --pairs pairs.jsonl")]
pub struct EsRecallBench {
    #[command(flatten)]
    es: EsArgs,
    /// Labelled pairs (JSON Lines, as `neardup eval --generate` writes them).
    #[arg(long, value_name = "PATH")]
    pairs: PathBuf,
    /// The index to fill: deleted first when it exists, and afterwards unless --keep.
    #[arg(long, default_value = "neardup-bench-recall")]
    index: String,
    #[command(flatten)]
    method: MethodArgs,
    /// Where the exact rule is checked (`server` or `client`).
    #[arg(long, default_value = "server")]
    filter: FilterMode,
    /// Requests in flight while writing and looking up.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Keep the index afterwards.
    #[arg(long)]
    keep: bool,
    /// Look up partial copies too (`neardup similar`'s default; without it, near-duplicates
    /// only): a pair counts as found whatever relation its match says.
    #[arg(long)]
    containment: bool,
    /// Let the texts decide (`neardup similar --id --align`, `Similar::aligned_by_id`): the
    /// index keeps the articles' texts, its formula is learned from it as the worker learns
    /// it, and each pair is looked up from both sides. A pair counts as found with the
    /// relation it should get (a partial reprint as `contains` from its article and
    /// `contained_in` from its part; a shared passage as `shares_passage`; another duplicate
    /// as any copy) from both sides; a pair that is no copy counts as found (a wrong claim)
    /// when either side claims it as a copy. Learn boilerplate from the pairs' texts first
    /// (`--boilerplate`), as `neardup eval` does.
    #[arg(long, conflicts_with = "containment")]
    align: bool,
    /// The MinHash layout of the index (`es-init --layout`): `compact` (the default of a new
    /// index) or `full`.
    #[arg(long, default_value = "compact", value_parser = ["compact", "full"])]
    layout: String,
    /// Bits of each minimum the compact layout keeps (`es-init --signature-bits`).
    #[arg(long, default_value_t = 8)]
    signature_bits: u8,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// The distinct articles of `pairs` and, per pair, the ids of its two articles. An article
/// keeps its `id` unless another article with other text already has it; then (and for
/// articles without one) it gets `{id}#{n}`, or `pair-{i}-{a|b}`.
pub(crate) fn documents(pairs: &[LabelledPair]) -> (Vec<(String, Value)>, Vec<[String; 2]>) {
    let mut by_text: HashMap<String, String> = HashMap::new();
    let mut taken: HashMap<String, usize> = HashMap::new();
    let mut docs = Vec::new();
    let mut ids = Vec::with_capacity(pairs.len());
    for (i, p) in pairs.iter().enumerate() {
        let mut both = [String::new(), String::new()];
        for (side, (article, name)) in [(&p.a, "a"), (&p.b, "b")].into_iter().enumerate() {
            let text = Value::Object(article.clone()).to_string();
            if let Some(id) = by_text.get(&text) {
                both[side] = id.clone();
                continue;
            }
            let base = match article.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => format!("pair-{i}-{name}"),
            };
            let seen = taken.entry(base.clone()).or_insert(0);
            *seen += 1;
            let id = if *seen == 1 {
                base
            } else {
                format!("{base}#{seen}")
            };
            by_text.insert(text, id.clone());
            docs.push((id.clone(), Value::Object(article.clone())));
            both[side] = id;
        }
        ids.push(both);
    }
    (docs, ids)
}

pub fn run(args: EsRecallBench) -> CmdResult {
    common::ensure_usage(args.concurrency > 0, "--concurrency must be at least 1")?;
    let path = args.pairs.display().to_string();
    let file = std::fs::File::open(&args.pairs).with_context(|| format!("opening {path}"))?;
    let pairs = read_pairs(BufReader::new(file), &path)?;
    anyhow::ensure!(!pairs.is_empty(), "{path} holds no pairs");
    let (docs, ids) = documents(&pairs);
    let fp = args.profile.fingerprinter()?;
    let text_fields = SimilarOptions::default().text_fields;
    let meta = IndexMeta::new(
        fp.config(),
        Methods::BOTH,
        BlockType::Short,
        FieldNames::default(),
        MinHashFieldNames::default(),
    )
    .with_layout(match args.layout.as_str() {
        "full" => MinHashLayout::Full,
        _ => MinHashLayout::Compact {
            signature_bits: args.signature_bits,
        },
    });
    let method = args.method.for_index(meta.default_method())?;
    let tolerance = args.method.tolerance(method, Searched::Elasticsearch)?;
    // Both methods' sketches of each article, in one pass; the writer adds the fields.
    let prepared = docs
        .par_iter()
        .map(|(id, doc)| {
            let texts =
                field_texts(doc, &text_fields).with_context(|| format!("{path}: article {id}"))?;
            anyhow::Ok((doc.clone(), fp.sketch_fields(Methods::BOTH, &texts)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    let (config, client) = args.es.client()?;
    let retry = RetryPolicy::default();
    es_args::runtime()?.block_on(async {
        let version = es::server_version(&client, &retry).await?;
        let index = &args.index;
        let _ = es::send(&client, Http::Delete, &format!("/{}", es::path_segment(index)), &[], None).await?;
        es::init_index(&client, &retry, index, &meta).await?;

        let started = Instant::now();
        let indexer = Arc::new(
            EsIndexer::new(client.clone(), index.clone(), meta.clone(), fp.clone())?
                .with_retry(retry.clone()),
        );
        let mut writes = JoinSet::new();
        for ((id, _), (doc, sketches)) in docs.into_iter().zip(prepared) {
            if writes.len() >= args.concurrency {
                writes.join_next().await.expect("a write in flight")??;
            }
            let indexer = indexer.clone();
            writes.spawn(async move { indexer.index_article(Some(&id), &doc, &sketches).await });
        }
        while let Some(r) = writes.join_next().await {
            r??;
        }
        let written = started.elapsed();
        super::es::refresh(&client, &retry, index).await?;

        let options = SimilarOptions {
            filter: args.filter,
            ..SimilarOptions::default()
        };
        let similar = Arc::new(Similar::with_options(client.clone(), fp.clone(), options, retry.clone()));
        let options = MatchOptions::with_containment(args.containment);
        if args.align {
            let fields = ["title".to_owned(), "content".to_owned()];
            let scanner = es::Scanner::new(client.clone(), retry.clone());
            let learned = es::learn_formula(&scanner, index, &fields, es::FORMULA_SAMPLE, &fp).await?;
            es::record_formula(&client, &retry, index, learned.formula.clone()).await?;
            eprintln!("formula {} learned from {} articles", learned.formula, learned.read);
        }
        let started = Instant::now();
        // Per pair, the relation found from each side (read from that side), when found.
        let mut relations: Vec<[Option<Relation>; 2]> = vec![[None, None]; pairs.len()];
        let mut lookups = JoinSet::new();
        for (i, [a, b]) in ids.iter().cloned().enumerate() {
            if lookups.len() >= args.concurrency {
                let (i, r) = lookups.join_next().await.expect("a lookup in flight")??;
                relations[i] = r;
            }
            let similar = similar.clone();
            let index = index.clone();
            let align = args.align;
            lookups.spawn(async move {
                let mut both = [None, None];
                for (side, (query, other)) in [(&a, &b), (&b, &a)].into_iter().enumerate() {
                    if !align && side == 1 {
                        break;
                    }
                    let s = if align {
                        similar.aligned_by_id(index.as_str(), query, &AlignRule::DEFAULT).await?
                    } else {
                        similar.by_id(index.as_str(), query, Near::new(tolerance, options)).await?
                    };
                    both[side] = s
                        .matches
                        .iter()
                        .find(|m| &m.id == other)
                        .map(|m| m.relation.unwrap_or(Relation::NearDuplicate));
                }
                anyhow::Ok((i, both))
            });
        }
        while let Some(r) = lookups.join_next().await {
            let (i, r) = r??;
            relations[i] = r;
        }
        let looked_up = started.elapsed();
        // Read from `a`: each side's answer, and whether it is the one the pair should get.
        let from_a = |p: &LabelledPair, [ra, rb]: [Option<Relation>; 2]| -> [bool; 2] {
            let want = |r: Option<Relation>| match p.relation() {
                SHARES_PASSAGE => r == Some(Relation::SharesPassage),
                _ => claimed_as(p, r),
            };
            [want(ra), want(rb.map(Relation::reversed))]
        };
        let found: Vec<bool> = pairs
            .iter()
            .zip(&relations)
            .map(|(p, &r)| match (args.align, from_a(p, r)) {
                (false, _) => r[0].is_some(),
                (true, [x, y]) if p.duplicate || p.relation() == SHARES_PASSAGE => x && y,
                (true, [x, y]) => x || y,
            })
            .collect();
        // What the summary counts: a duplicate found, or a pair that is none claimed as a
        // copy (a shared passage found as one is no claim).
        let counted: Vec<bool> = pairs
            .iter()
            .zip(&relations)
            .zip(&found)
            .map(|((p, &[ra, rb]), &f)| match p.duplicate || !args.align {
                true => f,
                false => claimed_as(p, ra) || claimed_as(p, rb.map(Relation::reversed)),
            })
            .collect();

        let all = Confusion::count(&pairs, &counted, |_| true);
        println!(
            "Elasticsearch {version} at {}; {} pairs of {path} ({} positive, {} negative); {} distinct articles written by EsIndexer::index_article in {:.1} s; {} lookups ({}, {} filter) in {:.1} s",
            config.display_urls(),
            pairs.len(),
            all.positives(),
            all.negatives(),
            distinct_ids(&ids),
            written.as_secs_f64(),
            pairs.len() * if args.align { 2 } else { 1 },
            if args.align {
                "Similar::aligned_by_id from both sides".to_owned()
            } else if args.containment {
                format!("Similar::by_id, {method} {tolerance}, partial copies too")
            } else {
                format!("Similar::by_id, {method} {tolerance}, near-duplicates only")
            },
            args.filter,
            looked_up.as_secs_f64(),
        );
        println!();
        println!("| pairs | recall | precision | found positives | missed positives | found negatives |");
        println!("|---|---|---|---|---|---|");
        println!(
            "| all | {:.3} | {:.3} | {} | {} | {} |",
            all.recall(),
            all.precision(),
            all.tp,
            all.fn_,
            all.fp
        );
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, p) in pairs.iter().enumerate() {
            groups.entry(p.group()).or_default().push(i);
        }
        println!();
        if args.align {
            println!("Found: with the relation the pair should get, from `a`, from `b`, and from both (for a pair that is no copy: claimed as a copy from either side); as passage: a pair that is no copy reported as `shares_passage` from either side.");
            println!();
            println!("| group | pairs | found from a | found from b | found | as passage |");
            println!("|---|---|---|---|---|---|");
        } else {
            println!("| group | pairs | found | share found |");
            println!("|---|---|---|---|");
        }
        for (g, members) in &groups {
            let n = members.len() as f64;
            let hits = members.iter().filter(|&&i| found[i]).count();
            if args.align {
                let side = |k: usize| {
                    members.iter().filter(|&&i| from_a(&pairs[i], relations[i])[k]).count() as f64 / n
                };
                let passages = members
                    .iter()
                    .filter(|&&i| {
                        pairs[i].relation() == DIFFERENT
                            && relations[i].contains(&Some(Relation::SharesPassage))
                    })
                    .count();
                println!(
                    "| {g} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    members.len(),
                    side(0),
                    side(1),
                    hits as f64 / n,
                    passages as f64 / n
                );
            } else {
                println!("| {g} | {} | {hits} | {:.3} |", members.len(), hits as f64 / n);
            }
        }
        if !args.keep {
            es::request(&client, &retry, "delete bench index", Http::Delete, &format!("/{}", es::path_segment(index)), &[], None).await?;
        }
        Ok(Status::Done)
    })
}

/// Distinct document ids among the pairs.
fn distinct_ids(ids: &[[String; 2]]) -> usize {
    ids.iter()
        .flatten()
        .collect::<std::collections::HashSet<_>>()
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn article(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn equal_articles_share_a_document_and_clashing_ids_are_renamed() {
        let x = article(json!({"id": "x", "title": "t", "content": "one"}));
        let x_edited = article(json!({"id": "x~insert", "title": "t", "content": "one two"}));
        let x_edited_again =
            article(json!({"id": "x~insert", "title": "t", "content": "one two three"}));
        let no_id = article(json!({"title": "t", "content": "four"}));
        let pair = |a: &Map<String, Value>, b: &Map<String, Value>| LabelledPair {
            a: a.clone(),
            b: b.clone(),
            duplicate: true,
            kind: None,
            transformation: None,
            size: None,
            relation: None,
            a_span: None,
            b_span: None,
        };
        let pairs = [
            pair(&x, &x_edited),
            pair(&x, &x_edited_again),
            pair(&x_edited, &no_id),
        ];
        let (docs, ids) = documents(&pairs);
        let names: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(names, ["x", "x~insert", "x~insert#2", "pair-2-b"]);
        assert_eq!(ids[0], ["x", "x~insert"]);
        assert_eq!(ids[1], ["x", "x~insert#2"]);
        assert_eq!(ids[2], ["x~insert", "pair-2-b"]);
        assert_eq!(docs[2].1["content"], "one two three");
        assert_eq!(distinct_ids(&ids), 4);
    }
}

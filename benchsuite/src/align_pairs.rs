//! `neardup-bench align-pairs`: the library's alignment ([`neardup::align`]) and text rule
//! ([`neardup::relation::AlignRule`]) on listed pairs of a corpus, one line of figures a
//! pair, and the time an alignment takes (issue 43, measurement).
//!
//! Pairs come from JSON Lines with `"a"` and `"b"` (what `neardup dedupe --pairs` prints; its
//! relation, similarity and containment are carried to the output) or a TSV with columns
//! `n a b` (a read sample's pairs.tsv). Each line out: the pair, the letters of each text, the
//! share of each inside passages and in runs, the passages, the letters of the longest, the
//! identity of the passages (matched letters ÷ letters they span on the longer side), and the
//! relation the rule gives. With `--candidates`, whether today's MinHash candidate step
//! reaches the pair.
//!
//! Texts are read as `dedupe` reads them, without the boilerplate lines learned from the
//! corpus ([`Letters::prepared`]). Formula windows are learned here from the corpus (`--formula-groups`): windows found in
//! at least that many groups, a group being articles joined by the pairs of `--groups`
//! (`neardup dedupe --pairs` of the corpus) whose smaller text is at least 0.8 in runs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use crate::read_pairs::{parse_dedupe_pairs, parse_sample_pairs};
use neardup::align::{align_letters, AlignParams, Formula, Letters};
use neardup::input::{self, Body, InputSpec};
use neardup::relation::AlignRule;
use rayon::prelude::*;

use neardup::cli::common::{CmdResult, ProfileArgs, Status};

#[derive(clap::Args, Debug)]
pub struct AlignPairsBench {
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// The pairs: JSON Lines with "a" and "b", or a TSV `n a b` with a header line.
    #[arg(long)]
    pairs: String,
    /// Learn formula windows: those found in at least this many groups of the corpus.
    #[arg(long)]
    formula_groups: Option<usize>,
    /// The pairs that make the groups of --formula-groups (JSON Lines with "a" and "b"):
    /// `neardup dedupe --pairs` of the corpus. Default: --pairs.
    #[arg(long)]
    groups: Option<String>,
    /// Write each pair's relation under the rule to this JSON Lines file (`{"a","b",
    /// "relation"}`, for `read-pairs score`); unrelated pairs get no line.
    #[arg(long)]
    relations: Option<String>,
    /// The rule's share of the smaller text in runs for a copy.
    #[arg(long, default_value_t = AlignRule::DEFAULT.copy_share)]
    copy_share: f64,
    /// The rule's share of the smaller text in runs outside formula windows for a copy.
    #[arg(long, default_value_t = AlignRule::DEFAULT.own_share)]
    own_share: f64,
    /// The rule's letters outside formula windows for a shared passage.
    #[arg(long, default_value_t = AlignRule::DEFAULT.passage_letters)]
    passage_letters: usize,
    /// Also print whether today's MinHash candidate step reaches each pair: a shared band
    /// key, and the minima that agree (of 128).
    #[arg(long)]
    candidates: bool,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// The pairs of a file, each with what the file says of it beside the ids: a `dedupe
/// --pairs` file's relation, similarity and containment, or a sample's pair number.
fn read_pairs(path: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {path}: {e}"))?;
    if !text.trim_start().starts_with('{') {
        return Ok(parse_sample_pairs(path, &text)?
            .into_iter()
            .map(|(n, a, b)| (a, b, n.to_string()))
            .collect());
    }
    Ok(parse_dedupe_pairs(path, &text)?
        .into_iter()
        .map(|p| {
            let extra = ["relation", "similarity", "containment"]
                .iter()
                .map(|k| p.fields.get(*k).map_or(String::new(), |x| x.to_string()))
                .collect::<Vec<_>>()
                .join("\t");
            (p.a, p.b, extra)
        })
        .collect())
}

/// Formula windows of the corpus (see the module docs).
fn learn_formula(
    texts: &HashMap<String, Vec<String>>,
    groups: &[(String, String, String)],
    min_groups: usize,
    params: &AlignParams,
    letters_of: &(dyn Fn(&Vec<String>) -> Letters + Sync),
) -> Formula {
    let ids: Vec<&String> = texts.keys().collect();
    let number: HashMap<&String, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let letters: Vec<Letters> = ids.par_iter().map(|id| letters_of(&texts[*id])).collect();
    let joined: Vec<(usize, usize)> = groups
        .par_iter()
        .filter_map(|(a, b, _)| {
            let (&x, &y) = (number.get(a)?, number.get(b)?);
            let al = align_letters(&letters[x], &letters[y], params);
            let small = if al.a_len <= al.b_len {
                al.a_matched_share()
            } else {
                al.b_matched_share()
            };
            (small >= 0.8).then_some((x, y))
        })
        .collect();
    Formula::learn(&letters, joined, min_groups, params.anchor)
}

pub fn run(args: AlignPairsBench) -> CmdResult {
    let pairs = read_pairs(&args.pairs)?;
    let file = input::open(&args.input)?;
    let mut texts: HashMap<String, Vec<String>> = HashMap::new();
    for doc in input::documents(file.reader, &args.input, &InputSpec::default()) {
        let doc = doc?;
        if let Body::Fields(f) = doc.body {
            texts.insert(doc.id.key(), f);
        }
    }
    let params = AlignParams::DEFAULT;
    // Texts are read as `dedupe` reads them: without the boilerplate learned from the input.
    let fp = args.profile.fingerprinter()?;
    let all: Vec<Vec<String>> = texts.values().cloned().collect();
    let fp =
        fp.with_boilerplate(neardup::eval::detector::learn_boilerplate(&fp, &all).map(Arc::new));
    let letters_of = |t: &Vec<String>| Letters::prepared(t, fp.segmenter());
    let formula = match args.formula_groups {
        Some(min) => {
            let groups = match &args.groups {
                Some(path) => read_pairs(path)?,
                None => pairs.clone(),
            };
            let f = learn_formula(&texts, &groups, min, &params, &letters_of);
            eprintln!(
                "align-pairs: {} formula windows (in at least {min} groups)",
                f.len()
            );
            f
        }
        None => Formula::default(),
    };
    let rule = AlignRule {
        copy_share: args.copy_share,
        own_share: args.own_share,
        passage_letters: args.passage_letters,
    };
    let minhash = *fp.minhasher().params();
    let candidate = |ta: &Vec<String>, tb: &Vec<String>| -> String {
        if !args.candidates {
            return String::new();
        }
        match (fp.minhash_fields(ta), fp.minhash_fields(tb)) {
            (Ok(x), Ok(y)) => {
                let kx: HashSet<u64> = x.signature.band_keys(&minhash).into_iter().collect();
                let band = y
                    .signature
                    .band_keys(&minhash)
                    .iter()
                    .any(|k| kx.contains(k));
                format!(
                    "{}\t{}\t",
                    u8::from(band),
                    x.signature.agreements(&y.signature)
                )
            }
            _ => "-\t-\t".into(),
        }
    };
    let started = Instant::now();
    let rows: Vec<(String, Option<String>)> = pairs
        .par_iter()
        .filter_map(|(a, b, extra)| {
            let (ta, tb) = (texts.get(a)?, texts.get(b)?);
            let (la, lb) = (letters_of(ta), letters_of(tb));
            let al = align_letters(&la, &lb, &params);
            let related = rule.relate(&la, &lb, &al, &formula);
            let relation = related.map_or("-", |m| m.relation.name());
            let spanned: usize = al.passages.iter().map(|p| p.a_letters.max(p.b_letters)).sum();
            let matched: usize = al.passages.iter().map(|p| p.matched).sum();
            let identity = if spanned == 0 { 0.0 } else { matched as f64 / spanned as f64 };
            let row = format!(
                "{}{a}\t{b}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{}\t{}\t{identity:.3}\t{relation}\t{extra}",
                candidate(ta, tb),
                al.a_len,
                al.b_len,
                al.a_share(),
                al.b_share(),
                al.a_matched_share(),
                al.b_matched_share(),
                al.passages.len(),
                al.passages.iter().map(|p| p.matched).max().unwrap_or(0),
            );
            let line = related
                .map(|m| serde_json::json!({"a": a, "b": b, "relation": m.relation.name()}).to_string());
            Some((row, line))
        })
        .collect();
    let took = started.elapsed();
    if let Some(path) = &args.relations {
        let lines: Vec<&str> = rows.iter().filter_map(|(_, l)| l.as_deref()).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    if args.candidates {
        print!("band\tagreeing\t");
    }
    println!("a\tb\ta_len\tb_len\ta_share\tb_share\ta_matched\tb_matched\tpassages\tlongest\tidentity\trelation\textra");
    for (r, _) in &rows {
        println!("{r}");
    }
    eprintln!(
        "align-pairs: {} pairs aligned and judged in {:.3} s on {} threads ({:.1} µs a pair)",
        rows.len(),
        took.as_secs_f64(),
        rayon::current_num_threads(),
        took.as_secs_f64() * 1e6 / rows.len().max(1) as f64 * rayon::current_num_threads() as f64
    );
    Ok(Status::Done)
}

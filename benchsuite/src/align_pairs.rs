//! `neardup-bench align-pairs`: the library's alignment ([`neardup::align`]) of listed pairs
//! of a corpus, one line of figures a pair, and the time an alignment takes (issue 43,
//! measurement).
//!
//! Pairs come from JSON Lines with `"a"` and `"b"` (what `neardup dedupe --pairs` prints; its
//! other keys are carried to the output) or a TSV with columns `n a b`. Each line out: the
//! pair, the letters of each text, the share of each inside passages, the passages, the
//! letters of the longest, the identity of the passages (matched letters ÷ letters they
//! span on the longer side) and the digits matched and those in gaps on both sides (facts
//! that disagree).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::time::Instant;

use neardup::align::{align_letters, AlignParams, Alignment, Letters};
use neardup::input::{self, Body, InputSpec};
use rayon::prelude::*;
use serde_json::Value;

use neardup::cli::common::{CmdResult, Status};

#[derive(clap::Args, Debug)]
pub struct AlignPairsBench {
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// The pairs: JSON Lines with "a" and "b", or a TSV `n a b` with a header line.
    #[arg(long)]
    pairs: String,
    /// Also count, for each pair, the matched letters that are not formula text: letters of
    /// windows (of the anchor's length) found in at least this many groups of the corpus,
    /// a group being articles joined by listed pairs whose smaller text is ≥ 0.8 in passages.
    #[arg(long)]
    formula_groups: Option<usize>,
    /// With --formula-groups: write each pair's relation under a trial rule to this JSON
    /// Lines file (`{"a","b","relation"}`, for `read-pairs score`): a copy when the smaller
    /// text has at least --copy-share of its letters in runs and --own-share outside formula
    /// windows (`near_duplicate` when the larger has --copy-share too, else `contains` /
    /// `contained_in`); else `shares_passage` when a passage holds at least
    /// --passage-letters letters outside formula windows; else no line.
    #[arg(long)]
    relations: Option<String>,
    #[arg(long, default_value_t = 0.6)]
    copy_share: f64,
    #[arg(long, default_value_t = 0.4)]
    own_share: f64,
    #[arg(long, default_value_t = 30)]
    passage_letters: usize,
}

/// Union-find over article numbers.
fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Figures of one alignment (see the module docs).
struct Figures {
    passages: usize,
    longest: usize,
    identity: f64,
    digits_matched: usize,
    digits_differing: usize,
}

fn figures(a: &Letters, b: &Letters, al: &Alignment) -> Figures {
    let mut matched = 0;
    let mut spanned = 0;
    let mut digits_matched = 0;
    let mut digits_differing = 0;
    for p in &al.passages {
        matched += p.matched;
        spanned += p.a_letters.max(p.b_letters);
        for r in &p.runs {
            digits_matched += (r.a..r.a + r.len)
                .filter(|&i| a.letter(i).is_ascii_digit())
                .count();
        }
        for w in p.runs.windows(2) {
            let (ga, gb) = ((w[0].a + w[0].len)..w[1].a, (w[0].b + w[0].len)..w[1].b);
            if !ga.is_empty() && !gb.is_empty() {
                digits_differing += ga.filter(|&i| a.letter(i).is_ascii_digit()).count();
                digits_differing += gb.filter(|&i| b.letter(i).is_ascii_digit()).count();
            }
        }
    }
    Figures {
        passages: al.passages.len(),
        longest: al.passages.iter().map(|p| p.matched).max().unwrap_or(0),
        identity: if spanned == 0 {
            0.0
        } else {
            matched as f64 / spanned as f64
        },
        digits_matched,
        digits_differing,
    }
}

/// Matched letters of each text outside formula windows.
fn own_letters(
    a: &Letters,
    b: &Letters,
    al: &Alignment,
    formula: &HashSet<u64>,
    k: usize,
) -> (usize, usize, usize) {
    let flags = |l: &Letters| {
        let mut is_formula = vec![false; l.len() + 64];
        for (i, h) in l.windows(k) {
            if formula.contains(&h) {
                for f in is_formula.iter_mut().skip(i).take(k) {
                    *f = true;
                }
            }
        }
        is_formula
    };
    let (fa, fb) = (flags(a), flags(b));
    let runs = || al.passages.iter().flat_map(|p| p.runs.iter());
    let mut own_a: Vec<usize> = runs()
        .flat_map(|r| (r.a..r.a + r.len).filter(|&i| !fa[i]))
        .collect();
    let mut own_b: Vec<usize> = runs()
        .flat_map(|r| (r.b..r.b + r.len).filter(|&i| !fb[i]))
        .collect();
    own_a.sort_unstable();
    own_a.dedup();
    own_b.sort_unstable();
    own_b.dedup();
    let longest = al
        .passages
        .iter()
        .map(|p| {
            let a: usize = p
                .runs
                .iter()
                .map(|r| (r.a..r.a + r.len).filter(|&i| !fa[i]).count())
                .sum();
            let b: usize = p
                .runs
                .iter()
                .map(|r| (r.b..r.b + r.len).filter(|&i| !fb[i]).count())
                .sum();
            a.min(b)
        })
        .max()
        .unwrap_or(0);
    (own_a.len(), own_b.len(), longest)
}

fn read_pairs(path: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut out = Vec::new();
    for line in file.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with('{') {
            let v: Value = serde_json::from_str(&line)?;
            let id = |k: &str| match &v[k] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let extra = ["relation", "similarity", "containment"]
                .iter()
                .map(|k| v.get(*k).map_or(String::new(), |x| x.to_string()))
                .collect::<Vec<_>>()
                .join("\t");
            out.push((id("a"), id("b"), extra));
        } else {
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.len() >= 3 && cols[0] != "n" {
                out.push((cols[1].to_owned(), cols[2].to_owned(), cols[0].to_owned()));
            }
        }
    }
    Ok(out)
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
    let formula: Option<HashSet<u64>> = args.formula_groups.map(|min| {
        let ids: Vec<&String> = texts.keys().collect();
        let number: HashMap<&String, usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut parent: Vec<usize> = (0..ids.len()).collect();
        for (a, b, _) in &pairs {
            let (Some(&x), Some(&y)) = (number.get(a), number.get(b)) else {
                continue;
            };
            let (la, lb) = (Letters::new(&texts[a]), Letters::new(&texts[b]));
            let al = align_letters(&la, &lb, &params);
            let small = if al.a_len <= al.b_len {
                al.a_share()
            } else {
                al.b_share()
            };
            if small >= 0.8 {
                let (rx, ry) = (find(&mut parent, x), find(&mut parent, y));
                parent[rx] = ry;
            }
        }
        let mut groups: HashMap<u64, HashSet<usize>> = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            let g = find(&mut parent, i);
            let l = Letters::new(&texts[*id]);
            for (_, h) in l.windows(params.anchor) {
                groups.entry(h).or_default().insert(g);
            }
        }
        let set: HashSet<u64> = groups
            .into_iter()
            .filter(|(_, g)| g.len() >= min)
            .map(|(h, _)| h)
            .collect();
        eprintln!(
            "align-pairs: {} formula windows (in at least {min} groups)",
            set.len()
        );
        set
    });
    let started = Instant::now();
    let relations: Vec<Option<String>> = pairs
        .par_iter()
        .map(|(a, b, _)| {
            let set = formula.as_ref()?;
            let (ta, tb) = (texts.get(a)?, texts.get(b)?);
            let (la, lb) = (Letters::new(ta), Letters::new(tb));
            let al = align_letters(&la, &lb, &params);
            let (own_a, own_b, own_longest) = own_letters(&la, &lb, &al, set, params.anchor);
            let a_small = al.a_len <= al.b_len;
            let (ms, ml, own) = if a_small {
                (
                    al.a_matched_share(),
                    al.b_matched_share(),
                    own_a as f64 / al.a_len.max(1) as f64,
                )
            } else {
                (
                    al.b_matched_share(),
                    al.a_matched_share(),
                    own_b as f64 / al.b_len.max(1) as f64,
                )
            };
            let relation = if ms >= args.copy_share && own >= args.own_share {
                if ml >= args.copy_share {
                    "near_duplicate"
                } else if a_small {
                    "contained_in"
                } else {
                    "contains"
                }
            } else if own_longest >= args.passage_letters {
                "shares_passage"
            } else {
                return None;
            };
            Some(serde_json::json!({"a": a, "b": b, "relation": relation}).to_string())
        })
        .collect();
    if let Some(path) = &args.relations {
        let lines: Vec<&str> = relations.iter().flatten().map(String::as_str).collect();
        std::fs::write(path, lines.join("\n") + "\n")?;
    }
    let rows: Vec<String> = pairs
        .par_iter()
        .filter_map(|(a, b, extra)| {
            let (ta, tb) = (texts.get(a)?, texts.get(b)?);
            let (la, lb) = (Letters::new(ta), Letters::new(tb));
            let al = align_letters(&la, &lb, &params);
            let f = figures(&la, &lb, &al);
            let own = formula.as_ref().map_or(String::new(), |set| {
                let (own_a, own_b, own_longest) = own_letters(&la, &lb, &al, set, params.anchor);
                let small = if al.a_len <= al.b_len {
                    own_a as f64 / al.a_len.max(1) as f64
                } else {
                    own_b as f64 / al.b_len.max(1) as f64
                };
                format!("{:.3}\t{own_longest}", small)
            });
            Some(format!(
                "{a}\t{b}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{}\t{}\t{:.3}\t{}\t{}\t{own}\t{extra}",
                al.a_len,
                al.b_len,
                al.a_share(),
                al.b_share(),
                al.a_matched_share(),
                al.b_matched_share(),
                f.passages,
                f.longest,
                f.identity,
                f.digits_matched,
                f.digits_differing,
            ))
        })
        .collect();
    let took = started.elapsed();
    println!("a\tb\ta_len\tb_len\ta_share\tb_share\ta_matched\tb_matched\tpassages\tlongest\tidentity\tdigits_matched\tdigits_differing\town_small\town_longest\textra");
    for r in &rows {
        println!("{r}");
    }
    eprintln!(
        "align-pairs: {} pairs aligned in {:.3} s on {} threads ({:.1} µs a pair)",
        rows.len(),
        took.as_secs_f64(),
        rayon::current_num_threads(),
        took.as_secs_f64() * 1e6 / rows.len().max(1) as f64 * rayon::current_num_threads() as f64
    );
    Ok(Status::Done)
}

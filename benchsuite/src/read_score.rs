//! `neardup-bench read-pairs score`: a detector's pairs judged against the pairs read by hand
//! (`benchsuite/data/read-pairs/`, issue 43).
//!
//! The detector's answer is a JSON Lines file of pairs with `"a"`, `"b"` and `"relation"`
//! (what `neardup dedupe --pairs` prints); a read pair it does not list is not linked. A
//! *copy claim* is `near_duplicate`, `contains` or `contained_in`; `shares_passage` is a
//! link that claims no copy. The readers' `reprint` and `partial` are copies.
//!
//! Two views:
//! - **Counts**: every read pair, label × the detector's relation.
//! - **Estimates over all pairs sharing a 20-letter run** (the `runs` pool, drawn without
//!   regard to any detector): each pair drawn from a runs stratum weighs that stratum's pool
//!   size ÷ the pairs drawn from it. Pairs drawn from the `links` pool are counted but carry
//!   no weight: that pool is one detector's output.
//!
//! `--half dev` keeps the pairs of the first reader (1–152), `--half test` the second's
//! (153–304): the draw was shuffled before the halves were cut, so each is a random half. A
//! rule is chosen on one and reported on the other.

use std::collections::HashMap;

use neardup::cli::common::{CmdResult, Status};

#[derive(clap::Args, Debug)]
pub struct ScoreArgs {
    /// The folder of the read sample (labels.tsv, strata.tsv).
    #[arg(long, default_value = "benchsuite/data/read-pairs")]
    dir: String,
    /// The detector's pairs: JSON Lines with "a", "b" and "relation".
    #[arg(long)]
    detector: String,
    /// Which read pairs: `all`, `dev` (1–152) or `test` (153–304).
    #[arg(long, default_value = "all")]
    half: String,
}

const LABELS: [&str; 6] = [
    "reprint",
    "partial",
    "passage",
    "template",
    "same_event",
    "unrelated",
];
const ANSWERS: [&str; 5] = [
    "near_duplicate",
    "contains",
    "contained_in",
    "shares_passage",
    "-",
];

fn tsv(path: &str) -> anyhow::Result<Vec<HashMap<String, String>>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {path}: {e}"))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    Ok(lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            head.iter()
                .zip(l.split('\t'))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect())
}

fn is_copy_claim(relation: &str) -> bool {
    matches!(relation, "near_duplicate" | "contains" | "contained_in")
}

fn is_copy(label: &str) -> bool {
    matches!(label, "reprint" | "partial")
}

/// Σ weight of the pairs meeting `of` that also meet `and`, ÷ Σ weight of those meeting `of`.
fn ratio<'a>(
    rows: &'a [(String, String, f64)],
    of: impl Fn(&'a str, &'a str) -> bool,
    and: impl Fn(&'a str, &'a str) -> bool,
) -> (f64, usize) {
    let (mut num, mut den, mut n) = (0.0, 0.0, 0);
    for (label, answer, w) in rows {
        if of(label, answer) {
            den += w;
            n += 1;
            if and(label, answer) {
                num += w;
            }
        }
    }
    (if den > 0.0 { num / den } else { f64::NAN }, n)
}

pub fn run(args: ScoreArgs) -> CmdResult {
    let labels = tsv(&format!("{}/labels.tsv", args.dir))?;
    let strata: HashMap<String, HashMap<String, String>> =
        tsv(&format!("{}/strata.tsv", args.dir))?
            .into_iter()
            .map(|r| (r["n"].clone(), r))
            .collect();
    let mut answers: HashMap<(String, String), String> = HashMap::new();
    for p in crate::read_pairs::dedupe_pairs(&args.detector)? {
        let relation = p.fields["relation"]
            .as_str()
            .unwrap_or("near_duplicate")
            .to_owned();
        answers.insert((p.b.clone(), p.a.clone()), relation.clone());
        answers.insert((p.a, p.b), relation);
    }
    // Pairs drawn per runs stratum, for the weights.
    let mut drawn: HashMap<String, usize> = HashMap::new();
    for s in strata.values() {
        *drawn
            .entry(format!("{}/{}", s["pool"], s["bin"]))
            .or_default() += 1;
    }
    let mut counts: HashMap<(&str, &str), usize> = HashMap::new();
    let mut weighted: Vec<(String, String, f64)> = Vec::new();
    let mut all: Vec<(String, String, f64)> = Vec::new();
    for l in &labels {
        let n: usize = l["n"].parse()?;
        let keep = match args.half.as_str() {
            "dev" => n <= 152,
            "test" => n > 152,
            _ => true,
        };
        if !keep {
            continue;
        }
        let answer = answers
            .get(&(l["a"].clone(), l["b"].clone()))
            .map_or("-", String::as_str);
        let label = LABELS
            .iter()
            .find(|x| **x == l["label"])
            .ok_or_else(|| anyhow::anyhow!("pair {n}: unknown label {}", l["label"]))?;
        let answer = ANSWERS
            .iter()
            .find(|x| **x == answer)
            .ok_or_else(|| anyhow::anyhow!("pair {n}: unknown relation {answer}"))?;
        *counts.entry((label, answer)).or_default() += 1;
        all.push((label.to_string(), answer.to_string(), 1.0));
        let s = &strata[&l["n"]];
        if s["pool"] == "runs" {
            let size: f64 = s["pool_size_in_stratum"].parse()?;
            let w = size / drawn[&format!("runs/{}", s["bin"])] as f64;
            weighted.push((label.to_string(), answer.to_string(), w));
        }
    }
    println!(
        "read pairs: {} ({}); detector: {}",
        all.len(),
        args.half,
        args.detector
    );
    println!();
    print!("| label \\ answer |");
    for a in ANSWERS {
        print!(" {a} |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(ANSWERS.len()));
    for l in LABELS {
        print!("| {l} |");
        for a in ANSWERS {
            print!(" {} |", counts.get(&(l, a)).copied().unwrap_or(0));
        }
        println!();
    }
    println!();
    println!("| figure | all read pairs (unweighted) | runs pool (weighted) |");
    println!("|---|---:|---:|");
    type Pred = fn(&str, &str) -> bool;
    let figures: [(&str, Pred, Pred); 5] = [
        (
            "copy claims that are copies (precision)",
            |_, a| is_copy_claim(a),
            |l, _| is_copy(l),
        ),
        (
            "copies claimed as copies (recall)",
            |l, _| is_copy(l),
            |_, a| is_copy_claim(a),
        ),
        (
            "templates and same-event pairs claimed as copies",
            |l, _| matches!(l, "template" | "same_event"),
            |_, a| is_copy_claim(a),
        ),
        (
            "templates and same-event pairs linked at all",
            |l, _| matches!(l, "template" | "same_event"),
            |_, a| a != "-",
        ),
        (
            "shared passages found as shares_passage",
            |l, _| l == "passage",
            |_, a| a == "shares_passage",
        ),
    ];
    for (name, of, and) in figures {
        let (u, un) = ratio(&all, of, and);
        let (w, wn) = ratio(&weighted, of, and);
        println!("| {name} | {u:.3} (of {un}) | {w:.3} (of {wn}) |");
    }
    Ok(Status::Done)
}

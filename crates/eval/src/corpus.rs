//! Scoring detectors on a whole corpus against the text-overlap [`oracle`]: every pair a
//! detector reports is checked for shared text, and every pair the oracle calls a
//! near-duplicate must be among them.

use std::collections::HashSet;
use std::fmt::Write as _;

use rayon::prelude::*;
use serde::Serialize;

use super::detector::CorpusPairs;
use super::f1;
use super::oracle::{self, Overlap, FALSE_POSITIVE_BELOW, MUST_FIND_AT};

/// The oracle's view of a corpus: each article's runs, and the must-find pairs.
pub struct Truth {
    pub runs: Vec<Vec<u64>>,
    /// Pairs `(i, j)`, `i < j`, with Jaccard ≥ [`MUST_FIND_AT`], sorted.
    pub must_find: Vec<(u32, u32)>,
}

impl Truth {
    /// The runs of every article (its fields) and all must-find pairs, exactly.
    pub fn new(texts: &[Vec<String>]) -> Truth {
        let runs: Vec<Vec<u64>> = texts.par_iter().map(|t| oracle::runs(t)).collect();
        let must_find = oracle::similar_pairs(&runs, MUST_FIND_AT)
            .into_iter()
            .map(|(i, j, _)| (i, j))
            .collect();
        Truth { runs, must_find }
    }

    pub fn overlap(&self, i: u32, j: u32) -> Overlap {
        oracle::overlap(&self.runs[i as usize], &self.runs[j as usize])
    }
}

/// One detector at one operating point on the corpus.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CorpusRow {
    pub detector: String,
    pub point: String,
    /// Pairs reported.
    pub reported: usize,
    /// Reported pairs sharing less than [`FALSE_POSITIVE_BELOW`] of the shorter text.
    pub false_positives: usize,
    /// `1 − false_positives / reported` (1 when nothing is reported).
    pub precision: f64,
    /// Must-find pairs reported, and how many there are.
    pub found: usize,
    pub must_find: usize,
    pub recall: f64,
    pub f1: f64,
    /// Articles without a fingerprint, and must-find pairs holding one (never found).
    pub too_short: usize,
    pub must_find_too_short: usize,
}

/// The rows of one detector, one per operating point.
pub fn rows(truth: &Truth, pairs: &CorpusPairs) -> Vec<CorpusRow> {
    let must: HashSet<(u32, u32)> = truth.must_find.iter().copied().collect();
    let short = |i: u32| pairs.too_short.binary_search(&i).is_ok();
    let must_find_too_short = truth
        .must_find
        .iter()
        .filter(|&&(i, j)| short(i) || short(j))
        .count();
    pairs
        .points
        .iter()
        .map(|(point, reported)| {
            let false_positives = reported
                .par_iter()
                .filter(|&&(i, j, _)| truth.overlap(i, j).containment < FALSE_POSITIVE_BELOW)
                .count();
            let found = reported
                .iter()
                .filter(|&&(i, j, _)| must.contains(&(i, j)))
                .count();
            let precision = if reported.is_empty() {
                1.0
            } else {
                1.0 - false_positives as f64 / reported.len() as f64
            };
            let recall = if must.is_empty() {
                1.0
            } else {
                found as f64 / must.len() as f64
            };
            CorpusRow {
                detector: pairs.name.clone(),
                point: point.clone(),
                reported: reported.len(),
                false_positives,
                precision,
                found,
                must_find: must.len(),
                recall,
                f1: f1(precision, recall),
                too_short: pairs.too_short.len(),
                must_find_too_short,
            }
        })
        .collect()
}

/// The index of the row with the highest F1 (the first on ties).
pub fn best_row(rows: &[CorpusRow]) -> Option<usize> {
    (0..rows.len()).fold(None, |best, i| match best {
        Some(b) if rows[b].f1 >= rows[i].f1 => Some(b),
        _ => Some(i),
    })
}

/// A reported pair, for reading by hand.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportedPair {
    pub detector: String,
    pub point: String,
    pub a: String,
    pub b: String,
    /// The detector's score: Hamming distance (SimHash) or estimated Jaccard (MinHash).
    pub score: f64,
    pub containment: f64,
    pub jaccard: f64,
    /// The first characters of each text (letters and digits, as the oracle sees them).
    pub a_start: String,
    pub b_start: String,
}

/// Characters of each text shown in a [`ReportedPair`].
pub const START_CHARS: usize = 80;

/// The `n` reported pairs at point `point` sharing the least text (lowest containment, then
/// by position), with their ids and starts.
pub fn worst(
    truth: &Truth,
    pairs: &CorpusPairs,
    point: usize,
    n: usize,
    ids: &[String],
    texts: &[Vec<String>],
) -> Vec<ReportedPair> {
    let (label, reported) = &pairs.points[point];
    let mut scored: Vec<(Overlap, u32, u32, f64)> = reported
        .par_iter()
        .map(|&(i, j, s)| (truth.overlap(i, j), i, j, s))
        .collect();
    scored.sort_by(|x, y| {
        x.0.containment
            .total_cmp(&y.0.containment)
            .then((x.1, x.2).cmp(&(y.1, y.2)))
    });
    let start = |i: u32| -> String {
        oracle::letters(&texts[i as usize].join("\n"))
            .chars()
            .take(START_CHARS)
            .collect()
    };
    scored
        .into_iter()
        .take(n)
        .map(|(o, i, j, s)| ReportedPair {
            detector: pairs.name.clone(),
            point: label.clone(),
            a: ids[i as usize].clone(),
            b: ids[j as usize].clone(),
            score: s,
            containment: o.containment,
            jaccard: o.jaccard,
            a_start: start(i),
            b_start: start(j),
        })
        .collect()
}

/// A Markdown table of corpus rows; each detector's best F1 is marked.
pub fn markdown(truth: &Truth, articles: usize, all: &[Vec<CorpusRow>]) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "{articles} articles; {} must-find pairs (5-character-run Jaccard ≥ {MUST_FIND_AT}); a reported pair sharing < {:.0}% of the shorter text is a false positive.\n",
        truth.must_find.len(),
        FALSE_POSITIVE_BELOW * 100.0
    )
    .unwrap();
    out.push_str("| detector | point | pairs reported | false positives | precision | must-find found | recall | F1 | too short (must-find pairs) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for rows in all {
        let best = best_row(rows);
        for (n, r) in rows.iter().enumerate() {
            let mark = if Some(n) == best { " (best F1)" } else { "" };
            writeln!(
                out,
                "| {} | {}{} | {} | {} | {:.3} | {} / {} | {:.3} | {:.3} | {} ({}) |",
                r.detector,
                r.point,
                mark,
                r.reported,
                r.false_positives,
                r.precision,
                r.found,
                r.must_find,
                r.recall,
                r.f1,
                r.too_short,
                r.must_find_too_short
            )
            .unwrap();
        }
    }
    out
}

//! Detection quality: labelled pairs, scoring with a fingerprinter (or the MinHash baseline),
//! and precision/recall tables.
//!
//! A benchmark is a list of [`LabelledPair`]s (`{"a": {..}, "b": {..}, "duplicate": bool}` in
//! JSON Lines). [`generate`] builds one from any article file: synthetic reposts made the way
//! reposts really differ, real reposts mined from the corpus itself ([`real`]), and random and
//! hard negatives. A [`detector::Detector`] (SimHash through [`score_simhash`], or the
//! MinHash baseline of [`minhash`]) turns pairs into decisions at each operating point
//! (distance k, or Jaccard threshold), and [`Report`] prints them.
//!
//! On a whole corpus, [`corpus`] checks every pair a detector reports against the
//! text-overlap [`oracle`], which also lists the near-duplicates that must be found.
//!
//! [`synth`] makes corpus-like articles for benchmarks larger than the corpus: real frames
//! around real sentences, or new text walked on the corpus's chain of words.
//!
//! `generate` and `synth` draw seeded random edits and are behind the feature `generate` (on
//! with `cli`): an article service that embeds the library does not compile them.

pub mod aligned;
pub mod corpus;
pub mod detector;
#[cfg(feature = "generate")]
pub mod generate;
pub mod minhash;
pub mod oracle;
pub mod real;
#[cfg(feature = "generate")]
pub mod synth;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::BufRead;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use neardup_core::Fingerprinter;

/// The largest distance k evaluated by default (SimHash); `score_simhash` takes another.
pub const TOP_K_EVALUATED: u32 = 8;

/// One labelled pair. `a` and `b` are article objects; their text fields are chosen when
/// scoring (by default `title` and `content`). `kind`, `transformation`, `size` and
/// `relation` are written by the generator and only group the results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelledPair {
    pub a: Map<String, Value>,
    pub b: Map<String, Value>,
    pub duplicate: bool,
    /// `positive`, `real_positive`, `random_negative`, `hard_negative`, or `shared_passage`
    /// (the pairs of relation [`SHARES_PASSAGE`]: neither a duplicate nor unrelated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformation: Option<String>,
    /// How much of the text the transformation touched (a fraction), or the sentence
    /// containment of a real repost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<f64>,
    /// The relation the pair should get: [`CONTAINED_IN`] (`b` is a part of `a`: the
    /// partial reprints), [`DIFFERENT`] (written on the negatives of the partial-reprint
    /// kinds), [`NEAR_DUPLICATE`] or [`SHARES_PASSAGE`] (written on the copied-text kinds,
    /// [`COPIES_KINDS`]). Files without it read as [`LabelledPair::relation`] says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<String>,
    /// Where the text the two share is in `a`: `[start, end)` in characters (Unicode scalar
    /// values) of `a`'s `content` field; written on the copied-text kinds that copy a passage,
    /// so that the spans a detector reports can be checked. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_span: Option<[usize; 2]>,
    /// Where that text is in `b`: `[start, end)` in characters of `b`'s `content` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_span: Option<[usize; 2]>,
}

/// The relation of a near-duplicate pair.
pub const NEAR_DUPLICATE: &str = "near_duplicate";
/// The relation of a partial reprint: `b` is contained in `a`.
pub const CONTAINED_IN: &str = "contained_in";
/// The relation of two different articles.
pub const DIFFERENT: &str = "different";
/// The relation of two articles that share at least one copied passage while neither is
/// mostly inside the other: a round-up and one of its sources, two articles quoting one
/// statement. A detector finds such a pair only by reporting this relation; reporting it as
/// near-duplicates or one containing the other is a wrong claim.
pub const SHARES_PASSAGE: &str = "shares_passage";

/// The copied-text kinds of issue 43 (copied text, not shared words), in generation order
/// (`generate::copies`): `template_instances` ([`DIFFERENT`]), `template_repost`
/// ([`NEAR_DUPLICATE`]), `compilation` and `shared_quote` ([`SHARES_PASSAGE`]),
/// `wrapped_excerpt` and `reworded_passage` ([`CONTAINED_IN`]). [`Report`] shows what each
/// detector found and claimed wrongly on them in a table of their own.
pub const COPIES_KINDS: &[&str] = &[
    "template_instances",
    "template_repost",
    "compilation",
    "shared_quote",
    "wrapped_excerpt",
    "reworded_passage",
];

impl LabelledPair {
    /// The kind, or `positive`/`negative` from the label when the file gives none.
    pub fn kind(&self) -> &str {
        match &self.kind {
            Some(k) => k,
            None if self.duplicate => "positive",
            None => "negative",
        }
    }

    /// The relation the pair should get: the one the file gives, else [`NEAR_DUPLICATE`]
    /// for a duplicate and [`DIFFERENT`] for the others.
    pub fn relation(&self) -> &str {
        match &self.relation {
            Some(r) => r,
            None if self.duplicate => NEAR_DUPLICATE,
            None => DIFFERENT,
        }
    }

    /// The group a pair is reported in: kind, transformation and size. A partial reprint
    /// ([`CONTAINED_IN`]) is grouped by the share it keeps (` 25%`), other positives by
    /// [`size_bucket`].
    pub fn group(&self) -> String {
        let mut g = self.kind().to_owned();
        if let Some(t) = &self.transformation {
            write!(g, "/{t}").unwrap();
        }
        if let Some(s) = self.size {
            if self.relation() == CONTAINED_IN {
                write!(g, " {:.0}%", s * 100.0).unwrap();
            } else if self.kind() == "positive" && s > 0.0 {
                g.push_str(size_bucket(s));
            }
        }
        g
    }

    fn is_negative_of(&self, kind: &str) -> bool {
        !self.duplicate && self.kind() == kind
    }

    /// Whether the pair is of one of the copied-text kinds ([`COPIES_KINDS`]).
    pub fn is_copied_text(&self) -> bool {
        self.transformation
            .as_deref()
            .is_some_and(|t| COPIES_KINDS.contains(&t))
    }
}

/// The size group of a pair: generated sizes (0.05, 0.10, 0.20, 0.30, 0.50) fall in their own
/// bucket; measured ones (boilerplate, numbers) in the bucket above them.
pub fn size_bucket(size: f64) -> &'static str {
    const BUCKETS: [(f64, &str); 5] = [
        (0.05, " ≤5%"),
        (0.10, " ≤10%"),
        (0.20, " ≤20%"),
        (0.30, " ≤30%"),
        (0.50, " ≤50%"),
    ];
    BUCKETS
        .iter()
        .find(|(max, _)| size <= max + 1e-9)
        .map_or(" >50%", |(_, label)| label)
}

/// Errors reading a pair file: they name the file and line.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{file}:{line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
    #[error("cannot read {file}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
}

/// Reads labelled pairs from JSON Lines; blank lines are skipped, any bad line is an error
/// naming its line (a benchmark with holes would give misleading figures).
pub fn read_pairs(reader: impl BufRead, file: &str) -> Result<Vec<LabelledPair>, PairError> {
    let mut pairs = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| PairError::Io {
            file: file.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let pair: LabelledPair = serde_json::from_str(&line).map_err(|e| PairError::Line {
            file: file.to_owned(),
            line: i + 1,
            message: format!(
                "{e}; expected {{\"a\": {{\"title\": .., \"content\": ..}}, \"b\": {{..}}, \"duplicate\": true|false}}"
            ),
        })?;
        pairs.push(pair);
    }
    Ok(pairs)
}

/// The texts of an article by the one document-to-text rule
/// ([`neardup_core::input::object_texts`]: exact keys or dotted paths, strings and arrays of them).
/// An article with a text field that holds no text (a number, an object…) has none here, and
/// is scored as too short to fingerprint; `neardup eval` refuses such a corpus when reading it.
pub fn fields_of(article: &Map<String, Value>, fields: &[String]) -> Vec<String> {
    neardup_core::input::object_texts(article, fields)
        .map(|t| t.into_iter().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Every distinct text of the pairs once, and for each pair the indices of its two texts:
/// generated benchmarks reuse each original in many pairs, so it is fingerprinted once.
fn unique_texts(pairs: &[LabelledPair], fields: &[String]) -> (Vec<Vec<String>>, Vec<[usize; 2]>) {
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut texts = Vec::new();
    let mut refs = Vec::with_capacity(pairs.len());
    for p in pairs {
        let mut r = [0; 2];
        for (slot, art) in r.iter_mut().zip([&p.a, &p.b]) {
            let t = fields_of(art, fields);
            *slot = *index.entry(t.clone()).or_insert_with(|| {
                texts.push(t);
                texts.len() - 1
            });
        }
        refs.push(r);
    }
    (texts, refs)
}

/// The decisions of one detector over a set of pairs, at each of its operating points.
#[derive(Clone, Debug)]
pub struct Scored {
    /// The detector, e.g. `default` or `minhash-128`.
    pub name: String,
    /// One per operating point: its label (`k=3`, `J>=0.50`) and the per-pair decision: the
    /// pair linked as near-duplicates or as one containing the other (a partial reprint counts
    /// only with its direction, see [`minhash`]). On a pair that should be [`DIFFERENT`] or
    /// [`SHARES_PASSAGE`] such a link is a wrong claim.
    pub points: Vec<(String, Vec<bool>)>,
    /// Per operating point, in the order of `points`, whether the detector reported the pair
    /// as sharing a passage ([`SHARES_PASSAGE`]): what finds a pair of that relation. Empty
    /// for a detector that never reports that relation (SimHash and MinHash today).
    pub passages: Vec<Vec<bool>>,
    /// Pairs where either text was too short to get a fingerprint (never called duplicates).
    pub too_short: Vec<bool>,
    /// Texts that got no fingerprint / all distinct texts.
    pub texts_too_short: (usize, usize),
    /// The Hamming distances (SimHash), `None` where too short; for distance histograms.
    pub distances: Vec<Option<u32>>,
}

/// Scores pairs with a SimHash fingerprinter: duplicate at point `k` when the distance is at
/// most `k`, for k = 0..=`max_k` (usually [`TOP_K_EVALUATED`]). Runs on the rayon pool.
pub fn score_simhash(
    name: &str,
    fp: &Fingerprinter,
    fields: &[String],
    pairs: &[LabelledPair],
    max_k: u32,
) -> Scored {
    let (texts, refs) = unique_texts(pairs, fields);
    let prints: Vec<Option<neardup_core::SimHash>> = texts
        .par_iter()
        .map(|t| fp.fingerprint_fields(t).ok().map(|f| f.simhash))
        .collect();
    let distances: Vec<Option<u32>> = refs
        .iter()
        .map(|&[a, b]| Some(prints[a]?.distance(prints[b]?)))
        .collect();
    let points = (0..=max_k)
        .map(|k| {
            (
                format!("k={k}"),
                distances
                    .iter()
                    .map(|d| d.is_some_and(|d| d <= k))
                    .collect(),
            )
        })
        .collect();
    Scored {
        name: name.to_owned(),
        points,
        passages: Vec::new(),
        too_short: distances.iter().map(Option::is_none).collect(),
        texts_too_short: (prints.iter().filter(|p| p.is_none()).count(), prints.len()),
        distances,
    }
}

/// Confusion counts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Confusion {
    pub tp: usize,
    pub fp: usize,
    pub tn: usize,
    pub fn_: usize,
}

impl Confusion {
    /// Counts decisions against labels over the pairs selected by `keep`.
    pub fn count(
        pairs: &[LabelledPair],
        decided: &[bool],
        keep: impl Fn(&LabelledPair) -> bool,
    ) -> Confusion {
        let mut c = Confusion::default();
        for (p, &d) in pairs.iter().zip(decided) {
            if !keep(p) {
                continue;
            }
            match (p.duplicate, d) {
                (true, true) => c.tp += 1,
                (true, false) => c.fn_ += 1,
                (false, true) => c.fp += 1,
                (false, false) => c.tn += 1,
            }
        }
        c
    }

    pub fn positives(&self) -> usize {
        self.tp + self.fn_
    }

    pub fn negatives(&self) -> usize {
        self.fp + self.tn
    }

    /// TP / (TP + FP); 1 when nothing was called a duplicate.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp, 1.0)
    }

    /// TP / (TP + FN); 1 when there are no positives.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_, 1.0)
    }

    /// FP / (FP + TN); 0 when there are no negatives.
    pub fn false_positive_rate(&self) -> f64 {
        ratio(self.fp, self.fp + self.tn, 0.0)
    }

    pub fn f1(&self) -> f64 {
        f1(self.precision(), self.recall())
    }
}

fn ratio(num: usize, den: usize, empty: f64) -> f64 {
    if den == 0 {
        empty
    } else {
        num as f64 / den as f64
    }
}

/// Harmonic mean of precision and recall (0 when both are 0).
pub fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Precision against one kind of negatives as if there were as many of them as positives:
/// `TP / (TP + FPR · P)`. It does not depend on how many negatives of that kind the benchmark
/// happens to hold, so random and hard negatives can be compared.
pub fn balanced_precision(recall: f64, fpr: f64) -> f64 {
    if recall + fpr == 0.0 {
        1.0
    } else {
        recall / (recall + fpr)
    }
}

/// One row of the overall table: a detector at one operating point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverallRow {
    pub detector: String,
    pub point: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Recall over synthetic positives that touch at most 10% of the text.
    pub recall_small_edits: f64,
    /// Recall over mined real reposts (≥ 90% sentence containment).
    pub recall_real: Option<f64>,
    /// Balanced precision against random negatives, and their false-positive rate.
    pub precision_random: Option<f64>,
    pub fpr_random: Option<f64>,
    /// Balanced precision against hard negatives, and their false-positive rate.
    pub precision_hard: Option<f64>,
    pub fpr_hard: Option<f64>,
}

/// Whether a pair is a synthetic positive whose edit touches at most 10% of the text.
pub fn is_small_edit(p: &LabelledPair) -> bool {
    p.duplicate && p.kind() == "positive" && p.size.unwrap_or(0.0) <= 0.10 + 1e-9
}

/// Whether a pair is a mined real repost (not the partial-overlap ones).
pub fn is_real_repost(p: &LabelledPair) -> bool {
    p.duplicate && p.kind() == "real_positive" && p.transformation.as_deref() == Some("real_repost")
}

/// The overall rows of one detector, one per operating point.
pub fn overall(pairs: &[LabelledPair], s: &Scored) -> Vec<OverallRow> {
    s.points
        .iter()
        .map(|(point, decided)| {
            let all = Confusion::count(pairs, decided, |_| true);
            let small = Confusion::count(pairs, decided, is_small_edit);
            let real = Confusion::count(pairs, decided, is_real_repost);
            let recall = all.recall();
            let neg = |kind: &str| {
                let c = Confusion::count(pairs, decided, |p| p.is_negative_of(kind));
                (c.negatives() > 0).then(|| c.false_positive_rate())
            };
            let (fpr_random, fpr_hard) = (neg("random_negative"), neg("hard_negative"));
            OverallRow {
                detector: s.name.clone(),
                point: point.clone(),
                precision: all.precision(),
                recall,
                f1: all.f1(),
                recall_small_edits: small.recall(),
                recall_real: (real.positives() > 0).then(|| real.recall()),
                precision_random: fpr_random.map(|f| balanced_precision(recall, f)),
                fpr_random,
                precision_hard: fpr_hard.map(|f| balanced_precision(recall, f)),
                fpr_hard,
            }
        })
        .collect()
}

/// The operating point with the highest F1 (the first on ties).
pub fn best_point(rows: &[OverallRow]) -> Option<&OverallRow> {
    rows.iter()
        .fold(None, |best: Option<&OverallRow>, r| match best {
            Some(b) if b.f1 >= r.f1 => Some(b),
            _ => Some(r),
        })
}

/// Per-group figures of one detector at one operating point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupRow {
    pub group: String,
    pub pairs: usize,
    /// Pairs where a text got no fingerprint.
    pub too_short: usize,
    /// Recall for positives, false-positive rate for negatives.
    pub rate: f64,
    pub duplicate: bool,
}

/// Figures per group (kind/transformation/size) at operating point `point`.
pub fn by_group(pairs: &[LabelledPair], s: &Scored, point: usize) -> Vec<GroupRow> {
    let decided = &s.points[point].1;
    let mut groups: BTreeMap<(bool, String), (usize, usize, usize)> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let e = groups.entry((!p.duplicate, p.group())).or_default();
        e.0 += 1;
        e.1 += usize::from(s.too_short[i]);
        e.2 += usize::from(decided[i]);
    }
    groups
        .into_iter()
        .map(|((neg, group), (n, short, yes))| GroupRow {
            group,
            pairs: n,
            too_short: short,
            rate: yes as f64 / n as f64,
            duplicate: !neg,
        })
        .collect()
}

/// What one detector at one operating point did on one group of the copied-text kinds
/// ([`COPIES_KINDS`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClaimRow {
    pub group: String,
    pub pairs: usize,
    /// The share of the pairs that can be found which were reported with the relation they
    /// should get: linked (with its direction for [`CONTAINED_IN`]) for a duplicate, reported
    /// as sharing a passage for [`SHARES_PASSAGE`]. `None` when the group holds only
    /// [`DIFFERENT`] pairs, which nothing finds.
    pub found: Option<f64>,
    /// The share of the [`DIFFERENT`] and [`SHARES_PASSAGE`] pairs reported as
    /// near-duplicates or as one containing the other. `None` when the group holds none.
    pub wrong_claims: Option<f64>,
    /// The share of the [`DIFFERENT`] pairs reported as sharing a passage: linked, though not
    /// as copies (template instances should not be linked at all). `None` when the group
    /// holds none.
    pub passage_claims: Option<f64>,
}

/// Found and wrong claims per group of the copied-text kinds at operating point `point`, in
/// the order of [`COPIES_KINDS`]; no row when the pairs hold none of them.
pub fn claims_by_group(pairs: &[LabelledPair], s: &Scored, point: usize) -> Vec<ClaimRow> {
    let decided = &s.points[point].1;
    let passage = s.passages.get(point);
    // (kind's rank, group) → (pairs, findable, found, claimable, claimed, different,
    // different reported as sharing a passage)
    let mut groups: BTreeMap<(usize, String), [usize; 7]> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let Some(rank) = p
            .transformation
            .as_deref()
            .and_then(|t| COPIES_KINDS.iter().position(|k| *k == t))
        else {
            continue;
        };
        let e = groups.entry((rank, p.group())).or_default();
        e[0] += 1;
        let linked = decided[i];
        match p.relation() {
            DIFFERENT => {
                e[3] += 1;
                e[4] += usize::from(linked);
                e[5] += 1;
                e[6] += usize::from(passage.is_some_and(|v| v[i]));
            }
            SHARES_PASSAGE => {
                e[1] += 1;
                e[2] += usize::from(passage.is_some_and(|v| v[i]));
                e[3] += 1;
                e[4] += usize::from(linked);
            }
            _ => {
                e[1] += 1;
                e[2] += usize::from(linked);
            }
        }
    }
    groups
        .into_iter()
        .map(
            |((_, group), [n, findable, found, claimable, claimed, different, as_passage])| {
                ClaimRow {
                    group,
                    pairs: n,
                    found: (findable > 0).then(|| found as f64 / findable as f64),
                    wrong_claims: (claimable > 0).then(|| claimed as f64 / claimable as f64),
                    passage_claims: (different > 0).then(|| as_passage as f64 / different as f64),
                }
            },
        )
        .collect()
}

fn opt(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.3}"))
}

/// A printable report over one or more detectors.
pub struct Report<'a> {
    pub pairs: &'a [LabelledPair],
    pub scored: &'a [Scored],
    /// The operating points shown per group, e.g. `k=3` and `J>=0.3`; a detector with none
    /// of them shows its best.
    pub points: Vec<String>,
}

impl Report<'_> {
    /// Markdown tables: the benchmark's make-up, every detector at every operating point,
    /// and per group at the chosen point.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let pos = self.pairs.iter().filter(|p| p.duplicate).count();
        writeln!(
            out,
            "{} pairs: {} duplicates, {} not.\n",
            self.pairs.len(),
            pos,
            self.pairs.len() - pos
        )
        .unwrap();
        out.push_str("| detector | point | precision | recall | F1 | recall ≤10% edits | recall real reposts | P vs random (FPR) | P vs hard (FPR) |\n");
        out.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for s in self.scored {
            let rows = overall(self.pairs, s);
            let best = best_point(&rows).map(|b| b.point.clone());
            for r in &rows {
                let mark = if Some(&r.point) == best.as_ref() {
                    " (best F1)"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "| {} | {}{} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} ({}) | {} ({}) |",
                    r.detector,
                    r.point,
                    mark,
                    r.precision,
                    r.recall,
                    r.f1,
                    r.recall_small_edits,
                    opt(r.recall_real),
                    opt(r.precision_random),
                    opt(r.fpr_random),
                    opt(r.precision_hard),
                    opt(r.fpr_hard),
                )
                .unwrap();
            }
        }
        out.push('\n');
        out.push_str(&self.too_short_table());
        out.push('\n');
        out.push_str(&self.group_table());
        if self.pairs.iter().any(LabelledPair::is_copied_text) {
            out.push('\n');
            out.push_str(&self.copied_text_table());
        }
        out
    }

    /// Too-short rate per detector: distinct texts without a fingerprint, and pairs affected.
    pub fn too_short_table(&self) -> String {
        let mut out = String::from(
            "| detector | texts too short | pairs with a too-short text |\n|---|---|---|\n",
        );
        for s in self.scored {
            let (short, texts) = s.texts_too_short;
            let pairs = s.too_short.iter().filter(|&&t| t).count();
            writeln!(
                out,
                "| {} | {} / {} ({:.2}%) | {} / {} ({:.2}%) |",
                s.name,
                short,
                texts,
                100.0 * short as f64 / texts.max(1) as f64,
                pairs,
                s.too_short.len(),
                100.0 * pairs as f64 / s.too_short.len().max(1) as f64
            )
            .unwrap();
        }
        out
    }

    /// The point index of each detector shown in the group table: the requested one, or the
    /// detector's best-F1 point when it has no such point (MinHash thresholds).
    fn point_of(&self, s: &Scored) -> usize {
        s.points
            .iter()
            .position(|(p, _)| self.points.contains(p))
            .unwrap_or_else(|| {
                let rows = overall(self.pairs, s);
                let best = best_point(&rows).map(|b| b.point.clone());
                s.points
                    .iter()
                    .position(|(p, _)| Some(p) == best.as_ref())
                    .unwrap_or(0)
            })
    }

    /// Recall (duplicates) or false-positive rate (non-duplicates) per group, one column per
    /// detector.
    pub fn group_table(&self) -> String {
        let mut out = String::new();
        let points: Vec<usize> = self.scored.iter().map(|s| self.point_of(s)).collect();
        let tables: Vec<Vec<GroupRow>> = self
            .scored
            .iter()
            .zip(&points)
            .map(|(s, &i)| by_group(self.pairs, s, i))
            .collect();
        out.push_str("Per group: recall for duplicates, false-positive rate for non-duplicates (lower is better); too-short pairs count as not detected.\n\n| group | pairs |");
        for (s, &i) in self.scored.iter().zip(&points) {
            write!(out, " {} {} |", s.name, s.points[i].0).unwrap();
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---|".repeat(self.scored.len()));
        out.push('\n');
        let Some(first) = tables.first() else {
            return out;
        };
        for (row, g) in first.iter().enumerate() {
            let label = if g.duplicate { "" } else { " (FPR)" };
            write!(out, "| {}{} | {} |", g.group, label, g.pairs).unwrap();
            for t in &tables {
                write!(out, " {:.3} |", t[row].rate).unwrap();
            }
            out.push('\n');
        }
        out
    }
}

impl Report<'_> {
    /// The copied-text kinds ([`COPIES_KINDS`]) at each detector's point of the group table:
    /// found and wrong claims per group (see [`ClaimRow`]).
    pub fn copied_text_table(&self) -> String {
        let points: Vec<usize> = self.scored.iter().map(|s| self.point_of(s)).collect();
        let tables: Vec<Vec<ClaimRow>> = self
            .scored
            .iter()
            .zip(&points)
            .map(|(s, &i)| claims_by_group(self.pairs, s, i))
            .collect();
        let mut out = String::from(
            "Copied text (issue 43): found = reported with the relation the pair should get (near_duplicate; contained_in with its direction; shares_passage, which only the alignment detector, `--aligned`, reports); wrong claims = a `different` or `shares_passage` pair reported as near_duplicate, contains or contained_in; as passage = a `different` pair reported as shares_passage (linked, though not as a copy).\n\n| group | pairs |",
        );
        for (s, &i) in self.scored.iter().zip(&points) {
            write!(
                out,
                " {n} {p} found | {n} {p} wrong claims | {n} {p} as passage |",
                n = s.name,
                p = s.points[i].0
            )
            .unwrap();
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---|---|---|".repeat(self.scored.len()));
        out.push('\n');
        let Some(first) = tables.first() else {
            return out;
        };
        for (row, g) in first.iter().enumerate() {
            write!(out, "| {} | {} |", g.group, g.pairs).unwrap();
            for t in &tables {
                write!(
                    out,
                    " {} | {} | {} |",
                    opt(t[row].found),
                    opt(t[row].wrong_claims),
                    opt(t[row].passage_claims)
                )
                .unwrap();
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dup: bool, kind: &str) -> LabelledPair {
        LabelledPair {
            a: Map::new(),
            b: Map::new(),
            duplicate: dup,
            kind: Some(kind.into()),
            transformation: None,
            size: None,
            relation: None,
            a_span: None,
            b_span: None,
        }
    }

    #[test]
    fn partial_reprints_are_grouped_by_the_share_they_keep() {
        let mut p = pair(true, "positive");
        p.transformation = Some("lead_excerpt".into());
        p.size = Some(0.25);
        assert_eq!(p.relation(), NEAR_DUPLICATE);
        assert_eq!(p.group(), "positive/lead_excerpt ≤30%");
        p.relation = Some(CONTAINED_IN.into());
        assert_eq!(p.group(), "positive/lead_excerpt 25%");
        p.size = Some(0.3);
        assert_eq!(p.group(), "positive/lead_excerpt 30%");
        assert_eq!(pair(false, "hard_negative").relation(), DIFFERENT);
        // A file without relations reads as before; one with them writes them.
        let old: LabelledPair =
            serde_json::from_str(r#"{"a": {}, "b": {}, "duplicate": true, "size": 0.25}"#).unwrap();
        assert_eq!(old.relation, None);
        let line = serde_json::to_string(&p).unwrap();
        assert!(
            line.ends_with(r#""size":0.3,"relation":"contained_in"}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<LabelledPair>(&line).unwrap(), p);
    }

    #[test]
    fn spans_are_optional_and_old_files_still_read() {
        let old: LabelledPair = serde_json::from_str(
            r#"{"a": {}, "b": {}, "duplicate": false, "relation": "different"}"#,
        )
        .unwrap();
        assert_eq!((old.a_span, old.b_span), (None, None));
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("span"), "{line}");
        let mut p = pair(false, "shared_passage");
        p.relation = Some(SHARES_PASSAGE.into());
        p.a_span = Some([3, 40]);
        p.b_span = Some([10, 47]);
        let line = serde_json::to_string(&p).unwrap();
        assert!(
            line.ends_with(r#""relation":"shares_passage","a_span":[3,40],"b_span":[10,47]}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<LabelledPair>(&line).unwrap(), p);
    }

    /// A `shares_passage` pair is found only when reported with that relation; linking it is
    /// a wrong claim, as linking a `different` pair is. Groups of other kinds get no row.
    #[test]
    fn copied_text_groups_count_found_and_wrong_claims() {
        let copied = |dup: bool, kind: &str, t: &str, relation: &str| {
            let mut p = pair(dup, kind);
            p.transformation = Some(t.into());
            p.relation = Some(relation.into());
            p
        };
        let pairs = vec![
            copied(false, "shared_passage", "compilation", SHARES_PASSAGE),
            copied(false, "shared_passage", "compilation", SHARES_PASSAGE),
            copied(false, "hard_negative", "template_instances", DIFFERENT),
            copied(false, "hard_negative", "template_instances", DIFFERENT),
            copied(true, "positive", "template_repost", NEAR_DUPLICATE),
            pair(false, "hard_negative"),
        ];
        let mut s = Scored {
            name: "d".into(),
            points: vec![("k=3".into(), vec![true, false, false, true, true, true])],
            passages: Vec::new(),
            too_short: vec![false; 6],
            texts_too_short: (0, 12),
            distances: vec![None; 6],
        };
        let rows = claims_by_group(&pairs, &s, 0);
        type Figures<'a> = (&'a str, Option<f64>, Option<f64>, Option<f64>);
        let figures: Vec<Figures> = rows
            .iter()
            .map(|r| (r.group.as_str(), r.found, r.wrong_claims, r.passage_claims))
            .collect();
        assert_eq!(
            figures,
            [
                (
                    "hard_negative/template_instances",
                    None,
                    Some(0.5),
                    Some(0.0)
                ),
                ("positive/template_repost", Some(1.0), None, None),
                ("shared_passage/compilation", Some(0.0), Some(0.5), None),
            ]
        );
        // A detector that reports shares_passage finds them, and links a template instance.
        s.passages = vec![vec![true, true, true, false, false, false]];
        let rows = claims_by_group(&pairs, &s, 0);
        assert_eq!(rows[2].found, Some(1.0));
        assert_eq!(rows[0].passage_claims, Some(0.5));
        let report = Report {
            pairs: &pairs,
            scored: std::slice::from_ref(&s),
            points: vec!["k=3".into()],
        };
        let md = report.markdown();
        assert!(
            md.contains("| shared_passage/compilation | 2 | 1.000 | 0.500 | – |"),
            "{md}"
        );
        // Without copied-text pairs the report is as it was.
        let plain = Report {
            pairs: &pairs[5..],
            scored: &[Scored {
                points: vec![("k=3".into(), vec![true])],
                too_short: vec![false],
                distances: vec![None],
                ..s.clone()
            }],
            points: vec!["k=3".into()],
        };
        assert!(!plain.markdown().contains("Copied text"));
    }

    #[test]
    fn confusion_math() {
        let pairs = vec![
            pair(true, "positive"),
            pair(true, "positive"),
            pair(false, "random_negative"),
            pair(false, "hard_negative"),
        ];
        let c = Confusion::count(&pairs, &[true, false, false, true], |_| true);
        assert_eq!(
            c,
            Confusion {
                tp: 1,
                fp: 1,
                tn: 1,
                fn_: 1
            }
        );
        assert_eq!(c.precision(), 0.5);
        assert_eq!(c.recall(), 0.5);
        assert_eq!(c.f1(), 0.5);
    }
}

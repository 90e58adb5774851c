//! The detectors under evaluation, behind one interface: score labelled pairs at each
//! operating point, and report every pair of a corpus at each operating point.
//!
//! A new method is one new [`Detector`] arm; the benchmark tables and the corpus oracle
//! ([`super::corpus`]) take any detector.

use rayon::prelude::*;

use super::{aligned, minhash};
use super::{score_simhash, LabelledPair, Scored};
use neardup_core::allpairs::aligned::FoundBy;
use neardup_core::allpairs::minhash::all_pairs_related;
use neardup_core::allpairs::simhash::AllPairs;
use neardup_core::minhash::{Signature, Threshold};
use neardup_core::relation::{AlignRule, MatchOptions, MatchRule};
use neardup_core::text::Boilerplate;
use neardup_core::{Fingerprinter, SimHash};
use std::sync::Arc;

/// A near-duplicate detector and its operating points.
pub enum Detector {
    /// SimHash with a fingerprinter; duplicate at point `k=K` when the distance is ≤ K.
    SimHash { name: String, fp: Fingerprinter },
    /// The library's MinHash with `fp`'s parameters and the relations of `options`; at
    /// point `J>=T` ([`minhash::THRESHOLDS`]) a pair is found as the store and `dedupe`
    /// decide (see [`minhash`]).
    MinHash {
        fp: Fingerprinter,
        options: MatchOptions,
    },
    /// MinHash's candidates judged by aligning the texts ([`aligned`]): one operating point.
    Aligned {
        fp: Fingerprinter,
        options: MatchOptions,
    },
}

/// A pair of corpus positions `(i, j)`, `i < j`, and the detector's score for it.
pub type ScoredPair = (u32, u32, f64);

/// The pairs a detector reports on a corpus: at each operating point, `(i, j, score)` with
/// `i < j` positions in the corpus and the detector's own score (distance or estimate).
#[derive(Clone, Debug)]
pub struct CorpusPairs {
    pub name: String,
    pub points: Vec<(String, Vec<ScoredPair>)>,
    /// Positions of the articles that got no fingerprint or signature (their pairs are never
    /// reported), ascending.
    pub too_short: Vec<u32>,
}

impl Detector {
    pub fn name(&self) -> String {
        match self {
            Detector::SimHash { name, .. } => name.clone(),
            Detector::MinHash { fp, options } => minhash::name(fp, options),
            Detector::Aligned { fp, options } => aligned::name(fp, options),
        }
    }

    /// The fingerprinter it measures.
    pub fn fingerprinter(&self) -> &Fingerprinter {
        match self {
            Detector::SimHash { fp, .. }
            | Detector::MinHash { fp, .. }
            | Detector::Aligned { fp, .. } => fp,
        }
    }

    /// The same detector dropping `boilerplate` before segmentation, as `dedupe` does with
    /// what it learns from its input (none: as it was).
    pub fn with_boilerplate(self, boilerplate: Option<Arc<Boilerplate>>) -> Detector {
        match self {
            Detector::SimHash { name, fp } => Detector::SimHash {
                name,
                fp: fp.with_boilerplate(boilerplate),
            },
            Detector::MinHash { fp, options } => Detector::MinHash {
                fp: fp.with_boilerplate(boilerplate),
                options,
            },
            Detector::Aligned { fp, options } => Detector::Aligned {
                fp: fp.with_boilerplate(boilerplate),
                options,
            },
        }
    }

    /// Decisions on labelled pairs; SimHash at k = 0..=`max_k`.
    pub fn score(&self, fields: &[String], pairs: &[LabelledPair], max_k: u32) -> Scored {
        match self {
            Detector::SimHash { name, fp } => score_simhash(name, fp, fields, pairs, max_k),
            Detector::MinHash { fp, options } => minhash::score(fp, options, fields, pairs),
            Detector::Aligned { fp, options } => aligned::score(fp, options, fields, pairs),
        }
    }

    /// Every pair of `texts` (the fields of each article) the detector reports, at each
    /// operating point; SimHash at k = 0..=min(`max_k`, [`neardup_core::simhash::MAX_K`]) through
    /// [`AllPairs`], MinHash at each threshold by comparing every pair of signatures.
    pub fn corpus_pairs(&self, texts: &[Vec<String>], max_k: u32) -> CorpusPairs {
        match self {
            Detector::SimHash { name, fp } => simhash_pairs(name, fp, texts, max_k),
            Detector::MinHash { fp, options } => minhash_pairs(fp, options, texts),
            Detector::Aligned { fp, options } => aligned_pairs(fp, options, texts),
        }
    }
}

fn simhash_pairs(name: &str, fp: &Fingerprinter, texts: &[Vec<String>], max_k: u32) -> CorpusPairs {
    let prints: Vec<Option<SimHash>> = texts
        .par_iter()
        .map(|t| fp.fingerprint_fields(t).ok().map(|f| f.simhash))
        .collect();
    let (docs, fps): (Vec<u32>, Vec<SimHash>) = prints
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i as u32, (*p)?)))
        .unzip();
    let top = max_k.min(neardup_core::simhash::MAX_K);
    let matches = AllPairs::new(top)
        .expect("k is at most simhash::MAX_K")
        .run(&fps);
    let mut all: Vec<(u32, u32, u32)> = matches
        .pairs()
        .map(|(a, b, d)| {
            let (a, b) = (docs[a as usize], docs[b as usize]);
            (a.min(b), a.max(b), d)
        })
        .collect();
    all.sort_unstable();
    CorpusPairs {
        name: name.to_owned(),
        points: (0..=top)
            .map(|k| {
                (
                    format!("k={k}"),
                    all.iter()
                        .filter(|p| p.2 <= k)
                        .map(|&(a, b, d)| (a, b, f64::from(d)))
                        .collect(),
                )
            })
            .collect(),
        too_short: missing(&prints),
    }
}

fn minhash_pairs(fp: &Fingerprinter, options: &MatchOptions, texts: &[Vec<String>]) -> CorpusPairs {
    let params = fp.config().minhash;
    let sigs = minhash::signatures(fp, texts);
    let (docs, present): (Vec<u32>, Vec<Signature>) = sigs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i as u32, s.clone()?)))
        .unzip();
    // The pairs `dedupe` reports at the lowest threshold; higher points keep those the rule
    // still relates there (containments do not depend on the threshold).
    let rule = |t: f64| {
        MatchRule::new(
            Threshold::new(t).expect("the thresholds are in range"),
            *options,
        )
    };
    let found = all_pairs_related(&present, &params, &rule(minhash::THRESHOLDS[0]));
    let mut all: Vec<(ScoredPair, [u32; 2])> = found
        .pairs()
        .map(|(a, b, s)| {
            let (da, db) = (docs[a as usize], docs[b as usize]);
            ((da.min(db), da.max(db), s), [a, b])
        })
        .collect();
    all.sort_unstable_by_key(|p| (p.0 .0, p.0 .1));
    CorpusPairs {
        name: minhash::name(fp, options),
        points: minhash::THRESHOLDS
            .iter()
            .map(|&t| {
                let rule = rule(t);
                (
                    minhash::point_label(t),
                    all.iter()
                        .filter(|(_, [a, b])| {
                            rule.relate(&present[*a as usize], &present[*b as usize])
                                .is_some()
                        })
                        .map(|(p, _)| *p)
                        .collect(),
                )
            })
            .collect(),
        too_short: missing(&sigs),
    }
}

/// Every pair of `texts` the alignment detector ([`aligned`]) claims as a copy: its
/// candidates ([`neardup_core::allpairs::aligned::candidates`] and the anchors') kept when the alignment rule
/// says copy, as `neardup dedupe --align` keeps them; the score is the smaller text's share
/// in runs.
fn aligned_pairs(fp: &Fingerprinter, options: &MatchOptions, texts: &[Vec<String>]) -> CorpusPairs {
    let aligned::Prepared {
        sigs,
        letters,
        formula,
        aligned: candidates,
        by_anchors,
    } = aligned::prepare(fp, texts);
    let anchored =
        neardup_core::allpairs::aligned::align_pairs(&by_anchors, |i| letters.get(i as usize));
    let mut claimed: Vec<(u32, u32, f64)> = neardup_core::allpairs::aligned::judge(
        [(candidates, FoundBy::MinHash), (anchored, FoundBy::Anchors)],
        |i| letters.get(i as usize),
        &formula,
        &AlignRule::DEFAULT,
    )
    .into_iter()
    .filter(|p| p.matched.relation.is_copy())
    .map(|p| {
        (
            p.a.min(p.b),
            p.a.max(p.b),
            p.matched.a_copied.min(p.matched.b_copied),
        )
    })
    .collect();
    claimed.sort_unstable_by_key(|p| (p.0, p.1));
    CorpusPairs {
        name: aligned::name(fp, options),
        points: vec![(aligned::POINT.to_owned(), claimed)],
        too_short: (0..sigs.len() as u32)
            .filter(|&i| sigs[i as usize].is_none())
            .collect(),
    }
}

/// The positions holding `None`.
fn missing<T>(v: &[Option<T>]) -> Vec<u32> {
    (0..v.len() as u32)
        .filter(|&i| v[i as usize].is_none())
        .collect()
}

/// Boilerplate learned from `texts` (the fields of each document) as `dedupe` learns it from
/// its input: with `fp`'s text preparation, at the default thresholds. `None` when no line
/// recurs enough.
pub fn learn_boilerplate(fp: &Fingerprinter, texts: &[Vec<String>]) -> Option<Boilerplate> {
    let mut learner = fp.boilerplate_learner(neardup_core::text::boilerplate::DEFAULT_SAMPLE);
    for t in texts {
        learner.add(t);
    }
    Some(learner.finish(None)).filter(|b| !b.is_empty())
}

//! `neardup-bench containment-candidates`: which candidate step reaches partial reprints
//! (issue 31, part 2), measured, not built into `src`.
//!
//! From a corpus, excerpts are cut out of long articles: a lead (the title and the first
//! share of the content's characters) and a passage (that share of the content from a
//! position fixed by the article's id, without the title). Each excerpt is a query against
//! the signatures of the whole corpus, under each candidate step:
//! - `bands`: today's LSH bands (42 × 3 by default): a candidate shares a band key;
//! - `minima≥m`: at least `m` of the 128 minima agree, position by position (one key per
//!   (position, minimum), counted per document); with `--positions N --minimum-bits B`, of
//!   the first N minima on their lowest B bits, as an Elasticsearch index's minima terms
//!   hold them (fields format 4: 64 and 18).
//!
//! For each step and share it reports the recall of the source article among the candidates,
//! the recall after the relation rule (`relation::MatchRule`, defaults), and the candidates
//! per query (the cost); the candidates per query of whole corpus articles as queries, too;
//! and, over the whole corpus, how many of the near-duplicate pairs the bands find (a shared
//! band, estimate at the default threshold) each step makes candidates, and how many pairs at
//! the threshold it finds that share no band.
//! With `--pairs`, labelled pairs (`neardup eval --generate`) too: per group of positives, the
//! share each step (and the bands or it, as a store's containment query) makes candidates.

use std::collections::HashMap;

use neardup::input::{self, Body, InputSpec};
use neardup::minhash::Threshold;
use neardup::relation::{MatchOptions, MatchRule};
use neardup::Signature;
use rayon::prelude::*;

use neardup::cli::common::{CmdResult, ProfileArgs, Status};

#[derive(clap::Args, Debug)]
pub struct ContainmentBench {
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// Articles to cut excerpts from (the first ones with at least --min-chars of content,
    /// spread over the corpus).
    #[arg(long, default_value_t = 300)]
    sample: usize,
    /// Content characters an article needs to be cut.
    #[arg(long, default_value_t = 1200)]
    min_chars: usize,
    /// Shares of the content an excerpt keeps.
    #[arg(long, value_delimiter = ',', default_values_t = [0.2, 0.25, 0.3, 0.4])]
    shares: Vec<f64>,
    /// Smallest numbers of agreeing minima to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 4, 6, 8, 10, 12, 16])]
    minima: Vec<u32>,
    /// Minima keyed, the signature's first ones (Elasticsearch's fields format 4: 64).
    #[arg(long, default_value_t = 128)]
    positions: usize,
    /// Lowest bits of each minimum keyed (fields format 4: 18; format 3: 10).
    #[arg(long, default_value_t = 32)]
    minimum_bits: u32,
    /// Corpus articles used as queries to measure the cost for whole articles.
    #[arg(long, default_value_t = 500)]
    cost_queries: usize,
    /// Also labelled pairs (`neardup eval --generate`): for each group of positives, the
    /// share each step makes candidates and the share then found (related by the rule).
    #[arg(long, value_name = "PATH")]
    pairs: Option<String>,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// The corpus's signatures filed for both candidate steps.
struct Index {
    bands: HashMap<u64, Vec<u32>>,
    minima: HashMap<(u8, u32), Vec<u32>>,
    docs: usize,
    /// Minima keyed (the first ones) and the mask of their bits kept.
    positions: usize,
    mask: u32,
}

impl Index {
    fn new(
        sigs: &[Option<Signature>],
        params: &neardup::MinHashParams,
        positions: usize,
        minimum_bits: u32,
    ) -> Index {
        let mask = if minimum_bits >= 32 {
            u32::MAX
        } else {
            (1u32 << minimum_bits) - 1
        };
        let mut bands: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut minima: HashMap<(u8, u32), Vec<u32>> = HashMap::new();
        for (d, s) in sigs.iter().enumerate() {
            let Some(s) = s else { continue };
            for k in s.band_keys(params) {
                bands.entry(k).or_default().push(d as u32);
            }
            for (i, &v) in s.values().iter().take(positions).enumerate() {
                minima
                    .entry((i as u8, v & mask))
                    .or_default()
                    .push(d as u32);
            }
        }
        Index {
            bands,
            minima,
            docs: sigs.len(),
            positions,
            mask,
        }
    }

    /// Documents sharing a band with `q`.
    fn band_candidates(&self, q: &Signature, params: &neardup::MinHashParams) -> Vec<u32> {
        let mut out: Vec<u32> = q
            .band_keys(params)
            .iter()
            .filter_map(|k| self.bands.get(k))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// For each document, how many of `q`'s minima it holds at the same position (only
    /// documents with at least one).
    fn agreements(&self, q: &Signature) -> HashMap<u32, u32> {
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for (i, &v) in q.values().iter().take(self.positions).enumerate() {
            if let Some(docs) = self.minima.get(&(i as u8, v & self.mask)) {
                for &d in docs {
                    *counts.entry(d).or_default() += 1;
                }
            }
        }
        counts
    }
}

/// Per step: queries whose source is a candidate, found after the rule, candidates summed.
#[derive(Default, Clone, Copy)]
struct Tally {
    candidate: u64,
    found: u64,
    candidates: u64,
    /// Candidates other than the source that the rule relates to the excerpt.
    others: u64,
}

/// FNV-1a: a fixed hash of an id, for the passage's position.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn cut(content: &str, share: f64, offset_seed: u64, lead: bool) -> String {
    let chars: Vec<char> = content.chars().collect();
    let n = ((chars.len() as f64) * share).round() as usize;
    let start = if lead {
        0
    } else {
        (offset_seed % (chars.len() - n + 1) as u64) as usize
    };
    chars[start..start + n].iter().collect()
}

pub fn run(args: ContainmentBench) -> CmdResult {
    let fp = args.profile.fingerprinter()?;
    let params = *fp.minhasher().params();
    let file = input::open(&args.input)?;
    let docs: Vec<_> = input::read_all(file.reader, &args.input, &InputSpec::default())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let fields: Vec<Vec<String>> = docs
        .iter()
        .map(|d| match &d.body {
            Body::Fields(f) => f.clone(),
            Body::Tokens(t) => vec![t.join(" ")],
        })
        .collect();
    let sigs: Vec<Option<Signature>> = fields
        .par_iter()
        .map(|f| fp.minhash_fields(f).ok().map(|m| m.signature))
        .collect();
    let index = Index::new(&sigs, &params, args.positions, args.minimum_bits);
    let rule = MatchRule::new(Threshold::default(), MatchOptions::default());

    let long: Vec<usize> = (0..docs.len())
        .filter(|&d| {
            sigs[d].is_some() && fields[d].last().map_or(0, |c| c.chars().count()) >= args.min_chars
        })
        .collect();
    let stride = (long.len() / args.sample.max(1)).max(1);
    let sample: Vec<usize> = long
        .iter()
        .step_by(stride)
        .take(args.sample)
        .copied()
        .collect();
    eprintln!(
        "containment-candidates: {} articles ({} signed), {} long enough, {} sampled; params {params}",
        docs.len(),
        sigs.iter().filter(|s| s.is_some()).count(),
        long.len(),
        sample.len()
    );
    // Which minima are keyed, on how many bits: `128x32b` is every whole minimum.
    let keyed = format!("{}x{}b", args.positions, args.minimum_bits.min(32));
    println!(
        "kind\tshare\tqueries\tstep\tcandidate_recall\tfound_recall\tcandidates_per_query\tother_links_per_query"
    );
    for lead in [true, false] {
        let kind = if lead { "lead" } else { "passage" };
        for &share in &args.shares {
            let rows: Vec<(Tally, Vec<Tally>, bool)> = sample
                .par_iter()
                .filter_map(|&d| {
                    let f = &fields[d];
                    let content = f.last()?;
                    let seed = fnv1a(docs[d].id.key().as_bytes());
                    let text = cut(content, share, seed, lead);
                    let ex: Vec<String> = if lead && f.len() > 1 {
                        vec![f[0].clone(), text]
                    } else {
                        vec![text]
                    };
                    let q = fp.minhash_fields(&ex).ok()?.signature;
                    let full = sigs[d].as_ref()?;
                    let related = rule.relate(&q, full).is_some();
                    let bands = index.band_candidates(&q, &params);
                    let in_bands = bands.binary_search(&(d as u32)).is_ok();
                    let links = |c: &u32| {
                        *c != d as u32
                            && sigs[*c as usize]
                                .as_ref()
                                .is_some_and(|s| rule.relate(&q, s).is_some())
                    };
                    let band = Tally {
                        candidate: u64::from(in_bands),
                        found: u64::from(in_bands && related),
                        candidates: bands.len() as u64,
                        others: bands.iter().filter(|c| links(c)).count() as u64,
                    };
                    let counts = index.agreements(&q);
                    let own = counts.get(&(d as u32)).copied().unwrap_or(0);
                    let minima = args
                        .minima
                        .iter()
                        .map(|&m| {
                            let hit = own >= m;
                            let over: Vec<u32> = counts
                                .iter()
                                .filter(|&(_, &c)| c >= m)
                                .map(|(&doc, _)| doc)
                                .collect();
                            Tally {
                                candidate: u64::from(hit),
                                found: u64::from(hit && related),
                                candidates: over.len() as u64,
                                others: over.iter().filter(|c| links(c)).count() as u64,
                            }
                        })
                        .collect();
                    Some((band, minima, related))
                })
                .collect();
            let n = rows.len() as f64;
            let print = |step: &str, t: Tally| {
                println!(
                    "{kind}\t{share}\t{}\t{step}\t{:.3}\t{:.3}\t{:.1}\t{:.3}",
                    rows.len(),
                    t.candidate as f64 / n,
                    t.found as f64 / n,
                    t.candidates as f64 / n,
                    t.others as f64 / n
                );
            };
            let sum = |ts: &mut dyn Iterator<Item = Tally>| {
                ts.fold(Tally::default(), |a, t| Tally {
                    candidate: a.candidate + t.candidate,
                    found: a.found + t.found,
                    candidates: a.candidates + t.candidates,
                    others: a.others + t.others,
                })
            };
            let rule_only = rows.iter().filter(|r| r.2).count();
            println!(
                "{kind}\t{share}\t{}\trule-only\t1.000\t{:.3}\t-",
                rows.len(),
                rule_only as f64 / n
            );
            print(
                &format!("bands={}x{}", params.bands, params.rows),
                sum(&mut rows.iter().map(|r| r.0)),
            );
            for (i, m) in args.minima.iter().enumerate() {
                print(
                    &format!("minima>={m}/{keyed}"),
                    sum(&mut rows.iter().map(|r| r.1[i])),
                );
            }
        }
    }
    // The cost for whole articles as queries (themselves left out).
    let stride = (index.docs / args.cost_queries.max(1)).max(1);
    let queries: Vec<usize> = (0..index.docs)
        .step_by(stride)
        .filter(|&d| sigs[d].is_some())
        .take(args.cost_queries)
        .collect();
    let costs: Vec<(u64, Vec<u64>)> = queries
        .par_iter()
        .map(|&d| {
            let q = sigs[d].as_ref().expect("signed");
            let bands = index.band_candidates(q, &params).len() as u64 - 1;
            let counts = index.agreements(q);
            let minima = args
                .minima
                .iter()
                .map(|&m| counts.values().filter(|&&c| c >= m).count() as u64 - 1)
                .collect();
            (bands, minima)
        })
        .collect();
    let n = costs.len() as f64;
    println!(
        "whole\t1\t{}\tbands={}x{}\t-\t-\t{:.1}",
        costs.len(),
        params.bands,
        params.rows,
        costs.iter().map(|c| c.0).sum::<u64>() as f64 / n
    );
    for (i, m) in args.minima.iter().enumerate() {
        println!(
            "whole\t1\t{}\tminima>={m}/{keyed}\t-\t-\t{:.1}",
            costs.len(),
            costs.iter().map(|c| c.1[i]).sum::<u64>() as f64 / n
        );
    }
    if let Some(path) = &args.pairs {
        labelled_pairs(path, &args, &fp, &params, &rule)?;
    }
    // Near-duplicates over the whole corpus: the pairs the bands answer today (a shared band
    // and an estimate at the threshold), the share of them each minima step makes candidates
    // too, and the pairs at the threshold that share no band but that step finds.
    let threshold = Threshold::default();
    let pairs: Vec<(u64, Vec<(u64, u64)>)> = (0..index.docs)
        .into_par_iter()
        .filter_map(|d| {
            let q = sigs[d].as_ref()?;
            let near = |c: &u32| {
                *c as usize > d
                    && sigs[*c as usize]
                        .as_ref()
                        .is_some_and(|s| threshold.admits(q.similarity(s)))
            };
            let bands: Vec<u32> = index
                .band_candidates(q, &params)
                .into_iter()
                .filter(near)
                .collect();
            let counts = index.agreements(q);
            let steps = args
                .minima
                .iter()
                .map(|&m| {
                    let over = |c: &u32| counts.get(c).is_some_and(|&n| n >= m);
                    let covered = bands.iter().filter(|c| over(c)).count() as u64;
                    let extra = counts
                        .keys()
                        .filter(|c| over(c) && near(c) && bands.binary_search(c).is_err())
                        .count() as u64;
                    (covered, extra)
                })
                .collect();
            Some((bands.len() as u64, steps))
        })
        .collect();
    let total: u64 = pairs.iter().map(|p| p.0).sum();
    println!("near-duplicates\tpairs\tstep\tshare_of_band_pairs_found\tpairs_found_without_a_band");
    for (i, m) in args.minima.iter().enumerate() {
        let covered: u64 = pairs.iter().map(|p| p.1[i].0).sum();
        let extra: u64 = pairs.iter().map(|p| p.1[i].1).sum();
        println!(
            "near-duplicates\t{total}\tminima>={m}/{keyed}\t{:.4} ({covered})\t{extra}",
            covered as f64 / total.max(1) as f64
        );
    }
    Ok(Status::Done)
}

/// A positive labelled pair: its group, whether the rule relates it, and for the bands, each
/// minima step, and the bands or that step: (a candidate, then related).
struct PairRow {
    group: String,
    related: bool,
    steps: Vec<(bool, bool)>,
}

/// Per group of positive labelled pairs (`LabelledPair::group`): how many, and for the bands,
/// each minima step alone, and the bands or that step (a containment query of a store), the
/// share of pairs that are candidates and the share then related by the rule.
fn labelled_pairs(
    path: &str,
    args: &ContainmentBench,
    fp: &neardup::Fingerprinter,
    params: &neardup::MinHashParams,
    rule: &MatchRule,
) -> anyhow::Result<()> {
    let file = input::open(path)?;
    let pairs = neardup::eval::read_pairs(file.reader, path)?;
    let mask = if args.minimum_bits >= 32 {
        u32::MAX
    } else {
        (1u32 << args.minimum_bits) - 1
    };
    let keyed = format!("{}x{}b", args.positions, args.minimum_bits.min(32));
    let text = |m: &serde_json::Map<String, serde_json::Value>| -> Vec<String> {
        ["title", "content"]
            .iter()
            .filter_map(|f| m.get(*f).and_then(|v| v.as_str()).map(str::to_owned))
            .collect()
    };
    let rows: Vec<PairRow> = pairs
        .par_iter()
        .filter(|p| p.duplicate)
        .filter_map(|p| {
            let a = fp.minhash_fields(&text(&p.a)).ok()?.signature;
            let b = fp.minhash_fields(&text(&p.b)).ok()?.signature;
            let related = rule.relate(&a, &b).is_some();
            let band = a
                .band_keys(params)
                .iter()
                .zip(b.band_keys(params).iter())
                .any(|(x, y)| x == y);
            let agree = a
                .values()
                .iter()
                .zip(b.values())
                .take(args.positions)
                .filter(|(x, y)| (*x ^ *y) & mask == 0)
                .count() as u32;
            let mut steps = vec![(band, band && related)];
            for &m in &args.minima {
                steps.push((agree >= m, agree >= m && related));
            }
            for &m in &args.minima {
                let c = band || agree >= m;
                steps.push((c, c && related));
            }
            Some(PairRow {
                group: p.group(),
                related,
                steps,
            })
        })
        .collect();
    let mut groups: Vec<String> = rows.iter().map(|r| r.group.clone()).collect();
    groups.sort_unstable();
    groups.dedup();
    let mut names = vec![format!("bands={}x{}", params.bands, params.rows)];
    names.extend(args.minima.iter().map(|m| format!("minima>={m}/{keyed}")));
    names.extend(
        args.minima
            .iter()
            .map(|m| format!("bands|minima>={m}/{keyed}")),
    );
    println!("pairs\tgroup\tpairs\tstep\tcandidate_recall\tfound_recall (rule alone)");
    for g in &groups {
        let in_group: Vec<_> = rows.iter().filter(|r| &r.group == g).collect();
        let n = in_group.len() as f64;
        let rule_alone = in_group.iter().filter(|r| r.related).count() as f64 / n;
        for (i, name) in names.iter().enumerate() {
            let c = in_group.iter().filter(|r| r.steps[i].0).count() as f64 / n;
            let f = in_group.iter().filter(|r| r.steps[i].1).count() as f64 / n;
            println!(
                "pairs\t{g}\t{}\t{name}\t{c:.3}\t{f:.3} ({rule_alone:.3})",
                in_group.len()
            );
        }
    }
    Ok(())
}

//! `neardup dedupe`: near-duplicate clusters of one file, in memory, no store.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::simhash::allpairs::AllPairs;
use neardup::SimHash;
use serde::Serialize;
use serde_json::Value;

use super::common::{self, CmdResult, DistanceArg, InputArgs, ProfileArgs, RunArgs, Searched};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Articles within this distance are linked.
    #[command(flatten)]
    distance: DistanceArg,
    /// Print every pair within k (`{"a", "b", "distance"}`) instead of clusters.
    #[arg(long)]
    pairs: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Serialize)]
struct ClusterLine<'a> {
    cluster: Vec<&'a Value>,
    max_distance: u32,
}

#[derive(Serialize)]
struct PairLine<'a> {
    a: &'a Value,
    b: &'a Value,
    distance: u32,
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    let k = args.distance.resolve(Searched::NewBlocks)?;
    let finder = AllPairs::new(k)?;
    args.run.init_threads()?;
    let fp = args.profile.fingerprinter();
    let spec = args.input.spec();
    let source = neardup::input::open(&args.input.input)?;
    let pb = common::progress_bar(&source, args.run.quiet);
    let position = Arc::clone(&source.position);
    let strict = args.input.strict;
    let mut ids: Vec<Value> = Vec::new();
    let mut fps: Vec<SimHash> = Vec::new();

    let counts = pipeline::run(
        source,
        &spec,
        &fp,
        &PipelineOptions::default(),
        |c| common::tick(&pb, &position, c),
        |item| -> anyhow::Result<()> {
            match item {
                Item::Doc { id, outcome, .. } => {
                    if let Ok(f) = outcome {
                        ids.push(id.0);
                        fps.push(f.simhash);
                    }
                }
                Item::Bad(e) => {
                    common::report_bad_line(&pb, &e);
                    if strict {
                        anyhow::bail!("stopped at the first bad line (--strict)");
                    }
                }
            }
            Ok(())
        },
    );
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let counts = counts?;
    let paired = Instant::now();
    let matches = finder.run(&fps);
    let pair_secs = paired.elapsed().as_secs_f64();

    let mut out = common::stdout();
    let clusters = matches.clusters();
    if args.pairs {
        let mut pairs: Vec<(u32, u32, u32)> = matches.pairs().collect();
        pairs.sort_unstable();
        for (a, b, distance) in pairs {
            let line = PairLine {
                a: &ids[a as usize],
                b: &ids[b as usize],
                distance,
            };
            serde_json::to_writer(&mut out, &line).context("writing output")?;
            out.write_all(b"\n").context("writing output")?;
        }
    } else {
        for c in &clusters {
            let line = ClusterLine {
                cluster: c.members.iter().map(|&i| &ids[i as usize]).collect(),
                max_distance: c.max_distance,
            };
            serde_json::to_writer(&mut out, &line).context("writing output")?;
            out.write_all(b"\n").context("writing output")?;
        }
    }
    common::flush(&mut out)?;

    if !args.run.quiet {
        let in_clusters: usize = clusters.iter().map(|c| c.members.len()).sum();
        let s = &matches.stats;
        eprintln!(
            "dedupe: {} documents, {} fingerprinted, {} too short, {} bad lines; {} holding {} documents, {} duplicates (beyond the first of each cluster), {} pairs within k = {}; all pairs in {:.3} s, total {:.2} s",
            counts.documents,
            counts.fingerprinted,
            counts.too_short,
            counts.bad_lines,
            common::plural(clusters.len(), "cluster", "clusters"),
            in_clusters,
            in_clusters - clusters.len(),
            matches.pair_count(),
            k,
            pair_secs,
            started.elapsed().as_secs_f64(),
        );
        let largest = s.largest_bucket.iter().copied().max().unwrap_or(0);
        if largest >= 1000 && largest * 64 >= s.unique.max(1) {
            let block = s
                .largest_bucket
                .iter()
                .position(|&b| b == largest)
                .unwrap_or(0);
            eprintln!(
                "warning: bucket skew: block {block} value {:#x} is shared by {largest} of {} distinct fingerprints; such groups are split further, but pairs that really are near cost quadratic time",
                s.largest_bucket_value[block], s.unique
            );
        }
    }
    Ok(common::status(&counts))
}

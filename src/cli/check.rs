//! `neardup check`: is each article a near-duplicate of something already stored?

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::relation::MatchOptions;
use neardup::store::{Match, Store};
use neardup::{Methods, Sketch, Tolerance, TooShort};
use serde::Serialize;
use serde_json::Value;

use super::common::ProfileArgs;
use super::common::{self, CmdResult, DistanceArg, InputArgs, MethodArgs, RelationArgs, RunArgs};
use super::store_args::{self, StoreArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// Add the articles that are not duplicates, atomically with their check (creates the
    /// store if missing). MinHash: an article that is a near-duplicate of a stored one, or
    /// contained in one, is a duplicate; an article that contains a stored one (the full
    /// story of a stored teaser) is added.
    #[arg(long)]
    insert: bool,
    #[command(flatten)]
    relation: RelationArgs,
    /// The store's method is used; a store that --insert creates takes --method (default
    /// minhash). SimHash: -k defaults to the store's k, and is also the k of a store that
    /// --insert creates, if at most 7.
    #[command(flatten)]
    method: MethodArgs,
    /// Articles per transaction.
    #[arg(long, default_value_t = 2048, value_name = "N")]
    batch: usize,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    run: RunArgs,
}

/// One output line.
#[derive(Serialize)]
struct Line<'a> {
    id: &'a Value,
    /// `null` when the article has no fingerprint.
    duplicate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    matches: Option<&'a [Match]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inserted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

#[derive(Default)]
struct Tally {
    duplicates: u64,
    unique: u64,
    inserted: u64,
}

struct Batch<W> {
    docs: Vec<(Value, String, Result<Sketch, TooShort>)>,
    tolerance: Tolerance,
    insert: bool,
    options: MatchOptions,
    out: W,
    tally: Tally,
}

impl<W: Write> Batch<W> {
    fn flush(&mut self, store: &Store) -> anyhow::Result<()> {
        let queries: Vec<(&str, Sketch)> = self
            .docs
            .iter()
            .filter_map(|(_, key, o)| o.as_ref().ok().map(|s| (key.as_str(), s.clone())))
            .collect();
        let mut results = store
            .check(&queries, self.tolerance, self.insert, &self.options)?
            .into_iter();
        for (id, _, outcome) in &self.docs {
            let line = match outcome {
                Ok(_) => {
                    let r = results
                        .next()
                        .expect("one result per fingerprinted article");
                    let duplicate = r.is_duplicate();
                    if duplicate {
                        self.tally.duplicates += 1;
                    } else {
                        self.tally.unique += 1;
                    }
                    self.tally.inserted += u64::from(r.inserted);
                    serde_json::to_writer(
                        &mut self.out,
                        &Line {
                            id,
                            duplicate: Some(duplicate),
                            matches: Some(&r.matches),
                            inserted: self.insert.then_some(r.inserted),
                            reason: None,
                            detail: None,
                        },
                    )
                }
                Err(why) => serde_json::to_writer(
                    &mut self.out,
                    &Line {
                        id,
                        duplicate: None,
                        matches: None,
                        inserted: self.insert.then_some(false),
                        reason: Some(why.code()),
                        detail: Some(why.to_string()),
                    },
                ),
            };
            line.context("writing output")?;
            self.out.write_all(b"\n").context("writing output")?;
        }
        self.docs.clear();
        Ok(())
    }
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    common::ensure_usage(args.batch > 0, "--batch must be at least 1")?;
    args.run.init_threads()?;
    let source = neardup::input::open(&args.input.input)?;
    let pre = args.input.pre_tokenized;
    let (mut store, fp, tolerance) = if args.insert {
        // An existing store keeps its k whatever the query distance; a new one takes -k.
        let store_k = if Store::exists(&args.store.store) {
            DistanceArg { k: None }
        } else {
            DistanceArg {
                k: args
                    .method
                    .distance
                    .k
                    .filter(|&k| k <= neardup::simhash::MAX_K),
            }
        };
        let (store, fp) =
            store_args::open_for_writing(&args.store, &args.profile, &args.method, store_k, pre)?;
        let tolerance = args.method.for_store(&store)?;
        (store, fp, tolerance)
    } else {
        store_args::open_for_query(&args.store, &args.profile, &args.method, pre)?
    };
    let method = store.method();
    let spec = args.input.spec();
    let pb = common::progress_bar(&source, args.run.quiet);
    let position = Arc::clone(&source.position);
    let strict = args.input.strict;
    let mut batch = Batch {
        docs: Vec::with_capacity(args.batch),
        tolerance,
        insert: args.insert,
        options: args.relation.options(),
        out: common::stdout(),
        tally: Tally::default(),
    };

    let counts = pipeline::run(
        source,
        &spec,
        &fp,
        &PipelineOptions::with_methods(Methods::only(method)),
        |c| common::tick(&pb, &position, c),
        |item| -> anyhow::Result<()> {
            match item {
                Item::Doc { id, sketches, .. } => {
                    let key = id.key();
                    batch.docs.push((id.0, key, sketches.into_sketch(method)));
                    if batch.docs.len() >= args.batch {
                        batch.flush(&store)?;
                    }
                }
                Item::Bad(e) => {
                    common::report_bad_line(&pb, &e);
                    if strict {
                        batch.flush(&store)?;
                        common::flush(&mut batch.out)?;
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
    batch.flush(&store)?;
    common::flush(&mut batch.out)?;
    if args.insert {
        store_args::compact_after(&mut store, batch.tally.inserted, false)?;
    }
    if !args.run.quiet {
        let t = &batch.tally;
        let inserted = if args.insert {
            format!(" ({} inserted)", t.inserted)
        } else {
            String::new()
        };
        eprintln!(
            "check: {} documents, {} near-duplicates ({tolerance}), {} not{inserted}, {} too short, {} bad lines; store {} holds {} documents; {:.2} s",
            counts.documents,
            t.duplicates,
            t.unique,
            counts.too_short,
            counts.bad_lines,
            store_args::shown(store.path()),
            store.len()?,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(common::status(&counts))
}

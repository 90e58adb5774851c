//! `neardup index`: fingerprint articles and upsert them into a local store.

use std::sync::Arc;
use std::time::Instant;

use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::store::{Op, Store, WriteCounts};
use neardup::{Methods, Sketch};

use super::common::ProfileArgs;
use super::common::{self, CmdResult, InputArgs, MethodArgs, RunArgs};
use super::store_args::{self, StoreArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// The method of a new store (an existing one keeps its own). SimHash: -k is the distance
    /// a new store's block tables are built for (k + 1 blocks, at most 7; default 3).
    #[command(flatten)]
    method: MethodArgs,
    /// Documents per transaction. A crash loses at most the batch in flight, never part of a
    /// document.
    #[arg(long, default_value_t = 2048, value_name = "N")]
    batch: usize,
    /// Print a line on stderr after each committed batch.
    #[arg(long, short)]
    verbose: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    run: RunArgs,
}

/// Changes waiting for the next commit.
struct Pending {
    /// (id, sketch); `None` removes the id: its text no longer has a sketch.
    docs: Vec<(String, Option<Sketch>)>,
    /// Last input line in the batch, for `--verbose`.
    line: u64,
    committed: u64,
    counts: WriteCounts,
}

impl Pending {
    fn commit(&mut self, store: &Store, verbose: bool) -> anyhow::Result<()> {
        if self.docs.is_empty() {
            return Ok(());
        }
        let ops: Vec<Op<'_>> = self
            .docs
            .iter()
            .map(|(id, fp)| match fp {
                Some(s) => Op::Upsert(id, s),
                None => Op::Delete(id),
            })
            .collect();
        let c = store.write(&ops)?;
        self.committed += self.docs.len() as u64;
        self.counts.inserted += c.inserted;
        self.counts.replaced += c.replaced;
        self.counts.unchanged += c.unchanged;
        self.counts.deleted += c.deleted;
        self.docs.clear();
        if verbose {
            eprintln!(
                "index: committed {} documents (through input line {})",
                self.committed, self.line
            );
        }
        Ok(())
    }
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    common::ensure_usage(args.batch > 0, "--batch must be at least 1")?;
    args.run.init_threads()?;
    let source = neardup::input::open(&args.input.input)?;
    let (mut store, fp) = store_args::open_for_writing(
        &args.store,
        &args.profile,
        &args.method,
        args.method.distance,
        args.input.pre_tokenized,
    )?;
    let method = store.method();
    let spec = args.input.spec();
    let pb = common::progress_bar(&source, args.run.quiet);
    let position = Arc::clone(&source.position);
    let strict = args.input.strict;
    let mut pending = Pending {
        docs: Vec::with_capacity(args.batch),
        line: 0,
        committed: 0,
        counts: WriteCounts::default(),
    };

    let counts = pipeline::run(
        source,
        &spec,
        &fp,
        &PipelineOptions::with_methods(Methods::only(method)),
        |c| common::tick(&pb, &position, c),
        |item| -> anyhow::Result<()> {
            match item {
                Item::Doc { line, id, sketches } => {
                    pending
                        .docs
                        .push((id.key(), sketches.into_sketch(method).ok()));
                    pending.line = line;
                    if pending.docs.len() >= args.batch {
                        pending.commit(&store, args.verbose)?;
                    }
                }
                Item::Bad(e) => {
                    common::report_bad_line(&pb, &e);
                    if strict {
                        pending.commit(&store, args.verbose)?;
                        anyhow::bail!(
                            "stopped at the first bad line (--strict); the documents before it are stored"
                        );
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
    pending.commit(&store, args.verbose)?;
    let w = pending.counts;
    store_args::compact_after(
        &mut store,
        w.inserted + w.replaced + w.deleted,
        args.verbose,
    )?;
    if !args.run.quiet {
        let stats = store.stats()?;
        let w = pending.counts;
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        eprintln!(
            "index: {} documents, {} fingerprinted ({} new, {} replaced, {} unchanged), {} too short ({} removed from the store), {} bad lines; store {} holds {} documents ({}); {:.1} MB in {:.2} s ({:.0} docs/s)",
            counts.documents,
            counts.fingerprinted,
            w.inserted,
            w.replaced,
            w.unchanged,
            counts.too_short,
            w.deleted,
            counts.bad_lines,
            store_args::shown(store.path()),
            stats.documents,
            store_args::describe(&stats.config),
            counts.bytes as f64 / 1e6,
            secs,
            counts.documents as f64 / secs,
        );
        if let Some(warning) = stats.skew_warning() {
            eprintln!("warning: {warning}");
        }
    }
    Ok(common::status(&counts))
}

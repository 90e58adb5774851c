//! `neardup fingerprint`.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::{FingerprintRecord, Methods};

use super::common::{self, CmdResult, InputArgs, ProfileArgs, RunArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    args.run.init_threads()?;
    let fp = args.profile.fingerprinter()?;
    let spec = args.input.spec();
    let source = neardup::input::open(&args.input.input)?;
    let pb = common::progress_bar(&source, args.run.quiet);
    let position = Arc::clone(&source.position);
    let mut out = common::stdout();
    let strict = args.input.strict;

    let counts = pipeline::run(
        source,
        &spec,
        &fp,
        &PipelineOptions::with_methods(Methods::BOTH),
        |c| common::tick(&pb, &position, c),
        |item| -> anyhow::Result<()> {
            match item {
                Item::Doc { id, sketches, .. } => {
                    let line = FingerprintRecord::new(id.0, &sketches);
                    serde_json::to_writer(&mut out, &line).context("writing output")?;
                    out.write_all(b"\n").context("writing output")?;
                }
                Item::Bad(e) => {
                    common::report_bad_line(&pb, &e);
                    if strict {
                        common::flush(&mut out)?;
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
    common::flush(&mut out)?;
    if !args.run.quiet {
        eprintln!("{}", common::summary("fingerprint", &counts, started));
    }
    Ok(common::status(&counts))
}

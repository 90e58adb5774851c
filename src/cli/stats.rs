//! `neardup stats`: size, settings and bucket skew of a local store.

use std::io::Write;

use anyhow::Context;

use super::common::{self, CmdResult, Status};
use super::store_args::StoreArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// Also check that the block tables and the documents agree exactly (reads everything).
    #[arg(long)]
    verify: bool,
}

pub fn run(args: Args) -> CmdResult {
    let store = args.store.open()?;
    let stats = store.stats()?;
    let mut out = common::stdout();
    serde_json::to_writer_pretty(&mut out, &stats).context("writing output")?;
    out.write_all(b"\n").context("writing output")?;
    common::flush(&mut out)?;
    if let Some(warning) = stats.skew_warning() {
        eprintln!("warning: {warning}");
    }
    if args.verify {
        let n = store.verify()?;
        eprintln!("verify: {n} documents, block tables consistent");
    }
    Ok(Status::Done)
}

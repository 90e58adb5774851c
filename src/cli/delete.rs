//! `neardup delete`: remove documents from a local store.

use std::io::Write;

use anyhow::Context;
use serde::Serialize;

use super::common::{self, CmdResult, Status};
use super::store_args::{self, StoreArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
    /// Ids to remove (all in one transaction).
    #[arg(long = "id", value_name = "ID", required = true, num_args = 1..)]
    ids: Vec<String>,
    /// No summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Serialize)]
struct Line<'a> {
    id: &'a str,
    deleted: bool,
}

pub fn run(args: Args) -> CmdResult {
    let store = args.store.open()?;
    let snapshot = store.snapshot()?;
    let mut present = Vec::with_capacity(args.ids.len());
    for id in &args.ids {
        present.push(snapshot.get(id)?.is_some());
    }
    drop(snapshot);
    let ids: Vec<&str> = args.ids.iter().map(String::as_str).collect();
    // One process has the store open at a time, so nothing changes between the look-up
    // above and this write.
    let counts = store.delete(&ids)?;
    let mut out = common::stdout();
    let mut seen = std::collections::HashSet::new();
    for (id, was) in args.ids.iter().zip(present) {
        // An id given twice is deleted once.
        let deleted = was && seen.insert(id.as_str());
        serde_json::to_writer(&mut out, &Line { id, deleted }).context("writing output")?;
        out.write_all(b"\n").context("writing output")?;
    }
    common::flush(&mut out)?;
    if !args.quiet {
        eprintln!(
            "delete: {} deleted, {} not in the store; store {} holds {} documents",
            counts.deleted,
            counts.missing,
            store_args::shown(store.path()),
            store.len()?
        );
    }
    Ok(Status::Done)
}

//! `neardup migrate`: rewrite an older local store in the current format.

use super::common::{self, CmdResult, Status};
use super::store_args::{self, StoreArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    store: StoreArgs,
}

pub fn run(args: Args) -> CmdResult {
    let m = neardup::store::migrate(&args.store.store, &args.store.options()?)?;
    let mut out = common::stdout();
    serde_json::to_writer(&mut out, &m)?;
    std::io::Write::write_all(&mut out, b"\n")?;
    common::flush(&mut out)?;
    if m.from == m.to {
        eprintln!(
            "migrate: store {} is already format {}; nothing to do",
            store_args::shown(&args.store.store),
            m.to
        );
    } else {
        eprintln!(
            "migrate: store {} rewritten from format {} to {}: {} documents, {:.1} MB -> {:.1} MB",
            store_args::shown(&args.store.store),
            m.from,
            m.to,
            m.documents,
            m.bytes_before as f64 / 1e6,
            m.bytes_after as f64 / 1e6
        );
    }
    Ok(Status::Done)
}

//! `neardup similar`: the stored documents near one document or text.
//!
//! The target is a local store (`--store DIR`); the query is a stored id, a text, or one
//! JSON Lines article.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::ArgGroup;
use neardup::input::{self, InputSpec};
use neardup::pipeline::sketch_body;
use neardup::store::{Match, Store};
use neardup::{Methods, Sketch};

use super::common::{self, CmdResult, MethodArgs, Status};
use super::store_args::{self, StoreProfileArgs};

#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["store"])))]
#[command(
    after_help = "To search Elasticsearch instead: neardup similar --es URL --index NAME --id ID [-k 3] \
                  [--filter server|client] [--format json|table]; `neardup similar --index x --help` lists its flags."
)]
#[command(group(ArgGroup::new("query").required(true).args(["id", "text", "input"])))]
pub struct Args {
    /// Search the local index in this directory.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// If another process has the store open, wait up to this many seconds for it.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "store"
    )]
    wait: f64,
    /// Documents near this stored document (itself excluded).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// Documents near this text (plain text or HTML).
    #[arg(long, value_name = "TEXT")]
    text: Option<String>,
    /// Documents near the one JSON Lines article in this file; `-` reads standard input.
    #[arg(long, short, value_name = "PATH")]
    input: Option<String>,
    /// Text field of the --input article; repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = ["title", "content"])]
    fields: Vec<String>,
    /// Field holding the --input article's id (its own id is left out of the results).
    #[arg(long, default_value = "id", value_name = "NAME")]
    id_field: String,
    /// The store's method is used. MinHash: --threshold (default 0.4). SimHash: -k, the
    /// largest Hamming distance (default: the store's k; larger values stay exact, at the
    /// cost of more lookups).
    #[command(flatten)]
    method: MethodArgs,
    #[command(flatten)]
    profile: StoreProfileArgs,
}

pub fn run(args: Args) -> CmdResult {
    let dir = args
        .store
        .clone()
        .context("give --store DIR (the local index to search)")?;
    let store = Store::open(&dir, &store_args::open_options(args.wait)?)?;
    let method = args.method.method(Some(store.method()))?;
    store.ensure_method(method)?;
    let tolerance = args.method.tolerance(method, store.config().k);
    if let neardup::Tolerance::Distance(k) = tolerance {
        anyhow::ensure!(
            k <= 64,
            "-k must be at most 64 (the fingerprint has 64 bits)"
        );
    }
    let matches = if let Some(id) = &args.id {
        store.similar_to_id(id, tolerance)?.with_context(|| {
            format!(
                "no document `{id}` in store {}; `neardup index` adds documents",
                dir.display()
            )
        })?
    } else {
        let (sketch, own_id) = query_sketch(&args, &store)?;
        store.similar(sketch, tolerance, own_id.as_deref())?
    };
    print(&matches)?;
    Ok(Status::Done)
}

/// Sketches the --text or --input query with the store's method and settings.
fn query_sketch(args: &Args, store: &Store) -> anyhow::Result<(Sketch, Option<String>)> {
    let fp = args.profile.fingerprinter(Some(store.config()))?;
    store_args::ensure_comparable(store, &fp, false)?;
    let methods = Methods::only(store.method());
    let (sketches, own_id, what) = if let Some(text) = &args.text {
        (
            fp.sketch_fields(methods, &[text]),
            None,
            "the --text".to_owned(),
        )
    } else {
        let path = args.input.as_deref().unwrap_or("-");
        let spec = InputSpec {
            id_field: args.id_field.clone(),
            text_fields: args.fields.clone(),
            pre_tokenized: false,
        };
        let source = input::open(path)?;
        let mut docs = input::read_all(source.reader, &source.name, &spec);
        anyhow::ensure!(
            docs.len() == 1,
            "{} holds {} articles; `similar` takes one (use `neardup check` for many)",
            source.name,
            docs.len()
        );
        let doc = docs.pop().expect("one document")?;
        let what = format!("article `{}`", doc.id);
        (
            sketch_body(&fp, methods, &doc.body),
            Some(doc.id.key()),
            what,
        )
    };
    let sketch = sketches.into_sketch(store.method()).map_err(|why| {
        anyhow::anyhow!("{what} has no fingerprint: too short ({why}); nothing to compare")
    })?;
    Ok((sketch, own_id))
}

fn print(matches: &[Match]) -> anyhow::Result<()> {
    let mut out = common::stdout();
    for m in matches {
        serde_json::to_writer(&mut out, m).context("writing output")?;
        out.write_all(b"\n").context("writing output")?;
    }
    common::flush(&mut out)
}

//! `neardup fingerprint`.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use neardup::pipeline::{self, Item, PipelineOptions};
use neardup::Methods;
use serde::Serialize;
use serde_json::Value;

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

/// One output line. `simhash` and `minhash` are always present (null when too short); the
/// SimHash fields come first, as they always have (scripts and indices depend on them), and
/// `reason`/`detail` say why SimHash has none.
#[derive(Serialize)]
struct Line<'a> {
    id: &'a Value,
    simhash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    u64: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<[i16; 4]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// The MinHash signature: its minima, in order.
    minhash: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    minhash_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    minhash_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    minhash_detail: Option<String>,
}

pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    args.run.init_threads()?;
    let fp = args.profile.fingerprinter();
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
                    let simhash = sketches.simhash.expect("asked for");
                    let minhash = sketches.minhash.expect("asked for");
                    let mut line = match simhash {
                        Ok(f) => Line {
                            id: &id.0,
                            simhash: Some(f.simhash.to_hex()),
                            u64: Some(f.simhash.0),
                            blocks: Some(f.simhash.blocks16()),
                            version: Some(f.version),
                            reason: None,
                            detail: None,
                            minhash: None,
                            minhash_version: None,
                            minhash_reason: None,
                            minhash_detail: None,
                        },
                        Err(why) => Line {
                            id: &id.0,
                            simhash: None,
                            u64: None,
                            blocks: None,
                            version: None,
                            reason: Some(why.code()),
                            detail: Some(why.to_string()),
                            minhash: None,
                            minhash_version: None,
                            minhash_reason: None,
                            minhash_detail: None,
                        },
                    };
                    match &minhash {
                        Ok(m) => {
                            line.minhash = Some(m.signature.values());
                            line.minhash_version = Some(&m.version);
                        }
                        Err(why) => {
                            line.minhash_reason = Some(why.code());
                            line.minhash_detail = Some(why.to_string());
                        }
                    }
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

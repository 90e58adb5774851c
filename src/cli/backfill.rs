//! `neardup backfill`: fingerprint the existing documents of one or more indices, resumably.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use neardup::es::backfill::{Backfill, BackfillConfig, BackfillReport, Mode, Paging, Progress};
use neardup::es::{self, RetryPolicy, Slice};

use super::common::ProfileArgs;
use super::common::{self, CmdResult, Status};
use super::es_args::{self, parse_duration, EsArgs, FieldArgs};
use super::regroup::LinkingArg;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    es: EsArgs,
    /// Index, alias or pattern (`news-*`, `a,b`); every index behind it is walked in turn.
    /// Each needs the fingerprint fields (`neardup es-init`); every method an index records in
    /// its `_meta` is written.
    #[arg(long, value_name = "PATTERN")]
    index: String,
    /// Text field to fingerprint (dotted paths allowed); repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    fields: Vec<String>,
    /// Only documents without a current fingerprint of some method the index holds (the
    /// default).
    #[arg(long, conflicts_with = "all")]
    only_missing: bool,
    /// Every document, rewriting fingerprints that are already there.
    #[arg(long)]
    all: bool,
    /// Documents per bulk request (the most; halved while Elasticsearch pushes back).
    #[arg(long, default_value_t = 500, value_name = "N")]
    bulk_size: usize,
    /// Bulk requests in flight (the most; halved while Elasticsearch pushes back).
    #[arg(long, default_value_t = 4, value_name = "N")]
    concurrency: usize,
    /// Keep --bulk-size and --concurrency fixed instead of adapting them to 429s.
    #[arg(long)]
    no_adapt: bool,
    /// Documents per page read.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    page_size: usize,
    /// Throttle the job to this many documents per second (like reindex's requests_per_second).
    #[arg(long, value_name = "N")]
    max_docs_per_sec: Option<f64>,
    /// Read and fingerprint, report what would be written, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Walk slice I of N of each index (from 0: `--slice 0/2` on one machine, `--slice 1/2` on
    /// another); the N slices walk every document once between them. Each slice has its own
    /// state and failed files; run the same command (with its --slice) to resume one.
    #[arg(long, value_name = "I/N", value_parser = parse_slice)]
    slice: Option<Slice>,
    /// Where an index keeps duplicate groups, how the articles written are linked: `join`
    /// writes each as its own group (a label already there is kept) and, once every
    /// document is fingerprinted, links them all by one regroup by the join (`neardup
    /// regroup`; with --slice, run that once every slice has finished); `search` labels
    /// each as it is written by the search every writer runs (for a few articles in a
    /// large index).
    #[arg(long, value_enum, default_value_t = LinkingArg::Join, value_name = "join|search")]
    linking: LinkingArg,
    /// State file for resuming [default: .neardup-backfill-<index>.jsonl, or
    /// .neardup-backfill-<index>-slice-I-of-N.jsonl with --slice].
    #[arg(long, value_name = "PATH")]
    state: Option<PathBuf>,
    /// Discard a state file left by a different back-fill command and start over.
    #[arg(long)]
    restart: bool,
    /// Failed and bad documents, one JSON object a line [default:
    /// neardup-backfill-failed.jsonl, or neardup-backfill-failed-slice-I-of-N.jsonl with --slice].
    #[arg(long, value_name = "PATH")]
    failed: Option<PathBuf>,
    /// Also write the final report as JSON here.
    #[arg(long, value_name = "PATH")]
    report_json: Option<PathBuf>,
    /// How pages are read: `auto` (point in time where available, else scroll), `pit`, `scroll`.
    #[arg(long, default_value = "auto", value_name = "auto|pit|scroll")]
    paging: Paging,
    /// Scroll / point-in-time keep-alive between two pages.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    keep_alive: Duration,
    /// Retries of a failing request (429, 5xx, unreachable), with backoff up to 30 s.
    #[arg(long, default_value_t = 14, value_name = "N")]
    retries: u32,
    /// Fingerprinting threads (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    threads: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    fields_names: FieldArgs,
}

pub fn run(args: Args) -> CmdResult {
    for (flag, v) in [
        ("--bulk-size", args.bulk_size),
        ("--concurrency", args.concurrency),
        ("--page-size", args.page_size),
    ] {
        common::ensure_usage(v > 0, &format!("{flag} must be at least 1"))?;
    }
    if let Some(r) = args.max_docs_per_sec {
        common::ensure_usage(r > 0.0, "--max-docs-per-sec must be positive")?;
    }
    if let Some(n) = args.threads {
        common::ensure_usage(n > 0, "--threads must be at least 1")?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()?;
    }
    let names = args.fields_names.names()?;
    let (es_config, client) = args.es.client()?;
    let mut config = BackfillConfig::new(&args.index).with_slice(args.slice);
    config.text_fields = args.fields.clone();
    config.names = names;
    config.mode = if args.all {
        Mode::All
    } else {
        Mode::OnlyMissing
    };
    config.page_size = args.page_size;
    config.bulk_size = args.bulk_size;
    config.concurrency = args.concurrency;
    config.adapt = !args.no_adapt;
    config.max_docs_per_sec = args.max_docs_per_sec;
    config.dry_run = args.dry_run;
    if let Some(state) = &args.state {
        config.state_path = state.clone();
    }
    if let Some(failed) = &args.failed {
        config.failed_path = failed.clone();
    }
    config.restart = args.restart;
    config.keep_alive = args.keep_alive;
    config.paging = args.paging;
    config.linking = args.linking.into();
    config.retry = RetryPolicy {
        max_retries: args.retries,
        ..RetryPolicy::default()
    };
    let runtime = es_args::runtime()?;
    let fp = runtime.block_on(async {
        es::first_contact(&client, es_config.connect_timeout).await?;
        let each = es::read_each(&client, &config.retry, &args.index, &config.names).await?;
        let held = es::IndexMeta::union(&each)
            .ok_or_else(|| anyhow::anyhow!("no index matches `{}`", args.index))?;
        args.profile.for_index(&args.index, &held)
    })?;
    let job = Backfill::new(client, fp, config);

    let bar = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} docs ({per_sec}, ETA {eta}) {msg}",
            )
            .expect("valid progress template"),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let progress = {
        let bar = bar.clone();
        Arc::new(move |p: &Progress| {
            let Some(pb) = &bar else { return };
            match &p.regroup {
                None => {
                    pb.set_length(p.total.max(p.counts.scanned));
                    pb.set_position(p.counts.scanned);
                    pb.set_message(format!(
                        "{} · {} in flight × {}",
                        p.index, p.in_flight, p.bulk_size
                    ));
                }
                Some(r) => {
                    let msg = format!("{} · groups: {}", p.index, r.phase.name());
                    if pb.message() != msg {
                        pb.reset();
                        pb.set_message(msg);
                    }
                    pb.set_length(r.total.unwrap_or(0).max(r.done));
                    pb.set_position(r.done);
                }
            }
        })
    };

    runtime.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        tokio::spawn(es_args::watch_signals(
            Arc::clone(&stop),
            "run the same command again to continue",
            || eprintln!("signal received: finishing the batches in flight, then stopping"),
        ));
        let report = job.run(&stop, progress).await;
        if let Some(pb) = &bar {
            pb.finish_and_clear();
        }
        let report = report?;
        eprintln!("{}", render(&report));
        if let Some(path) = &args.report_json {
            std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n").map_err(|e| {
                anyhow::anyhow!("cannot write the report to {}: {e}", path.display())
            })?;
        }
        if report.interrupted {
            anyhow::bail!(
                "interrupted: run the same command again to continue (state in {})",
                report.state_file.display()
            );
        }
        let c = &report.counts;
        Ok(if c.failed + c.bad > 0 {
            Status::BadInput
        } else {
            Status::Done
        })
    })
}

/// `--slice I/N`, checked by the library's one rule.
fn parse_slice(s: &str) -> Result<Slice, String> {
    s.parse().map_err(|e: es::EsError| e.to_string())
}

/// The final report, for stderr.
fn render(r: &BackfillReport) -> String {
    let c = &r.counts;
    let verb = if r.dry_run { "would write" } else { "written" };
    let mut s = format!(
        "back-fill of `{}`{} ({} documents, {}{}{}): {}\n",
        r.pattern,
        r.slice
            .as_ref()
            .map(|s| format!(", slice {s}"))
            .unwrap_or_default(),
        if r.mode == "all" {
            "all"
        } else {
            "only missing"
        },
        r.paging,
        if r.dry_run { ", dry run" } else { "" },
        if r.resumed { ", resumed" } else { "" },
        common::plural(r.indices.len(), "index", "indices"),
    );
    let line = |label: &str, n: u64| format!("  {label:<28}{n:>12}\n");
    s += &line("scanned", c.scanned);
    s += &line(verb, c.written);
    s += &line("written as too short", c.too_short);
    s += &line("deleted meanwhile", c.deleted);
    s += &line("failed", c.failed);
    s += &line("bad text field", c.bad);
    s += &line("(already current)", c.unchanged);
    s += &line("(found written at restart)", c.recovered);
    s += &line("version conflicts retried", c.conflicts_retried);
    s += &line("429 pushbacks retried", c.rejections);
    s += &format!(
        "  {:<28}{:>10.1} s\n  {:<28}{:>12.0}",
        "elapsed", r.elapsed_secs, "docs/s", r.docs_per_sec
    );
    if c.failed + c.bad > 0 {
        s += &format!(
            "\n{} document(s) not written: see {}",
            c.failed + c.bad,
            r.failed_file.display()
        );
    }
    if !c.adds_up() {
        s += "\nwarning: the counts do not add up (a bug: please report it)";
    }
    for g in r.regroups.values() {
        s += "\nduplicate groups linked by the join, ";
        s += &super::regroup::render(g);
    }
    for index in &r.regroup_pending {
        s += &format!(
            "\nduplicate groups of `{index}`: each article written is its own group until `neardup regroup --index {index}` links them (run it once every slice has finished)"
        );
    }
    s
}

//! `neardup regroup`: recompute an index's duplicate groups as connected components and write
//! the labels that change (the library's [`neardup::es::regroup`]).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use neardup::es::backfill::Paging;
use neardup::es::regroup::{
    default_state_path, regroup, Linking, RegroupConfig, RegroupProgress, RegroupReport,
};
use neardup::es::{self, RetryPolicy};
use neardup::relation::AlignRule;
use serde_json::json;

use super::common::{self, CmdResult, Status};
use super::es_args::{self, parse_duration, EsArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    es: EsArgs,
    /// The index (or an alias naming one index) whose groups to recompute. It must keep groups
    /// (`neardup es-init` records them by default).
    #[arg(long, value_name = "NAME")]
    index: String,
    /// The texts decide what is joined: MinHash finds candidates (down to a similarity of
    /// 0.1), their texts (--field, from `_source`) are aligned with the article's, and only
    /// copies are joined (`near_duplicate`, or an article contained in another): two
    /// instances of one template, or two articles that share a passage, stay apart. Formula
    /// text the index records (`es-init --formula`, kept current by the worker) does not
    /// count. The default where the index links its groups by texts (`es-init --group-by
    /// texts`), as its writers do; elsewhere the writers join by MinHash between regroups.
    #[arg(long)]
    align: bool,
    /// With --align: a text field the alignment reads; repeat for several, joined in order
    /// [default: the fields the index links its groups by, else title and content].
    #[arg(long = "field", value_name = "NAME", requires = "align")]
    fields: Vec<String>,
    /// How each article's links are found: `join` reads every article's stored terms once
    /// and joins them on this machine (files beside the work file, about 2 KB an article;
    /// no search); `search` sends one `similar` search per article, as the writers do.
    /// Both find the same links.
    #[arg(long, value_enum, default_value_t = LinkingArg::Join, value_name = "join|search")]
    linking: LinkingArg,
    /// Learn the index's common minima terms in the join's walk: those held by more than N
    /// articles are not asked (a candidate by its minima agrees in at least 4 terms that are
    /// not common; the judgement still reads every minimum), so the join walks none of them. Recorded in the index's
    /// `_meta` before the join (not in a dry run), for every search after it. For indices of
    /// millions of articles, where a frequent word pair's term is held by a share of the index:
    /// see docs/explanation/containment.md, "Common minima" [default: those the index
    /// records, if any].
    #[arg(long, value_name = "N")]
    common_above: Option<u64>,
    /// Compute the groups and print each of two or more articles as a JSON line
    /// (`{"representative", "members", "size"}`) on stdout; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Work file: the on-disk union-find and the job's progress, for resuming
    /// [default: .neardup-regroup-<index>.redb, or .dry-run.redb].
    #[arg(long, value_name = "PATH")]
    state: Option<PathBuf>,
    /// Discard a work file left by another regroup and start over.
    #[arg(long)]
    restart: bool,
    /// Articles per page read (and per transaction of the work file).
    #[arg(long, default_value_t = 500, value_name = "N")]
    page_size: usize,
    /// `similar` searches in flight (--linking search).
    #[arg(long, default_value_t = 8, value_name = "N")]
    searches: usize,
    /// Labels per bulk request.
    #[arg(long, default_value_t = 500, value_name = "N")]
    bulk_size: usize,
    /// Throttle the job to this many searches (and labels written) per second.
    #[arg(long, value_name = "N")]
    max_docs_per_sec: Option<f64>,
    /// How pages are read: `auto` (point in time where available, else scroll), `pit`, `scroll`.
    #[arg(long, default_value = "auto", value_name = "auto|pit|scroll")]
    paging: Paging,
    /// Scroll / point-in-time keep-alive between two pages.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    keep_alive: Duration,
    /// Retries of a failing request (429, 5xx, unreachable), with backoff up to 30 s.
    #[arg(long, default_value_t = 14, value_name = "N")]
    retries: u32,
    /// The work file's page cache, in MiB (memory stays near this plus one page of articles).
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    cache_mib: usize,
    /// Also write the final report as JSON here.
    #[arg(long, value_name = "PATH")]
    report_json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum LinkingArg {
    Join,
    Search,
}

impl From<LinkingArg> for Linking {
    fn from(a: LinkingArg) -> Linking {
        match a {
            LinkingArg::Join => Linking::Join,
            LinkingArg::Search => Linking::Search,
        }
    }
}

pub fn run(args: Args) -> CmdResult {
    for (flag, v) in [
        ("--page-size", args.page_size),
        ("--searches", args.searches),
        ("--bulk-size", args.bulk_size),
        ("--cache-mib", args.cache_mib),
    ] {
        common::ensure_usage(v > 0, &format!("{flag} must be at least 1"))?;
    }
    if let Some(r) = args.max_docs_per_sec {
        common::ensure_usage(r > 0.0, "--max-docs-per-sec must be positive")?;
    }
    let (es_config, client) = args.es.client()?;
    let mut config = RegroupConfig::new(&args.index);
    config.state = args
        .state
        .clone()
        .unwrap_or_else(|| default_state_path(&args.index, args.dry_run));
    config.dry_run = args.dry_run;
    config.linking = args.linking.into();
    config.common_above = args.common_above;
    config.restart = args.restart;
    config.page_size = args.page_size;
    config.searches_in_flight = args.searches;
    config.bulk_size = args.bulk_size;
    config.max_docs_per_sec = args.max_docs_per_sec;
    config.paging = args.paging;
    config.keep_alive = args.keep_alive;
    config.cache_bytes = args.cache_mib << 20;
    config.align = args.align.then_some(AlignRule::DEFAULT);
    config.text_fields = (!args.fields.is_empty()).then(|| args.fields.clone());
    config.retry = RetryPolicy {
        max_retries: args.retries,
        ..RetryPolicy::default()
    };

    let bar = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {msg:>8} {wide_bar} {pos}/{len} ({per_sec}, ETA {eta})",
            )
            .expect("valid progress template"),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    });
    let progress = {
        let bar = bar.clone();
        move |p: &RegroupProgress| {
            if let Some(pb) = &bar {
                let name = p.phase.name();
                if pb.message() != name {
                    pb.reset();
                    pb.set_message(name);
                }
                pb.set_length(p.total.unwrap_or(0).max(p.done));
                pb.set_position(p.done);
            }
        }
    };

    let runtime = es_args::runtime()?;
    runtime.block_on(async move {
        es::first_contact(&client, es_config.connect_timeout).await?;
        let stop = Arc::new(AtomicBool::new(false));
        tokio::spawn(es_args::watch_signals(
            Arc::clone(&stop),
            "run the same command again to continue",
            || eprintln!("signal received: finishing the page in flight, then stopping"),
        ));
        let mut out = std::io::BufWriter::new(std::io::stdout());
        let report = regroup(client, &config, &stop, progress, |c| {
            let line = json!({
                "representative": c.representative,
                "members": c.members,
                "size": c.members.len(),
            });
            writeln!(out, "{line}")
        })
        .await;
        out.flush()?;
        drop(out);
        if let Some(pb) = &bar {
            pb.finish_and_clear();
        }
        let report = report.map_err(|e| match e {
            // A flag the index cannot take.
            e @ (es::regroup::RegroupError::OtherTextFields { .. }
            | es::regroup::RegroupError::CommonAbove(_)) => common::usage(e.to_string()),
            e => e.into(),
        })?;
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
        Ok(if report.failed.is_empty() {
            Status::Done
        } else {
            Status::BadInput
        })
    })
}

/// The final report, for stderr.
pub(crate) fn render(r: &RegroupReport) -> String {
    let mut s = format!(
        "regroup of `{}` ({}, {}{}{}{}):\n",
        r.index,
        r.field,
        r.tolerance,
        match (r.aligned, &r.formula) {
            (false, _) => String::new(),
            (true, None) => ", texts aligned, no formula recorded".to_owned(),
            (true, Some(f)) => format!(", texts aligned, formula {f}"),
        },
        if r.dry_run { ", dry run" } else { "" },
        if r.resumed { ", resumed" } else { "" },
    );
    let line = |label: &str, n: u64| format!("  {label:<28}{n:>12}\n");
    s += &line("articles", r.articles);
    s += &line(
        match r.linking {
            Linking::Join => "joined by this run",
            Linking::Search => "searched by this run",
        },
        r.searched,
    );
    if let Some(c) = &r.common_minima {
        s += &format!(
            "  {:<28}{:>12}\n",
            format!(
                "common minima (> {}){}",
                c.above,
                if c.learned { ", learned" } else { "" }
            ),
            c.terms
        );
    }
    s += &line("groups", r.groups);
    s += &line("groups of two or more", r.shared_groups);
    s += &line("largest group", r.largest_group);
    s += &line(
        if r.dry_run {
            "labels that would change"
        } else {
            "labels to change"
        },
        r.changed,
    );
    if !r.dry_run {
        s += &line("written", r.written);
        s += &line("changed meanwhile (left)", r.conflicts);
        s += &line("deleted meanwhile", r.deleted);
        s += &line("failed (this run)", r.failed.len() as u64);
    }
    s += &format!("  {:<28}{:>10.1} s", "elapsed", r.elapsed_secs);
    for f in r.failed.iter().take(10) {
        s += &format!(
            "\n  not written: `{}`: HTTP {} {}",
            f.id, f.status, f.reason
        );
    }
    s
}

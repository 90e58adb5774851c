//! `neardup worker`: keeps an index's fingerprints current until stopped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use neardup::es::{
    self, EsError, EsIndexer, PassReport, RetryPolicy, Watermark, Worker, WorkerConfig,
};
use tokio::sync::Notify;

use super::common::ProfileArgs;
use super::common::{self, CmdResult, Status};
use super::es_args::{self, parse_duration, EsArgs, FieldArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    es: EsArgs,
    /// Index (or alias) to keep current; prepare it with `neardup es-init` first. Every method
    /// it records in its `_meta` is written.
    #[arg(long, value_name = "NAME")]
    index: String,
    /// Text field to fingerprint (dotted paths allowed); repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    fields: Vec<String>,
    /// A date or number field the article service bumps on every change: documents changed
    /// since the previous pass are fingerprinted again.
    #[arg(long, value_name = "FIELD")]
    changed_field: Option<String>,
    /// Start change detection at this value of --changed-field (epoch milliseconds for a
    /// date) instead of at the saved watermark (--state) or the first pass.
    #[arg(long, value_name = "VALUE", requires = "changed_field")]
    since: Option<f64>,
    /// With --changed-field: file that keeps the watermark across restarts, rewritten after
    /// each pass that moves it (default: `.neardup-worker-<index>-<field>.json` in the
    /// working directory).
    #[arg(long, value_name = "PATH", requires = "changed_field")]
    state: Option<PathBuf>,
    /// With a date --changed-field: also look again at documents changed this long before the
    /// previous pass's watermark (refresh delay, writers' clock skew).
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    changed_overlap: Duration,
    /// Do not follow the changes feed: find edits only through the stale query (edit
    /// tracking's final pipeline, where es-init installed it) and --changed-field. By default
    /// each pass also reads every document written since the previous one, by its sequence
    /// number, with checkpoints kept in the index `neardup-feed-<index>` (created on the first
    /// pass: the worker needs `create_index`, `read` and `write` there, and `monitor` and
    /// `view_index_metadata` on --index).
    #[arg(long)]
    no_feed: bool,
    /// Pause between two passes.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    interval: Duration,
    /// Documents per page read (point in time or scroll) and bulk request.
    #[arg(long, default_value_t = 500, value_name = "N")]
    batch_size: usize,
    /// Leave the formula `_meta` records as it is. By default the worker keeps it current,
    /// learned from the index itself (`neardup formula learn --index`) and recorded in
    /// `_meta` (as `es-init --formula`): once the index holds 1,000 documents, and again
    /// whenever the documents the sample can read have grown by a tenth; it looks at most
    /// every 10 minutes (and after a --once pass). Aligned lookups (`similar --align`) and
    /// dedupe on insert with `align=true` do not count formula text as copied. Updating
    /// `_meta` needs the `manage` privilege on --index; without it the worker says so and
    /// goes on.
    #[arg(long)]
    no_formula: bool,
    /// Documents read to learn the formula (the first of the index, in its order).
    #[arg(long, default_value_t = es::FORMULA_SAMPLE, value_name = "N", conflicts_with = "no_formula", value_parser = clap::value_parser!(u64).range(1..))]
    formula_sample: u64,
    /// Do one pass and exit (exit code 1 if any document could not be written).
    #[arg(long)]
    once: bool,
    /// Fingerprinting threads (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    threads: Option<usize>,
    #[command(flatten)]
    profile: ProfileArgs,
    #[command(flatten)]
    fields_names: FieldArgs,
}

pub fn run(args: Args) -> CmdResult {
    common::ensure_usage(args.batch_size > 0, "--batch-size must be at least 1")?;
    if let Some(n) = args.threads {
        common::ensure_usage(n > 0, "--threads must be at least 1")?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()?;
    }
    let names = args.fields_names.names()?;
    let (config, client) = args.es.client()?;
    es_args::runtime()?.block_on(async move {
        let version = es::first_contact(&client, config.connect_timeout).await?;
        let indexer = EsIndexer::open(client, &args.index, RetryPolicy::default(), &names).await?;
        let fp = args.profile.for_index(&args.index, indexer.meta())?;
        let indexer = indexer.with_fingerprinter(fp)?;
        let mut worker = Worker::new(
            indexer,
            WorkerConfig {
                text_fields: args.fields.clone(),
                changed_field: args.changed_field.clone(),
                batch_size: args.batch_size,
                changed_overlap: args.changed_overlap,
                feed: !args.no_feed,
                formula: (!args.no_formula).then(|| es::FormulaUpkeep {
                    sample: args.formula_sample,
                    ..es::FormulaUpkeep::default()
                }),
                ..WorkerConfig::default()
            },
        );
        worker.check().await?;
        let state = args.changed_field.as_deref().map(|field| WatermarkFile {
            path: args
                .state
                .clone()
                .unwrap_or_else(|| default_state_path(&args.index, field)),
            index: args.index.clone(),
            field: field.to_owned(),
        });
        let since = match (args.since, &state) {
            (Some(v), _) => Some(v),
            (None, Some(s)) => s.load()?,
            (None, None) => None,
        };
        if let Some(v) = since {
            worker.set_watermark(Some(if worker.changed_field_is_date() {
                Watermark::EpochMillis(v as i64)
            } else {
                Watermark::Number(v)
            }));
        }
        tracing::info!(
            es = %config.display_urls(),
            es_version = %version,
            index = %args.index,
            holds = %worker.indexer().meta(),
            feed = worker.feed_index().unwrap_or("off"),
            "worker started"
        );

        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        let woken = Arc::clone(&wake);
        tokio::spawn(es_args::watch_signals(Arc::clone(&stop), "", move || {
            tracing::info!("signal received: finishing the batch in flight, then stopping");
            woken.notify_one();
        }));

        let mut pass_no = 0u64;
        let mut failed_items = 0usize;
        loop {
            pass_no += 1;
            match worker.pass(&stop).await {
                Ok(r) => {
                    failed_items += r.writes.failed.len();
                    log_pass(pass_no, &r);
                    if let (Some(s), Some(w)) = (&state, worker.watermark()) {
                        s.save(w)?;
                    }
                }
                // A cluster restarting or overloaded: try again next interval.
                Err(e) if !args.once && is_transient(&e) => {
                    tracing::error!(error = %e, "pass failed; trying again after the interval");
                }
                Err(e) => return Err(e.into()),
            }
            if !stop.load(Ordering::SeqCst) {
                keep_formula(&mut worker).await;
            }
            if args.once || stop.load(Ordering::SeqCst) {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(args.interval) => {}
                _ = wake.notified() => {}
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
        }
        tracing::info!("worker stopped");
        if args.once && failed_items > 0 {
            anyhow::bail!("{failed_items} document(s) could not be written (see the errors above)");
        }
        Ok(Status::Done)
    })
}

/// The watermark on disk: `{"index", "changed_field", "watermark"}` (epoch milliseconds for
/// a date field, else the field's value), replaced whole (write then rename) after each pass.
struct WatermarkFile {
    path: PathBuf,
    index: String,
    field: String,
}

fn default_state_path(index: &str, field: &str) -> PathBuf {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    PathBuf::from(format!(
        ".neardup-worker-{}-{}.json",
        safe(index),
        safe(field)
    ))
}

impl WatermarkFile {
    /// The saved watermark; none if the file does not exist. A file for another index or
    /// field, or not a watermark file, is an error (never overwritten).
    fn load(&self) -> anyhow::Result<Option<f64>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let v: Value = serde_json::from_str(&text).ok().unwrap_or(Value::Null);
        let (Some(index), Some(field), Some(w)) = (
            v["index"].as_str(),
            v["changed_field"].as_str(),
            v["watermark"].as_f64(),
        ) else {
            anyhow::bail!(
                "{} is not a neardup worker watermark file; pass another --state (or delete it)",
                self.path.display()
            );
        };
        anyhow::ensure!(
            index == self.index && field == self.field,
            "{} holds the watermark of index `{index}`, field `{field}`; pass another --state",
            self.path.display()
        );
        tracing::info!(state = %self.path.display(), watermark = w, "resuming change detection");
        Ok(Some(w))
    }

    fn save(&self, w: &Watermark) -> anyhow::Result<()> {
        let value = match *w {
            Watermark::EpochMillis(ms) => json!(ms),
            Watermark::Number(x) => json!(x),
        };
        let body = json!({"index": self.index, "changed_field": self.field, "watermark": value});
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, format!("{body}\n"))
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .with_context(|| format!("saving the watermark in {}", self.path.display()))
    }
}

/// Keeps the index's formula current; a failure is said and the worker goes on (the
/// formula only spares templates, fingerprints do not depend on it).
async fn keep_formula(worker: &mut Worker) {
    match worker.keep_formula().await {
        Ok(None) => {}
        Ok(Some(r)) => tracing::info!(
            formula = %r.id,
            replaced = %r.replaced.as_deref().unwrap_or("none"),
            read = r.read,
            windows = r.windows,
            secs = format!("{:.2}", r.elapsed.as_secs_f64()),
            "formula learned from the index and recorded in _meta"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "could not keep the formula current; aligned lookups go on with the one recorded (give the worker the `manage` privilege on the index, or run `neardup formula learn --index` and `es-init --formula`, or pass --no-formula)"
        ),
    }
}

fn is_transient(e: &EsError) -> bool {
    match e {
        // A lost read: the next pass reads the stale documents again.
        EsError::Exhausted { .. } | EsError::ContextLost { .. } => true,
        other => other.is_transient(),
    }
}

fn log_pass(n: u64, r: &PassReport) {
    tracing::info!(
        pass = n,
        stale = r.stale,
        read = r.seen,
        fingerprinted = r.fingerprinted,
        too_short = r.too_short,
        written = r.writes.updated,
        unchanged = r.writes.noop,
        changed_meanwhile = r.writes.conflicts.len(),
        deleted_meanwhile = r.writes.missing.len(),
        failed = r.writes.failed.len(),
        feed_read = r.feed.read,
        feed_unchanged = r.feed.unchanged,
        interrupted = r.interrupted,
        secs = format!("{:.2}", r.elapsed.as_secs_f64()),
        "pass done"
    );
}

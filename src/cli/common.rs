//! What the subcommands share: input flags, thread pools, progress bars, exit codes.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use neardup::input::{InputSpec, Source};
use neardup::minhash::Threshold;
use neardup::pipeline::Counts;
use neardup::text::Boilerplate;
use neardup::{
    FingerprintConfig, Fingerprinter, Method, MinHashParams, Profile, Thresholds, Tolerance,
};

/// Process exit codes (documented in `--help` and the README).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ExitCode {
    Ok = 0,
    Error = 1,
    /// A usage error: clap's own, or a flag value that parses but cannot be used.
    Usage = 2,
    /// The run finished but some input lines were rejected.
    BadInput = 3,
    /// `similar`: the query (text, article or document) is too short to have a fingerprint.
    NoFingerprint = 4,
}

/// How a subcommand that did not fail ends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Done,
    /// Finished, but some input lines were rejected (already reported): exit 3.
    BadInput,
    /// The query text is too short to have a fingerprint (already reported): exit 4.
    NoFingerprint,
}

pub type CmdResult = anyhow::Result<Status>;

/// Prints a fatal error with its causes and maps the result to an exit code.
pub fn finish(result: CmdResult) -> i32 {
    match result {
        Ok(Status::Done) => ExitCode::Ok as i32,
        Ok(Status::BadInput) => ExitCode::BadInput as i32,
        Ok(Status::NoFingerprint) => ExitCode::NoFingerprint as i32,
        Err(e) if is_broken_pipe(&e) => ExitCode::Ok as i32,
        Err(e) if is_usage(&e) => {
            eprintln!("error: {}", scrub(&format!("{e:#}")));
            ExitCode::Usage as i32
        }
        Err(e) => {
            eprintln!("error: {}{}", scrub(&format!("{e:#}")), flag_hint(&e));
            ExitCode::Error as i32
        }
    }
}

/// The flags that fit a library error worded without them (the service words it with its
/// query parameters instead).
fn flag_hint(e: &anyhow::Error) -> String {
    e.chain()
        .find_map(|c| match c.downcast_ref::<neardup::es::EsError>() {
            Some(neardup::es::EsError::MethodNotHeld { held, .. }) => Some(format!(
                " (on the command line: --method {held}, or leave --method, -k and --threshold out)"
            )),
            _ => None,
        })
        .unwrap_or_default()
}

/// A flag value that parses but cannot be used: exit code 2, like clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A [`UsageError`] as an `anyhow::Error`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// A [`UsageError`] unless `ok`.
pub fn ensure_usage(ok: bool, message: &str) -> anyhow::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(usage(message))
    }
}

/// Usage errors raised after parsing, by this layer or by the library (a distance or profile
/// it does not support).
fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<UsageError>()
            || matches!(
                c.downcast_ref::<neardup::Error>(),
                Some(
                    neardup::Error::UnsupportedDistance { .. } | neardup::Error::UnknownProfile(_)
                )
            )
            || matches!(
                c.downcast_ref::<neardup::es::EsError>(),
                Some(neardup::es::EsError::DistanceTooLarge { .. })
            )
    })
}

/// `-k/--max-distance`: the one spelling of the largest Hamming distance, for every command.
#[derive(Args, Debug, Clone, Copy)]
pub struct DistanceArg {
    /// Largest Hamming distance between near-duplicates. Default: the k of the index used (an
    /// existing store's own; 3 on Elasticsearch, for a new store and for dedupe). At most 7 on
    /// Elasticsearch (four 16-bit blocks, probed with their one-bit flips above 3), 7 for a
    /// new store or dedupe (k + 1 blocks of at least 8 bits), 64 when querying an existing
    /// store (exact, with more lookups).
    #[arg(short = 'k', long = "max-distance", value_name = "K")]
    pub k: Option<u32>,
}

/// The index a distance is used with, which sets its default and its limit (the k policy).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Searched {
    /// An existing local store built for distance `k`: a larger query distance stays exact
    /// (more lookups), up to the 64 bits of a fingerprint.
    Store { k: u32 },
    /// Elasticsearch's four 16-bit block fields: exact up to [`neardup::es::FLIPPED_BLOCK_K`] (default
    /// [`neardup::es::DEFAULT_K`]).
    Elasticsearch,
    /// A block index built now (a new store, dedupe's in-memory finder): k + 1 blocks of at
    /// least 8 bits, so up to [`neardup::simhash::MAX_K`].
    NewBlocks,
}

impl DistanceArg {
    /// The distance to use with `searched`: the flag's value, or that index's default; a
    /// value above the index's limit is a usage error that says why.
    pub fn resolve(self, searched: Searched) -> anyhow::Result<u32> {
        let (default, max, why) = match searched {
            Searched::Store { k } => (k, 64, "a fingerprint has 64 bits"),
            Searched::Elasticsearch => (
                neardup::es::DEFAULT_K,
                neardup::es::FLIPPED_BLOCK_K,
                "Elasticsearch's four 16-bit block fields answer exactly up to 7 (a pair within \
                 7 bits has a block within one bit)",
            ),
            Searched::NewBlocks => (
                neardup::simhash::DEFAULT_K,
                neardup::simhash::MAX_K,
                "the index splits the 64 bits into k + 1 blocks of at least 8 bits",
            ),
        };
        match self.k {
            None => Ok(default),
            Some(k) if k <= max => Ok(k),
            Some(k) => Err(usage(format!(
                "-k/--max-distance {k} is too large here: at most {max}, because {why}"
            ))),
        }
    }
}

/// A closed stdout (e.g. `neardup fingerprint … | head`) is a normal end, not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Where articles come from and which fields hold the text.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// JSON Lines file of articles (`.gz` is decompressed); `-` reads standard input.
    #[arg(long, short, default_value = "-", value_name = "PATH")]
    pub input: String,
    /// Text field to fingerprint; repeat for several, joined in order.
    #[arg(long = "field", value_name = "NAME", default_values = neardup::input::DEFAULT_TEXT_FIELDS)]
    pub fields: Vec<String>,
    /// Field holding the document id (a string or integer).
    #[arg(long, default_value = "id", value_name = "NAME")]
    pub id_field: String,
    /// Read `{"id": .., "tokens": [..]}` (words segmented elsewhere) and skip text processing.
    #[arg(long)]
    pub pre_tokenized: bool,
    /// Stop at the first bad input line instead of reporting it and going on.
    #[arg(long)]
    pub strict: bool,
}

impl InputArgs {
    pub fn spec(&self) -> InputSpec {
        InputSpec {
            id_field: self.id_field.clone(),
            text_fields: self.fields.clone(),
            pre_tokenized: self.pre_tokenized,
        }
    }
}

/// The fingerprint settings, one group for every command. A command that reads or writes a
/// store or an index uses what it records ([`ProfileArgs::for_store`],
/// [`ProfileArgs::for_index`]); the others use the flags ([`ProfileArgs::fingerprinter`]).
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// SimHash profile: `default` (= `tf`, the most precise SimHash scheme on the corpus, see
    /// docs/evaluation.md), `seed000` (the older Java service, bit for bit), or `tf`, `tfidf`,
    /// `keywords`, `bigram`, `char3`. Default: the profile the store or index records,
    /// else `default`.
    #[arg(long, value_parser = parse_profile)]
    pub profile: Option<Profile>,
    /// `default` profile: texts with fewer distinct words get no fingerprint.
    #[arg(long, default_value_t = Thresholds::default().min_words, value_name = "N")]
    pub min_words: usize,
    /// Turn off jieba's HMM for words missing from its dictionary. Part of the fingerprint
    /// version: a store or index takes only the setting it was built with.
    #[arg(long)]
    pub no_hmm: bool,
    /// Do not fold Traditional characters into Simplified (with Taiwan and Hong Kong phrases
    /// turned into mainland ones) before segmentation. Part of the fingerprint version: a
    /// store or index keeps the setting it was built with; `seed000` never folds.
    #[arg(long)]
    pub no_fold: bool,
    /// Drop the boilerplate lines of this artefact (made by `neardup boilerplate learn`)
    /// before segmentation. Part of the fingerprint version: a store or index records the
    /// artefact it was built with and uses it.
    #[arg(long, value_name = "PATH")]
    pub boilerplate: Option<PathBuf>,
    /// MinHash parameters, in the form the MinHash version writes them (keys left out keep
    /// their default): e.g. `shingle=w2;n=128;sig=oph;bands=42x3` (the default). A store keeps
    /// its own; an index refuses others.
    #[arg(long, value_name = "SPEC", value_parser = parse_minhash_params)]
    pub minhash_params: Option<MinHashParams>,
}

pub fn parse_minhash_params(s: &str) -> Result<MinHashParams, String> {
    s.parse()
}

pub fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}

impl ProfileArgs {
    pub fn fingerprinter(&self) -> anyhow::Result<Fingerprinter> {
        Ok(Fingerprinter::new(FingerprintConfig {
            profile: self.profile.unwrap_or_default(),
            hmm: !self.no_hmm,
            thresholds: Thresholds {
                min_words: self.min_words,
                ..Thresholds::default()
            },
            minhash: self.minhash_params.unwrap_or_default(),
            fold: !self.no_fold,
            boilerplate: self.load_boilerplate(!self.no_fold)?,
        }))
    }

    /// The artefact `--boilerplate` names, if any, checked against the folding setting
    /// `fold` of the fingerprints it will serve.
    pub fn load_boilerplate(&self, fold: bool) -> anyhow::Result<Option<Arc<Boilerplate>>> {
        let Some(path) = &self.boilerplate else {
            return Ok(None);
        };
        ensure_usage(
            self.profile != Some(Profile::Seed000),
            "--boilerplate: the seed000 profile never drops boilerplate (the older Java service did not); leave one of them out",
        )?;
        Ok(Some(Arc::new(read_boilerplate(path, fold)?)))
    }
}

/// Whether an output path may be replaced whole by writing beside it and renaming: a regular
/// file, or none yet. A device such as /dev/null, a pipe or a symbolic link is written
/// through instead, never replaced.
pub fn replaceable(path: &str) -> bool {
    std::fs::symlink_metadata(path).map_or(true, |m| m.file_type().is_file())
}

/// Reads a boilerplate artefact for fingerprints that fold (`fold`) or not, naming the file
/// in every error; one learned with the other folding setting is a usage error.
pub fn read_boilerplate(path: &Path, fold: bool) -> anyhow::Result<Boilerplate> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the boilerplate artefact {}", path.display()))?;
    let b: Boilerplate = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a boilerplate artefact of this neardup (make one with `neardup boilerplate learn`)",
            path.display()
        )
    })?;
    b.check_fold(fold)
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    Ok(b)
}

/// The detection method and how close counts as a near-duplicate.
#[derive(Args, Debug, Clone)]
pub struct MethodArgs {
    /// Detection method: `minhash` (word-shingle MinHash, the default: see README "Why this
    /// default") or `simhash` (64-bit SimHash of the --profile, the older Java service's
    /// method). A store's own method is used when not given.
    #[arg(long, value_parser = parse_method)]
    pub method: Option<Method>,
    /// SimHash (-k implies --method simhash).
    #[command(flatten)]
    pub distance: DistanceArg,
    /// MinHash: smallest estimated Jaccard similarity of word shingles that counts as a
    /// near-duplicate, 0 < T ≤ 1 (default 0.3; implies --method minhash).
    #[arg(long, value_name = "T", conflicts_with = "k", value_parser = parse_threshold)]
    pub threshold: Option<Threshold>,
}

/// Which relations a MinHash search reports (see `neardup::relation`).
#[derive(Args, Debug, Clone)]
pub struct RelationArgs {
    /// MinHash: report near-duplicates only. By default an article mostly contained in
    /// another (a lead excerpt, a teaser, a passage) is reported too, with `"relation":
    /// "contained_in"` or `"contains"` and its `"containment"`.
    #[arg(long)]
    pub no_containment: bool,
}

impl RelationArgs {
    /// The library's options for these flags.
    pub fn options(&self) -> neardup::relation::MatchOptions {
        neardup::relation::MatchOptions::with_containment(!self.no_containment)
    }
}

/// A MinHash threshold: checked when the flags are read, so every command refuses a bad
/// one, including those that only record it.
pub fn parse_threshold(s: &str) -> Result<Threshold, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}

pub fn parse_method(s: &str) -> Result<Method, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}

impl MethodArgs {
    /// The method: `--method`, else the store's, else the one `-k`/`--threshold` implies,
    /// else MinHash. A flag of the other method is a usage error.
    pub fn method(&self, store: Option<Method>) -> anyhow::Result<Method> {
        let implied = match (self.distance.k, self.threshold) {
            (Some(_), _) => Some(Method::SimHash),
            (_, Some(_)) => Some(Method::MinHash),
            _ => None,
        };
        let method = self.method.or(store).or(implied).unwrap_or_default();
        if let Some(i) = implied.filter(|&i| i != method) {
            let flag = match i {
                Method::SimHash => "-k/--max-distance",
                Method::MinHash => "--threshold",
            };
            return Err(usage(format!(
                "{flag} belongs to --method {i}, but the method is {method}{}; use {}",
                if store == Some(method) && self.method.is_none() {
                    " (the store's)"
                } else {
                    ""
                },
                match method {
                    Method::SimHash => "-k DISTANCE",
                    Method::MinHash => "--threshold SIMILARITY",
                }
            )));
        }
        Ok(method)
    }

    /// The method of a query on Elasticsearch indices whose `_meta` makes `held` the default:
    /// `--method`, else the one -k/--threshold implies, else `held`.
    pub fn for_index(&self, held: Method) -> anyhow::Result<Method> {
        if self.method.is_none() && self.distance.k.is_none() && self.threshold.is_none() {
            return Ok(held);
        }
        self.method(None)
    }

    /// The tolerance of a query on `store`: its method (a flag of the other method, or
    /// `--method` naming the other one, is an error) and -k resolved against its k.
    pub fn for_store(&self, store: &neardup::Store) -> anyhow::Result<Tolerance> {
        let method = self.method(Some(store.method()))?;
        store.ensure_method(method)?;
        self.tolerance(
            method,
            Searched::Store {
                k: store.config().k,
            },
        )
    }

    /// How close counts, for `method`; for SimHash, -k resolved against what is searched.
    pub fn tolerance(&self, method: Method, searched: Searched) -> anyhow::Result<Tolerance> {
        Ok(match (method, self.threshold) {
            (Method::MinHash, Some(t)) => Tolerance::Similarity(t),
            _ => Tolerance::default_for(method, self.distance.resolve(searched)?),
        })
    }
}

/// Parallelism and chattiness.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Worker threads (default: all cores).
    #[arg(long, short = 'j', value_name = "N")]
    pub threads: Option<usize>,
    /// No progress bar and no summary (errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

impl RunArgs {
    /// Sizes the global rayon pool; call once, before any parallel work.
    pub fn init_threads(&self) -> anyhow::Result<()> {
        if let Some(n) = self.threads {
            ensure_usage(n > 0, "--threads must be at least 1")?;
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build_global()?;
        }
        Ok(())
    }
}

/// A progress bar on stderr, shown only for file input on a terminal and without `--quiet`.
pub fn progress_bar(source: &Source, quiet: bool) -> Option<ProgressBar> {
    if quiet || source.is_stdin || !io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::new(source.len.unwrap_or(0));
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({eta}) {msg}",
        )
        .expect("valid progress template"),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    Some(pb)
}

/// Updates a progress bar from the source's read position and the counts so far.
pub fn tick(pb: &Option<ProgressBar>, source_pos: &std::sync::atomic::AtomicU64, c: &Counts) {
    if let Some(pb) = pb {
        pb.set_position(source_pos.load(Ordering::Relaxed));
        pb.set_message(format!("{} docs", c.documents));
    }
}

/// Prints a rejected input line's error on stderr, above the progress bar if there is one.
pub fn report_bad_line(pb: &Option<ProgressBar>, e: &neardup::input::InputError) {
    match pb {
        Some(pb) => pb.suspend(|| eprintln!("error: {e}")),
        None => eprintln!("error: {e}"),
    }
}

/// How a run over JSON Lines input ends: exit code 3 (after a closing line on stderr) when
/// lines were rejected, so scripts notice even though the good lines were processed.
pub fn status(c: &Counts) -> Status {
    if c.documents == 0 && c.bad_lines == 0 {
        eprintln!("warning: the input holds no articles (an empty file, or only blank lines)");
    }
    if c.bad_lines > 0 {
        eprintln!(
            "{} input line(s) rejected; see the errors above (exit code 3)",
            c.bad_lines
        );
        return Status::BadInput;
    }
    Status::Done
}

/// `1 cluster`, `2 clusters`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The end-of-run line on stderr.
pub fn summary(verb: &str, c: &Counts, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    format!(
        "{verb}: {} documents, {} fingerprinted, {} too short, {} bad lines; {:.1} MB in {:.2} s ({:.1} MB/s, {:.0} docs/s)",
        c.documents,
        c.fingerprinted,
        c.too_short,
        c.bad_lines,
        c.bytes as f64 / 1e6,
        secs,
        c.bytes as f64 / 1e6 / secs,
        c.documents as f64 / secs
    )
}

/// Writes to stdout through a large buffer; errors (a closed pipe) surface to the caller.
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

/// Flushes, mapping failure to an error that keeps its `io::Error` for pipe detection.
pub fn flush(w: &mut impl Write) -> anyhow::Result<()> {
    w.flush()?;
    Ok(())
}

/// The credentials of this run (passwords, API keys), registered as they are read, so that
/// no error message or log line can show them even if a server or library echoes one.
static SECRETS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Adds a credential to those [`scrub`] hides.
pub fn register_secret(secret: &str) {
    if !secret.is_empty() {
        SECRETS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(secret.to_owned());
    }
}

/// `text` with every registered credential replaced by `<redacted>`.
pub fn scrub(text: &str) -> String {
    let secrets = SECRETS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    secrets
        .iter()
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "<redacted>"))
}

/// A log line, buffered and written to stderr scrubbed of credentials when dropped (the
/// formatter writes one event per writer).
#[derive(Default)]
struct ScrubbedStderr(Vec<u8>);

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedStderr {
    fn drop(&mut self) {
        let text = scrub(&String::from_utf8_lossy(&self.0));
        let _ = io::stderr().write_all(text.as_bytes());
    }
}

/// How log lines are written.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: `2026-11-23T04:50:00Z  INFO neardup: …`.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Log lines (the worker's progress, retries, the service's requests) on stderr, scrubbed of
/// credentials; `RUST_LOG` overrides the default level (`info` for neardup, `warn` for
/// everything else).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,neardup=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(ScrubbedStderr::default);
    let _ = match format {
        LogFormat::Text => builder.with_ansi(io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

/// Writes a learned artefact (boilerplate, formula) as pretty JSON to `output` (`-` =
/// standard output), replacing a regular file through a temporary one.
pub fn write_artefact(output: &str, artefact: &impl serde::Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(artefact).context("serialising the artefact")?;
    if output == "-" {
        let mut out = stdout();
        writeln!(out, "{json}").context("writing output")?;
        return flush(&mut out);
    }
    let text = format!("{json}\n");
    if !replaceable(output) {
        return std::fs::write(output, text).with_context(|| format!("writing {output}"));
    }
    let tmp = format!("{output}.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {tmp}"))?;
    std::fs::rename(&tmp, output).with_context(|| format!("renaming {tmp} to {output}"))?;
    Ok(())
}

/// Reads a formula artefact (`neardup formula learn`) for texts prepared with `fold`.
pub fn read_formula(path: &Path, fold: bool) -> anyhow::Result<neardup::align::Formula> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the formula artefact {}", path.display()))?;
    let f: neardup::align::Formula = serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "{} is not a formula artefact neardup reads ({e}); make one with `neardup formula learn`",
            path.display()
        ))
    })?;
    ensure_usage(
        f.fold() == fold,
        &format!(
            "{} was learned from text {} into Simplified, but these texts are {}: learn it again {} --no-fold",
            path.display(),
            if f.fold() { "folded" } else { "not folded" },
            if fold { "folded" } else { "not folded" },
            if fold { "without" } else { "with" },
        ),
    )?;
    Ok(f)
}

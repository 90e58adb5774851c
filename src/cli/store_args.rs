//! Flags and helpers shared by the commands that use a local store (`--store DIR`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::common::{DistanceArg, ProfileArgs, Searched};
use anyhow::Context;
use clap::Args;
use neardup::store::{OpenOptions, Store, StoreConfig};
use neardup::{FingerprintConfig, Fingerprinter, Method, Profile, Thresholds, Tolerance};

use super::common::MethodArgs;

/// Where the store is and how to open it.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Directory of the local index (holds `neardup.redb`).
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
    /// If another process has the store open, wait up to this many seconds for it instead of
    /// failing at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub wait: f64,
}

impl StoreArgs {
    pub fn options(&self) -> anyhow::Result<OpenOptions> {
        open_options(self.wait)
    }

    /// Opens an existing store.
    pub fn open(&self) -> anyhow::Result<Store> {
        Ok(Store::open(&self.store, &self.options()?)?)
    }
}

/// `--store DIR` for a command that uses a local store or Elasticsearch (`similar`, `serve`).
#[derive(Args, Debug, Clone)]
pub struct StoreChoice {
    /// Use the local store in this directory (instead of Elasticsearch).
    #[arg(long, value_name = "DIR", help_heading = "Local store")]
    pub store: Option<PathBuf>,
    /// If another process has the store open, wait up to this many seconds for it.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "store",
        help_heading = "Local store"
    )]
    pub wait: f64,
}

impl StoreChoice {
    /// Opens the existing store in `dir` (the `--store` given), honouring `--wait`.
    pub fn open(&self, dir: &Path) -> anyhow::Result<Store> {
        Ok(Store::open(dir, &open_options(self.wait)?)?)
    }
}

pub fn open_options(wait: f64) -> anyhow::Result<OpenOptions> {
    super::common::ensure_usage(
        wait.is_finite() && wait >= 0.0,
        "--wait must be a number of seconds, 0 or more",
    )?;
    Ok(OpenOptions {
        wait: Duration::from_secs_f64(wait),
    })
}

impl ProfileArgs {
    /// The fingerprinter for a store built with `store` (none for a new store): its SimHash
    /// profile, or its MinHash parameters.
    pub fn for_store(&self, store: Option<&StoreConfig>) -> anyhow::Result<Fingerprinter> {
        let profile = match (self.profile, store) {
            (Some(p), _) => p,
            (None, Some(c)) if c.method == Method::SimHash => {
                c.profile.parse().with_context(|| {
                    format!(
                        "the store's profile `{}` is not one this neardup knows",
                        c.profile
                    )
                })?
            }
            (None, _) => Profile::Default,
        };
        let minhash = store
            .and_then(|c| c.minhash)
            .or(self.minhash_params)
            .unwrap_or_default();
        let fold = !self.no_fold && store.is_none_or(|c| c.fold);
        Ok(Fingerprinter::new(FingerprintConfig {
            profile,
            hmm: !self.no_hmm,
            thresholds: Thresholds {
                min_words: self.min_words,
                ..Thresholds::default()
            },
            minhash,
            // A store keeps its own setting; --no-fold asking for another is refused when
            // the versions are compared.
            fold,
            // Likewise its boilerplate; --boilerplate naming another is refused then too.
            boilerplate: match (store, &self.boilerplate) {
                (Some(c), None) => c.boilerplate.clone(),
                _ => self.load_boilerplate(fold)?,
            },
        }))
    }
}

/// Opens the store in `dir` for writing, creating it for `method` if missing, and the
/// fingerprinter that matches it. An existing store keeps its method and `k`; either given
/// and different is an error.
pub fn open_for_writing(
    args: &StoreArgs,
    profile: &ProfileArgs,
    method: &MethodArgs,
    distance: DistanceArg,
    pre_tokenized: bool,
) -> anyhow::Result<(Store, Fingerprinter)> {
    let opts = args.options()?;
    if Store::exists(&args.store) {
        let store = Store::open(&args.store, &opts)?;
        let method = method.method(Some(store.method()))?;
        let fp = profile.for_store(Some(store.config()))?;
        let k = distance.k.unwrap_or(store.config().k);
        let config = StoreConfig::for_method(&fp, method, pre_tokenized, k);
        store.ensure_config(&config)?;
        Ok((store, fp))
    } else {
        let method = method.method(None)?;
        let fp = profile.for_store(None)?;
        let k = match method {
            Method::SimHash => distance.resolve(Searched::NewBlocks)?,
            Method::MinHash => 0,
        };
        let config = StoreConfig::for_method(&fp, method, pre_tokenized, k);
        let store = Store::create_or_open(&args.store, &config, &opts)?;
        Ok((store, fp))
    }
}

/// Opens an existing store for reading, with the fingerprinter that matches it and the
/// method and tolerance of the query (`-k` defaults to the store's k).
pub fn open_for_query(
    args: &StoreArgs,
    profile: &ProfileArgs,
    method: &MethodArgs,
    pre_tokenized: bool,
) -> anyhow::Result<(Store, Fingerprinter, Tolerance)> {
    let store = args.open()?;
    let tolerance = method.for_store(&store)?;
    let fp = profile.for_store(Some(store.config()))?;
    ensure_comparable(&store, &fp, pre_tokenized)?;
    Ok((store, fp, tolerance))
}

/// Checks that `fp` makes sketches comparable with the store's.
pub fn ensure_comparable(
    store: &Store,
    fp: &Fingerprinter,
    pre_tokenized: bool,
) -> anyhow::Result<()> {
    let version = fp.version_of(store.method(), pre_tokenized);
    store.ensure_fingerprints(fp.config().profile.name(), version)?;
    Ok(())
}

/// A store's method and parameters, for messages: `simhash, k = 3` or `minhash,
/// shingle=w2;…`.
pub fn describe(c: &StoreConfig) -> String {
    match (c.method, &c.minhash) {
        (Method::MinHash, Some(p)) => format!("minhash, {p}"),
        (m, _) => format!("{m}, k = {}", c.k),
    }
}

/// `path` for messages.
pub fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Writes below this many documents never compact: a small run leaves little to give back.
const COMPACT_MIN_CHANGES: u64 = 1000;

/// After a run that wrote `changed` documents (inserted, replaced or removed): compacts the
/// store ([`Store::compact`]) when that is at least a tenth of what it holds. The rewrite
/// costs a pass over the whole store (about a tenth of the time the writes took, when they
/// filled it), so it pays when the run added or churned a good share of the pages, and is
/// skipped for small top-ups of a large store, whose few split pages are not worth it.
pub fn compact_after(store: &mut Store, changed: u64, verbose: bool) -> anyhow::Result<()> {
    let documents = store.len()?;
    if changed < COMPACT_MIN_CHANGES || changed.saturating_mul(10) < documents {
        return Ok(());
    }
    let file = store.path().join(neardup::store::FILE_NAME);
    let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let (before, started) = (size(), std::time::Instant::now());
    store.compact()?;
    if verbose {
        eprintln!(
            "compacted: {:.1} MB -> {:.1} MB in {:.2} s",
            before as f64 / 1e6,
            size() as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

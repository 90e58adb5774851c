//! Flags and helpers shared by the commands that use a local store (`--store DIR`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::common::{DistanceArg, Searched};
use anyhow::Context;
use clap::Args;
use neardup::store::{OpenOptions, Store, StoreConfig};
use neardup::{FingerprintConfig, Fingerprinter, Profile, Thresholds};

/// Default `k` of a new store: four blocks of 16 bits, the `simHashA`–`simHashD` layout.
pub const DEFAULT_K: u32 = 3;

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

pub fn open_options(wait: f64) -> anyhow::Result<OpenOptions> {
    super::common::ensure_usage(
        wait.is_finite() && wait >= 0.0,
        "--wait must be a number of seconds, 0 or more",
    )?;
    Ok(OpenOptions {
        wait: Duration::from_secs_f64(wait),
    })
}

/// Fingerprint settings of commands that use a store: by default the store's own.
#[derive(Args, Debug, Clone)]
pub struct StoreProfileArgs {
    /// Fingerprint profile, `default` or `seed000` (default: the store's; `default` for a new
    /// store).
    #[arg(long, value_parser = parse_profile)]
    pub profile: Option<Profile>,
    /// `default` profile: texts with fewer distinct words get no fingerprint.
    #[arg(long, default_value_t = Thresholds::default().min_words, value_name = "N")]
    pub min_words: usize,
    /// Turn off jieba's HMM for words missing from its dictionary (changes the fingerprint
    /// version: use the same setting as the store).
    #[arg(long)]
    pub no_hmm: bool,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}

impl StoreProfileArgs {
    /// The fingerprinter for a store built with `store_profile` (none for a new store).
    pub fn fingerprinter(&self, store_profile: Option<&str>) -> anyhow::Result<Fingerprinter> {
        let profile = match (self.profile, store_profile) {
            (Some(p), _) => p,
            (None, Some(name)) => name.parse().with_context(|| {
                format!("the store's profile `{name}` is not one this neardup knows")
            })?,
            (None, None) => Profile::Default,
        };
        Ok(Fingerprinter::new(FingerprintConfig {
            profile,
            hmm: !self.no_hmm,
            thresholds: Thresholds {
                min_words: self.min_words,
                ..Thresholds::default()
            },
        }))
    }
}

/// Opens the store in `dir` for writing, creating it if missing, and the fingerprinter that
/// matches it. An existing store keeps its `k`; `k` given and different is an error.
pub fn open_for_writing(
    args: &StoreArgs,
    profile: &StoreProfileArgs,
    distance: DistanceArg,
    pre_tokenized: bool,
) -> anyhow::Result<(Store, Fingerprinter)> {
    let opts = args.options()?;
    if Store::exists(&args.store) {
        let store = Store::open(&args.store, &opts)?;
        let fp = profile.fingerprinter(Some(&store.config().profile))?;
        let k = distance.k.unwrap_or(store.config().k);
        let config = StoreConfig::new(&fp, pre_tokenized, k);
        store.ensure_config(&config)?;
        Ok((store, fp))
    } else {
        let fp = profile.fingerprinter(None)?;
        let k = distance.resolve(Searched::NewBlocks)?;
        let config = StoreConfig::new(&fp, pre_tokenized, k);
        let store = Store::create_or_open(&args.store, &config, &opts)?;
        Ok((store, fp))
    }
}

/// Checks that `fp` makes fingerprints comparable with the store's.
pub fn ensure_comparable(
    store: &Store,
    fp: &Fingerprinter,
    pre_tokenized: bool,
) -> anyhow::Result<()> {
    let version = if pre_tokenized {
        fp.version_pretokenized()
    } else {
        fp.version()
    };
    store.ensure_fingerprints(fp.config().profile.name(), version)?;
    Ok(())
}

/// `path` for messages.
pub fn shown(path: &Path) -> String {
    path.display().to_string()
}

//! What a store is built for, and its settings table: creating, opening and reading them.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, DatabaseError, ReadableTable};
use serde::Serialize;

use super::error::{DbContext, StoreError, StoreResult};
use super::tables::{Keys, BANDS, BLOCKS, DOCS, IDS, META, NEXT_DOC};
use neardup_core::method::Method;
use neardup_core::minhash::MinHashParams;
use neardup_core::simhash::BlockLayout;
use neardup_core::text::Boilerplate;
use neardup_core::Fingerprinter;

/// Name of the database file inside a store's directory.
pub const FILE_NAME: &str = "neardup.redb";

/// Version of the on-disk layout described in the module docs.
pub const FORMAT: &str = "4";

/// The layout before documents were numbered (ids in every key table); `neardup migrate`
/// rewrites it as [`FORMAT`].
pub const FORMAT_1: &str = "1";

/// The layout before MinHash signatures carried their distinct shingle count; `neardup
/// migrate` rewrites it as [`FORMAT`] (the counts of its documents stay unknown: they can be
/// near-duplicates, not contained, until indexed again).
pub const FORMAT_2: &str = "2";

/// The layout before MinHash stores filed each document under its minima (the containment
/// candidate step); `neardup migrate` rewrites it as [`FORMAT`].
pub const FORMAT_3: &str = "3";

/// What a store is built for. Fixed when the store is created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreConfig {
    pub method: Method,
    /// SimHash profile name (`default`, `seed000`, …); `minhash` for MinHash stores.
    pub profile: String,
    /// Sketch version (see [`Fingerprinter::version_of`]).
    pub version: String,
    /// SimHash: the distance the block tables guarantee to find with `k + 1` blocks (at
    /// most [`neardup_core::simhash::MAX_K`]). Queries may ask for a larger distance; they stay
    /// exact but probe more. MinHash stores record 0.
    pub k: u32,
    /// MinHash: the signature and band parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashParams>,
    /// Whether texts were folded from Traditional into Simplified ([`neardup_core::text::fold`](mod@neardup_core::text::fold)),
    /// so that the store's own setting is used when it is opened again. Stores made before
    /// folding existed record none (`false`); pre-tokenized stores never fold.
    pub fold: bool,
    /// The learned boilerplate its texts were stripped of ([`neardup_core::text::boilerplate`]),
    /// recorded whole (without the lines' texts) so that the store uses it when opened again.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "boilerplate_id"
    )]
    pub boilerplate: Option<Arc<Boilerplate>>,
}

fn boilerplate_id<S: serde::Serializer>(
    b: &Option<Arc<Boilerplate>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(b.as_deref().map_or("", Boilerplate::id))
}

impl StoreConfig {
    /// The configuration for SimHash fingerprints made by `fp`, from text or (with
    /// `pre_tokenized`) from words segmented elsewhere, which carry another version.
    pub fn new(fp: &Fingerprinter, pre_tokenized: bool, k: u32) -> StoreConfig {
        StoreConfig::for_method(fp, Method::SimHash, pre_tokenized, k)
    }

    /// The configuration for `method`'s sketches made by `fp`; `k` only matters for SimHash.
    pub fn for_method(
        fp: &Fingerprinter,
        method: Method,
        pre_tokenized: bool,
        k: u32,
    ) -> StoreConfig {
        let version = fp.version_of(method, pre_tokenized).to_owned();
        let fold = !pre_tokenized && fp.folds();
        let boilerplate = fp.boilerplate().filter(|_| !pre_tokenized).cloned();
        match method {
            Method::SimHash => StoreConfig {
                method,
                profile: fp.config().profile.name().to_owned(),
                version,
                k,
                minhash: None,
                fold,
                boilerplate,
            },
            Method::MinHash => StoreConfig {
                method,
                profile: MINHASH_PROFILE.to_owned(),
                version,
                k: 0,
                minhash: Some(fp.config().minhash),
                fold,
                boilerplate,
            },
        }
    }
}

impl StoreConfig {
    /// How a store built for this files its sketches.
    pub(super) fn keys(&self, path: &Path) -> StoreResult<Keys> {
        Ok(match self.method {
            Method::SimHash => Keys::Blocks(BlockLayout::for_distance(self.k)?),
            Method::MinHash => {
                let p = self.minhash.ok_or_else(|| StoreError::NotAStore {
                    path: path.to_owned(),
                    reason: "a MinHash store without its parameters".into(),
                })?;
                p.validate().map_err(|reason| StoreError::NotAStore {
                    path: path.to_owned(),
                    reason: format!("bad MinHash parameters: {reason}"),
                })?;
                Keys::Bands(p)
            }
        })
    }
}

/// The `profile` recorded by MinHash stores (SimHash profiles do not apply to them).
pub const MINHASH_PROFILE: &str = "minhash";

/// How to open a store.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// When another process has the store open, retry for this long before failing with
    /// [`StoreError::InUse`]. Zero (the default) fails at once.
    pub wait: Duration,
}

pub(super) fn open_db(dir: &Path, create: bool, wait: Duration) -> StoreResult<Database> {
    open_db_file(dir, &dir.join(FILE_NAME), create, wait)
}

/// [`open_db`] of a database file other than the store's own (`dir` names the store in
/// errors).
pub(super) fn open_db_file(
    dir: &Path,
    file: &Path,
    create: bool,
    wait: Duration,
) -> StoreResult<Database> {
    let file = file.to_owned();
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(10);
    loop {
        let mut builder = Database::builder();
        builder.create_with_file_format_v3(true);
        let result = if create {
            builder.create(&file)
        } else {
            builder.open(&file)
        };
        match result {
            Ok(db) => return Ok(db),
            Err(DatabaseError::DatabaseAlreadyOpen) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(StoreError::InUse {
                        path: dir.to_owned(),
                    });
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(DatabaseError::Storage(redb::StorageError::Io(source)))
                if source.kind() != std::io::ErrorKind::InvalidData =>
            {
                return Err(StoreError::Io { path: file, source })
            }
            Err(e) => {
                return Err(StoreError::NotAStore {
                    path: file,
                    reason: format!("{e} (if it is a damaged store, delete it and index again)"),
                })
            }
        }
    }
}

/// Reads the settings; `None` for a database without them.
pub(super) fn read_meta(db: &Database, path: &Path) -> StoreResult<Option<StoreConfig>> {
    let txn = db.begin_read().at(path)?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e).at(path),
    };
    meta_from(&meta, path)
}

fn meta_from(
    meta: &impl ReadableTable<&'static str, &'static str>,
    path: &Path,
) -> StoreResult<Option<StoreConfig>> {
    let Some((format, config)) = settings_of_any_format(meta, path)? else {
        return Ok(None);
    };
    if format == FORMAT_1 || format == FORMAT_2 || format == FORMAT_3 {
        return Err(StoreError::NeedsMigration {
            path: path.to_owned(),
            found: format,
        });
    }
    if format != FORMAT {
        return Err(StoreError::Format {
            path: path.to_owned(),
            found: format,
            supported: FORMAT,
        });
    }
    Ok(Some(config))
}

/// The format and settings, whatever the format (formats 1 and 2 record the same settings).
pub(super) fn settings_of_any_format(
    meta: &impl ReadableTable<&'static str, &'static str>,
    path: &Path,
) -> StoreResult<Option<(String, StoreConfig)>> {
    let get = |key: &str| -> StoreResult<Option<String>> {
        Ok(meta.get(key).at(path)?.map(|g| g.value().to_owned()))
    };
    let Some(format) = get("format")? else {
        return Ok(None);
    };
    let missing = |key: &str| StoreError::NotAStore {
        path: path.to_owned(),
        reason: format!("its settings lack `{key}`"),
    };
    let k_text = get("k")?.ok_or_else(|| missing("k"))?;
    // Stores made before MinHash have no `method`: they are SimHash stores.
    let method = match get("method")? {
        None => Method::SimHash,
        Some(m) => m.parse().map_err(|_| StoreError::NotAStore {
            path: path.to_owned(),
            reason: format!("its method `{m}` is not one this neardup knows"),
        })?,
    };
    let minhash = match get("minhash")? {
        None => None,
        Some(text) => Some(
            serde_json::from_str(&text).map_err(|e| StoreError::NotAStore {
                path: path.to_owned(),
                reason: format!("its MinHash parameters `{text}` do not parse: {e}"),
            })?,
        ),
    };
    Ok(Some((
        format,
        StoreConfig {
            method,
            profile: get("profile")?.ok_or_else(|| missing("profile"))?,
            version: get("version")?.ok_or_else(|| missing("version"))?,
            k: k_text.parse().map_err(|_| StoreError::NotAStore {
                path: path.to_owned(),
                reason: format!("its k `{k_text}` is not a number"),
            })?,
            minhash,
            // Stores made before folding existed have no `fold`: they never folded.
            fold: get("fold")?.is_some_and(|f| f == "true"),
            boilerplate: match get("boilerplate")? {
                None => None,
                Some(text) => Some(Arc::new(serde_json::from_str(&text).map_err(|e| {
                    StoreError::NotAStore {
                        path: path.to_owned(),
                        reason: format!("its boilerplate does not parse: {e}"),
                    }
                })?)),
            },
        },
    )))
}

/// Writes the settings and creates the tables if the database has none yet; returns the
/// settings it has.
pub(super) fn init_meta(
    db: &Database,
    path: &Path,
    config: &StoreConfig,
) -> StoreResult<StoreConfig> {
    if let Some(stored) = read_meta(db, path)? {
        return Ok(stored);
    }
    let mut txn = db.begin_write().at(path)?;
    txn.set_quick_repair(true);
    let stored = {
        let mut meta = txn.open_table(META).at(path)?;
        // Another handle may have initialised it between the read and this write.
        if let Some(stored) = meta_from(&meta, path)? {
            stored
        } else {
            write_settings(&mut meta, config, FORMAT, path)?;
            meta.insert(NEXT_DOC, "0").at(path)?;
            txn.open_table(DOCS).at(path)?;
            txn.open_table(IDS).at(path)?;
            match config.method {
                Method::SimHash => drop(txn.open_table(BLOCKS).at(path)?),
                Method::MinHash => drop(txn.open_table(BANDS).at(path)?),
            }
            config.clone()
        }
    };
    txn.commit().at(path)?;
    Ok(stored)
}

/// Writes the settings of `config` as a store of `format`.
pub(super) fn write_settings(
    meta: &mut redb::Table<'_, &'static str, &'static str>,
    config: &StoreConfig,
    format: &str,
    path: &Path,
) -> StoreResult<()> {
    let k = config.k.to_string();
    let minhash = config
        .minhash
        .map(|p| serde_json::to_string(&p).expect("parameters serialise"));
    for (key, value) in [
        ("format", format),
        ("method", config.method.name()),
        ("profile", config.profile.as_str()),
        ("version", config.version.as_str()),
        ("k", k.as_str()),
        ("created_by", concat!("neardup ", env!("CARGO_PKG_VERSION"))),
    ] {
        meta.insert(key, value).at(path)?;
    }
    if let Some(m) = &minhash {
        meta.insert("minhash", m.as_str()).at(path)?;
    }
    if config.fold {
        meta.insert("fold", "true").at(path)?;
    }
    if let Some(b) = &config.boilerplate {
        let json = serde_json::to_string(&b.without_texts()).expect("boilerplate serialises");
        meta.insert("boilerplate", json.as_str()).at(path)?;
    }
    Ok(())
}

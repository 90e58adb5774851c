//! `neardup-bench store-layout`: what layouts of a MinHash store's key tables would cost on
//! disk, measured on a corpus (issue 45, item 4), not built into `crates/store`.
//!
//! Every layout holds the store's `docs` (number → 512-byte signature, distinct count, id) and
//! `ids` ((hash of the id, number) → `()`) as they are, and some of:
//! - `bands`: today's band table, (band u8, 32-bit key prefix, number) → `()`, 9 bytes;
//! - `minima`: format 4's minima table, (position u16, minimum u32, number) → `()` for all
//!   128 positions, 10 bytes;
//! - `mPxB`: the first `P` minima on their lowest `B` bits packed with the position into one
//!   u32, (packed, number) → `()`, 8 bytes (Elasticsearch's fields format 4 keys 64 × 18).
//!
//! A layout is written the way `Store::compact` writes a store (`crates/store/src/compact.rs`):
//! one write transaction into a fresh redb file (v3 file format, quick repair), each table in
//! key order in two passes so that its pages end up nearly full, then redb's compaction, which
//! moves the pages to the front and shortens the file when at least half of it is free at its
//! end. It reports the file, redb's pages in use, and each table's pages, per document.

use std::path::{Path, PathBuf};

use anyhow::Context;
use neardup::input::{self, Body, InputSpec};
use neardup::Signature;
use rayon::prelude::*;
use redb::{
    Database, Key, ReadableTableMetadata, TableDefinition, TableHandle, Value, WriteTransaction,
};

use neardup::cli::common::{CmdResult, ProfileArgs, Status};

#[derive(clap::Args, Debug)]
pub struct StoreLayoutBench {
    /// Corpus of JSON Lines articles (`.gz` is fine), e.g. ../shared/data/zh_articles.jsonl.gz.
    #[arg(long, short)]
    input: String,
    /// Directory for the databases (one file per layout, replaced).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Layouts: key tables joined by `+` (`bands`, `minima`, `mPxB`); `format3` and `format4`
    /// name today's.
    #[arg(long, value_delimiter = ',', default_values = ["format3", "format4", "bands+m64x18", "m64x18", "m48x18"])]
    layouts: Vec<String>,
    #[command(flatten)]
    profile: ProfileArgs,
}

/// One key table of a layout.
#[derive(Clone, Copy, Debug, PartialEq)]
enum KeyTable {
    Bands,
    Minima,
    Packed { positions: usize, bits: u32 },
}

fn parse_layout(s: &str) -> anyhow::Result<Vec<KeyTable>> {
    let s = match s {
        "format3" => "bands",
        "format4" => "bands+minima",
        other => other,
    };
    s.split('+')
        .map(|t| match t {
            "bands" => Ok(KeyTable::Bands),
            "minima" => Ok(KeyTable::Minima),
            p => {
                let (positions, bits) = p
                    .strip_prefix('m')
                    .and_then(|r| r.split_once('x'))
                    .with_context(|| format!("unknown key table `{p}`"))?;
                let positions: usize = positions.parse()?;
                let bits: u32 = bits.parse()?;
                let position_bits = usize::BITS - positions.saturating_sub(1).leading_zeros();
                anyhow::ensure!(
                    (1..=128).contains(&positions) && bits >= 1 && position_bits + bits <= 32,
                    "`{p}`: the position and the minimum's bits must fit in 32 bits"
                );
                Ok(KeyTable::Packed { positions, bits })
            }
        })
        .collect()
}

const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
const DOCS: TableDefinition<u32, &[u8]> = TableDefinition::new("docs");
const IDS: TableDefinition<(u64, u32), ()> = TableDefinition::new("ids");
const BANDS: TableDefinition<(u8, u32, u32), ()> = TableDefinition::new("bands");
const MINIMA: TableDefinition<(u16, u32, u32), ()> = TableDefinition::new("minima");
const PACKED: TableDefinition<(u32, u32), ()> = TableDefinition::new("packed");

/// redb's page size, and the header of a leaf page (as in the store's compaction).
const PAGE: usize = 4096;
const LEAF_HEADER: usize = 4;

/// The store's two-pass share (`compact.rs`, `FirstPass::for_entry`): entries `i` with
/// `(i + 1)·num/den > i·num/den` go first.
fn first_pass(entry_bytes: usize) -> (u64, u64) {
    let c = ((PAGE - LEAF_HEADER) / entry_bytes.max(1)).max(1) as u64;
    let l = (c + 2) / 2;
    ((l + c / 64).min(c), c)
}

/// Inserts sorted `entries` into `def` in the store's two passes.
fn insert_dense<'x, K: Key + 'static, V: Value + 'static>(
    txn: &WriteTransaction,
    def: TableDefinition<K, V>,
    entries: &'x [(K::SelfType<'x>, V::SelfType<'x>)],
    entry_bytes: usize,
) -> anyhow::Result<()> {
    let mut t = txn.open_table(def)?;
    let (num, den) = first_pass(entry_bytes);
    for pass in [true, false] {
        for (i, (k, v)) in entries.iter().enumerate() {
            let i = i as u64;
            if ((i + 1) * num / den > i * num / den) == pass {
                t.insert(k, v)?;
            }
        }
    }
    Ok(())
}

/// FNV-1a of an id: stands for the store's xxh3 (only the key's width matters here).
fn id_hash(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Sizes {
    file: u64,
    allocated_pages: u64,
    /// Per table: (name, leaf pages, branch pages, stored bytes).
    tables: Vec<(String, u64, u64, u64)>,
}

fn write_layout(
    path: &Path,
    layout: &[KeyTable],
    docs: &[(String, Signature)],
    params: &neardup::MinHashParams,
) -> anyhow::Result<Sizes> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let mut db = Database::builder()
        .create_with_file_format_v3(true)
        .create(path)?;
    {
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(true);
        let meta: Vec<(&str, &str)> = vec![
            ("format", "layout"),
            ("method", "minhash"),
            ("minhash", "{}"),
            ("next_doc", "0"),
        ];
        insert_dense(&txn, META, &meta, 32)?;
        let values: Vec<Vec<u8>> = docs
            .iter()
            .map(|(id, s)| {
                let mut v = s.to_le_bytes();
                v.extend_from_slice(&s.distinct().unwrap_or(0).to_le_bytes());
                v.extend_from_slice(id.as_bytes());
                v
            })
            .collect();
        let rows: Vec<(u32, &[u8])> = values
            .iter()
            .enumerate()
            .map(|(d, v)| (d as u32, v.as_slice()))
            .collect();
        let mean = values.iter().map(Vec::len).sum::<usize>() / values.len().max(1);
        insert_dense(&txn, DOCS, &rows, 4 + mean + 4)?;
        let mut ids: Vec<((u64, u32), ())> = docs
            .iter()
            .enumerate()
            .map(|(d, (id, _))| ((id_hash(id), d as u32), ()))
            .collect();
        ids.sort_unstable_by_key(|e| e.0);
        insert_dense(&txn, IDS, &ids, 12)?;
        for table in layout {
            match *table {
                KeyTable::Bands => {
                    let mut e: Vec<((u8, u32, u32), ())> = docs
                        .par_iter()
                        .enumerate()
                        .flat_map_iter(|(d, (_, s))| {
                            s.band_keys(params)
                                .into_iter()
                                .enumerate()
                                .map(move |(b, k)| ((b as u8, (k >> 32) as u32, d as u32), ()))
                        })
                        .collect();
                    e.par_sort_unstable_by_key(|e| e.0);
                    insert_dense(&txn, BANDS, &e, 9)?;
                }
                KeyTable::Minima => {
                    let mut e: Vec<((u16, u32, u32), ())> = docs
                        .par_iter()
                        .enumerate()
                        .flat_map_iter(|(d, (_, s))| {
                            s.values()
                                .iter()
                                .enumerate()
                                .map(move |(i, &v)| ((i as u16, v, d as u32), ()))
                        })
                        .collect();
                    e.par_sort_unstable_by_key(|e| e.0);
                    insert_dense(&txn, MINIMA, &e, 10)?;
                }
                KeyTable::Packed { positions, bits } => {
                    let mask = (1u32 << bits) - 1;
                    let mut e: Vec<((u32, u32), ())> = docs
                        .par_iter()
                        .enumerate()
                        .flat_map_iter(|(d, (_, s))| {
                            s.values()
                                .iter()
                                .take(positions)
                                .enumerate()
                                .map(move |(i, &v)| {
                                    (((i as u32) << bits | (v & mask), d as u32), ())
                                })
                        })
                        .collect();
                    e.par_sort_unstable_by_key(|e| e.0);
                    insert_dense(&txn, PACKED, &e, 8)?;
                }
            }
        }
        txn.commit()?;
    }
    db.compact()?;
    let txn = db.begin_write()?;
    let stats = txn.stats()?;
    let mut tables = Vec::new();
    for handle in txn.list_tables()? {
        let name = handle.name().to_owned();
        let s = match name.as_str() {
            "meta" => txn.open_table(META)?.stats()?,
            "docs" => txn.open_table(DOCS)?.stats()?,
            "ids" => txn.open_table(IDS)?.stats()?,
            "bands" => txn.open_table(BANDS)?.stats()?,
            "minima" => txn.open_table(MINIMA)?.stats()?,
            "packed" => txn.open_table(PACKED)?.stats()?,
            _ => continue,
        };
        tables.push((name, s.leaf_pages(), s.branch_pages(), s.stored_bytes()));
    }
    txn.abort()?;
    drop(db);
    Ok(Sizes {
        file: std::fs::metadata(path)?.len(),
        allocated_pages: stats.allocated_pages(),
        tables,
    })
}

pub fn run(args: StoreLayoutBench) -> CmdResult {
    let layouts: Vec<(String, Vec<KeyTable>)> = args
        .layouts
        .iter()
        .map(|l| parse_layout(l).map(|t| (l.clone(), t)))
        .collect::<anyhow::Result<_>>()?;
    let fp = args.profile.fingerprinter()?;
    let params = *fp.minhasher().params();
    let file = input::open(&args.input)?;
    let read: Vec<_> = input::read_all(file.reader, &args.input, &InputSpec::default())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let docs: Vec<(String, Signature)> = read
        .par_iter()
        .filter_map(|d| {
            let fields = match &d.body {
                Body::Fields(f) => f.clone(),
                Body::Tokens(t) => vec![t.join(" ")],
            };
            let sig = fp.minhash_fields(&fields).ok()?.signature;
            Some((d.id.key(), sig))
        })
        .collect();
    anyhow::ensure!(!docs.is_empty(), "no signature in {}", args.input);
    std::fs::create_dir_all(&args.dir)?;
    let n = docs.len() as f64;
    println!(
        "{} documents with a signature (params {params}); bytes per document, {}-byte pages",
        docs.len(),
        PAGE
    );
    println!("| layout | file | pages in use | per table: leaf + branch pages |");
    println!("|---|---|---|---|");
    for (name, layout) in &layouts {
        let path = args.dir.join(format!("{name}.redb"));
        let s = write_layout(&path, layout, &docs, &params)?;
        let tables: Vec<String> = s
            .tables
            .iter()
            .map(|(t, leaf, branch, _)| {
                format!("{t} {:.0}", ((leaf + branch) * PAGE as u64) as f64 / n)
            })
            .collect();
        println!(
            "| {name} | {} B, {:.0} | {} B, {:.0} | {} |",
            s.file,
            s.file as f64 / n,
            s.allocated_pages * PAGE as u64,
            (s.allocated_pages * PAGE as u64) as f64 / n,
            tables.join(", ")
        );
    }
    Ok(Status::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_layout("format3").unwrap(), vec![KeyTable::Bands]);
        assert_eq!(
            parse_layout("format4").unwrap(),
            vec![KeyTable::Bands, KeyTable::Minima]
        );
        assert_eq!(
            parse_layout("bands+m64x18").unwrap(),
            vec![
                KeyTable::Bands,
                KeyTable::Packed {
                    positions: 64,
                    bits: 18
                }
            ]
        );
        // 64 positions take 6 bits: 26 more fit in a u32, 27 do not.
        assert!(parse_layout("m64x26").is_ok());
        assert!(parse_layout("m64x27").is_err());
        assert!(parse_layout("m0x8").is_err());
        assert!(parse_layout("blocks").is_err());
    }

    /// The same shares as the store's compaction (`compact.rs`'s own test).
    #[test]
    fn first_pass_matches_the_stores() {
        assert_eq!(first_pass(543), (4, 7));
        let (num, den) = first_pass(9);
        let share = num as f64 / den as f64;
        assert!(share > 0.5 && share < 0.52, "{share}");
        assert_eq!(first_pass(10_000), (1, 1));
    }
}

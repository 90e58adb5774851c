//! The regroup's join: every article's candidates found by joining the terms the index
//! stores, on this machine, instead of one search per article.
//!
//! A search collects the documents that hold one of the query's band terms, or enough of its
//! minima terms ([`crate::similar::CandidateTerms`]). The join asks the same of the same terms,
//! read once by the walk:
//!
//! 1. **Walk.** Each article with a sketch is written to the *terms file*, in walk order: its
//!    number in the work file, its sketch, its query's terms and the terms it holds (64-bit
//!    keys of field and value, [`crate::similar::term_key`]).
//! 2. **Postings.** The held terms are counted into buckets (the key's low bits) and scattered
//!    into the *postings file*: for each bucket, the articles holding a term of it, each with
//!    the key's high 32 bits to tell the bucket's terms apart. Beside it, the *offsets file*
//!    says where each article's record starts in the terms file.
//! 3. **Join.** For each article, in walk order: the articles holding one of its `any` terms,
//!    or `agreeing` of its `agree` terms, are its candidates; each is judged against it by the
//!    rule every search applies ([`crate::similar::judged_match`]) on the sketches in the terms
//!    file.
//!
//! The three files live in a directory beside the work file (`<state>.join`) and are read in
//! place (memory-mapped): what the process holds is one bucket table (at most 2^24 entries of
//! 8 bytes, 128 MiB, whatever the index size), a tally of one byte per article for each
//! thread, and one page of articles; the operating system's page cache holds what it can of
//! the files. On disk they take about 12 bytes a
//! term and the sketch: about 2 KB an article of 106 terms (bands and minima).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};

use super::RegroupError;
use crate::similar::CandidateTerms;
use neardup_core::{Signature, SimHash, Sketch};

/// The largest bucket table: 2^24 buckets of 8 bytes.
const MAX_BUCKET_BITS: u32 = 24;
/// Postings written per pass of the build, in entries (8 bytes each: 1 GiB).
const WINDOW: u64 = 1 << 27;
/// Held terms per bucket the table is sized for (below [`MAX_BUCKET_BITS`]).
const TERMS_PER_BUCKET: u64 = 16;

/// One article's record in the terms file: its number, its sketch, its query's terms, the
/// terms it holds (the query's, unless said).
#[derive(Debug, PartialEq)]
pub(super) struct Record<'a> {
    pub(super) num: u64,
    pub(super) sketch: Sketch,
    pub(super) any: Keys<'a>,
    pub(super) agree: Keys<'a>,
    pub(super) agreeing: usize,
    held: Option<Keys<'a>>,
}

impl Record<'_> {
    /// The keys of the terms it holds.
    fn held(&self) -> impl Iterator<Item = u64> + '_ {
        let (a, b) = match &self.held {
            Some(h) => (h.iter(), Keys::EMPTY.iter()),
            None => (self.any.iter(), self.agree.iter()),
        };
        a.chain(b)
    }

    /// The keys of the terms it holds that are walked to find who holds them: all but the
    /// common minima terms.
    fn posted<'s>(&'s self, common: &'s HashSet<u64>) -> impl Iterator<Item = u64> + 's {
        self.held().filter(|k| !common.contains(k))
    }
}

/// Term keys as the terms file holds them (little-endian `u64`s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Keys<'a>(&'a [u8]);

impl Keys<'_> {
    const EMPTY: Keys<'static> = Keys(&[]);

    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
    }
}

/// Where a join keeps its files: `<state>.join`.
pub(super) fn dir_of(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".join");
    PathBuf::from(name)
}

/// The bytes of the files in `dir` (0 where it cannot be read).
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> RegroupError + '_ {
    move |e| RegroupError::State {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

/// The terms file being written by a walk.
pub(super) struct TermsWriter {
    path: PathBuf,
    out: BufWriter<File>,
    buf: Vec<u8>,
}

impl TermsWriter {
    /// Starts the terms file in `dir` afresh (a walk that starts over starts it over).
    pub(super) fn create(dir: &Path) -> Result<TermsWriter, RegroupError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join("terms");
        let file = File::create(&path).map_err(io_err(&path))?;
        Ok(TermsWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            path,
            buf: Vec::new(),
        })
    }

    /// Appends article `num`: its sketch and its candidate query's terms.
    pub(super) fn push(
        &mut self,
        num: u64,
        sketch: &Sketch,
        terms: &CandidateTerms,
    ) -> Result<(), RegroupError> {
        if num > u64::from(u32::MAX) {
            return Err(RegroupError::State {
                path: self.path.clone(),
                detail: "a join numbers at most 4,294,967,296 articles".into(),
            });
        }
        let b = &mut self.buf;
        b.clear();
        b.extend_from_slice(&num.to_le_bytes());
        for n in [
            terms.any.len(),
            terms.agree.len(),
            terms.agreeing,
            terms.held.as_ref().map_or(u32::MAX as usize, Vec::len),
        ] {
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
        let at = b.len();
        b.extend_from_slice(&[0; 4]);
        encode_sketch(sketch, b);
        let len = (b.len() - at - 4) as u32;
        b[at..at + 4].copy_from_slice(&len.to_le_bytes());
        for k in terms
            .any
            .iter()
            .chain(&terms.agree)
            .chain(terms.held.iter().flatten())
        {
            b.extend_from_slice(&k.to_le_bytes());
        }
        self.out.write_all(b).map_err(io_err(&self.path))
    }

    /// Writes what is buffered (the end of a walk).
    pub(super) fn finish(mut self) -> Result<(), RegroupError> {
        self.out.flush().map_err(io_err(&self.path))?;
        self.out.get_ref().sync_data().map_err(io_err(&self.path))
    }
}

/// A sketch in a record: tag 1 and a SimHash's 8 bytes; tag 2, the bits kept, the distinct
/// shingles (flag and value), the number of minima and each in the fewest bytes its bits take.
fn encode_sketch(sketch: &Sketch, b: &mut Vec<u8>) {
    match sketch {
        Sketch::SimHash(fp) => {
            b.push(1);
            b.extend_from_slice(&fp.0.to_le_bytes());
        }
        Sketch::MinHash(sig) => {
            b.push(2);
            b.push(sig.bits());
            b.push(u8::from(sig.distinct().is_some()));
            b.extend_from_slice(&sig.distinct().unwrap_or(0).to_le_bytes());
            b.extend_from_slice(&(sig.len() as u32).to_le_bytes());
            let width = value_width(sig.bits());
            for v in sig.values() {
                b.extend_from_slice(&v.to_le_bytes()[..width]);
            }
        }
    }
}

fn value_width(bits: u8) -> usize {
    usize::from(bits).div_ceil(8)
}

fn decode_sketch(b: &[u8]) -> Option<Sketch> {
    match *b.first()? {
        1 => Some(Sketch::SimHash(SimHash(u64::from_le_bytes(
            b.get(1..9)?.try_into().ok()?,
        )))),
        2 => {
            let bits = *b.get(1)?;
            let distinct = u32::from_le_bytes(b.get(3..7)?.try_into().ok()?);
            let n = u32::from_le_bytes(b.get(7..11)?.try_into().ok()?) as usize;
            let width = value_width(bits);
            let values: Vec<u32> = b
                .get(11..11 + n * width)?
                .chunks_exact(width)
                .map(|c| {
                    let mut v = [0u8; 4];
                    v[..width].copy_from_slice(c);
                    u32::from_le_bytes(v)
                })
                .collect();
            let sig = if bits >= Signature::FULL_BITS {
                Signature::from_values(values)
            } else {
                Signature::from_reduced_values(values, bits)
            };
            Some(Sketch::MinHash(if b[2] == 1 {
                sig.with_distinct(distinct)
            } else {
                sig
            }))
        }
        _ => None,
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The record at `at` of the terms file `b`, and where the next one starts.
fn record_at(b: &[u8], at: usize) -> Option<(Record<'_>, usize)> {
    let num = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
    let n_any = u32_at(b, at + 8)? as usize;
    let n_agree = u32_at(b, at + 12)? as usize;
    let agreeing = u32_at(b, at + 16)? as usize;
    let n_held = u32_at(b, at + 20)?;
    let sketch_len = u32_at(b, at + 24)? as usize;
    let mut p = at + 28;
    let sketch = decode_sketch(b.get(p..p + sketch_len)?)?;
    p += sketch_len;
    let mut keys = |n: usize| {
        let k = Keys(b.get(p..p + 8 * n)?);
        p += 8 * n;
        Some(k)
    };
    let any = keys(n_any)?;
    let agree = keys(n_agree)?;
    let held = match n_held {
        u32::MAX => None,
        n => Some(keys(n as usize)?),
    };
    Some((
        Record {
            num,
            sketch,
            any,
            agree,
            agreeing,
            held,
        },
        p,
    ))
}

/// The join's files, read in place: the terms file, where each article's record starts, and
/// the postings of the terms held.
pub(super) struct Join {
    path: PathBuf,
    terms: Mmap,
    /// Article number → 1 + where its record starts (0: no record).
    offsets: MmapMut,
    postings: MmapMut,
    /// Bucket → where its postings end (after the build: start at `b`, end at `b + 1`).
    buckets: Vec<u64>,
    mask: u64,
    /// One more than the highest article number.
    articles: u64,
    /// The keys of the common minima terms ([`crate::schema::CommonMinima`]): neither posted
    /// nor counted.
    common: HashSet<u64>,
}

/// Agreements counted for one article at a time ([`Join::tally`]).
pub(super) struct Tally {
    counts: Vec<u8>,
    touched: Vec<u64>,
}

impl Join {
    /// Builds the postings and offsets from the terms file a finished walk left in `dir`;
    /// `articles` is one more than the highest article number, `common` the keys of the
    /// common minima terms ([`crate::similar::common_keys`]).
    pub(super) fn build(
        dir: &Path,
        articles: u64,
        common: HashSet<u64>,
    ) -> Result<Join, RegroupError> {
        Join::build_in_windows(dir, articles, common, WINDOW)
    }

    /// [`Join::build`], scattering at most `window` postings a pass.
    fn build_in_windows(
        dir: &Path,
        articles: u64,
        common: HashSet<u64>,
        window: u64,
    ) -> Result<Join, RegroupError> {
        let path = dir.join("terms");
        let file = File::open(&path).map_err(io_err(&path))?;
        // SAFETY: the files of a join live in its own directory, beside a work file that one
        // regroup at a time holds open (redb's lock), and nothing else writes them while they
        // are mapped.
        let terms = unsafe { Mmap::map(&file) }.map_err(io_err(&path))?;
        let bad = || RegroupError::State {
            path: path.clone(),
            detail: "the join's terms file is cut short: run the regroup again with --restart"
                .into(),
        };
        // Count the terms held, to size the table.
        let mut held = 0u64;
        let mut at = 0;
        while at < terms.len() {
            let (r, next) = record_at(&terms, at).ok_or_else(bad)?;
            held += r.posted(&common).count() as u64;
            at = next;
        }
        let bits = (held / TERMS_PER_BUCKET)
            .max(1)
            .next_power_of_two()
            .trailing_zeros()
            .clamp(10, MAX_BUCKET_BITS);
        let mask = (1u64 << bits) - 1;
        let mut buckets = vec![0u64; (1usize << bits) + 1];
        let map_mut = |name: &str, len: u64| -> Result<MmapMut, RegroupError> {
            let p = dir.join(name);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&p)
                .map_err(io_err(&p))?;
            f.set_len(len.max(8)).map_err(io_err(&p))?;
            // SAFETY: as for the terms file.
            unsafe { MmapMut::map_mut(&f) }.map_err(io_err(&p))
        };
        let mut offsets = map_mut("offsets", articles * 8)?;
        let mut postings = map_mut("postings", held * 8)?;
        let mut at = 0;
        while at < terms.len() {
            let (r, next) = record_at(&terms, at).ok_or_else(bad)?;
            let o = (r.num * 8) as usize;
            offsets
                .get_mut(o..o + 8)
                .ok_or_else(bad)?
                .copy_from_slice(&(at as u64 + 1).to_le_bytes());
            for k in r.posted(&common) {
                buckets[(k & mask) as usize] += 1;
            }
            at = next;
        }
        let mut end = 0;
        for b in &mut buckets[..1 << bits] {
            end += *b;
            *b = end;
        }
        buckets[1 << bits] = end;
        // Scattered a window of buckets at a time, each pass reading the terms file again:
        // writes all over a postings file larger than the page cache can keep would send
        // each page to disk and back many times.
        let (mut lo, mut base) = (0, 0);
        while lo < 1 << bits {
            // Buckets from `lo` on still hold where they end.
            let hi = lo
                + buckets[lo..1 << bits]
                    .partition_point(|&e| e - base <= window)
                    .max(1);
            let top = buckets[hi - 1];
            let mut at = 0;
            while at < terms.len() {
                let (r, next) = record_at(&terms, at).ok_or_else(bad)?;
                for k in r.posted(&common) {
                    let i = (k & mask) as usize;
                    if !(lo..hi).contains(&i) {
                        continue;
                    }
                    let b = &mut buckets[i];
                    *b -= 1;
                    let entry = (r.num << 32) | (k >> 32);
                    let p = (*b * 8) as usize;
                    postings[p..p + 8].copy_from_slice(&entry.to_le_bytes());
                }
                at = next;
            }
            // Written back, so that the page cache can let the window go.
            postings
                .flush_range((base * 8) as usize, ((top - base) * 8) as usize)
                .map_err(io_err(&dir.join("postings")))?;
            (lo, base) = (hi, top);
        }
        Ok(Join {
            path,
            terms,
            offsets,
            postings,
            buckets,
            mask,
            articles,
            common,
        })
    }

    /// Every record, in walk order.
    pub(super) fn records(&self) -> impl Iterator<Item = Result<Record<'_>, RegroupError>> {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.terms.len() {
                return None;
            }
            Some(match record_at(&self.terms, at) {
                Some((r, next)) => {
                    at = next;
                    Ok(r)
                }
                None => {
                    at = usize::MAX;
                    Err(self.cut_short())
                }
            })
        })
    }

    fn cut_short(&self) -> RegroupError {
        RegroupError::State {
            path: self.path.clone(),
            detail: "the join's terms file is cut short: run the regroup again with --restart"
                .into(),
        }
    }

    /// The postings of `key`'s bucket: article number in the high 32 bits, the key's high
    /// 32 bits in the low ones.
    fn bucket(&self, key: u64) -> &[u8] {
        let b = (key & self.mask) as usize;
        let (from, to) = (self.buckets[b] as usize, self.buckets[b + 1] as usize);
        &self.postings[from * 8..to * 8]
    }

    /// The articles holding the term `key`, by number (with, by chance, those of another term
    /// whose key agrees in the bucket and the high 32 bits).
    fn holders(&self, key: u64) -> impl Iterator<Item = u64> + '_ {
        self.bucket(key)
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .filter(move |e| e & 0xffff_ffff == key >> 32)
            .map(|e| e >> 32)
    }

    /// A tally of agreements for [`Join::candidates`]: one byte per article, each thread its
    /// own.
    pub(super) fn tally(&self) -> Tally {
        Tally {
            counts: vec![0; self.articles as usize],
            touched: Vec::new(),
        }
    }

    /// The candidates of `r` (its number left out), in ascending order: the articles holding
    /// one of its `any` terms, or at least `agreeing` of its `agree` terms that are not
    /// common. A minima term can be held by many articles (a frequent word pair is the least
    /// hash of its bin in many texts): agreements are counted in place, not sorted, and the
    /// common terms, held by the most, are neither walked nor counted. (Leaving the
    /// `agreeing - 1` largest out of the walk, as the pigeonhole allows, and asking them of
    /// each article the others bring was slower: measured at 1M, the mass of held terms is
    /// spread over more than three terms an article.)
    pub(super) fn candidates(&self, r: &Record<'_>, tally: &mut Tally) -> Vec<u64> {
        let mut out: Vec<u64> = r.any.iter().flat_map(|k| self.holders(k)).collect();
        if r.agreeing > 0 {
            let need = u8::try_from(r.agreeing).unwrap_or(u8::MAX);
            let light = r.agree.iter().filter(|k| !self.common.contains(k));
            for n in light.flat_map(|k| self.holders(k)) {
                let Some(c) = tally.counts.get_mut(n as usize) else {
                    continue;
                };
                if *c == 0 {
                    tally.touched.push(n);
                }
                *c = c.saturating_add(1);
                if *c == need {
                    out.push(n);
                }
            }
            for n in tally.touched.drain(..) {
                tally.counts[n as usize] = 0;
            }
        }
        out.sort_unstable();
        out.dedup();
        out.retain(|&n| n != r.num);
        out
    }

    /// The record of article `num`.
    fn record(&self, num: u64) -> Result<Record<'_>, RegroupError> {
        let o = (num * 8) as usize;
        let at = self
            .offsets
            .get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .filter(|&a| a > 0)
            .ok_or_else(|| self.cut_short())?;
        record_at(&self.terms, (at - 1) as usize)
            .map(|(r, _)| r)
            .ok_or_else(|| self.cut_short())
    }

    /// The sketch of article `num`, from its record.
    pub(super) fn sketch(&self, num: u64) -> Result<Sketch, RegroupError> {
        Ok(self.record(num)?.sketch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terms(any: Vec<u64>, agree: Vec<u64>, agreeing: usize) -> CandidateTerms {
        CandidateTerms {
            any,
            agree,
            agreeing,
            held: None,
        }
    }

    fn sig(values: Vec<u32>, bits: u8) -> Sketch {
        Sketch::MinHash(Signature::from_reduced_values(values, bits).with_distinct(77))
    }

    #[test]
    fn a_sketch_reads_back_as_written() {
        for s in [
            Sketch::SimHash(SimHash(0xdead_beef_0123_4567)),
            sig(vec![1, 255, 7], 8),
            sig(vec![1, 1 << 17, 3], 18),
            Sketch::MinHash(Signature::from_values(vec![u32::MAX, 0, 5])),
        ] {
            let mut b = Vec::new();
            encode_sketch(&s, &mut b);
            let back = decode_sketch(&b).unwrap();
            assert_eq!(back, s);
            if let (Sketch::MinHash(a), Sketch::MinHash(b)) = (&back, &s) {
                assert_eq!(a.distinct(), b.distinct());
            }
        }
    }

    proptest! {
        /// The join's candidates are exactly those of the rule read pair by pair: one shared
        /// `any` term, or `agreeing` shared `agree` terms that are not common.
        #[test]
        fn candidates_are_those_of_every_pair(
            docs in proptest::collection::vec(
                (proptest::collection::btree_set(0u64..40, 0..6),
                 proptest::collection::btree_set(0u64..30, 0..8)),
                1..40),
            agreeing in 1usize..4,
            window in prop_oneof![Just(WINDOW), 1u64..6],
            common in proptest::collection::btree_set(0u64..30, 0..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut w = TermsWriter::create(dir.path()).unwrap();
            // Keys spread over the high bits too, as real ones are; `agree` keys apart from
            // `any` keys.
            let key = |k: u64, salt: u64| (k + salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            // Numbers with gaps (articles without a sketch have none).
            for (i, (any, agree)) in docs.iter().enumerate() {
                let t = terms(
                    any.iter().map(|&k| key(k, 0)).collect(),
                    agree.iter().map(|&k| key(k, 1000)).collect(),
                    agreeing,
                );
                w.push(2 * i as u64, &sig(vec![i as u32], 8), &t).unwrap();
            }
            w.finish().unwrap();
            // Windows of a few postings: many passes, and buckets larger than a window.
            let common_keys: HashSet<u64> = common.iter().map(|&k| key(k, 1000)).collect();
            let join =
                Join::build_in_windows(dir.path(), 2 * docs.len() as u64, common_keys, window)
                    .unwrap();
            let records: Vec<Record<'_>> = join.records().collect::<Result<_, _>>().unwrap();
            let mut tally = join.tally();
            prop_assert_eq!(records.len(), docs.len());
            for (i, r) in records.iter().enumerate() {
                prop_assert_eq!(r.num, 2 * i as u64);
                prop_assert_eq!(join.sketch(r.num).unwrap(), sig(vec![i as u32], 8));
                let want: Vec<u64> = docs
                    .iter()
                    .enumerate()
                    .filter(|&(j, (any, agree))| {
                        let light = agree
                            .intersection(&docs[i].1)
                            .filter(|k| !common.contains(k))
                            .count();
                        j != i
                            && (any.intersection(&docs[i].0).next().is_some()
                                || light >= agreeing)
                    })
                    .map(|(j, _)| 2 * j as u64)
                    .collect();
                prop_assert_eq!(join.candidates(r, &mut tally), want);
            }
        }
    }
}

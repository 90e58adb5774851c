//! Alignment: the passages two articles share, as spans of both texts.
//!
//! MinHash finds candidate pairs; alignment says what they share. Each text is reduced to its
//! **letters** ([`Letters`]): the letters and digits of its fields' plain text, normalised as
//! the fingerprints normalise (NFKC, lower case, a Traditional text folded into Simplified),
//! and then every Traditional character folded alone ([`Folder::fold_char`], so a quote in
//! Traditional inside a Simplified text keeps its letters), each
//! remembering the field and the character it came from. Punctuation, whitespace and markup
//! are left out, so a repost that changes them still aligns run for run.
//!
//! The method is passim's (Smith, Cordell & Mullen 2015, which traces reprinted newspaper
//! texts): rare n-grams anchor, then the anchors are joined along both texts.
//! 1. **Anchors**: every [`AlignParams::anchor`]-letter window found in both texts, unless it
//!    repeats more than [`AlignParams::max_repeats`] times in either (formula words, lists).
//! 2. **Runs**: each anchor is extended to the longest common stretch on its diagonal (a
//!    maximal exact match, [`Run`]).
//! 3. **Passages**: runs are chained in the order of both texts while the gap between two runs
//!    is small on both sides (light rewording: [`AlignParams::max_gap`]) or small on one and at
//!    most [`AlignParams::max_insert`] on the other (a line inserted or dropped). A chain never
//!    crosses from one field into another. Chains holding at least
//!    [`AlignParams::min_passage`] matched letters are the [`Passage`]s.
//!
//! Spans ([`Span`]) are character ranges (Unicode scalar values, end exclusive) of a field's
//! plain text ([`crate::text::plain_text`]: the field itself unless it is HTML), so a caller
//! can mark them in what it shows. Everything here is pure: two texts in, the passages out.

use rayon::prelude::*;
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::hashing::BuildIdentity;
use crate::text::{is_cjk_ideograph, plain_text, Folder, Segmenter};

/// A text's windows as (hash, start), sorted.
type Windows = Vec<(u64, u32)>;

/// One window (one hash) both texts hold: its entries in the first text's [`Windows`], and
/// its starts in the second text.
type SharedWindow<'w> = (&'w [(u64, u32)], Vec<u32>);

/// How texts are aligned. [`AlignParams::DEFAULT`] is what every front end uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlignParams {
    /// Letters in an anchor window.
    pub anchor: usize,
    /// A window found more often than this in either text anchors nothing.
    pub max_repeats: usize,
    /// Largest gap, in letters on both sides, between two runs of one passage.
    pub max_gap: usize,
    /// Largest gap on one side when the other side's gap is at most [`AlignParams::max_gap`]
    /// / 4: a line inserted or dropped inside a copied passage.
    pub max_insert: usize,
    /// Fewest matched letters a passage holds.
    pub min_passage: usize,
}

impl AlignParams {
    /// The defaults.
    pub const DEFAULT: AlignParams = AlignParams {
        anchor: 10,
        max_repeats: 8,
        max_gap: 40,
        max_insert: 160,
        min_passage: 20,
    };
}

impl Default for AlignParams {
    fn default() -> Self {
        AlignParams::DEFAULT
    }
}

/// Between the fields of one text: a letter no run holds, so no run crosses a field boundary.
const SEPARATOR: char = '\u{F0000}';

/// The letters and digits of an article's fields, normalised, with where each came from.
#[derive(Clone, Debug)]
pub struct Letters {
    chars: Vec<char>,
    /// For each entry of `chars`: its field and its character index in that field's plain
    /// text (a separator holds the field it ends).
    from: Vec<(u32, u32)>,
    /// The letters, separators not counted.
    count: usize,
    /// The list blocks ([`LIST_LINES`]), as ranges of letter indices, in order.
    listed: Vec<(u32, u32)>,
}

impl Letters {
    /// The letters of `fields` (title, content, … in the order the document-to-text rule
    /// joins them).
    pub fn new<S: AsRef<str>>(fields: &[S]) -> Letters {
        Letters::read(&plain_texts(fields), None)
    }

    /// The letters of `fields` without the lines `segmenter`'s boilerplate holds: what the
    /// fingerprints are made of, so a short item under a long site footer aligns as the
    /// item. As for fingerprints, a text that is all boilerplate is kept whole.
    pub fn prepared<S: AsRef<str>>(fields: &[S], segmenter: &Segmenter) -> Letters {
        let plains = plain_texts(fields);
        let Some(boilerplate) = segmenter.boilerplate() else {
            return Letters::read(&plains, None);
        };
        // Per field, the characters of its plain text on boilerplate lines.
        let skipped: Vec<Vec<bool>> = plains
            .iter()
            .map(|plain| {
                let clean = segmenter.clean(plain);
                let cleaned: Vec<&str> = clean
                    .split('\n')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                let mut skip = vec![false; plain.chars().count()];
                let mut at = 0;
                let mut lines = Vec::new();
                for line in plain.split('\n') {
                    let n = line.chars().count();
                    if !line.trim().is_empty() {
                        lines.push((at, n));
                    }
                    at += n + 1;
                }
                // Lines map one to one when normalisation kept every non-blank line.
                if lines.len() == cleaned.len() {
                    for (&(start, n), c) in lines.iter().zip(&cleaned) {
                        if boilerplate.contains(c) {
                            skip[start..start + n].iter_mut().for_each(|s| *s = true);
                        }
                    }
                }
                skip
            })
            .collect();
        let kept = skipped.iter().flatten().any(|&s| !s);
        let all_boilerplate = !kept && skipped.iter().any(|s| !s.is_empty());
        if all_boilerplate {
            return Letters::read(&plains, None);
        }
        Letters::read(&plains, Some(&skipped))
    }

    /// The letters of the fields' plain texts, leaving out the characters `skipped` marks.
    fn read(plains: &[Cow<'_, str>], skipped: Option<&[Vec<bool>]>) -> Letters {
        let mut out = Letters {
            chars: Vec::new(),
            from: Vec::new(),
            count: 0,
            listed: Vec::new(),
        };
        let folder = Folder::shared();
        for (f, plain) in plains.iter().enumerate() {
            let f = f as u32;
            if f > 0 {
                out.chars.push(SEPARATOR);
                out.from.push((f - 1, 0));
            }
            // A Traditional text is folded whole first, as the fingerprints fold it
            // (phrases: 資料 → 数据), where that keeps its length so letters map back.
            let folded = folder.fold(plain);
            let whole = folded.chars().count() == plain.chars().count();
            let text: &str = if whole { &folded } else { plain };
            let skip = skipped.map(|s| &s[f as usize]);
            let first = out.chars.len();
            for (i, c) in text.chars().enumerate() {
                if skip.is_some_and(|s| s.get(i).copied().unwrap_or(false)) {
                    continue;
                }
                out.push(folder.fold_char(c), (f, i as u32));
            }
            out.mark_lists(text, first);
        }
        out
    }

    /// Records the list block of one field, whose text is `text` and whose letters start at
    /// index `first`: the lines that end it after its prose when at least [`LIST_LINES`] of
    /// them are list lines ([`is_list_line`]), as related links, tags or a list of headlines
    /// follow an article on its page. Lines without letters (blank, or boilerplate left out)
    /// are passed over. A field without a prose line, or whose list lines lead or stand
    /// between prose (an agenda, a table, a list of names), is text, not a page's furniture.
    fn mark_lists(&mut self, text: &str, first: usize) {
        // Each line with letters: its letters (a range of indices); beside it, whether it is
        // a list line and whether it is a marked headline of one sentence.
        let mut lines: Vec<(u32, u32)> = Vec::new();
        let (mut plain, mut marked) = (Vec::new(), Vec::new());
        let mut k = first;
        let mut start = 0u32;
        for line in text.split('\n') {
            let end = start + line.chars().count() as u32;
            let from = k;
            while k < self.chars.len() && self.from[k].1 < end {
                k += 1;
            }
            if k > from {
                lines.push((from as u32, k as u32));
                plain.push(is_list_line(line, k - from));
                marked.push(is_marked_sentence(line, k - from));
            }
            start = end + 1;
        }
        let n = lines.len();
        // A headline that is one sentence ending with a full stop, as an item between two
        // list lines, is an item too; numbered points one after the other are not.
        let is_list =
            |i: usize| plain[i] || marked[i] && i > 0 && i + 1 < n && plain[i - 1] && plain[i + 1];
        let tail = (0..n).rev().take_while(|&i| is_list(i)).count();
        if tail >= LIST_LINES && tail < n {
            self.listed.push((lines[n - tail].0, lines[n - 1].1));
        }
    }

    /// The letters in list blocks ([`Mark::Listed`]).
    pub fn listed_len(&self) -> usize {
        self.listed.iter().map(|&(s, e)| (e - s) as usize).sum()
    }

    fn push(&mut self, c: char, from: (u32, u32)) {
        if is_cjk_ideograph(c) {
            self.chars.push(c);
            self.from.push(from);
            self.count += 1;
            return;
        }
        for n in std::iter::once(c).nfkc() {
            for l in n.to_lowercase() {
                if l.is_alphanumeric() {
                    self.chars.push(l);
                    self.from.push(from);
                    self.count += 1;
                }
            }
        }
    }

    /// How many letters the text holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the text holds no letter.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The letter at `i` (an index of a [`Run`]).
    pub fn letter(&self, i: usize) -> char {
        self.chars[i]
    }

    /// Every window of `k` letters inside one field, as (its first letter, its hash): the
    /// anchors of an alignment are the windows two texts share. The hash is xxh3 of the
    /// letters' code points (little-endian `u32`s), stable across versions and platforms.
    pub fn windows(&self, k: usize) -> impl Iterator<Item = (usize, u64)> + '_ {
        let k = k.max(1);
        // The code points' bytes once, so that each window hashes a slice of them; and the
        // last separator seen, so that a window is tested in constant time.
        let bytes: Vec<u8> = self
            .chars
            .iter()
            .flat_map(|&c| u32::from(c).to_le_bytes())
            .collect();
        let starts = (self.chars.len() + 1).saturating_sub(k);
        let mut last_separator = self.chars[..(k - 1).min(self.chars.len())]
            .iter()
            .rposition(|&c| is_separator(c));
        (0..starts).filter_map(move |i| {
            let end = i + k - 1;
            if is_separator(self.chars[end]) {
                last_separator = Some(end);
            }
            if last_separator.is_some_and(|s| s >= i) {
                return None;
            }
            Some((i, xxh3_64(&bytes[4 * i..4 * (i + k)])))
        })
    }

    /// The span of letters `start..end` (indices of [`Run`]s, inside one field).
    fn span(&self, start: usize, end: usize) -> Span {
        let (field, first) = self.from[start];
        let (_, last) = self.from[end - 1];
        Span {
            field: field as usize,
            start: first as usize,
            end: last as usize + 1,
        }
    }

    fn field_of(&self, i: usize) -> u32 {
        self.from[i].0
    }
}

/// Each field as plain text ([`plain_text`]: HTML reduced to its visible text), read once.
fn plain_texts<S: AsRef<str>>(fields: &[S]) -> Vec<Cow<'_, str>> {
    fields.iter().map(|f| plain_text(f.as_ref())).collect()
}

/// What a letter of a text is to the rule on an alignment ([`Formula::marks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The text's own: counted in every share and passage.
    Own,
    /// Covered by a formula window: counted in the share of a text in runs, not in the share
    /// of its own letters or in a passage's letters.
    Formula,
    /// In the list block ending a field ([`LIST_LINES`]): counted nowhere, as if the page
    /// had not shown it.
    Listed,
}

/// Fewest list lines ending a field after its prose that make a list block: what a page
/// shows after its text (related links, a list of headlines or tags), which the rule on an
/// alignment does not count ([`Mark::Listed`]). Three: a heading and two items. A list line
/// holds at most [`LIST_LINE_LETTERS`] letters, no full stop (。), and does not end the way a
/// line of broken prose does (a comma, an enumeration comma, a semicolon, a colon or a full
/// stop); or it is a headline of one sentence ending with 。, marked as an item (·, `1.`,
/// `【1】`…), between two list lines.
pub const LIST_LINES: usize = 3;

/// Most letters a list line holds: a headline's length, with room.
pub const LIST_LINE_LETTERS: usize = 50;

/// Whether a line of `letters` letters reads as an item of a list rather than prose: at most
/// [`LIST_LINE_LETTERS`] letters, no full stop (。) inside, and not ending the way a line of
/// broken prose does (a comma, an enumeration comma, a semicolon, a colon or a full stop; an
/// ASCII point ends many a headline's ellipsis, so it is not one).
fn is_list_line(line: &str, letters: usize) -> bool {
    const PROSE_ENDS: &[char] = &['。', '．', '｡', '，', ',', '、', '；', ';', '：', ':'];
    letters <= LIST_LINE_LETTERS && !line.contains('。') && !line.trim_end().ends_with(PROSE_ENDS)
}

/// The id of a formula of `windows` of `anchor` letters ([`Formula::id`]).
fn formula_id(anchor: usize, windows: &HashSet<u64, BuildIdentity>) -> String {
    let mut bytes = Vec::with_capacity(8 * (windows.len() + 1));
    bytes.extend((anchor as u64).to_le_bytes());
    for w in sorted(windows) {
        bytes.extend(w.to_le_bytes());
    }
    format!("fm1-{:012x}", xxh3_64(&bytes) >> 16)
}

/// `windows`, ascending.
fn sorted(windows: &HashSet<u64, BuildIdentity>) -> Vec<u64> {
    let mut w: Vec<u64> = windows.iter().copied().collect();
    w.sort_unstable();
    w
}

/// Whether a line of `letters` letters reads as a list item that is one sentence: it begins
/// with an item marker (·, •, >, -, *, a number with a point or 、, a number in 【】 or []),
/// holds at most [`LIST_LINE_LETTERS`] letters and one full stop (。), and ends with it.
fn is_marked_sentence(line: &str, letters: usize) -> bool {
    let line = line.trim();
    let rest = line.trim_start_matches(|c: char| c.is_ascii_digit());
    let numbered = rest.len() < line.len() && rest.starts_with(['.', '．', '、']);
    let bracketed = line
        .strip_prefix('【')
        .or_else(|| line.strip_prefix('['))
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
    (numbered || bracketed || line.starts_with(['·', '•', '>', '-', '*']))
        && letters <= LIST_LINE_LETTERS
        && line.ends_with('。')
        && line.matches('。').count() == 1
}

fn is_separator(c: char) -> bool {
    c == SEPARATOR
}

/// Formula text: windows (of [`AlignParams::anchor`] letters, hashed as [`Letters::windows`]
/// hashes them) that recur across many unrelated documents of a corpus: regulation clauses
/// every admission notice quotes, the attendance formula of every meeting bulletin, a
/// stock policy paragraph. Letters they cover are not evidence of copying
/// ([`crate::relation::AlignRule`]). Learned from a corpus by counting, for each window,
/// the groups of near-duplicates it is found in (a story reposted fifty times is one group,
/// so it never becomes formula).
///
/// It is a versioned artefact, as learned boilerplate is: its JSON (`serde`) holds an id
/// (`fm1-…`, a hash of the anchor and the set of windows), how it was learned, and the
/// windows as hex; reading checks the id. `neardup formula learn` writes it, `dedupe --align
/// --formula` reads it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "StoredFormula", into = "StoredFormula")]
pub struct Formula {
    windows: HashSet<u64, BuildIdentity>,
    anchor: usize,
    /// Learned from text folded into Simplified: it serves only texts prepared alike.
    fold: bool,
    /// The groups a window was found in to be kept, and the texts counted, when learned.
    min_groups: usize,
    texts: usize,
    /// [`Formula::id`], computed once with the windows: every aligned answer names it, and
    /// hashing a quarter of a million sorted windows for each would cost more than the
    /// lookup.
    id: String,
}

/// Version of the formula artefact's JSON layout.
pub const FORMULA_FORMAT: u32 = 1;

/// The JSON form of [`Formula`].
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredFormula {
    format: u32,
    id: String,
    anchor: usize,
    fold: bool,
    min_groups: usize,
    texts: usize,
    /// The windows' hashes, 16 hex digits each, ascending.
    windows: Vec<String>,
}

impl TryFrom<StoredFormula> for Formula {
    type Error = String;
    fn try_from(s: StoredFormula) -> Result<Formula, String> {
        if s.format != FORMULA_FORMAT {
            return Err(format!(
                "formula format {} is not {FORMULA_FORMAT}, the one this neardup reads",
                s.format
            ));
        }
        let windows = s
            .windows
            .iter()
            .map(|w| u64::from_str_radix(w, 16).map_err(|e| format!("window `{w}`: {e}")))
            .collect::<Result<Vec<u64>, String>>()?;
        let mut f = Formula::new(s.anchor, windows).folded(s.fold);
        (f.min_groups, f.texts) = (s.min_groups, s.texts);
        if f.id() != s.id {
            return Err(format!(
                "formula `{}` holds windows whose id is `{}`: the artefact was changed by hand or damaged; learn it again",
                s.id,
                f.id()
            ));
        }
        Ok(f)
    }
}

impl From<Formula> for StoredFormula {
    fn from(f: Formula) -> StoredFormula {
        StoredFormula {
            format: FORMULA_FORMAT,
            id: f.id(),
            anchor: f.anchor,
            fold: f.fold,
            min_groups: f.min_groups,
            texts: f.texts,
            windows: sorted(&f.windows)
                .iter()
                .map(|w| format!("{w:016x}"))
                .collect(),
        }
    }
}

impl Default for Formula {
    fn default() -> Formula {
        Formula::new(AlignParams::DEFAULT.anchor, [])
    }
}

impl PartialEq for Formula {
    fn eq(&self, other: &Formula) -> bool {
        self.anchor == other.anchor && self.fold == other.fold && self.windows == other.windows
    }
}

impl std::fmt::Display for Formula {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} windows of {} letters in at least {} groups of {} texts",
            self.id(),
            self.windows.len(),
            self.anchor,
            self.min_groups,
            self.texts
        )
    }
}

impl Formula {
    /// The formula windows of `anchor` letters (learned from folded text).
    pub fn new(anchor: usize, windows: impl IntoIterator<Item = u64>) -> Formula {
        let windows: HashSet<u64, BuildIdentity> = windows.into_iter().collect();
        Formula {
            id: formula_id(anchor, &windows),
            windows,
            anchor,
            fold: true,
            min_groups: 0,
            texts: 0,
        }
    }

    /// The same windows, recorded as learned from folded text or not.
    pub fn folded(mut self, fold: bool) -> Formula {
        self.fold = fold;
        self
    }

    /// Whether it was learned from text folded into Simplified.
    pub fn fold(&self) -> bool {
        self.fold
    }

    /// Its id: `fm1-` and 12 hex digits of xxh3 over the anchor and the sorted windows.
    pub fn id(&self) -> String {
        self.id.clone()
    }

    /// How many texts it was learned from.
    pub fn texts(&self) -> usize {
        self.texts
    }

    /// Learns the formula windows of `texts`: those found in at least `min_groups` groups,
    /// a group being texts `joined` as near-duplicates (pairs of indices of `texts`), each
    /// other text a group of its own. [`FormulaCounter`] does the counting, one text at a
    /// time, for a caller that cannot hold every text at once ([`WindowSieve`] first, so
    /// only windows that recur are counted exactly).
    pub fn learn(
        texts: &[Letters],
        joined: impl IntoIterator<Item = (usize, usize)>,
        min_groups: usize,
        anchor: usize,
    ) -> Formula {
        let sieve = WindowSieve::for_texts(anchor, texts.len());
        texts.par_iter().for_each(|t| sieve.add(t));
        let mut counter = FormulaCounter::sifted(sieve, min_groups);
        // Only the windows that recur are held, chosen on all cores, then counted in order.
        let sifter = counter.sifter();
        let recurring: Vec<TextWindows> = texts.par_iter().map(|t| sifter.windows(t)).collect();
        for w in &recurring {
            counter.add_windows(w);
        }
        let groups = groups_of(texts.len(), joined);
        counter.finish(
            groups
                .iter()
                .map(|g| g.iter().map(|&i| &texts[i]).collect::<Vec<_>>()),
            min_groups,
        )
    }

    /// How many windows it holds.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// For each letter index of `letters` (as [`Run`]s index them), what it is to the rule on
    /// an alignment: in a list block ([`Mark::Listed`]), else covered by a formula window
    /// ([`Mark::Formula`]), else the text's own.
    pub fn marks(&self, letters: &Letters) -> Vec<Mark> {
        let mut marks = vec![Mark::Own; letters.chars.len()];
        if !self.windows.is_empty() {
            for (i, h) in letters.windows(self.anchor) {
                if self.windows.contains(&h) {
                    marks[i..i + self.anchor]
                        .iter_mut()
                        .for_each(|m| *m = Mark::Formula);
                }
            }
        }
        for &(s, e) in &letters.listed {
            marks[s as usize..e as usize]
                .iter_mut()
                .for_each(|m| *m = Mark::Listed);
        }
        marks
    }
}

/// The groups of more than one member that `joined` (pairs of indices below `n`) links,
/// each ascending: connected components.
pub fn groups_of(n: usize, joined: impl IntoIterator<Item = (usize, usize)>) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for (a, b) in joined {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        parent[ra.max(rb)] = ra.min(rb);
    }
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
    out.sort_unstable();
    out
}

/// Counts, for [`Formula`], the texts each window is found in, one text at a time: the
/// texts of a corpus stream through [`FormulaCounter::add`] and are not kept. Copies of one
/// story must count once, so [`FormulaCounter::finish`] is given the groups of near-duplicates
/// (only their members' letters are needed) and takes back what a group counted more than
/// once. [`FormulaCounter::restricted_to`] counts only the windows of some texts (those a
/// caller will judge), so memory grows with them, not with the corpus.
#[derive(Debug)]
pub struct FormulaCounter {
    anchor: usize,
    counts: HashMap<u64, u32, BuildIdentity>,
    only: Only,
    /// Texts counted.
    texts: usize,
}

/// Which windows a [`FormulaCounter`] counts.
#[derive(Debug)]
enum Only {
    /// Every window.
    All,
    /// Those already in its map (the windows of some texts).
    Restricted,
    /// Those a [`WindowSieve`] found in at least this many texts.
    Sifted(Arc<WindowSieve>, u8),
}

/// A first pass for [`FormulaCounter::sifted`]: how many texts hold each window, estimated
/// from above in fixed memory (a count-min sketch: rows of one-byte counters that saturate,
/// more than the floor of any formula needs). A window the sieve finds in fewer than N texts
/// is in fewer than N, so counting exactly only the others gives the formula that counting
/// every window gives, in the memory of the windows that recur.
///
/// Texts are added from any thread (`&self`, atomic counters), so the windows are counted
/// where the texts are prepared, on every core. The counters are laid out in blocks of one
/// cache line (64 counters, four rows of 16): a window's hash picks a block, then one counter
/// in each row of it, so adding or estimating a window reads one line of memory. The
/// windows' hashes are xxh3 already; the block and the counters are taken from
/// multiplicative hashes of them.
pub struct WindowSieve {
    anchor: usize,
    /// `1 << bits` blocks of [`Self::BLOCK`] counters.
    counters: Vec<AtomicU8>,
    bits: u32,
    /// Once every text is counted ([`WindowSieve::settle`]): a floor, and a bit a block
    /// telling whether each of its rows holds a counter at that floor, so that most windows
    /// that do not recur are told so from a table that fits a core's cache.
    settled: Option<(u8, Vec<u64>)>,
}

impl WindowSieve {
    /// Counters in a block: one cache line.
    const BLOCK: usize = 64;
    /// Counters in one row of a block; a block holds four rows.
    const ROW: usize = 16;
    /// Odd multipliers (from the digits of π, made odd): the block, then the counters.
    const MULTIPLIERS: [u64; 2] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7345];

    /// A sieve for windows of `anchor` letters sized for about `texts` texts: 1,024 counters
    /// a text (a news article holds 1,000–3,000 windows, most of them its own), between 2^22
    /// and 2^27 counters (4–128 MiB).
    pub fn for_texts(anchor: usize, texts: usize) -> WindowSieve {
        let want = (texts.saturating_mul(1024) / Self::BLOCK)
            .max(1)
            .next_power_of_two();
        WindowSieve::with_bits(anchor, want.trailing_zeros().clamp(16, 21))
    }

    /// A sieve of `1 << bits` blocks (tests use small ones, which collide often).
    fn with_bits(anchor: usize, bits: u32) -> WindowSieve {
        WindowSieve {
            anchor,
            counters: (0..Self::BLOCK << bits).map(|_| AtomicU8::new(0)).collect(),
            bits,
            settled: None,
        }
    }

    /// The block of window `h`.
    fn block(&self, h: u64) -> usize {
        if self.bits == 0 {
            0
        } else {
            (h.wrapping_mul(Self::MULTIPLIERS[0]) >> (64 - self.bits)) as usize
        }
    }

    /// The four counters of window `h`, one in each row of its block.
    fn slots(&self, h: u64) -> [usize; 4] {
        let block = self.block(h);
        let picks = h.wrapping_mul(Self::MULTIPLIERS[1]) >> 48;
        std::array::from_fn(|r| {
            block * Self::BLOCK + r * Self::ROW + ((picks >> (4 * r)) as usize & (Self::ROW - 1))
        })
    }

    /// Counts one text: each of its windows once.
    pub fn add(&self, text: &Letters) {
        self.add_windows(&TextWindows::of(text, self.anchor));
    }

    /// Counts one text by its windows ([`TextWindows`]); from any thread.
    pub fn add_windows(&self, windows: &TextWindows) {
        assert_eq!(windows.anchor, self.anchor, "windows of another length");
        for &h in &windows.hashes {
            for i in self.slots(h) {
                // Saturating: a counter at 255 stays there, so none ever wraps to a
                // smaller count.
                let _ = self.counters[i]
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_add(1));
            }
        }
    }

    /// At least the number of texts added that hold the window `h` (at most 255), once
    /// every add has returned.
    pub fn estimate(&self, h: u64) -> u8 {
        self.slots(h)
            .iter()
            .map(|&i| self.counters[i].load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    /// Marks, once every text is counted, the blocks where a window can reach `floor`: those
    /// each of whose rows holds a counter at `floor` or more.
    fn settle(&mut self, floor: u8) {
        let blocks = 1usize << self.bits;
        let mut bits = vec![0u64; blocks.div_ceil(64)];
        for (block, counters) in self.counters.chunks_exact(Self::BLOCK).enumerate() {
            let reached = counters
                .chunks_exact(Self::ROW)
                .all(|row| row.iter().any(|c| c.load(Ordering::Relaxed) >= floor));
            if reached {
                bits[block / 64] |= 1 << (block % 64);
            }
        }
        self.settled = Some((floor, bits));
    }

    /// Whether the window `h` is estimated in at least `floor` texts
    /// ([`WindowSieve::estimate`]).
    fn reaches(&self, h: u64, floor: u8) -> bool {
        if let Some((settled, bits)) = &self.settled {
            let block = self.block(h);
            if *settled == floor && bits[block / 64] & (1 << (block % 64)) == 0 {
                return false;
            }
        }
        self.estimate(h) >= floor
    }
}

impl std::fmt::Debug for WindowSieve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowSieve")
            .field("anchor", &self.anchor)
            .field("counters", &self.counters.len())
            .finish()
    }
}

impl FormulaCounter {
    /// Counts every window of `anchor` letters.
    pub fn new(anchor: usize) -> FormulaCounter {
        FormulaCounter {
            anchor,
            counts: HashMap::with_hasher(BuildIdentity),
            only: Only::All,
            texts: 0,
        }
    }

    /// Counts only the windows `sieve` (which saw every text this counter will) finds in
    /// at least `min_groups` texts: what [`FormulaCounter::finish`] with `min_groups` keeps
    /// is the same as counting every window, in the memory of the windows that recur.
    pub fn sifted(sieve: WindowSieve, min_groups: usize) -> FormulaCounter {
        FormulaCounter {
            anchor: sieve.anchor,
            counts: HashMap::with_hasher(BuildIdentity),
            only: {
                let floor = u8::try_from(min_groups).unwrap_or(u8::MAX);
                let mut sieve = sieve;
                sieve.settle(floor);
                Only::Sifted(Arc::new(sieve), floor)
            },
            texts: 0,
        }
    }

    /// Counts only the windows found in `texts`: a formula learned this way marks those
    /// texts exactly as one learned from every window would.
    pub fn restricted_to<'a>(
        anchor: usize,
        texts: impl IntoIterator<Item = &'a Letters>,
    ) -> FormulaCounter {
        let mut counts = HashMap::with_hasher(BuildIdentity);
        for t in texts {
            for (_, h) in t.windows(anchor) {
                counts.insert(h, 0);
            }
        }
        FormulaCounter {
            anchor,
            counts,
            only: Only::Restricted,
            texts: 0,
        }
    }

    /// The length of the windows it counts.
    pub fn anchor(&self) -> usize {
        self.anchor
    }

    /// What it counts of a text, decided on any thread ([`Sifter::windows`]), so that
    /// the windows a sifted counter would pass over are dropped where the text is prepared.
    pub fn sifter(&self) -> Sifter {
        Sifter {
            anchor: self.anchor,
            sieve: match &self.only {
                Only::Sifted(sieve, floor) => Some((Arc::clone(sieve), *floor)),
                Only::All | Only::Restricted => None,
            },
        }
    }

    /// Counts one text: each of its windows once, however often it repeats there.
    pub fn add(&mut self, text: &Letters) {
        self.add_windows(&TextWindows::of(text, self.anchor));
    }

    /// Counts one text by its windows ([`TextWindows`], computed where the text was
    /// prepared, e.g. on another thread).
    pub fn add_windows(&mut self, windows: &TextWindows) {
        assert_eq!(windows.anchor, self.anchor, "windows of another length");
        self.texts += 1;
        for &h in &windows.hashes {
            match &self.only {
                Only::All => *self.counts.entry(h).or_insert(0) += 1,
                Only::Restricted => {
                    if let Some(c) = self.counts.get_mut(&h) {
                        *c += 1;
                    }
                }
                Only::Sifted(sieve, floor) => {
                    if sieve.reaches(h, *floor) {
                        *self.counts.entry(h).or_insert(0) += 1;
                    }
                }
            }
        }
    }

    /// The formula: windows found in at least `min_groups` groups, where each of `groups`
    /// (the letters of near-duplicates, every one of them counted by [`FormulaCounter::add`])
    /// counts once and every other text is a group of its own.
    pub fn finish<'a, G>(mut self, groups: G, min_groups: usize) -> Formula
    where
        G: IntoIterator,
        G::Item: IntoIterator<Item = &'a Letters>,
    {
        if let Only::Sifted(_, floor) = &self.only {
            assert!(
                min_groups >= usize::from(*floor),
                "a counter sifted for {floor} groups cannot keep windows of {min_groups}"
            );
        }
        for group in groups {
            let mut held: HashMap<u64, u32, BuildIdentity> = HashMap::with_hasher(BuildIdentity);
            for t in group {
                for h in TextWindows::of(t, self.anchor).hashes {
                    *held.entry(h).or_insert(0) += 1;
                }
            }
            for (h, n) in held {
                if let Some(c) = self.counts.get_mut(&h) {
                    *c = c.saturating_sub(n - 1);
                }
            }
        }
        let windows = self
            .counts
            .into_iter()
            .filter(|&(_, n)| n as usize >= min_groups)
            .map(|(h, _)| h);
        let mut f = Formula::new(self.anchor, windows);
        (f.min_groups, f.texts) = (min_groups, self.texts);
        f
    }
}

/// The windows of a text a [`FormulaCounter`] counts ([`FormulaCounter::sifter`]): those its
/// sieve finds in enough texts, when it is sifted; every one otherwise.
#[derive(Clone, Debug)]
pub struct Sifter {
    anchor: usize,
    sieve: Option<(Arc<WindowSieve>, u8)>,
}

impl Sifter {
    /// The windows of `text` the counter counts.
    pub fn windows(&self, text: &Letters) -> TextWindows {
        let hashes = text.windows(self.anchor).map(|(_, h)| h);
        TextWindows::from_hashes(
            self.anchor,
            match &self.sieve {
                Some((sieve, floor)) => hashes.filter(|&h| sieve.reaches(h, *floor)).collect(),
                None => hashes.collect(),
            },
        )
    }
}

/// A text's windows of `anchor` letters ([`Letters::windows`]), each once: what
/// [`WindowSieve`] and [`FormulaCounter`] count of a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextWindows {
    anchor: usize,
    /// Ascending, each once.
    hashes: Vec<u64>,
}

impl TextWindows {
    /// The windows of `text`.
    pub fn of(text: &Letters, anchor: usize) -> TextWindows {
        TextWindows::from_hashes(anchor, text.windows(anchor).map(|(_, h)| h).collect())
    }

    /// The windows whose hashes, in any order and with repeats, are `hashes`: every hash
    /// [`Letters::windows`] gives for windows of `anchor` letters of one text.
    pub fn from_hashes(anchor: usize, mut hashes: Vec<u64>) -> TextWindows {
        hashes.sort_unstable();
        hashes.dedup();
        TextWindows { anchor, hashes }
    }
}

/// A character range of one field's plain text: `start..end`, in Unicode scalar values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Span {
    /// The field's index, in the order the fields were given.
    pub field: usize,
    /// The first character.
    pub start: usize,
    /// One past the last character.
    pub end: usize,
}

/// A stretch of letters the two texts hold alike: `len` letters from index `a` of the first
/// text and from index `b` of the second (indices of [`Letters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Run {
    /// Where it starts in the first text.
    pub a: usize,
    /// Where it starts in the second text.
    pub b: usize,
    /// Its length in letters.
    pub len: usize,
}

/// A passage both texts hold: runs in the same order in both, with small gaps between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    /// Where it is in the first text.
    pub a: Span,
    /// Where it is in the second text.
    pub b: Span,
    /// Letters of the first text from its first run to the end of its last, gaps included.
    pub a_letters: usize,
    /// The same in the second text.
    pub b_letters: usize,
    /// Letters in its runs (the same on both sides).
    pub matched: usize,
    /// Its runs, in order.
    pub runs: Vec<Run>,
}

impl Passage {
    /// Its letters in the first text, as a range of letter indices.
    pub fn a_range(&self) -> (usize, usize) {
        (self.runs[0].a, self.runs[0].a + self.a_letters)
    }

    /// Its letters in the second text.
    pub fn b_range(&self) -> (usize, usize) {
        (self.runs[0].b, self.runs[0].b + self.b_letters)
    }
}

/// The passages two texts share, and how much of each they cover.
#[derive(Clone, Debug, PartialEq)]
pub struct Alignment {
    /// The passages, in the order of the first text.
    pub passages: Vec<Passage>,
    /// Letters of the first text.
    pub a_len: usize,
    /// Letters of the second text.
    pub b_len: usize,
    /// Letters of the first text inside some passage (each counted once).
    pub a_covered: usize,
    /// Letters of the second text inside some passage.
    pub b_covered: usize,
    /// Letters of the first text inside the runs of some passage: the copied letters, gaps
    /// left out.
    pub a_matched: usize,
    /// The same in the second text.
    pub b_matched: usize,
}

impl Alignment {
    /// The same alignment read from the second text: sides exchanged, passages in the
    /// order of the (new) first text.
    pub fn swapped(self) -> Alignment {
        let mut passages: Vec<Passage> = self
            .passages
            .into_iter()
            .map(|p| Passage {
                a: p.b,
                b: p.a,
                a_letters: p.b_letters,
                b_letters: p.a_letters,
                matched: p.matched,
                runs: p
                    .runs
                    .into_iter()
                    .map(|r| Run {
                        a: r.b,
                        b: r.a,
                        len: r.len,
                    })
                    .collect(),
            })
            .collect();
        passages.sort_by_key(|p| (p.runs[0].a, p.runs[0].b));
        Alignment {
            passages,
            a_len: self.b_len,
            b_len: self.a_len,
            a_covered: self.b_covered,
            b_covered: self.a_covered,
            a_matched: self.b_matched,
            b_matched: self.a_matched,
        }
    }

    /// The share of the first text inside passages, 0 for an empty text.
    pub fn a_share(&self) -> f64 {
        share(self.a_covered, self.a_len)
    }

    /// The share of the second text inside passages.
    pub fn b_share(&self) -> f64 {
        share(self.b_covered, self.b_len)
    }

    /// The share of the first text in runs: what is copied letter for letter.
    pub fn a_matched_share(&self) -> f64 {
        share(self.a_matched, self.a_len)
    }

    /// The same for the second text.
    pub fn b_matched_share(&self) -> f64 {
        share(self.b_matched, self.b_len)
    }
}

/// `part` ÷ `whole`, 0 for an empty whole.
pub(crate) fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Aligns the fields of two articles (see the module docs).
pub fn align<S: AsRef<str>, T: AsRef<str>>(a: &[S], b: &[T], params: &AlignParams) -> Alignment {
    let a = Letters::new(a);
    let b = Letters::new(b);
    align_letters(&a, &b, params)
}

/// Aligns two texts already reduced to their letters.
///
/// The answer does not depend on which text is first: the two are aligned in one order of
/// their own (the shorter first, then by their letters) and the result is turned round when
/// the caller's order is the other, so a lookup from either side of a pair, or `dedupe`
/// reading them in either order, sees the same passages.
pub fn align_letters(a: &Letters, b: &Letters, params: &AlignParams) -> Alignment {
    if (a.len(), &a.chars) <= (b.len(), &b.chars) {
        align_in_order(a, b, params)
    } else {
        align_in_order(b, a, params).swapped()
    }
}

/// [`align_letters`] with `a` first.
fn align_in_order(a: &Letters, b: &Letters, params: &AlignParams) -> Alignment {
    let runs = runs(a, b, params);
    let mut found: Vec<Passage> = chain(a, b, runs, params)
        .into_iter()
        .filter(|p| p.matched >= params.min_passage)
        .collect();
    // A passage lying, on both sides, inside larger ones is a shadow of text repeated within
    // a text (a sentence twice in both): it says nothing the larger ones do not.
    found.sort_by_key(|p| std::cmp::Reverse(p.matched));
    let mut passages: Vec<Passage> = Vec::new();
    for p in found {
        let inside = |range: (usize, usize), side: fn(&Passage) -> (usize, usize)| {
            passages.iter().any(|q| {
                let r = side(q);
                r.0 <= range.0 && range.1 <= r.1
            })
        };
        if !(inside(p.a_range(), Passage::a_range) && inside(p.b_range(), Passage::b_range)) {
            passages.push(p);
        }
    }
    passages.sort_by_key(|p| (p.runs[0].a, p.runs[0].b));
    let a_covered = covered(passages.iter().map(Passage::a_range));
    let b_covered = covered(passages.iter().map(Passage::b_range));
    let runs = || passages.iter().flat_map(|p| p.runs.iter());
    let a_matched = covered(runs().map(|r| (r.a, r.a + r.len)));
    let b_matched = covered(runs().map(|r| (r.b, r.b + r.len)));
    Alignment {
        passages,
        a_len: a.len(),
        b_len: b.len(),
        a_covered,
        b_covered,
        a_matched,
        b_matched,
    }
}

/// The windows of `letters` as (hash, start), in the order of hashes then starts.
fn windows(letters: &Letters, k: usize) -> Windows {
    let mut out: Windows = letters.windows(k).map(|(i, h)| (h, i as u32)).collect();
    out.sort_unstable();
    out
}

/// The starts of the windows both texts hold, each at most `max_repeats` times in either:
/// the anchors, per window its starts in the first text (from its sorted windows `wa`) and
/// in the second (`b`'s windows of `k` letters, looked up as they come, so that only the
/// first text's are sorted), both ascending.
fn shared_windows<'w>(
    wa: &'w [(u64, u32)],
    b: &Letters,
    k: usize,
    max_repeats: usize,
) -> Vec<SharedWindow<'w>> {
    let mut found: Vec<SharedWindow<'w>> = Vec::new();
    let mut group: HashMap<u64, usize, BuildIdentity> = HashMap::with_hasher(BuildIdentity);
    let mut from = 0;
    while from < wa.len() {
        let h = wa[from].0;
        let len = wa[from..].iter().take_while(|e| e.0 == h).count();
        group.insert(h, found.len());
        found.push((&wa[from..from + len], Vec::new()));
        from += len;
    }
    for (j, h) in b.windows(k) {
        if let Some(&g) = group.get(&h) {
            found[g].1.push(j as u32);
        }
    }
    found.retain(|(pa, pb)| !pb.is_empty() && pa.len() <= max_repeats && pb.len() <= max_repeats);
    found
}

/// The maximal exact matches of at least `anchor` letters that start from an anchor.
fn runs(a: &Letters, b: &Letters, params: &AlignParams) -> Vec<Run> {
    let k = params.anchor.max(1);
    let wa = windows(a, k);
    let shared = shared_windows(&wa, b, k, params.max_repeats);
    let (ca, cb) = (&a.chars, &b.chars);
    // Which window starts of the first text anchor: a run is extended from the first of its
    // anchors only, and leftwards from one whose left neighbour does not anchor.
    let mut anchored = vec![false; ca.len()];
    for &(_, i) in shared.iter().flat_map(|(pa, _)| pa.iter()) {
        anchored[i as usize] = true;
    }
    let mut found: Vec<Run> = Vec::new();
    for (pa, pb) in shared {
        for &(_, i) in pa {
            for &j in &pb {
                let (i, j) = (i as usize, j as usize);
                if ca[i..i + k] != cb[j..j + k] {
                    continue;
                }
                let same = |x: usize, y: usize| ca[x] == cb[y] && !is_separator(ca[x]);
                if i > 0 && j > 0 && same(i - 1, j - 1) && anchored[i - 1] {
                    continue;
                }
                let (mut s, mut t) = (i, j);
                while s > 0 && t > 0 && same(s - 1, t - 1) {
                    s -= 1;
                    t -= 1;
                }
                let mut e = i + k;
                let mut f = j + k;
                while e < ca.len() && f < cb.len() && same(e, f) {
                    e += 1;
                    f += 1;
                }
                found.push(Run {
                    a: s,
                    b: t,
                    len: e - s,
                });
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Runs joined into passages, in the order of both texts (see the module docs).
fn chain(a: &Letters, b: &Letters, runs: Vec<Run>, params: &AlignParams) -> Vec<Passage> {
    let mut open: Vec<Passage> = Vec::new();
    for run in runs {
        let mut best: Option<(usize, Run, usize)> = None;
        for (n, p) in open.iter().enumerate() {
            let last = p.runs[p.runs.len() - 1];
            let (end_a, end_b) = (last.a + last.len, last.b + last.len);
            if a.field_of(run.a) != a.field_of(last.a) || b.field_of(run.b) != b.field_of(last.b) {
                continue;
            }
            // Overlapping the passage's end: keep only what lies beyond it on both sides.
            let shift = end_a.saturating_sub(run.a).max(end_b.saturating_sub(run.b));
            if shift >= run.len {
                continue;
            }
            let trimmed = Run {
                a: run.a + shift,
                b: run.b + shift,
                len: run.len - shift,
            };
            let gap_a = trimmed.a - end_a;
            let gap_b = trimmed.b - end_b;
            let small = gap_a.min(gap_b);
            let large = gap_a.max(gap_b);
            let joins = large <= params.max_gap
                || (small <= params.max_gap / 4 && large <= params.max_insert);
            if joins && best.is_none_or(|(_, _, cost)| gap_a + gap_b < cost) {
                best = Some((n, trimmed, gap_a + gap_b));
            }
        }
        match best {
            Some((n, trimmed, _)) => {
                let p = &mut open[n];
                p.runs.push(trimmed);
                p.matched += trimmed.len;
            }
            None => open.push(Passage {
                a: Span::default_at(run.a),
                b: Span::default_at(run.b),
                a_letters: 0,
                b_letters: 0,
                matched: run.len,
                runs: vec![run],
            }),
        }
    }
    for p in &mut open {
        let first = p.runs[0];
        let last = p.runs[p.runs.len() - 1];
        p.a_letters = last.a + last.len - first.a;
        p.b_letters = last.b + last.len - first.b;
        p.a = a.span(first.a, last.a + last.len);
        p.b = b.span(first.b, last.b + last.len);
    }
    open
}

impl Span {
    fn default_at(start: usize) -> Span {
        Span {
            field: 0,
            start,
            end: start,
        }
    }
}

/// Letters inside a union of letter ranges.
fn covered(ranges: impl Iterator<Item = (usize, usize)>) -> usize {
    let mut ranges: Vec<(usize, usize)> = ranges.collect();
    ranges.sort_unstable();
    let mut total = 0;
    let mut reach = 0;
    for (s, e) in ranges {
        let s = s.max(reach);
        if e > s {
            total += e - s;
            reach = e;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEAD: &str = "国家统计局今天发布数据显示十月份全国居民消费价格同比上涨百分之二点五";
    const TAIL: &str = "专家分析认为食品价格上涨是推动物价上行的主要因素后期有望回落";

    const THIRD: &str = "业内人士表示明年一季度居民消费价格涨幅预计将保持温和态势";

    fn one(s: &str) -> Vec<String> {
        vec![s.to_string()]
    }

    /// A window's hash by its definition: xxh3 of its letters' code points, little-endian.
    fn window_hash(w: &[char]) -> u64 {
        let bytes: Vec<u8> = w.iter().flat_map(|&c| u32::from(c).to_le_bytes()).collect();
        xxh3_64(&bytes)
    }

    #[test]
    fn the_list_lines_ending_a_field_after_its_prose_are_its_list_block() {
        let listed = |fields: &[&str]| {
            let l = Letters::new(fields);
            let marks = Formula::default().marks(&l);
            let text: String = (0..marks.len())
                .filter(|&i| marks[i] == Mark::Listed)
                .map(|i| l.letter(i))
                .collect();
            assert_eq!(text.chars().count(), l.listed_len());
            text
        };
        let prose = "今天上午，市政府召开新闻发布会，介绍了全市交通运行情况。";
        // Related links after the text, a heading, items with markers, an ellipsis.
        let page =
            format!("{prose}\n相关阅读\n· 第一条新闻标题...\n2. 第二条新闻标题\n\n【3】第三条");
        assert_eq!(
            listed(&["标题", &page]),
            "相关阅读第一条新闻标题2第二条新闻标题3第三条"
        );
        // Two lines are no block; lines before the prose, or between prose, are the text's
        // own (an agenda, a table); a field of list lines only is all text.
        assert_eq!(
            listed(&[&format!("{prose}\n第一条新闻标题\n第二条新闻标题")]),
            ""
        );
        assert_eq!(
            listed(&[&format!(
                "一、听取报告\n二、审议决议\n三、补选秘书长\n{prose}"
            )]),
            ""
        );
        assert_eq!(listed(&[&format!("{prose}\n甲\n乙\n丙\n{prose}")]), "");
        assert_eq!(
            listed(&["火箭总算是连胜了\n先是以西部倒二的姿态\n今天又力克公牛"]),
            ""
        );
        // A line of broken prose (ending with a comma or a full stop) ends no list.
        assert_eq!(listed(&[&format!("{prose}\n甲\n乙，\n丙")]), "");
        assert_eq!(listed(&[&format!("{prose}\n甲\n乙\n丙。")]), "");
        // The title field is a field of its own: a list ends a field, not the text.
        assert_eq!(listed(&[&format!("{prose}\n甲\n乙\n丙"), prose]), "甲乙丙");
        // A headline of one sentence with a full stop, marked as an item between two items,
        // is an item; unmarked, at the end, or one of several such points, it is prose.
        let links = |middle: &str| format!("{prose}\n相关阅读\n· 第一条\n{middle}\n· 第三条");
        assert_eq!(
            listed(&[&links("· 破案了，是个误判。")]),
            "相关阅读第一条破案了是个误判第三条"
        );
        assert_eq!(
            listed(&[&links("【2】詹皇：我又回来了。")]),
            "相关阅读第一条2詹皇我又回来了第三条"
        );
        assert_eq!(listed(&[&links("破案了，是个误判。")]), "");
        assert_eq!(
            listed(&[&format!("{prose}\n相关\n· 甲\n· 乙\n· 是个误判。")]),
            ""
        );
        assert_eq!(
            listed(&[&format!(
                "{prose}\n1. 加强管理。\n2. 完善制度。\n3. 落实责任。"
            )]),
            ""
        );
    }

    #[test]
    fn formula_ids_never_change() {
        // Indices' `_meta` and artefacts name their formula by this id, and reading one
        // checks it: the same anchor and windows give the same id, whatever their order.
        let f = Formula::new(10, [3, 0xdead_beef_u64, 1, u64::MAX]);
        assert_eq!(f.id(), "fm1-e196fb67c76a");
        assert_eq!(Formula::new(10, [u64::MAX, 1, 0xdead_beef, 3]).id(), f.id());
        assert_ne!(Formula::new(12, [3, 0xdead_beef, 1, u64::MAX]).id(), f.id());
        assert_eq!(Formula::default().id(), "fm1-e6ad1be9a897");
    }

    #[test]
    fn window_hashes_never_change() {
        // Formula artefacts and indices' `_meta` keep these hashes for years.
        let l = Letters::new(&["标题在此", "正文内容。Ａｂc 123"]);
        let got: Vec<(usize, u64)> = l.windows(4).collect();
        assert_eq!(
            got.iter()
                .map(|&(i, h)| format!("{i}:{h:016x}"))
                .collect::<Vec<_>>(),
            GOLDEN_WINDOWS
        );
        let spans: Vec<(usize, u64)> = l.windows(30).collect();
        assert!(
            spans.is_empty(),
            "no window crosses a field or runs past the end"
        );
    }

    const GOLDEN_WINDOWS: [&str; 8] = [
        "0:1d22916305bbe7b0",
        "5:87407576acb48433",
        "6:b003833bf3dd39e7",
        "7:b6b073bcbf047a0b",
        "8:22c4f0f71cfaf61c",
        "9:a85cb88e82e460f4",
        "10:25a6e2ff40221e98",
        "11:feca51328ed2c5bd",
    ];

    proptest::proptest! {
        /// Every window of `k` letters that crosses no field boundary, with its first letter
        /// and its hash as defined, in order; no other.
        #[test]
        fn windows_are_every_window_inside_a_field(
            fields in proptest::collection::vec("[a-c一二三 ]{0,12}", 0..4),
            k in 1usize..6,
        ) {
            let l = Letters::new(&fields);
            let expected: Vec<(usize, u64)> = l
                .chars
                .windows(k)
                .enumerate()
                .filter(|(_, w)| !w.iter().any(|&c| is_separator(c)))
                .map(|(i, w)| (i, window_hash(w)))
                .collect();
            let got: Vec<(usize, u64)> = l.windows(k).collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn identical_texts_are_one_passage_covering_both() {
        let text = format!("{LEAD}。{TAIL}。");
        let al = align(&one(&text), &one(&text), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1);
        assert_eq!(al.a_share(), 1.0);
        assert_eq!(al.b_share(), 1.0);
        let p = &al.passages[0];
        assert_eq!(
            p.a,
            Span {
                field: 0,
                start: 0,
                end: text.chars().count() - 1
            }
        );
        assert_eq!(p.matched, al.a_len);
    }

    #[test]
    fn spans_point_at_the_copied_characters() {
        let a = format!("本报讯，{LEAD}。");
        let b = format!("开头完全不同的一句话在这里，然后是：{LEAD}！结尾");
        let al = align(&one(&a), &one(&b), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1);
        let p = &al.passages[0];
        let cut = |s: &str, sp: Span| {
            s.chars()
                .skip(sp.start)
                .take(sp.end - sp.start)
                .collect::<String>()
        };
        assert_eq!(cut(&a, p.a), LEAD);
        assert_eq!(cut(&b, p.b), LEAD);
    }

    #[test]
    fn punctuation_width_and_case_do_not_break_a_run() {
        let a = "Ｈｅｌｌｏ，ＷＯＲＬＤ 2018年 国家统计局今天发布数据";
        let b = "hello world：2018年。国家统计局今天发布数据";
        let al = align(&one(a), &one(b), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1);
        assert_eq!(al.passages[0].runs.len(), 1);
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn light_rewording_keeps_one_passage() {
        let a = format!("{LEAD}。{TAIL}。{THIRD}");
        let b = format!("{LEAD}。{}。{THIRD}", TAIL.replace("推动", "带动"));
        let al = align(&one(&a), &one(&b), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1, "{al:?}");
        assert_eq!(al.passages[0].runs.len(), 2);
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn a_sentence_repeated_in_both_adds_no_shadow_passage() {
        let a = format!("{LEAD}。{TAIL}。{LEAD}");
        let al = align(&one(&a), &one(&a), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1, "{al:?}");
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn an_inserted_line_keeps_one_passage() {
        let insert = "（本文来源：某某网站，转载请注明出处，更多精彩内容请关注我们的公众号）";
        let a = format!("{LEAD}。{TAIL}。");
        let b = format!("{LEAD}。\n{insert}\n{TAIL}。");
        let al = align(&one(&a), &one(&b), &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 1, "{al:?}");
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn runs_do_not_cross_fields() {
        let a = vec![LEAD.to_string(), TAIL.to_string()];
        let b = one(&format!("{LEAD}{TAIL}"));
        let al = align(&a, &b, &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 2);
        assert_eq!(al.passages[0].a.field, 0);
        assert_eq!(al.passages[1].a.field, 1);
        assert_eq!(al.passages[1].a.start, 0);
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn no_run_crosses_from_title_into_content() {
        let a = vec![LEAD.to_string(), TAIL.to_string()];
        let l = Letters::new(&a);
        let al = align_letters(&l, &l, &AlignParams::DEFAULT);
        assert_eq!(al.passages.len(), 2, "{al:?}");
        assert_eq!(al.a_covered, l.len());
        assert_eq!(al.a_share(), 1.0);
    }

    #[test]
    fn traditional_text_aligns_with_simplified() {
        let trad = Folder::shared().to_traditional(LEAD, crate::text::TraditionalStyle::Taiwan);
        assert_ne!(trad, LEAD);
        let al = align(&one(&trad), &one(LEAD), &AlignParams::DEFAULT);
        assert!(al.a_share() > 0.9, "{al:?}");
    }

    #[test]
    fn formula_is_what_many_groups_hold_and_copies_count_once() {
        let k = AlignParams::DEFAULT.anchor;
        let texts: Vec<Letters> = [
            format!("{LEAD}{TAIL}"),
            format!("{LEAD}{TAIL}"),
            format!("{LEAD}{TAIL}"),
            format!("{LEAD}{THIRD}"),
            format!("开头各不相同{LEAD}"),
        ]
        .iter()
        .map(|t| Letters::new(&[t]))
        .collect();
        let lead = Letters::new(&[LEAD]);
        let tail = Letters::new(&[TAIL]);
        let held = |f: &Formula, l: &Letters| f.marks(l).iter().all(|&m| m == Mark::Formula);
        // Five texts, no two joined: LEAD is in five groups, TAIL in three.
        let f = Formula::learn(&texts, [], 4, k);
        assert!(held(&f, &lead) && !held(&f, &tail));
        let f = Formula::learn(&texts, [], 3, k);
        assert!(held(&f, &tail));
        // The three copies joined as near-duplicates are one group: TAIL is in one.
        let f = Formula::learn(&texts, [(0, 1), (1, 2)], 2, k);
        assert!(held(&f, &lead) && !f.marks(&tail).contains(&Mark::Formula));
    }

    #[test]
    fn a_formula_artefact_reads_back_as_written_and_refuses_a_changed_one() {
        let k = AlignParams::DEFAULT.anchor;
        let texts: Vec<Letters> = (0..4)
            .map(|i| Letters::new(&[format!("{LEAD}第{i}号{TAIL}")]))
            .collect();
        let f = Formula::learn(&texts, [], 3, k).folded(false);
        assert!(!f.is_empty() && !f.fold());
        let json = serde_json::to_string(&f).unwrap();
        let back: Formula = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.id(), f.id());
        assert!(
            f.id().starts_with("fm1-") && f.id().len() == 16,
            "{}",
            f.id()
        );
        assert!(
            f.to_string().contains("in at least 3 groups of 4 texts"),
            "{f}"
        );
        for t in &texts {
            assert_eq!(back.marks(t), f.marks(t));
        }
        // A window dropped by hand: the id no longer names the windows.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["windows"].as_array_mut().unwrap().pop();
        let err = serde_json::from_value::<Formula>(v)
            .unwrap_err()
            .to_string();
        assert!(err.contains("changed by hand"), "{err}");
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["format"] = 2.into();
        assert!(serde_json::from_value::<Formula>(v).is_err());
    }

    #[test]
    fn a_formula_counted_one_text_at_a_time_marks_the_judged_texts_as_one_learned_whole() {
        let k = AlignParams::DEFAULT.anchor;
        let texts: Vec<Letters> = [
            format!("{LEAD}{TAIL}"),
            format!("{LEAD}{TAIL}"),
            format!("{THIRD}{TAIL}"),
            format!("{LEAD}{THIRD}"),
            format!("开头各不相同{LEAD}"),
            format!("{TAIL}结尾各不相同"),
        ]
        .iter()
        .map(|t| Letters::new(&[t]))
        .collect();
        let joined = [(0, 1), (2, 5)];
        assert_eq!(groups_of(texts.len(), joined), vec![vec![0, 1], vec![2, 5]]);
        for min_groups in 1..=5 {
            let whole = Formula::learn(&texts, joined, min_groups, k);
            // Only texts 0, 1, 2 and 5 are judged: the others stream past.
            let judged = [0, 1, 2, 5];
            let mut counter = FormulaCounter::restricted_to(k, judged.map(|i| &texts[i]));
            for t in &texts {
                counter.add(t);
            }
            let streamed =
                counter.finish([[&texts[0], &texts[1]], [&texts[2], &texts[5]]], min_groups);
            for i in judged {
                assert_eq!(
                    whole.marks(&texts[i]),
                    streamed.marks(&texts[i]),
                    "{min_groups}"
                );
            }
        }
    }

    #[test]
    fn boilerplate_lines_are_left_out_as_the_fingerprints_leave_them() {
        use crate::text::boilerplate::{line_hash, Boilerplate, Line};
        let footer = "本网站所刊登的各种新闻信息均只代表作者本人观点不代表本站立场转载请注明出处";
        let seg = Segmenter::new(true, true);
        let hash = line_hash(seg.clean(footer).trim());
        let bp = Boilerplate::new(
            vec![Line {
                hash,
                docs: 10,
                text: None,
            }],
            10,
            100,
        );
        let seg = seg.with_boilerplate(Some(std::sync::Arc::new(bp)));
        let page = format!("{LEAD}\n{footer}");
        let l = Letters::prepared(&[&page], &seg);
        assert_eq!(l.len(), Letters::new(&[LEAD]).len());
        let al = align_letters(&l, &Letters::new(&[LEAD]), &AlignParams::DEFAULT);
        assert_eq!(al.a_share(), 1.0);
        // A text that is all boilerplate is kept whole.
        assert_eq!(
            Letters::prepared(&[footer], &seg).len(),
            Letters::new(&[footer]).len()
        );
    }

    #[test]
    fn unrelated_texts_share_nothing() {
        let al = align(&one(LEAD), &one(TAIL), &AlignParams::DEFAULT);
        assert!(al.passages.is_empty());
        assert_eq!(al.a_covered, 0);
    }

    #[test]
    fn a_short_common_phrase_is_no_passage() {
        let a = format!("上午十点，{}", "中华人民共和国国务院");
        let b = format!("{}发布通知说明情况", "中华人民共和国国务院");
        let al = align(&one(&a), &one(&b), &AlignParams::DEFAULT);
        assert!(al.passages.is_empty(), "{al:?}");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        /// Text of Simplified ideographs drawn at random from some 20,000 (from a seed, so
        /// shrinking never makes a text of one repeated character), where a window of ten
        /// repeats by chance almost never.
        fn ideographs(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
            (any::<u64>(), len).prop_map(|(mut seed, len)| {
                let folder = Folder::shared();
                let mut out = String::new();
                while out.chars().count() < len {
                    // splitmix64
                    seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = seed;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^= z >> 31;
                    let c = char::from_u32(0x4e00 + (z % 0x5000) as u32).unwrap();
                    if !folder.is_traditional_char(c) {
                        out.push(c);
                    }
                }
                out
            })
        }

        fn check_invariants(a: &Letters, b: &Letters, al: &Alignment) {
            assert!(al.a_covered <= al.a_len && al.b_covered <= al.b_len);
            assert!(al.a_matched <= al.a_covered && al.b_matched <= al.b_covered);
            for p in &al.passages {
                assert!(p.matched >= AlignParams::DEFAULT.min_passage);
                assert_eq!(p.matched, p.runs.iter().map(|r| r.len).sum::<usize>());
                for r in &p.runs {
                    for i in 0..r.len {
                        assert_eq!(a.letter(r.a + i), b.letter(r.b + i));
                    }
                }
                for w in p.runs.windows(2) {
                    assert!(w[0].a + w[0].len <= w[1].a && w[0].b + w[0].len <= w[1].b);
                }
                assert!(p.a.start < p.a.end && p.b.start < p.b.end);
            }
        }

        /// The exact count of every window, as `FormulaCounter::new` keeps it.
        fn counted_exactly(texts: &[Letters], groups: &[Vec<usize>], min: usize) -> Formula {
            let mut c = FormulaCounter::new(AlignParams::DEFAULT.anchor);
            for t in texts {
                c.add(t);
            }
            c.finish(groups.iter().map(|g| g.iter().map(|&i| &texts[i])), min)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// A sieve, however small and however often its counters collide, never drops a
            /// window of the formula: sifted, the counter keeps exactly the windows counting
            /// every one keeps.
            #[test]
            fn a_sifted_count_learns_the_formula_every_window_gives(
                phrases in proptest::collection::vec(ideographs(12..30), 6),
                picks in proptest::collection::vec(proptest::collection::vec(0usize..6, 1..4), 4..30),
                joined in proptest::collection::vec((0usize..30, 0usize..30), 0..8),
                min in 2usize..6,
                bits in 0u32..6,
                own in ideographs(10..40),
            ) {
                let k = AlignParams::DEFAULT.anchor;
                let texts: Vec<Letters> = picks
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let mut t: String = own.chars().skip(i % 7).collect();
                        for &j in p {
                            t.push_str(&phrases[j]);
                        }
                        Letters::new(&[t])
                    })
                    .collect();
                let n = texts.len();
                let groups = groups_of(n, joined.into_iter().filter(|&(a, b)| a < n && b < n));
                let want = counted_exactly(&texts, &groups, min);
                let sieve = WindowSieve::with_bits(k, bits);
                texts.par_iter().for_each(|t| sieve.add(t));
                let mut c = FormulaCounter::sifted(sieve, min);
                for t in &texts {
                    c.add(t);
                }
                let got = c.finish(groups.iter().map(|g| g.iter().map(|&i| &texts[i])), min);
                prop_assert_eq!(got.id(), want.id());
                prop_assert_eq!(got, want);
            }

            /// The anchors are every window both texts hold, each at most `max_repeats`
            /// times in either, with all its starts in each: as merging both texts' sorted
            /// windows finds them. Phrases repeat, so that windows recur within a text.
            #[test]
            fn shared_windows_are_those_both_sorted_lists_hold(
                phrases in proptest::collection::vec(ideographs(10..16), 4),
                picks_a in proptest::collection::vec(0usize..4, 0..12),
                picks_b in proptest::collection::vec(0usize..4, 0..12),
                max_repeats in 1usize..4,
            ) {
                let k = AlignParams::DEFAULT.anchor;
                let text = |picks: &[usize]| -> Letters {
                    Letters::new(&[picks.iter().map(|&i| phrases[i].as_str()).collect::<String>()])
                };
                let (a, b) = (text(&picks_a), text(&picks_b));
                let (wa, wb) = (windows(&a, k), windows(&b, k));
                let starts = |w: &Windows, h: u64| -> Vec<u32> {
                    w.iter().filter(|e| e.0 == h).map(|e| e.1).collect()
                };
                let mut want: Vec<(Vec<u32>, Vec<u32>)> = wa
                    .iter()
                    .map(|e| e.0)
                    .collect::<std::collections::BTreeSet<u64>>()
                    .into_iter()
                    .map(|h| (starts(&wa, h), starts(&wb, h)))
                    .filter(|(sa, sb)| !sb.is_empty() && sa.len() <= max_repeats && sb.len() <= max_repeats)
                    .collect();
                let mut got: Vec<(Vec<u32>, Vec<u32>)> = shared_windows(&wa, &b, k, max_repeats)
                    .into_iter()
                    .map(|(pa, pb)| (pa.iter().map(|e| e.1).collect(), pb))
                    .collect();
                want.sort();
                got.sort();
                prop_assert_eq!(got, want);
            }

            #[test]
            fn a_text_aligns_whole_with_itself(text in ideographs(20..400)) {
                let l = Letters::new(&[&text]);
                let al = align_letters(&l, &l, &AlignParams::DEFAULT);
                check_invariants(&l, &l, &al);
                prop_assert_eq!(al.passages.len(), 1);
                prop_assert_eq!(al.a_covered, l.len());
            }

            #[test]
            fn a_passage_copied_into_another_text_is_found_where_it_is(
                source in ideographs(100..400),
                before in ideographs(0..200),
                after in ideographs(0..200),
                start in 0.0f64..0.7,
                share in 0.1f64..0.3,
            ) {
                let chars: Vec<char> = source.chars().collect();
                let from = (start * chars.len() as f64) as usize;
                let to = (from + (share * chars.len() as f64) as usize).max(from + 20).min(chars.len());
                let passage: String = chars[from..to].iter().collect();
                let copy = format!("{before}，{passage}。{after}");
                let (la, lb) = (Letters::new(&[&source]), Letters::new(&[&copy]));
                let al = align_letters(&la, &lb, &AlignParams::DEFAULT);
                check_invariants(&la, &lb, &al);
                if to - from >= AlignParams::DEFAULT.min_passage {
                    let before_len = before.chars().count();
                    let p = al.passages.iter().max_by_key(|p| p.matched).unwrap();
                    // The copied characters, give or take one that the texts around happen
                    // to share.
                    prop_assert!(p.a.start <= from && p.a.end >= to, "{:?} {}..{}", p, from, to);
                    prop_assert!(p.a.start + 1 >= from && p.a.end <= to + 1);
                    prop_assert!((before_len..=before_len + 1).contains(&p.b.start));
                    prop_assert!(al.b_covered >= to - from);
                }
            }

            #[test]
            fn any_texts_keep_the_invariants(a in ".{0,300}", b in ".{0,300}") {
                let (la, lb) = (Letters::new(&[&a]), Letters::new(&[&b]));
                let al = align_letters(&la, &lb, &AlignParams::DEFAULT);
                check_invariants(&la, &lb, &al);
            }

            #[test]
            fn either_order_gives_the_same_alignment_turned_round(
                shared in ideographs(20..200),
                a in ideographs(0..300),
                b in ideographs(0..300),
                c in ideographs(0..100),
            ) {
                // Two texts sharing a passage, one of them also repeating a piece of it.
                let piece: String = shared.chars().take(30).collect();
                let x = format!("{a}{shared}{c}");
                let y = format!("{piece}{b}{shared}");
                let (lx, ly) = (Letters::new(&[&x]), Letters::new(&[&y]));
                let there = align_letters(&lx, &ly, &AlignParams::DEFAULT);
                let back = align_letters(&ly, &lx, &AlignParams::DEFAULT);
                check_invariants(&ly, &lx, &back);
                prop_assert_eq!(there.swapped(), back);
            }
        }
    }
}

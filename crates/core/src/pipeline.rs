//! Fingerprinting a stream of JSON Lines articles on all cores, in input order.
//!
//! Lines are read in batches (bounded in count and bytes, so memory stays bounded whatever the
//! input size), each batch is parsed and fingerprinted in parallel, and results are handed to
//! the caller's sink in the order of the input.

use rayon::prelude::*;

use std::collections::HashMap;

use crate::align::{AlignParams, Formula, FormulaCounter, Letters, TextWindows, WindowSieve};
use crate::allpairs::aligned::{self, AlignedPair, FoundBy};
use crate::fingerprint::{Fingerprinter, Methods, Outcome, Sketches};
use crate::input::{
    parse_article, parse_line, Article, Body, DocId, InputError, InputErrorKind, InputSpec, Lines,
    Source,
};
use crate::minhash::Signature;
use crate::relation::AlignRule;
use crate::text::Boilerplate;

/// One input line's result.
#[derive(Debug)]
pub enum Item {
    /// A document and its fingerprint (or why it has none).
    Doc {
        line: u64,
        id: DocId,
        /// The sketches of the methods in [`PipelineOptions::methods`].
        sketches: Sketches,
    },
    /// A line that is not a valid document.
    Bad(InputError),
}

/// What to compute, and batch limits; the defaults keep about 16 MB of input in flight.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    pub batch_lines: usize,
    pub batch_bytes: usize,
    /// The methods whose sketches each document gets.
    pub methods: Methods,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            batch_lines: 2048,
            batch_bytes: 16 << 20,
            methods: Methods::BOTH,
        }
    }
}

impl PipelineOptions {
    /// The default limits, computing `methods`.
    pub fn with_methods(methods: Methods) -> Self {
        PipelineOptions {
            methods,
            ..PipelineOptions::default()
        }
    }
}

/// Counts of what a run saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub documents: u64,
    pub fingerprinted: u64,
    pub too_short: u64,
    pub bad_lines: u64,
    /// UTF-8 bytes of input lines read.
    pub bytes: u64,
}

impl Counts {
    /// Adds one item to the counts.
    pub fn count(&mut self, item: &Item) {
        match item {
            Item::Doc { sketches, .. } => {
                self.documents += 1;
                match sketches.too_short() {
                    None => self.fingerprinted += 1,
                    Some(_) => self.too_short += 1,
                }
            }
            Item::Bad(_) => self.bad_lines += 1,
        }
    }
}

/// The SimHash fingerprint of one parsed document.
pub fn fingerprint_body(fp: &Fingerprinter, body: &Body) -> Outcome {
    match body {
        Body::Fields(fields) => fp.fingerprint_fields(fields),
        Body::Tokens(tokens) => fp.fingerprint_tokens(tokens),
    }
}

/// The sketches of one parsed document.
pub fn sketch_body(fp: &Fingerprinter, methods: Methods, body: &Body) -> Sketches {
    match body {
        Body::Fields(fields) => fp.sketch_fields(methods, fields),
        Body::Tokens(tokens) => fp.sketch_tokens(methods, tokens),
    }
}

/// Reads `source` to the end, fingerprinting on the current rayon pool, and calls `sink` with
/// every item in input order. `progress` is called after each batch. Returns early with the
/// sink's error if it fails (e.g. `--strict` on a bad line, or a closed output).
pub fn run<E>(
    source: Source,
    spec: &InputSpec,
    fp: &Fingerprinter,
    opts: &PipelineOptions,
    mut progress: impl FnMut(&Counts),
    mut sink: impl FnMut(Item) -> Result<(), E>,
) -> Result<Counts, E> {
    let name = source.name.clone();
    let mut lines = Lines::new(source.reader);
    let mut counts = Counts::default();
    loop {
        let mut batch = Vec::with_capacity(opts.batch_lines);
        let mut bytes = 0usize;
        for (line, raw) in lines.by_ref() {
            bytes += raw.as_ref().map_or(0, Vec::len);
            batch.push((line, raw));
            if batch.len() >= opts.batch_lines || bytes >= opts.batch_bytes {
                break;
            }
        }
        if batch.is_empty() {
            return Ok(counts);
        }
        counts.bytes += bytes as u64;
        let items: Vec<Item> = batch
            .into_par_iter()
            .map(|(line, raw)| {
                let parsed = raw
                    .map_err(|e| InputErrorKind::from_io(&e))
                    .and_then(|b| parse_line(&b, spec));
                match parsed {
                    Ok(doc) => Item::Doc {
                        line,
                        sketches: sketch_body(fp, opts.methods, &doc.body),
                        id: doc.id,
                    },
                    Err(kind) => Item::Bad(InputError {
                        source_name: name.clone(),
                        line,
                        kind,
                    }),
                }
            })
            .collect();
        for item in items {
            counts.count(&item);
            sink(item)?;
        }
        progress(&counts);
    }
}

/// Learns boilerplate ([`crate::text::boilerplate`]) from the text documents of `source`,
/// preparing text as `fp` does: at most `sample` documents, a line counting when at least
/// `min_docs` hold it (default: see [`crate::text::boilerplate::Learner::finish`]). Lines
/// that are not documents and pre-tokenized documents are skipped: the fingerprinting pass
/// reports them. `None` when no line recurs enough, so the versions stay those without
/// boilerplate.
pub fn learn_boilerplate(
    source: Source,
    spec: &InputSpec,
    fp: &Fingerprinter,
    sample: usize,
    min_docs: Option<usize>,
) -> Option<Boilerplate> {
    let mut learner = fp.boilerplate_learner(sample);
    for (_, raw) in Lines::new(source.reader) {
        let Ok(raw) = raw else { break };
        if let Some(article) = text_article(&raw, spec) {
            learner.add(&article.texts);
        }
        if learner.is_full() {
            break;
        }
    }
    Some(learner.finish(min_docs)).filter(|b| !b.is_empty())
}

/// What alignment decided for the candidates of an input ([`align_candidates`]).
#[derive(Debug)]
pub struct AlignedInput {
    /// The candidates it relates, in order: copies and shared passages, with their passages.
    pub pairs: Vec<AlignedPair>,
    /// Texts read for the candidates (each once).
    pub texts: usize,
    /// Candidates only the anchors found (beside those given).
    pub anchor_candidates: usize,
    /// Formula windows used (given, or learned from the input).
    pub formula_windows: usize,
    /// The formula's id.
    pub formula_id: String,
}

/// Alignment decides what MinHash and the anchors found ([`crate::allpairs::aligned`]) for
/// an input read again from `open`: `lines` gives the input line of each position the
/// candidates `(a, b, similarity)` and the signatures `sigs` name. One more pass reads every
/// text document for its anchors, keeps the letters of the candidates' texts (and no other)
/// and, without a `formula`, sifts its windows; a second prepares the texts of the pairs
/// only the anchors found (and, without a `formula`, counts the windows the sieve kept over
/// every text: the formula [`learn_formula`] learns). Memory grows with the
/// candidates and with the anchors (about 1.3 KB a text of news). Pre-tokenized documents
/// have no text to align: their pairs are left out. The pairs come in the order of `(a, b)`.
#[allow(clippy::too_many_arguments)]
pub fn align_candidates(
    open: impl Fn() -> crate::Result<Source>,
    spec: &InputSpec,
    fp: &Fingerprinter,
    lines: &[u64],
    sigs: &[Signature],
    candidates: &[(u32, u32, f64)],
    rule: &AlignRule,
    formula: Option<&Formula>,
) -> crate::Result<AlignedInput> {
    let anchor = AlignParams::DEFAULT.anchor;
    let source = match formula {
        Some(f) => FormulaSource::Given(f),
        None => FormulaSource::Sifting(WindowSieve::for_texts(anchor, lines.len())),
    };
    let mut prepared = Prepared::new(lines.len());
    let mut anchors = aligned::AnchorIndex::default();
    prepared.read_every_text(
        file_texts(open()?, spec),
        fp,
        lines,
        candidates,
        source.sieve(),
        Some(&mut anchors),
    );
    prepared.align(candidates);
    let by_anchors = aligned::anchor_candidates(anchors, candidates, |a, b| {
        Some(sigs[a as usize].similarity(&sigs[b as usize]))
    });
    let formula = match source {
        FormulaSource::Given(f) => {
            prepared.add_texts(file_texts(open()?, spec), fp, lines, &by_anchors, None);
            std::borrow::Cow::Borrowed(f)
        }
        FormulaSource::Sifting(sieve) => {
            let mut counter = FormulaCounter::sifted(sieve, aligned::FORMULA_GROUPS);
            prepared.add_texts(
                file_texts(open()?, spec),
                fp,
                lines,
                &by_anchors,
                Some(&mut counter),
            );
            // The groups are MinHash's candidates', as `formula learn` counts them.
            std::borrow::Cow::Owned(prepared.formula_of(counter, fp))
        }
    };
    let anchored = {
        let letters = &prepared.letters;
        aligned::align_pairs(&by_anchors, |i| letters[i as usize].as_ref())
    };
    let Prepared { letters, aligned } = prepared;
    let text = |i: u32| letters[i as usize].as_ref();
    let mut pairs = aligned::judge(
        [(aligned, FoundBy::MinHash), (anchored, FoundBy::Anchors)],
        text,
        &formula,
        rule,
    );
    pairs.sort_by_key(|p| (p.a, p.b));
    Ok(AlignedInput {
        pairs,
        texts: letters.iter().flatten().count(),
        anchor_candidates: by_anchors.len(),
        formula_windows: formula.len(),
        formula_id: formula.id(),
    })
}

/// Where [`align_candidates`] gets its formula: given, or learned from every text (a sieve
/// first, then exact counts of the windows it keeps).
enum FormulaSource<'a> {
    Given(&'a Formula),
    Sifting(WindowSieve),
}

impl FormulaSource<'_> {
    /// The sieve the first pass fills, when the formula is learned.
    fn sieve(&self) -> Option<&WindowSieve> {
        match self {
            FormulaSource::Given(_) => None,
            FormulaSource::Sifting(s) => Some(s),
        }
    }
}

/// The formula windows of an input read from `open` (three passes: sketches, every text
/// sifted with the letters of MinHash's candidates kept, then every text counted): what
/// `dedupe --align` learns, written as an artefact by `neardup formula learn`.
pub fn learn_formula(
    open: impl Fn() -> crate::Result<Source>,
    spec: &InputSpec,
    fp: &Fingerprinter,
) -> crate::Result<Formula> {
    let mut lines = Vec::new();
    let mut sigs = Vec::new();
    let opts = PipelineOptions::with_methods(Methods::only(crate::Method::MinHash));
    let counted = run(
        open()?,
        spec,
        fp,
        &opts,
        |_| {},
        |item| {
            if let Item::Doc {
                line,
                sketches:
                    Sketches {
                        minhash: Some(Ok(f)),
                        ..
                    },
                ..
            } = item
            {
                lines.push(line);
                sigs.push(f.signature);
            }
            Ok::<(), std::convert::Infallible>(())
        },
    );
    let Ok(_) = counted;
    let texts = || Ok(file_texts(open()?, spec));
    learn_formula_from(texts, fp, &lines, &sigs)
}

/// [`learn_formula`] of texts held in memory (the text fields of each document), e.g. read
/// from an Elasticsearch index: what `neardup formula learn --index` writes.
pub fn learn_formula_of_texts(texts: &[Vec<String>], fp: &Fingerprinter) -> Formula {
    let sketched: Vec<(u64, Signature)> = texts
        .par_iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let s = fp.sketch_fields(Methods::only(crate::Method::MinHash), t);
            Some((i as u64, s.minhash?.ok()?.signature))
        })
        .collect();
    let (keys, sigs): (Vec<u64>, Vec<Signature>) = sketched.into_iter().unzip();
    let items = || {
        Ok::<_, std::convert::Infallible>(
            texts.iter().enumerate().map(|(i, t)| (i as u64, t.clone())),
        )
    };
    let Ok(f) = learn_formula_from(items, fp, &keys, &sigs);
    f
}

/// The passes of [`learn_formula`] after the sketches: `keys[i]` is the key `texts` gives
/// the text of `sigs[i]`.
fn learn_formula_from<I: Iterator<Item = (u64, Vec<String>)>, E>(
    texts: impl Fn() -> Result<I, E>,
    fp: &Fingerprinter,
    keys: &[u64],
    sigs: &[Signature],
) -> Result<Formula, E> {
    let candidates: Vec<(u32, u32, f64)> = aligned::candidates(sigs, fp.minhasher().params())
        .pairs()
        .collect();
    // Every window could be formula: a sieve first, so that only those that recur are
    // counted exactly (the same formula, in the memory of the windows that recur). The
    // same pass keeps the candidates' texts.
    let sieve = WindowSieve::for_texts(AlignParams::DEFAULT.anchor, keys.len());
    let mut prepared = Prepared::new(keys.len());
    prepared.read_every_text(texts()?, fp, keys, &candidates, Some(&sieve), None);
    prepared.align(&candidates);
    let counter = FormulaCounter::sifted(sieve, aligned::FORMULA_GROUPS);
    Ok(prepared.count_formula(texts()?, fp, counter))
}

/// The candidates' texts and their alignments.
struct Prepared {
    /// By input position: the letters of the texts of some candidate.
    letters: Vec<Option<Letters>>,
    aligned: Vec<(u32, u32, f64, crate::align::Alignment)>,
}

impl Prepared {
    /// No texts yet, for `n` positions.
    fn new(n: usize) -> Prepared {
        Prepared {
            letters: vec![None; n],
            aligned: Vec::new(),
        }
    }

    /// Aligns `candidates`, whose texts are held.
    fn align(&mut self, candidates: &[(u32, u32, f64)]) {
        let letters = &self.letters;
        self.aligned = aligned::align_pairs(candidates, |i| letters[i as usize].as_ref());
    }

    /// The keys of the texts of `candidates` not yet held, with their positions.
    fn wanted(&self, keys: &[u64], candidates: &[(u32, u32, f64)]) -> HashMap<u64, u32> {
        candidates
            .iter()
            .flat_map(|&(a, b, _)| [a, b])
            .filter(|&i| self.letters[i as usize].is_none())
            .map(|i| (keys[i as usize], i))
            .collect()
    }

    /// Reads every text of `texts` (`keys[i]` is the key `texts` gives the text of position
    /// `i`) in one pass: keeps the letters of the texts of `candidates`, counts each text's
    /// windows in `sieve` (on the cores that prepare the texts) and files each text's
    /// anchors in `anchors` under its position.
    fn read_every_text(
        &mut self,
        texts: impl Iterator<Item = (u64, Vec<String>)>,
        fp: &Fingerprinter,
        keys: &[u64],
        candidates: &[(u32, u32, f64)],
        sieve: Option<&WindowSieve>,
        mut anchors: Option<&mut aligned::AnchorIndex>,
    ) {
        let anchor = AlignParams::DEFAULT.anchor;
        let wanted = self.wanted(keys, candidates);
        let position: HashMap<u64, u32> = match anchors {
            Some(_) => keys
                .iter()
                .enumerate()
                .map(|(i, &key)| (key, i as u32))
                .collect(),
            None => HashMap::new(),
        };
        let with_anchors = anchors.is_some();
        let letters = &mut self.letters;
        for_each_text(
            texts,
            |_| true,
            |fields| {
                let l = Letters::prepared(fields, fp.segmenter());
                let hashes: Vec<u64> = l.windows(anchor).map(|(_, h)| h).collect();
                let a = with_anchors.then(|| aligned::anchors_of_windows(&hashes));
                if let Some(s) = sieve {
                    s.add_windows(&TextWindows::from_hashes(anchor, hashes));
                }
                (l, a)
            },
            |key, (l, a)| {
                if let (Some(index), Some(a), Some(&i)) =
                    (anchors.as_deref_mut(), a, position.get(&key))
                {
                    index.add(i, &a);
                }
                if let Some(&i) = wanted.get(&key) {
                    letters[i as usize] = Some(l);
                }
            },
        );
    }

    /// Prepares the texts of `candidates` not yet held (`keys[i]` is the key `texts` gives
    /// the text of position `i`); with a `counter`, every text of `texts` is counted by it
    /// in the same pass.
    fn add_texts(
        &mut self,
        texts: impl Iterator<Item = (u64, Vec<String>)>,
        fp: &Fingerprinter,
        keys: &[u64],
        candidates: &[(u32, u32, f64)],
        mut counter: Option<&mut FormulaCounter>,
    ) {
        let wanted = self.wanted(keys, candidates);
        if wanted.is_empty() && counter.is_none() {
            return;
        }
        let sifter = counter.as_ref().map(|c| c.sifter());
        let letters = &mut self.letters;
        for_each_text(
            texts,
            |line| sifter.is_some() || wanted.contains_key(&line),
            |fields| {
                let l = Letters::prepared(fields, fp.segmenter());
                let w = sifter.as_ref().map(|s| s.windows(&l));
                (l, w)
            },
            |line, (l, w)| {
                if let (Some(c), Some(w)) = (counter.as_deref_mut(), &w) {
                    c.add_windows(w);
                }
                if let Some(&i) = wanted.get(&line) {
                    letters[i as usize] = Some(l);
                }
            },
        );
    }

    /// The formula: every text document of `texts` counted by `counter`, the candidates'
    /// groups once.
    fn count_formula(
        &mut self,
        texts: impl Iterator<Item = (u64, Vec<String>)>,
        fp: &Fingerprinter,
        mut counter: FormulaCounter,
    ) -> Formula {
        self.add_texts(texts, fp, &[], &[], Some(&mut counter));
        self.formula_of(counter, fp)
    }

    /// The formula of a `counter` that has counted every text, the candidates' groups once.
    fn formula_of(&self, counter: FormulaCounter, fp: &Fingerprinter) -> Formula {
        let groups =
            crate::align::groups_of(self.letters.len(), aligned::joined_pairs(&self.aligned));
        counter
            .finish(
                groups
                    .iter()
                    .map(|g| g.iter().filter_map(|&i| self.letters[i].as_ref())),
                aligned::FORMULA_GROUPS,
            )
            .folded(fp.config().fold)
    }
}

/// The text documents of an input, as (line, text fields), in order. Lines that are not
/// text documents are skipped (the fingerprinting pass reported them).
fn file_texts(source: Source, spec: &InputSpec) -> impl Iterator<Item = (u64, Vec<String>)> + '_ {
    Lines::new(source.reader)
        .filter_map(move |(line, raw)| Some((line, text_article(&raw.ok()?, spec)?.texts)))
}

/// A line as an article to read the text of; `None` where it is not one (a line that does
/// not parse, or an input of pre-tokenized documents, which carry no text).
fn text_article(raw: &[u8], spec: &InputSpec) -> Option<Article> {
    if spec.pre_tokenized {
        return None;
    }
    parse_article(raw, &spec.id_field, &spec.text_fields).ok()
}

/// Calls `sink` with `prepare` of every text of `texts` whose key `keep` admits, in order,
/// preparing a batch on all cores.
fn for_each_text<T: Send>(
    mut texts: impl Iterator<Item = (u64, Vec<String>)>,
    keep: impl Fn(u64) -> bool,
    prepare: impl Fn(&[String]) -> T + Sync,
    mut sink: impl FnMut(u64, T),
) {
    let opts = PipelineOptions::default();
    loop {
        let mut batch = Vec::with_capacity(opts.batch_lines);
        let mut bytes = 0usize;
        for (key, fields) in texts.by_ref() {
            if !keep(key) {
                continue;
            }
            bytes += fields.iter().map(String::len).sum::<usize>();
            batch.push((key, fields));
            if batch.len() >= opts.batch_lines || bytes >= opts.batch_bytes {
                break;
            }
        }
        if batch.is_empty() {
            return;
        }
        let prepared: Vec<(u64, T)> = batch
            .into_par_iter()
            .map(|(key, fields)| (key, prepare(&fields)))
            .collect();
        for (key, t) in prepared {
            sink(key, t);
        }
    }
}

//! Fingerprinting a stream of JSON Lines articles on all cores, in input order.
//!
//! Lines are read in batches (bounded in count and bytes, so memory stays bounded whatever the
//! input size), each batch is parsed and fingerprinted in parallel, and results are handed to
//! the caller's sink in the order of the input.

use rayon::prelude::*;

use crate::fingerprint::{Fingerprinter, Methods, Outcome, Sketches};
use crate::input::{parse_line, Body, DocId, InputError, InputErrorKind, InputSpec, Lines, Source};
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
            let len = raw.as_ref().map_or(0, Vec::len);
            bytes += len;
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
        if let Ok(doc) = parse_line(&raw, spec) {
            if let Body::Fields(fields) = &doc.body {
                learner.add(fields);
            }
        }
        if learner.is_full() {
            break;
        }
    }
    Some(learner.finish(min_docs)).filter(|b| !b.is_empty())
}

//! Reading articles from JSON Lines, with errors that name the line and the fix.
//!
//! One bad line never loses the others: readers report it with its line number and carry on,
//! and the caller decides whether to stop (`--strict`) or count it.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};

/// The text fields an article is read from unless told otherwise, joined in this order: the
/// design card's `title` and `content`. Every path's default (input files, Elasticsearch
/// writers and lookups, duplicate groups linked by texts, the service) is this one.
pub const DEFAULT_TEXT_FIELDS: [&str; 2] = ["title", "content"];

/// [`DEFAULT_TEXT_FIELDS`] as owned names.
pub fn default_text_fields() -> Vec<String> {
    DEFAULT_TEXT_FIELDS.map(str::to_owned).to_vec()
}

/// Which JSON fields hold the id and the text.
#[derive(Clone, Debug)]
pub struct InputSpec {
    pub id_field: String,
    /// Text fields, joined in this order (each starts a new line).
    pub text_fields: Vec<String>,
    /// Read `{"id": .., "tokens": [..]}` instead of text fields.
    pub pre_tokenized: bool,
}

impl Default for InputSpec {
    fn default() -> Self {
        InputSpec {
            id_field: "id".into(),
            text_fields: default_text_fields(),
            pre_tokenized: false,
        }
    }
}

/// A document id as given in the input: a JSON string or integer, echoed back as it came.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DocId(pub Value);

impl DocId {
    /// The id as a string key (integers in decimal).
    pub fn key(&self) -> String {
        match &self.0 {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Value::String(s) => f.write_str(s),
            other => write!(f, "{other}"),
        }
    }
}

impl From<&str> for DocId {
    fn from(s: &str) -> Self {
        DocId(Value::String(s.to_owned()))
    }
}

/// What a document carries to be fingerprinted.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// Text fields in the order of [`InputSpec::text_fields`]; absent fields are skipped.
    Fields(Vec<String>),
    /// Words segmented elsewhere.
    Tokens(Vec<String>),
}

/// One parsed input line.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub id: DocId,
    pub body: Body,
}

/// An article read for its text (what reading without [`InputSpec::pre_tokenized`] gives):
/// its id and its text fields ([`parse_article`], [`articles`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Article {
    pub id: DocId,
    /// Text fields in the order of [`InputSpec::text_fields`]; absent fields are skipped.
    pub texts: Vec<String>,
}

/// A line that could not be read as a document.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}:{line}: {kind}")]
pub struct InputError {
    /// The file name, or `<stdin>`.
    pub source_name: String,
    /// 1-based line number.
    pub line: u64,
    pub kind: InputErrorKind,
}

/// What was wrong with a line.
#[derive(Debug, thiserror::Error)]
pub enum InputErrorKind {
    #[error("not valid UTF-8 (byte {valid_up_to}); re-encode the file as UTF-8")]
    NotUtf8 { valid_up_to: usize },
    #[error("not valid JSON: {0}")]
    NotJson(String),
    #[error("expected a JSON object, one article per line")]
    NotObject,
    #[error(
        "no `{0}` field: every line needs an id (string or integer); set another with --id-field"
    )]
    MissingId(String),
    #[error("`{0}` must be a string or an integer")]
    BadId(String),
    #[error("none of the text fields {0:?} is present; name the right ones with --field")]
    MissingText(Vec<String>),
    #[error("{0}")]
    BadText(BadTextField),
    #[error("`tokens` must be an array of strings (pre-tokenized input)")]
    BadTokens,
    #[error("line longer than {limit} bytes; skipped (is this JSON Lines, one article per line?)")]
    TooLong { limit: usize },
    #[error(
        "read error: {0}; nothing after this point is read (is the file truncated or corrupt?)"
    )]
    Io(String),
}

impl InputErrorKind {
    /// The kind of an error from [`Lines`]: a line over the cap, or a failed read.
    pub fn from_io(e: &io::Error) -> InputErrorKind {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<LineTooLong>())
        {
            Some(t) => InputErrorKind::TooLong { limit: t.limit },
            None => InputErrorKind::Io(e.to_string()),
        }
    }
}

/// The largest line [`Lines`] reads by default (32 MiB): longer ones are skipped and
/// reported, so a file without newlines never becomes one allocation of its whole size.
pub const MAX_LINE_BYTES: usize = 32 << 20;

/// The error [`Lines`] yields, as an `io::Error` of kind `InvalidData`, for a line over its
/// cap; reading goes on with the next line.
#[derive(Debug, thiserror::Error)]
#[error("line longer than {limit} bytes")]
pub struct LineTooLong {
    pub limit: usize,
}

/// Parses one line (without its newline) into a document.
pub fn parse_line(bytes: &[u8], spec: &InputSpec) -> Result<Document, InputErrorKind> {
    let mut obj = json_object(bytes)?;
    if !spec.pre_tokenized {
        let article = article_of(obj, &spec.id_field, &spec.text_fields)?;
        return Ok(Document {
            id: article.id,
            body: Body::Fields(article.texts),
        });
    }
    let id = take_id(&mut obj, &spec.id_field)?;
    let body = match obj.remove("tokens") {
        Some(Value::Array(items)) => Body::Tokens(
            items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(InputErrorKind::BadTokens),
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(InputErrorKind::BadTokens),
    };
    Ok(Document { id, body })
}

/// Parses one line (without its newline) into an article: its id (`id_field`) and its
/// `text_fields`, as [`parse_line`] reads a document without
/// [`InputSpec::pre_tokenized`].
pub fn parse_article(
    bytes: &[u8],
    id_field: &str,
    text_fields: &[String],
) -> Result<Article, InputErrorKind> {
    article_of(json_object(bytes)?, id_field, text_fields)
}

/// A line as a JSON object.
fn json_object(bytes: &[u8]) -> Result<Map<String, Value>, InputErrorKind> {
    let text = std::str::from_utf8(bytes).map_err(|e| InputErrorKind::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| InputErrorKind::NotJson(e.to_string()))?;
    match value {
        Value::Object(obj) => Ok(obj),
        _ => Err(InputErrorKind::NotObject),
    }
}

/// The article a JSON object holds: its id and its text fields, at least one of them there.
fn article_of(
    mut obj: Map<String, Value>,
    id_field: &str,
    text_fields: &[String],
) -> Result<Article, InputErrorKind> {
    let id = take_id(&mut obj, id_field)?;
    let obj = Value::Object(obj);
    if text_fields
        .iter()
        .all(|f| lookup(&obj, f).is_none_or(Value::is_null))
    {
        return Err(InputErrorKind::MissingText(text_fields.to_vec()));
    }
    let texts = field_texts(&obj, text_fields).map_err(InputErrorKind::BadText)?;
    Ok(Article {
        id,
        texts: texts.into_iter().map(str::to_owned).collect(),
    })
}

/// A text field that holds something other than text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("text field `{field}` holds {holds}, not a string (or an array of strings)")]
pub struct BadTextField {
    pub field: String,
    /// `a number`, `a boolean` or `an object`.
    pub holds: &'static str,
}

/// The texts of a document's text fields, in order: the one document-to-text rule of
/// `fingerprint`, `index`, `check`, `similar --input`, the worker, the back-fill and
/// `neardup_es::Similar`, so a document gets the same fingerprint whichever reads it.
///
/// Each field is looked up by its exact key, else as a dotted path (`body.text`). An absent
/// or `null` field is skipped; a string is one text; an array gives its strings in order
/// (nested arrays too; `null`s skipped). A number, boolean or object is an error naming the
/// field: it is not text, and guessing a text for it would make fingerprints differ.
pub fn field_texts<'a>(doc: &'a Value, fields: &[String]) -> Result<Vec<&'a str>, BadTextField> {
    match doc {
        Value::Object(obj) => object_texts(obj, fields),
        _ => Ok(Vec::new()),
    }
}

/// [`field_texts`] of a JSON object.
pub fn object_texts<'a>(
    obj: &'a Map<String, Value>,
    fields: &[String],
) -> Result<Vec<&'a str>, BadTextField> {
    fn collect<'a>(v: &'a Value, field: &str, out: &mut Vec<&'a str>) -> Result<(), BadTextField> {
        let holds = match v {
            Value::Null => return Ok(()),
            Value::String(s) => {
                out.push(s);
                return Ok(());
            }
            Value::Array(items) => {
                return items.iter().try_for_each(|x| collect(x, field, out));
            }
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::Object(_) => "an object",
        };
        Err(BadTextField {
            field: field.to_owned(),
            holds,
        })
    }
    let mut out = Vec::with_capacity(fields.len());
    for field in fields {
        let found = obj.get(field.as_str()).or_else(|| {
            let (head, rest) = field.split_once('.')?;
            lookup(obj.get(head)?, rest)
        });
        if let Some(v) = found {
            collect(v, field, &mut out)?;
        }
    }
    Ok(out)
}

/// The value at a dotted path; an exact key containing dots wins over the path.
pub fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(v) = doc.get(path) {
        return Some(v);
    }
    let (head, rest) = path.split_once('.')?;
    lookup(doc.get(head)?, rest)
}

fn take_id(obj: &mut Map<String, Value>, field: &str) -> Result<DocId, InputErrorKind> {
    match obj.remove(field) {
        Some(v @ Value::String(_)) => Ok(DocId(v)),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(DocId(Value::Number(n))),
        Some(_) => Err(InputErrorKind::BadId(field.to_owned())),
        None => Err(InputErrorKind::MissingId(field.to_owned())),
    }
}

/// An opened input: a buffered reader plus what progress reporting needs.
pub struct Source {
    pub name: String,
    pub reader: Box<dyn BufRead + Send>,
    /// Size in bytes of a regular file (compressed size for `.gz`), for progress bars.
    pub len: Option<u64>,
    /// Bytes read from the file so far (compressed bytes for `.gz`), to compare with `len`.
    pub position: Arc<AtomicU64>,
    pub is_stdin: bool,
}

/// Counts bytes as they are read, for progress on compressed inputs.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens `path`, `-` for standard input. Files ending in `.gz` are decompressed on the fly.
pub fn open(path: &str) -> crate::Result<Source> {
    if path == "-" {
        return Ok(Source {
            name: "<stdin>".into(),
            reader: Box::new(BufReader::with_capacity(1 << 20, io::stdin())),
            len: None,
            position: Arc::default(),
            is_stdin: true,
        });
    }
    let io_err = |source| crate::Error::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let len = file.metadata().ok().map(|m| m.len());
    let position = Arc::<AtomicU64>::default();
    let file = Counting {
        inner: file,
        read: Arc::clone(&position),
    };
    let reader: Box<dyn BufRead + Send> = if Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
    {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(BufReader::new(file)),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, file))
    };
    Ok(Source {
        name: path.to_owned(),
        reader,
        len,
        position,
        is_stdin: false,
    })
}

/// Raw lines of a source with their 1-based numbers; blank lines are skipped. Reads as bytes
/// so a line that is not UTF-8 is reported, not fatal. A line over the cap
/// ([`MAX_LINE_BYTES`]) is skipped without being held in memory and reported as a
/// [`LineTooLong`] error; a read error (a truncated `.gz`, a failing disk) is reported once
/// and ends the iteration.
pub struct Lines<R> {
    reader: R,
    line: u64,
    max_line: usize,
    failed: bool,
    /// Bytes consumed from the (decompressed) stream so far.
    pub consumed: u64,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R) -> Self {
        Lines {
            reader,
            line: 0,
            max_line: MAX_LINE_BYTES,
            failed: false,
            consumed: 0,
        }
    }

    /// Sets the longest line read, in bytes (newline excluded).
    pub fn max_line_bytes(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }

    /// Reads one line into `buf`, newline included, keeping at most `max_line` bytes of it
    /// (plus the newline). Returns the bytes consumed and whether the line was too long.
    fn read_line(&mut self, buf: &mut Vec<u8>) -> io::Result<(usize, bool)> {
        let mut consumed = 0;
        let mut too_long = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok((consumed, too_long));
            }
            let (n, end) = match memchr::memchr(b'\n', available) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if !too_long {
                let content = n - usize::from(end);
                if buf.len() + content > self.max_line {
                    too_long = true;
                    *buf = Vec::new();
                } else {
                    buf.extend_from_slice(&available[..n]);
                }
            }
            self.reader.consume(n);
            consumed += n;
            if end {
                return Ok((consumed, too_long));
            }
        }
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = (u64, io::Result<Vec<u8>>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let mut buf = Vec::new();
            match self.read_line(&mut buf) {
                Ok((0, _)) => return None,
                Ok((n, true)) => {
                    self.line += 1;
                    self.consumed += n as u64;
                    let limit = self.max_line;
                    return Some((
                        self.line,
                        Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            LineTooLong { limit },
                        )),
                    ));
                }
                Ok((n, false)) => {
                    self.line += 1;
                    self.consumed += n as u64;
                    while matches!(buf.last(), Some(b'\n' | b'\r')) {
                        buf.pop();
                    }
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some((self.line, Ok(buf)));
                }
                Err(e) => {
                    self.line += 1;
                    self.failed = true;
                    return Some((self.line, Err(e)));
                }
            }
        }
    }
}

/// The documents of `reader`, parsed one line at a time as the iterator is advanced (nothing
/// is read ahead): a caller that wants one article reads two items, not the whole file.
pub fn documents<'a>(
    reader: impl Read + 'a,
    name: &'a str,
    spec: &'a InputSpec,
) -> impl Iterator<Item = Result<Document, InputError>> + 'a {
    Lines::new(BufReader::new(reader)).map(move |(line, raw)| {
        raw.map_err(|e| InputErrorKind::from_io(&e))
            .and_then(|b| parse_line(&b, spec))
            .map_err(|kind| InputError {
                source_name: name.to_owned(),
                line,
                kind,
            })
    })
}

/// The articles of `reader` (each line read as [`parse_article`] reads it), one line at a
/// time as the iterator is advanced, as [`documents`] reads documents.
pub fn articles<'a>(
    reader: impl Read + 'a,
    name: &'a str,
    id_field: &'a str,
    text_fields: &'a [String],
) -> impl Iterator<Item = Result<Article, InputError>> + 'a {
    Lines::new(BufReader::new(reader)).map(move |(line, raw)| {
        raw.map_err(|e| InputErrorKind::from_io(&e))
            .and_then(|b| parse_article(&b, id_field, text_fields))
            .map_err(|kind| InputError {
                source_name: name.to_owned(),
                line,
                kind,
            })
    })
}

/// Reads all of `reader` into documents, for small inputs (tests).
pub fn read_all(
    reader: impl Read,
    name: &str,
    spec: &InputSpec,
) -> Vec<Result<Document, InputError>> {
    documents(reader, name, spec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An article is what a document read without tokens holds, and a line fails the same
    /// way for both.
    #[test]
    fn an_article_is_a_text_document() {
        let spec = InputSpec::default();
        for line in [
            r#"{"id": 7, "title": "t", "content": ["a", null, "b"]}"#,
            r#"{"id": "x", "content": "only"}"#,
            r#"{"id": "x"}"#,
            r#"{"id": "x", "content": 3}"#,
            r#"{"content": "no id"}"#,
            r#"["not", "an object"]"#,
            "not json",
        ] {
            let doc = parse_line(line.as_bytes(), &spec);
            let article = parse_article(line.as_bytes(), &spec.id_field, &spec.text_fields);
            match (doc, article) {
                (Ok(d), Ok(a)) => {
                    assert_eq!(d.id, a.id, "{line}");
                    assert_eq!(d.body, Body::Fields(a.texts), "{line}");
                }
                (Err(d), Err(a)) => assert_eq!(d.to_string(), a.to_string(), "{line}"),
                (d, a) => panic!("{line}: {d:?} vs {a:?}"),
            }
        }
        let texts: Vec<_> = articles(
            "{\"id\": 1, \"content\": \"a\"}\n{\"id\": 2}\n".as_bytes(),
            "in",
            "id",
            &spec.text_fields,
        )
        .map(|a| a.map(|a| a.texts).map_err(|e| e.line))
        .collect();
        assert_eq!(texts, vec![Ok(vec!["a".to_owned()]), Err(2)]);
    }

    #[test]
    fn parses_fields_in_order_and_skips_absent_ones() {
        let spec = InputSpec::default();
        let d = parse_line(br#"{"id": 7, "content": "c", "title": "t"}"#, &spec).unwrap();
        assert_eq!(d.id.key(), "7");
        assert_eq!(d.body, Body::Fields(vec!["t".into(), "c".into()]));
        let d = parse_line(br#"{"id": "a", "content": "c"}"#, &spec).unwrap();
        assert_eq!(d.body, Body::Fields(vec!["c".into()]));
    }

    #[test]
    fn one_text_rule_for_every_reader() {
        let doc = serde_json::json!({"title": "t", "body": {"text": ["a", null, ["b"]]},
            "x.y": "dotted", "n": null, "num": 3, "obj": {"a": "b"}, "flag": true});
        let f = |names: &[&str]| {
            field_texts(
                &doc,
                &names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            f(&["title", "body.text", "x.y", "n", "missing"]).unwrap(),
            ["t", "a", "b", "dotted"]
        );
        for (field, holds) in [
            ("num", "a number"),
            ("obj", "an object"),
            ("flag", "a boolean"),
        ] {
            assert_eq!(
                f(&["title", field]).unwrap_err(),
                BadTextField {
                    field: field.into(),
                    holds
                }
            );
        }
        // JSON Lines input follows the same rule (arrays and dotted paths included).
        let spec = InputSpec {
            text_fields: vec!["title".into(), "body.text".into()],
            ..InputSpec::default()
        };
        let d = parse_line(
            br#"{"id": 1, "title": ["a", "b"], "body": {"text": "c"}}"#,
            &spec,
        )
        .unwrap();
        assert_eq!(
            d.body,
            Body::Fields(vec!["a".into(), "b".into(), "c".into()])
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let spec = InputSpec::default();
        let e = |b: &[u8]| parse_line(b, &spec).unwrap_err().to_string();
        assert!(e(b"{not json").contains("not valid JSON"));
        assert!(e(b"[1]").contains("JSON object"));
        assert!(e(br#"{"title": "t"}"#).contains("--id-field"));
        assert!(e(br#"{"id": "x"}"#).contains("--field"));
        assert!(e(br#"{"id": "x", "content": 3}"#).contains("`content` holds a number"));
        assert!(e(b"{\"id\": \"\xff\"}").contains("UTF-8"));
        assert!(e(br#"{"id": [1], "content": "c"}"#).contains("string or an integer"));
    }

    #[test]
    fn lines_are_numbered_and_blank_ones_skipped() {
        let got: Vec<_> = Lines::new(&b"a\n\n  \r\nb\r\nc"[..])
            .map(|(n, l)| (n, l.unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![(1, b"a".to_vec()), (4, b"b".to_vec()), (5, b"c".to_vec())]
        );
    }

    #[test]
    fn read_all_reports_line_numbers() {
        let out = read_all(
            &b"{\"id\":1,\"content\":\"x\"}\nnope\n"[..],
            "f.jsonl",
            &InputSpec::default(),
        );
        assert!(out[0].is_ok());
        assert_eq!(
            out[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .split(':')
                .take(2)
                .collect::<Vec<_>>(),
            ["f.jsonl", "2"]
        );
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn a_truncated_gz_ends_after_the_good_lines_with_one_error() {
        let text: String = (0..2000)
            .map(|i| format!("{{\"id\":{i},\"content\":\"line {i} {}\"}}\n", i * 7919))
            .collect();
        let gz = gzip(text.as_bytes());
        let cut = &gz[..gz.len() / 2];
        let reader = BufReader::new(flate2::read::MultiGzDecoder::new(cut));
        let items: Vec<_> = Lines::new(reader).take(10_000).collect();
        assert!(items.len() < 2000, "the stream ends: {} items", items.len());
        let (last, good) = items.split_last().unwrap();
        assert!(
            good.len() > 100,
            "the good lines come first: {}",
            good.len()
        );
        assert!(good.iter().all(|(_, r)| r.is_ok()));
        let e = last.1.as_ref().unwrap_err();
        assert!(
            InputErrorKind::from_io(e).to_string().contains("truncated"),
            "{e}"
        );
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_and_named() {
        let long = format!("{{\"id\":2,\"content\":\"{}\"}}", "x".repeat(5000));
        let input =
            format!("{{\"id\":1,\"content\":\"a\"}}\n{long}\n{{\"id\":3,\"content\":\"c\"}}");
        let lines = Lines::new(input.as_bytes()).max_line_bytes(100);
        let got: Vec<_> = lines
            .map(|(n, r)| (n, r.map_err(|e| InputErrorKind::from_io(&e).to_string())))
            .collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].1.is_ok() && got[2].1.is_ok());
        assert_eq!(got[2].0, 3);
        let e = got[1].1.as_ref().unwrap_err();
        assert_eq!(got[1].0, 2);
        assert!(e.contains("longer than 100 bytes"), "{e}");
        // A line exactly at the cap is read.
        let exact = Lines::new(&b"abc\nabcd"[..]).max_line_bytes(4);
        assert!(exact
            .map(|(_, r)| r.unwrap())
            .eq([b"abc".to_vec(), b"abcd".to_vec()]));
    }
}

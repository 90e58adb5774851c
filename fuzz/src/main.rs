//! `neardup-fuzz`: a seeded, budgeted fuzzer for the JSON Lines reader, HTML
//! extraction and the text pipeline, on stable Rust. Each input goes through the readers a
//! user's data goes through; a panic is caught, counted and its input saved. The regression
//! corpus (`fuzz/corpus/`: inputs that once broke something, and seeds) is replayed first.
//!
//! A `publish = false` workspace member: the workshop, not the product. Run it with
//! `cargo run -p neardup-fuzz --release -- --time 10m`; `fuzz/tests/corpus.rs` replays the
//! corpus and a fixed budget in `cargo test`.

use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use neardup::input::{self, InputSpec, Lines};
use neardup::pipeline::fingerprint_body;
use neardup::text::html_to_text;
use neardup::{Fingerprinter, Profile};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use neardup::cli::common::{self, CmdResult, Status};
use neardup::cli::es_args::parse_duration;

/// Fuzz the JSON Lines reader, HTML extraction and the text pipeline for a fixed budget;
/// reports inputs run, panics (exit 1 if any) and peak memory.
#[derive(clap::Parser, Debug)]
#[command(name = "neardup-fuzz", version, about, long_about = None)]
struct FuzzBench {
    /// Stop after this long.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    time: Duration,
    /// Stop after this many generated inputs (whichever comes first).
    #[arg(long, value_name = "N")]
    execs: Option<u64>,
    /// Seed of the generator: the same seed and budget give the same inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Inputs replayed before the generated ones (every file in the folder).
    #[arg(long, default_value = "fuzz/corpus", value_name = "DIR")]
    corpus: PathBuf,
    /// Where inputs that panicked are saved (as `panic-<n>.bin`).
    #[arg(long, default_value = "fuzz/crashes", value_name = "DIR")]
    crashes: PathBuf,
    /// Longest line the reader keeps during the run (small, to exercise the cap).
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    max_line: usize,
}

/// Feeds one input to every target. Panics propagate (the caller catches them).
fn exercise(fp: &Fingerprinter, spec: &InputSpec, max_line: usize, data: &[u8]) {
    for (_, raw) in Lines::new(data).max_line_bytes(max_line) {
        if let Ok(line) = raw {
            if let Ok(doc) = input::parse_line(&line, spec) {
                let _ = fingerprint_body(fp, &doc.body);
            }
        }
    }
    for doc in input::documents(data, "fuzz", spec).flatten() {
        let _ = fingerprint_body(fp, &doc.body);
    }
    let text = String::from_utf8_lossy(data);
    let _ = html_to_text(&text);
    let _ = fp.fingerprint(&text);
}

const JSONISH: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\\",
    "\\u",
    "\\ud800",
    "\n",
    "\r\n",
    " ",
    "null",
    "true",
    "1e999",
    "-0",
    "12345678901234567890123",
    "\"id\"",
    "\"title\"",
    "\"content\"",
    "\"body.text\"",
    "新闻",
    "图书馆",
    "。",
    "，",
    "\u{feff}",
    "\u{200b}",
    "𠀀",
    "é",
    "\u{0}",
];
const HTMLISH: &[&str] = &[
    "<p>",
    "</p>",
    "<div>",
    "</div>",
    "<br>",
    "<script>",
    "</script>",
    "<style>",
    "</style>",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "&amp;",
    "&#x4e2d;",
    "&#99999999;",
    "&nbsp;",
    "<a href=\"",
    "\">",
    "<table><tr><td>",
    "<",
    ">",
    "/",
    "=",
    "'",
    "<p>市图书馆完成改造后重新开放。</p>",
    "<title>",
    "</title>",
    "<html>",
    "<body>",
    "<svg><foreignObject>",
    "<template>",
];

/// One generated input: random tokens, mutated seed lines, or tag soup.
fn generate(rng: &mut ChaCha8Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.gen_range(0..5) {
        0 => {
            let n = rng.gen_range(0..2048);
            out.extend((0..n).map(|_| rng.gen::<u8>()));
        }
        1 => {
            for _ in 0..rng.gen_range(1..200) {
                out.extend_from_slice(JSONISH[rng.gen_range(0..JSONISH.len())].as_bytes());
            }
        }
        2 => {
            for _ in 0..rng.gen_range(1..300) {
                out.extend_from_slice(HTMLISH[rng.gen_range(0..HTMLISH.len())].as_bytes());
            }
        }
        3 => {
            // Deep nesting, in JSON and in HTML.
            let depth = rng.gen_range(1..3000);
            let (open, close) = if rng.gen_bool(0.5) {
                ("[", "]")
            } else {
                ("<div>", "</div>")
            };
            out.extend_from_slice(b"{\"id\":1,\"content\":");
            out.extend(open.repeat(depth).bytes());
            out.extend(close.repeat(rng.gen_range(0..=depth)).bytes());
        }
        _ if !seeds.is_empty() => {
            out = seeds[rng.gen_range(0..seeds.len())].clone();
            for _ in 0..rng.gen_range(1..8) {
                mutate(rng, &mut out);
            }
        }
        _ => out.extend_from_slice(b"{\"id\":1,\"content\":\"x\"}\n"),
    }
    out
}

fn mutate(rng: &mut ChaCha8Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        data.push(rng.gen());
        return;
    }
    let at = rng.gen_range(0..data.len());
    match rng.gen_range(0..5) {
        0 => data[at] ^= 1 << rng.gen_range(0..8),
        1 => data.truncate(at),
        2 => {
            let piece = JSONISH[rng.gen_range(0..JSONISH.len())];
            data.splice(at..at, piece.bytes());
        }
        3 => {
            let piece = HTMLISH[rng.gen_range(0..HTMLISH.len())];
            data.splice(at..at, piece.bytes());
        }
        _ => {
            let end = rng
                .gen_range(at..data.len().min(at + 256) + 1)
                .min(data.len());
            let copy = data[at..end].to_vec();
            data.splice(at..at, copy);
        }
    }
}

/// Peak resident memory of this process, from `/proc` (Linux), in MB.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let args = <FuzzBench as clap::Parser>::parse();
    std::process::exit(common::finish(run(args)));
}

fn run(args: FuzzBench) -> CmdResult {
    let fp = Fingerprinter::for_profile(Profile::Default);
    let spec = InputSpec {
        text_fields: vec!["title".into(), "content".into(), "body.text".into()],
        ..InputSpec::default()
    };
    let mut corpus: Vec<(String, Vec<u8>)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(&args.corpus) {
        for entry in dir.flatten() {
            let path = entry.path();
            if path.is_file() {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                corpus.push((path.display().to_string(), bytes));
            }
        }
    }
    corpus.sort();
    let seeds: Vec<Vec<u8>> = corpus
        .iter()
        .flat_map(|(_, b)| b.split(|&c| c == b'\n').map(<[u8]>::to_vec))
        .filter(|l| !l.is_empty())
        .collect();
    // Panics are counted and saved, not printed one by one.
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let mut panics: Vec<String> = Vec::new();
    let mut save = |data: &[u8], origin: &str| -> anyhow::Result<()> {
        std::fs::create_dir_all(&args.crashes)
            .with_context(|| format!("creating {}", args.crashes.display()))?;
        let path = args.crashes.join(format!("panic-{}.bin", panics.len()));
        std::fs::write(&path, data).with_context(|| format!("writing {}", path.display()))?;
        panics.push(format!("{} ({origin})", path.display()));
        Ok(())
    };
    let started = Instant::now();
    let mut replayed = 0u64;
    for (name, data) in &corpus {
        let ok = panic::catch_unwind(AssertUnwindSafe(|| {
            exercise(&fp, &spec, args.max_line, data)
        }));
        replayed += 1;
        if ok.is_err() {
            save(data, name)?;
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut execs = 0u64;
    let mut bytes = 0u64;
    let mut largest = 0usize;
    while started.elapsed() < args.time && args.execs.is_none_or(|n| execs < n) {
        let data = generate(&mut rng, &seeds);
        let ok = panic::catch_unwind(AssertUnwindSafe(|| {
            exercise(&fp, &spec, args.max_line, &data)
        }));
        execs += 1;
        bytes += data.len() as u64;
        largest = largest.max(data.len());
        if ok.is_err() {
            save(&data, &format!("seed {} input {execs}", args.seed))?;
        }
    }
    panic::set_hook(default_hook);
    let secs = started.elapsed().as_secs_f64();
    let mut out = common::stdout();
    writeln!(
        out,
        "fuzz: {replayed} corpus inputs replayed, {execs} generated (seed {}), {:.1} MB, largest {largest} bytes, in {secs:.1} s ({:.0} execs/s); {}; peak memory {}",
        args.seed,
        bytes as f64 / 1e6,
        execs as f64 / secs.max(1e-9),
        common::plural(panics.len(), "panic", "panics"),
        peak_rss_mb().map_or_else(|| "unknown".to_owned(), |m| format!("{m:.0} MB")),
    )?;
    for p in &panics {
        writeln!(out, "panic: {p}")?;
    }
    common::flush(&mut out)?;
    if panics.is_empty() {
        Ok(Status::Done)
    } else {
        anyhow::bail!(
            "{} (inputs saved in {}); add them to {} once fixed",
            common::plural(panics.len(), "panic", "panics"),
            args.crashes.display(),
            args.corpus.display()
        )
    }
}

#[cfg(test)]
mod tests {
    /// clap checks argument names only when a command is parsed: every subcommand here.
    #[test]
    fn the_parser_is_consistent() {
        <super::FuzzBench as clap::CommandFactory>::command().debug_assert();
    }
}

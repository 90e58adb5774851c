//! Crash safety: `neardup index` killed (SIGKILL) in the middle of a run leaves a store that
//! opens, holds every batch committed before the kill, and no document half-written.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use neardup::fingerprint::Methods;
use neardup::store::{OpenOptions, Store};
use neardup::{Fingerprinter, Method, Profile, Sketch};

const DOCS: usize = 20_000;
const BATCH: usize = 200;

/// Pre-tokenized articles (no dictionary work, so the run is dominated by commits).
/// `generation` changes every text, so a second run replaces every fingerprint.
fn write_input(path: &Path, generation: u32) -> Vec<(String, Vec<String>)> {
    let mut docs = Vec::with_capacity(DOCS);
    let mut text = String::new();
    for i in 0..DOCS {
        let tokens: Vec<String> = (0..12)
            .map(|j| format!("w{}", (i * 7 + j * 13 + generation as usize * 5) % 5000))
            .collect();
        let id = format!("doc-{i:06}");
        text.push_str(&serde_json::json!({"id": id, "tokens": tokens}).to_string());
        text.push('\n');
        docs.push((id, tokens));
    }
    std::fs::write(path, text).unwrap();
    docs
}

/// Starts `neardup index --pre-tokenized -v -j 1 --method METHOD` with `extra` flags on
/// `store` from `input`; its stderr, read line by line.
fn start_index(
    store: &Path,
    input: &Path,
    method: Method,
    extra: &[&str],
) -> (std::process::Child, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["index", "--pre-tokenized", "-v", "-j", "1", "--method"])
        .arg(method.name())
        .args(extra)
        .arg("--store")
        .arg(store)
        .arg("--input")
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    (child, stderr)
}

/// Starts `neardup index -v --method METHOD` and kills it with SIGKILL once it has reported
/// `after` commits. Returns how many documents it had reported committed, or `None` if it
/// finished before that.
fn index_and_kill(store: &Path, input: &Path, method: Method, after: usize) -> Option<usize> {
    let (mut child, stderr) = start_index(store, input, method, &["--batch", &BATCH.to_string()]);
    let mut commits = 0;
    for line in stderr.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("index: committed ") {
            let committed: usize = rest.split_whitespace().next().unwrap().parse().unwrap();
            commits += 1;
            if commits == after {
                // A varying delay lands the kill anywhere: fingerprinting, writing a batch,
                // or in the middle of its commit.
                std::thread::sleep(std::time::Duration::from_micros(
                    (after as u64 * 7919) % 23_000,
                ));
                child.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush.
                child.wait().unwrap();
                return Some(committed);
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "index failed before the kill");
    None
}

/// Opens the store after a kill and checks it against the input generations.
/// Returns how many documents carry the newest generation's sketch.
fn check_store(store: &Path, expected: &[HashMap<String, Sketch>], reported: usize) -> usize {
    let s = Store::open(store, &OpenOptions::default()).expect("a killed store opens");
    let n = s
        .verify()
        .expect("block tables and documents agree exactly") as usize;
    let docs = s.snapshot().unwrap().documents().unwrap();
    assert_eq!(docs.len(), n);
    let newest = expected.last().unwrap();
    let mut current = 0;
    for (id, fp) in &docs {
        // Every stored fingerprint is the full, correct one of some generation's text.
        let gen = expected
            .iter()
            .position(|e| e.get(id) == Some(fp))
            .unwrap_or_else(|| panic!("{id} has {fp:?}, which no input gave it"));
        if gen == expected.len() - 1 {
            current += 1;
        }
        assert!(newest.contains_key(id));
    }
    // Batches commit in input order: the newest generation covers a prefix of whole
    // batches, at least as long as the commits reported before the kill.
    assert!(
        current >= reported,
        "{current} documents current, {reported} reported committed"
    );
    assert!(
        current % BATCH == 0 || current == DOCS,
        "{current} is not whole batches"
    );
    let mut ids: Vec<&String> = newest.keys().collect();
    ids.sort();
    for id in &ids[..current] {
        assert_eq!(
            s.get(id).unwrap().as_ref(),
            newest.get(*id),
            "{id} should be current"
        );
    }
    current
}

/// Indexes two generations of the input with `method`, killing each run several times.
fn killed_runs_leave_whole_batches_only(method: Method) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fp = Fingerprinter::for_profile(Profile::Default);
    let mut expected: Vec<HashMap<String, Sketch>> = Vec::new();
    for (generation, kills) in [(0u32, [3usize, 11, 19]), (1, [2, 9, 25])] {
        let input = dir.path().join(format!("gen{generation}.jsonl"));
        let docs = write_input(&input, generation);
        expected.push(
            docs.iter()
                .map(|(id, t)| {
                    let sketch = fp
                        .sketch_tokens(Methods::only(method), t)
                        .into_sketch(method)
                        .unwrap();
                    (id.clone(), sketch)
                })
                .collect(),
        );
        // Kill the same run several times at different points, resuming each time.
        let mut killed = 0;
        for after in kills {
            match index_and_kill(&store, &input, method, after) {
                Some(reported) => {
                    check_store(&store, &expected, reported);
                    killed += 1;
                }
                None => break,
            }
        }
        assert!(
            killed >= 2,
            "{method}, generation {generation}: only {killed} runs were killed mid-way"
        );
        // Finally a run to the end: everything current.
        assert_eq!(index_and_kill(&store, &input, method, usize::MAX), None);
        assert_eq!(check_store(&store, &expected, DOCS), DOCS);
    }
    let s = Store::open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(s.method(), method);
}

#[test]
fn killed_simhash_index_runs_leave_whole_batches_only() {
    killed_runs_leave_whole_batches_only(Method::SimHash);
}

#[test]
fn killed_minhash_index_runs_leave_whole_batches_only() {
    killed_runs_leave_whole_batches_only(Method::MinHash);
}

/// Starts `neardup index -v` on a new store and, `delay` after it reports its last commit
/// (while it compacts), kills it. Returns the compaction's reported duration when it
/// finished first.
fn index_and_kill_while_compacting(
    store: &Path,
    input: &Path,
    method: Method,
    delay: Option<std::time::Duration>,
) -> Option<f64> {
    let (mut child, stderr) = start_index(store, input, method, &[]);
    let last = format!("index: committed {DOCS} ");
    for line in stderr.lines() {
        let line = line.unwrap();
        if let (true, Some(delay)) = (line.starts_with(&last), delay) {
            std::thread::sleep(delay);
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        if let Some(rest) = line.strip_prefix("compacted: ") {
            let secs = rest.split(" in ").nth(1).unwrap().trim_end_matches(" s");
            assert!(child.wait().unwrap().success());
            return Some(secs.parse().unwrap());
        }
    }
    panic!("index neither compacted nor was killed: {:?}", child.wait());
}

/// A bulk `index` ends with a compaction; killed anywhere in it, the store opens and holds
/// every document, exactly (it is the old file until the compact copy is renamed over it).
#[test]
fn a_kill_during_the_compaction_after_index_loses_nothing() {
    let method = Method::MinHash;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let docs = write_input(&input, 0);
    let fp = Fingerprinter::for_profile(Profile::Default);
    let expected: HashMap<String, Sketch> = docs
        .iter()
        .map(|(id, t)| {
            let sketch = fp.sketch_tokens(Methods::only(method), t);
            (id.clone(), sketch.into_sketch(method).unwrap())
        })
        .collect();
    let whole = index_and_kill_while_compacting(&dir.path().join("whole"), &input, method, None)
        .expect("an uninterrupted run compacts");
    let copy = |store: &Path| store.join("neardup.redb.compacting");
    for (i, share) in [0.05, 0.3, 0.5, 0.7, 0.95].into_iter().enumerate() {
        let store = dir.path().join(format!("killed-{i}"));
        let delay = std::time::Duration::from_secs_f64(whole * share);
        index_and_kill_while_compacting(&store, &input, method, Some(delay));
        assert_eq!(
            check_store(&store, std::slice::from_ref(&expected), DOCS),
            DOCS
        );
        assert!(
            !copy(&store).exists(),
            "opening the store removes what the killed compaction left"
        );
    }
    assert!(!copy(&dir.path().join("whole")).exists());
}

//! The back-fill's state file: an append-only JSON Lines journal.
//!
//! Before a bulk request is sent, its document ids are appended (`batch`); once its outcome is
//! known, its counts are (`done`). A run killed at any moment leaves at most the batches in
//! flight without a `done`. The next run replays the journal: completed batches give the
//! counts so far and the ids that failed (so they are not counted twice), and the ids of
//! unfinished batches are looked up in Elasticsearch to see whether their write landed
//! (see `super::Backfill`). Each line is written with one `write` call on a file opened in
//! append mode, so a kill never leaves half a line except on power loss; a torn last line is
//! ignored on replay.
//!
//! A journal always starts with its `job` line (files are created whole, by rename), so a file
//! that does not is refused rather than overwritten. One run at a time holds a journal: an
//! exclusive lock on `<state>.lock`, taken before the journal is read and held until the run
//! ends (the journal itself is replaced by rename, so it cannot carry the lock).

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{BackfillCounts, BackfillError};
use crate::Slice;

/// What identifies a job: the same command line gives the same key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobKey {
    pub pattern: String,
    /// `missing` or `all`.
    pub mode: String,
    pub fingerprint_version: String,
    /// The MinHash version written, when some index of the job holds MinHash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash_version: Option<String>,
    pub text_fields: Vec<String>,
    pub version_field: String,
    /// The slice of each index this job walks (`--slice I/N`); `None`: all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<Slice>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Entry {
    Job {
        key: JobKey,
    },
    /// A run (process) started.
    Run,
    /// An index's walk was set up; for `--all`, each shard's highest `_seq_no` at that time.
    Index {
        index: String,
        cutoffs: Option<BTreeMap<String, i64>>,
    },
    Batch {
        index: String,
        b: u64,
        ids: Vec<String>,
    },
    /// Counts of a finished batch (`b` = 0: counts not tied to a batch). `skip`: ids that
    /// failed or had unusable text, not to be counted again. `ms`: this run's elapsed time.
    Done {
        index: String,
        b: u64,
        counts: BackfillCounts,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skip: Vec<String>,
        ms: u64,
    },
    IndexDone {
        index: String,
    },
    Finished,
}

/// One index's state after replay.
#[derive(Clone, Debug, Default)]
pub struct IndexState {
    pub cutoffs: Option<BTreeMap<String, i64>>,
    pub counts: BackfillCounts,
    pub skip: HashSet<String>,
    /// Batches sent but not known to be done.
    pub in_flight: BTreeMap<u64, Vec<String>>,
    pub done: bool,
}

/// The journal replayed.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    pub key: Option<JobKey>,
    pub indices: BTreeMap<String, IndexState>,
    /// Sum of the previous runs' elapsed times.
    pub elapsed: Duration,
    pub finished: bool,
    pub next_batch: u64,
}

impl Replayed {
    fn apply(&mut self, e: Entry, run_ms: &mut u64) {
        match e {
            Entry::Job { key } => self.key = Some(key),
            Entry::Run => {
                self.elapsed += Duration::from_millis(std::mem::take(run_ms));
            }
            Entry::Index { index, cutoffs } => {
                self.indices.entry(index).or_default().cutoffs = cutoffs;
            }
            Entry::Batch { index, b, ids } => {
                self.next_batch = self.next_batch.max(b + 1);
                self.indices
                    .entry(index)
                    .or_default()
                    .in_flight
                    .insert(b, ids);
            }
            Entry::Done {
                index,
                b,
                counts,
                skip,
                ms,
            } => {
                let s = self.indices.entry(index).or_default();
                s.in_flight.remove(&b);
                s.counts.add(&counts);
                s.skip.extend(skip);
                *run_ms = (*run_ms).max(ms);
            }
            Entry::IndexDone { index } => self.indices.entry(index).or_default().done = true,
            Entry::Finished => self.finished = true,
        }
    }

    /// Counts over all indices.
    pub fn total(&self) -> BackfillCounts {
        let mut c = BackfillCounts::default();
        for s in self.indices.values() {
            c.add(&s.counts);
        }
        c
    }
}

/// The open journal. Appends are serialised by a mutex; each entry is one `write`.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    _lock: StateLock,
}

fn state_err(path: &Path, reason: impl std::fmt::Display) -> BackfillError {
    BackfillError::State {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// The exclusive right to use one state file, held until dropped.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Locks `<path>.lock` (created if missing), or fails at once if another process holds it.
    pub fn acquire(path: &Path) -> Result<StateLock, BackfillError> {
        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        let lock_path = PathBuf::from(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| state_err(&lock_path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(StateLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(state_err(
                path,
                "in use by another neardup backfill (it holds the lock on the state file); \
                 wait for it to finish, or pass another --state",
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(state_err(&lock_path, e)),
        }
    }
}

fn not_a_journal(path: &Path, line: usize, why: impl std::fmt::Display) -> BackfillError {
    state_err(
        path,
        format!(
            "line {line}: {why}; this is not a neardup back-fill state file, so it is left \
             as it is: pass another --state (or delete the file if it is an old one)"
        ),
    )
}

/// Reads a journal one line at a time; a missing or empty file is an empty journal. A file
/// whose first line is not a back-fill `job` line is refused, as is any bad line but a torn
/// last one.
pub fn replay(path: &Path) -> Result<Replayed, BackfillError> {
    let mut r = Replayed {
        next_batch: 1,
        ..Replayed::default()
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(r),
        Err(e) => return Err(state_err(path, e)),
    };
    let mut run_ms = 0;
    let mut lines = BufReader::new(file)
        .split(b'\n')
        .enumerate()
        .filter(|(_, l)| !l.as_ref().is_ok_and(|l| l.trim_ascii().is_empty()))
        .peekable();
    let mut first = true;
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(|e| state_err(path, e))?;
        let entry = serde_json::from_slice::<Entry>(&line);
        if std::mem::take(&mut first) && !matches!(entry, Ok(Entry::Job { .. })) {
            return Err(not_a_journal(path, i + 1, "no back-fill job line"));
        }
        match entry {
            Ok(e) => r.apply(e, &mut run_ms),
            // A line torn by a crash can only be the last one.
            Err(_) if lines.peek().is_none() => {}
            Err(e) => return Err(not_a_journal(path, i + 1, e)),
        }
    }
    r.elapsed += Duration::from_millis(run_ms);
    Ok(r)
}

impl Journal {
    /// Starts a fresh journal for `key`, replacing any journal at `path`; `lock` is the
    /// caller's lock on it.
    pub fn create(path: &Path, key: &JobKey, lock: StateLock) -> Result<Journal, BackfillError> {
        Self::rewrite(path, &[Entry::Job { key: key.clone() }], lock)
    }

    /// Rewrites a replayed journal in compact form (one `done` per index with its totals, the
    /// in-flight batches kept as they are), then appends from there.
    pub fn compact(path: &Path, r: &Replayed, lock: StateLock) -> Result<Journal, BackfillError> {
        let key = r.key.clone().expect("a replayed journal has a job");
        let mut entries = vec![Entry::Job { key }];
        let mut first = true;
        for (index, s) in &r.indices {
            entries.push(Entry::Index {
                index: index.clone(),
                cutoffs: s.cutoffs.clone(),
            });
            let mut skip: Vec<String> = s.skip.iter().cloned().collect();
            skip.sort();
            entries.push(Entry::Done {
                index: index.clone(),
                b: 0,
                counts: s.counts.clone(),
                skip,
                // The elapsed time of the previous runs rides on the first index's entry.
                ms: if std::mem::take(&mut first) {
                    r.elapsed.as_millis() as u64
                } else {
                    0
                },
            });
            for (b, ids) in &s.in_flight {
                entries.push(Entry::Batch {
                    index: index.clone(),
                    b: *b,
                    ids: ids.clone(),
                });
            }
            if s.done {
                entries.push(Entry::IndexDone {
                    index: index.clone(),
                });
            }
        }
        Self::rewrite(path, &entries, lock)
    }

    fn rewrite(path: &Path, entries: &[Entry], lock: StateLock) -> Result<Journal, BackfillError> {
        let tmp = path.with_extension("tmp");
        {
            let mut f = File::create(&tmp).map_err(|e| state_err(&tmp, e))?;
            for e in entries {
                let mut line = serde_json::to_string(e).expect("entries serialise");
                line.push('\n');
                f.write_all(line.as_bytes())
                    .map_err(|e| state_err(&tmp, e))?;
            }
            f.sync_all().map_err(|e| state_err(&tmp, e))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| state_err(path, e))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| state_err(path, e))?;
        let j = Journal {
            path: path.to_owned(),
            file: Mutex::new(file),
            _lock: lock,
        };
        j.record(&Entry::Run)?;
        Ok(j)
    }

    /// Appends one entry.
    pub fn record(&self, e: &Entry) -> Result<(), BackfillError> {
        let mut line = serde_json::to_string(e).expect("entries serialise");
        line.push('\n');
        self.file
            .lock()
            .unwrap()
            .write_all(line.as_bytes())
            .map_err(|err| state_err(&self.path, err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> JobKey {
        JobKey {
            pattern: "news".into(),
            mode: "missing".into(),
            fingerprint_version: "v1".into(),
            minhash_version: None,
            text_fields: vec!["title".into()],
            version_field: "simHashVersion".into(),
            slice: None,
        }
    }

    fn counts(written: u64) -> BackfillCounts {
        BackfillCounts {
            scanned: written,
            written,
            ..BackfillCounts::default()
        }
    }

    #[test]
    fn replay_keeps_counts_in_flight_batches_and_elapsed_across_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.jsonl");
        let j = Journal::create(&path, &key(), StateLock::acquire(&path).unwrap()).unwrap();
        let batch = |b: u64, ids: &[&str]| Entry::Batch {
            index: "news".into(),
            b,
            ids: ids.iter().map(|s| s.to_string()).collect(),
        };
        let done = |b: u64, n: u64, ms: u64| Entry::Done {
            index: "news".into(),
            b,
            counts: counts(n),
            skip: vec![],
            ms,
        };
        j.record(&batch(1, &["a", "b"])).unwrap();
        j.record(&batch(2, &["c"])).unwrap();
        j.record(&done(1, 2, 700)).unwrap();
        drop(j);
        // A torn last line (killed mid-write) is ignored.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"t\":\"do")
            .unwrap();

        let r = replay(&path).unwrap();
        assert_eq!(r.key, Some(key()));
        assert_eq!(r.total(), counts(2));
        assert_eq!(r.indices["news"].in_flight[&2], ["c"]);
        assert_eq!(r.next_batch, 3);
        assert_eq!(r.elapsed, Duration::from_millis(700));

        let j = Journal::compact(&path, &r, StateLock::acquire(&path).unwrap()).unwrap();
        j.record(&done(2, 1, 300)).unwrap();
        j.record(&Entry::IndexDone {
            index: "news".into(),
        })
        .unwrap();
        let r = replay(&path).unwrap();
        assert_eq!(r.total(), counts(3));
        assert!(r.indices["news"].in_flight.is_empty());
        assert!(r.indices["news"].done);
        assert_eq!(r.elapsed, Duration::from_millis(1000));
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, "hello\n{}\n").unwrap();
        let e = replay(&path).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        // One line, which a torn last line of a journal could look like: still refused.
        for foreign in ["my notes\n", "{\"t\":\"run\"}\n", "{\"a\": 1}"] {
            std::fs::write(&path, foreign).unwrap();
            let e = replay(&path).unwrap_err().to_string();
            assert!(e.contains("not a neardup back-fill state file"), "{e}");
        }
        std::fs::write(&path, "").unwrap();
        assert!(
            replay(&path).unwrap().key.is_none(),
            "an empty file is an empty journal"
        );
    }

    #[test]
    fn one_process_holds_a_state_file_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.jsonl");
        let held = StateLock::acquire(&path).unwrap();
        let e = StateLock::acquire(&path).unwrap_err().to_string();
        assert!(e.contains("in use by another neardup backfill"), "{e}");
        let j = Journal::create(&path, &key(), held).unwrap();
        assert!(
            StateLock::acquire(&path).is_err(),
            "the journal keeps the lock"
        );
        drop(j);
        StateLock::acquire(&path).unwrap();
    }
}

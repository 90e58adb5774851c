//! The changes feed: every document written since the worker last looked, found by its
//! sequence number, whoever wrote it and however (a partial `_update`, a full re-index, a
//! `_bulk` `update` or `index` action, `_update_by_query`), on every engine, with no ingest
//! pipeline and no field the application must bump.
//!
//! Every write to a shard gets the next **sequence number** of that shard (`_seq_no`), and a
//! document's `_seq_no` is that of its last write. Per shard of each concrete index the feed
//! keeps a **checkpoint** `c`: every write numbered `c` or lower has been looked at. A pass
//!
//! 1. reads each shard's **global checkpoint** `g` from its primary
//!    (`GET /<index>/_stats/docs?level=shards`: `seq_no.global_checkpoint`, with the primary's
//!    term, `retention_leases.primary_term`, and node), and the index's UUID and shard count
//!    (`GET /<index>/_settings`);
//! 2. refreshes the index (every copy), so every write numbered `g` or lower is searchable on
//!    whichever copy answers;
//! 3. reads the documents of that shard (`preference=_shards:N`) whose `_seq_no` is in
//!    `(c, g]`, through the one paging layer ([`Cursor::with_preference`]: a scroll);
//! 4. moves the checkpoint to `g` ([`step`]) and stores it ([`Feed::save`]).
//!
//! A document written again after step 2 has a `_seq_no` above `g`: the next pass reads it.
//! A document whose last write is numbered `c` or lower was read by the pass whose range held
//! that number (or a later one). So every document's last version is looked at once, and the
//! worker writes a fingerprint only where the stored one differs from what the text gives
//! ([`fields_differ`]): its own writes bump `_seq_no` too and are read once more by the next
//! pass, which finds them equal and writes nothing.
//!
//! **Why the global checkpoint, not the highest sequence number.** Operations at or below a
//! shard's global checkpoint are on every in-sync copy and are never rolled back: when the
//! primary fails and a replica is promoted (a new **primary term**), the new primary holds all
//! of them and numbers new writes above its own highest number, so above the checkpoint. The
//! operations above the global checkpoint may be rolled back and their numbers reused by other
//! writes under the new term; a feed that had advanced past them would skip those writes.
//! Advancing only to the global checkpoint makes a failover safe. A relocated primary keeps
//! its term and its history. Both are detected (the term or the primary's node differs from
//! the one stored) and logged at info ([`ShardEvent`]); correctness rests on the rule above.
//! Where a new primary reports a global checkpoint below the stored one (a stale copy forced
//! to be primary by an operator, which loses operations), the checkpoint moves back to it, so
//! writes numbered in between under the new term are read.
//!
//! **Starting over.** Sequence numbers belong to one incarnation of one shard: a re-created,
//! restored, shrunk or split index has a new UUID (and maybe another shard count). With no
//! checkpoint for the index's UUID, or another shard count ([`plan`]: [`Plan::Start`]), the
//! worker runs its stale pass and then starts the feed at the global checkpoints read *before*
//! that pass: a write made during the pass is above them.
//!
//! **Where the checkpoints live.** In Elasticsearch, so any worker process resumes (a
//! container restarted, another host): one document per concrete index, its id the index's
//! UUID, in `neardup-feed-{index}` ([`feed_index_name`], beside the claims index
//! `neardup-claims-{index}`). It is written guarded by its own `_seq_no`/`_primary_term`:
//! of two workers that read the same checkpoint, the one that stores second is refused and
//! keeps nothing, so a slower worker never moves it back.
//!
//! **Failed writes.** A fingerprint write that fails for a reason that may pass ([`retry_later`]:
//! 429 beyond the retries, a 5xx) keeps its shard's checkpoint where it was: the next pass reads
//! the range again and writes only what still differs.
//!
//! **Limits.** A shard whose primary is not started is skipped until it is (its checkpoint
//! stays). Deletes are not seen (nothing to fingerprint). The refresh each pass costs a
//! segment per written shard, like a periodic refresh.

use std::time::{SystemTime, UNIX_EPOCH};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::scan::{Cursor, ScanOptions, Scanner};
use super::write::ItemFailure;
use super::{check, path_segment, request, send, Body, EsError, RetryPolicy};

/// The index holding the feed's checkpoints for the articles of `index`.
pub fn feed_index_name(index: &str) -> String {
    format!("neardup-feed-{index}")
}

/// Where one shard is: every write numbered `checkpoint` or lower has been looked at (`-1`:
/// none). Stored per shard; also what the cluster says now, with the global checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMark {
    pub shard: u32,
    pub checkpoint: i64,
    /// The primary's term, where the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_term: Option<u64>,
    /// The node holding the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The marks of every shard of one concrete index (shard `i` at position `i`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMarks {
    pub index: String,
    pub uuid: String,
    pub shards: Vec<ShardMark>,
}

/// One concrete index now: its UUID and, per shard, its global checkpoint, or `None` where no
/// started primary reports one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexNow {
    pub index: String,
    pub uuid: String,
    pub shards: Vec<Option<ShardMark>>,
}

/// Sequence numbers `after < n ≤ to`, one shard.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SeqRange {
    pub after: i64,
    pub to: i64,
}

impl SeqRange {
    /// The query for the documents whose last write is in the range.
    pub fn query(self) -> Value {
        json!({ "range": { "_seq_no": { "gt": self.after, "lte": self.to } } })
    }

    /// How many sequence numbers it spans (an upper bound on the documents it holds).
    pub fn len(self) -> u64 {
        (self.to - self.after).max(0) as u64
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// Something that happened to a shard's primary since its checkpoint was stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardEvent {
    /// A replica was promoted (failover). `back_to`: the new primary's global checkpoint was
    /// below the stored one, and the checkpoint moved back to it.
    TermChanged {
        from: u64,
        to: u64,
        back_to: Option<i64>,
    },
    /// The primary moved to another node, same term.
    Moved { from: String, to: String },
    /// No started primary: the shard is skipped this pass.
    Unavailable,
}

/// What to do with one shard this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The sequence numbers to read, if any.
    pub read: Option<SeqRange>,
    /// The mark to store once the range is read.
    pub next: ShardMark,
    pub event: Option<ShardEvent>,
}

/// One shard's step from its stored mark and what the cluster says now (see the module docs):
/// read `(stored, global]` and advance to the global checkpoint; never back, except to a new
/// primary's lower global checkpoint after a term change; nothing while no primary answers.
pub fn step(stored: &ShardMark, now: Option<&ShardMark>) -> Step {
    let Some(now) = now else {
        return Step {
            read: None,
            next: stored.clone(),
            event: Some(ShardEvent::Unavailable),
        };
    };
    let term_changed = match (stored.primary_term, now.primary_term) {
        (Some(a), Some(b)) if a != b => Some((a, b)),
        _ => None,
    };
    let mut event = match (&term_changed, &stored.node, &now.node) {
        (Some((from, to)), ..) => Some(ShardEvent::TermChanged {
            from: *from,
            to: *to,
            back_to: None,
        }),
        (None, Some(a), Some(b)) if a != b => Some(ShardEvent::Moved {
            from: a.clone(),
            to: b.clone(),
        }),
        _ => None,
    };
    let checkpoint = if now.checkpoint >= stored.checkpoint {
        now.checkpoint
    } else if term_changed.is_some() {
        if let Some(ShardEvent::TermChanged { back_to, .. }) = &mut event {
            *back_to = Some(now.checkpoint);
        }
        now.checkpoint
    } else {
        stored.checkpoint
    };
    let read = (checkpoint > stored.checkpoint).then_some(SeqRange {
        after: stored.checkpoint,
        to: checkpoint,
    });
    Step {
        read,
        next: ShardMark {
            shard: stored.shard,
            checkpoint,
            primary_term: now.primary_term.or(stored.primary_term),
            node: now.node.clone().or_else(|| stored.node.clone()),
        },
        event,
    }
}

/// What a pass does with one concrete index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Start the feed at the global checkpoints read now, after a stale pass (why: no
    /// checkpoint, a new UUID, another shard count). `None` while some shard has no started
    /// primary: nothing is stored, the next pass tries again.
    Start {
        why: String,
        marks: Option<IndexMarks>,
    },
    /// Follow the stored checkpoints, one step per shard.
    Follow(Vec<Step>),
}

/// The plan for one concrete index, from its stored checkpoint (if any) and what the cluster
/// says now.
pub fn plan(stored: Option<&IndexMarks>, now: &IndexNow) -> Plan {
    let why = match stored {
        None => Some("no checkpoint yet".to_owned()),
        Some(s) if s.uuid != now.uuid => Some(format!(
            "index UUID {} instead of {}: the index was created again",
            now.uuid, s.uuid
        )),
        Some(s) if s.shards.len() != now.shards.len() => Some(format!(
            "{} shards instead of {}",
            now.shards.len(),
            s.shards.len()
        )),
        Some(_) => None,
    };
    match (why, stored) {
        (None, Some(s)) => Plan::Follow(
            s.shards
                .iter()
                .zip(&now.shards)
                .map(|(m, n)| step(m, n.as_ref()))
                .collect(),
        ),
        (why, _) => Plan::Start {
            why: why.unwrap_or_default(),
            marks: now
                .shards
                .iter()
                .cloned()
                .collect::<Option<Vec<_>>>()
                .map(|shards| IndexMarks {
                    index: now.index.clone(),
                    uuid: now.uuid.clone(),
                    shards,
                }),
        },
    }
}

/// Whether a stored `_source` lacks any of the `wanted` fields or holds another value there
/// (a missing field counts as `null`). Only such documents are written.
pub fn fields_differ(source: &Value, wanted: &Map<String, Value>) -> bool {
    wanted
        .iter()
        .any(|(k, v)| source.get(k).unwrap_or(&Value::Null) != v)
}

/// Whether a shard's checkpoint must stay where it was after these write failures of its
/// range: one of them may pass on another try (429: the cluster pushed back beyond the
/// retries; a 5xx). A failure that would fail again (a mapping refusal, 4xx) does not hold
/// the feed back: it is logged, and the document is written once its text changes.
pub fn retry_later(failures: &[ItemFailure]) -> bool {
    failures.iter().any(|f| f.status == 429 || f.status >= 500)
}

/// A stored checkpoint and the version of its document, the guard of the next save.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub marks: IndexMarks,
    pub guard: (u64, u64),
}

/// Reads shard checkpoints and stores the feed's, for the articles of one index (or alias).
#[derive(Clone, Debug)]
pub struct Feed {
    client: Elasticsearch,
    retry: RetryPolicy,
    index: String,
    store: String,
    store_ready: bool,
}

impl Feed {
    /// The feed of `index`, its checkpoints kept in [`feed_index_name`].
    pub fn new(client: Elasticsearch, retry: RetryPolicy, index: &str) -> Feed {
        Feed {
            client,
            retry,
            index: index.to_owned(),
            store: feed_index_name(index),
            store_ready: false,
        }
    }

    /// The index holding the checkpoints.
    pub fn store_index(&self) -> &str {
        &self.store
    }

    /// Every concrete index behind the feed's index now: UUID, shard count and each shard's
    /// global checkpoint, primary term and node (see the module docs).
    pub async fn now(&self) -> Result<Vec<IndexNow>, EsError> {
        let name = path_segment(&self.index);
        let settings = request(
            &self.client,
            &self.retry,
            &format!("index `{}`: UUID and shard count", self.index),
            Method::Get,
            &format!("/{name}/_settings/index.uuid,index.number_of_shards"),
            &[("flat_settings", "true")],
            None,
        )
        .await?;
        let what = format!("index `{}`: shard checkpoints", self.index);
        let stats = request(
            &self.client,
            &self.retry,
            &what,
            Method::Get,
            &format!("/{name}/_stats/docs"),
            &[
                ("level", "shards"),
                (
                    "filter_path",
                    "indices.*.shards.*.routing,indices.*.shards.*.seq_no,indices.*.shards.*.retention_leases.primary_term",
                ),
            ],
            None,
        )
        .await?;
        let bad = |detail: String| EsError::BadResponse {
            what: what.clone(),
            detail,
        };
        let mut out = Vec::new();
        for (index, s) in settings.as_object().into_iter().flatten() {
            let s = &s["settings"];
            let uuid = s["index.uuid"]
                .as_str()
                .ok_or_else(|| bad(format!("no index.uuid for `{index}`")))?;
            let n: usize = s["index.number_of_shards"]
                .as_str()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| bad(format!("no index.number_of_shards for `{index}`")))?;
            let mut shards = vec![None; n];
            let copies = &stats["indices"][index]["shards"];
            for (i, slot) in shards.iter_mut().enumerate() {
                *slot = primary_mark(i as u32, &copies[i.to_string()]);
            }
            out.push(IndexNow {
                index: index.clone(),
                uuid: uuid.to_owned(),
                shards,
            });
        }
        out.sort_by(|a, b| a.index.cmp(&b.index));
        Ok(out)
    }

    /// The stored checkpoint of the concrete index with this UUID, if any.
    pub async fn load(&self, uuid: &str) -> Result<Option<Stored>, EsError> {
        let what = format!("feed checkpoints `{}`: read `{uuid}`", self.store);
        let path = format!("/{}/_doc/{}", path_segment(&self.store), path_segment(uuid));
        let reply = self
            .retry
            .run(|| async {
                let reply = send(&self.client, Method::Get, &path, &[], None).await?;
                if reply.status.as_u16() == 404 {
                    return Ok(None);
                }
                check(&what, reply).map(Some)
            })
            .await?;
        let Some(doc) = reply else { return Ok(None) };
        if doc["found"] != true {
            return Ok(None);
        }
        let bad = |detail: String| EsError::BadResponse {
            what: what.clone(),
            detail,
        };
        let guard = match (doc["_seq_no"].as_u64(), doc["_primary_term"].as_u64()) {
            (Some(s), Some(t)) => (s, t),
            _ => return Err(bad("no _seq_no/_primary_term".into())),
        };
        let marks: IndexMarks = serde_json::from_value(doc["_source"].clone())
            .map_err(|e| bad(format!("not a feed checkpoint: {e}")))?;
        Ok(Some(Stored { marks, guard }))
    }

    /// Stores `marks`, guarded by the version it was read at (`None`: it must not exist yet).
    /// `false` when another worker stored one meanwhile: nothing is written (the other
    /// worker's checkpoint stands).
    pub async fn save(
        &mut self,
        marks: &IndexMarks,
        guard: Option<(u64, u64)>,
    ) -> Result<bool, EsError> {
        self.ensure_store().await?;
        let what = format!("feed checkpoints `{}`: store `{}`", self.store, marks.uuid);
        let path = format!(
            "/{}/_doc/{}",
            path_segment(&self.store),
            path_segment(&marks.uuid)
        );
        let (seq, term);
        let params: Vec<(&str, &str)> = match guard {
            Some((s, t)) => {
                seq = s.to_string();
                term = t.to_string();
                vec![("if_seq_no", &seq), ("if_primary_term", &term)]
            }
            None => vec![("op_type", "create")],
        };
        let mut doc = serde_json::to_value(marks).map_err(|e| EsError::BadResponse {
            what: what.clone(),
            detail: e.to_string(),
        })?;
        doc["updated_at"] = json!(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64));
        let body = Body::Json(doc);
        // A retried write whose first answer was lost answers 409: it stands, as does another
        // worker's; either way nothing is moved back.
        self.retry
            .run(|| async {
                let reply = send(&self.client, Method::Put, &path, &params, Some(&body)).await?;
                if reply.status.as_u16() == 409 {
                    return Ok(false);
                }
                check(&what, reply).map(|_| true)
            })
            .await
    }

    /// A read of the documents of shard `shard` of the concrete index `index` whose last write
    /// is in `range`, with `body`'s `_source` and with `_seq_no`/`_primary_term`.
    pub fn read(
        &self,
        scanner: &Scanner,
        index: &str,
        shard: u32,
        range: SeqRange,
        source: &[String],
        options: &ScanOptions,
    ) -> Cursor {
        let body = json!({
            "query": { "bool": { "filter": [range.query()] } },
            "_source": source,
            "seq_no_primary_term": true,
        });
        scanner
            .cursor(index, body, options)
            .with_preference(format!("_shards:{shard}"))
    }

    /// Creates the checkpoints index if it is missing (one shard, a replica where there is
    /// a second node; nothing but the marks mapped).
    async fn ensure_store(&mut self) -> Result<(), EsError> {
        if self.store_ready {
            return Ok(());
        }
        let body = Body::Json(json!({
            "settings": { "number_of_shards": 1, "auto_expand_replicas": "0-1" },
            "mappings": { "dynamic": false, "properties": {
                "index": { "type": "keyword" },
                "uuid": { "type": "keyword" },
                "updated_at": { "type": "long" }
            } }
        }));
        let path = format!("/{}", path_segment(&self.store));
        let what = format!("feed checkpoints `{}`: create", self.store);
        self.retry
            .run(|| async {
                let reply = send(&self.client, Method::Put, &path, &[], Some(&body)).await?;
                if reply.body["error"]["type"] == "resource_already_exists_exception" {
                    return Ok(());
                }
                check(&what, reply).map(drop)
            })
            .await?;
        self.store_ready = true;
        Ok(())
    }
}

/// The mark of shard `shard` from its copies in `_stats?level=shards`: the started (or
/// relocating) primary's global checkpoint, term and node; `None` without one.
fn primary_mark(shard: u32, copies: &Value) -> Option<ShardMark> {
    let primary = copies.as_array()?.iter().find(|c| {
        c["routing"]["primary"] == true
            && matches!(
                c["routing"]["state"].as_str(),
                Some("STARTED" | "RELOCATING")
            )
    })?;
    Some(ShardMark {
        shard,
        checkpoint: primary["seq_no"]["global_checkpoint"].as_i64()?,
        primary_term: primary["retention_leases"]["primary_term"].as_u64(),
        node: primary["routing"]["node"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mark(shard: u32, checkpoint: i64, term: u64, node: &str) -> ShardMark {
        ShardMark {
            shard,
            checkpoint,
            primary_term: Some(term),
            node: Some(node.into()),
        }
    }

    fn now(uuid: &str, shards: Vec<Option<ShardMark>>) -> IndexNow {
        IndexNow {
            index: "news".into(),
            uuid: uuid.into(),
            shards,
        }
    }

    #[test]
    fn a_shard_reads_above_its_checkpoint_up_to_the_global_checkpoint() {
        let s = step(&mark(0, 10, 1, "a"), Some(&mark(0, 25, 1, "a")));
        assert_eq!(s.read, Some(SeqRange { after: 10, to: 25 }));
        assert_eq!(
            s.read.unwrap().query()["range"]["_seq_no"],
            json!({ "gt": 10, "lte": 25 })
        );
        assert_eq!(s.next.checkpoint, 25);
        assert_eq!(s.event, None);
        // Nothing written: nothing read, nothing moved.
        let s = step(&mark(0, 25, 1, "a"), Some(&mark(0, 25, 1, "a")));
        assert_eq!((s.read, s.next.checkpoint), (None, 25));
        // An empty shard starts at -1.
        let s = step(&mark(0, -1, 1, "a"), Some(&mark(0, 0, 1, "a")));
        assert_eq!(s.read, Some(SeqRange { after: -1, to: 0 }));
    }

    #[test]
    fn a_term_change_is_reported_and_a_lower_checkpoint_is_followed_back() {
        // Failover, the new primary at or past the stored checkpoint: the gcp rule holds.
        let s = step(&mark(1, 40, 1, "a"), Some(&mark(1, 45, 2, "b")));
        assert_eq!(s.read, Some(SeqRange { after: 40, to: 45 }));
        assert_eq!(
            s.event,
            Some(ShardEvent::TermChanged {
                from: 1,
                to: 2,
                back_to: None
            })
        );
        assert_eq!(s.next, mark(1, 45, 2, "b"));
        // A new primary behind the stored checkpoint: back to it, so writes it numbers in
        // between are read.
        let s = step(&mark(1, 40, 1, "a"), Some(&mark(1, 30, 2, "b")));
        assert_eq!(s.read, None);
        assert_eq!(s.next.checkpoint, 30);
        assert!(matches!(
            s.event,
            Some(ShardEvent::TermChanged {
                back_to: Some(30),
                ..
            })
        ));
        // Same term, lower global checkpoint (a lagging answer): never back.
        let s = step(&mark(1, 40, 2, "a"), Some(&mark(1, 30, 2, "a")));
        assert_eq!((s.read, s.next.checkpoint, s.event), (None, 40, None));
        // A relocation: reported, followed as usual.
        let s = step(&mark(1, 40, 2, "a"), Some(&mark(1, 41, 2, "c")));
        assert_eq!(
            s.event,
            Some(ShardEvent::Moved {
                from: "a".into(),
                to: "c".into()
            })
        );
        assert_eq!(s.read, Some(SeqRange { after: 40, to: 41 }));
        // No primary: skipped, the mark kept.
        let s = step(&mark(1, 40, 2, "a"), None);
        assert_eq!(
            (s.read, s.next, s.event),
            (None, mark(1, 40, 2, "a"), Some(ShardEvent::Unavailable))
        );
    }

    #[test]
    fn a_new_index_or_shard_count_starts_over() {
        let stored = IndexMarks {
            index: "news".into(),
            uuid: "u1".into(),
            shards: vec![mark(0, 5, 1, "a"), mark(1, 7, 1, "a")],
        };
        let same = now(
            "u1",
            vec![Some(mark(0, 9, 1, "a")), Some(mark(1, 7, 1, "a"))],
        );
        let Plan::Follow(steps) = plan(Some(&stored), &same) else {
            panic!()
        };
        assert_eq!(steps[0].read, Some(SeqRange { after: 5, to: 9 }));
        assert_eq!(steps[1].read, None);
        for (other, words) in [
            (now("u2", same.shards.clone()), "created again"),
            (
                now("u1", vec![Some(mark(0, 9, 1, "a"))]),
                "1 shards instead of 2",
            ),
        ] {
            let Plan::Start { why, marks } = plan(Some(&stored), &other) else {
                panic!()
            };
            assert!(why.contains(words), "{why}");
            assert_eq!(
                marks.unwrap().shards,
                other.shards.iter().flatten().cloned().collect::<Vec<_>>()
            );
        }
        let Plan::Start { why, marks } = plan(None, &same) else {
            panic!()
        };
        assert_eq!(why, "no checkpoint yet");
        assert_eq!(marks.unwrap().shards[0].checkpoint, 9);
        // A shard without a primary: no start yet.
        let Plan::Start { marks, .. } =
            plan(None, &now("u1", vec![Some(mark(0, 9, 1, "a")), None]))
        else {
            panic!()
        };
        assert_eq!(marks, None);
    }

    #[test]
    fn only_differing_fields_are_written() {
        let wanted: Map<String, Value> =
            serde_json::from_value(json!({ "simHash": 5, "simHashReason": null })).unwrap();
        assert!(!fields_differ(
            &json!({ "title": "t", "simHash": 5 }),
            &wanted
        ));
        assert!(!fields_differ(
            &json!({ "simHash": 5, "simHashReason": null }),
            &wanted
        ));
        assert!(fields_differ(&json!({ "simHash": 6 }), &wanted));
        assert!(fields_differ(&json!({ "title": "t" }), &wanted));
    }

    #[test]
    fn only_failures_that_may_pass_hold_the_checkpoint() {
        let failure = |status| ItemFailure {
            id: "a".into(),
            status,
            error_type: "x".into(),
            reason: "y".into(),
        };
        assert!(!retry_later(&[]));
        assert!(!retry_later(&[failure(400), failure(404)]));
        assert!(retry_later(&[failure(400), failure(429)]));
        assert!(retry_later(&[failure(503)]));
    }

    #[test]
    fn primary_marks_come_from_the_started_primary() {
        let copies = json!([
            { "routing": { "state": "STARTED", "primary": false, "node": "r" },
              "seq_no": { "global_checkpoint": 3 } },
            { "routing": { "state": "STARTED", "primary": true, "node": "p" },
              "seq_no": { "global_checkpoint": 4 }, "retention_leases": { "primary_term": 2 } }
        ]);
        assert_eq!(primary_mark(0, &copies), Some(mark(0, 4, 2, "p")));
        let initialising = json!([{ "routing": { "state": "INITIALIZING", "primary": true } }]);
        assert_eq!(primary_mark(0, &initialising), None);
        assert_eq!(primary_mark(0, &Value::Null), None);
    }

    /// A shard's history as the feed sees it: writes numbered 0, 1, 2 … and global
    /// checkpoints that only grow within a term.
    fn history() -> impl Strategy<Value = Vec<(i64, u64)>> {
        prop::collection::vec((0i64..50, 0u64..2), 1..12).prop_map(|steps| {
            let (mut gcp, mut term) = (-1i64, 1u64);
            steps
                .into_iter()
                .map(|(grow, bump)| {
                    gcp += grow;
                    term += bump;
                    (gcp, term)
                })
                .collect()
        })
    }

    proptest! {
        /// Following the global checkpoints pass after pass reads every sequence number up
        /// to the last one exactly once, and the checkpoint never moves back within a term.
        #[test]
        fn every_sequence_number_is_read_once(h in history()) {
            let mut stored = ShardMark { shard: 0, checkpoint: -1, primary_term: Some(1), node: None };
            let mut read = vec![0u32; (h.last().unwrap().0 + 1).max(0) as usize];
            for (gcp, term) in h {
                let s = step(&stored, Some(&ShardMark { shard: 0, checkpoint: gcp, primary_term: Some(term), node: None }));
                if let Some(r) = s.read {
                    prop_assert!(r.after == stored.checkpoint && r.to == gcp);
                    for n in r.after + 1..=r.to {
                        read[n as usize] += 1;
                    }
                }
                prop_assert!(s.next.checkpoint >= stored.checkpoint);
                prop_assert_eq!(s.next.checkpoint, gcp);
                stored = s.next;
            }
            prop_assert!(read.iter().all(|&n| n == 1), "{:?}", read);
        }
    }
}

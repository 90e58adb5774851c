//! Claims: short-lived locks in Elasticsearch that make "insert unless a near-duplicate is
//! stored" race-free across processes, without waiting for a refresh.
//!
//! Elasticsearch has no transactions, and a document written less than a refresh interval ago
//! is invisible to search, so "search, then insert" lets two near-duplicates sent at the same
//! moment both in. A writer therefore first **claims the keys its sketch is found by** (the
//! LSH band terms of a MinHash signature, the four block values of a SimHash): one small
//! document per key in a claims index (the key's **record**), which exactly one writer holds
//! at a time. Holding all of its keys, it looks for near-duplicates in two places:
//!
//! - a **search**, which sees every document Elasticsearch has refreshed;
//! - the records' lists of **recent inserts**: the ids written by writers that held the key in
//!   the last [`Claims::horizon`], read back with a realtime multi-get (by id, which needs no
//!   refresh).
//!
//! If nothing near is stored, it writes the article (without waiting for a refresh) and then
//! releases its keys, adding the article's id to each key's list of recent inserts.
//!
//! **Why exactly one of several near-duplicates gets in.** Two texts that a query would call
//! near-duplicates share at least one key (that is how the query finds them). Whichever of two
//! writers holds a shared key first writes its article and then lists it in the key's record
//! before the other can hold the key; the other then reads the article by id (realtime), or,
//! once the entry has aged out of the list, finds it by search: an entry is kept for the
//! horizon (60 s, or ten of the index's refresh intervals when that is longer: see
//! [`Claims::fit_refresh_interval`]), far longer than the index takes to refresh it. An index
//! with periodic refresh disabled (`-1`) has each dedupe write refresh instead.
//!
//! **Holding a key.** A key with no record is claimed by creating it (`op_type=create`, which
//! Elasticsearch grants to one writer); a free record (nobody holds it, only recent inserts) or
//! an expired one is taken over by writing it guarded by its `_seq_no`/`_primary_term`, so of
//! two writers taking it over one wins. Keys are claimed in sorted order: the writer keeps what
//! it got before the first key someone else holds, gives back what it got after it, waits
//! until that key is free and goes on. Waiting only ever for a key greater than all it holds,
//! no two writers can wait for each other (no deadlock). Uncontended, claiming is one `_bulk`
//! of creates (plus, for keys whose records exist, one multi-get and one `_bulk` of take-overs)
//! and releasing another `_bulk`.
//!
//! **A claimant knows its own records (lost answers).** Each [`Claims::acquire`] call draws
//! a token, unique across calls and processes, and writes it into every record it creates or
//! takes over (`token`, next to the `holder` name shown to others). Every `_bulk` and `_mget`
//! on the records is retried after a transient failure, a lost answer among them: the write
//! may have been applied. A retried create then answers 409 and a retried take-over 409 (its
//! guard is stale); the claimant reads the record, and **a record holding its own token is its
//! own**: it holds the key at the version read, without waiting for its own lease, counting
//! it as someone else's or failing the insert. Any other token (another request of the same
//! process too) is someone else's. Releases are guarded deletes and writes, whose retries
//! answer 404 or 409 and are done.
//!
//! **Crashes and limits.** A claim carries a lease (`expires_at`, epoch milliseconds of the
//! claimant's clock). A writer that finds an expired claim takes it over (guarded, so it never
//! overwrites a successor's). A claimant must therefore finish within its lease (the service's
//! request timeout is kept below it), and the clocks of the service's hosts must agree to well
//! within the lease. A claimant that crashed after writing its article never listed it; the
//! lease (30 s, and at least three refresh intervals) outlasts the refresh, so the next
//! holder's search finds it. Releases
//! are guarded the same way. Writers that do not claim (a bulk back-fill, another application,
//! a `PUT` without dedupe) are only seen once Elasticsearch has refreshed their documents.
//!
//! **Records are bounded.** A release drops entries older than the horizon and deletes a
//! record left with none; [`Claims::sweep`] deletes free records whose newest entry is older
//! than the horizon (guarded deletes, which skip any record changed meanwhile).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::write::new_id;
use super::{check, path_segment, request, send, Body, EsError, Refresh, RetryPolicy};

/// Claims for one article index, kept in their own index.
#[derive(Clone, Debug)]
pub struct Claims {
    client: Elasticsearch,
    retry: RetryPolicy,
    index: String,
    /// How long a claim protects its key if its holder never releases it.
    pub lease: Duration,
    /// How long to wait between two looks at a claimed key.
    pub poll: Duration,
    /// How long an insert stays listed in the records of its keys.
    pub horizon: Duration,
    /// When [`Claims::sweep_due`] last said yes.
    last_sweep: Arc<Mutex<Option<Instant>>>,
}

/// An article written under a key, and when (epoch milliseconds of its writer's clock).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentInsert {
    pub id: String,
    pub at: i64,
}

/// One key held: its record's version, and the recent inserts it listed.
#[derive(Debug)]
struct Claim {
    key: String,
    seq_no: u64,
    term: u64,
    recent: Vec<RecentInsert>,
}

/// Keys a writer holds; give them back with [`Claims::release`] or
/// [`Claims::release_recording`].
#[derive(Debug)]
#[must_use = "claims must be released"]
pub struct Held {
    claims: Vec<Claim>,
}

impl Held {
    /// The keys held, in claim order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.claims.iter().map(|c| c.key.as_str())
    }

    /// The articles the held keys' records list as written recently, each once (sorted):
    /// read them by id, as a search may not see them yet.
    pub fn recent_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .claims
            .iter()
            .flat_map(|c| c.recent.iter().map(|r| r.id.clone()))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// A key's record as read.
#[derive(Debug)]
struct Record {
    seq_no: u64,
    term: u64,
    holder: Option<String>,
    /// The token of the [`Claims::acquire`] call holding it.
    token: Option<String>,
    expires_at: i64,
    recent: Vec<RecentInsert>,
}

/// What a claimant does with a key, given its record as read.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// No record: create it.
    Create,
    /// The record is this claimant's own (its token): an answer to its create or take-over
    /// was lost and the write applied. It holds the key at the record's version.
    Own,
    /// Nobody holds it, or the lease ran out: take it over, guarded by its version.
    TakeOver,
    /// Someone else holds it: wait.
    Wait,
}

/// The rule for one key: a record carrying the claimant's own token is the claimant's, whoever
/// else could be named in it, before anything else is asked.
fn step(record: Option<&Record>, token: &str, now: i64) -> Step {
    match record {
        None => Step::Create,
        Some(r) if r.holder.is_some() && r.token.as_deref() == Some(token) => Step::Own,
        Some(r) if r.is_free(now) => Step::TakeOver,
        Some(_) => Step::Wait,
    }
}

impl Record {
    fn from_doc(doc: &Value) -> Option<Record> {
        if doc["found"] != true {
            return None;
        }
        let s = &doc["_source"];
        Some(Record {
            seq_no: doc["_seq_no"].as_u64()?,
            term: doc["_primary_term"].as_u64()?,
            holder: s["holder"].as_str().map(str::to_owned),
            token: s["token"].as_str().map(str::to_owned),
            expires_at: s["expires_at"].as_i64().unwrap_or(0),
            recent: serde_json::from_value(s["recent"].clone()).unwrap_or_default(),
        })
    }

    /// Nobody holds it (only recent inserts are listed), or its holder's lease ran out.
    fn is_free(&self, now: i64) -> bool {
        self.holder.is_none() || self.expires_at < now
    }
}

/// Why claiming failed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("key `{key}` stayed claimed (by `{holder}`) past the deadline; retry the request")]
    Timeout { key: String, holder: String },
    #[error(transparent)]
    Es(#[from] EsError),
}

/// One `_bulk` action on a record, for [`Claims::bulk`].
enum Action<'a> {
    Create(&'a str, Value),
    /// Write `source` if the record is still at `(seq_no, term)`.
    Replace(&'a str, u64, u64, Value),
    /// Delete it if it is still at `(seq_no, term)`.
    Delete(&'a str, u64, u64),
}

impl Claims {
    /// Claims for `index`, kept in `neardup-claims-{index}`, with a 30 s lease and recent
    /// inserts listed for 60 s.
    pub fn new(client: Elasticsearch, retry: RetryPolicy, index: &str) -> Claims {
        Claims {
            client,
            retry,
            index: format!("neardup-claims-{index}"),
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(5),
            horizon: Duration::from_secs(60),
            last_sweep: Arc::new(Mutex::new(None)),
        }
    }

    /// The claims index's name.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// Fits the horizon and the lease to how often the article index refreshes (its longest
    /// `refresh_interval`, `None` when periodic refresh is disabled), and returns the
    /// `refresh` a dedupe write then needs. A listed article must be searchable long before its
    /// entry goes, so the horizon is at least ten refresh intervals; an article whose writer
    /// crashed before listing it must be searchable before the lease lets the next writer in,
    /// so the lease is at least three. With refresh disabled nothing bounds when an article
    /// becomes searchable: each dedupe write refreshes (`refresh=true`).
    pub fn fit_refresh_interval(&mut self, interval: Option<Duration>) -> Refresh {
        match interval {
            Some(i) => {
                self.horizon = self.horizon.max(i * 10);
                self.lease = self.lease.max(i * 3);
                Refresh::No
            }
            None => Refresh::Now,
        }
    }

    /// Creates the claims index if it is missing (one shard: claims are tiny and few), and
    /// maps `idle_since` in one made before records listed recent inserts.
    pub async fn ensure_index(&self) -> Result<(), EsError> {
        let body = Body::Json(json!({
            "settings": { "number_of_shards": 1, "auto_expand_replicas": "0-1" },
            "mappings": { "dynamic": false, "properties": {
                "holder": { "type": "keyword" },
                "expires_at": { "type": "long" },
                "idle_since": { "type": "long" }
            } }
        }));
        let path = format!("/{}", path_segment(&self.index));
        let what = format!("claims index `{}`: create", self.index);
        let existed = self
            .retry
            .run(|| async {
                let reply = send(&self.client, Method::Put, &path, &[], Some(&body)).await?;
                if reply.body["error"]["type"] == "resource_already_exists_exception" {
                    return Ok(true);
                }
                check(&what, reply).map(|_| false)
            })
            .await?;
        if existed {
            let mapping = Body::Json(json!({ "properties": { "idle_since": { "type": "long" } } }));
            let path = format!("{path}/_mapping");
            let what = format!("claims index `{}`: map idle_since", self.index);
            request(
                &self.client,
                &self.retry,
                &what,
                Method::Put,
                &path,
                &[],
                Some(&mapping),
            )
            .await?;
        }
        Ok(())
    }

    /// Claims every key (sorted, once each) for `holder`, waiting for claimed keys until
    /// `deadline`. On failure nothing stays held.
    pub async fn acquire(
        &self,
        keys: &[String],
        holder: &str,
        deadline: Instant,
    ) -> Result<Held, ClaimError> {
        let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        keys.sort_unstable();
        keys.dedup();
        let claimant = Claimant {
            holder,
            token: new_id(),
        };
        let mut held = Held {
            claims: Vec::with_capacity(keys.len()),
        };
        let mut next = 0;
        while next < keys.len() {
            let step = match self.claim_in_order(&keys[next..], &claimant).await {
                Ok(step) => step,
                Err(e) => {
                    self.release(held).await;
                    return Err(e);
                }
            };
            let (got, blocked) = step;
            next += got.len();
            held.claims.extend(got);
            if blocked {
                match self.wait_and_take(keys[next], &claimant, deadline).await {
                    Ok(claim) => {
                        held.claims.push(claim);
                        next += 1;
                    }
                    Err(e) => {
                        self.release(held).await;
                        return Err(e);
                    }
                }
            }
        }
        Ok(held)
    }

    /// Claims `keys` in order without waiting: creates every record in one `_bulk`, then
    /// takes over the free ones among those that existed. Returns the claims before the first
    /// key it could not get, and whether there is one; claims after it are given back at once.
    async fn claim_in_order(
        &self,
        keys: &[&str],
        claimant: &Claimant<'_>,
    ) -> Result<(Vec<Claim>, bool), ClaimError> {
        let source = self.held_source(claimant, &[]);
        let creates: Vec<Action> = keys
            .iter()
            .map(|k| Action::Create(k, source.clone()))
            .collect();
        // Retried after a lost answer: a record the first attempt created answers 409, and
        // reading it shows the claimant's own token (below).
        let items = self.bulk("claims: create", &creates).await?;
        let mut got: Vec<Option<Claim>> = Vec::with_capacity(keys.len());
        let mut existing = Vec::new();
        let mut failure = None;
        for (i, (key, r)) in keys.iter().zip(&items).enumerate() {
            match r["status"].as_u64().unwrap_or(0) {
                200..=299 => got.push(claim_of(key, r, Vec::new())),
                409 => {
                    existing.push(i);
                    got.push(None);
                }
                status => {
                    failure.get_or_insert_with(|| EsError::BadResponse {
                        what: format!("claim `{key}`: create"),
                        detail: format!("HTTP {status}: {}", r["error"]),
                    });
                    got.push(None);
                }
            }
        }
        if failure.is_none() && !existing.is_empty() {
            let wanted: Vec<&str> = existing.iter().map(|&i| keys[i]).collect();
            match self.read(&wanted).await {
                Ok(records) => {
                    let now = now_ms();
                    let mut takes = Vec::new();
                    let mut at = Vec::new();
                    for (&i, record) in existing.iter().zip(records) {
                        match (step(record.as_ref(), &claimant.token, now), record) {
                            (Step::Own, Some(r)) => got[i] = Some(own_claim(keys[i], r)),
                            (Step::TakeOver, Some(r)) => {
                                let recent = self.pruned(r.recent, now, &[]);
                                takes.push(Action::Replace(
                                    keys[i],
                                    r.seq_no,
                                    r.term,
                                    self.held_source(claimant, &recent),
                                ));
                                at.push((i, recent));
                            }
                            // Deleted since the create (a release or a sweep), or held by
                            // someone else: waited for in order.
                            _ => {}
                        }
                    }
                    if !takes.is_empty() {
                        match self.bulk("claims: take over", &takes).await {
                            Ok(items) => {
                                for ((i, recent), r) in at.into_iter().zip(&items) {
                                    if (200..300).contains(&r["status"].as_u64().unwrap_or(0)) {
                                        got[i] = claim_of(keys[i], r, recent);
                                    }
                                }
                            }
                            Err(e) => failure = Some(e),
                        }
                    }
                }
                Err(e) => failure = Some(e),
            }
        }
        if let Some(e) = failure {
            let claims = got.into_iter().flatten().collect();
            self.release(Held { claims }).await;
            return Err(e.into());
        }
        let first_missing = got.iter().position(Option::is_none);
        let surplus: Vec<Claim> = match first_missing {
            Some(p) => got.drain(p..).flatten().collect(),
            None => Vec::new(),
        };
        if !surplus.is_empty() {
            self.release(Held { claims: surplus }).await;
        }
        Ok((got.into_iter().flatten().collect(), first_missing.is_some()))
    }

    /// Waits until nobody holds `key` (released, or its lease ran out), then claims it.
    /// Looks again after 5 ms, doubling to 100 ms.
    async fn wait_and_take(
        &self,
        key: &str,
        claimant: &Claimant<'_>,
        deadline: Instant,
    ) -> Result<Claim, ClaimError> {
        let mut pause = self.poll;
        loop {
            let record = self.read(&[key]).await?.pop().flatten();
            let now = now_ms();
            let (action, recent) = match (step(record.as_ref(), &claimant.token, now), record) {
                (Step::Own, Some(r)) => return Ok(own_claim(key, r)),
                (Step::TakeOver, Some(r)) => {
                    if r.holder.is_some() {
                        tracing::info!(claim = %key, holder = ?r.holder, "taking over an expired claim");
                    }
                    let recent = self.pruned(r.recent, now, &[]);
                    let source = self.held_source(claimant, &recent);
                    (Action::Replace(key, r.seq_no, r.term, source), recent)
                }
                (Step::Wait, Some(r)) => {
                    if Instant::now() + pause > deadline {
                        return Err(ClaimError::Timeout {
                            key: key.to_owned(),
                            holder: r.holder.unwrap_or_default(),
                        });
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                    continue;
                }
                (Step::Create, _) | (_, None) => (
                    Action::Create(key, self.held_source(claimant, &[])),
                    Vec::new(),
                ),
            };
            let items = self.bulk(&format!("claim `{key}`"), &[action]).await?;
            let r = &items[0];
            match r["status"].as_u64().unwrap_or(0) {
                200..=299 => {
                    return Ok(claim_of(key, r, recent).expect("a successful write has a version"))
                }
                // Someone else claimed it between the read and the write, or the answer to
                // this claimant's own write was lost and its retry refused: look again.
                409 | 404 => {}
                status => {
                    return Err(EsError::BadResponse {
                        what: format!("claim `{key}`"),
                        detail: format!("HTTP {status}: {}", r["error"]),
                    }
                    .into())
                }
            }
        }
    }

    /// Gives the keys back without listing anything (nothing was written). See
    /// [`Claims::release_recording`].
    pub async fn release(&self, held: Held) {
        self.give_back(held, &BTreeMap::new()).await
    }

    /// Gives the keys back after writing articles, listing each in the records of the keys
    /// `written` gives it (key → ids), so that the next holder of any of them reads it by id
    /// even before a refresh.
    pub async fn release_recording(&self, held: Held, written: &BTreeMap<String, Vec<String>>) {
        self.give_back(held, written).await
    }

    /// One `_bulk`: each record keeps its recent inserts (within the horizon, plus `written`),
    /// and is deleted when none is left. Each write is guarded by the claim's sequence number,
    /// so a claim that expired and was taken over is left to its new holder. Failures are
    /// logged: the lease frees the keys later.
    async fn give_back(&self, held: Held, written: &BTreeMap<String, Vec<String>>) {
        if held.claims.is_empty() {
            return;
        }
        let now = now_ms();
        let actions: Vec<Action> = held
            .claims
            .iter()
            .map(|c| {
                let ids = written.get(&c.key).map(Vec::as_slice).unwrap_or(&[]);
                let recent = self.pruned(c.recent.clone(), now, ids);
                match recent.iter().map(|r| r.at).max() {
                    None => Action::Delete(&c.key, c.seq_no, c.term),
                    Some(newest) => Action::Replace(
                        &c.key,
                        c.seq_no,
                        c.term,
                        json!({ "expires_at": 0, "idle_since": newest, "recent": recent }),
                    ),
                }
            })
            .collect();
        match self.bulk("claims: release", &actions).await {
            Ok(items) => {
                let failed = items
                    .iter()
                    .filter(|i| !matches!(i["status"].as_u64(), Some(200..=299 | 404 | 409)))
                    .count();
                if failed > 0 {
                    tracing::warn!(
                        failed,
                        "could not release some claims; their lease will free them"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not release claims; their lease will free them")
            }
        }
    }

    /// Starts a [`Claims::sweep`] in the background when one is due (at most once per
    /// horizon per `Claims` and its clones); a failure is logged, and the next one retries.
    pub fn sweep_when_due(&self) {
        if !self.sweep_due() {
            return;
        }
        let claims = self.clone();
        tokio::spawn(async move {
            match claims.sweep().await {
                Ok(deleted) => {
                    tracing::debug!(deleted, claims = claims.index(), "swept old claim records")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not sweep old claim records; the next sweep will")
                }
            }
        });
    }

    /// Whether a [`Claims::sweep`] is due: yes at most once per horizon (per `Claims` and
    /// its clones), and the answer is remembered.
    pub fn sweep_due(&self) -> bool {
        let mut last = self.last_sweep.lock().expect("lock");
        match *last {
            Some(at) if at.elapsed() < self.horizon => false,
            _ => {
                *last = Some(Instant::now());
                true
            }
        }
    }

    /// Deletes the free records whose newest insert is older than the horizon: their articles
    /// are searchable. Each is deleted guarded by the version the search found, so a record
    /// claimed or changed since is skipped. (A search and a `_bulk` of guarded deletes rather
    /// than `_delete_by_query`, which needs the reindex module some clusters leave out.) At most
    /// 10 pages of 1,000 per call: the next sweep goes on. Returns how many were deleted.
    pub async fn sweep(&self) -> Result<u64, EsError> {
        const PAGE: usize = 1000;
        let before = now_ms() - self.horizon.as_millis() as i64;
        let body = Body::Json(json!({
            "size": PAGE,
            "_source": false,
            "seq_no_primary_term": true,
            "query": { "bool": {
                "must_not": { "exists": { "field": "holder" } },
                "filter": { "range": { "idle_since": { "lt": before } } }
            } }
        }));
        let path = format!("/{}/_search", path_segment(&self.index));
        let what = format!("claims index `{}`: sweep", self.index);
        let mut deleted = 0;
        for _ in 0..10 {
            let reply = request(
                &self.client,
                &self.retry,
                &what,
                Method::Post,
                &path,
                &[],
                Some(&body),
            )
            .await?;
            let hits = reply["hits"]["hits"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let actions: Vec<Action> = hits
                .iter()
                .filter_map(|h| {
                    Some(Action::Delete(
                        h["_id"].as_str()?,
                        h["_seq_no"].as_u64()?,
                        h["_primary_term"].as_u64()?,
                    ))
                })
                .collect();
            if actions.is_empty() {
                break;
            }
            let items = self.bulk(&what, &actions).await?;
            deleted += items
                .iter()
                .filter(|i| (200..300).contains(&i["status"].as_u64().unwrap_or(0)))
                .count() as u64;
            if hits.len() < PAGE {
                break;
            }
            // The deleted records leave the search at the next refresh of the claims index.
            let refresh = format!("/{}/_refresh", path_segment(&self.index));
            check(
                &what,
                send(&self.client, Method::Post, &refresh, &[], None).await?,
            )?;
        }
        Ok(deleted)
    }

    /// The source of a record held by `claimant`, listing `recent`.
    fn held_source(&self, claimant: &Claimant<'_>, recent: &[RecentInsert]) -> Value {
        let expires_at = now_ms() + self.lease.as_millis() as i64;
        json!({ "holder": claimant.holder, "token": claimant.token,
            "expires_at": expires_at, "recent": recent })
    }

    /// `recent` without entries older than the horizon (or of `written`), plus `written`.
    fn pruned(
        &self,
        mut recent: Vec<RecentInsert>,
        now: i64,
        written: &[String],
    ) -> Vec<RecentInsert> {
        let oldest = now - self.horizon.as_millis() as i64;
        recent.retain(|r| r.at >= oldest && !written.contains(&r.id));
        recent.extend(written.iter().map(|id| RecentInsert {
            id: id.clone(),
            at: now,
        }));
        recent.dedup_by(|a, b| a.id == b.id);
        recent
    }

    /// The records of `keys` (realtime: no refresh needed), `None` for a missing one.
    async fn read(&self, keys: &[&str]) -> Result<Vec<Option<Record>>, EsError> {
        let path = format!("/{}/_mget", path_segment(&self.index));
        let body = Body::Json(json!({ "ids": keys }));
        let what = format!("claims index `{}`: read {} records", self.index, keys.len());
        let reply = request(
            &self.client,
            &self.retry,
            &what,
            Method::Post,
            &path,
            &[],
            Some(&body),
        )
        .await?;
        let docs = reply["docs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if docs.len() != keys.len() {
            return Err(EsError::BadResponse {
                what,
                detail: format!("{} docs for {} ids", docs.len(), keys.len()),
            });
        }
        Ok(docs.iter().map(Record::from_doc).collect())
    }

    /// Sends `actions` in one `_bulk` and returns each item's result (`status`, `_seq_no`, …),
    /// in order. Transient failures of the whole request (a lost answer among them) are
    /// retried: a create or guarded write the lost attempt applied then answers 409, a guarded
    /// delete 404, which each caller reads as such.
    async fn bulk(&self, what: &str, actions: &[Action<'_>]) -> Result<Vec<Value>, EsError> {
        let mut body = String::new();
        for a in actions {
            let (line, source) = match a {
                Action::Create(key, source) => (
                    json!({ "create": { "_index": &self.index, "_id": key } }),
                    Some(source),
                ),
                Action::Replace(key, seq_no, term, source) => (
                    json!({ "index": { "_index": &self.index, "_id": key,
                        "if_seq_no": seq_no, "if_primary_term": term } }),
                    Some(source),
                ),
                Action::Delete(key, seq_no, term) => (
                    json!({ "delete": { "_index": &self.index, "_id": key,
                        "if_seq_no": seq_no, "if_primary_term": term } }),
                    None,
                ),
            };
            body.push_str(&line.to_string());
            body.push('\n');
            if let Some(source) = source {
                body.push_str(&source.to_string());
                body.push('\n');
            }
        }
        let body = Body::NdJson(body);
        let reply = request(
            &self.client,
            &self.retry,
            what,
            Method::Post,
            "/_bulk",
            &[],
            Some(&body),
        )
        .await?;
        let items: Vec<Value> = reply["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_object()?.values().next().cloned())
                    .collect()
            })
            .unwrap_or_default();
        if items.len() != actions.len() {
            return Err(EsError::BadResponse {
                what: what.into(),
                detail: format!("{} items for {} actions", items.len(), actions.len()),
            });
        }
        Ok(items)
    }
}

/// Who claims: the name shown to others (`holder`) and the token of one
/// [`Claims::acquire`] call, unique across calls and processes, that tells its own records
/// from everyone else's.
struct Claimant<'a> {
    holder: &'a str,
    token: String,
}

/// The claim on `key` a claimant finds already its own (read back after a lost answer).
fn own_claim(key: &str, r: Record) -> Claim {
    Claim {
        key: key.to_owned(),
        seq_no: r.seq_no,
        term: r.term,
        recent: r.recent,
    }
}

/// The claim a successful bulk item made on `key`.
fn claim_of(key: &str, item: &Value, recent: Vec<RecentInsert>) -> Option<Claim> {
    Some(Claim {
        key: key.to_owned(),
        seq_no: item["_seq_no"].as_u64()?,
        term: item["_primary_term"].as_u64()?,
        recent,
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::EsConfig;
    use super::*;

    /// A record as `_mget` returns it, held by `holder` with `token` until `expires_at`.
    fn record(holder: Option<&str>, token: Option<&str>, expires_at: i64) -> Record {
        let doc = json!({
            "found": true, "_seq_no": 7, "_primary_term": 2,
            "_source": { "holder": holder, "token": token, "expires_at": expires_at,
                "recent": [{ "id": "a1", "at": 5 }] }
        });
        Record::from_doc(&doc).expect("a found record")
    }

    #[test]
    fn a_record_with_the_claimants_own_token_is_its_own() {
        let now = 1_000;
        let mine = record(Some("pid 1"), Some("t-mine"), now + 30_000);
        assert_eq!(step(Some(&mine), "t-mine", now), Step::Own);
        // The same holder name with another token is someone else (another request of the
        // same process): it waits.
        assert_eq!(step(Some(&mine), "t-other", now), Step::Wait);
        // Its own claim whose lease ran out is still its own (nobody took it over).
        let expired = record(Some("pid 1"), Some("t-mine"), now - 1);
        assert_eq!(step(Some(&expired), "t-mine", now), Step::Own);
        assert_eq!(step(Some(&expired), "t-other", now), Step::TakeOver);
    }

    #[test]
    fn free_missing_and_held_records() {
        let now = 1_000;
        assert_eq!(step(None, "t", now), Step::Create);
        // Released (only recent inserts): free, whatever token it once carried.
        let free = record(None, None, 0);
        assert_eq!(step(Some(&free), "t", now), Step::TakeOver);
        let held = record(Some("pid 2"), Some("t2"), now + 1);
        assert_eq!(step(Some(&held), "t", now), Step::Wait);
        // A record written before tokens existed is never anyone's own.
        let old = record(Some("pid 3"), None, now + 1);
        assert_eq!(step(Some(&old), "t", now), Step::Wait);
    }

    #[test]
    fn a_held_record_carries_its_claimants_token_and_owning_keeps_its_version() {
        let claims = Claims::new(
            EsConfig::new("http://127.0.0.1:1")
                .unwrap()
                .client()
                .unwrap(),
            RetryPolicy::none(),
            "news",
        );
        let claimant = Claimant {
            holder: "pid 1",
            token: new_id(),
        };
        let other = Claimant {
            holder: "pid 1",
            token: new_id(),
        };
        assert_ne!(claimant.token, other.token);
        let source = claims.held_source(&claimant, &[]);
        let doc = json!({ "found": true, "_seq_no": 3, "_primary_term": 1, "_source": source });
        let read = Record::from_doc(&doc).unwrap();
        assert_eq!(step(Some(&read), &claimant.token, now_ms()), Step::Own);
        assert_eq!(step(Some(&read), &other.token, now_ms()), Step::Wait);
        let claim = own_claim("m1", read);
        assert_eq!((claim.key.as_str(), claim.seq_no, claim.term), ("m1", 3, 1));
    }
}

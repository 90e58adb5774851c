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
//! **A holder dropped mid-request** (a request its timeout cancelled, an aborted task) gives
//! its keys back at once: a dropped [`Held`] spawns its release on the tokio runtime, listing
//! the articles it was writing ([`Held::writing`]) as **pending** until its lease ends, since
//! their write may still be applied with nobody left to hear the answer. A write that failed
//! as a whole is released the same way ([`Claims::release_unanswered`]). The next claimant of
//! such a key reads the pending articles by id (realtime `_mget`): once each is found it takes
//! the key and checks them as recent inserts; until then it waits, at most until that lease
//! ends, which bounds a write as it does for a crash. A write that was never sent lists
//! nothing, and the keys are free at once. The release is best effort (`Drop` cannot wait
//! for it): outside a runtime, or when it fails, the lease frees the keys.
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

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::write::new_id;
use super::{
    check, mget, path_segment, request, search, send, Body, EsError, Refresh, RetryPolicy,
};

/// Claims for one article index, kept in their own index.
#[derive(Clone, Debug)]
pub struct Claims {
    client: Elasticsearch,
    retry: RetryPolicy,
    index: String,
    /// The article index the claims are for: where an unanswered write is looked for.
    articles: String,
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
    /// Set when the write's answer never came (its holder was dropped or the write failed
    /// as a whole): the write may still be applied until this time, the end of its holder's
    /// lease. Until then the next claimant of the key waits unless it reads the article by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_until: Option<i64>,
}

impl RecentInsert {
    /// From when on the article is known to be written, or never will be: `at`, or for a
    /// pending write the end of its holder's lease. An entry is kept a horizon past it.
    fn settled_at(&self) -> i64 {
        self.pending_until.map_or(self.at, |u| u.max(self.at))
    }

    /// A pending write that may still be applied at `now`.
    fn pending_at(&self, now: i64) -> bool {
        self.pending_until.is_some_and(|u| u >= now)
    }
}

/// One key held: its record's version, when its lease ends, and the recent inserts it listed.
#[derive(Debug)]
struct Claim {
    key: String,
    seq_no: u64,
    term: u64,
    expires_at: i64,
    recent: Vec<RecentInsert>,
}

/// Keys a writer holds; give them back with [`Claims::release`],
/// [`Claims::release_recording`] or [`Claims::release_unanswered`].
///
/// **Dropped without a release** (a request cancelled by a timeout, a task aborted), it gives
/// its keys back on its own, as [`Claims::release_unanswered`] does: the articles
/// [`Held::writing`] named are listed as pending, since their write may still be applied. That
/// release is spawned on the current tokio runtime (`Drop` cannot wait for it) and is best
/// effort: outside a runtime, or when it fails, the keys stay claimed until their lease ends,
/// as they would after a crash.
#[derive(Debug)]
#[must_use = "claims must be released"]
pub struct Held {
    claims: Vec<Claim>,
    /// Who gives the keys back when dropped unreleased.
    owner: Claims,
    /// The articles being written under each key ([`Held::writing`]).
    writing: BTreeMap<String, Vec<String>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        let claims = std::mem::take(&mut self.claims);
        let writing = std::mem::take(&mut self.writing);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let owner = self.owner.clone();
                runtime.spawn(async move { owner.give_back(claims, &writing, true).await });
            }
            Err(_) => tracing::warn!(
                keys = claims.len(),
                "claims dropped outside a tokio runtime; their lease will free them"
            ),
        }
    }
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

    /// Names the articles about to be written under each key (key → ids). From then on, a
    /// holder dropped before its release lists them as pending in the keys' records (their
    /// write may be applied although nobody is left to hear the answer), so that the next
    /// claimant reads them by id, or waits for them, before it writes a near-duplicate.
    pub fn writing(&mut self, written: BTreeMap<String, Vec<String>>) {
        self.writing = written;
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
/// else could be named in it, before anything else is asked. A free record (or an expired
/// one) is taken over unless it lists a pending write among `unwritten`: an article whose
/// writer was dropped before its answer, still within its lease, that a realtime read did not
/// find; that is waited for like a holder.
fn step(record: Option<&Record>, token: &str, now: i64, unwritten: &HashSet<String>) -> Step {
    match record {
        None => Step::Create,
        Some(r) if r.holder.is_some() && r.token.as_deref() == Some(token) => Step::Own,
        Some(r) if r.is_free(now) && r.awaited(now, unwritten).is_none() => Step::TakeOver,
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

    /// The first pending write it lists that may still be applied at `now` and is among
    /// `unwritten` (not found by id).
    fn awaited(&self, now: i64, unwritten: &HashSet<String>) -> Option<&str> {
        self.recent
            .iter()
            .find(|r| r.pending_at(now) && unwritten.contains(&r.id))
            .map(|r| r.id.as_str())
    }

    /// Who a claimant waits for: its holder, or the pending write it lists.
    fn waited_for(&self, now: i64, unwritten: &HashSet<String>) -> String {
        match (&self.holder, self.awaited(now, unwritten)) {
            (Some(h), _) if !self.is_free(now) => h.clone(),
            (_, Some(id)) => format!("the unanswered write of `{id}`"),
            (h, None) => h.clone().unwrap_or_default(),
        }
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

/// The index the claims for article index `index` are kept in: `neardup-claims-{index}`.
pub fn claims_index_name(index: &str) -> String {
    format!("neardup-claims-{index}")
}

impl Claims {
    /// Claims for `index`, kept in [`claims_index_name`], with a 30 s lease and recent
    /// inserts listed for 60 s.
    pub fn new(client: Elasticsearch, retry: RetryPolicy, index: &str) -> Claims {
        Claims {
            client,
            retry,
            index: claims_index_name(index),
            articles: index.to_owned(),
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
            owner: self.clone(),
            writing: BTreeMap::new(),
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
                200..=299 => got.push(claim_of(key, r, &source, Vec::new())),
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
            let read = async {
                let records = self.read(&wanted).await?;
                let now = now_ms();
                let unwritten = self.unwritten(&records, now).await?;
                Ok::<_, EsError>((records, now, unwritten))
            };
            match read.await {
                Ok((records, now, unwritten)) => {
                    let mut takes = Vec::new();
                    let mut at = Vec::new();
                    for (&i, record) in existing.iter().zip(records) {
                        match (
                            step(record.as_ref(), &claimant.token, now, &unwritten),
                            record,
                        ) {
                            (Step::Own, Some(r)) => got[i] = Some(own_claim(keys[i], r)),
                            (Step::TakeOver, Some(r)) => {
                                let recent = self.pruned(r.recent, now, &[], None);
                                let source = self.held_source(claimant, &recent);
                                at.push((i, recent, source.clone()));
                                takes.push(Action::Replace(keys[i], r.seq_no, r.term, source));
                            }
                            // Deleted since the create (a release or a sweep), or held by
                            // someone else: waited for in order.
                            _ => {}
                        }
                    }
                    if !takes.is_empty() {
                        match self.bulk("claims: take over", &takes).await {
                            Ok(items) => {
                                let mut refused = Vec::new();
                                for ((i, recent, source), r) in at.into_iter().zip(&items) {
                                    match r["status"].as_u64().unwrap_or(0) {
                                        200..=299 => got[i] = claim_of(keys[i], r, &source, recent),
                                        409 => refused.push(i),
                                        _ => {}
                                    }
                                }
                                // A refused take-over is someone else's, or this claimant's
                                // own whose answer was lost (the retry's guard is stale): read
                                // back, as a create's 409 is. Left unknown, a key it holds
                                // after the one it waits for would break the sorted order: two
                                // claimants could wait for each other until their deadlines,
                                // and the key stay held until its lease.
                                if !refused.is_empty() {
                                    if let Err(e) =
                                        self.own_of(keys, &refused, claimant, &mut got).await
                                    {
                                        failure = Some(e);
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
            self.give_back(claims, &BTreeMap::new(), false).await;
            return Err(e.into());
        }
        let first_missing = got.iter().position(Option::is_none);
        let surplus: Vec<Claim> = match first_missing {
            Some(p) => got.drain(p..).flatten().collect(),
            None => Vec::new(),
        };
        self.give_back(surplus, &BTreeMap::new(), false).await;
        Ok((got.into_iter().flatten().collect(), first_missing.is_some()))
    }

    /// Reads the records of `keys[i]` for each `i` of `which` and sets `got[i]` for those that
    /// are `claimant`'s own (its token).
    async fn own_of(
        &self,
        keys: &[&str],
        which: &[usize],
        claimant: &Claimant<'_>,
        got: &mut [Option<Claim>],
    ) -> Result<(), EsError> {
        let wanted: Vec<&str> = which.iter().map(|&i| keys[i]).collect();
        let records = self.read(&wanted).await?;
        let now = now_ms();
        for (&i, record) in which.iter().zip(records) {
            if let (Step::Own, Some(r)) = (
                step(record.as_ref(), &claimant.token, now, &HashSet::new()),
                record,
            ) {
                got[i] = Some(own_claim(keys[i], r));
            }
        }
        Ok(())
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
            let records = self.read(&[key]).await?;
            let now = now_ms();
            let unwritten = self.unwritten(&records, now).await?;
            let record = records.into_iter().next().flatten();
            // The record's version to guard a take-over with (none: create it).
            let (guard, recent) = match (
                step(record.as_ref(), &claimant.token, now, &unwritten),
                record,
            ) {
                (Step::Own, Some(r)) => return Ok(own_claim(key, r)),
                (Step::TakeOver, Some(r)) => {
                    if r.holder.is_some() {
                        tracing::info!(claim = %key, holder = ?r.holder, "taking over an expired claim");
                    }
                    (
                        Some((r.seq_no, r.term)),
                        self.pruned(r.recent, now, &[], None),
                    )
                }
                (Step::Wait, Some(r)) => {
                    if Instant::now() + pause > deadline {
                        return Err(ClaimError::Timeout {
                            key: key.to_owned(),
                            holder: r.waited_for(now, &unwritten),
                        });
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                    continue;
                }
                (Step::Create, _) | (_, None) => (None, Vec::new()),
            };
            let source = self.held_source(claimant, &recent);
            let action = match guard {
                Some((seq_no, term)) => Action::Replace(key, seq_no, term, source.clone()),
                None => Action::Create(key, source.clone()),
            };
            let items = self.bulk(&format!("claim `{key}`"), &[action]).await?;
            let r = &items[0];
            match r["status"].as_u64().unwrap_or(0) {
                200..=299 => {
                    return Ok(claim_of(key, r, &source, recent)
                        .expect("a successful write has a version"))
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
    pub async fn release(&self, mut held: Held) {
        self.give_back(std::mem::take(&mut held.claims), &BTreeMap::new(), false)
            .await
    }

    /// Gives the keys back after writing articles, listing each in the records of the keys
    /// `written` gives it (key → ids), so that the next holder of any of them reads it by id
    /// even before a refresh.
    pub async fn release_recording(&self, mut held: Held, written: &BTreeMap<String, Vec<String>>) {
        self.give_back(std::mem::take(&mut held.claims), written, false)
            .await
    }

    /// Gives the keys back when the answer to the write of the articles [`Held::writing`]
    /// named never came (it failed as a whole): they are listed as **pending** until the end of
    /// the lease, as a dropped [`Held`] lists them. The next claimant of one of those keys
    /// reads them by id (realtime) and goes on once each is found, or once the lease has
    /// passed (a write is not applied after its holder's lease: [`Claims`]' limits).
    pub async fn release_unanswered(&self, mut held: Held) {
        let writing = std::mem::take(&mut held.writing);
        self.give_back(std::mem::take(&mut held.claims), &writing, true)
            .await
    }

    /// One `_bulk`: each record keeps its recent inserts (within the horizon, plus `written`,
    /// pending until the claim's lease ends if `pending`), and is deleted when none is left.
    /// Each write is guarded by the claim's sequence number, so a claim that expired and was
    /// taken over is left to its new holder. Failures are logged: the lease frees the keys
    /// later.
    async fn give_back(
        &self,
        claims: Vec<Claim>,
        written: &BTreeMap<String, Vec<String>>,
        pending: bool,
    ) {
        if claims.is_empty() {
            return;
        }
        let now = now_ms();
        let actions: Vec<Action> = claims
            .iter()
            .map(|c| {
                let ids = written.get(&c.key).map(Vec::as_slice).unwrap_or(&[]);
                let until = pending.then_some(c.expires_at);
                let recent = self.pruned(c.recent.clone(), now, ids, until);
                match recent.iter().map(RecentInsert::settled_at).max() {
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
            let reply = search(&self.client, &self.retry, &what, &path, &[], Some(&body)).await?;
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

    /// `recent` without entries settled longer than the horizon ago (or of `written`), plus
    /// `written`, pending `until` if given. Entries that were pending are settled now (a
    /// key is only held once each was found or its lease had passed) and kept a horizon
    /// from now.
    fn pruned(
        &self,
        mut recent: Vec<RecentInsert>,
        now: i64,
        written: &[String],
        until: Option<i64>,
    ) -> Vec<RecentInsert> {
        let oldest = now - self.horizon.as_millis() as i64;
        recent.retain(|r| r.settled_at() >= oldest && !written.contains(&r.id));
        for r in &mut recent {
            if r.pending_until.take().is_some() {
                r.at = now;
            }
        }
        recent.extend(written.iter().map(|id| RecentInsert {
            id: id.clone(),
            at: now,
            pending_until: until,
        }));
        recent.dedup_by(|a, b| a.id == b.id);
        recent
    }

    /// The articles that `records` list as pending writes, still within their writer's lease,
    /// which the article index does not hold (a realtime `_mget` by id, asked only when there
    /// is one): a key listing one of them is waited for.
    async fn unwritten(
        &self,
        records: &[Option<Record>],
        now: i64,
    ) -> Result<HashSet<String>, EsError> {
        let mut ids: Vec<&str> = records
            .iter()
            .flatten()
            .flat_map(|r| r.recent.iter())
            .filter(|e| e.pending_at(now))
            .map(|e| e.id.as_str())
            .collect();
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        ids.sort_unstable();
        ids.dedup();
        let what = format!(
            "index `{}`: look for {} unanswered writes",
            self.articles,
            ids.len()
        );
        let docs = self
            .mget(&self.articles, &ids, &[("_source", "false")], what)
            .await?;
        Ok(ids
            .iter()
            .zip(docs)
            .filter(|(_, d)| d["found"] != true)
            .map(|(id, _)| (*id).to_owned())
            .collect())
    }

    /// The records of `keys` (realtime: no refresh needed), `None` for a missing one.
    async fn read(&self, keys: &[&str]) -> Result<Vec<Option<Record>>, EsError> {
        let what = format!("claims index `{}`: read {} records", self.index, keys.len());
        let docs = self.mget(&self.index, keys, &[], what).await?;
        Ok(docs.iter().map(Record::from_doc).collect())
    }

    /// A realtime `_mget` of `ids` in `index`, through the retry policy: its docs, one per id
    /// in order, or an [`EsError::BadResponse`] naming `what`.
    async fn mget(
        &self,
        index: &str,
        ids: &[&str],
        params: &[(&str, &str)],
        what: String,
    ) -> Result<Vec<Value>, EsError> {
        let path = format!("/{}/_mget", path_segment(index));
        let body = Body::Json(json!({ "ids": ids }));
        let mut reply = mget(&self.client, &self.retry, &what, &path, params, Some(&body)).await?;
        let docs = match reply["docs"].take() {
            Value::Array(docs) => docs,
            _ => Vec::new(),
        };
        if docs.len() != ids.len() {
            return Err(EsError::BadResponse {
                what,
                detail: format!("{} docs for {} ids", docs.len(), ids.len()),
            });
        }
        Ok(docs)
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
        expires_at: r.expires_at,
        recent: r.recent,
    }
}

/// The claim a successful bulk item writing `source` made on `key`.
fn claim_of(key: &str, item: &Value, source: &Value, recent: Vec<RecentInsert>) -> Option<Claim> {
    Some(Claim {
        key: key.to_owned(),
        seq_no: item["_seq_no"].as_u64()?,
        term: item["_primary_term"].as_u64()?,
        expires_at: source["expires_at"].as_i64()?,
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

    /// No pending write left unfound.
    fn nothing_unwritten() -> HashSet<String> {
        HashSet::new()
    }

    #[test]
    fn a_record_with_the_claimants_own_token_is_its_own() {
        let none = nothing_unwritten();
        let now = 1_000;
        let mine = record(Some("pid 1"), Some("t-mine"), now + 30_000);
        assert_eq!(step(Some(&mine), "t-mine", now, &none), Step::Own);
        // The same holder name with another token is someone else (another request of the
        // same process): it waits.
        assert_eq!(step(Some(&mine), "t-other", now, &none), Step::Wait);
        // Its own claim whose lease ran out is still its own (nobody took it over).
        let expired = record(Some("pid 1"), Some("t-mine"), now - 1);
        assert_eq!(step(Some(&expired), "t-mine", now, &none), Step::Own);
        assert_eq!(step(Some(&expired), "t-other", now, &none), Step::TakeOver);
    }

    #[test]
    fn free_missing_and_held_records() {
        let none = nothing_unwritten();
        let now = 1_000;
        assert_eq!(step(None, "t", now, &none), Step::Create);
        // Released (only recent inserts): free, whatever token it once carried.
        let free = record(None, None, 0);
        assert_eq!(step(Some(&free), "t", now, &none), Step::TakeOver);
        let held = record(Some("pid 2"), Some("t2"), now + 1);
        assert_eq!(step(Some(&held), "t", now, &none), Step::Wait);
        // A record written before tokens existed is never anyone's own.
        let old = record(Some("pid 3"), None, now + 1);
        assert_eq!(step(Some(&old), "t", now, &none), Step::Wait);
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
        let none = nothing_unwritten();
        let source = claims.held_source(&claimant, &[]);
        let doc = json!({ "found": true, "_seq_no": 3, "_primary_term": 1, "_source": source });
        let read = Record::from_doc(&doc).unwrap();
        assert_eq!(
            step(Some(&read), &claimant.token, now_ms(), &none),
            Step::Own
        );
        assert_eq!(step(Some(&read), &other.token, now_ms(), &none), Step::Wait);
        let claim = own_claim("m1", read);
        assert_eq!((claim.key.as_str(), claim.seq_no, claim.term), ("m1", 3, 1));
    }

    /// A record released by a holder dropped while writing `x` (pending until `until`).
    fn released_pending(until: i64) -> Record {
        let doc = json!({
            "found": true, "_seq_no": 9, "_primary_term": 1,
            "_source": { "expires_at": 0, "recent": [
                { "id": "a1", "at": 5 },
                { "id": "x", "at": 900, "pending_until": until }
            ] }
        });
        Record::from_doc(&doc).expect("a found record")
    }

    #[test]
    fn a_pending_write_not_found_is_waited_for_until_its_lease_ends() {
        let now = 1_000;
        let r = released_pending(now + 30_000);
        let unwritten: HashSet<String> = ["x".to_owned()].into();
        // Free, but its article is not found by id and may still be applied: wait.
        assert_eq!(step(Some(&r), "t", now, &unwritten), Step::Wait);
        assert_eq!(r.waited_for(now, &unwritten), "the unanswered write of `x`");
        // Found by id (applied): take it over at once, and read it as a recent insert.
        assert_eq!(
            step(Some(&r), "t", now, &nothing_unwritten()),
            Step::TakeOver
        );
        // Past its holder's lease it is no longer awaited, found or not.
        let late = now + 30_001;
        assert_eq!(step(Some(&r), "t", late, &unwritten), Step::TakeOver);
        // Another article missing does not hold the key.
        let other: HashSet<String> = ["a1".to_owned()].into();
        assert_eq!(step(Some(&r), "t", now, &other), Step::TakeOver);
        // A holder's own record is its own whatever it lists.
        let mut own = released_pending(now + 30_000);
        own.holder = Some("pid 1".into());
        own.token = Some("t".into());
        own.expires_at = now + 30_000;
        assert_eq!(step(Some(&own), "t", now, &unwritten), Step::Own);
        // Held by someone else: it is that holder a claimant waits for.
        own.token = Some("t2".into());
        assert_eq!(step(Some(&own), "t", now, &unwritten), Step::Wait);
        assert_eq!(own.waited_for(now, &unwritten), "pid 1");
    }

    fn test_claims() -> Claims {
        Claims::new(
            EsConfig::new("http://127.0.0.1:1")
                .unwrap()
                .client()
                .unwrap(),
            RetryPolicy::none(),
            "news",
        )
    }

    #[test]
    fn pending_entries_are_kept_a_horizon_past_their_lease_and_settled_on_take_over() {
        let claims = test_claims();
        let horizon = claims.horizon.as_millis() as i64;
        let now = 1_000_000;
        // Released by a dropped holder: `x` pending until its lease ends.
        let until = now + 3 * horizon;
        let released = claims.pruned(Vec::new(), now, &["x".into()], Some(until));
        assert_eq!(released[0].pending_until, Some(until));
        assert_eq!(released[0].settled_at(), until);
        // Long past the horizon of its write, but not of its lease: still listed.
        let later = now + 2 * horizon;
        let kept = claims.pruned(released.clone(), later, &[], None);
        assert_eq!(kept.len(), 1);
        // Taken over (found, or its lease passed): settled, listed a horizon from then.
        assert_eq!((kept[0].pending_until, kept[0].at), (None, later));
        assert!(claims
            .pruned(kept, later + horizon + 1, &[], None)
            .is_empty());
        // An answered write is listed as settled.
        let answered = claims.pruned(Vec::new(), now, &["y".into()], None);
        assert_eq!((answered[0].pending_until, answered[0].at), (None, now));
    }

    /// A held key's claim remembers its lease, which bounds a pending write.
    #[test]
    fn a_claim_knows_when_its_lease_ends() {
        let claims = test_claims();
        let claimant = Claimant {
            holder: "pid 1",
            token: new_id(),
        };
        let source = claims.held_source(&claimant, &[]);
        let item = json!({ "status": 201, "_seq_no": 4, "_primary_term": 1 });
        let claim = claim_of("m1", &item, &source, Vec::new()).unwrap();
        assert_eq!(claim.expires_at, source["expires_at"].as_i64().unwrap());
        assert!(claim.expires_at > now_ms());
    }
}

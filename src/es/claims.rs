//! Claims: short-lived locks in Elasticsearch that make "insert unless a near-duplicate is
//! stored" race-free across processes.
//!
//! Elasticsearch has no transactions, and a document written less than a refresh interval ago
//! is invisible to search, so "search, then insert" lets two near-duplicates sent at the same
//! moment both in. A writer therefore first **claims the keys its sketch is found by** (the
//! LSH band terms of a MinHash signature, the four block values of a SimHash): one small
//! document per key in a claims index, created with `op_type=create`, which Elasticsearch
//! grants to exactly one writer. Holding all of them, it searches; if nothing near is stored,
//! it writes the article with `refresh=wait_for` (so the article is searchable before the
//! claims go) and then releases the claims. A writer that finds a key claimed waits until it
//! is released, then claims it and searches: it now sees the article written meanwhile.
//!
//! **Why exactly one of several near-duplicates gets in.** Two texts that a query would call
//! near-duplicates share at least one key (that is how the query finds them). Whichever of two
//! writers claims a shared key first finishes (search, write, refresh) before the other can
//! claim it, so the other's search sees the first article.
//!
//! **No deadlock.** Keys are claimed in one global order (sorted): a writer sends all its
//! keys in one `_bulk` of creates, keeps those before the first key someone else holds,
//! gives back those after it, waits until that key is free and goes on from there. So it only
//! ever waits for a key greater than every key it holds, and a cycle of waits would need a key
//! smaller than one already held. Without contention, claiming is one request and releasing
//! another.
//!
//! **Crashes and limits.** A claim carries a lease (`expires_at`, epoch milliseconds of the
//! claimant's clock). A writer that finds an expired claim deletes it — guarded by the
//! claim's `_seq_no`/`_primary_term`, so it cannot delete a successor's — and claims the key.
//! A claimant must therefore finish within its lease (the service's request timeout is kept
//! below it), and the clocks of the service's hosts must agree to well within the lease.
//! Releases are guarded the same way. Writers that do not claim (a bulk back-fill, another
//! application) are only seen once Elasticsearch has refreshed their documents.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Value};

use super::{check, path_segment, send, Body, EsError, RetryPolicy};

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
}

/// Keys a writer holds; give them back with [`Claims::release`].
#[derive(Debug)]
#[must_use = "claims must be released"]
pub struct Held {
    /// `(key, _seq_no, _primary_term)` of each claim created.
    claims: Vec<(String, u64, u64)>,
}

impl Held {
    /// The keys held, in claim order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.claims.iter().map(|(k, _, _)| k.as_str())
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

impl Claims {
    /// Claims for `index`, kept in `neardup-claims-{index}`, with a 30 s lease.
    pub fn new(client: Elasticsearch, retry: RetryPolicy, index: &str) -> Claims {
        Claims {
            client,
            retry,
            index: format!("neardup-claims-{index}"),
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(5),
        }
    }

    /// The claims index's name.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// Creates the claims index if it is missing (one shard: claims are tiny and few).
    pub async fn ensure_index(&self) -> Result<(), EsError> {
        let body = Body::Json(json!({
            "settings": { "number_of_shards": 1, "auto_expand_replicas": "0-1" },
            "mappings": { "dynamic": false, "properties": {
                "holder": { "type": "keyword" },
                "expires_at": { "type": "long" }
            } }
        }));
        let path = format!("/{}", path_segment(&self.index));
        let what = format!("claims index `{}`: create", self.index);
        self.retry
            .run(|| async {
                let reply = send(&self.client, Method::Put, &path, &[], Some(&body)).await?;
                if reply.body["error"]["type"] == "resource_already_exists_exception" {
                    return Ok(());
                }
                check(&what, reply).map(|_| ())
            })
            .await
    }

    /// Claims every key (sorted, once each) for `holder`, waiting for claimed keys until
    /// `deadline`. On failure nothing stays held.
    pub async fn acquire(
        &self,
        keys: &[String],
        holder: &str,
        deadline: Instant,
    ) -> Result<Held, ClaimError> {
        let mut keys: Vec<&String> = keys.iter().collect();
        keys.sort();
        keys.dedup();
        let mut held = Held {
            claims: Vec::with_capacity(keys.len()),
        };
        let mut next = 0;
        while next < keys.len() {
            match self.create_in_order(&keys[next..], holder).await {
                Ok((got, None)) => {
                    held.claims.extend(got);
                    next = keys.len();
                }
                Ok((got, Some(blocked))) => {
                    next += got.len();
                    held.claims.extend(got);
                    if let Err(e) = self.wait_until_free(blocked, deadline).await {
                        self.release(held).await;
                        return Err(e);
                    }
                }
                Err(e) => {
                    self.release(held).await;
                    return Err(e);
                }
            }
        }
        Ok(held)
    }

    /// One `_bulk` of creates for `keys`, in order. Returns the claims made before the first
    /// key someone else holds (and that key); claims made after it are given back at once.
    async fn create_in_order<'k>(
        &self,
        keys: &[&'k String],
        holder: &str,
    ) -> Result<(Vec<(String, u64, u64)>, Option<&'k str>), ClaimError> {
        let expires_at = now_ms() + self.lease.as_millis() as i64;
        let source = json!({ "holder": holder, "expires_at": expires_at }).to_string();
        let mut body = String::new();
        for k in keys {
            body.push_str(&json!({ "create": { "_index": &self.index, "_id": k } }).to_string());
            body.push('\n');
            body.push_str(&source);
            body.push('\n');
        }
        // Sent once: after a lost answer the claims may exist, and a resend would find them
        // "held by someone". The caller's request fails; its claims expire with the lease.
        let reply = send(
            &self.client,
            Method::Post,
            "/_bulk",
            &[],
            Some(&Body::NdJson(body)),
        )
        .await?;
        let reply = check("claims: create", reply)?;
        let items = reply["items"].as_array().cloned().unwrap_or_default();
        if items.len() != keys.len() {
            return Err(EsError::BadResponse {
                what: "claims: create".into(),
                detail: format!("{} items for {} keys", items.len(), keys.len()),
            }
            .into());
        }
        let mut got = Vec::new();
        let mut blocked = None;
        let mut surplus = Vec::new();
        for (key, item) in keys.iter().zip(&items) {
            let r = &item["create"];
            let status = r["status"].as_u64().unwrap_or(0);
            let created = (200..300).contains(&status);
            let claim = || {
                (
                    key.to_string(),
                    r["_seq_no"].as_u64().unwrap_or_default(),
                    r["_primary_term"].as_u64().unwrap_or_default(),
                )
            };
            match (blocked.is_some(), created, status) {
                (false, true, _) => got.push(claim()),
                (false, false, 409) => blocked = Some(key.as_str()),
                (false, false, _) => {
                    surplus.append(&mut got);
                    self.release(Held { claims: surplus }).await;
                    return Err(EsError::BadResponse {
                        what: format!("claim `{key}`: create"),
                        detail: format!("HTTP {status}: {}", r["error"]),
                    }
                    .into());
                }
                (true, true, _) => surplus.push(claim()),
                (true, false, _) => {}
            }
        }
        if !surplus.is_empty() {
            self.release(Held { claims: surplus }).await;
        }
        Ok((got, blocked))
    }

    /// Waits until nobody holds `key`: it was released, or its lease ran out (then the
    /// expired claim is deleted). Looks again after 5 ms, doubling to 100 ms.
    async fn wait_until_free(&self, key: &str, deadline: Instant) -> Result<(), ClaimError> {
        let doc_path = format!("/{}/_doc/{}", path_segment(&self.index), path_segment(key));
        let mut pause = self.poll;
        loop {
            // A realtime get: no refresh needed.
            let got = send(&self.client, Method::Get, &doc_path, &[], None).await?;
            if got.status.as_u16() == 404 {
                return Ok(());
            }
            let got = check(&format!("claim `{key}`: read"), got)?;
            if got["_source"]["expires_at"].as_i64().unwrap_or(0) < now_ms() {
                self.delete_expired(&doc_path, &got).await?;
                return Ok(());
            }
            if Instant::now() + pause > deadline {
                return Err(ClaimError::Timeout {
                    key: key.to_owned(),
                    holder: got["_source"]["holder"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Gives the keys back, in one `_bulk` of deletes. Each is guarded by the claim's
    /// sequence number, so a claim that expired and was taken over is left to its new holder.
    /// Failures are logged: the lease frees the keys later.
    pub async fn release(&self, held: Held) {
        if held.claims.is_empty() {
            return;
        }
        let mut body = String::new();
        for (key, seq_no, term) in &held.claims {
            body.push_str(
                &json!({ "delete": {
                    "_index": &self.index, "_id": key,
                    "if_seq_no": seq_no, "if_primary_term": term
                } })
                .to_string(),
            );
            body.push('\n');
        }
        match send(
            &self.client,
            Method::Post,
            "/_bulk",
            &[],
            Some(&Body::NdJson(body)),
        )
        .await
        {
            Ok(reply) if reply.status.is_success() => {
                let failed = reply.body["items"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .filter(|i| {
                                !matches!(
                                    i["delete"]["status"].as_u64(),
                                    Some(200..=299 | 404 | 409)
                                )
                            })
                            .count()
                    })
                    .unwrap_or(0);
                if failed > 0 {
                    tracing::warn!(
                        failed,
                        "could not release some claims; their lease will free them"
                    );
                }
            }
            Ok(reply) => tracing::warn!(
                status = reply.status.as_u16(),
                "could not release claims; their lease will free them"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not release claims; their lease will free them")
            }
        }
    }

    /// Deletes an expired claim, only if it is still the one read.
    async fn delete_expired(&self, doc_path: &str, got: &Value) -> Result<(), EsError> {
        let (Some(s), Some(t)) = (got["_seq_no"].as_u64(), got["_primary_term"].as_u64()) else {
            return Ok(());
        };
        let (s, t) = (s.to_string(), t.to_string());
        let reply = send(
            &self.client,
            Method::Delete,
            doc_path,
            &[("if_seq_no", &s), ("if_primary_term", &t)],
            None,
        )
        .await?;
        if matches!(reply.status.as_u16(), 404 | 409) {
            return Ok(()); // released or taken over meanwhile
        }
        tracing::info!(claim = %doc_path, holder = %got["_source"]["holder"], "took over an expired claim");
        check("delete an expired claim", reply).map(|_| ())
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

//! Creating, checking and reading the neardup fields of an index on a cluster, from the schema
//! ([`super::schema`]): `es-init` ([`init_index`]), what every command checks before it writes
//! or queries ([`verify_index`], [`read_meta`]), the explicit upgrade to another fingerprint
//! version ([`upgrade_index`]), and the profile of documents already stored
//! ([`existing_profile`]).

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use serde_json::{json, Map, Value};

use std::collections::BTreeMap;

use super::schema::{
    CommonMinima, FieldNames, GroupMeta, GroupOrder, IndexMeta, MinHashLayout, MinHashMeta,
    META_KEY,
};
use super::{
    path_segment, path_segment_keep_patterns, request, search, send, Body, EsError, RetryPolicy,
};
use neardup_core::{FingerprintConfig, Fingerprinter, Profile};

/// What [`init_index`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitOutcome {
    /// The index did not exist and was created with the fingerprint fields and `_meta`.
    Created,
    /// These fields were added to the existing index(es) (possibly none), and `_meta.neardup`
    /// was written where it was missing or lacked a method.
    Added { fields: Vec<String>, meta: bool },
    /// Every field was already mapped as needed and `_meta` says so; nothing changed.
    Unchanged,
}

/// Makes sure `index` holds what `wanted` describes: creates the index with the fields and
/// `_meta.neardup` if it does not exist, or adds the missing fields and records the methods
/// in `_meta` (other `_meta` keys are kept). Idempotent. Fields that exist with the type
/// neardup needs are left as they are (their other parameters too). Nothing is changed when
/// a field exists with another type ([`EsError::MappingConflict`]) or `_meta` records another
/// version, parameters or field names for a method ([`EsError::MetaConflict`]); a method
/// `wanted` lacks but `_meta` has stays recorded.
///
/// `index` may be an alias or a pattern: every index it names is checked, then updated.
pub async fn init_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    wanted: &IndexMeta,
) -> Result<InitOutcome, EsError> {
    init(client, retry, index, wanted, false).await
}

/// [`init_index`] that also replaces what `_meta` records for the methods an index already
/// holds with what `wanted` describes (their versions, profile, parameters, the HMM and
/// folding settings): the explicit step of an upgrade to another fingerprint version, after
/// which the back-fill re-fingerprints every document (their versions are stale). Field names
/// and block types cannot change this way ([`EsError::MetaConflict`]), and `wanted` must
/// describe every method the index holds, so that none is left with a version this neardup
/// does not make. Until the back-fill is done, documents of the old version are still found by
/// their old fingerprints (identical for every text the change does not touch).
pub async fn upgrade_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    wanted: &IndexMeta,
) -> Result<InitOutcome, EsError> {
    init(client, retry, index, wanted, true).await
}

async fn init(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    wanted: &IndexMeta,
    upgrade: bool,
) -> Result<InitOutcome, EsError> {
    wanted.validate()?;
    let mapping = wanted.mapping();
    let existing = match mappings(client, retry, index).await {
        Ok(m) => m,
        Err(EsError::IndexNotFound { .. }) if !index.contains(['*', ',']) => {
            let mut body = mapping.clone();
            body["_meta"] = json!({ META_KEY: wanted.to_json() });
            if create_index(client, retry, index, &body).await? {
                return Ok(InitOutcome::Created);
            }
            // Created by someone else meanwhile: check it like any existing index.
            return Box::pin(init(client, retry, index, wanted, upgrade)).await;
        }
        Err(e) => return Err(e),
    };

    // Check every index before changing any.
    let mut plans = Vec::new();
    for (concrete, m) in &existing {
        let props = &m["mappings"]["properties"];
        let mut missing = Map::new();
        for (name, want) in mapping["properties"].as_object().expect("properties") {
            let want_type = want["type"].as_str().unwrap_or_default();
            match props.get(name) {
                None => {
                    missing.insert(name.clone(), want.clone());
                }
                Some(have) => {
                    let have_type = have["type"].as_str().unwrap_or("object");
                    if have_type != want_type {
                        let names = wanted.simhash.as_ref().map(|s| s.fields.clone());
                        return Err(conflict(
                            concrete,
                            &names.unwrap_or_default(),
                            name,
                            have_type,
                            want_type,
                        ));
                    }
                }
            }
        }
        let mut all_meta = m["mappings"]["_meta"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let recorded = match all_meta.get(META_KEY) {
            Some(_) => Some(IndexMeta::from_mapping(
                concrete,
                &m["mappings"],
                &FieldNames::default(),
            )?),
            None => None,
        };
        let merged = match upgrade {
            true => upgrade_meta(concrete, recorded.as_ref(), wanted)?,
            false => merge_meta(concrete, recorded.as_ref(), wanted)?,
        };
        let meta_changes = recorded.as_ref() != Some(&merged);
        if missing.is_empty() && !meta_changes {
            continue;
        }
        all_meta.insert(META_KEY.to_owned(), merged.to_json());
        plans.push((concrete.clone(), missing, all_meta, meta_changes));
    }
    if plans.is_empty() {
        return Ok(InitOutcome::Unchanged);
    }
    let mut fields: Vec<String> = Vec::new();
    let mut meta_written = false;
    for (concrete, missing, all_meta, meta_changes) in plans {
        for f in missing.keys() {
            if !fields.contains(f) {
                fields.push(f.clone());
            }
        }
        meta_written |= meta_changes;
        let body = json!({ "properties": missing, "_meta": all_meta });
        request(
            client,
            retry,
            &format!("index `{concrete}`: put mapping"),
            Method::Put,
            &format!("/{}/_mapping", path_segment(&concrete)),
            &[],
            Some(&Body::Json(body)),
        )
        .await
        .map_err(|e| match e {
            // `index.mapping.total_fields.limit` leaves no room for the fingerprint fields.
            EsError::Status {
                status: 400,
                ref reason,
                ..
            } if reason.contains("Limit of total fields") => {
                let limit = reason
                    .split_once("Limit of total fields [")
                    .and_then(|(_, r)| r.split_once(']'))
                    .and_then(|(n, _)| n.parse::<usize>().ok());
                EsError::FieldLimit {
                    index: concrete.clone(),
                    fields: missing.len(),
                    reason: reason.clone(),
                    enough: limit.map(|l| l + missing.len()),
                }
            }
            // Someone mapped a field differently between our check and our write.
            EsError::Status {
                status: 400,
                ref error_type,
                ref reason,
                ..
            } if error_type == "illegal_argument_exception" && reason.contains("mapper") => {
                EsError::MappingConflict {
                    index: concrete.clone(),
                    field: missing.keys().cloned().collect::<Vec<_>>().join(", "),
                    existing: "(changed concurrently)".into(),
                    wanted: reason.clone(),
                    hint: "run es-init again to see which field differs".into(),
                }
            }
            other => other,
        })?;
    }
    Ok(InitOutcome::Added {
        fields,
        meta: meta_written,
    })
}

/// `wanted`, where `recorded` holds no method `wanted` lacks and both name the same fields
/// and block types for each method they share.
fn upgrade_meta(
    index: &str,
    recorded: Option<&IndexMeta>,
    wanted: &IndexMeta,
) -> Result<IndexMeta, EsError> {
    let Some(recorded) = recorded else {
        return Ok(wanted.clone());
    };
    if let (Some(r), Some(w)) = (&recorded.group, &wanted.group) {
        if !same_groups(r, w) {
            return Err(group_clash(index, r, w));
        }
    }
    let clash = |existing: String, wanted: String, hint: &str| EsError::MetaConflict {
        index: index.to_owned(),
        existing,
        wanted,
        hint: hint.to_owned(),
    };
    if recorded.simhash.is_some() && wanted.simhash.is_none()
        || recorded.minhash.is_some() && wanted.minhash.is_none()
    {
        return Err(clash(
            recorded.to_string(),
            wanted.to_string(),
            "an upgrade rewrites every method the index holds: ask for all of them (--methods simhash,minhash)",
        ));
    }
    let other_fields = "an upgrade keeps the fields: es-init a new index for other field names or block types and back-fill it";
    if let (Some(r), Some(w)) = (&recorded.simhash, &wanted.simhash) {
        if (&r.fields, r.block_type) != (&w.fields, w.block_type) {
            return Err(clash(
                format!(
                    "simhash {} blocks, fields {:?}",
                    r.block_type,
                    r.fields.all()
                ),
                format!(
                    "simhash {} blocks, fields {:?}",
                    w.block_type,
                    w.fields.all()
                ),
                other_fields,
            ));
        }
    }
    if let (Some(r), Some(w)) = (&recorded.minhash, &wanted.minhash) {
        if r.fields != w.fields {
            return Err(clash(
                format!("minhash fields {:?}", r.fields.all()),
                format!("minhash fields {:?}", w.fields.all()),
                other_fields,
            ));
        }
    }
    let mut out = wanted.clone();
    if out.group.is_none() {
        out.group.clone_from(&recorded.group);
    }
    if out.formula.is_none() {
        out.formula.clone_from(&recorded.formula);
    }
    // Edit tracking is installed and removed on its own (`super::tracking`).
    out.tracking.clone_from(&recorded.tracking);
    // The common minima are not kept: the upgrade rewrites the minima they were learned
    // from, and the next `regroup --common-above` learns them again.
    // From the full to the compact layout: queries keep finding the documents not rewritten
    // yet until the back-fill is done.
    if let (Some(r), Some(o)) = (&recorded.minhash, &mut out.minhash) {
        o.from_full =
            o.layout != MinHashLayout::Full && (r.from_full || r.layout == MinHashLayout::Full);
    }
    Ok(out)
}

/// Ends an upgrade from the full to the compact MinHash layout on `index` (a concrete index)
/// once no document is stale (a method's fingerprint missing, or of another version or
/// layout): `_meta` stops recording [`MinHashMeta::from_full`], and queries send only the
/// compact terms. The back-fill calls it after walking an index. `Ok(true)` when it was ended
/// now; `Ok(false)` when there was none, or documents are left.
pub async fn finish_layout_upgrade(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
) -> Result<bool, EsError> {
    let all = mappings(client, retry, index).await?;
    let Some((concrete, m)) = all.iter().next() else {
        return Ok(false);
    };
    let mut meta = IndexMeta::from_mapping(concrete, &m["mappings"], &FieldNames::default())?;
    if !meta.minhash.as_ref().is_some_and(|m| m.from_full) {
        return Ok(false);
    }
    let r = search(
        client,
        retry,
        &format!("index `{concrete}`: count documents not rewritten"),
        &format!("/{}/_count", path_segment(concrete)),
        &[],
        Some(&Body::Json(
            json!({ "query": crate::schema::stale_query(&meta) }),
        )),
    )
    .await?;
    if r["count"].as_u64() != Some(0) {
        return Ok(false);
    }
    if let Some(m) = &mut meta.minhash {
        m.from_full = false;
    }
    put_meta(
        client,
        retry,
        concrete,
        m,
        &meta,
        "record the end of the layout upgrade",
    )
    .await?;
    Ok(true)
}

/// Records `common` as the common minima terms of `index` (a concrete index): every search
/// after it asks them as [`crate::schema::CommonMinima`] says. `None` removes a recorded list.
pub async fn record_common_minima(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    common: Option<CommonMinima>,
) -> Result<(), EsError> {
    let all = mappings(client, retry, index).await?;
    let Some((concrete, m)) = all.iter().next() else {
        return Err(EsError::Config(format!("no index `{index}`")));
    };
    let mut meta = IndexMeta::from_mapping(concrete, &m["mappings"], &FieldNames::default())?;
    meta.common_minima = common.map(std::sync::Arc::new);
    put_meta(
        client,
        retry,
        concrete,
        m,
        &meta,
        "record the common minima terms",
    )
    .await
}

/// Writes `meta` as `_meta.neardup` of the concrete index `concrete` whose mapping is
/// `mapping` (its other `_meta` keys kept); `what` says why, in an error.
pub(super) async fn put_meta(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    concrete: &str,
    mapping: &Value,
    meta: &IndexMeta,
    what: &str,
) -> Result<(), EsError> {
    let mut all_meta: Map<String, Value> = mapping["mappings"]["_meta"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    all_meta.insert(META_KEY.to_owned(), meta.to_json());
    request(
        client,
        retry,
        &format!("index `{concrete}`: {what}"),
        Method::Put,
        &format!("/{}/_mapping", path_segment(concrete)),
        &[],
        Some(&Body::Json(json!({ "_meta": all_meta }))),
    )
    .await?;
    Ok(())
}

/// Whether two descriptions of an index's groups are of the same groups: one field, one
/// order. What links them ([`super::schema::GroupLink`]) decides no stored field: the wanted one
/// replaces the recorded one.
fn same_groups(recorded: &GroupMeta, wanted: &GroupMeta) -> bool {
    recorded.field == wanted.field && recorded.order == wanted.order
}

/// Two different group fields (or orders) asked of one index.
fn group_clash(index: &str, recorded: &GroupMeta, wanted: &GroupMeta) -> EsError {
    let hint = if recorded.field != wanted.field {
        format!(
            "an index keeps one group field: pass --group-field {}",
            recorded.field
        )
    } else {
        match &recorded.order {
            GroupOrder::Earliest { field } => format!(
                "an index keeps one group order: pass --group-order {field} (or leave it out), or es-init a new index for another order"
            ),
            GroupOrder::Fingerprinted => "an index keeps one group order: leave out --group-order (this index's groups are labelled by their first fingerprinted article), or es-init a new index for another order".to_owned(),
        }
    };
    EsError::MetaConflict {
        index: index.to_owned(),
        existing: format!("groups in `{}` ({})", recorded.field, recorded.order),
        wanted: format!("groups in `{}` ({})", wanted.field, wanted.order),
        hint,
    }
}

/// `recorded` with `wanted`'s methods added; an error when both describe a method differently.
fn merge_meta(
    index: &str,
    recorded: Option<&IndexMeta>,
    wanted: &IndexMeta,
) -> Result<IndexMeta, EsError> {
    let Some(recorded) = recorded else {
        return Ok(wanted.clone());
    };
    let clash = |existing: String, wanted: String| {
        EsError::MetaConflict {
        index: index.to_owned(),
        existing,
        wanted,
        hint: "fingerprints of two versions cannot share an index: to change the index, es-init --upgrade with these settings and back-fill it; or es-init a new index for them (or pass the settings the index records)".into(),
    }
    };
    let mut out = recorded.clone();
    if recorded.hmm != wanted.hmm {
        return Err(clash(
            format!("words made with hmm {}", recorded.hmm),
            format!("hmm {}", wanted.hmm),
        ));
    }
    match (&recorded.simhash, &wanted.simhash) {
        (Some(r), Some(w)) if r != w => {
            return Err(clash(
                format!(
                    "simhash {} ({} blocks, fields {:?})",
                    r.version,
                    r.block_type,
                    r.fields.all()
                ),
                format!(
                    "simhash {} ({} blocks, fields {:?})",
                    w.version,
                    w.block_type,
                    w.fields.all()
                ),
            ))
        }
        (None, Some(w)) => out.simhash = Some(w.clone()),
        _ => {}
    }
    match (&recorded.minhash, &wanted.minhash) {
        // An upgrade in progress is not a difference a caller names.
        (Some(r), Some(w))
            if r.from_full != w.from_full
                && *r
                    == MinHashMeta {
                        from_full: r.from_full,
                        ..w.clone()
                    } => {}
        (Some(r), Some(w)) if r != w => {
            return Err(clash(
                format!(
                    "minhash {} ({} layout, fields {:?})",
                    r.version,
                    r.layout,
                    r.fields.all()
                ),
                format!(
                    "minhash {} ({} layout, fields {:?})",
                    w.version,
                    w.layout,
                    w.fields.all()
                ),
            ))
        }
        (None, Some(w)) => out.minhash = Some(w.clone()),
        _ => {}
    }
    // A formula decides no fingerprint: the one wanted replaces the one recorded.
    if wanted.formula.is_some() {
        out.formula.clone_from(&wanted.formula);
    }
    match (&recorded.group, &wanted.group) {
        (Some(r), Some(w)) if !same_groups(r, w) => return Err(group_clash(index, r, w)),
        // What links the groups is the wanted one's.
        (_, Some(w)) => out.group = Some(w.clone()),
        _ => {}
    }
    // Both methods share the words: the index folds or not, and drops one boilerplate or
    // none, for all of them.
    if recorded.fold != wanted.fold {
        return Err(clash(
            format!("Traditional folded into Simplified: {}", recorded.fold),
            format!("folded: {}", wanted.fold),
        ));
    }
    if recorded.boilerplate != wanted.boilerplate {
        let name = |b: &Option<std::sync::Arc<neardup_core::text::Boilerplate>>| {
            b.as_ref()
                .map_or_else(|| "none".to_owned(), |b| b.to_string())
        };
        return Err(clash(
            format!("boilerplate {}", name(&recorded.boilerplate)),
            format!("boilerplate {}", name(&wanted.boilerplate)),
        ));
    }
    Ok(out)
}

/// What the indices behind `index` hold ([`read_meta`]), checked, without changing
/// anything, against their mappings: every field of every method each index holds is mapped
/// with the type neardup writes (blocks `short` or `keyword`, as recorded). Writers call this
/// first: an unmapped field would get a dynamic mapping (`long` blocks, `text` version or band
/// terms) that breaks queries. `legacy_fields` names the SimHash fields of indices without
/// `_meta.neardup` (the older Java service's layout, read as `seed000`).
pub async fn verify_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    legacy_fields: &FieldNames,
) -> Result<IndexMeta, EsError> {
    legacy_fields.validate()?;
    let mut per_index = std::collections::BTreeMap::new();
    let mut missing = Vec::new();
    for (concrete, m) in mappings(client, retry, index).await? {
        let held = match IndexMeta::from_mapping(&concrete, &m["mappings"], legacy_fields) {
            Ok(held) => held,
            Err(EsError::NotInitialised { fields, .. }) => {
                missing.extend(fields);
                continue;
            }
            Err(e) => return Err(e),
        };
        held.validate()?;
        let props = &m["mappings"]["properties"];
        let names = held.simhash.as_ref().map(|s| s.fields.clone());
        for (name, want) in held.mapping()["properties"]
            .as_object()
            .expect("properties")
        {
            let want = want["type"].as_str().unwrap_or_default();
            match props.get(name) {
                None => missing.push(name.clone()),
                Some(have) => {
                    let have = have["type"].as_str().unwrap_or("object");
                    if have != want {
                        let names = names.clone().unwrap_or_default();
                        return Err(conflict(&concrete, &names, name, have, want));
                    }
                }
            }
        }
        per_index.insert(concrete, held);
    }
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Err(EsError::NotInitialised {
            index: index.to_owned(),
            fields: missing,
        });
    }
    IndexMeta::common(&per_index)
}

fn conflict(index: &str, names: &FieldNames, field: &str, have: &str, want: &str) -> EsError {
    let is_block = names.blocks.iter().any(|b| b == field);
    let hint = match (is_block, have) {
        (true, "short") | (true, "keyword") => format!(
            "the blocks of this index are `{have}`: run es-init with --block-type {have}"
        ),
        _ => "choose other field names (--block-fields, --simhash-field, --version-field, --reason-field, --minhash-fields) or reindex into an index with the right mapping".to_owned(),
    };
    EsError::MappingConflict {
        index: index.to_owned(),
        field: field.to_owned(),
        existing: have.to_owned(),
        wanted: want.to_owned(),
        hint,
    }
}

/// `PUT /index` with the mappings. `Ok(false)` when the index appeared meanwhile.
async fn create_index(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    mapping: &Value,
) -> Result<bool, EsError> {
    let what = format!("index `{index}`: create");
    let body = Body::Json(json!({ "mappings": mapping }));
    let path = format!("/{}", path_segment(index));
    let reply = retry
        .run(|| async {
            let reply = send(client, Method::Put, &path, &[], Some(&body)).await?;
            if reply.body["error"]["type"] == "resource_already_exists_exception" {
                return Ok(None);
            }
            super::check(&what, reply).map(Some)
        })
        .await?;
    Ok(reply.is_some())
}

/// The mapping of every concrete index behind `index` (a name, alias, pattern or list).
pub(crate) async fn mappings(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
) -> Result<Map<String, Value>, EsError> {
    let r = request(
        client,
        retry,
        &format!("index `{index}`: get mapping"),
        Method::Get,
        &format!("/{}/_mapping", path_segment_keep_patterns(index)),
        &[],
        None,
    )
    .await
    .map_err(|e| match e {
        EsError::Status { status: 404, .. } if index.contains(['*', ',']) => {
            EsError::NoIndexMatches {
                pattern: index.to_owned(),
            }
        }
        other => other,
    })?;
    match r {
        Value::Object(m) if !m.is_empty() => Ok(m),
        _ if index.contains(['*', ',']) => Err(EsError::NoIndexMatches {
            pattern: index.to_owned(),
        }),
        _ => Err(EsError::IndexNotFound {
            index: index.to_owned(),
        }),
    }
}

/// What the indices behind `index` hold, in common (see [`IndexMeta::common`]).
/// `legacy_fields` names the SimHash fields of indices without `_meta.neardup`.
pub async fn read_meta(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    legacy_fields: &FieldNames,
) -> Result<IndexMeta, EsError> {
    let per_index = read_each(client, retry, index, legacy_fields).await?;
    IndexMeta::common(&per_index)
}

/// What each concrete index behind `index` holds.
pub async fn read_each(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    legacy_fields: &FieldNames,
) -> Result<BTreeMap<String, IndexMeta>, EsError> {
    let mut out = BTreeMap::new();
    for (concrete, m) in mappings(client, retry, index).await? {
        let meta = IndexMeta::from_mapping(&concrete, &m["mappings"], legacy_fields)?;
        out.insert(concrete, meta);
    }
    Ok(out)
}

/// The SimHash profile the indices behind `index` already hold, for `es-init` to keep when no
/// profile is asked for: the one `_meta` records; `seed000` for an index without `_meta`
/// whose blocks are mapped but not the version field (the older Java service wrote no
/// version); for an index a neardup wrote before it recorded `_meta`, the profile whose
/// version its documents carry. `None` when the index does not exist or holds no SimHash
/// fingerprints yet.
pub async fn existing_profile(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    fields: &FieldNames,
    hmm: bool,
) -> Result<Option<Profile>, EsError> {
    let all = match mappings(client, retry, index).await {
        Ok(m) => m,
        Err(EsError::IndexNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut found: Option<(String, Profile)> = None;
    for (concrete, m) in &all {
        let m = &m["mappings"];
        let profile = if m["_meta"].get(META_KEY).is_some() {
            IndexMeta::from_mapping(concrete, m, fields)?
                .simhash
                .map(|s| s.profile)
        } else if fields
            .blocks
            .iter()
            .all(|b| m["properties"].get(b).is_some())
        {
            if m["properties"].get(&fields.version).is_none() {
                Some(Profile::Seed000)
            } else {
                stored_profile(client, retry, concrete, fields, hmm).await?
            }
        } else {
            None
        };
        match (&found, profile) {
            (Some((other, p)), Some(q)) if *p != q => {
                return Err(EsError::Config(format!(
                    "indices `{other}` and `{concrete}` hold SimHash fingerprints of profiles `{p}` and `{q}`; es-init them one at a time, with --profile"
                )))
            }
            (None, Some(q)) => found = Some((concrete.clone(), q)),
            _ => {}
        }
    }
    Ok(found.map(|(_, p)| p))
}

/// The profile whose version the documents of `index` carry (a terms aggregation over the
/// version field); `None` when no document has one.
async fn stored_profile(
    client: &Elasticsearch,
    retry: &RetryPolicy,
    index: &str,
    fields: &FieldNames,
    hmm: bool,
) -> Result<Option<Profile>, EsError> {
    let r = search(
        client,
        retry,
        &format!("index `{index}`: versions of the stored fingerprints"),
        &format!("/{}/_search", super::path_segment(index)),
        &[],
        Some(&super::Body::Json(json!({
            "size": 0,
            "aggs": { "v": { "terms": { "field": &fields.version, "size": 10 } } }
        }))),
    )
    .await?;
    let versions: Vec<&str> = r["aggregations"]["v"]["buckets"]
        .as_array()
        .map(|b| b.iter().filter_map(|b| b["key"].as_str()).collect())
        .unwrap_or_default();
    let mut profiles = Vec::new();
    for v in &versions {
        let p = Profile::ALL.into_iter().find(|p| {
            // Documents without `_meta` predate folding.
            let config = FingerprintConfig {
                hmm,
                fold: false,
                ..FingerprintConfig::for_profile(*p)
            };
            Fingerprinter::versions(&config).simhash == *v
        });
        match p {
            Some(p) if !profiles.contains(&p) => profiles.push(p),
            Some(_) => {}
            None => {
                return Err(EsError::Config(format!(
                    "index `{index}` holds fingerprints of version `{v}`, which this neardup does not make; es-init a new index and back-fill it"
                )))
            }
        }
    }
    match profiles.as_slice() {
        [] => Ok(None),
        [p] => Ok(Some(*p)),
        many => Err(EsError::Config(format!(
            "index `{index}` holds fingerprints of several profiles ({}); pass --profile, then back-fill the others",
            many.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

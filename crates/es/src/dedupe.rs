//! Dedupe on insert: write articles unless a near-duplicate is stored, race-free across
//! processes and without a refresh per write ([`Claims`] says why), one article or a batch.
//!
//! For a batch, the keys of every article are claimed at once; each article is searched for
//! and checked against the recent inserts the keys' records list; then, in the batch's order,
//! an article is refused when something stored is near it or an earlier article of the batch
//! that is written (naming them) — what inserting them one by one would do. The rest are
//! written in one `_bulk`, and the claims released listing each article written under its own
//! keys.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use futures_util::StreamExt;
use serde_json::Value;

use super::schema::band_term;
use super::{
    ClaimError, Claims, EsError, EsIndexer, IndexMeta, IndexedArticle, Near, Refresh, Similar,
};
use crate::group::Link;
use crate::similar::{aligned_match, Aligner, BatchTexts, Marked, Sources};
use neardup_core::method::{sort_matches, Match, Shared};
use neardup_core::relation::{Relation, TextMatch};
use neardup_core::{Sketch, Sketches, Tolerance};

/// One article to write: its id, its JSON object, and its sketches
/// ([`EsIndexer::sketch`]).
#[derive(Clone, Copy, Debug)]
pub struct NewArticle<'a> {
    pub id: &'a str,
    pub article: &'a Value,
    pub sketches: &'a Sketches,
}

/// What became of one article.
#[derive(Debug)]
pub enum Inserted {
    /// Written (`result` says `created` or `updated`).
    Written(IndexedArticle),
    /// Not written: these are stored (or earlier in the batch and written), nearest first.
    Duplicate(Vec<Match>),
    /// Not written: Elasticsearch refused it ([`EsError::BadDocument`] for the article's own
    /// fault).
    Failed(EsError),
}

/// Why a dedupe write failed as a whole (nothing of it was written).
#[derive(Debug, thiserror::Error)]
pub enum DedupeError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(transparent)]
    Es(#[from] EsError),
}

/// Searches run at once per batch.
const SEARCHES_IN_FLIGHT: usize = 8;

/// The keys two near-duplicates must share, to claim before a dedupe insert: the LSH band
/// terms of a MinHash signature; the four block values of a SimHash (k ≤ 3: two fingerprints
/// within distance 3 have an equal block).
pub fn claim_keys(sketch: &Sketch, meta: &IndexMeta) -> Result<Vec<String>, EsError> {
    Ok(match sketch {
        Sketch::MinHash(sig) => {
            let params =
                meta.minhash.as_ref().map(|m| m.params).ok_or_else(|| {
                    EsError::Config("the index holds no MinHash fingerprints".into())
                })?;
            sig.band_keys(&params)
                .into_iter()
                .map(|k| format!("m{}", band_term(k)))
                .collect()
        }
        Sketch::SimHash(f) => f
            .blocks16()
            .iter()
            .enumerate()
            .map(|(i, b)| format!("s{i}:{b}"))
            .collect(),
    })
}

/// Writes `articles` into the indexer's index unless a near-duplicate (at `near`'s tolerance) is
/// stored or earlier in the batch. With containment asked ([`Near::new`] with
/// [`neardup_core::relation::MatchOptions::default`]) an article mostly contained in a stored one
/// (`contained_in`: an excerpt of a stored article) is refused too, its matches saying their
/// relation; an article that contains a stored one (`contains`: the full article of a stored
/// teaser) is never refused for it, and is written ([`neardup_core::relation::Relation::refuses_insert`]).
/// A bare tolerance asks for near-duplicates only. Containment is judged against stored
/// articles, searchable or listed by the claims (written, not yet searchable), and against
/// the earlier articles of the batch that are written; the claims (band keys) serialise
/// concurrent inserts of near-duplicates, not of partial copies (docs/service.md says why).
/// `claims` are the index's ([`Claims::new`] with the same
/// index), `similar` answers the searches, `holder` names this writer in the claims it
/// holds, and claimed keys are waited for until `deadline`. An article too short to
/// fingerprint has no near-duplicate and is written. SimHash needs k ≤ 3 (a block to claim).
#[allow(clippy::too_many_arguments)]
pub async fn insert_unless_near(
    indexer: &EsIndexer,
    claims: &Claims,
    similar: &Similar,
    articles: &[NewArticle<'_>],
    near: impl Into<Near>,
    refresh: Refresh,
    holder: &str,
    deadline: Instant,
) -> Result<Vec<Inserted>, DedupeError> {
    let near = near.into();
    let tolerance = near.tolerance;
    if let Tolerance::Distance(k) = tolerance {
        if k > 3 {
            return Err(EsError::DedupeDistance { k }.into());
        }
    }
    let method = tolerance.method();
    let index = indexer.index();
    let meta = indexer.meta();
    if !meta.has(method) {
        return Err(EsError::MethodNotHeld {
            index: index.to_owned(),
            held: meta.default_method(),
            asked: method,
        }
        .into());
    }
    let sketches: Vec<Option<Sketch>> = articles
        .iter()
        .map(|a| a.sketches.clone().into_sketch(method).ok())
        .collect();
    let mut outcome: Vec<Option<Inserted>> = articles.iter().map(|_| None).collect();
    let keys_of: Vec<Vec<String>> = sketches
        .iter()
        .map(|s| {
            Ok(s.as_ref()
                .map(|s| claim_keys(s, meta))
                .transpose()?
                .unwrap_or_default())
        })
        .collect::<Result<_, EsError>>()?;

    // Holding every key of the batch: what is stored near each article (searched, or listed
    // by the keys' records), then the batch in order, each article also checked against the
    // earlier ones that are written.
    let checked: Vec<usize> = (0..articles.len())
        .filter(|&i| sketches[i].is_some())
        .collect();
    let all_keys: Vec<String> = checked
        .iter()
        .flat_map(|&i| keys_of[i].iter().cloned())
        .collect();
    let mut held = claims.acquire(&all_keys, holder, deadline).await?;
    // The articles sent to be written, under each of their keys, once the write is sent.
    let mut sent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Whether the write was answered (each article's outcome known), once it is sent.
    let mut answered = true;
    let result = async {
        let queries: Vec<Sketch> = checked
            .iter()
            .map(|&i| sketches[i].clone().expect("checked articles have sketches"))
            .collect();
        let recent = held.recent_ids();
        let listed = similar.among_ids(index, &recent, &queries, near);
        let searched = futures_util::stream::iter(queries.iter().cloned())
            .map(|q| similar.by_fingerprint(index, q, near))
            .buffered(SEARCHES_IN_FLIGHT)
            .collect::<Vec<_>>();
        let (listed, searched) = tokio::join!(listed, searched);
        let mut stored_near: Vec<Vec<Match>> = vec![Vec::new(); articles.len()];
        // Whether each article is linked to anything (a part it contains, stored or earlier
        // in the batch): a written one that is has its group searched for, not its own.
        let mut linked = vec![false; articles.len()];
        for ((&i, found), listed) in checked.iter().zip(searched).zip(listed?) {
            let mut matches = found?.matches;
            matches.extend(listed);
            matches.retain(|m| m.id != articles[i].id);
            linked[i] = !matches.is_empty();
            stored_near[i] = matches;
        }
        // The earlier articles of the batch each one is linked to (`batch_links`).
        let relations =
            near.options.containment.is_some() && method == neardup_core::Method::MinHash;
        let params = meta.minhash.as_ref().map(|m| m.params);
        let bands: Vec<Vec<u64>> = sketches
            .iter()
            .map(|s| {
                s.as_ref()
                    .map(|s| super::group::band_set(s, params.as_ref()))
                    .unwrap_or_default()
            })
            .collect();
        let links_of = batch_links(&checked, &sketches, &bands, &keys_of, &near, relations);
        // With the texts asked to decide: what the rule on the aligned texts says of every
        // stored match (their texts read in one realtime multi-get) and of every pair of the
        // batch that the sketches link, aligned off the async runtime.
        let judged = match near.align {
            Some(rule) => {
                let aligner = similar.aligner(&index.into(), rule).await?;
                let all: Vec<(Option<&str>, &str)> = stored_near
                    .iter()
                    .flatten()
                    .map(|m| (m.index.as_deref(), m.id.as_str()))
                    .collect();
                let stored = similar.texts_of(&aligner, &all).await?;
                let sources: Vec<Option<Value>> = articles
                    .iter()
                    .enumerate()
                    .map(|(i, a)| sketches[i].as_ref().map(|_| a.article.clone()))
                    .collect();
                let pairs: Vec<(usize, usize)> = links_of
                    .iter()
                    .enumerate()
                    .flat_map(|(i, links)| links.iter().map(move |(j, _)| (i, *j)))
                    .collect();
                let matches = std::mem::take(&mut stored_near);
                let (matches, batch) = tokio::task::spawn_blocking(move || {
                    judge_aligned(&aligner, &sources, &stored, matches, &pairs)
                })
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
                stored_near = matches;
                Some(batch)
            }
            None => None,
        };
        for near_i in &mut stored_near {
            near_i.retain(|m| m.relation.is_none_or(Relation::refuses_insert));
        }
        // Each article against the earlier ones of the batch that are written.
        let mut written = vec![false; articles.len()];
        for &i in &checked {
            let mut near_i = std::mem::take(&mut stored_near[i]);
            for (j, l) in &links_of[i] {
                let j = *j;
                if !written[j] || articles[j].id == articles[i].id {
                    continue;
                }
                linked[i] = true;
                let mut m = Match::in_index(articles[j].id, index, l.score);
                m.relation = l.relation;
                m.containment = l.containment;
                let m = match &judged {
                    Some(batch) => match batch.get(&(i, j)) {
                        Some(Some(aligned)) => aligned_match(m, aligned.clone()),
                        _ => continue,
                    },
                    None => m,
                };
                if m.relation.is_none_or(Relation::refuses_insert) {
                    near_i.push(m);
                }
            }
            // An article is never its own duplicate (a stored copy, or an earlier line).
            near_i.retain(|m| m.id != articles[i].id);
            if near_i.is_empty() {
                written[i] = true;
            } else {
                sort_matches(&mut near_i);
                near_i.dedup_by(|a, b| a.id == b.id && a.index == b.index);
                outcome[i] = Some(Inserted::Duplicate(near_i));
            }
        }
        let to_write: Vec<usize> = (0..articles.len())
            .filter(|&i| outcome[i].is_none())
            .collect();
        let batch: Vec<(&str, &Value, &Sketches)> = to_write
            .iter()
            .map(|&i| (articles[i].id, articles[i].article, articles[i].sketches))
            .collect();
        // From here the articles may be stored even if the answer is lost (or this future is
        // dropped before it comes): list them.
        for &i in &to_write {
            for k in &keys_of[i] {
                sent.entry(k.clone())
                    .or_default()
                    .push(articles[i].id.to_owned());
            }
        }
        held.writing(sent.clone());
        answered = false;
        // Nothing stored or earlier is linked to them: where groups link what `near` does,
        // each starts its own group, without a second search.
        let objects: Vec<(&str, &Sketches)> = batch
            .iter()
            .filter(|(_, a, _)| a.is_object())
            .map(|(id, _, s)| (*id, *s))
            .collect();
        let own = match to_write.iter().any(|&i| linked[i]) {
            false => indexer.own_group_labels(&objects, near),
            true => None,
        };
        let answers = match own {
            Some(labels) => {
                indexer
                    .index_labelled_articles(&batch, refresh, Some(labels))
                    .await?
            }
            None => indexer.index_articles(&batch, refresh).await?,
        };
        answered = true;
        for (i, a) in to_write.into_iter().zip(answers) {
            outcome[i] = Some(match a {
                Ok(w) => Inserted::Written(w),
                Err(e) => Inserted::Failed(e),
            });
        }
        Ok::<(), DedupeError>(())
    }
    .await;
    match answered {
        true => claims.release_recording(held, &sent).await,
        // The write failed as a whole: it may yet be applied (its answer lost).
        false => claims.release_unanswered(held).await,
    }
    claims.sweep_when_due();
    result?;
    Ok(outcome
        .into_iter()
        .map(|o| o.expect("every article has an outcome"))
        .collect())
}

/// What the rule on the aligned texts says of a pair of the batch (an article, an earlier
/// one): how they relate and what they share; `None` when it relates them not.
type Judged = HashMap<(usize, usize), Option<(TextMatch, Shared)>>;

/// For each article of the batch, the earlier checked ones its sketch links it to, and how:
/// with partial copies asked, every earlier one sharing a band or agreeing on enough minima
/// (a part shares no band with its article); else those sharing a key. The batch compares
/// an article with those that are written.
fn batch_links(
    checked: &[usize],
    sketches: &[Option<Sketch>],
    bands: &[Vec<u64>],
    keys_of: &[Vec<String>],
    near: &Near,
    relations: bool,
) -> Vec<Vec<(usize, Link)>> {
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    // With partial copies asked: the batch's candidate pairs, as the groups' batches find
    // them; the earlier articles of each, in order.
    let mut earlier_of: Vec<Vec<usize>> = vec![Vec::new(); checked.len()];
    if relations {
        let of_checked: Vec<Option<&Sketch>> =
            checked.iter().map(|&i| sketches[i].as_ref()).collect();
        let band_lists: Vec<&[u64]> = checked.iter().map(|&i| bands[i].as_slice()).collect();
        for (x, y) in super::group::candidate_pairs(&of_checked, &band_lists, true, true) {
            earlier_of[y].push(checked[x]);
        }
    }
    let mut links = Vec::new();
    links.resize_with(sketches.len(), Vec::new);
    for (n, &i) in checked.iter().enumerate() {
        let s = sketches[i]
            .as_ref()
            .expect("checked articles have sketches");
        let earlier: Vec<usize> = if relations {
            std::mem::take(&mut earlier_of[n])
        } else {
            let mut seen = std::collections::HashSet::new();
            keys_of[i]
                .iter()
                .flat_map(|k| by_key.get(k.as_str()).into_iter().flatten().copied())
                .filter(|&j| seen.insert(j))
                .collect()
        };
        // The sketch is of the tolerance's method, so the query is built; were it not,
        // nothing would link to it (as `Sketch::score` answers).
        if let Ok(query) = neardup_core::method::Query::new(s.clone(), near.tolerance) {
            for j in earlier {
                let other = sketches[j].as_ref().expect("keyed articles have sketches");
                links[i].extend(
                    super::group::link(&query, &bands[i], other, &bands[j], &near.options)
                        .map(|l| (j, l)),
                );
            }
        }
        for k in &keys_of[i] {
            by_key.entry(k.as_str()).or_default().push(i);
        }
    }
    links
}

/// The aligned judgement of a dedupe insert, CPU work for the blocking pool: each checked
/// article's stored matches (`stored_near`, their texts in `stored`) kept when the rule
/// relates them, with its relation and what they share; and every pair of the batch in
/// `pairs` judged. `articles` holds each checked article (`None` for the others).
fn judge_aligned(
    aligner: &Aligner,
    articles: &[Option<Value>],
    stored: &Sources,
    stored_near: Vec<Vec<Match>>,
    pairs: &[(usize, usize)],
) -> Result<(Vec<Vec<Match>>, Judged), EsError> {
    let texts: Vec<Option<Marked>> = articles
        .iter()
        .map(|a| a.as_ref().map(|a| aligner.text(a)).transpose())
        .collect::<Result<_, EsError>>()?;
    let mut texts = BatchTexts::new(aligner, texts, stored);
    let mut near = Vec::with_capacity(stored_near.len());
    for (i, matches) in stored_near.into_iter().enumerate() {
        if texts.article(i).is_none() {
            near.push(matches);
            continue;
        }
        let mut kept = Vec::new();
        for m in matches {
            let Some(index) = m.index.clone() else {
                continue;
            };
            if let Some(r) = texts.relate_stored(i, &(index, m.id.clone()))? {
                kept.push(aligned_match(m, r));
            }
        }
        near.push(kept);
    }
    let batch = pairs
        .iter()
        .filter(|&&(i, j)| texts.article(i).is_some() && texts.article(j).is_some())
        .map(|&(i, j)| ((i, j), texts.relate_in_batch(i, j)))
        .collect();
    Ok((near, batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::tests::{mh, minhash_near};
    use neardup_core::relation::MatchOptions;
    use neardup_core::MinHashParams;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// With partial copies asked, a dedupe batch links each article to exactly the
        /// earlier ones that comparing every pair with the search's rule links it to.
        #[test]
        fn a_batch_links_what_every_pair_links(
            spans in proptest::collection::vec((0u64..40, 1u64..40), 2..24),
        ) {
            let p = MinHashParams::DEFAULT;
            let near = minhash_near(MatchOptions::default());
            let sketches: Vec<Option<Sketch>> = spans
                .iter()
                .map(|&(from, len)| Some(mh(from * 25..(from + len) * 25)))
                .collect();
            let bands: Vec<Vec<u64>> = sketches
                .iter()
                .map(|s| crate::group::band_set(s.as_ref().unwrap(), Some(&p)))
                .collect();
            let checked: Vec<usize> = (0..sketches.len()).collect();
            let keys_of = vec![Vec::new(); sketches.len()];
            let got = batch_links(&checked, &sketches, &bands, &keys_of, &near, true);
            for (i, s) in sketches.iter().enumerate() {
                let query = neardup_core::method::Query::new(s.clone().unwrap(), near.tolerance).unwrap();
                let every: Vec<usize> = (0..i)
                    .filter(|&j| {
                        crate::group::link(&query, &bands[i], sketches[j].as_ref().unwrap(), &bands[j], &near.options).is_some()
                    })
                    .collect();
                let linked: Vec<usize> = got[i].iter().map(|(j, _)| *j).collect();
                proptest::prop_assert_eq!(linked, every, "article {}", i);
            }
        }
    }
}

//! Duplicate groups next to the articles: every article carries, in a `keyword` field
//! (`nearDupGroup` by default, recorded in `_meta.neardup.group`), the id of its group's
//! representative, so that an article API lists each story once with one `collapse` on it.
//!
//! The rules, applied by every writer through [`super::EsIndexer`] (the service's `PUT` and
//! `_bulk`, `worker`, `backfill`):
//! - Linked means what `similar` links at the index's default tolerance ([`group_near`]:
//!   MinHash at the default threshold where the index holds MinHash, else SimHash at k = 3):
//!   a shared band (or block) and the estimate within the tolerance; and, where the index
//!   holds the containment fields (fields format 4 or 3), a partial copy either way (a teaser, an
//!   excerpt, a passage: [`neardup_core::relation`]), found as `similar` finds it.
//! - A new article linked to stored articles joins the group of the best link
//!   ([`best_link_first`]): a near-duplicate (the nearest), else an article it is contained
//!   in (the highest containment), else a part it contains (the highest containment); then
//!   by label. Its label is that article's label (an article stored before groups existed
//!   counts as labelled with its own id). So a full article stored after its teaser joins the
//!   teaser's group, and a teaser stored after its article joins the article's.
//! - Articles written in one batch that are linked end in one group: the batch's
//!   near-duplicate links are closed transitively, and a part joins its best container in
//!   the batch (one: a short item contained in two different reports does not join the two);
//!   a set of linked articles takes the label of the best stored link any of them has;
//!   linked to none, the id of its representative:
//!   its first article, or, where the index orders groups by a field (`es-init
//!   --group-order publishDate`, [`GroupOrder::Earliest`]), its earliest article by that
//!   field ([`earliest_first`], the one rule of that order).
//! - An article too short to fingerprint is its own group.
//! - A write never relabels other articles. An article near two groups joins one; the two
//!   stay apart until a regroup recomputes the groups as connected components. A deleted
//!   representative's id stays the label of its group (a label, not a reference). A
//!   re-fingerprinted article is labelled again like a new one (without itself). An article
//!   earlier (by the group order) than its group's representative joins the group under the
//!   existing label: the representative stays until a regroup.
//!
//! Searches see what the last refresh made searchable. So that articles written by this
//! process moments ago are seen too, a grouper remembers what it labelled until the index
//! has surely refreshed (three refresh intervals, at least 5 s; 10 minutes where periodic
//! refresh is disabled; at most the last 100,000 articles) and links new articles to those
//! in memory as well, under one lock: of two near articles labelled by one process, the
//! second sees the first, whatever the refresh. Writers in different processes at the same
//! moment can still start two groups; a regroup joins them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use elasticsearch::Elasticsearch;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::schema::{GroupMeta, GroupOrder};
use super::similar::{Aligner, BatchTexts, Marked, Sources};
use super::{
    mget, Body, EsError, IndexMeta, Near, RetryPolicy, Similar, SimilarOptions, DEFAULT_K,
};
use neardup_core::input::BadTextField;
use neardup_core::method::{Query, Score, Shared};
use neardup_core::relation::{
    agree_enough, is_candidate, AlignRule, MatchOptions, Relation, TextMatch,
};
use neardup_core::{Fingerprinter, Method, MinHashParams, Sketch, Sketches, Tolerance};

/// Searches run at once per batch.
const SEARCHES_IN_FLIGHT: usize = 8;

/// How long a grouper remembers what it labelled, at least: until the index has refreshed
/// (three refresh intervals, for replicas refreshing on their own schedule), never less than
/// this.
const MIN_HORIZON: Duration = Duration::from_secs(5);

/// How long it remembers on an index whose periodic refresh is disabled (`-1`).
const HORIZON_WITHOUT_REFRESH: Duration = Duration::from_secs(600);

/// The most articles it remembers (about a kilobyte each for MinHash, and its texts where
/// groups are linked by texts); the oldest go first.
const MAX_REMEMBERED: usize = 100_000;

/// A stored (or remembered) article a new one is linked to, with its group label.
#[derive(Clone, Debug, PartialEq)]
pub struct Linked {
    pub id: String,
    pub label: String,
    pub score: Score,
    /// How it relates to the new article, read from the new article (`contains`: the
    /// stored one is a part of the new one); `None` for a near-duplicate found without
    /// relations (SimHash, or an index without containment fields).
    pub relation: Option<Relation>,
    /// The estimated containment of the smaller in the larger, when known.
    pub containment: Option<f64>,
}

/// What a group links, in one index ([`IndexMeta`]): the index's default tolerance, with
/// partial copies where the index holds the containment fields (MinHash, fields format 4 or 3),
/// near-duplicates only otherwise. Every writer and `regroup` search with it.
pub fn group_near(meta: &IndexMeta) -> Near {
    let method = meta.default_method();
    let options = if method == Method::MinHash && meta.has_containment() {
        MatchOptions::default()
    } else {
        MatchOptions::NEAR_DUPLICATES_ONLY
    };
    Near::new(Tolerance::default_for(method, DEFAULT_K), options)
}

/// The one order of a new article's links, best first: near-duplicates (nearest first),
/// then articles it is contained in, then parts it contains (each by the highest
/// containment, then the nearest); then by the smaller label, then id.
pub fn best_link_first(a: &Linked, b: &Linked) -> std::cmp::Ordering {
    let class = |l: &Linked| match l.relation {
        None | Some(Relation::NearDuplicate) => 0,
        Some(Relation::ContainedIn) => 1,
        Some(Relation::Contains) => 2,
        Some(Relation::SharesPassage) => 3,
    };
    class(a)
        .cmp(&class(b))
        .then_with(|| match class(a) {
            0 => std::cmp::Ordering::Equal,
            _ => b
                .containment
                .unwrap_or(0.0)
                .total_cmp(&a.containment.unwrap_or(0.0)),
        })
        .then_with(|| a.score.nearest_first(&b.score))
        .then_with(|| a.label.cmp(&b.label))
        .then_with(|| a.id.cmp(&b.id))
}

/// How `b` links to the query `a` (read from `a`) by `similar`'s rule, in memory: a
/// candidate (a shared band, or, with partial copies asked in `options`, at least
/// [`candidate_agreeing_minima`] agreeing minima; SimHash: any), then the relation or the
/// score. `a_bands` and `b_bands` are their sorted band keys ([`band_set`]). The groups'
/// memory and batches, and dedupe's batches, compare articles with it; the caller builds
/// each article's [`Query`] once, at the tolerance [`Near`] gives.
pub(crate) fn link(
    a: &Query,
    a_bands: &[u64],
    b: &Sketch,
    b_bands: &[u64],
    options: &MatchOptions,
) -> Option<Link> {
    let near_duplicate = |score| Link {
        score,
        relation: None,
        containment: None,
    };
    match (a, b) {
        (Query::MinHash { signature: x, .. }, Sketch::MinHash(y)) => {
            let relations = options.containment.is_some();
            if !is_candidate(share_a_band(a_bands, b_bands), x, y, options) {
                return None;
            }
            if relations {
                a.relate(b, options).map(|r| Link {
                    score: r.score,
                    relation: Some(r.relation),
                    containment: r.containment,
                })
            } else {
                a.score(b).map(near_duplicate)
            }
        }
        _ => a.score(b).map(near_duplicate),
    }
}

/// Whether `a` and `b` can be linked without sharing a band, with partial copies asked: two
/// MinHash sketches when enough of their minima agree ([`agree_enough`]); any other pair
/// (SimHash: every pair is compared). The memory and the batches find band sharers through a
/// band map and test every other article with this, instead of [`link`]'s band test of two
/// sorted key lists (about 25 times the cost); then [`link`] judges the candidates, so the
/// links are the same as comparing every pair.
pub(crate) fn may_link_without_a_band(a: &Sketch, b: &Sketch) -> bool {
    match (a, b) {
        (Sketch::MinHash(x), Sketch::MinHash(y)) => agree_enough(x, y),
        _ => true,
    }
}

/// A link found in memory or within a batch.
pub(crate) struct Link {
    pub(crate) score: Score,
    pub(crate) relation: Option<Relation>,
    pub(crate) containment: Option<f64>,
}

/// The one rule that picks a part's container among several (in a batch, in `regroup`):
/// whether the container `id` with `containment` beats `than` (its containment and id):
/// the higher containment, ties to the smaller id.
pub(crate) fn better_container(containment: f64, id: &str, than: (f64, &str)) -> bool {
    containment > than.0 || (containment == than.0 && id < than.1)
}

/// An article's place in a group order by a field ([`GroupOrder::Earliest`]): the field's
/// value as [`order_key`] reads it. Numbers compare as numbers (as `f64`: exact up to 2^53,
/// which holds epoch milliseconds), strings as strings (by code point, so ISO 8601 dates of
/// one format and time zone sort by time), and every number comes before every string.
#[derive(Clone, Debug)]
pub enum OrderKey {
    /// A JSON number (never NaN; `-0` is `0`).
    Number(f64),
    /// A JSON string.
    String(String),
}

impl Ord for OrderKey {
    fn cmp(&self, other: &OrderKey) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (OrderKey::Number(a), OrderKey::Number(b)) => a.total_cmp(b),
            (OrderKey::Number(_), OrderKey::String(_)) => Ordering::Less,
            (OrderKey::String(_), OrderKey::Number(_)) => Ordering::Greater,
            (OrderKey::String(a), OrderKey::String(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for OrderKey {
    fn partial_cmp(&self, other: &OrderKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for OrderKey {
    fn eq(&self, other: &OrderKey) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for OrderKey {}

/// The order key of a document field's value: a number or a string; an array by its first
/// element; `None` for null, a boolean, an object or an empty array (as for a missing
/// field), which [`earliest_first`] puts after every value.
pub fn order_key(v: &Value) -> Option<OrderKey> {
    match v {
        // Adding 0.0 turns -0.0 into 0.0, so that equal numbers have equal keys.
        Value::Number(n) => n.as_f64().map(|f| OrderKey::Number(f + 0.0)),
        Value::String(s) => Some(OrderKey::String(s.clone())),
        Value::Array(a) => a.first().and_then(order_key),
        Value::Null | Value::Bool(_) | Value::Object(_) => None,
    }
}

/// What a writer reads of an article for its group (the rules of the module docs).
impl GroupMeta {
    /// The fields a writer that reads documents back reads of each for its group, beside its
    /// text: the field groups are ordered by, and the text fields they are linked by.
    pub fn source_fields(&self) -> Vec<String> {
        let mut out: Vec<String> = self.order.field().into_iter().map(str::to_owned).collect();
        out.extend(self.link.text_fields().into_iter().flatten().cloned());
        out
    }

    /// `doc`'s order key where groups are ordered by a field ([`order_key_at`]); `None`
    /// without an order by a field, or without a value there.
    pub fn order_key(&self, doc: &Value) -> Option<OrderKey> {
        order_key_at(doc, self.order.field()?)
    }

    /// `doc`'s text fields groups are linked by, in order
    /// ([`GroupLink::Texts`](super::schema::GroupLink::Texts)); `None` where they are not
    /// linked by texts. A field holding a number or an object is an error.
    pub fn texts(&self, doc: &Value) -> Result<Option<Vec<String>>, BadTextField> {
        self.link
            .text_fields()
            .map(|fields| {
                Ok(neardup_core::input::field_texts(doc, fields)?
                    .into_iter()
                    .map(str::to_owned)
                    .collect())
            })
            .transpose()
    }
}

/// The order key of `doc`'s field `field` (a dotted path, as text fields are found;
/// [`neardup_core::input::lookup`]), `None` when it is missing or not an order value.
pub fn order_key_at(doc: &Value, field: &str) -> Option<OrderKey> {
    neardup_core::input::lookup(doc, field).and_then(order_key)
}

/// The one rule of a group order by a field: of two articles (order key, id), which comes
/// first. By key, a missing key (`None`) after every key; then by id. A group's
/// representative is its first article by this rule. A total order: equal only for equal
/// keys and equal ids.
pub fn earliest_first(
    a: (Option<&OrderKey>, &str),
    b: (Option<&OrderKey>, &str),
) -> std::cmp::Ordering {
    (a.0.is_none(), a.0, a.1).cmp(&(b.0.is_none(), b.0, b.1))
}

/// The labels of a batch of new articles (`items`: id and sketch of the tolerance's method,
/// `None` when too short), given what each is near among the stored articles (`stored`,
/// one list per item) — the rules of the module docs, the batch linked by its sketches
/// (`link_batch`). `order`: each item's order key where the index orders groups by a field
/// ([`GroupOrder::Earliest`]), so that a batch's linked set near no stored article is
/// labelled by its earliest article ([`earliest_first`]); `None` for the first-fingerprinted
/// order (labelled by its first article). Pure: the writers' searches and the property tests
/// feed it alike.
pub fn assign_labels(
    items: &[(&str, Option<&Sketch>)],
    stored: &[Vec<Linked>],
    near: &Near,
    params: Option<&MinHashParams>,
    order: Option<&[Option<OrderKey>]>,
) -> Vec<String> {
    let links = link_batch(items, near, params);
    label_linked(items, &links, stored, order)
}

/// The links within a batch of new articles by their sketches ([`link`]): `(i, j, link)`
/// with `i < j` and the link read from `i`.
pub(crate) fn link_batch(
    items: &[(&str, Option<&Sketch>)],
    near: &Near,
    params: Option<&MinHashParams>,
) -> Vec<(usize, usize, Link)> {
    let bands: Vec<Vec<u64>> = items
        .iter()
        .map(|(_, s)| s.map(|s| band_set(s, params)).unwrap_or_default())
        .collect();
    let sketches: Vec<Option<&Sketch>> = items.iter().map(|(_, s)| *s).collect();
    let band_lists: Vec<&[u64]> = bands.iter().map(Vec::as_slice).collect();
    let pairs = candidate_pairs(
        &sketches,
        &band_lists,
        params.is_some(),
        near.options.containment.is_some(),
    );
    let queries: Vec<Option<Query>> = items
        .iter()
        .map(|(_, s)| s.and_then(|s| Query::new(s.clone(), near.tolerance).ok()))
        .collect();
    pairs
        .into_iter()
        .filter_map(|(i, j)| {
            let (a, b) = (queries[i].as_ref()?, items[j].1?);
            Some((i, j, link(a, &bands[i], b, &bands[j], &near.options)?))
        })
        .collect()
}

/// The pairs `i < j` of a batch that [`link`] may link, in order: those sharing a band key
/// (found through a band map), and with partial copies asked (`relations`) those that may
/// link without one ([`may_link_without_a_band`]). Where the sketches have no bands
/// (`banded` false: SimHash), every pair.
pub(crate) fn candidate_pairs(
    sketches: &[Option<&Sketch>],
    bands: &[&[u64]],
    banded: bool,
    relations: bool,
) -> Vec<(usize, usize)> {
    let n = sketches.len();
    if !banded {
        return (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .collect();
    }
    let mut by_band: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, b) in bands.iter().enumerate() {
        for k in *b {
            by_band.entry(*k).or_default().push(i);
        }
    }
    let mut seen = HashSet::new();
    for list in by_band.values() {
        for (x, &i) in list.iter().enumerate() {
            for &j in &list[x + 1..] {
                if i != j {
                    seen.insert((i.min(j), i.max(j)));
                }
            }
        }
    }
    // With partial copies, a pair can be linked without a shared band.
    if relations {
        for (i, a) in sketches.iter().enumerate() {
            let Some(a) = a else { continue };
            for (j, b) in sketches.iter().enumerate().skip(i + 1) {
                if b.is_some_and(|b| may_link_without_a_band(a, b)) {
                    seen.insert((i, j));
                }
            }
        }
    }
    let mut pairs: Vec<(usize, usize)> = seen.into_iter().collect();
    pairs.sort_unstable();
    pairs
}

/// The labels of a batch of new articles given the links within it (`links`, from
/// [`link_batch`] or the texts) and what each is near among the stored articles: the rules
/// of the module docs ([`assign_labels`]).
pub(crate) fn label_linked(
    items: &[(&str, Option<&Sketch>)],
    links: &[(usize, usize, Link)],
    stored: &[Vec<Linked>],
    order: Option<&[Option<OrderKey>]>,
) -> Vec<String> {
    let n = items.len();
    if let Some(keys) = order {
        assert_eq!(keys.len(), n, "one order key (or None) per item");
    }
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (root(parent, a), root(parent, b));
        // The smaller index stays the root: a component's root is its first article.
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    };
    // Each part's best container in the batch ([`better_container`]): (containment,
    // container), joined after the near-duplicates, one container per part.
    let mut container: HashMap<usize, (f64, usize)> = HashMap::new();
    for (i, j, l) in links {
        let (i, j) = (*i, *j);
        let (part, whole) = match l.relation {
            None | Some(Relation::NearDuplicate) => {
                union(&mut parent, i, j);
                continue;
            }
            Some(Relation::ContainedIn) => (i, j),
            Some(Relation::Contains) => (j, i),
            // A shared passage never joins two groups.
            Some(Relation::SharesPassage) => continue,
        };
        let c = l.containment.unwrap_or(0.0);
        let e = container.entry(part).or_insert((c, whole));
        if better_container(c, items[whole].0, (e.0, items[e.1].0)) {
            *e = (c, whole);
        }
    }
    let mut parts: Vec<(usize, usize)> = container.into_iter().map(|(p, (_, w))| (p, w)).collect();
    parts.sort_unstable();
    for (part, whole) in parts {
        union(&mut parent, part, whole);
    }
    let mut best: HashMap<usize, &Linked> = HashMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        for l in &stored[i] {
            if l.id == items[i].0 || l.relation == Some(Relation::SharesPassage) {
                continue;
            }
            let better = match best.get(&r) {
                None => true,
                Some(b) => best_link_first(l, b).is_lt(),
            };
            if better {
                best.insert(r, l);
            }
        }
    }
    // A component's representative: its first article (its root), or its earliest by the
    // order.
    let mut representative: HashMap<usize, usize> = HashMap::new();
    if let Some(keys) = order {
        for i in 0..n {
            let r = root(&mut parent, i);
            let e = representative.entry(r).or_insert(i);
            let i_first = earliest_first(
                (keys[i].as_ref(), items[i].0),
                (keys[*e].as_ref(), items[*e].0),
            );
            if i_first.is_lt() {
                *e = i;
            }
        }
    }
    (0..n)
        .map(|i| {
            if items[i].1.is_none() {
                return items[i].0.to_owned();
            }
            let r = root(&mut parent, i);
            match best.get(&r) {
                Some(l) => l.label.clone(),
                None => items[representative.get(&r).copied().unwrap_or(r)]
                    .0
                    .to_owned(),
            }
        })
        .collect()
}

/// The band keys of a MinHash sketch, sorted (empty for SimHash).
pub(crate) fn band_set(s: &Sketch, params: Option<&MinHashParams>) -> Vec<u64> {
    match (s, params) {
        (Sketch::MinHash(sig), Some(p)) => {
            let mut b = sig.band_keys(p);
            b.sort_unstable();
            b.dedup();
            b
        }
        _ => Vec::new(),
    }
}

fn share_a_band(a: &[u64], b: &[u64]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// What one process labelled lately (see the module docs).
#[derive(Default)]
struct Recent {
    next: u64,
    entries: HashMap<u64, Remembered>,
    order: VecDeque<(Instant, u64)>,
    by_id: HashMap<String, u64>,
    by_band: HashMap<u64, Vec<u64>>,
}

struct Remembered {
    id: String,
    sketch: Sketch,
    bands: Vec<u64>,
    label: String,
    /// Its text fields, where groups are linked by texts.
    texts: Option<Arc<[String]>>,
}

impl Recent {
    fn forget_older_than(&mut self, cutoff: Instant) {
        while let Some(&(at, seq)) = self.order.front() {
            if at >= cutoff {
                break;
            }
            self.order.pop_front();
            self.remove(seq);
        }
    }

    fn remove(&mut self, seq: u64) {
        if let Some(e) = self.entries.remove(&seq) {
            if self.by_id.get(&e.id) == Some(&seq) {
                self.by_id.remove(&e.id);
            }
            for b in &e.bands {
                if let Some(list) = self.by_band.get_mut(b) {
                    list.retain(|&s| s != seq);
                    if list.is_empty() {
                        self.by_band.remove(b);
                    }
                }
            }
        }
    }

    fn remember(
        &mut self,
        now: Instant,
        id: &str,
        sketch: Sketch,
        bands: Vec<u64>,
        label: String,
        texts: Option<Arc<[String]>>,
    ) {
        if let Some(old) = self.by_id.remove(id) {
            self.remove(old);
        }
        let seq = self.next;
        self.next += 1;
        for b in &bands {
            self.by_band.entry(*b).or_default().push(seq);
        }
        self.by_id.insert(id.to_owned(), seq);
        self.order.push_back((now, seq));
        self.entries.insert(
            seq,
            Remembered {
                id: id.to_owned(),
                sketch,
                bands,
                label,
                texts,
            },
        );
        while self.entries.len() > MAX_REMEMBERED {
            let Some((_, oldest)) = self.order.pop_front() else {
                break;
            };
            self.remove(oldest);
        }
    }

    /// What each of a batch's `sketches` is near among the remembered articles (forgetting
    /// those remembered before `cutoff` first), with their texts where groups are linked by
    /// texts.
    fn recall(
        &mut self,
        cutoff: Instant,
        sketches: &[Option<Sketch>],
        bands: &[Vec<u64>],
        near: &Near,
    ) -> Vec<Vec<Recalled>> {
        self.forget_older_than(cutoff);
        sketches
            .iter()
            .zip(bands)
            .map(|(s, b)| match s {
                Some(s) => self
                    .near(s, b, near)
                    .into_iter()
                    .map(|l| {
                        let t = self.texts_of(&l.id);
                        (l, t)
                    })
                    .collect(),
                None => Vec::new(),
            })
            .collect()
    }

    /// Remembers a labelled batch: each item with a sketch, its bands, label and texts.
    fn remember_batch(
        &mut self,
        now: Instant,
        items: &[GroupItem<'_>],
        sketches: Vec<Option<Sketch>>,
        bands: Vec<Vec<u64>>,
        labels: &[String],
        texts: Vec<Option<Arc<[String]>>>,
    ) {
        for ((((it, s), b), label), t) in
            items.iter().zip(sketches).zip(bands).zip(labels).zip(texts)
        {
            if let Some(s) = s {
                self.remember(now, it.id, s, b, label.clone(), t);
            }
        }
    }

    /// The text fields remembered of the article `id`, where groups are linked by texts.
    fn texts_of(&self, id: &str) -> Option<Arc<[String]>> {
        self.by_id
            .get(id)
            .and_then(|seq| self.entries[seq].texts.clone())
    }

    /// The remembered articles linked to `sketch` (by the search's rule, [`link`]): those
    /// sharing a band with it, and with partial copies asked every other remembered article
    /// whose minima agree enough (a part shares no band with its article).
    fn near(&self, sketch: &Sketch, bands: &[u64], near: &Near) -> Vec<Linked> {
        let Ok(query) = Query::new(sketch.clone(), near.tolerance) else {
            return Vec::new();
        };
        let candidates: Vec<u64> = match sketch {
            Sketch::MinHash(_) => {
                let mut c: Vec<u64> = bands
                    .iter()
                    .filter_map(|b| self.by_band.get(b))
                    .flatten()
                    .copied()
                    .collect();
                if near.options.containment.is_some() {
                    c.extend(
                        self.entries
                            .iter()
                            .filter(|(_, e)| may_link_without_a_band(sketch, &e.sketch))
                            .map(|(&seq, _)| seq),
                    );
                }
                c.sort_unstable();
                c.dedup();
                c
            }
            _ => self.entries.keys().copied().collect(),
        };
        candidates
            .into_iter()
            .filter_map(|seq| {
                let e = &self.entries[&seq];
                link(&query, bands, &e.sketch, &e.bands, &near.options).map(|l| Linked {
                    id: e.id.clone(),
                    label: e.label.clone(),
                    score: l.score,
                    relation: l.relation,
                    containment: l.containment,
                })
            })
            .collect()
    }
}

/// An article about to be written, as a writer gives it to be labelled
/// ([`super::EsIndexer::group_labels`]).
#[derive(Clone, Copy, Debug)]
pub struct GroupItem<'a> {
    pub id: &'a str,
    pub sketches: &'a Sketches,
    /// Its order key, where the index orders groups by a field ([`GroupOrder::Earliest`]).
    pub order: Option<&'a OrderKey>,
    /// Its text fields the groups read, in order, where they are linked by texts
    /// ([`GroupLink::Texts`](super::schema::GroupLink::Texts); [`super::EsIndexer::group_texts`]).
    pub texts: Option<&'a [String]>,
}

/// Labels articles with their duplicate group for one index (see the module docs); one per
/// [`super::EsIndexer`], shared by its clones.
pub(crate) struct Grouper {
    group: GroupMeta,
    client: Elasticsearch,
    retry: RetryPolicy,
    similar: Similar,
    recent: Mutex<Recent>,
    /// Held from reading the memory to remembering, where groups are linked by texts (the
    /// texts are judged in between, off the async runtime, with the memory unlocked).
    labelling: tokio::sync::Mutex<()>,
    horizon: tokio::sync::OnceCell<Duration>,
}

impl std::fmt::Debug for Grouper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grouper")
            .field("group", &self.group)
            .finish()
    }
}

impl Grouper {
    pub(crate) fn new(
        group: GroupMeta,
        client: Elasticsearch,
        retry: RetryPolicy,
        fp: Fingerprinter,
    ) -> Grouper {
        let mut options = SimilarOptions::default();
        if let Some(fields) = group.link.text_fields() {
            options.text_fields = fields.to_vec();
        }
        Grouper {
            group,
            similar: Similar::with_options(client.clone(), fp, options, retry.clone()),
            client,
            retry,
            recent: Mutex::new(Recent::default()),
            labelling: tokio::sync::Mutex::new(()),
            horizon: tokio::sync::OnceCell::new(),
        }
    }

    pub(crate) fn field(&self) -> &str {
        &self.group.field
    }

    /// The group labels of `items` to be written into `index`: searched, linked with the
    /// remembered and with each other (by their sketches, or their texts where the index
    /// links groups by texts), then remembered.
    pub(crate) async fn labels(
        &self,
        index: &str,
        meta: &IndexMeta,
        items: &[GroupItem<'_>],
        refresh_interval: impl std::future::Future<Output = Result<Option<Duration>, EsError>>,
    ) -> Result<Vec<String>, EsError> {
        let horizon = *self
            .horizon
            .get_or_try_init(|| async {
                Ok::<_, EsError>(match refresh_interval.await? {
                    Some(i) => MIN_HORIZON.max(i * 3),
                    None => HORIZON_WITHOUT_REFRESH,
                })
            })
            .await?;
        self.labels_remembering(index, meta, items, horizon).await
    }

    /// [`Grouper::labels`], remembering for `horizon`. Boxed, so that its body is compiled
    /// once, not in every codegen unit that awaits a write (about 100 KB of the binary).
    fn labels_remembering<'a>(
        &'a self,
        index: &'a str,
        meta: &'a IndexMeta,
        items: &'a [GroupItem<'a>],
        horizon: Duration,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<String>, EsError>> {
        Box::pin(async move {
            let method = meta.default_method();
            let by_texts = self.group.link.text_fields();
            // Where texts decide, MinHash finds the candidates an aligned lookup judges.
            let near = match by_texts {
                None => group_near(meta),
                Some(_) => crate::similar::aligned_candidates(),
            };
            let params = meta.minhash.as_ref().map(|m| m.params);
            let params = params
                .as_ref()
                .filter(|_| method == neardup_core::Method::MinHash);
            let sketches: Vec<Option<Sketch>> = items
                .iter()
                .map(|it| it.sketches.clone().into_sketch(method).ok())
                .collect();
            let texts: Vec<Option<Arc<[String]>>> = match by_texts {
                None => vec![None; items.len()],
                Some(fields) => items
                    .iter()
                    .zip(&sketches)
                    .map(|(it, s)| match (it.texts, s) {
                        (Some(t), _) => Ok(Some(Arc::from(t))),
                        (None, None) => Ok(None),
                        (None, Some(_)) => Err(without_texts(index, it.id, fields)),
                    })
                    .collect::<Result<_, _>>()?,
            };
            let keep: &[String] = by_texts.unwrap_or(&[]);
            let searched = futures_util::stream::iter(sketches.iter().flatten().cloned())
                .map(|q| {
                    self.similar
                        .by_fingerprint_keeping(index.into(), q, near, keep)
                })
                .buffered(SEARCHES_IN_FLIGHT)
                .collect::<Vec<_>>()
                .await;
            let mut found: Vec<Vec<super::Match>> = Vec::with_capacity(items.len());
            let mut sources = Sources::new();
            let mut searched = searched.into_iter();
            for s in &sketches {
                found.push(match s {
                    Some(_) => {
                        let (s, kept) = searched.next().expect("one search per sketch")?;
                        sources.extend(kept);
                        s.matches
                    }
                    None => Vec::new(),
                });
            }
            let labels = self.stored_labels(&found).await?;
            let stored: Vec<Vec<Linked>> = found
                .iter()
                .map(|ms| {
                    ms.iter()
                        .map(|m| Linked {
                            label: labels
                                .get(&(m.index.clone().unwrap_or_default(), m.id.clone()))
                                .cloned()
                                .unwrap_or_else(|| m.id.clone()),
                            id: m.id.clone(),
                            score: m.score,
                            relation: m.relation,
                            containment: m.containment,
                        })
                        .collect()
                })
                .collect();
            let bands: Vec<Vec<u64>> = sketches
                .iter()
                .map(|s| s.as_ref().map(|s| band_set(s, params)).unwrap_or_default())
                .collect();
            let refs: Vec<(&str, Option<&Sketch>)> = items
                .iter()
                .zip(&sketches)
                .map(|(it, s)| (it.id, s.as_ref()))
                .collect();
            let keys: Option<Vec<Option<OrderKey>>> = match self.group.order {
                GroupOrder::Fingerprinted => None,
                GroupOrder::Earliest { .. } => {
                    Some(items.iter().map(|it| it.order.cloned()).collect())
                }
            };
            let links = link_batch(&refs, &near, params);
            let now = Instant::now();
            let cutoff = now.checked_sub(horizon).unwrap_or(now);
            let out = match by_texts {
                // Under one lock from reading the memory to remembering: of two batches of one
                // process, the second sees the first.
                None => {
                    let mut recent = self.recent.lock().expect("group memory lock");
                    let recalled = recent.recall(cutoff, &sketches, &bands, &near);
                    let recalled_ids = ids_of(&recalled);
                    let recalled = recalled
                        .into_iter()
                        .map(|r| r.into_iter().map(|(l, _)| l).collect())
                        .collect();
                    let out =
                        label_with_recalled(&refs, &links, stored, recalled, &recalled_ids, keys);
                    recent.remember_batch(now, items, sketches, bands, &out, texts);
                    out
                }
                // The texts are judged off the async runtime, so the memory cannot stay locked
                // meanwhile: the batches of one process are labelled one at a time instead.
                Some(_) => {
                    let _labelling = self.labelling.lock().await;
                    let recalled = self
                        .recent
                        .lock()
                        .expect("group memory lock")
                        .recall(cutoff, &sketches, &bands, &near);
                    let recalled_ids = ids_of(&recalled);
                    let aligner = self
                        .similar
                        .aligner(&index.into(), AlignRule::DEFAULT)
                        .await?;
                    let item_texts = texts.clone();
                    let found: Vec<Vec<(String, String)>> = found
                        .iter()
                        .map(|ms| {
                            ms.iter()
                                .map(|m| (m.index.clone().unwrap_or_default(), m.id.clone()))
                                .collect()
                        })
                        .collect();
                    let (stored, recalled, links) = tokio::task::spawn_blocking(move || {
                        judge_by_texts(
                            &aligner,
                            &item_texts,
                            stored,
                            &found,
                            &sources,
                            recalled,
                            links,
                        )
                    })
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                    let out =
                        label_with_recalled(&refs, &links, stored, recalled, &recalled_ids, keys);
                    self.recent
                        .lock()
                        .expect("group memory lock")
                        .remember_batch(now, items, sketches, bands, &out, texts);
                    out
                }
            };
            Ok(out)
        })
    }

    /// For articles a dedupe write at `near` found linked to nothing (no near-duplicate, no
    /// partial copy either way, stored or earlier in the batch): their own ids, when `near`
    /// is what groups link ([`group_near`]; then remembered like any label); else `None`
    /// (and always where groups are linked by texts, which a dedupe write's search does not
    /// judge).
    pub(crate) fn own_labels(
        &self,
        meta: &IndexMeta,
        items: &[(&str, &Sketches)],
        near: Near,
    ) -> Option<Vec<String>> {
        let method = meta.default_method();
        if near != group_near(meta) || self.group.link.text_fields().is_some() {
            return None;
        }
        let params = meta.minhash.as_ref().map(|m| m.params);
        let params = params
            .as_ref()
            .filter(|_| method == neardup_core::Method::MinHash);
        let now = Instant::now();
        let mut recent = self.recent.lock().expect("group memory lock");
        if let Some(h) = self.horizon.get() {
            recent.forget_older_than(now.checked_sub(*h).unwrap_or(now));
        }
        for (id, sketches) in items {
            if let Ok(s) = (*sketches).clone().into_sketch(method) {
                let bands = band_set(&s, params);
                recent.remember(now, id, s, bands, (*id).to_owned(), None);
            }
        }
        Some(items.iter().map(|(id, _)| (*id).to_owned()).collect())
    }

    /// The group labels of the matched stored articles, read by id (realtime), keyed by
    /// (index, id); an article without a label is absent (its own id is its label).
    async fn stored_labels(
        &self,
        found: &[Vec<super::Match>],
    ) -> Result<HashMap<(String, String), String>, EsError> {
        let mut docs: Vec<Value> = Vec::new();
        let mut seen = HashSet::new();
        for m in found.iter().flatten() {
            let key = (m.index.clone().unwrap_or_default(), m.id.clone());
            if seen.insert(key.clone()) {
                docs.push(json!({ "_index": key.0, "_id": key.1 }));
            }
        }
        let mut out = HashMap::new();
        if docs.is_empty() {
            return Ok(out);
        }
        let r = mget(
            &self.client,
            &self.retry,
            &format!("read the groups of {} near articles", docs.len()),
            "/_mget",
            &[("_source_includes", self.group.field.as_str())],
            Some(&Body::Json(json!({ "docs": docs }))),
        )
        .await?;
        for doc in r["docs"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            if let (Some(index), Some(id), Some(label)) = (
                doc["_index"].as_str(),
                doc["_id"].as_str(),
                doc["_source"][&self.group.field].as_str(),
            ) {
                out.insert((index.to_owned(), id.to_owned()), label.to_owned());
            }
        }
        Ok(out)
    }
}

/// The links of a batch whose groups are linked by texts, judged by the rule on the aligned
/// texts ([`Aligner`]): each article's stored matches (their texts as the search kept them,
/// `sources`, by `found`'s (index, id)), the remembered articles it is near (`recalled`,
/// with their texts) and the batch's links by sketches (`links`). What the rule relates
/// stays, with its relation and the copied share of the part ([`aligned_link`]); the rest,
/// and whatever has no texts to align, goes. CPU work, for the blocking pool.
fn judge_by_texts(
    aligner: &Aligner,
    texts: &[Option<Arc<[String]>>],
    stored: Vec<Vec<Linked>>,
    found: &[Vec<(String, String)>],
    sources: &Sources,
    recalled: Vec<Vec<Recalled>>,
    links: Vec<(usize, usize, Link)>,
) -> Judged {
    let marked: Vec<Option<Marked>> = texts
        .iter()
        .map(|t| t.as_ref().map(|t| aligner.texts(t)))
        .collect();
    // A stored article's text is prepared once, however many of the batch it is near; one
    // whose text fields are not text is left out (each time it is met).
    let mut batch = BatchTexts::new(aligner, marked, sources);
    let judged_stored = stored
        .into_iter()
        .zip(found)
        .enumerate()
        .map(|(i, (list, keys))| {
            list.into_iter()
                .zip(keys)
                .filter_map(|(l, key)| {
                    let r = batch.relate_stored(i, key).ok().flatten()?;
                    Some(aligned_link(l, r))
                })
                .collect()
        })
        .collect();
    // So is a remembered article's.
    let mut recalled_marked: HashMap<String, Marked> = HashMap::new();
    let judged_recalled = recalled
        .into_iter()
        .enumerate()
        .map(|(i, recalled)| {
            let Some(q) = batch.article(i) else {
                return Vec::new();
            };
            recalled
                .into_iter()
                .filter_map(|(l, t)| {
                    let t = t?;
                    let other = recalled_marked
                        .entry(l.id.clone())
                        .or_insert_with(|| aligner.texts(&t));
                    Some(aligned_link(l, aligner.relate(q, other)?))
                })
                .collect()
        })
        .collect();
    let links = links
        .into_iter()
        .filter_map(|(i, j, l)| {
            let (t, _) = batch.relate_in_batch(i, j)?;
            Some((
                i,
                j,
                Link {
                    score: l.score,
                    relation: Some(t.relation),
                    containment: Some(part_copied(&t)),
                },
            ))
        })
        .collect();
    (judged_stored, judged_recalled, links)
}

/// An article given to be labelled without the texts its index's groups are linked by.
fn without_texts(index: &str, id: &str, fields: &[String]) -> EsError {
    EsError::Config(format!(
        "index `{index}` links duplicate groups by texts, and the article `{id}` came without its text fields ({}): a writer reads them with the article (EsIndexer::group_texts)",
        fields.join(", ")
    ))
}

/// The ids of what each article of a batch recalled.
fn ids_of(recalled: &[Vec<Recalled>]) -> Vec<HashSet<String>> {
    recalled
        .iter()
        .map(|r| r.iter().map(|(l, _)| l.id.clone()).collect())
        .collect()
}

/// [`label_linked`] with what each article is near among the remembered (`recalled`, of
/// `recalled_ids` before judging): what this process labelled lately is newer than what a
/// search returned, so it replaces the search's answer for the same article.
fn label_with_recalled(
    refs: &[(&str, Option<&Sketch>)],
    links: &[(usize, usize, Link)],
    mut stored: Vec<Vec<Linked>>,
    recalled: Vec<Vec<Linked>>,
    recalled_ids: &[HashSet<String>],
    keys: Option<Vec<Option<OrderKey>>>,
) -> Vec<String> {
    for ((stored, recalled), ids) in stored.iter_mut().zip(recalled).zip(recalled_ids) {
        stored.retain(|l| !ids.contains(&l.id));
        stored.extend(recalled);
    }
    label_linked(refs, links, &stored, keys.as_deref())
}

/// A remembered article a new one is near, with its texts where groups are linked by texts.
type Recalled = (Linked, Option<Arc<[String]>>);

/// What [`judge_by_texts`] keeps: the stored links, the remembered ones, the batch's.
type Judged = (
    Vec<Vec<Linked>>,
    Vec<Vec<Linked>>,
    Vec<(usize, usize, Link)>,
);

/// `l` as the rule on the aligned texts answers it (`relate`'s answer): its relation and
/// the copied share of the part.
fn aligned_link(l: Linked, (t, _): (TextMatch, Shared)) -> Linked {
    Linked {
        relation: Some(t.relation),
        containment: Some(part_copied(&t)),
        ..l
    }
}

/// The share of the part in runs copied from the other text (of the smaller share where
/// neither is a part): what [`best_link_first`] and [`better_container`] rank containers by.
fn part_copied(t: &TextMatch) -> f64 {
    match t.relation {
        Relation::ContainedIn => t.a_copied,
        Relation::Contains => t.b_copied,
        Relation::NearDuplicate | Relation::SharesPassage => t.a_copied.min(t.b_copied),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use neardup_core::SimHash;

    fn sim(bits: u64) -> Sketch {
        Sketch::SimHash(SimHash(bits))
    }

    fn linked(id: &str, label: &str, d: u32) -> Linked {
        Linked {
            id: id.into(),
            label: label.into(),
            score: Score::Distance(d),
            relation: None,
            containment: None,
        }
    }

    #[test]
    fn a_batch_of_copies_is_one_group_labelled_by_its_first() {
        let (a, b, c) = (sim(0), sim(1), sim(u64::MAX));
        let items = [
            ("x", Some(&a)),
            ("y", Some(&b)),
            ("z", Some(&c)),
            ("w", None),
        ];
        let got = assign_labels(
            &items,
            &[vec![], vec![], vec![], vec![]],
            &Near::from(3),
            None,
            None,
        );
        assert_eq!(got, ["x", "x", "z", "w"]);
    }

    #[test]
    fn links_close_transitively_and_take_the_nearest_stored_group() {
        // a–b–c chain (each step 3 bits, a to c 6): one group; b is near stored s (label
        // g1) at 2 and c near stored t (label g0) at 1: the nearest wins.
        let (a, b, c) = (sim(0), sim(0b111), sim(0b111_111));
        let items = [("a", Some(&a)), ("b", Some(&b)), ("c", Some(&c))];
        let stored = [
            vec![],
            vec![linked("s", "g1", 2)],
            vec![linked("t", "g0", 1), linked("c", "c", 0)],
        ];
        let got = assign_labels(&items, &stored, &Near::from(3), None, None);
        assert_eq!(got, ["g0", "g0", "g0"]);
    }

    #[test]
    fn ties_go_to_the_smaller_label_and_an_article_is_not_its_own_link() {
        let a = sim(0);
        let items = [("a", Some(&a))];
        let stored = [vec![
            linked("a", "a", 0),
            linked("s", "zz", 1),
            linked("t", "mm", 1),
        ]];
        assert_eq!(
            assign_labels(&items, &stored, &Near::from(3), None, None),
            ["mm"]
        );
    }

    fn num(n: f64) -> Option<OrderKey> {
        Some(OrderKey::Number(n))
    }

    fn text(s: &str) -> Option<OrderKey> {
        Some(OrderKey::String(s.into()))
    }

    #[test]
    fn a_batch_near_nothing_stored_is_labelled_by_its_earliest() {
        // x, y, v copies (one component), z apart, w too short.
        let (a, b, c, d) = (sim(0), sim(1), sim(u64::MAX), sim(3));
        let items = [
            ("x", Some(&a)),
            ("y", Some(&b)),
            ("z", Some(&c)),
            ("w", None),
            ("v", Some(&d)),
        ];
        let stored = vec![Vec::new(); items.len()];
        let label = |keys: &[Option<OrderKey>]| {
            assign_labels(&items, &stored, &Near::from(3), None, Some(keys))
        };
        // The earliest date labels the component, whatever its place in the batch.
        let keys = [
            text("2024-05-02T08:00:00Z"),
            text("2024-05-01T09:30:00Z"),
            text("2023-01-01"),
            text("2000-01-01"),
            text("2024-05-01T10:00:00Z"),
        ];
        assert_eq!(label(&keys), ["y", "y", "z", "w", "y"]);
        // A missing value comes after every value; numbers before strings.
        assert_eq!(
            label(&[None, text("2024"), None, None, num(1e12)]),
            ["v", "v", "z", "w", "v"]
        );
        // Equal keys, or none at all: the smaller id.
        assert_eq!(
            label(&[num(5.0), num(5.0), None, None, num(5.0)]),
            ["v", "v", "z", "w", "v"]
        );
        assert_eq!(
            label(&[None, None, None, None, None]),
            ["v", "v", "z", "w", "v"]
        );
        // The first-fingerprinted order is the first article, unchanged.
        assert_eq!(
            assign_labels(&items, &stored, &Near::from(3), None, None),
            ["x", "x", "z", "w", "x"]
        );
    }

    #[test]
    fn an_earlier_article_joins_a_stored_group_under_its_label() {
        // A write never relabels others: near a stored group, the group's label wins over
        // the batch's earliest.
        let (a, b) = (sim(0), sim(1));
        let items = [("old-copy", Some(&a)), ("new", Some(&b))];
        let stored = [vec![linked("s", "rep", 1)], vec![]];
        let keys = [text("1999-01-01"), text("2024-01-01")];
        assert_eq!(
            assign_labels(&items, &stored, &Near::from(3), None, Some(&keys)),
            ["rep", "rep"]
        );
    }

    #[test]
    fn order_keys_of_json_values() {
        use serde_json::json;
        assert_eq!(order_key(&json!(3)), num(3.0));
        assert_eq!(order_key(&json!(-0.0)), num(0.0));
        assert_eq!(order_key(&json!("2024-05-01")), text("2024-05-01"));
        assert_eq!(order_key(&json!(["2024-05-01", 3])), text("2024-05-01"));
        for none in [json!(null), json!(true), json!({"a": 1}), json!([])] {
            assert_eq!(order_key(&none), None, "{none}");
        }
        let doc = json!({ "meta": { "published": 1714550400000u64 }, "publishDate": "2024-05-01" });
        assert_eq!(order_key_at(&doc, "meta.published"), num(1714550400000.0));
        assert_eq!(order_key_at(&doc, "publishDate"), text("2024-05-01"));
        assert_eq!(order_key_at(&doc, "updated"), None);
        // Numbers compare as numbers, strings as strings, numbers first.
        assert!(num(9.0) < num(10.0));
        assert!(text("10") < text("9"));
        assert!(num(1e300) < text(""));
        assert!(text("2024-04-30T23:59:59Z") < text("2024-05-01T00:00:00Z"));
    }

    /// JSON values of every kind an order field may hold.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3i64..3).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e3f64..1e3).prop_map(Value::from),
            prop_oneof![Just(0.0f64), Just(-0.0), Just(2.0)].prop_map(Value::from),
            "[0-9a-c:-]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 6, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                inner.prop_map(|v| serde_json::json!({ "x": v })),
            ]
        })
    }

    proptest::proptest! {
        /// `earliest_first` is a total order on (key, id) consistent with equality: reflexive,
        /// antisymmetric, transitive, equal exactly for equal keys and ids; a missing key
        /// comes after every key.
        #[test]
        fn the_order_is_total_and_consistent(
            vals in proptest::collection::vec((json_value(), "[ab]{1,2}"), 2..6)
        ) {
            use std::cmp::Ordering;
            let keys: Vec<(Option<OrderKey>, &str)> =
                vals.iter().map(|(v, id)| (order_key(v), id.as_str())).collect();
            let cmp = |i: usize, j: usize| {
                earliest_first((keys[i].0.as_ref(), keys[i].1), (keys[j].0.as_ref(), keys[j].1))
            };
            for i in 0..keys.len() {
                proptest::prop_assert_eq!(cmp(i, i), Ordering::Equal);
                for j in 0..keys.len() {
                    proptest::prop_assert_eq!(cmp(i, j), cmp(j, i).reverse());
                    proptest::prop_assert_eq!(cmp(i, j).is_eq(), keys[i] == keys[j]);
                    if keys[i].0.is_some() && keys[j].0.is_none() {
                        proptest::prop_assert_eq!(cmp(i, j), Ordering::Less);
                    }
                    for k in 0..keys.len() {
                        if cmp(i, j).is_le() && cmp(j, k).is_le() {
                            proptest::prop_assert!(cmp(i, k).is_le());
                        }
                    }
                }
            }
            // The key of a value equals the key of an array starting with it.
            for (v, _) in &vals {
                proptest::prop_assert_eq!(order_key(v), order_key(&Value::from(vec![v.clone()])));
            }
        }

        /// With an order, a batch's component near nothing stored takes the id of its member
        /// with the smallest (key, id) — the same components as without one.
        #[test]
        fn batch_labels_are_the_earliest_of_each_component(
            seeds in proptest::collection::vec((0u64..4, proptest::collection::vec(0u32..64, 0..4), proptest::option::of(0i64..5)), 1..30)
        ) {
            let fps: Vec<u64> = seeds
                .iter()
                .map(|(c, flips, _)| flips.iter().fold(c.wrapping_mul(0x9E37_79B9_7F4A_7C15), |f, b| f ^ (1u64 << b)))
                .collect();
            let keys: Vec<Option<OrderKey>> =
                seeds.iter().map(|(.., k)| k.map(|k| OrderKey::Number(k as f64))).collect();
            let sketches: Vec<Sketch> = fps.iter().map(|&f| sim(f)).collect();
            let ids: Vec<String> = (0..fps.len()).map(|i| format!("d{i:02}")).collect();
            let items: Vec<(&str, Option<&Sketch>)> =
                ids.iter().map(String::as_str).zip(sketches.iter().map(Some)).collect();
            let stored = vec![Vec::new(); items.len()];
            let got = assign_labels(&items, &stored, &Near::from(3), None, Some(&keys));
            let comp = components(&fps, 3);
            for i in 0..fps.len() {
                let earliest = (0..fps.len())
                    .filter(|&j| comp[j] == comp[i])
                    .min_by(|&a, &b| earliest_first((keys[a].as_ref(), &ids[a]), (keys[b].as_ref(), &ids[b])))
                    .unwrap();
                proptest::prop_assert_eq!(&got[i], &ids[earliest]);
            }
        }
    }

    /// Brute force: the connected components of the pairs within `k`, as sets of indices.
    fn components(fps: &[u64], k: u32) -> Vec<usize> {
        let mut comp: Vec<usize> = (0..fps.len()).collect();
        loop {
            let mut changed = false;
            for i in 0..fps.len() {
                for j in 0..fps.len() {
                    if (fps[i] ^ fps[j]).count_ones() <= k && comp[j] < comp[i] {
                        comp[i] = comp[j];
                        changed = true;
                    }
                }
            }
            if !changed {
                return comp;
            }
        }
    }

    proptest::proptest! {
        /// A batch with nothing stored: articles share a label exactly when they are in one
        /// connected component of the links, and the label is the component's first id.
        #[test]
        fn batch_labels_are_the_connected_components(
            seeds in proptest::collection::vec((0u64..4, proptest::collection::vec(0u32..64, 0..4)), 1..40)
        ) {
            // Few centres, a few flipped bits each: chains and clusters within and across k.
            let fps: Vec<u64> = seeds
                .iter()
                .map(|(c, flips)| flips.iter().fold(c.wrapping_mul(0x9E37_79B9_7F4A_7C15), |f, b| f ^ (1u64 << b)))
                .collect();
            let sketches: Vec<Sketch> = fps.iter().map(|&f| sim(f)).collect();
            let ids: Vec<String> = (0..fps.len()).map(|i| format!("d{i:02}")).collect();
            let items: Vec<(&str, Option<&Sketch>)> =
                ids.iter().map(String::as_str).zip(sketches.iter().map(Some)).collect();
            let stored = vec![Vec::new(); items.len()];
            let got = assign_labels(&items, &stored, &Near::from(3), None, None);
            let comp = components(&fps, 3);
            for i in 0..fps.len() {
                proptest::prop_assert_eq!(&got[i], &ids[comp[i]]);
            }
        }
    }

    #[test]
    fn memory_links_by_the_searchs_rule_and_forgets() {
        let mut r = Recent::default();
        let t0 = Instant::now();
        r.remember(t0, "a", sim(0), vec![], "g".into(), None);
        r.remember(t0, "b", sim(u64::MAX), vec![], "b".into(), None);
        let near = r.near(&sim(1), &[], &Near::from(3));
        assert_eq!(near, vec![linked("a", "g", 1)]);
        // Remembering an id again replaces it.
        r.remember(t0, "a", sim(u64::MAX), vec![], "h".into(), None);
        assert!(r.near(&sim(1), &[], &Near::from(3)).is_empty());
        r.forget_older_than(t0 + Duration::from_secs(1));
        assert!(r.entries.is_empty() && r.by_id.is_empty() && r.order.is_empty());
    }

    fn words(range: std::ops::Range<u64>) -> Vec<u64> {
        range
            .map(|i| xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes()))
            .collect()
    }

    /// The MinHash sketch of the words numbered `range`.
    pub(crate) fn mh(range: std::ops::Range<u64>) -> Sketch {
        Sketch::MinHash(
            neardup_core::minhash::MinHasher::new(MinHashParams::DEFAULT)
                .signature_of_hashes(&[words(range)])
                .unwrap(),
        )
    }

    pub(crate) fn minhash_near(options: MatchOptions) -> Near {
        Near::new(neardup_core::minhash::Threshold::new(0.3).unwrap(), options)
    }

    #[test]
    fn a_part_and_its_article_in_one_batch_are_one_group_with_partial_copies_asked() {
        // A 1,000-word article, its 20 % lead (Jaccard ≈ 0.2: no band needed) and another.
        let (full, lead, other) = (mh(0..1000), mh(0..200), mh(5000..6000));
        let p = MinHashParams::DEFAULT;
        let items = [
            ("lead", Some(&lead)),
            ("other", Some(&other)),
            ("full", Some(&full)),
        ];
        let stored = vec![vec![]; 3];
        let with = assign_labels(
            &items,
            &stored,
            &minhash_near(MatchOptions::default()),
            Some(&p),
            None,
        );
        assert_eq!(with, ["lead", "other", "lead"]);
        let without = assign_labels(
            &items,
            &stored,
            &minhash_near(MatchOptions::NEAR_DUPLICATES_ONLY),
            Some(&p),
            None,
        );
        assert_eq!(without, ["lead", "other", "full"]);
    }

    #[test]
    fn a_part_joins_one_container_in_a_batch_not_two() {
        // A 100-word statement quoted whole by two different 400-word reports: it is
        // contained in both (each containment ≈ 1), and the reports are not related.
        let statement = mh(0..100);
        let report = |from: u64| {
            let mut w = words(0..100);
            w.extend(words(from..from + 300));
            Sketch::MinHash(
                neardup_core::minhash::MinHasher::new(MinHashParams::DEFAULT)
                    .signature_of_hashes(&[w])
                    .unwrap(),
            )
        };
        let (r1, r2) = (report(1000), report(2000));
        let p = MinHashParams::DEFAULT;
        let near = minhash_near(MatchOptions::default());
        let items = [
            ("r1", Some(&r1)),
            ("r2", Some(&r2)),
            ("statement", Some(&statement)),
        ];
        let got = assign_labels(&items, &vec![vec![]; 3], &near, Some(&p), None);
        assert_ne!(
            got[0], got[1],
            "two reports joined through a statement: {got:?}"
        );
        assert!(got[2] == got[0] || got[2] == got[1], "{got:?}");
    }

    #[test]
    fn the_best_link_is_a_near_duplicate_then_a_container_then_a_part() {
        let l = |id: &str, s: f64, relation, containment| Linked {
            id: id.into(),
            label: format!("g-{id}"),
            score: Score::Similarity(s),
            relation: Some(relation),
            containment,
        };
        let mut links = [
            l("part", 0.2, Relation::Contains, Some(0.99)),
            l("whole-a", 0.25, Relation::ContainedIn, Some(0.8)),
            l("whole-b", 0.2, Relation::ContainedIn, Some(0.9)),
            l("near", 0.31, Relation::NearDuplicate, Some(0.5)),
        ];
        links.sort_by(best_link_first);
        let ids: Vec<&str> = links.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["near", "whole-b", "whole-a", "part"]);
        // A stored teaser labels the full article written after it.
        let items = [("full", Some(&mh(0..1000)))];
        let stored = vec![vec![l("teaser", 0.2, Relation::Contains, Some(1.0))]];
        let got = assign_labels(
            &items,
            &stored,
            &minhash_near(MatchOptions::default()),
            Some(&MinHashParams::DEFAULT),
            None,
        );
        assert_eq!(got, ["g-teaser"]);
    }

    /// A link as a comparable tuple.
    type Seen = (usize, usize, Score, Option<Relation>, Option<f64>);

    fn seen(i: usize, j: usize, l: &Link) -> Seen {
        (i, j, l.score, l.relation, l.containment)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// The batch's links and the memory's, found through the band map and the minima's
        /// agreement, are exactly those of comparing every pair with [`link`]: articles cut
        /// from one stretch of words (copies, parts, overlaps) and from others.
        #[test]
        fn band_map_and_agreement_find_every_link_of_every_pair(
            spans in proptest::collection::vec((0u64..40, 1u64..40), 2..24),
            partial in proptest::bool::ANY,
        ) {
            let p = MinHashParams::DEFAULT;
            let options = if partial { MatchOptions::default() } else { MatchOptions::NEAR_DUPLICATES_ONLY };
            let near = minhash_near(options);
            let sketches: Vec<Sketch> = spans.iter().map(|&(from, len)| mh(from * 25..(from + len) * 25)).collect();
            let bands: Vec<Vec<u64>> = sketches.iter().map(|s| band_set(s, Some(&p))).collect();
            let queries: Vec<Query> = sketches.iter().map(|s| Query::new(s.clone(), near.tolerance).unwrap()).collect();
            let mut every: Vec<Seen> = Vec::new();
            for i in 0..sketches.len() {
                for j in i + 1..sketches.len() {
                    if let Some(l) = link(&queries[i], &bands[i], &sketches[j], &bands[j], &near.options) {
                        every.push(seen(i, j, &l));
                    }
                }
            }
            let ids: Vec<String> = (0..sketches.len()).map(|i| format!("d{i}")).collect();
            let items: Vec<(&str, Option<&Sketch>)> = ids.iter().map(String::as_str).zip(sketches.iter().map(Some)).collect();
            let batch: Vec<Seen> = link_batch(&items, &near, Some(&p)).iter().map(|(i, j, l)| seen(*i, *j, l)).collect();
            proptest::prop_assert_eq!(&batch, &every);
            // The memory: every earlier article remembered, each later one looked up.
            let mut r = Recent::default();
            let t0 = Instant::now();
            let mut from_memory: Vec<Seen> = Vec::new();
            for (j, s) in sketches.iter().enumerate() {
                for l in r.near(s, &bands[j], &near) {
                    let i: usize = l.id[1..].parse().unwrap();
                    // The memory reads the link from the new article (j); the pairs above
                    // read it from the earlier one (i): compare the one read from i.
                    let from_i = link(&queries[i], &bands[i], s, &bands[j], &near.options).unwrap();
                    from_memory.push(seen(i, j, &from_i));
                }
                r.remember(t0, &ids[j], s.clone(), bands[j].clone(), ids[j].clone(), None);
            }
            from_memory.sort_by_key(|a| (a.0, a.1));
            let mut every_by_pair = every.clone();
            every_by_pair.sort_by_key(|a| (a.0, a.1));
            proptest::prop_assert_eq!(from_memory, every_by_pair);
        }
    }

    #[test]
    fn memory_links_partial_copies_when_asked() {
        let mut r = Recent::default();
        let t0 = Instant::now();
        let p = MinHashParams::DEFAULT;
        let full = mh(0..1000);
        let bands = band_set(&full, Some(&p));
        r.remember(t0, "full", full, bands, "g".into(), None);
        let lead = mh(0..200);
        let lead_bands = band_set(&lead, Some(&p));
        let got = r.near(&lead, &lead_bands, &minhash_near(MatchOptions::default()));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (got[0].label.as_str(), got[0].relation),
            ("g", Some(Relation::ContainedIn))
        );
        let near_only = r.near(
            &lead,
            &lead_bands,
            &minhash_near(MatchOptions::NEAR_DUPLICATES_ONLY),
        );
        assert!(near_only.is_empty(), "{near_only:?}");
    }
}

//! The regroup's work file: an on-disk union-find over the articles of one index, in a redb
//! database (`--state`), so that memory stays flat whatever the index size: what is held in
//! memory is one page of articles and redb's page cache.
//!
//! Articles are numbered in the order they are first seen (`ids`); `nodes` keeps what the
//! walk read of each (id, the `_seq_no`/`_primary_term` that guard the label's write, its
//! label, whether it has a sketch); `parent` is the forest (an article without an entry is
//! a root); `searched` marks the articles whose links are in the forest. One page of the
//! walk — its articles, their links and their marks — is one transaction, so a run killed at
//! any moment resumes from the last page it committed.
//!
//! Choosing (after every article is linked) compresses every path, so that each article's
//! parent is its component's root, and picks each component's representative
//! ([`Rank`]); `counts` and `reps` hold the tallies, `members` (only for a dry run) lists
//! each component by root.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, ReadableTableMetadata, Table, TableDefinition};

use super::RegroupError;
use crate::group::{earliest_first, OrderKey};

const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const IDS: TableDefinition<&str, u64> = TableDefinition::new("ids");
/// An article as kept: id, `_seq_no`, `_primary_term`, label, whether it has a sketch, order
/// key ([`encode_key`]).
type NodeValue = (
    &'static str,
    u64,
    u64,
    Option<&'static str>,
    bool,
    Option<&'static str>,
);
/// num → the article
const NODES: TableDefinition<u64, NodeValue> = TableDefinition::new("nodes");
const PARENT: TableDefinition<u64, u64> = TableDefinition::new("parent");
const SEARCHED: TableDefinition<u64, ()> = TableDefinition::new("searched");
/// (root, candidate) → members of the root carrying the candidate's id as their label
const COUNTS: TableDefinition<(u64, u64), u64> = TableDefinition::new("counts");
/// root → (representative, its count)
const REPS: TableDefinition<u64, (u64, u64)> = TableDefinition::new("reps");
/// root → size
const SIZES: TableDefinition<u64, u64> = TableDefinition::new("sizes");
const MEMBERS: TableDefinition<(u64, u64), ()> = TableDefinition::new("members");

/// Where a job is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Walking the index and linking each article to what `similar` finds near it.
    Link,
    /// Every article linked; choosing each component's representative.
    Choose,
    /// Representatives chosen; writing the labels that change.
    Write,
    /// Done.
    Done,
}

impl Phase {
    /// The phase's name, as the work file records it and progress shows it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Link => "link",
            Phase::Choose => "choose",
            Phase::Write => "write",
            Phase::Done => "done",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        [Phase::Link, Phase::Choose, Phase::Write, Phase::Done]
            .into_iter()
            .find(|p| p.name() == s)
    }
}

/// One article as the walk read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: String,
    pub seq_no: u64,
    pub primary_term: u64,
    pub label: Option<String>,
    pub has_sketch: bool,
    /// Its value of the group order's field, where the groups are ordered by one.
    pub order: Option<OrderKey>,
}

/// An order key as stored: `n` and the bits of the number in hex, or `s` and the string.
fn encode_key(k: &OrderKey) -> String {
    match k {
        OrderKey::Number(f) => format!("n{:016x}", f.to_bits()),
        OrderKey::String(s) => format!("s{s}"),
    }
}

fn decode_key(s: &str) -> Option<OrderKey> {
    match s.split_at_checked(1)? {
        ("n", bits) => u64::from_str_radix(bits, 16)
            .ok()
            .map(|b| OrderKey::Number(f64::from_bits(b))),
        ("s", s) => Some(OrderKey::String(s.to_owned())),
        _ => None,
    }
}

/// A label to write: the article's id, its guard and the label it should carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub num: u64,
    pub id: String,
    pub seq_no: u64,
    pub primary_term: u64,
    pub label: String,
}

/// A component of two or more articles (dry run).
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    pub representative: String,
    pub members: Vec<String>,
}

/// Sizes of the components, after choosing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Articles read (with or without a sketch).
    pub articles: u64,
    /// Components of articles with a sketch.
    pub groups: u64,
    /// Of those, with two or more articles.
    pub shared: u64,
    /// Articles in the largest component.
    pub largest: u64,
}

/// Which member of a component represents it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rank {
    /// The first fingerprinted order: the member whose id most members already carry as their
    /// label (so that the fewest labels change; a group written by the rules of
    /// [`crate::group`] is labelled with its first fingerprinted member), ties to the
    /// smaller id. Every member is a candidate with no votes.
    MostCarried,
    /// An order by a field: the earliest member by [`earliest_first`].
    Earliest,
}

pub struct Forest {
    db: Database,
    path: PathBuf,
}

type Result<T> = std::result::Result<T, RegroupError>;

fn db_err(path: &Path) -> impl Fn(redb::Error) -> RegroupError + '_ {
    move |e| RegroupError::State {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

macro_rules! st {
    ($self:ident, $e:expr) => {
        $e.map_err(|e| $self.err(e.into()))
    };
}

fn find(parent: &mut Table<u64, u64>, n: u64) -> std::result::Result<u64, redb::StorageError> {
    let mut path = Vec::new();
    let mut x = n;
    loop {
        let p = parent.get(x)?.map(|p| p.value());
        match p {
            Some(p) if p != x => {
                path.push(x);
                x = p;
            }
            _ => break,
        }
    }
    // The last step already points at the root.
    path.pop();
    for p in path {
        parent.insert(p, x)?;
    }
    Ok(x)
}

impl Forest {
    /// Opens (or creates) the work file at `path` for the job `key`. A file of another job is
    /// [`RegroupError::OtherJob`] unless `restart`, which discards it; a finished job's file
    /// starts over. `cache` bounds redb's page cache (bytes).
    pub fn open(path: &Path, key: &str, restart: bool, cache: usize) -> Result<Forest> {
        let open = || {
            Database::builder()
                .set_cache_size(cache)
                .create(path)
                .map_err(|e| match e {
                    redb::DatabaseError::DatabaseAlreadyOpen => RegroupError::StateInUse {
                        path: path.to_owned(),
                    },
                    e => db_err(path)(e.into()),
                })
        };
        let mut db = open()?;
        let (old_key, phase) = {
            let f = Forest {
                db,
                path: path.to_owned(),
            };
            let r = (f.meta("job")?, f.phase()?);
            db = f.db;
            r
        };
        let other = old_key.as_deref().is_some_and(|k| k != key);
        if other && !restart {
            return Err(RegroupError::OtherJob {
                path: path.to_owned(),
                recorded: old_key.unwrap_or_default(),
            });
        }
        if other || restart || phase == Phase::Done {
            drop(db);
            std::fs::remove_file(path).map_err(|e| RegroupError::State {
                path: path.to_owned(),
                detail: e.to_string(),
            })?;
            db = open()?;
        }
        let f = Forest {
            db,
            path: path.to_owned(),
        };
        if f.meta("job")?.is_none() {
            let tx = st!(f, f.db.begin_write())?;
            {
                let mut m = st!(f, tx.open_table(META))?;
                st!(f, m.insert("job", key))?;
                st!(f, m.insert("phase", Phase::Link.name()))?;
            }
            st!(f, tx.commit())?;
        }
        Ok(f)
    }

    fn err(&self, e: redb::Error) -> RegroupError {
        db_err(&self.path)(e)
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        let tx = st!(self, self.db.begin_read())?;
        let t = match tx.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.err(e.into())),
        };
        Ok(st!(self, t.get(key))?.map(|v| v.value().to_owned()))
    }

    fn counter(&self, key: &str) -> Result<u64> {
        let tx = st!(self, self.db.begin_read())?;
        let t = match tx.open_table(COUNTERS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(self.err(e.into())),
        };
        Ok(st!(self, t.get(key))?.map_or(0, |v| v.value()))
    }

    /// Where the job is.
    pub fn phase(&self) -> Result<Phase> {
        Ok(self
            .meta("phase")?
            .and_then(|p| Phase::parse(&p))
            .unwrap_or(Phase::Link))
    }

    /// Moves the job on to `phase`.
    pub fn set_phase(&self, phase: Phase) -> Result<()> {
        let tx = st!(self, self.db.begin_write())?;
        {
            let mut m = st!(self, tx.open_table(META))?;
            st!(self, m.insert("phase", phase.name()))?;
        }
        st!(self, tx.commit())
    }

    /// Articles whose links are in the forest.
    pub fn linked(&self) -> Result<u64> {
        let tx = st!(self, self.db.begin_read())?;
        match tx.open_table(SEARCHED) {
            Ok(t) => st!(self, t.len()),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(self.err(e.into())),
        }
    }

    /// For each id, whether its links are still to be found.
    pub fn unsearched(&self, ids: &[&str]) -> Result<Vec<bool>> {
        let tx = st!(self, self.db.begin_read())?;
        let (Ok(nums), Ok(searched)) = (tx.open_table(IDS), tx.open_table(SEARCHED)) else {
            return Ok(vec![true; ids.len()]);
        };
        ids.iter()
            .map(|id| {
                Ok(match st!(self, nums.get(*id))? {
                    Some(n) => st!(self, searched.get(n.value()))?.is_none(),
                    None => true,
                })
            })
            .collect()
    }

    /// One page of the walk, in one transaction: the articles read, and for those searched
    /// (`links`: an article's id and the ids `similar` found near it), their links, after
    /// which they count as searched.
    pub fn record_page(&self, nodes: &[Node], links: &[(String, Vec<String>)]) -> Result<()> {
        self.record(nodes, links).map(drop)
    }

    /// The articles a walk read, numbered (a join's walk: their links come later, by
    /// [`Forest::record_page`] without nodes). Their numbers, in order.
    pub fn record_nodes(&self, nodes: &[Node]) -> Result<Vec<u64>> {
        self.record(nodes, &[])
    }

    /// [`Forest::record_page`], answering the numbers of `nodes`.
    fn record(&self, nodes: &[Node], links: &[(String, Vec<String>)]) -> Result<Vec<u64>> {
        let mut numbers = Vec::with_capacity(nodes.len());
        let tx = st!(self, self.db.begin_write())?;
        {
            let mut counters = st!(self, tx.open_table(COUNTERS))?;
            let mut next = st!(self, counters.get("next"))?.map_or(0, |v| v.value());
            let mut ids = st!(self, tx.open_table(IDS))?;
            let mut num = |ids: &mut Table<&str, u64>, id: &str| -> Result<u64> {
                if let Some(n) = st!(self, ids.get(id))? {
                    return Ok(n.value());
                }
                let n = next;
                next += 1;
                st!(self, ids.insert(id, n))?;
                Ok(n)
            };
            let mut table = st!(self, tx.open_table(NODES))?;
            for n in nodes {
                let k = num(&mut ids, &n.id)?;
                numbers.push(k);
                st!(
                    self,
                    table.insert(
                        k,
                        (
                            n.id.as_str(),
                            n.seq_no,
                            n.primary_term,
                            n.label.as_deref(),
                            n.has_sketch,
                            n.order.as_ref().map(encode_key).as_deref()
                        )
                    )
                )?;
            }
            let mut parent = st!(self, tx.open_table(PARENT))?;
            let mut searched = st!(self, tx.open_table(SEARCHED))?;
            for (id, near) in links {
                let a = num(&mut ids, id)?;
                for other in near {
                    let b = num(&mut ids, other)?;
                    let (ra, rb) = (
                        st!(self, find(&mut parent, a))?,
                        st!(self, find(&mut parent, b))?,
                    );
                    if ra != rb {
                        st!(self, parent.insert(ra.max(rb), ra.min(rb)))?;
                    }
                }
                st!(self, searched.insert(a, ()))?;
            }
            st!(self, counters.insert("next", next))?;
        }
        st!(self, tx.commit())?;
        Ok(numbers)
    }

    /// The ids of articles by number, and whether their links are in the forest.
    pub fn articles(&self, nums: &[u64]) -> Result<Vec<(String, bool)>> {
        let tx = st!(self, self.db.begin_read())?;
        let nodes = st!(self, tx.open_table(NODES))?;
        let searched = match tx.open_table(SEARCHED) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.err(e.into())),
        };
        nums.iter()
            .map(|&n| {
                let id = st!(self, nodes.get(n))?
                    .map(|v| v.value().0.to_owned())
                    .ok_or_else(|| RegroupError::State {
                        path: self.path.clone(),
                        detail: format!("article {n} of the join is not in the work file"),
                    })?;
                let done = match &searched {
                    Some(t) => st!(self, t.get(n))?.is_some(),
                    None => false,
                };
                Ok((id, done))
            })
            .collect()
    }

    /// Whether a join's walk has read the whole index into its files.
    pub fn join_walked(&self) -> Result<bool> {
        Ok(self.meta("join")?.as_deref() == Some("walked"))
    }

    /// Records that a join's walk read the whole index (`true`), or that it starts over.
    pub fn set_join_walked(&self, walked: bool) -> Result<()> {
        let tx = st!(self, self.db.begin_write())?;
        {
            let mut m = st!(self, tx.open_table(META))?;
            st!(
                self,
                m.insert("join", if walked { "walked" } else { "walking" })
            )?;
        }
        st!(self, tx.commit())
    }

    /// Chooses every component's representative by `rank`, `chunk` articles a transaction
    /// (resumable: a killed run goes on after the last chunk committed). `members`: also list
    /// each component (for a dry run). `progress` gets the articles done so far.
    pub fn choose(
        &self,
        rank: Rank,
        chunk: usize,
        members: bool,
        mut progress: impl FnMut(u64),
    ) -> Result<()> {
        let mut from = self.counter("chosen")?;
        loop {
            let tx = st!(self, self.db.begin_write())?;
            let done;
            {
                let nodes = st!(self, tx.open_table(NODES))?;
                let batch: Vec<(u64, Option<String>, bool)> = st!(self, nodes.range(from..))?
                    .take(chunk)
                    .map(|r| {
                        r.map(|(k, v)| {
                            let v = v.value();
                            (k.value(), v.3.map(str::to_owned), v.4)
                        })
                    })
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| self.err(e.into()))?;
                done = batch.len() < chunk;
                let ids = st!(self, tx.open_table(IDS))?;
                let mut parent = st!(self, tx.open_table(PARENT))?;
                let mut counts = st!(self, tx.open_table(COUNTS))?;
                let mut reps = st!(self, tx.open_table(REPS))?;
                let mut sizes = st!(self, tx.open_table(SIZES))?;
                let mut listed = st!(self, tx.open_table(MEMBERS))?;
                let id_of = |n: u64| -> Result<String> {
                    Ok(st!(self, nodes.get(n))?
                        .map(|v| v.value().0.to_owned())
                        .unwrap_or_default())
                };
                let key_of = |n: u64| -> Result<(Option<OrderKey>, String)> {
                    Ok(st!(self, nodes.get(n))?
                        .map(|v| {
                            let v = v.value();
                            (v.5.and_then(decode_key), v.0.to_owned())
                        })
                        .unwrap_or_default())
                };
                for (n, label, has_sketch) in &batch {
                    from = n + 1;
                    if !has_sketch {
                        continue;
                    }
                    let r = st!(self, find(&mut parent, *n))?;
                    if r != *n {
                        // Full compression: every article's parent is its root from now on.
                        st!(self, parent.insert(*n, r))?;
                    }
                    let size = st!(self, sizes.get(r))?.map_or(0, |v| v.value()) + 1;
                    st!(self, sizes.insert(r, size))?;
                    if members {
                        st!(self, listed.insert((r, *n), ()))?;
                    }
                    let mut candidates = vec![(*n, 0)];
                    if let (Rank::MostCarried, Some(label)) = (rank, label) {
                        if let Some(m) = st!(self, ids.get(label.as_str()))?.map(|v| v.value()) {
                            let m_sketch = st!(self, nodes.get(m))?.is_some_and(|v| v.value().4);
                            if m_sketch && st!(self, find(&mut parent, m))? == r {
                                let c = st!(self, counts.get((r, m)))?.map_or(0, |v| v.value()) + 1;
                                st!(self, counts.insert((r, m), c))?;
                                candidates.push((m, c));
                            }
                        }
                    }
                    for (cand, votes) in candidates {
                        let better = match st!(self, reps.get(r))?.map(|v| v.value()) {
                            None => true,
                            Some((best, _)) if rank == Rank::Earliest => {
                                let (a, b) = (key_of(cand)?, key_of(best)?);
                                earliest_first((a.0.as_ref(), &a.1), (b.0.as_ref(), &b.1)).is_lt()
                            }
                            Some((best, best_votes)) => {
                                votes > best_votes
                                    || (votes == best_votes
                                        && cand != best
                                        && id_of(cand)? < id_of(best)?)
                            }
                        };
                        if better {
                            st!(self, reps.insert(r, (cand, votes)))?;
                        }
                    }
                }
                let mut counters = st!(self, tx.open_table(COUNTERS))?;
                st!(self, counters.insert("chosen", from))?;
            }
            st!(self, tx.commit())?;
            progress(from);
            if done {
                return Ok(());
            }
        }
    }

    /// Up to `limit` labels to write, from article number `from` on, and the number to go on
    /// from. An article with a sketch should carry its representative's id; one without (too
    /// short) its own, when it carries a label at all (one never fingerprinted is the
    /// back-fill's).
    pub fn changes(&self, from: u64, limit: usize) -> Result<(Vec<Change>, Option<u64>)> {
        let tx = st!(self, self.db.begin_read())?;
        let nodes = st!(self, tx.open_table(NODES))?;
        let parent = st!(self, tx.open_table(PARENT))?;
        let reps = st!(self, tx.open_table(REPS))?;
        let mut out = Vec::new();
        for r in st!(self, nodes.range(from..))? {
            let (k, v) = r.map_err(|e| self.err(e.into()))?;
            let n = k.value();
            if out.len() == limit {
                return Ok((out, Some(n)));
            }
            let (id, seq_no, primary_term, label, has_sketch, _) = v.value();
            let want = if has_sketch {
                let root = st!(self, parent.get(n))?.map_or(n, |p| p.value());
                let rep = st!(self, reps.get(root))?.map_or(n, |v| v.value().0);
                match st!(self, nodes.get(rep))? {
                    Some(v) => v.value().0.to_owned(),
                    None => id.to_owned(),
                }
            } else if label.is_some() {
                id.to_owned()
            } else {
                continue;
            };
            if label != Some(want.as_str()) {
                out.push(Change {
                    num: n,
                    id: id.to_owned(),
                    seq_no,
                    primary_term,
                    label: want,
                });
            }
        }
        Ok((out, None))
    }

    /// The article number the write phase goes on from.
    pub fn written_upto(&self) -> Result<u64> {
        self.counter("write_from")
    }

    /// Records that every label before article number `upto` is written, with the counts of
    /// this bulk added to the job's (`add`: counter names and amounts).
    pub fn mark_written(&self, upto: u64, add: &[(&str, u64)]) -> Result<()> {
        let tx = st!(self, self.db.begin_write())?;
        {
            let mut c = st!(self, tx.open_table(COUNTERS))?;
            st!(self, c.insert("write_from", upto))?;
            for (name, n) in add {
                let v = st!(self, c.get(*name))?.map_or(0, |v| v.value()) + n;
                st!(self, c.insert(*name, v))?;
            }
        }
        st!(self, tx.commit())
    }

    /// A job counter kept across runs (see [`Forest::mark_written`]).
    pub fn count(&self, name: &str) -> Result<u64> {
        self.counter(name)
    }

    /// The components' sizes.
    pub fn tally(&self) -> Result<Tally> {
        let tx = st!(self, self.db.begin_read())?;
        let mut t = Tally::default();
        if let Ok(nodes) = tx.open_table(NODES) {
            t.articles = st!(self, nodes.len())?;
        }
        if let Ok(sizes) = tx.open_table(SIZES) {
            for r in st!(self, sizes.iter())? {
                let size = r.map_err(|e| self.err(e.into()))?.1.value();
                t.groups += 1;
                t.shared += u64::from(size >= 2);
                t.largest = t.largest.max(size);
            }
        }
        Ok(t)
    }

    /// Every component of two or more articles (a dry run's `members`), in the order of
    /// their roots.
    pub fn components(&self, mut each: impl FnMut(Component) -> Result<()>) -> Result<()> {
        let tx = st!(self, self.db.begin_read())?;
        let nodes = st!(self, tx.open_table(NODES))?;
        let reps = st!(self, tx.open_table(REPS))?;
        let listed = st!(self, tx.open_table(MEMBERS))?;
        let id_of = |n: u64| -> Result<String> {
            Ok(st!(self, nodes.get(n))?
                .map(|v| v.value().0.to_owned())
                .unwrap_or_default())
        };
        let mut flush = |root: u64, members: Vec<String>| -> Result<()> {
            if members.len() >= 2 {
                let rep = st!(self, reps.get(root))?.map_or(root, |v| v.value().0);
                each(Component {
                    representative: id_of(rep)?,
                    members,
                })?;
            }
            Ok(())
        };
        let mut current: Option<(u64, Vec<String>)> = None;
        for r in st!(self, listed.iter())? {
            let (root, n) = r.map_err(|e| self.err(e.into()))?.0.value();
            match &mut current {
                Some((cr, m)) if *cr == root => m.push(id_of(n)?),
                _ => {
                    if let Some((cr, m)) = current.take() {
                        flush(cr, m)?;
                    }
                    current = Some((root, vec![id_of(n)?]));
                }
            }
        }
        if let Some((cr, m)) = current {
            flush(cr, m)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn node(id: &str, label: Option<&str>) -> Node {
        Node {
            id: id.into(),
            seq_no: 1,
            primary_term: 1,
            label: label.map(str::to_owned),
            has_sketch: true,
            order: None,
        }
    }

    fn forest(dir: &tempfile::TempDir) -> Forest {
        Forest::open(&dir.path().join("state.redb"), "job", false, 1 << 20).unwrap()
    }

    fn labels_after(f: &Forest) -> BTreeMap<String, String> {
        labels_by(f, Rank::MostCarried)
    }

    fn labels_by(f: &Forest, rank: Rank) -> BTreeMap<String, String> {
        f.choose(rank, 3, true, |_| {}).unwrap();
        let (changes, next) = f.changes(0, usize::MAX).unwrap();
        assert_eq!(next, None);
        let mut out = BTreeMap::new();
        let tx = f.db.begin_read().unwrap();
        let nodes = tx.open_table(NODES).unwrap();
        for r in nodes.iter().unwrap() {
            let (_, v) = r.unwrap();
            let v = v.value();
            out.insert(v.0.to_owned(), v.3.map(str::to_owned).unwrap_or_default());
        }
        for c in changes {
            out.insert(c.id, c.label);
        }
        out
    }

    #[test]
    fn the_representative_is_the_label_most_members_carry() {
        let dir = tempfile::tempdir().unwrap();
        let f = forest(&dir);
        // Two groups written apart (a: a, b; c: c, d, e) and joined by b–d: c's label has
        // three votes, a's two.
        let nodes = [
            node("a", Some("a")),
            node("b", Some("a")),
            node("c", Some("c")),
            node("d", Some("c")),
            node("e", Some("c")),
            node("z", None),
        ];
        let links = vec![
            ("a".to_owned(), vec!["b".to_owned()]),
            ("b".to_owned(), vec!["a".to_owned(), "d".to_owned()]),
            ("e".to_owned(), vec!["d".to_owned(), "c".to_owned()]),
        ];
        f.record_page(&nodes, &links).unwrap();
        let got = labels_after(&f);
        for id in ["a", "b", "c", "d", "e"] {
            assert_eq!(got[id], "c", "{id}");
        }
        assert_eq!(got["z"], "z");
        let t = f.tally().unwrap();
        assert_eq!((t.articles, t.groups, t.shared, t.largest), (6, 2, 1, 5));
    }

    #[test]
    fn a_deleted_representatives_label_gives_way_to_a_member_and_ties_go_to_the_smaller_id() {
        let dir = tempfile::tempdir().unwrap();
        let f = forest(&dir);
        let nodes = [node("m", Some("gone")), node("k", Some("gone"))];
        f.record_page(&nodes, &[("m".into(), vec!["k".into()])])
            .unwrap();
        let got = labels_after(&f);
        assert_eq!((got["m"].as_str(), got["k"].as_str()), ("k", "k"));
    }

    #[test]
    fn too_short_articles_keep_their_own_id_and_unlabelled_ones_are_left() {
        let dir = tempfile::tempdir().unwrap();
        let f = forest(&dir);
        let mut short = node("s", Some("x"));
        short.has_sketch = false;
        let mut fresh = node("f", None);
        fresh.has_sketch = false;
        f.record_page(&[short, fresh], &[]).unwrap();
        f.choose(Rank::MostCarried, 10, false, |_| {}).unwrap();
        let (changes, _) = f.changes(0, 10).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(
            (changes[0].id.as_str(), changes[0].label.as_str()),
            ("s", "s")
        );
    }

    #[test]
    fn another_jobs_file_is_refused_unless_restarted_and_a_finished_one_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let f = Forest::open(&path, "one", false, 1 << 20).unwrap();
        f.record_page(&[node("a", None)], &[("a".into(), vec![])])
            .unwrap();
        drop(f);
        assert!(matches!(
            Forest::open(&path, "two", false, 1 << 20),
            Err(RegroupError::OtherJob { .. })
        ));
        let f = Forest::open(&path, "one", false, 1 << 20).unwrap();
        assert_eq!(f.linked().unwrap(), 1);
        f.set_phase(Phase::Done).unwrap();
        drop(f);
        let f = Forest::open(&path, "one", false, 1 << 20).unwrap();
        assert_eq!((f.linked().unwrap(), f.phase().unwrap()), (0, Phase::Link));
        drop(f);
        let f = Forest::open(&path, "two", true, 1 << 20).unwrap();
        assert_eq!(f.phase().unwrap(), Phase::Link);
    }

    #[test]
    fn ordered_by_a_field_the_earliest_member_represents_its_component() {
        let dir = tempfile::tempdir().unwrap();
        let f = forest(&dir);
        let dated = |id: &str, label: &str, key: Option<OrderKey>| Node {
            order: key,
            ..node(id, Some(label))
        };
        let n = |x: f64| Some(OrderKey::Number(x));
        let s = |x: &str| Some(OrderKey::String(x.into()));
        let nodes = [
            dated("a", "a", n(20.0)),
            dated("b", "a", n(-1.5)),
            dated("c", "a", None),
            dated("d", "d", s("2024-01-01")),
            dated("e", "d", s("2023-12-31")),
            dated("f", "f", None),
            dated("g", "f", None),
        ];
        let links = vec![
            ("a".to_owned(), vec!["b".to_owned(), "c".to_owned()]),
            ("d".to_owned(), vec!["e".to_owned()]),
            ("g".to_owned(), vec!["f".to_owned()]),
        ];
        f.record_page(&nodes, &links).unwrap();
        let got = labels_by(&f, Rank::Earliest);
        let want = [
            ("a", "b"),
            ("b", "b"),
            ("c", "b"),
            ("d", "e"),
            ("e", "e"),
            ("f", "f"),
            ("g", "f"),
        ];
        for (id, label) in want {
            assert_eq!(got[id], label, "{id}");
        }
    }

    #[test]
    fn order_keys_are_stored_as_they_were() {
        for k in [
            OrderKey::Number(0.0),
            OrderKey::Number(-1.5e300),
            OrderKey::Number(1_700_000_000_000.0),
            OrderKey::String(String::new()),
            OrderKey::String("2024-05-01T08:00:00Z".into()),
        ] {
            assert_eq!(decode_key(&encode_key(&k)), Some(k));
        }
    }

    #[test]
    fn the_write_checkpoint_and_the_job_counters_are_apart() {
        let dir = tempfile::tempdir().unwrap();
        let f = forest(&dir);
        f.mark_written(5, &[("written", 3), ("conflicts", 1)])
            .unwrap();
        f.mark_written(9, &[("written", 2)]).unwrap();
        assert_eq!(f.written_upto().unwrap(), 9);
        assert_eq!(f.count("written").unwrap(), 5);
        assert_eq!(f.count("conflicts").unwrap(), 1);
    }

    /// Brute force: the components of `edges` over `n` articles, as sets.
    fn components(n: usize, edges: &[(usize, usize)]) -> BTreeSet<BTreeSet<usize>> {
        let mut comp: Vec<usize> = (0..n).collect();
        loop {
            let mut changed = false;
            for &(a, b) in edges {
                let m = comp[a].min(comp[b]);
                for x in [a, b] {
                    if comp[x] != m {
                        comp[x] = m;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut by: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (i, c) in comp.iter().enumerate() {
            by.entry(*c).or_default().insert(i);
        }
        by.into_values().collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever the pages, the links, the old labels and the order keys: articles share a
        /// label exactly when they are in one component; the label is a member's id, the one
        /// most members carried (ties: the smaller id), or the earliest by the order; and the
        /// dry run lists exactly those components.
        #[test]
        fn labels_are_the_connected_components(
            n in 1usize..40,
            edges in proptest::collection::vec((0usize..40, 0usize..40), 0..60),
            old in proptest::collection::vec(proptest::option::of(0usize..45), 40),
            keys in proptest::collection::vec(proptest::option::of(-3i32..3), 40),
            ordered in proptest::bool::ANY,
            page in 1usize..7,
        ) {
            let rank = if ordered { Rank::Earliest } else { Rank::MostCarried };
            let key = |i: usize| keys[i].map(|k| OrderKey::Number(f64::from(k)));
            let edges: Vec<(usize, usize)> =
                edges.into_iter().filter(|(a, b)| *a < n && *b < n).collect();
            let id = |i: usize| format!("d{i:02}");
            let dir = tempfile::tempdir().unwrap();
            let f = forest(&dir);
            let all: Vec<usize> = (0..n).collect();
            for chunk in all.chunks(page) {
                let nodes: Vec<Node> = chunk
                    .iter()
                    .map(|&i| Node {
                        order: key(i),
                        ..node(&id(i), old[i].map(id).as_deref())
                    })
                    .collect();
                // Each article's search finds the articles it has an edge with (both ways,
                // as `similar`'s rule is symmetric).
                let links: Vec<(String, Vec<String>)> = chunk
                    .iter()
                    .map(|&i| {
                        let near = edges
                            .iter()
                            .filter_map(|&(a, b)| if a == i { Some(b) } else if b == i { Some(a) } else { None })
                            .filter(|&j| j != i)
                            .map(id)
                            .collect();
                        (id(i), near)
                    })
                    .collect();
                f.record_page(&nodes, &links).unwrap();
            }
            let got = labels_by(&f, rank);
            let comps = components(n, &edges);
            for c in &comps {
                let labels: BTreeSet<&String> = c.iter().map(|&i| &got[&id(i)]).collect();
                proptest::prop_assert_eq!(labels.len(), 1);
                let label = labels.into_iter().next().unwrap();
                let votes = |m: usize| c.iter().filter(|&&i| old[i] == Some(m)).count();
                let best = if ordered {
                    c.iter()
                        .min_by(|&&x, &&y| earliest_first((key(x).as_ref(), &id(x)), (key(y).as_ref(), &id(y))))
                        .unwrap()
                } else {
                    c.iter()
                        .max_by(|&&x, &&y| votes(x).cmp(&votes(y)).then_with(|| id(y).cmp(&id(x))))
                        .unwrap()
                };
                proptest::prop_assert_eq!(label, &id(*best));
            }
            let mut listed = BTreeSet::new();
            f.components(|c| {
                listed.insert(c.members.iter().cloned().collect::<BTreeSet<String>>());
                Ok(())
            })
            .unwrap();
            let want: BTreeSet<BTreeSet<String>> = comps
                .iter()
                .filter(|c| c.len() >= 2)
                .map(|c| c.iter().map(|&i| id(i)).collect())
                .collect();
            proptest::prop_assert_eq!(listed, want);
        }
    }
}

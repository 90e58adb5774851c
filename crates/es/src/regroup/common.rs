//! The common minima terms of an index ([`CommonMinima`]), learned by the regroup's walk:
//! every minimum's term the walk reads is counted, and those held by more than a bound are
//! listed.

use std::path::Path;

use super::RegroupError;
use crate::schema::{CommonMinima, ContainmentMeta};

/// The articles holding each minimum's term, counted by the number the term spells
/// ([`ContainmentMeta::term_number`]): at most 2^24 counters (64 MiB), whatever the index
/// size.
pub(super) struct MinimaCounter {
    counts: Vec<u32>,
    chars: usize,
    articles: u64,
}

impl MinimaCounter {
    pub(super) fn new() -> MinimaCounter {
        MinimaCounter {
            counts: Vec::new(),
            chars: 0,
            articles: 0,
        }
    }

    /// Counts one article's minima terms. A term that spells no number, or is of another
    /// length than the first one counted, is an error: the index holds minima terms of one
    /// format.
    pub(super) fn add(&mut self, terms: &[String]) -> Result<(), RegroupError> {
        self.articles += 1;
        for t in terms {
            if self.chars == 0 {
                self.chars = t.len();
                self.counts = vec![0; 1 << (6 * t.len().min(4))];
            }
            match ContainmentMeta::term_number(t).filter(|_| t.len() == self.chars) {
                Some(n) => {
                    let c = &mut self.counts[n as usize];
                    *c = c.saturating_add(1);
                }
                None => {
                    return Err(RegroupError::CommonMinima(format!(
                        "`{t}` is not a minimum's term of {} characters",
                        self.chars
                    )))
                }
            }
        }
        Ok(())
    }

    /// The terms held by more than `above` articles.
    pub(super) fn common(&self, above: u64) -> CommonMinima {
        let mut terms: Vec<String> = self
            .counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| u64::from(c) > above)
            .map(|(n, _)| ContainmentMeta::term_spelled(n as u64, self.chars))
            .collect();
        terms.sort_unstable();
        CommonMinima {
            above,
            articles: self.articles,
            terms,
        }
    }
}

/// Where the join keeps the common minima it was built with: `common.json` in its directory.
fn path(dir: &Path) -> std::path::PathBuf {
    dir.join("common.json")
}

/// Records the common minima a join is built with (`None`: none), so that a join that goes on
/// after a stop is built with the same.
pub(super) fn save(dir: &Path, common: Option<&CommonMinima>) -> Result<(), RegroupError> {
    let p = path(dir);
    let body = serde_json::to_vec(&common).expect("a list of strings serializes");
    std::fs::write(&p, body).map_err(|e| RegroupError::State {
        path: p.clone(),
        detail: e.to_string(),
    })
}

/// The common minima [`save`] recorded in `dir`; `Ok(None)` when it recorded none, an error
/// when it recorded nothing readable.
pub(super) fn load(dir: &Path) -> Result<Option<CommonMinima>, RegroupError> {
    let p = path(dir);
    let bad = |detail: String| RegroupError::State {
        path: p.clone(),
        detail: format!("{detail}: run the regroup again with --restart"),
    };
    let body = std::fs::read(&p).map_err(|e| bad(e.to_string()))?;
    serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::Signature;

    #[test]
    fn the_terms_held_by_more_than_the_bound_are_common() {
        let c = ContainmentMeta::new();
        let sig = |v: u32| Signature::from_values((0..128).map(|i| v + i).collect::<Vec<u32>>());
        let mut counter = MinimaCounter::new();
        // Three articles share every term of signature 7; one holds signature 1000's.
        for v in [7, 7, 7, 1000] {
            counter.add(&c.minima_terms(&sig(v))).unwrap();
        }
        let common = counter.common(2);
        assert_eq!(common.articles, 4);
        let mut want = c.minima_terms(&sig(7));
        want.sort_unstable();
        assert_eq!(common.terms, want);
        assert!(counter.common(3).terms.is_empty());
        assert_eq!(counter.common(0).terms.len(), 128);
        assert!(counter.add(&["A!".to_owned()]).is_err());
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), Some(&common)).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(common));
        save(dir.path(), None).unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
    }
}

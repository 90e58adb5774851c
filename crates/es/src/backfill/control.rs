//! How hard the back-fill pushes: bulk requests in flight and their size adapt to the
//! cluster's 429 pushback (additive increase, multiplicative decrease, as TCP does); its
//! optional docs/s ceiling is [`crate::pace`].

use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Bulk concurrency and size, adapted to pushback.
#[derive(Debug)]
pub struct Aimd {
    state: Mutex<AimdState>,
    freed: Notify,
    max_in_flight: usize,
    max_bulk: usize,
    min_bulk: usize,
    adapt: bool,
}

#[derive(Debug)]
struct AimdState {
    limit: usize,
    in_flight: usize,
    bulk: usize,
    /// Clean batches since the last change of `limit`.
    clean: usize,
}

/// A permit for one bulk request; frees its slot when dropped.
pub struct Slot(Arc<Aimd>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().in_flight -= 1;
        self.0.freed.notify_waiters();
    }
}

impl Aimd {
    /// Starts at the maxima; with `adapt = false` they stay fixed.
    pub fn new(max_in_flight: usize, max_bulk: usize, adapt: bool) -> Aimd {
        let max_in_flight = max_in_flight.max(1);
        let max_bulk = max_bulk.max(1);
        Aimd {
            state: Mutex::new(AimdState {
                limit: max_in_flight,
                in_flight: 0,
                bulk: max_bulk,
                clean: 0,
            }),
            freed: Notify::new(),
            max_in_flight,
            max_bulk,
            min_bulk: max_bulk.min(20),
            adapt,
        }
    }

    /// Waits for a free slot under the current limit.
    pub async fn acquire(this: Arc<Aimd>) -> Slot {
        let aimd = Arc::clone(&this);
        loop {
            // Created before the check: `notify_waiters` reaches it from here on.
            let freed = aimd.freed.notified();
            {
                let mut s = this.state.lock().unwrap();
                if s.in_flight < s.limit {
                    s.in_flight += 1;
                    drop(s);
                    return Slot(this);
                }
            }
            freed.await;
        }
    }

    /// Documents per bulk request now.
    pub fn bulk_size(&self) -> usize {
        self.state.lock().unwrap().bulk
    }

    /// `(requests in flight allowed, bulk size)` now.
    pub fn current(&self) -> (usize, usize) {
        let s = self.state.lock().unwrap();
        (s.limit, s.bulk)
    }

    /// Feeds back one finished bulk: pushed back (429s) halves concurrency and bulk size;
    /// a run of clean batches as long as the limit adds one request in flight and a tenth to
    /// the bulk size, up to the maxima.
    pub fn feedback(&self, pushed_back: bool) {
        if !self.adapt {
            return;
        }
        let mut s = self.state.lock().unwrap();
        if pushed_back {
            s.limit = (s.limit / 2).max(1);
            s.bulk = (s.bulk / 2).max(self.min_bulk);
            s.clean = 0;
            tracing::warn!(
                in_flight = s.limit,
                bulk = s.bulk,
                "Elasticsearch pushed back (429): slowing down"
            );
        } else {
            s.clean += 1;
            if s.clean >= s.limit {
                s.clean = 0;
                s.limit = (s.limit + 1).min(self.max_in_flight);
                s.bulk = (s.bulk + s.bulk.div_ceil(10)).min(self.max_bulk);
            }
        }
        drop(s);
        self.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn halves_on_pushback_and_grows_back_slowly() {
        let a = Aimd::new(8, 1000, true);
        a.feedback(true);
        assert_eq!(a.current(), (4, 500));
        a.feedback(true);
        a.feedback(true);
        a.feedback(true);
        assert_eq!(a.current(), (1, 62));
        a.feedback(true);
        assert_eq!(a.current(), (1, 31));
        a.feedback(false);
        assert_eq!(a.current(), (2, 35));
        for _ in 0..2 {
            a.feedback(false);
        }
        assert_eq!(a.current(), (3, 39));
        for _ in 0..1000 {
            a.feedback(false);
        }
        assert_eq!(a.current(), (8, 1000));
    }

    #[test]
    fn fixed_when_not_adapting() {
        let a = Aimd::new(3, 100, false);
        a.feedback(true);
        assert_eq!(a.current(), (3, 100));
    }

    #[tokio::test]
    async fn slots_respect_the_limit() {
        let a = Arc::new(Aimd::new(2, 10, true));
        let s1 = Aimd::acquire(Arc::clone(&a)).await;
        let _s2 = Aimd::acquire(Arc::clone(&a)).await;
        let third =
            tokio::time::timeout(Duration::from_millis(20), Aimd::acquire(Arc::clone(&a))).await;
        assert!(third.is_err(), "a third slot must wait");
        drop(s1);
        let third =
            tokio::time::timeout(Duration::from_secs(5), Aimd::acquire(Arc::clone(&a))).await;
        assert!(third.is_ok());
    }
}

//! An optional documents-per-second ceiling for a job (`--max-docs-per-sec` of the back-fill
//! and regroup), so a production cluster keeps serving meanwhile (the role of
//! reindex's `requests_per_second`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Paces the job to at most `rate` documents per second (none: unlimited).
#[derive(Debug)]
pub struct Pace {
    rate: Option<f64>,
    next: Mutex<Option<Instant>>,
}

impl Pace {
    pub fn new(rate: Option<f64>) -> Pace {
        Pace {
            rate: rate.filter(|r| *r > 0.0),
            next: Mutex::new(None),
        }
    }

    /// Waits until `docs` more documents may be sent.
    pub async fn take(&self, docs: usize) {
        if let Some(at) = self.reserve(docs, Instant::now()) {
            tokio::time::sleep_until(at.into()).await;
        }
    }

    /// When `docs` documents asked for at `now` may go: each batch starts when the previous
    /// one's share of the rate has passed.
    fn reserve(&self, docs: usize, now: Instant) -> Option<Instant> {
        let rate = self.rate?;
        let mut next = self.next.lock().unwrap();
        let start = next.map_or(now, |n| n.max(now));
        *next = Some(start + Duration::from_secs_f64(docs as f64 / rate));
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_spreads_documents_over_time() {
        let p = Pace::new(Some(100.0));
        let t0 = Instant::now();
        let starts: Vec<_> = (0..5).map(|_| p.reserve(50, t0).unwrap() - t0).collect();
        // 50 documents at 100/s take half a second of the budget each.
        assert_eq!(
            starts,
            [0, 500, 1000, 1500, 2000].map(Duration::from_millis)
        );
        // After a pause the budget does not pile up: the next batch goes at once.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(p.reserve(50, later), Some(later));
        assert_eq!(Pace::new(None).reserve(50, t0), None);
    }
}

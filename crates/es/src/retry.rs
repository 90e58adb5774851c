//! Retries with exponential backoff for requests that may succeed later: 429 (the cluster is
//! pushing back), 5xx and connection errors. Anything else (a bad request, a missing index,
//! refused credentials) fails at once: trying again would only hide it.

use std::future::Future;
use std::time::Duration;

use crate::error::EsError;

/// How often and how patiently to retry.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retries).
    pub max_retries: u32,
    /// Wait before the first retry; doubled after each.
    pub initial_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 8 retries, 250 ms doubling to at most 30 s: rides out about two minutes of a cluster
    /// restarting or rejecting writes.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 8,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries at all (for tests and interactive one-shot commands).
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0-based), with ±25 % jitter so that many
    /// clients pushed back at once do not come back at once.
    pub fn backoff(&self, retry: u32) -> Duration {
        let base = self
            .initial_backoff
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let jitter = 0.75 + f64::from(nanos % 1000) / 2000.0;
        base.mul_f64(jitter)
    }

    /// Runs `op` until it succeeds, fails with a non-transient error, or the retries are used
    /// up ([`EsError::Exhausted`] then wraps the last error).
    pub async fn run<T, F, Fut>(&self, mut op: F) -> Result<T, EsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, EsError>>,
    {
        let mut retry = 0;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_transient() && retry < self.max_retries => {
                    let wait = self.backoff(retry);
                    tracing::warn!(error = %e, retry = retry + 1, wait_ms = wait.as_millis() as u64, "transient Elasticsearch error, retrying");
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(e) if e.is_transient() && retry > 0 => {
                    return Err(EsError::Exhausted {
                        attempts: retry + 1,
                        last: Box::new(e),
                    })
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn busy() -> EsError {
        EsError::Status {
            what: "bulk".into(),
            status: 429,
            error_type: "es_rejected_execution_exception".into(),
            reason: "queue full".into(),
        }
    }

    fn quick(n: u32) -> RetryPolicy {
        RetryPolicy {
            max_retries: n,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn transient_errors_are_retried_until_success() {
        let calls = AtomicU32::new(0);
        let r = quick(3)
            .run(|| async {
                if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(busy())
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn permanent_errors_are_not_retried_and_retries_run_out() {
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = quick(5)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(EsError::IndexNotFound { index: "x".into() })
            })
            .await;
        assert!(matches!(r, Err(EsError::IndexNotFound { .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let r: Result<(), _> = quick(2).run(|| async { Err(busy()) }).await;
        match r {
            Err(EsError::Exhausted { attempts, .. }) => assert_eq!(attempts, 3),
            other => panic!("expected Exhausted, got {other:?}"),
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        assert!(p.backoff(0) <= Duration::from_millis(313));
        assert!(p.backoff(3) >= Duration::from_millis(1500));
        assert!(p.backoff(30) <= Duration::from_millis(37_500));
    }
}

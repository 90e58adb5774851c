//! Several node URLs: the connection pool that spreads requests over them and skips a node
//! that refuses connections (its process is gone, or not started yet).
//!
//! The client's own `MultiNodeConnectionPool::round_robin` hands out the nodes in turn
//! whatever happened to them, so with one node of three dead a third of the requests failed
//! and waited out a backoff. [`Nodes`] is the same round robin, except that it passes over a
//! node refused within the last [`SKIP`]. [`super::send`] is the one place that marks a node:
//! a refused connection sent nothing, so it sends the request again at once, and the pool
//! gives it another node, up to once per node. The marks are per process and keyed by the
//! node's origin (`http://host:port`), because [`super::send`] sees only the client and the
//! refused URL; a node that comes back gets requests again after [`SKIP`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use elasticsearch::http::transport::{Connection, ConnectionPool};
use elasticsearch::http::Url;

/// How long a node that refused a connection is passed over.
pub const SKIP: Duration = Duration::from_secs(2);

/// When each node (by origin) last refused a connection.
static REFUSED: Mutex<BTreeMap<String, Instant>> = Mutex::new(BTreeMap::new());

/// Round robin over the nodes, passing over those refused within [`SKIP`] (all of them in
/// turn when every node was refused).
#[derive(Clone, Debug)]
pub struct Nodes {
    nodes: Arc<[(String, Connection)]>,
    turn: Arc<AtomicUsize>,
}

impl Nodes {
    pub fn new(urls: &[Url]) -> Nodes {
        Nodes {
            nodes: urls
                .iter()
                .map(|u| (origin(u), Connection::new(u.clone())))
                .collect(),
            turn: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl ConnectionPool for Nodes {
    fn next(&self) -> Connection {
        let n = self.nodes.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let refused = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
        let up = |key: &String| refused.get(key).is_none_or(|t| t.elapsed() >= SKIP);
        (0..n)
            .map(|i| &self.nodes[(start + i) % n])
            .find(|(key, _)| up(key))
            .unwrap_or(&self.nodes[start % n])
            .1
            .clone()
    }
}

/// The node that refused the connection of `e` (its origin), if that is how `e` failed:
/// nothing was sent, so sending again elsewhere is always safe. Other connection errors (a
/// reset, a timeout, a closed connection) may come after the request arrived and are not
/// matched.
pub fn refused(e: &elasticsearch::Error) -> Option<String> {
    let http = std::error::Error::source(e)?.downcast_ref::<reqwest::Error>()?;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(http);
    while let Some(c) = cur {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return http.url().map(origin);
        }
        cur = c.source();
    }
    None
}

/// Marks `node` (an origin from [`refused`]) as refusing connections from now on.
pub fn mark_refused(node: &str) {
    let mut refused = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    refused.insert(node.to_owned(), Instant::now());
}

fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn urls(ports: &[u16]) -> Vec<Url> {
        ports
            .iter()
            .map(|p| Url::parse(&format!("http://127.0.0.1:{p}")).unwrap())
            .collect()
    }

    #[test]
    fn a_refused_node_is_passed_over_until_every_node_was_refused() {
        // Ports no other test uses: the marks are shared by the whole process.
        let nodes = Nodes::new(&urls(&[1, 2, 3]));
        let picked =
            |n: usize| -> Vec<u16> { (0..n).map(|_| nodes.next().url().port().unwrap()).collect() };
        assert_eq!(picked(3), [1, 2, 3]);
        mark_refused("http://127.0.0.1:2");
        assert!(picked(12).iter().all(|&p| p != 2));
        mark_refused("http://127.0.0.1:1");
        assert!(picked(6).iter().all(|&p| p == 3));
        mark_refused("http://127.0.0.1:3");
        let all: BTreeSet<u16> = picked(6).into_iter().collect();
        assert_eq!(all, BTreeSet::from([1, 2, 3]));
    }
}

//! The suite's own cluster: `scripts/es-up --nodes 3` (one JVM per node), whose nodes it kills,
//! pauses and restarts by the pids es-up records; stopped with `scripts/es-down` when dropped
//! (also when a scenario fails).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use elasticsearch::http::Method;
use elasticsearch::Elasticsearch;
use neardup::es::{self, EsConfig, RetryPolicy};
use serde_json::Value;

pub struct Cluster {
    /// http port of node 1; node i listens on `port + i - 1`.
    pub port: u16,
    pub nodes: usize,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a script of `scripts/` on the cluster's port; panics when it fails.
fn script(name: &str, port: u16, args: &[&str]) {
    let status = Command::new(root().join("scripts").join(name))
        .args(args)
        .env("ES_PORT", port.to_string())
        .env("ES_ENGINE", "es7")
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("scripts/{name}: {e}"));
    assert!(
        status.success(),
        "scripts/{name} {args:?} on port {port} failed: the fault suite needs its own \
         es7 cluster there (scripts/es-up --nodes 3: its ports free, Java and Maven)"
    );
}

impl Cluster {
    /// Starts a fresh cluster (`--clean`: no data of an earlier run) of `nodes` nodes.
    pub fn start(port: u16, nodes: usize) -> Cluster {
        let n = nodes.to_string();
        script("es-up", port, &["--clean", "--nodes", &n]);
        Cluster { port, nodes }
    }

    /// Every node's URL, comma-separated: what a user gives `--es` for a cluster.
    pub fn urls(&self) -> String {
        (1..=self.nodes)
            .map(|i| self.url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn url(&self, node: usize) -> String {
        format!("http://127.0.0.1:{}", self.port as usize + node - 1)
    }

    /// A client for every node (requests go round the nodes that answer).
    pub fn client(&self) -> Elasticsearch {
        EsConfig::new(&self.urls()).unwrap().client().unwrap()
    }

    /// Node `node`'s JVM, from the pids file es-up writes (node i on line i).
    pub fn pid(&self, node: usize) -> u32 {
        self.try_pid(node)
            .unwrap_or_else(|| panic!("no pid of node {node} in es-up's pids file"))
    }

    fn try_pid(&self, node: usize) -> Option<u32> {
        let cache = std::env::var_os("ES_CACHE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".cache/es"));
        let text = std::fs::read_to_string(cache.join(self.port.to_string()).join("pids")).ok()?;
        text.lines().nth(node - 1)?.split(' ').nth(1)?.parse().ok()
    }

    fn signal(&self, node: usize, sig: &str) {
        let pid = self.pid(node).to_string();
        let status = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(status.success(), "kill {sig} {pid} (node {node})");
    }

    /// SIGKILL: the node dies at once, with whatever it had not written to disk.
    pub fn kill(&self, node: usize) {
        self.signal(node, "-KILL");
        let pid = self.pid(node);
        while std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z")
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// SIGSTOP: the node hangs, its connections stay open.
    pub fn pause(&self, node: usize) {
        self.signal(node, "-STOP");
    }

    /// SIGCONT after [`Cluster::pause`].
    pub fn resume(&self, node: usize) {
        self.signal(node, "-CONT");
    }

    /// Starts a killed node again with its data; returns when all nodes are in the cluster.
    pub fn restart(&self, node: usize) {
        let n = node.to_string();
        script("es-up", self.port, &["--restart-node", &n]);
    }

    /// Stops every node (SIGTERM) and starts the cluster again with its data.
    pub fn restart_all(&self) {
        script("es-down", self.port, &[]);
        let n = self.nodes.to_string();
        script("es-up", self.port, &["--nodes", &n]);
    }

    /// The node (1..=N) holding the primary of `index`'s shard 0.
    pub async fn primary_node(&self, client: &Elasticsearch, index: &str) -> usize {
        let path = format!("/_cat/shards/{}", es::path_segment(index));
        let r = es::request(
            client,
            &RetryPolicy::default(),
            "cat shards",
            Method::Get,
            &path,
            &[("format", "json"), ("h", "shard,prirep,state,node")],
            None,
        )
        .await
        .unwrap();
        let shards = r.as_array().expect("a list of shards");
        let name = shards
            .iter()
            .find(|s| s["shard"] == "0" && s["prirep"] == "p" && s["state"] == "STARTED")
            .and_then(|s| s["node"].as_str())
            .unwrap_or_else(|| panic!("no started primary of shard 0: {r}"));
        name.strip_prefix("Node ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("node name {name:?} is not `Node i`"))
    }

    /// Waits (no deadline of its own: Elasticsearch's timeout, asked again) until the cluster
    /// has all its nodes and `index` is green.
    pub async fn wait_green(&self, client: &Elasticsearch, index: &str) {
        let path = format!("/_cluster/health/{}", es::path_segment(index));
        let nodes = self.nodes.to_string();
        loop {
            let r = es::send(
                client,
                Method::Get,
                &path,
                &[
                    ("wait_for_status", "green"),
                    ("wait_for_nodes", &nodes),
                    ("wait_for_no_initializing_shards", "true"),
                    ("timeout", "30s"),
                ],
                None,
            )
            .await;
            if let Ok(r) = r {
                if r.status.is_success() && r.body["timed_out"] == Value::Bool(false) {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        script("es-down", self.port, &[]);
    }
}

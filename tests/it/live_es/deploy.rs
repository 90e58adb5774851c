//! The deployment files, checked without a Docker engine: what `Dockerfile`,
//! `docker-compose.yml` and `docker-compose.token.yml` would run is run here — the image's
//! ENTRYPOINT with the compose service's command (or the image's CMD) and their environment,
//! only the cluster's URL and the listen port swapped — against the live node, with the
//! image's own HEALTHCHECK command as the probe; the documented `es-init` line likewise. The
//! versions the files name are checked against what the project tests.
//!
//! The files are read with well-kept parsers, not by hand: `parse-dockerfile` (taiki-e; the
//! Dockerfile grammar with line continuations, exec and shell forms, flags) and `yaml-rust2`
//! (a maintained pure-Rust YAML 1.2 loader that resolves the anchors the compose file uses;
//! `serde_yaml` is no longer maintained).

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::es as t;
use common::serve::{http, sigterm};
use elasticsearch::http::Method;
use parse_dockerfile::{Command as DockerCommand, HealthcheckArguments, Instruction};
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// What the Dockerfile's final stage runs, and where its parts come from.
#[derive(Debug)]
struct Image {
    builder_from: String,
    runtime_from: String,
    /// `COPY --from=builder SRC DEST`: DEST
    copied_binary: String,
    user: String,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    env: Vec<(String, String)>,
    expose: Vec<String>,
    healthcheck: Vec<String>,
}

fn exec_form(command: &DockerCommand<'_>, what: &str) -> Vec<String> {
    match command {
        DockerCommand::Exec(args) => args.value.iter().map(|a| a.value.to_string()).collect(),
        // the shell would be PID 1: SIGTERM would stop at it, not reach neardup
        _ => panic!("the Dockerfile's {what} must be in exec form ([\"…\", …])"),
    }
}

fn dockerfile() -> Image {
    let text = repo_file("Dockerfile");
    let file = parse_dockerfile::parse(&text).unwrap_or_else(|e| panic!("Dockerfile: {e}"));
    let builder = file.stage("builder").expect("a stage named `builder`");
    let runtime = file.stages().last().expect("a final stage");
    let mut image = Image {
        builder_from: builder.from.image.value.to_string(),
        runtime_from: runtime.from.image.value.to_string(),
        copied_binary: String::new(),
        user: "root".into(),
        entrypoint: Vec::new(),
        cmd: Vec::new(),
        env: Vec::new(),
        expose: Vec::new(),
        healthcheck: Vec::new(),
    };
    for instruction in runtime.instructions {
        match instruction {
            Instruction::Copy(copy)
                if copy.options.iter().any(|f| {
                    f.name.value.trim_start_matches('-') == "from"
                        && f.value.as_ref().is_some_and(|v| v.value == "builder")
                }) =>
            {
                image.copied_binary = copy.dest.value.to_string();
            }
            Instruction::User(user) => image.user = user.arguments.value.to_string(),
            Instruction::Entrypoint(e) => image.entrypoint = exec_form(&e.arguments, "ENTRYPOINT"),
            Instruction::Cmd(c) => image.cmd = exec_form(&c.arguments, "CMD"),
            Instruction::Env(env) => {
                for pair in env.arguments.value.split_whitespace() {
                    let (key, value) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("ENV {pair}: write ENV KEY=VALUE"));
                    assert!(
                        !value.contains(['"', '\'', '$', '\\']),
                        "ENV {pair}: only plain KEY=VALUE pairs are read by this test"
                    );
                    image.env.push((key.to_owned(), value.to_owned()));
                }
            }
            Instruction::Expose(e) => {
                image.expose = e.arguments.iter().map(|p| p.value.to_string()).collect();
            }
            Instruction::Healthcheck(h) => match &h.arguments {
                HealthcheckArguments::Cmd { arguments, .. } => {
                    image.healthcheck = exec_form(arguments, "HEALTHCHECK CMD");
                }
                _ => panic!("HEALTHCHECK NONE: the image should probe /healthz"),
            },
            _ => {}
        }
    }
    image
}

fn yaml(path: &str) -> Yaml {
    let mut docs =
        YamlLoader::load_from_str(&repo_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(docs.len(), 1, "{path}: one YAML document");
    docs.remove(0)
}

fn strings(node: &Yaml, what: &str) -> Vec<String> {
    node.as_vec()
        .unwrap_or_else(|| panic!("{what}: expected a list, found {node:?}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("{what}: expected strings, found {s:?}"))
                .to_owned()
        })
        .collect()
}

/// A compose service's `environment`, in either of its two forms.
fn compose_env(service: &Yaml) -> Vec<(String, String)> {
    match &service["environment"] {
        Yaml::BadValue => Vec::new(),
        Yaml::Hash(map) => map
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    other => panic!("environment {k:?}: {other:?}"),
                };
                (k.as_str().unwrap().to_owned(), value)
            })
            .collect(),
        list => strings(list, "environment")
            .into_iter()
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{pair}"));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
    }
}

/// The container port of a `ports:` entry (`[HOST_IP:]HOST_PORT:CONTAINER_PORT`) and the
/// host address it is published on.
fn published(entry: &str) -> (String, u16) {
    let parts: Vec<&str> = entry.split(':').collect();
    let container = parts.last().unwrap().parse().unwrap();
    let host_ip = if parts.len() == 3 { parts[0] } else { "" };
    (host_ip.to_owned(), container)
}

/// The value after `flag` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    args.get(at + 1)
        .unwrap_or_else(|| panic!("{flag} has no value in {args:?}"))
}

fn replace_flag_value(args: &mut [String], flag: &str, value: &str) {
    flag_value(args, flag);
    let at = args.iter().position(|a| a == flag).unwrap() + 1;
    args[at] = value.to_owned();
}

/// Fails with `common::es`'s message (how to start a node) when no node answers.
fn require_node() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(t::client());
}

/// The top-level entries of the repository that the build compiles in: the manifest, the
/// lock file, `src/` and `crates/` (the workspace's product crates), and wherever an
/// `include_str!` / `include_bytes!` under them points.
fn compiled_in() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let mut found: Vec<String> = ["Cargo.toml", "Cargo.lock", "src", "crates"]
        .map(String::from)
        .to_vec();
    let mut dirs = vec![root.join("src"), root.join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for call in ["include_str!(\"", "include_bytes!(\""] {
                for (at, _) in text.match_indices(call) {
                    let rest = &text[at + call.len()..];
                    let target = dir.join(&rest[..rest.find('"').unwrap()]);
                    let target = target
                        .canonicalize()
                        .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
                    let top = target.strip_prefix(&root).unwrap().components().next();
                    let top = top.unwrap().as_os_str().to_str().unwrap().to_owned();
                    if !found.contains(&top) {
                        found.push(top);
                    }
                }
            }
        }
    }
    found
}

/// `ENTRYPOINT` as run here: the image's binary is the one cargo built.
fn binary(image: &Image) -> PathBuf {
    assert_eq!(
        image.entrypoint.first().map(String::as_str),
        Some(image.copied_binary.as_str()),
        "ENTRYPOINT must start the binary the runtime stage copies from the builder"
    );
    PathBuf::from(env!("CARGO_BIN_EXE_neardup"))
}

/// The environment the container gets: the image's ENV, then the compose service's, with
/// `NEARDUP_ES_URL` (which must name a compose service) pointed at the test node.
fn container_env(image: &Image, compose: &Yaml, service: &Yaml) -> Vec<(String, String)> {
    let mut env = image.env.clone();
    for (k, v) in compose_env(service) {
        env.retain(|(key, _)| *key != k);
        env.push((k, v));
    }
    let url = env
        .iter_mut()
        .find(|(k, _)| k == "NEARDUP_ES_URL")
        .expect("the service gets NEARDUP_ES_URL");
    let (host, port) = url
        .1
        .strip_prefix("http://")
        .and_then(|r| r.trim_end_matches('/').split_once(':'))
        .unwrap_or_else(|| panic!("NEARDUP_ES_URL {}: http://SERVICE:PORT", url.1));
    let target = &compose["services"][host];
    assert!(
        target.as_hash().is_some(),
        "NEARDUP_ES_URL names `{host}`, which is no service of docker-compose.yml"
    );
    let ports: Vec<u16> = strings(&target["ports"], "ports")
        .iter()
        .map(|p| published(p).1)
        .collect();
    assert!(
        ports.contains(&port.parse().unwrap()),
        "NEARDUP_ES_URL port {port} is not a port `{host}` serves on ({ports:?})"
    );
    url.1 = t::url();
    env
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `neardup` process started as the container would start it.
struct Service {
    child: Child,
    port: u16,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Service {
    /// Starts ENTRYPOINT + `args` with exactly `env`, the `--listen` port swapped for a free
    /// one on 127.0.0.1, and waits until the image's HEALTHCHECK command succeeds.
    fn start(image: &Image, mut args: Vec<String>, env: &[(String, String)]) -> Service {
        let port = free_port();
        replace_flag_value(&mut args, "--listen", &format!("127.0.0.1:{port}"));
        let mut child = Command::new(binary(image))
            .args(&image.entrypoint[1..])
            .args(&args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut service = Service {
            child,
            port,
            stderr: rx,
        };
        let probe = service.healthcheck(image);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = service.child.try_wait().unwrap() {
                panic!(
                    "`neardup {}` exited ({status}) instead of serving:\n{}",
                    args.join(" "),
                    service.log().join("\n")
                );
            }
            let ok = Command::new(&probe[0])
                .args(&probe[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap_or_else(|e| panic!("the HEALTHCHECK command {probe:?}: {e}"))
                .success();
            if ok {
                return service;
            }
            assert!(
                Instant::now() < deadline,
                "the HEALTHCHECK {probe:?} never succeeded:\n{}",
                service.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The image's HEALTHCHECK command, aimed at this process's port.
    fn healthcheck(&self, image: &Image) -> Vec<String> {
        let port = listen_port(&image.cmd);
        let url = format!("127.0.0.1:{port}/healthz");
        assert!(
            image.healthcheck.iter().any(|a| a.ends_with(&url)),
            "HEALTHCHECK {:?} does not ask {url}, where CMD listens",
            image.healthcheck
        );
        image
            .healthcheck
            .iter()
            .map(|a| a.replace(&url, &format!("127.0.0.1:{}/healthz", self.port)))
            .collect()
    }

    fn log(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    /// SIGTERM (what `docker stop` sends): the exit code and every line logged.
    fn stop(mut self) -> (Option<i32>, Vec<String>) {
        let code = sigterm(&mut self.child);
        (code, self.stderr.iter().collect())
    }
}

fn listen_port(args: &[String]) -> u16 {
    let listen: SocketAddr = flag_value(args, "--listen").parse().unwrap();
    listen.port()
}

/// The compose service runs the image's ENTRYPOINT with its command (the image's CMD), its
/// environment and the image's: it serves, the image's HEALTHCHECK passes, `/healthz` is 200
/// with the node's version, logs are JSON, and SIGTERM ends it with exit code 0.
#[test]
fn the_compose_service_serves_as_the_image_would_and_stops_on_sigterm() {
    require_node();
    let image = dockerfile();
    let compose = yaml("docker-compose.yml");
    let service = &compose["services"]["neardup"];
    let args = match &service["command"] {
        Yaml::BadValue => image.cmd.clone(),
        command => strings(command, "command"),
    };
    assert_eq!(
        service["entrypoint"],
        Yaml::BadValue,
        "the service keeps the image's ENTRYPOINT"
    );
    let env = container_env(&image, &compose, service);
    let running = Service::start(&image, args, &env);

    let (status, body) = http(
        (Ipv4Addr::LOCALHOST, running.port),
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert!(health["elasticsearch"].as_str().is_some(), "{health}");

    let (code, log) = running.stop();
    assert_eq!(code, Some(0), "{log:?}");
    assert!(!log.is_empty());
    for line in &log {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not a JSON log line: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
    assert!(
        log.iter().any(|l| l.contains(r#""message":"serving""#)),
        "{log:?}"
    );
}

/// `docker-compose.token.yml` over `docker-compose.yml`: the command is the image's CMD plus
/// `--token-file` at the secret's mount point; run so (the secret's file swapped for a temp
/// file), `/v1` needs the token and the HEALTHCHECK still passes without it.
#[test]
fn the_token_override_guards_v1_and_keeps_the_healthcheck_open() {
    require_node();
    let image = dockerfile();
    let compose = yaml("docker-compose.yml");
    let token = yaml("docker-compose.token.yml");
    let over = &token["services"]["neardup"];
    let mut args = strings(&over["command"], "command");
    assert_eq!(
        args[..args.len() - 2],
        image.cmd[..],
        "the override's command is the image's CMD plus --token-file FILE"
    );
    let secrets = strings(&over["secrets"], "secrets");
    assert_eq!(secrets.len(), 1, "{secrets:?}");
    assert!(
        token["secrets"][secrets[0].as_str()]["file"]
            .as_str()
            .is_some(),
        "the secret `{}` is declared with a file",
        secrets[0]
    );
    // Compose mounts a service's secret NAME at /run/secrets/NAME
    assert_eq!(
        flag_value(&args, "--token-file"),
        format!("/run/secrets/{}", secrets[0])
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "deploy-tok-5e1f\n").unwrap();
    replace_flag_value(&mut args, "--token-file", file.to_str().unwrap());
    let env = container_env(&image, &compose, &compose["services"]["neardup"]);
    let running = Service::start(&image, args, &env);

    let body = r#"{"title": "国家统计局发布最新经济数据", "content": "国家统计局今天发布了最新的经济数据。"}"#;
    let request = |auth: &str| {
        format!(
            "POST /v1/fingerprint HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    assert_eq!(
        http((Ipv4Addr::LOCALHOST, running.port), &request("")).0,
        401
    );
    let (status, answer) = http(
        (Ipv4Addr::LOCALHOST, running.port),
        &request("Authorization: Bearer deploy-tok-5e1f\r\n"),
    );
    assert_eq!(status, 200, "{answer}");
    let (code, log) = running.stop();
    assert_eq!(code, Some(0), "{log:?}");
    assert!(
        log.iter().all(|l| !l.contains("deploy-tok-5e1f")),
        "{log:?}"
    );
}

/// The `docker compose run --rm neardup …` lines of the compose file's header, the README
/// and docs/service.md: the same everywhere, an `es-init`, and run as the container would
/// (ENTRYPOINT, the service's environment) it creates the index with its `_meta`.
#[test]
fn the_documented_es_init_creates_the_index() {
    require_node();
    const RUN: &str = "docker compose run --rm neardup ";
    let mut lines = Vec::new();
    for file in ["docker-compose.yml", "README.md", "docs/service.md"] {
        let found: Vec<String> = repo_file(file)
            .lines()
            .filter_map(|l| l.find(RUN).map(|at| &l[at + RUN.len()..]))
            .map(|l| l.split(" #").next().unwrap().trim().to_owned())
            .collect();
        assert!(!found.is_empty(), "{file} shows no `{RUN}…` line");
        lines.extend(found.into_iter().map(|l| (file, l)));
    }
    let (_, documented) = lines[0].clone();
    for (file, line) in &lines {
        assert_eq!(line, &documented, "{file} differs from docker-compose.yml");
    }
    let mut args: Vec<String> = documented.split_whitespace().map(String::from).collect();
    assert_eq!(args[0], "es-init", "{documented}");

    let image = dockerfile();
    let compose = yaml("docker-compose.yml");
    let env = container_env(&image, &compose, &compose["services"]["neardup"]);
    let index = t::TestIndex::new("deploy");
    replace_flag_value(&mut args, "--index", &index.name);
    let out = Command::new(binary(&image))
        .args(&image.entrypoint[1..])
        .args(&args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`neardup {}`: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mapping = rt.block_on(async {
        let client = t::client().await;
        t::call(
            &client,
            Method::Get,
            &format!("/{}/_mapping", index.name),
            None,
        )
        .await
    });
    let meta = &mapping[&index.name]["mappings"]["_meta"];
    assert!(meta.is_object(), "no _meta recorded: {mapping}");
    assert!(
        mapping[&index.name]["mappings"]["properties"]["minHashBands"].is_object(),
        "{mapping}"
    );
}

/// The compose file's `worker` service, run as the container would (the image's ENTRYPOINT,
/// the service's command with `NEARDUP_INDEX` interpolated, its environment and the image's):
/// an article the application writes into an index es-init prepared is fingerprinted with no
/// command run, and SIGTERM ends the worker with exit code 0 and JSON log lines. It is the
/// service's image, and the image's HEALTHCHECK (the service's /healthz) is off for it.
#[test]
fn the_compose_worker_fingerprints_what_the_application_writes() {
    require_node();
    const INDEX_VAR: &str = "${NEARDUP_INDEX:-articles}";
    let image = dockerfile();
    let compose = yaml("docker-compose.yml");
    let service = &compose["services"]["worker"];
    assert_eq!(
        service["build"], compose["services"]["neardup"]["build"],
        "the worker is built like the service: one image"
    );
    assert_eq!(
        service["entrypoint"],
        Yaml::BadValue,
        "the worker keeps the image's ENTRYPOINT"
    );
    assert_eq!(
        service["healthcheck"]["disable"],
        Yaml::Boolean(true),
        "the image's HEALTHCHECK asks /healthz, which the worker does not serve"
    );
    let mut args = strings(&service["command"], "command");
    assert_eq!(args[0], "worker", "{args:?}");
    assert_eq!(flag_value(&args, "--index"), INDEX_VAR, "{args:?}");
    let index = t::TestIndex::new("deploy-worker");
    replace_flag_value(&mut args, "--index", &index.name);
    let env = container_env(&image, &compose, service);
    let run = |args: &[String]| {
        let mut command = Command::new(binary(&image));
        command
            .args(&image.entrypoint[1..])
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };
    let out = run(&["es-init".into(), "--index".into(), index.name.clone()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut worker = run(&args).spawn().unwrap();
    let stderr = worker.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (id, article) = t::shared_articles(1).remove(0);
    let fingerprinted = rt.block_on(async {
        let client = t::client().await;
        // The application's write: a plain index request, no neardup in between.
        t::call(
            &client,
            Method::Put,
            &format!("/{}/_doc/{id}?refresh=true", index.name),
            Some(article),
        )
        .await;
        // Within the worker's interval (10 s) and one pass.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (src, _) = t::get(&client, &index.name, &id).await;
            if src["minHashSignature"].is_string() || Instant::now() > deadline {
                return src;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let code = sigterm(&mut worker);
    let log = log.join().unwrap();
    assert!(
        fingerprinted["minHashSignature"].is_string() && fingerprinted["simHash"].is_i64(),
        "not fingerprinted within 60 s: {fingerprinted}\n{}",
        log.join("\n")
    );
    assert_eq!(code, Some(0), "{log:?}");
    for line in &log {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not a JSON log line: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
}

/// The tag of an image reference (`name:TAG`).
fn tag(image: &str) -> &str {
    image.rsplit_once(':').map(|(_, t)| t).unwrap_or("latest")
}

/// `1.89` as `[1, 89, 0]`, comparable with `1.89.0`.
fn version(v: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = v
        .split('.')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("version {v}")))
        .collect();
    parts.resize(3, 0);
    parts
}

/// The default version `scripts/es-up` starts for `engine` (`es8)` / `es9)` lines).
fn es_up_version(engine: &str) -> String {
    let script = repo_file("scripts/es-up");
    let line = script
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{engine})")) && l.contains("ES_VERSION:-"))
        .unwrap_or_else(|| panic!("scripts/es-up has no `{engine})` line with ES_VERSION"));
    let from = line.find("ES_VERSION:-").unwrap() + "ES_VERSION:-".len();
    line[from..].split('}').next().unwrap().to_owned()
}

/// What the files name agrees with what is tested: the Elasticsearch images are the versions
/// `scripts/es-up` runs in CI, the Rust image can build the locked dependencies, builder and
/// runtime are one Debian release, the published port is the one the service listens on.
#[test]
fn the_files_name_the_versions_and_ports_that_are_tested() {
    let compose = yaml("docker-compose.yml");
    for (service, engine) in [("elasticsearch", "es9"), ("es8", "es8")] {
        let image = compose["services"][service]["image"].as_str().unwrap();
        assert!(
            image.starts_with("docker.elastic.co/elasticsearch/elasticsearch:"),
            "{image}"
        );
        assert_eq!(
            tag(image),
            es_up_version(engine),
            "docker-compose.yml's `{service}` is not the version ES_ENGINE={engine} scripts/es-up tests"
        );
    }

    let image = dockerfile();
    // rust:1.95-slim-bookworm
    let (rust, debian) = tag(&image.builder_from)
        .split_once("-slim-")
        .or_else(|| tag(&image.builder_from).split_once('-'))
        .unwrap_or_else(|| panic!("builder {}: rust:X.Y[-slim]-DEBIAN", image.builder_from));
    assert!(
        image.builder_from.starts_with("rust:"),
        "{}",
        image.builder_from
    );
    assert_eq!(
        image.runtime_from,
        format!("debian:{debian}-slim"),
        "the runtime stage must be the builder's Debian release (its glibc)"
    );
    let manifest = repo_file("Cargo.toml");
    let msrv = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml's rust-version")
        .trim_matches('"');
    assert!(
        version(rust) >= version(msrv),
        "the builder's Rust {rust} is older than Cargo.toml's rust-version {msrv}"
    );
    // every locked package (for this platform) builds with the builder's Rust: `--locked`
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(String::from))
        .unwrap();
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--locked",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    for package in metadata["packages"].as_array().unwrap() {
        if let Some(needs) = package["rust_version"].as_str() {
            assert!(
                version(rust) >= version(needs),
                "{} {} needs Rust {needs}; the builder has {rust}",
                package["name"],
                package["version"]
            );
        }
    }
    let user = image.user.split(':').next().unwrap();
    assert!(
        user != "root" && user != "0",
        "USER {}: run as non-root",
        image.user
    );

    // TLS trusts the roots compiled in (webpki-roots), so the image needs no ca-certificates
    let lock = repo_file("Cargo.lock");
    assert!(lock.contains("name = \"webpki-roots\""));
    for native in [
        "rustls-native-certs",
        "openssl-sys",
        "rustls-platform-verifier",
    ] {
        assert!(
            !lock.contains(&format!("name = \"{native}\"")),
            "{native} reads the system's CA bundle: install ca-certificates in the Dockerfile's runtime stage"
        );
    }

    let service = &compose["services"]["neardup"];
    let listen: SocketAddr = flag_value(&image.cmd, "--listen").parse().unwrap();
    assert!(
        listen.ip().is_unspecified(),
        "CMD listens on {listen}: inside a container only 0.0.0.0 is reachable from the published port"
    );
    let ports = strings(&service["ports"], "ports");
    assert_eq!(ports.len(), 1, "{ports:?}");
    let (host_ip, container_port) = published(&ports[0]);
    assert_eq!(
        container_port,
        listen.port(),
        "published {} but CMD listens on {listen}",
        ports[0]
    );
    assert_eq!(
        host_ip, "127.0.0.1",
        "publish on loopback only: {}",
        ports[0]
    );
    assert_eq!(image.expose, [listen.port().to_string()]);
    assert_eq!(
        service["depends_on"]["elasticsearch"]["condition"].as_str(),
        Some("service_healthy")
    );
    assert!(compose["services"]["elasticsearch"]["healthcheck"]["test"]
        .as_vec()
        .is_some());
    assert_eq!(service["build"].as_str(), Some("."));

    // the build context: big local directories left out, nothing the build compiles in
    let ignored: Vec<String> = repo_file(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_matches('/').to_owned())
        .collect();
    for big in ["target", ".cache", ".git"] {
        assert!(
            ignored.iter().any(|l| l == big),
            ".dockerignore lacks {big}"
        );
    }
    let needed = compiled_in();
    assert!(needed.len() > 3, "{needed:?}");
    for needed in &needed {
        assert!(
            !ignored.iter().any(|l| l == needed || l == "*" || l == "**"),
            ".dockerignore leaves out {needed}, which the build needs"
        );
    }
}

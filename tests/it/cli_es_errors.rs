//! Elasticsearch commands against a node that is down, or a fake node on loopback that
//! answers with errors: they fail at once in one line, and no credential reaches stderr,
//! whatever form it was given in (URL, flags, environment) and whatever the server echoes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};

const SECRET: &str = "s3cretPW";

/// Flags and environment variables that carry a credential.
type CredentialForm = (Vec<String>, Vec<(&'static str, String)>);

/// Runs neardup with `args` and `env`, no inherited Elasticsearch settings; (code, stdout+stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.args(args).stdin(Stdio::null());
    for var in [
        "NEARDUP_ES_URL",
        "NEARDUP_ES_USER",
        "NEARDUP_ES_PASSWORD",
        "NEARDUP_ES_API_KEY",
        "NEARDUP_ES_CA_CERT",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The Elasticsearch commands, each with `--es URL` appended by the caller.
fn commands(state: &str) -> Vec<Vec<String>> {
    [
        vec!["es-init", "--index", "x"],
        vec!["worker", "--index", "x", "--once"],
        vec!["backfill", "--index", "x", "--state", state, "-q"],
        vec!["similar", "--index", "x", "--id", "a"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect()
}

/// A fake node on loopback: answers `GET /` with a version when `answers_root`, everything
/// else with `status` and an error body that echoes the secret. Serves `max` connections.
fn fake_node(answers_root: bool, status: u16, max: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max) {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (code, text) = if answers_root && request_line.starts_with("GET / ") {
                (200, r#"{"version":{"number":"7.10.2"}}"#.to_owned())
            } else {
                (
                    status,
                    format!(
                        r#"{{"error":{{"type":"security_exception","reason":"bad password [{SECRET}] for user [elastic]"}},"status":{status}}}"#
                    ),
                )
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    url
}

#[test]
fn a_refused_connection_fails_at_once_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").to_str().unwrap().to_owned();
    for mut cmd in commands(&state) {
        cmd.extend(["--es".into(), "http://127.0.0.1:1".into()]);
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let (code, out) = run(&args, &[]);
        assert_eq!(code, 1, "{cmd:?}: {out}");
        assert!(!out.contains("retrying"), "{cmd:?}: no retries: {out}");
        assert_eq!(
            out.trim_end().lines().count(),
            1,
            "{cmd:?}: one line: {out}"
        );
        assert!(out.contains("cannot reach Elasticsearch"), "{cmd:?}: {out}");
    }
}

#[test]
fn no_url_form_prints_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").to_str().unwrap().to_owned();
    // Every command reads the URL through the same code; each form goes to two of them.
    for (i, url) in [
        format!("elastic:{SECRET}@127.0.0.1:9200"),
        format!("elastic:{SECRET}@127.0.0.1"),
        format!("ftp://elastic:{SECRET}@127.0.0.1:1"),
        format!("http://elastic:{SECRET}@127.0.0.1:1"),
        format!("http://elastic:{SECRET}@127.0.0.1:1/"),
        "http://elastic:s3c#retPW@127.0.0.1:1".to_owned(),
        "http://elastic:s3c/retPW@127.0.0.1:1".to_owned(),
        format!("http://elastic:{SECRET}@[::1"),
        format!("http://127.0.0.1:1,elastic:{SECRET}@127.0.0.1:1"),
    ]
    .into_iter()
    .enumerate()
    {
        for mut cmd in commands(&state).into_iter().skip(i % 4).step_by(2) {
            cmd.extend(["--es".into(), url.clone()]);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let (code, out) = run(&args, &[]);
            assert_ne!(code, 0, "{cmd:?}: {out}");
            for part in [SECRET, "s3c", "retPW"] {
                assert!(!out.contains(part), "{cmd:?}: {out}");
            }
            let (code, out) = run(
                &cmd[..cmd.len() - 2]
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                &[("NEARDUP_ES_URL", &url)],
            );
            assert_ne!(code, 0, "{cmd:?} (env): {out}");
            assert!(
                !out.contains(SECRET) && !out.contains("s3c"),
                "{cmd:?} (env): {out}"
            );
        }
    }
}

#[test]
fn credentials_from_flags_and_env_never_print_even_when_the_server_echoes_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").to_str().unwrap().to_owned();
    let key = format!("keyid:{SECRET}");
    let flag_forms: Vec<CredentialForm> = vec![
        (
            vec![
                "--es-user".into(),
                "elastic".into(),
                "--es-password".into(),
                SECRET.into(),
            ],
            vec![],
        ),
        (
            vec![],
            vec![
                ("NEARDUP_ES_USER", "elastic".into()),
                ("NEARDUP_ES_PASSWORD", SECRET.into()),
            ],
        ),
        (vec!["--es-api-key".into(), key.clone()], vec![]),
        (vec![], vec![("NEARDUP_ES_API_KEY", key.clone())]),
        (vec![], vec![("NEARDUP_ES_API_KEY", SECRET.into())]),
    ];
    for (flags, env) in &flag_forms {
        // 401 at the first contact; then a node that answers but fails every request with 503
        // (retried by `similar` with warnings in the log): the body echoes the secret.
        for (answers_root, status) in [(false, 401), (true, 503), (false, 500)] {
            for mut cmd in commands(&state) {
                if cmd[0] != "similar" && answers_root {
                    continue; // the others' retries ride out minutes of 503s
                }
                let url = fake_node(answers_root, status, 64);
                cmd.extend(["--es".into(), url]);
                cmd.extend(flags.iter().cloned());
                let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let (code, out) = run(&args, &env);
                assert_ne!(code, 0, "{cmd:?}: {out}");
                assert!(!out.contains(SECRET), "{cmd:?} {env:?} {status}: {out}");
                assert!(
                    out.contains("<redacted>") || status != 401,
                    "{cmd:?}: the echo is shown redacted: {out}"
                );
            }
        }
    }
}

#[test]
fn basic_auth_over_plain_http_to_another_host_is_warned_about() {
    // 0.0.0.0 is not a loopback address, but connecting to it stays on this machine.
    let (_, out) = run(
        &[
            "es-init",
            "--index",
            "x",
            "--es",
            "http://elastic:pw1234@0.0.0.0:1",
        ],
        &[],
    );
    assert!(
        out.contains("unencrypted") && out.contains("https://"),
        "{out}"
    );
    assert!(!out.contains("pw1234"), "{out}");
    let (_, out) = run(
        &[
            "es-init",
            "--index",
            "x",
            "--es",
            "http://elastic:pw1234@127.0.0.1:1",
        ],
        &[],
    );
    assert!(
        !out.contains("unencrypted"),
        "loopback is not warned about: {out}"
    );
}

/// Runs `openssl` with `args` in `dir`; panics with its output when it fails.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the openssl command runs (it makes the test's CA and certificate)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HTTPS endpoint on loopback whose certificate is signed by a CA of its own (as a
/// secured Elasticsearch's is): `openssl s_server` with a CA and a certificate for
/// 127.0.0.1 made in `dir`. Returns the server (kill it when done), its URL and the CA's PEM.
fn tls_endpoint(dir: &std::path::Path) -> (std::process::Child, String, std::path::PathBuf) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=neardup-test-ca",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "node.key",
            "-out",
            "node.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "node.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "node.pem",
            "-days",
            "2",
            "-extfile",
            "ext",
        ],
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("openssl")
        .current_dir(dir)
        .args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
        .args(["-cert", "node.pem", "-key", "node.key", "-www"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // It prints ACCEPT once it listens.
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ACCEPT") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "openssl s_server did not start"
        );
    }
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (
        server,
        format!("https://127.0.0.1:{port}"),
        dir.join("ca.pem"),
    )
}

/// Issue 32: a TLS error names the flag and the variable that give the cluster's CA, at once
/// (a certificate problem is not retried), for every command; with the CA given (flag or
/// variable) the connection gets past TLS (the endpoint is no Elasticsearch, which is the
/// next error).
#[test]
fn an_untrusted_certificate_names_es_ca_cert() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, url, ca) = tls_endpoint(dir.path());
    let state = dir.path().join("state").to_str().unwrap().to_owned();
    for mut cmd in commands(&state) {
        cmd.extend(["--es".into(), url.clone()]);
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let (code, out) = run(&args, &[]);
        assert_eq!(code, 1, "{cmd:?}: {out}");
        assert!(out.contains("certificate is not trusted"), "{cmd:?}: {out}");
        assert!(
            out.contains("--es-ca-cert") && out.contains("NEARDUP_ES_CA_CERT"),
            "{cmd:?}: {out}"
        );
        assert!(!out.contains("retrying"), "{cmd:?}: not retried: {out}");
    }
    let ca = ca.to_str().unwrap();
    let with_flag = run(
        &[
            "similar",
            "--index",
            "x",
            "--id",
            "a",
            "--es",
            &url,
            "--es-ca-cert",
            ca,
        ],
        &[],
    );
    let with_env = run(
        &["similar", "--index", "x", "--id", "a", "--es", &url],
        &[("NEARDUP_ES_CA_CERT", ca)],
    );
    for (code, out) in [with_flag, with_env] {
        assert_eq!(code, 1, "{out}");
        assert!(!out.contains("TLS"), "{out}");
        assert!(out.contains("is this Elasticsearch?"), "past TLS: {out}");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

//! ARCHITECTURE.md is true to the code: the crates and the arrows between them are the ones it
//! draws, the core links no network, database or async crate, and inside each crate the
//! modules import only modules listed below them (arrows point down, so there is no circle).
//!
//! The page declares three tables that this test reads: "Crates" (each product crate, its
//! directory and the product crates it depends on, lowest first), "Layers" (each crate's
//! modules, lowest first) and "Arrows up still to remove" (the known exceptions, which may
//! only shrink: a listed arrow that is gone fails too, so the list is kept true).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the markdown table under the heading `## {heading}`, cells trimmed, header
/// and separator left out.
fn table(page: &str, heading: &str) -> Vec<Vec<String>> {
    let start = page
        .lines()
        .position(|l| l.trim() == format!("## {heading}"))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no `## {heading}` section"));
    page.lines()
        .skip(start + 1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The names written in code spans in a cell: "`a`, `b`" → [a, b].
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap()
}

/// The crates table: name → (directory, declared product dependencies), in page order.
fn declared_crates(page: &str) -> Vec<(String, String, BTreeSet<String>)> {
    table(page, "Crates")
        .into_iter()
        .map(|row| {
            assert!(
                row.len() >= 3,
                "Crates row {row:?}: | crate | directory | depends on |"
            );
            let name = names(&row[0]).pop().expect("a crate name in code");
            let dir = names(&row[1]).pop().expect("a directory in code");
            (name, dir, names(&row[2]).into_iter().collect())
        })
        .collect()
}

/// What `cargo ARGS` prints at the workspace's root, offline; fails the test if cargo fails.
fn cargo_stdout(args: &[&str]) -> Vec<u8> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .arg("--offline")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_crate_graph_is_the_one_architecture_md_draws() {
    let page = architecture();
    let declared = declared_crates(&page);
    let product: BTreeSet<&str> = declared.iter().map(|(n, _, _)| n.as_str()).collect();

    // Lowest first: every dependency is listed above the crate that has it.
    for (at, (name, _, deps)) in declared.iter().enumerate() {
        for dep in deps {
            let below = declared[..at].iter().any(|(n, _, _)| n == dep);
            assert!(
                below,
                "ARCHITECTURE.md: {name} depends on {dep}, which is not listed above it (an arrow up, or a circle)"
            );
        }
    }

    let meta: Value = serde_json::from_slice(&cargo_stdout(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
    ]))
    .unwrap();
    let mut actual: BTreeMap<String, (PathBuf, BTreeSet<String>)> = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_owned();
        // The workshop (benchmarks, fuzzing) is never published and sits beside the product.
        if package["publish"] == serde_json::json!([]) {
            continue;
        }
        let dir = Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_owned();
        let deps = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .filter(|d| d.starts_with("neardup"))
            .collect();
        actual.insert(name, (dir, deps));
    }
    let actual_names: BTreeSet<&str> = actual.keys().map(String::as_str).collect();
    assert_eq!(
        actual_names, product,
        "the product crates of the workspace and the Crates table of ARCHITECTURE.md differ"
    );
    for (name, dir, deps) in &declared {
        let (actual_dir, actual_deps) = &actual[name];
        assert_eq!(
            actual_dir.canonicalize().unwrap(),
            root().join(dir).canonicalize().unwrap(),
            "ARCHITECTURE.md: {name} is not in {dir}"
        );
        assert_eq!(
            actual_deps, deps,
            "ARCHITECTURE.md: the product crates {name} depends on"
        );
    }
}

#[test]
fn the_core_links_no_network_database_or_async_crate() {
    let tree = String::from_utf8(cargo_stdout(&[
        "tree",
        "-p",
        "neardup-core",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]))
    .unwrap();
    let linked: BTreeSet<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    assert!(linked.contains("jieba-rs"), "{tree}");
    for banned in ["tokio", "reqwest", "hyper", "elasticsearch", "axum", "redb"] {
        assert!(
            !linked.contains(banned),
            "neardup-core links {banned}: the core does no network, database or async work"
        );
    }
}

/// A crate's source as its modules: `lib` (the crate root's own items) and every file or
/// directory directly under `src/`, with the text of each file (comments left out).
struct CrateSource {
    /// Module name → its files (path relative to `src/`, text).
    files: BTreeMap<String, Vec<(String, String)>>,
    /// Names the crate root re-exports (`pub use m::{A, B}`) → the module they come from.
    reexports: BTreeMap<String, String>,
    /// Names of items the crate root defines itself.
    root_items: BTreeSet<String>,
    /// The crate root's own code: `lib.rs` less its `mod` declarations and re-exports (the
    /// front, which is no arrow).
    root_code: String,
}

/// The code of a file as the layers see it: comment lines and inline test modules
/// (`#[cfg(test)] mod … { … }`) left out. A module's tests may build their fixtures with
/// modules above it; the arrows that count are those of the code users run.
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let code = l.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if code == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                opened |= l.contains('{');
                if opened && depth <= 0 {
                    break;
                }
            }
            continue;
        }
        out.push(l);
    }
    out.join("\n")
}

fn read_crate(dir: &Path) -> CrateSource {
    let src = dir.join("src");
    let mut files: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let first = rel.split('/').next().unwrap().trim_end_matches(".rs");
            let module = first.to_owned();
            let text = code_of(&std::fs::read_to_string(&path).unwrap());
            files.entry(module).or_default().push((rel, text));
        }
    }
    let lib = files["lib"][0].1.clone();
    let mut reexports = BTreeMap::new();
    let mut root_items = BTreeSet::new();
    let mut own = Vec::new();
    for statement in lib.split(';') {
        let s = statement.trim().rsplit(']').next().unwrap().trim(); // after attributes
        let reexport = s
            .strip_prefix("pub use ")
            .or_else(|| s.strip_prefix("pub(crate) use "));
        if let Some(rest) = reexport {
            let rest = rest.trim_start_matches("self::");
            let Some((module, names)) = rest.split_once("::") else {
                continue;
            };
            for name in names
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|n| !n.is_empty())
            {
                reexports.insert(name.to_owned(), module.to_owned());
            }
        } else if !(s.starts_with("mod ") || s.starts_with("pub mod ")) {
            own.push(statement);
        }
    }
    for line in lib.lines() {
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.peek() {
            if w.starts_with("pub") || *w == "async" || *w == "unsafe" {
                words.next();
            } else {
                break;
            }
        }
        if let (Some(kind), Some(name)) = (words.next(), words.next()) {
            if ["struct", "enum", "fn", "type", "const", "static", "trait"].contains(&kind) {
                root_items.insert(ident_prefix(name));
            }
        }
    }
    CrateSource {
        files,
        reexports,
        root_items,
        root_code: own.join(";"),
    }
}

/// The identifier `s` starts with (empty when it starts with none).
fn ident_prefix(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first segments of what a path reaches after `prefix`: `crate::a::B` → [a],
/// `crate::{a::B, C}` → [a, C].
fn heads_after(text: &str, prefix: &str) -> Vec<String> {
    let mut heads = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        // `super::super::x` is read once, at its longest prefix.
        if prefix.starts_with("super::") && text[..at].ends_with("super::") {
            continue;
        }
        if at > 0 {
            let before = text[..at].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' || before == ':' {
                continue;
            }
        }
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if c == ',' && depth == 1 {
                    items.push(std::mem::take(&mut item));
                } else {
                    item.push(c);
                }
            }
            items.push(item);
            for item in items {
                let head = ident_prefix(item.trim());
                if !head.is_empty() {
                    heads.push(head);
                }
            }
        } else {
            let head = ident_prefix(rest);
            if !head.is_empty() {
                heads.push(head);
            }
        }
    }
    heads
}

/// Every arrow between two modules of a crate: (from, to) → the files it is in.
fn module_arrows(source: &CrateSource) -> BTreeMap<(String, String), BTreeSet<String>> {
    let modules: BTreeSet<&String> = source.files.keys().collect();
    let target = |head: &str| -> Option<String> {
        if modules.contains(&head.to_owned()) {
            Some(head.to_owned())
        } else if let Some(m) = source.reexports.get(head) {
            Some(m.clone())
        } else if source.root_items.contains(head) {
            Some("lib".to_owned())
        } else {
            None
        }
    };
    let mut arrows: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (module, files) in &source.files {
        for (rel, text) in files {
            let mut heads = heads_after(text, "crate::");
            if module == "lib" {
                // The front: declaring modules and re-exporting them is no arrow; what the
                // root's own items use is.
                for m in &modules {
                    let m = m.as_str();
                    if m != "lib" && !heads_after(&source.root_code, &format!("{m}::")).is_empty() {
                        heads.push(m.to_owned());
                    }
                }
            } else {
                // `super::` reaches the crate root from a file directly under src/ or from a
                // directory's mod.rs; `super::super::` from a file one directory down.
                let parts: Vec<&str> = rel.split('/').collect();
                let depth = if rel.ends_with("mod.rs") {
                    parts.len() - 1
                } else {
                    parts.len()
                };
                heads.extend(heads_after(text, &"super::".repeat(depth)));
            }
            for head in heads {
                if let Some(to) = target(&head) {
                    if &to != module {
                        arrows
                            .entry((module.clone(), to))
                            .or_default()
                            .insert(rel.clone());
                    }
                }
            }
        }
    }
    arrows
}

#[test]
fn modules_import_only_the_modules_below_them() {
    let page = architecture();
    let dirs: BTreeMap<String, String> = declared_crates(&page)
        .into_iter()
        .map(|(n, d, _)| (n, d))
        .collect();
    let mut allowed: BTreeSet<(String, String, String)> = table(&page, "Arrows up still to remove")
        .into_iter()
        .map(|row| {
            let n = names(&row[0]);
            assert_eq!(n.len(), 3, "Arrows up row {row:?}: `crate` | `from` | `to`");
            (n[0].clone(), n[1].clone(), n[2].clone())
        })
        .collect();
    let mut problems = Vec::new();
    let layers = table(&page, "Layers");
    assert!(!layers.is_empty());
    for row in layers {
        let krate = names(&row[0]).pop().expect("a crate name");
        let order = names(&row[1]);
        let dir = root().join(&dirs[&krate]);
        let source = read_crate(&dir);
        let found: BTreeSet<&String> = source.files.keys().collect();
        let listed: BTreeSet<&String> = order.iter().collect();
        if found != listed {
            problems.push(format!(
                "{krate}: modules in the code {found:?}, in ARCHITECTURE.md {listed:?}"
            ));
            continue;
        }
        let rank = |m: &str| order.iter().position(|o| o == m).unwrap();
        for ((from, to), files) in module_arrows(&source) {
            if rank(&to) < rank(&from) {
                continue;
            }
            let key = (krate.clone(), from.clone(), to.clone());
            if !allowed.remove(&key) {
                problems.push(format!(
                    "{krate}: {from} → {to} points up (in {files:?}): move what {from} needs below it, or {from} above {to}"
                ));
            }
        }
    }
    for (krate, from, to) in allowed {
        problems.push(format!(
            "{krate}: the arrow {from} → {to} is gone: take it off \"Arrows up still to remove\""
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

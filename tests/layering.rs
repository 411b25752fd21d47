//! The crate's layers hold: every top-level module has a layer (`// layer N` after its `pub mod`
//! in `src/lib.rs`), uses only modules of its own layer or a lower one, and the module graph has
//! no cycle. A violation names the file and line: `src/route/mod.rs:8: route (layer 4) uses
//! proxy (layer 7)`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `module -> layer`, from the marks in `src/lib.rs`; unmarked modules have no entry.
fn layers(lib: &str) -> (BTreeMap<String, u8>, Vec<String>) {
    let mut marked = BTreeMap::new();
    let mut unmarked = Vec::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub mod ") else {
            continue;
        };
        let (name, comment) = rest.split_once(';').unwrap_or((rest, ""));
        let layer = comment
            .trim()
            .strip_prefix("// layer ")
            .and_then(|n| n.trim().parse().ok());
        match layer {
            Some(n) => {
                marked.insert(name.trim().to_string(), n);
            }
            None => unmarked.push(name.trim().to_string()),
        }
    }
    (marked, unmarked)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/` (`src/proxy/lease/mod.rs` -> proxy::lease).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// The top-level modules a line of code names: `crate::x`, `crate::{x, y}`, and `super::`
/// chains that climb to the crate root.
fn uses(line: &str, path: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push(name);
            }
        } else {
            out.push(
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
    }
    let mut rest = line;
    while let Some(i) = rest.find("super::") {
        let chain = &rest[i..];
        let ups = chain
            .matches("super::")
            .count()
            .min(chain.split("super::").take_while(|s| s.is_empty()).count());
        let climbed = chain.trim_start_matches("super::");
        if ups >= path.len() {
            // Climbed to the crate root: the next name is a top-level module.
            out.push(
                climbed
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
        rest = &rest[i + 7 * ups.max(1)..];
    }
    out.retain(|m| !m.is_empty() && m != "self" && m != "super");
    out
}

#[test]
fn layers_hold_and_modules_form_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let (layer, unmarked) = layers(&lib);
    assert!(
        unmarked.is_empty(),
        "modules without a `// layer N` mark in src/lib.rs: {unmarked:?}"
    );
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(root.join("src")).expect("under src");
        let path = module_path(rel);
        let Some(module) = path.first().cloned() else {
            continue;
        };
        let Some(&own) = layer.get(&module) else {
            continue; // lib.rs, main.rs, bin/
        };
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for dep in uses(code, &path) {
                if dep == module {
                    continue;
                }
                match layer.get(&dep) {
                    Some(&d) if d > own => problems.push(format!(
                        "src/{}:{}: {module} (layer {own}) uses {dep} (layer {d})",
                        rel.display(),
                        n + 1
                    )),
                    Some(_) => {
                        edges.entry(module.clone()).or_default().insert(dep);
                    }
                    None => {} // std, a dependency crate, or a macro path
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "upward imports:\n{}",
        problems.join("\n")
    );
    // No cycle, even among modules of one layer.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            return Some(stack[at..].to_vec());
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for d in edges.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(d, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in layer.keys() {
        let cycle = visit(m, &edges, &mut Vec::new(), &mut done);
        assert!(cycle.is_none(), "module cycle: {cycle:?}");
    }
}

#[test]
fn the_import_reader_sees_every_form() {
    let p = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(uses("use crate::http::Head;", &p("proxy")), ["http"]);
    assert_eq!(
        uses("use crate::{clock, http::Head};", &p("proxy")),
        ["clock", "http"]
    );
    assert_eq!(
        uses("x = super::super::route::Name;", &p("proxy::lease")),
        ["route"]
    );
    assert!(uses("use super::judge;", &p("proxy::attempt")).is_empty());
    assert_eq!(uses("super::timer::now()", &p("proxy")), ["timer"]);
}

/// The request path's drivers: only they may use one another.
const PROXY_DRIVERS: &[&str] = &["connection", "request", "attempts"];

#[test]
fn request_phases_never_use_a_driver() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proxy");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).expect("under src/proxy");
        let first = module_path(rel).first().cloned().unwrap_or_default();
        if first.is_empty() || PROXY_DRIVERS.contains(&first.as_str()) {
            continue; // mod.rs re-exports, and the drivers themselves
        }
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for d in PROXY_DRIVERS {
                let used = [
                    format!("super::{d}::"),
                    format!("super::{d};"),
                    format!("proxy::{d}::"),
                ]
                .iter()
                .any(|p| code.contains(p.as_str()));
                if used {
                    problems.push(format!(
                        "src/proxy/{}:{}: phase {first} uses the driver {d}",
                        rel.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every error code Ringside can answer appears in the HTTP API reference (or, for the lease
/// codes, the leases reference): the table in the docs is the answer table in the code.
#[test]
fn every_error_code_is_in_the_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = String::new();
    for page in ["http-api.md", "leases.md", "admin-api.md"] {
        docs += &std::fs::read_to_string(root.join("docs/reference").join(page)).expect("doc page");
    }
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut missing = BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        if rel.contains("simulate") || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read");
        // Unit tests make up codes of their own.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for opener in ["ApiError::new(", "bad_request(", "lease_error("] {
            for piece in code.split(opener).skip(1) {
                let args = piece.trim_start();
                // ApiError::new(status, "code", ..) and lease_error(status, "code", ..);
                // bad_request("code", ..).
                let after = match args.split_once(',') {
                    Some((first, rest)) if first.trim().parse::<u16>().is_ok() => rest,
                    _ => args,
                };
                let Some(quoted) = after.trim_start().strip_prefix('"') else {
                    continue;
                };
                let name: String = quoted
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && !docs.contains(&format!("`{name}`")) {
                    missing.insert(format!("{name} ({rel})"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "error codes missing from docs/reference: {missing:?}"
    );
}

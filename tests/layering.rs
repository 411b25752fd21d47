//! The crate's layers hold: every top-level module has a layer (`// layer N` after its `pub mod`
//! in `src/lib.rs`), uses only modules of its own layer or a lower one, and the module graph has
//! no cycle; between files, no circle of imports takes in more than two files; in the request
//! path, `proxy/exchange.rs` (the context every phase shares) imports no other file of `proxy`,
//! and no phase uses a driver. Imports are read as whole statements (a `use` group spread over
//! lines is one), with paths inside expressions too. A violation names the file and line:
//! `src/route/mod.rs:8: route (layer 4) uses proxy (layer 7)`.

mod house;
use house::{Import, imports, module_path, rust_files, src_files};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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

/// The first cycle among `edges`, if any.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
            if let Some(c) = visit(d, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
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
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, path, text) in src_files(root) {
        let Some(module) = path.first().cloned() else {
            continue;
        };
        let Some(&own) = layer.get(&module) else {
            continue; // lib.rs, main.rs, bin/
        };
        for Import { line, target } in imports(&text, &path) {
            let Some(dep) = target.first().filter(|d| **d != module) else {
                continue;
            };
            match layer.get(dep) {
                Some(&d) if d > own => problems.push(format!(
                    "src/{rel}:{line}: {module} (layer {own}) uses {dep} (layer {d})"
                )),
                Some(_) => {
                    edges.entry(module.clone()).or_default().insert(dep.clone());
                }
                None => {} // std, a dependency crate, or a macro path
            }
        }
    }
    assert!(
        problems.is_empty(),
        "upward imports:\n{}",
        problems.join("\n")
    );
    let c = cycle(&edges);
    assert!(c.is_none(), "module cycle: {c:?}");
}

/// The files of `src` each file imports (by module path, resolved to the deepest module that
/// has a file of its own).
fn file_edges(root: &Path) -> BTreeMap<Vec<String>, BTreeMap<Vec<String>, usize>> {
    let files: Vec<_> = src_files(root).collect();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(_, p, _)| p.clone()).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeMap<Vec<String>, usize>> = BTreeMap::new();
    for (_, path, text) in &files {
        for Import { line, target } in imports(text, path) {
            let file = (0..=target.len())
                .rev()
                .map(|k| target[..k].to_vec())
                .find(|p| known.contains(p) && !p.is_empty());
            if let Some(f) = file.filter(|f| f != path) {
                edges
                    .entry(path.clone())
                    .or_default()
                    .entry(f)
                    .or_insert(line);
            }
        }
    }
    edges
}

/// Strongly connected groups of files (Tarjan), largest first.
fn circles(edges: &BTreeMap<Vec<String>, BTreeMap<Vec<String>, usize>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeMap<Vec<String>, usize>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn connect<'a>(t: &mut T<'a>, v: &'a Vec<String>) {
        t.index.insert(v, (t.next, t.next));
        t.next += 1;
        t.stack.push(v);
        for w in t.edges.get(v).into_iter().flat_map(|m| m.keys()) {
            if !t.index.contains_key(w) {
                connect(t, w);
                let low = t.index[w].1.min(t.index[v].1);
                t.index.entry(v).and_modify(|e| e.1 = low);
            } else if t.stack.contains(&w) {
                let low = t.index[w].0.min(t.index[v].1);
                t.index.entry(v).and_modify(|e| e.1 = low);
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                group.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            t.out.push(group);
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            connect(&mut t, v);
        }
    }
    t.out.sort_by_key(|g| std::cmp::Reverse(g.len()));
    t.out
}

#[test]
fn no_circle_of_imports_takes_in_more_than_two_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let big: Vec<_> = circles(&file_edges(root))
        .into_iter()
        .filter(|g| g.len() > 2)
        .collect();
    assert!(
        big.is_empty(),
        "files importing one another in a circle: {big:?}"
    );
}

#[test]
fn the_request_context_is_a_leaf_of_the_request_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let leaf = vec!["proxy".to_string(), "exchange".to_string()];
    let edges = file_edges(root);
    let into_proxy: Vec<String> = edges
        .get(&leaf)
        .into_iter()
        .flatten()
        .filter(|(f, _)| f.first().is_some_and(|m| m == "proxy"))
        .map(|(f, line)| format!("src/proxy/exchange.rs:{line}: uses {}", f.join("::")))
        .collect();
    assert!(into_proxy.is_empty(), "{}", into_proxy.join("\n"));
}

#[test]
fn the_import_reader_sees_every_form() {
    let p = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let targets = |text: &str, at: &str| -> Vec<String> {
        imports(text, &p(at))
            .into_iter()
            .map(|i| format!("{}:{}", i.line, i.target.join("::")))
            .collect()
    };
    assert_eq!(targets("use crate::http::Head;", "proxy"), ["1:http::Head"]);
    assert_eq!(
        targets("use crate::{clock, http::Head};", "proxy"),
        ["1:clock", "1:http::Head"]
    );
    // A group spread over lines is one statement, nested groups too.
    assert_eq!(
        targets(
            "// a comment\nuse crate::{\n    route::{self, Candidate},\n    proxy, // why\n};\n",
            "state"
        ),
        ["2:route::self", "2:route::Candidate", "2:proxy"]
    );
    assert_eq!(
        targets("x = super::super::route::Name;", "proxy::lease::x"),
        ["1:proxy::route::Name"]
    );
    assert_eq!(
        targets("let t = super::timer::now();", "proxy::a"),
        ["1:proxy::timer::now"]
    );
    assert_eq!(
        targets("use super::judge;", "proxy::attempt"),
        ["1:proxy::judge"]
    );
    assert!(targets("\"crate::x in a string\"", "proxy").is_empty());
    // Leaving the crate root names nothing of the crate.
    assert!(targets("super::super::x", "proxy").is_empty());
}

/// The request path's drivers: only they may use one another.
const PROXY_DRIVERS: &[&str] = &["connection", "request", "attempts"];

#[test]
fn request_phases_never_use_a_driver() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for (rel, path, text) in src_files(root) {
        let [top, first, ..] = path.as_slice() else {
            continue; // proxy/mod.rs re-exports
        };
        if top != "proxy" || PROXY_DRIVERS.contains(&first.as_str()) {
            continue;
        }
        for Import { line, target } in imports(&text, &path) {
            if let [p, d, ..] = target.as_slice()
                && p == "proxy"
                && PROXY_DRIVERS.contains(&d.as_str())
            {
                problems.push(format!(
                    "src/{rel}:{line}: phase {first} uses the driver {d}"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_house_reader_walks_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    rust_files(&root.join("src"), &mut all);
    assert_eq!(src_files(root).count(), all.len());
    assert_eq!(
        module_path(Path::new("proxy/lease/mod.rs")),
        ["proxy", "lease"]
    );
}

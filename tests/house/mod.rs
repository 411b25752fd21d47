//! Reading the crate's source for the house-rule tests (`layering.rs`, `house_rules.rs`): its
//! files with their module paths, and the imports each makes, as whole statements.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// The module path of a file under `src/` (`proxy/lease/mod.rs` -> proxy::lease; `lib.rs` ->
/// nothing).
pub fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// Every file under `root/src`: its path from `src/`, its module path, its text.
pub fn src_files(root: &Path) -> impl Iterator<Item = (String, Vec<String>, String)> {
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files.into_iter().map(move |f| {
        let rel = f.strip_prefix(&src).expect("under src").to_path_buf();
        let text = std::fs::read_to_string(&f).expect("read");
        (rel.display().to_string(), module_path(&rel), text)
    })
}

/// One import: the line its statement begins on, and the path it names from the crate root.
#[derive(Debug, PartialEq, Eq)]
pub struct Import {
    pub line: usize,
    pub target: Vec<String>,
}

/// A line's code: no `//` comment, no string literal's contents.
fn code_of(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        match (in_str, c) {
            (false, '/') if chars.peek() == Some(&'/') => break,
            (false, '"') => in_str = true,
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_str = false,
            (false, c) => out.push(c),
            (true, _) => {}
        }
    }
    out
}

/// The code as statements with the line each begins on: a `use` whole (a group spread over
/// lines joined into one), every other line as it is.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let code = code_of(line);
        if let Some((_, s)) = open.as_mut() {
            s.push(' ');
            s.push_str(code.trim());
            if code.contains(';')
                && let Some(done) = open.take()
            {
                out.push(done);
            }
            continue;
        }
        let t = code.trim_start();
        let is_use = t.starts_with("use ")
            || (t.starts_with("pub") && t.split_whitespace().nth(1) == Some("use"));
        if is_use && !t.contains(';') {
            open = Some((n + 1, code));
        } else {
            out.push((n + 1, code));
        }
    }
    out.extend(open);
    out
}

/// Identifiers and punctuation of a path expression.
fn ident(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The paths under `prefix` in `s` (just after a `::`): `a::b`, `{a, b::{c, d}}`, `self`,
/// `*`; the rest of `s` after them.
fn tail<'a>(s: &'a str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'a str {
    let s = s.trim_start();
    if let Some(mut rest) = s.strip_prefix('{') {
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix('}') {
                return r;
            }
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
                continue;
            }
            let before = rest.len();
            rest = tail(rest, prefix, out);
            if rest.len() == before {
                return rest; // not a path: stop
            }
            // `x as y`: the alias names nothing new.
            if let Some(r) = rest.trim_start().strip_prefix("as ") {
                rest = ident(r.trim_start()).1;
            }
        }
    }
    if let Some(r) = s.strip_prefix('*') {
        out.push(prefix.to_vec());
        return r;
    }
    let (name, rest) = ident(s);
    if name.is_empty() {
        return s;
    }
    let mut path = prefix.to_vec();
    path.push(name.to_string());
    match rest.strip_prefix("::") {
        Some(r) => tail(r, &path, out),
        None => {
            out.push(path);
            rest
        }
    }
}

/// Every path of the crate that `text` (the file of module `path`) names: `crate::…`,
/// `super::…` and `self::…`, in `use` statements and in code, groups expanded, each resolved
/// to the crate root.
pub fn imports(text: &str, path: &[String]) -> Vec<Import> {
    let mut out = Vec::new();
    for (line, s) in statements(text) {
        let mut rest = s.as_str();
        while let Some(at) = ["crate::", "super::", "self::"]
            .iter()
            .filter_map(|k| rest.find(k))
            .min()
        {
            let boundary = rest[..at]
                .chars()
                .last()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            let mut chain = &rest[at..];
            if !boundary {
                rest = &chain[2..];
                continue;
            }
            // The start: `crate`, or `self`, or a run of `super`.
            let mut base: Option<Vec<String>> = Some(path.to_vec());
            if let Some(r) = chain.strip_prefix("crate::") {
                base = Some(Vec::new());
                chain = r;
            } else if let Some(r) = chain.strip_prefix("self::") {
                chain = r;
            } else {
                while let Some(r) = chain.strip_prefix("super::") {
                    base = base.and_then(|mut b| b.pop().map(|_| b));
                    chain = r;
                }
            }
            let mut found = Vec::new();
            rest = tail(chain, &base.clone().unwrap_or_default(), &mut found);
            if base.is_some() {
                out.extend(found.into_iter().map(|target| Import { line, target }));
            }
            if rest.len() == chain.len() {
                rest = &rest[rest.len().min(1)..]; // nothing read: step on
            }
        }
    }
    out
}

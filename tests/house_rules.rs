//! House rules the compiler does not check: files that fit in a head (at most 400 lines, a few
//! named exceptions up to 500, each with its reason), and every error code the code can answer
//! in the reference docs.

mod house;
use house::{rust_files, src_files};
use std::collections::BTreeSet;
use std::path::Path;

/// The most lines a file of `src/`, `tests/` or `benches/` may have.
const LINES: usize = 400;
/// No file may have more, exception or not.
const HARD_LINES: usize = 500;

/// Files allowed between [`LINES`] and [`HARD_LINES`], and why splitting them would not help
/// a reader.
const LONGER: &[(&str, &str)] = &[
    (
        "src/http/standing.rs",
        "one mechanism (the standing-poll ring and its reaper), its unsafe ring calls together",
    ),
    (
        "src/proxy/attempt.rs",
        "one attempt from send to judged answer: the phases in the order they run",
    ),
    (
        "src/route/mod.rs",
        "the route table and the candidate order, built and read together",
    ),
    (
        "src/admin/access.rs",
        "who may do what on the admin port, with its throttle: one policy",
    ),
    (
        "src/resilience/usage_wall/lane.rs",
        "the low-priority lane's state machine, one table of transitions",
    ),
    (
        "src/sse/json.rs",
        "the SSE scanner's JSON reading: one block-at-a-time parser",
    ),
    (
        "src/proxy/attempts/mod.rs",
        "the attempt loop, the driver of every attempt",
    ),
    (
        "src/proxy/judge.rs",
        "judging an answer's head and error body: one verdict",
    ),
    (
        "src/proxy/forward.rs",
        "the relay's loop, which every held stream runs",
    ),
    (
        "src/sse/mod.rs",
        "the SSE scanner's event loop and its state",
    ),
    (
        "src/resilience/mod.rs",
        "the resilience tables and their merge, which every core runs",
    ),
    (
        "src/drill/plan.rs",
        "the drill's scenarios and budgets: one table",
    ),
    (
        "src/proxy/forward/stream.rs",
        "an event stream's relay: one loop",
    ),
    (
        "tests/resilience.rs",
        "the resilience engine end to end, one scenario after another",
    ),
    ("tests/stream.rs", "the stream guard end to end"),
    ("tests/flow.rs", "flow control end to end"),
    ("tests/watch.rs", "the status page and metrics end to end"),
    ("tests/drill.rs", "the drill end to end"),
    ("tests/reload.rs", "hot reload end to end"),
    (
        "tests/dataplane/trust.rs",
        "the data port's trust boundaries, one attack after another",
    ),
];

#[test]
fn files_fit_in_a_head() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for f in files {
        let rel = f
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        let lines = std::fs::read_to_string(&f).expect("read").lines().count();
        let excepted = LONGER.iter().any(|(p, _)| *p == rel);
        if excepted {
            seen.insert(rel.clone());
        }
        if lines > HARD_LINES || (lines > LINES && !excepted) {
            problems.push(format!("{rel}: {lines} lines"));
        } else if excepted && lines <= LINES {
            problems.push(format!(
                "{rel}: {lines} lines, no longer an exception: take it off"
            ));
        }
    }
    for (p, _) in LONGER {
        if !seen.contains(*p) {
            problems.push(format!(
                "{p}: listed as an exception, but there is no such file"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "files over {LINES} lines (at most {HARD_LINES} with a reason in LONGER):\n{}",
        problems.join("\n")
    );
}

/// Every error code Ringside can answer appears in the HTTP API reference (or, for the lease
/// codes, the leases reference; the admin port's, the admin reference): the table in the docs
/// is the answer table in the code.
#[test]
fn every_error_code_is_in_the_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = String::new();
    for page in ["http-api.md", "leases.md", "admin-api.md"] {
        docs += &std::fs::read_to_string(root.join("docs/reference").join(page)).expect("doc page");
    }
    let mut missing = BTreeSet::new();
    for (rel, _, text) in src_files(root) {
        if rel.contains("simulate") || rel.ends_with("tests.rs") {
            continue;
        }
        // Unit tests make up codes of their own.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for opener in ["ApiError::new(", "bad_request("] {
            for piece in code.split(opener).skip(1) {
                let args = piece.trim_start();
                // ApiError::new(status, "code", ..); bad_request("code", ..).
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
    // The lease contract's codes are one table of their own.
    for refusal in ringside::proxy::lease::Refusal::ALL {
        let (status, code) = refusal.wire();
        if !docs.contains(&format!("`{code}`")) {
            missing.insert(format!("{code} ({status}, proxy::lease::Refusal)"));
        }
    }
    assert!(
        missing.is_empty(),
        "error codes missing from docs/reference: {missing:?}"
    );
}

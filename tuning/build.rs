//! Build facts for `ringside --version`: the git commit, the cargo profile and whether the
//! PGO profile applies (the same test as tuning/pgo/rustc-wrapper.sh, which does the applying).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=RINGSIDE_PGO");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RINGSIDE_COMMIT={commit}");
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let opt = std::env::var("OPT_LEVEL").unwrap_or_default();
    println!("cargo:rustc-env=RINGSIDE_PROFILE={profile} (opt-level {opt})");
    let pgo_on = opt == "3"
        && std::env::var("RINGSIDE_PGO").map_or(true, |v| v != "0")
        && std::path::Path::new("tuning/pgo/ringside.profdata").exists()
        && llvm_matches();
    println!(
        "cargo:rustc-env=RINGSIDE_PGO={}",
        if pgo_on { "on" } else { "off" }
    );
}

/// Whether this rustc's LLVM is the one that wrote the profile (else the wrapper skips it).
fn llvm_matches() -> bool {
    let want = std::fs::read_to_string("tuning/pgo/llvm-major").unwrap_or_default();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let have = Command::new(rustc)
        .arg("-vV")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            v.lines()
                .find_map(|l| l.strip_prefix("LLVM version: "))
                .and_then(|l| l.split('.').next())
                .map(str::to_string)
        });
    have.is_some_and(|h| h == want.trim())
}

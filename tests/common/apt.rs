//! Debian packages a test needs (redis-server, chromium), installed the way the benchmarks
//! install nginx and HAProxy, once per test binary.

use std::process::Command;

/// Make sure `program` runs (`--version`), installing `package` if it does not.
pub fn ensure(program: &str, package: &str) {
    if Command::new(program).arg("--version").output().is_ok() {
        return;
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !apt(&["install", "-y", "-qq", package]) {
        assert!(apt(&["update", "-qq"]), "apt-get update failed");
        assert!(
            apt(&["install", "-y", "-qq", package]),
            "{package} could not be installed"
        );
    }
}

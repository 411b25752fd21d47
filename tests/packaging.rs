//! The files that ship Ringside are linted: the systemd unit, the sysctl settings and the
//! container image definition say what the operating guide promises. (The image is not built
//! here; `systemd-analyze verify` runs where it is installed.)

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_systemd_unit_notifies_reloads_by_hup_and_outlasts_the_drain() {
    let unit = read("tuning/ringside.service");
    let l = lines(&unit);
    for want in [
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "StateDirectory=ringside",
        "KillSignal=SIGTERM",
    ] {
        assert!(l.contains(&want), "missing {want}");
    }
    let stop: u64 = l
        .iter()
        .find_map(|x| x.strip_prefix("TimeoutStopSec="))
        .and_then(|v| v.parse().ok())
        .expect("TimeoutStopSec");
    // Above the default drain delay (5 s) plus the default grace (120 s).
    assert!(stop > 125, "TimeoutStopSec={stop}");
    let nofile: u64 = l
        .iter()
        .find_map(|x| x.strip_prefix("LimitNOFILE="))
        .and_then(|v| v.parse().ok())
        .expect("LimitNOFILE");
    assert!(nofile >= 65_536);
    // Nothing that would block io_uring's system calls.
    assert!(!l.iter().any(|x| x.starts_with("SystemCallFilter=")));
    assert!(
        !l.iter()
            .any(|x| x.starts_with("MemoryDenyWriteExecute=yes"))
    );
    if let Ok(out) = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning/ringside.service"))
        .output()
    {
        let err = String::from_utf8_lossy(&out.stderr);
        // The binary path does not exist on a build machine; anything else is a finding.
        let findings: Vec<&str> = err
            .lines()
            .filter(|x| !x.contains("/usr/local/bin/ringside") && !x.trim().is_empty())
            .filter(|x| !x.contains("Failed to") || x.contains("ringside.service"))
            .collect();
        assert!(findings.is_empty(), "{err}");
    }
}

#[test]
fn the_container_image_is_glibc_non_root_with_the_data_dir_as_a_volume() {
    let file = read("tuning/Dockerfile");
    let l = lines(&file);
    let last_from = l
        .iter()
        .rev()
        .find(|x| x.starts_with("FROM "))
        .expect("FROM");
    assert!(
        !last_from.contains("alpine") && !last_from.contains("musl"),
        "{last_from}"
    );
    let user = l
        .iter()
        .rev()
        .find_map(|x| x.strip_prefix("USER "))
        .expect("USER");
    assert!(user != "root" && user != "0", "runs as {user}");
    assert!(
        l.iter()
            .any(|x| x.starts_with("VOLUME") && x.contains("/var/lib/ringside"))
    );
    assert!(file.contains("seccomp"), "the io_uring note is there");
    assert!(l.iter().any(|x| x.contains("--profile dist")));
}

#[test]
fn every_sysctl_setting_says_why() {
    let text = read("tuning/sysctl.conf");
    let mut reason = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            reason = true;
        } else if line.is_empty() {
            continue;
        } else {
            assert!(line.contains(" = "), "{line}");
            assert!(reason, "no reason given for {line}");
            reason = false;
        }
    }
}

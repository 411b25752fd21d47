//! The local control socket (`<data_dir>/control.sock`): `ringside status`, `reload` and
//! `drain` work on a server without an admin token and from a shell without a single provider
//! key; another user is refused; and the commands never send anything to the address a config
//! file names (they used to send the variable the file named as a token, over plain HTTP).

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

both_drivers!(control_commands_need_neither_a_token_nor_a_key);

/// `ringside <args>` with nothing in its environment but `PATH`.
fn bare(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .expect("run ringside")
}

fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text.trim().trim_start_matches("draining: ");
    serde_json::from_str(json)
        .unwrap_or_else(|_| panic!("not JSON: {text} {}", String::from_utf8_lossy(&out.stderr)))
}

fn control_commands_need_neither_a_token_nor_a_key(driver: &str) {
    let sim = start_sim(Default::default());
    let mut proxy = Proxy::start(
        driver,
        1,
        "# no admin token",
        &priority_keys(sim.addr, &["a"], ""),
    );
    let config = proxy.dir.0.join("ringside.toml");
    let config = config.to_str().unwrap_or_default();
    let status = bare(&["status", "--config", config]);
    assert!(status.status.success(), "{status:?}");
    assert_eq!(json_of(&status)["generation"], 1);
    let reload = bare(&["reload", "--config", config]);
    assert!(reload.status.success(), "{reload:?}");
    assert_eq!(json_of(&reload)["status"], "applied");
    assert_eq!(
        json_of(&bare(&["status", "--config", config]))["generation"],
        2
    );
    // The reload is in the audit trail, by the socket's peer (this test's uid).
    let (_, audit) = proxy.admin("GET", "/admin/audit");
    let entry = &audit["entries"][0];
    assert_eq!(entry["action"], "reload", "{audit}");
    assert_eq!(entry["actor"]["via"], "control_socket", "{audit}");
    // SAFETY: geteuid has no arguments and cannot fail.
    assert_eq!(entry["actor"]["uid"], unsafe { libc::geteuid() }, "{audit}");
    assert_eq!(entry["before"]["generation"], 1, "{audit}");
    // Another user is refused (the socket is the server's user's alone).
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let socket = proxy.dir.0.join("data/control.sock");
        let other = Command::new(binary())
            .args(["status", "--socket", socket.to_str().unwrap_or_default()])
            .env_clear()
            .uid(65534)
            .gid(65534)
            .output()
            .expect("run as nobody");
        assert!(!other.status.success(), "{other:?}");
    } else {
        eprintln!("not root: the other-user check needs to start a process as another user");
    }
    // `probe` (a container's HEALTHCHECK): ready and live, with no token and no key.
    for args in [
        &["probe", "--config", config][..],
        &["probe", "--live", "--config", config],
    ] {
        let probe = bare(args);
        assert!(probe.status.success(), "{args:?}: {probe:?}");
        assert!(
            String::from_utf8_lossy(&probe.stdout).contains(": 200"),
            "{probe:?}"
        );
    }
    let drain = bare(&["drain", "--config", config]);
    assert!(drain.status.success(), "{drain:?}");
    assert_eq!(json_of(&drain)["draining"], true);
    // Draining: not ready (503 while the port still accepts, then nothing to ask) once the
    // main thread has begun the drain.
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let probe = bare(&["probe", "--config", config]);
        if probe.status.code() == Some(1) {
            break;
        }
        assert!(probe.status.success(), "{probe:?}");
        assert!(
            Instant::now() < give_up,
            "still ready while draining: {probe:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let give_up = Instant::now() + Duration::from_secs(20);
    while proxy.child.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < give_up, "the drain did not end the server");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !proxy.dir.0.join("data/control.sock").exists(),
        "the socket goes with the server"
    );
}

#[test]
fn control_commands_send_nothing_to_the_address_a_file_names() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let dir = tempdir::new();
    let cfg = format!(
        "[server]\nadmin_listen = \"{}\"\nadmin_token_env = \"PROVIDER_KEY\"\ndata_dir = \"{}\"\n",
        listener.local_addr().expect("addr"),
        dir.0.join("data").display()
    );
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, cfg).expect("write");
    for command in ["reload", "drain", "status"] {
        let out = Command::new(binary())
            .args([command, "--config", path.to_str().unwrap_or_default()])
            .env("PROVIDER_KEY", "sk-live-a-provider-key-0123456789")
            .output()
            .expect("run ringside");
        assert!(!out.status.success(), "no server: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("control.sock"), "{said}");
        assert!(!said.contains("sk-live"), "{said}");
    }
    assert!(
        listener.accept().is_err(),
        "nothing connected to the file's admin address"
    );
}

//! `ringside check`: problems on stderr with where they are, the data dir made as `serve` would
//! make it, and how each provider is reached (TLS, HTTP/2, the egress proxy and where it came
//! from), credentials never shown.

mod common;
use common::*;

#[test]
fn check_says_problems_on_stderr_and_makes_the_data_dir() {
    let dir = tempdir::new();
    let cfg = "[server]\ndata_dir = \"data\"\n[[providers]]\nid = \"x\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n  [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n";
    std::fs::write(dir.0.join("ringside.toml"), cfg).expect("write");
    // A bad environment override is named, not ignored.
    let out = ringside_with(
        &["check"],
        &dir.0,
        &[("RINGSIDE_WORKERS", "abc"), ("RINGSIDE_LOG", "bogus")],
    );
    // Problems and warnings on stderr, where a script's `2>` looks for them.
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("RINGSIDE_WORKERS"), "{text}");
    assert!(text.contains("RINGSIDE_LOG=`bogus`"), "{text}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // `check` names every unknown key in one run, with what was probably meant; a file that is
    // not TOML gets its line, column and the line itself; a data dir that cannot be is said.
    let check = |name: &str, text: &str| {
        std::fs::write(dir.0.join(name), text).expect("write");
        let out = ringside(&["check", "--config", name], &dir.0);
        assert_eq!(out.status.code(), Some(1), "{name}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let text = check("typos.toml", "[server]\nlisen = \"x\"\nworkrs = 2\n");
    assert!(
        text.contains("typos.toml:2: unknown key `lisen`, did you mean `listen`?"),
        "{text}"
    );
    assert!(
        text.contains("typos.toml:3: unknown key `workrs`, did you mean `workers`?"),
        "{text}"
    );
    let text = check("broken.toml", "[server]\nlisten = \"127.0.0.1:1\n");
    assert!(
        text.contains("broken.toml:2:") && text.contains("| listen = \"127.0.0.1:1"),
        "{text}"
    );
    let text = check("dir.toml", "[server]\ndata_dir = \"ringside.toml/data\"\n");
    assert!(
        text.contains("server.data_dir") && text.to_lowercase().contains("not a directory"),
        "{text}"
    );
    // A data dir that does not exist yet is made, as `serve` would make it: a `check` that
    // passes is a start that can write its store.
    std::fs::write(
        dir.0.join("new.toml"),
        "[server]\ndata_dir = \"fresh/data\"\n",
    )
    .expect("write");
    let out = ringside(&["check", "--config", "new.toml"], &dir.0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("created, writable"), "{text}");
    assert!(dir.0.join("fresh/data/store").is_dir());
}

/// `check` says how each provider is reached: TLS and HTTP/2, direct or through which proxy
/// (a host-wide `HTTPS_PROXY` is easy to miss), its own TLS settings; a proxy's credentials
/// only as whether there are any.
#[test]
fn check_says_how_each_provider_is_reached() {
    let dir = tempdir::new();
    let cfg = "[server]\ndata_dir = \"data\"\n\
        [[providers]]\nid = \"cloud\"\ndialect = \"openai\"\nbase_url = \"https://api.example.com/v1\"\n\
        tls_server_name = \"edge.example.com\"\n\
        \x20 [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n\
        [[providers]]\nid = \"local\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
        http2 = \"never\"\n\
        \x20 [[providers.connections]]\n  id = \"b\"\n  key_env = \"SIM_KEY_B\"\n";
    std::fs::write(dir.0.join("ringside.toml"), cfg).expect("write");
    let out = ringside_with(
        &["check"],
        &dir.0,
        &[("HTTPS_PROXY", "corp:hunter2@egress.corp:3128")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "transport: TLS, HTTP/2 where the provider offers it, through proxy egress.corp:3128 \
             (from HTTPS_PROXY, with credentials), server name and Host edge.example.com"
        ),
        "{text}"
    );
    assert!(
        text.contains("transport: plaintext, HTTP/1.1 only, direct"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    // The plaintext provider takes an upstream descriptor per stream: the default cap counts
    // two per client.
    assert!(
        text.contains("reached over HTTP/1.1 by its settings, so the first applies"),
        "{text}"
    );
}

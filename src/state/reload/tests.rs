use super::*;
use crate::config::load_str;
use crate::ids::ConnId;
use crate::state::slots::Slots;

fn config(text: &str) -> Config {
    let env = |n: &str| (!n.starts_with("RINGSIDE_")).then(|| format!("sk-{n}"));
    load_str(text, "t", &env).expect("valid config")
}

const BASE: &str = r#"
[server]
listen = "127.0.0.1:7001"
workers = 2
[[providers]]
id = "a"
base_url = "http://127.0.0.1:1/v1"
dialect = "openai"
[[providers.connections]]
id = "k1"
key_env = "A"
models = ["m1"]
[[providers.connections]]
id = "k2"
key_env = "B"
models = ["m1"]
"#;

#[test]
fn settings_that_cannot_change_live_are_reported_and_keep_their_running_value() {
    let old = config(BASE);
    let mut new = config(
        &BASE
            .replace("127.0.0.1:7001", "127.0.0.1:7002")
            .replace("workers = 2", "workers = 3"),
    );
    let needs = keep_restart_only(&old, &mut new);
    assert_eq!(needs, vec!["server.listen", "server.workers"]);
    assert_eq!(new.server.listen, old.server.listen);
    assert_eq!(new.server.workers, 2);
    let mut same = config(BASE);
    assert!(keep_restart_only(&old, &mut same).is_empty());
}

fn generations(old: &str, new: &str) -> (Gen, Gen) {
    let start = config(old);
    let mut slots = Slots::new(&start);
    let g1 = Gen::build(1, start, &mut slots);
    let mut next = config(new);
    let plan = slots.assign(&mut next, 2, 1).expect("slots");
    let mut g2 = Gen::build(2, next, &mut slots);
    g2.fresh_conns = plan.fresh_conns;
    g2.retired_conns = plan.retired_conns;
    (g1, g2)
}

#[test]
fn changes_name_what_was_added_removed_rekeyed_and_changed() {
    let new = BASE.replace("key_env = \"B\"", "key_env = \"B2\"").replace(
        "models = [\"m1\"]\n[[providers.connections]]",
        "models = [\"m1\", \"m2\"]\n[[providers.connections]]",
    ) + r#"
[[providers.connections]]
id = "k3"
key_env = "C"
"#;
    let (g1, g2) = generations(BASE, &new);
    let c = Changes::between(&g1, &g2);
    assert_eq!(c.connections_added, vec!["a/k3"]);
    assert_eq!(c.keys_changed, vec!["a/k2"]);
    assert_eq!(c.connections_changed, vec!["a/k1"]);
    assert!(c.connections_removed.is_empty());
    // The new key took a new slot; the old one is retired.
    assert_eq!(g2.retired_conns, [ConnId::new(1)]);
    assert!(g2.conn_labels[1].0.is_empty());
    assert_eq!(g2.conn_by_label("a/k2"), Some(ConnId::new(2)));
}

#[test]
fn a_removed_connection_is_named_and_its_slot_emptied() {
    let new = BASE.replace(
        "[[providers.connections]]\nid = \"k2\"\nkey_env = \"B\"\nmodels = [\"m1\"]\n",
        "",
    );
    let (g1, g2) = generations(BASE, &new);
    let c = Changes::between(&g1, &g2);
    assert_eq!(c.connections_removed, vec!["a/k2"]);
    assert!(c.connections_added.is_empty());
    assert_eq!(g2.conn_by_label("a/k1"), Some(ConnId::new(0)));
    assert_eq!(g2.conn_by_label("a/k2"), None);
    assert!(g2.config.connection(ConnId::new(1)).is_none());
}

#[test]
fn an_unchanged_file_changes_nothing() {
    let (g1, g2) = generations(BASE, BASE);
    assert!(Changes::between(&g1, &g2).is_empty());
    assert_eq!(g1.routes.labels(), g2.routes.labels());
}

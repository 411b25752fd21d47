use super::*;
use crate::config::load_str;
use crate::ids::ConnId;

fn config(conns: &[(&str, &str, &str)]) -> Config {
    let mut text = String::new();
    let mut providers: Vec<&str> = Vec::new();
    for (p, _, _) in conns {
        if !providers.contains(p) {
            providers.push(p);
        }
    }
    for (n, p) in providers.iter().enumerate() {
        text.push_str(&format!(
            "[[providers]]\nid = \"{p}\"\nbase_url = \"http://127.0.0.1:{}/v1\"\ndialect = \"openai\"\n",
            n + 1
        ));
        for (_, c, key) in conns.iter().filter(|(q, _, _)| q == p) {
            text.push_str(&format!(
                "[[providers.connections]]\nid = \"{c}\"\nkey_env = \"{key}\"\n"
            ));
        }
    }
    let env = |n: &str| (!n.starts_with("RINGSIDE_")).then(|| format!("sk-{n}"));
    load_str(&text, "t", &env).expect("valid config")
}

fn slot_of(c: &Config, p: &str, conn: &str) -> usize {
    c.providers
        .iter()
        .find(|x| x.id == p)
        .and_then(|x| x.connections.iter().find(|y| y.id == conn))
        .map(|y| y.index.index())
        .expect("present")
}

#[test]
fn an_unchanged_identity_keeps_its_slot_when_others_come_and_go() {
    let start = config(&[("a", "k1", "A"), ("a", "k2", "B"), ("b", "k3", "C")]);
    let mut slots = Slots::new(&start);
    // k1 removed, k4 added in front, provider b moved first.
    let mut next = config(&[("b", "k3", "C"), ("a", "k4", "D"), ("a", "k2", "B")]);
    let plan = slots.assign(&mut next, 2, 1).expect("assigned");
    assert_eq!(slot_of(&next, "a", "k2"), 1);
    assert_eq!(slot_of(&next, "b", "k3"), 2);
    assert_eq!(
        slot_of(&next, "a", "k4"),
        3,
        "a new identity takes a new slot"
    );
    assert_eq!(plan.retired_conns, [ConnId::new(0)]);
    assert_eq!(plan.fresh_conns, [ConnId::new(3)]);
    assert_eq!(next.providers[0].slot, 1, "b keeps its provider slot");
    assert_eq!(next.provider_of(ConnId::new(2)), Some(1));
    assert!(
        next.connection(ConnId::new(0)).is_none(),
        "the removed connection's slot is empty"
    );
    assert_eq!(next.slot_count(), 4);
}

#[test]
fn a_changed_key_is_a_new_credential() {
    let start = config(&[("a", "k1", "A")]);
    let mut slots = Slots::new(&start);
    let mut next = config(&[("a", "k1", "ROTATED")]);
    let plan = slots.assign(&mut next, 2, 1).expect("assigned");
    assert_eq!(slot_of(&next, "a", "k1"), 1);
    assert_eq!(plan.retired_conns, [ConnId::new(0)]);
    assert_eq!(plan.fresh_conns, [ConnId::new(1)]);
}

#[test]
fn a_retired_slot_is_given_out_again_only_when_no_generation_that_knew_it_lives() {
    let start = config(&[("a", "k1", "A")]);
    let mut slots = Slots::new(&start);
    let mut g2 = config(&[("a", "k2", "B")]);
    slots.assign(&mut g2, 2, 1).expect("g2");
    assert_eq!(slot_of(&g2, "a", "k2"), 1);
    // Generation 1 still has requests in flight: slot 0 stays k1's.
    let mut g3 = config(&[("a", "k2", "B"), ("a", "k3", "C")]);
    slots.assign(&mut g3, 3, 1).expect("g3");
    assert_eq!(slot_of(&g3, "a", "k3"), 2);
    // Everything of generation 1 has finished: slot 0 can be reused, and starts clean.
    let mut g4 = config(&[("a", "k2", "B"), ("a", "k3", "C"), ("a", "k5", "E")]);
    let plan = slots.assign(&mut g4, 4, 2).expect("g4");
    assert_eq!(slot_of(&g4, "a", "k5"), 0);
    assert_eq!(plan.fresh_conns, [ConnId::new(0)]);
}

#[test]
fn a_connection_back_after_a_removal_starts_clean_in_its_old_slot() {
    let start = config(&[("a", "k1", "A"), ("a", "k2", "B")]);
    let mut slots = Slots::new(&start);
    let mut g2 = config(&[("a", "k2", "B")]);
    slots.assign(&mut g2, 2, 1).expect("g2");
    let mut g3 = config(&[("a", "k1", "A"), ("a", "k2", "B")]);
    let plan = slots.assign(&mut g3, 3, 1).expect("g3");
    assert_eq!(slot_of(&g3, "a", "k1"), 0);
    assert_eq!(plan.fresh_conns, [ConnId::new(0)]);
    assert!(plan.retired_conns.is_empty());
}

#[test]
fn running_out_of_slots_changes_nothing() {
    let start = config(&[("a", "k1", "A")]);
    let mut slots = Slots::new(&start);
    slots.conn_capacity = 2;
    let mut big = config(&[("a", "k1", "A"), ("a", "k2", "B"), ("a", "k3", "C")]);
    let err = slots.assign(&mut big, 2, 1).expect_err("no room");
    assert!(err.contains("restart"), "{err}");
    let mut fits = config(&[("a", "k1", "A"), ("a", "k2", "B")]);
    let plan = slots
        .assign(&mut fits, 2, 1)
        .expect("the failed try left no trace");
    assert_eq!(plan.fresh_conns, [ConnId::new(1)]);
}

#[test]
fn route_labels_keep_their_metric_index() {
    let start = config(&[("a", "k1", "A")]);
    let mut slots = Slots::new(&start);
    let x = slots.route_index("x");
    let y = slots.route_index("y");
    assert_eq!(slots.route_index("x"), x);
    assert_ne!(x, y);
    assert_eq!(slots.other_route(), slots.route_capacity - 1);
}

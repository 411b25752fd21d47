use super::*;
use crate::config::load_str;
use crate::resilience::cooldown::{Failure, Terminal};
use crate::state::slots::Slots;

/// A generation of `conns` (provider `p`), in the order given: two instances may list the
/// same connections in another order, so their slots differ.
fn generation(conns: &[(&str, &str)]) -> Gen {
    let mut text =
        "[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n"
            .to_string();
    for (id, key) in conns {
        text.push_str(&format!(
            "[[providers.connections]]\nid = \"{id}\"\nkey_env = \"{key}\"\n"
        ));
    }
    let env = |n: &str| (!n.starts_with("RINGSIDE_")).then(|| format!("sk-{n}"));
    let config = load_str(&text, "t", &env).expect("valid");
    let mut slots = Slots::new(&config);
    Gen::build(1, config, &mut slots)
}

#[test]
fn a_cooldown_crosses_to_an_instance_with_other_slots_and_another_clock() {
    let a = generation(&[("k1", "A"), ("k2", "B")]);
    let b = generation(&[("k2", "B"), ("k1", "A")]);
    let (na, nb) = (Names::of(&a), Names::of(&b));
    // A started 10 s before B: the same wall-clock moment is 10,000 ms further on A's clock.
    let (ca, cb) = (Clocks::at(20_000, 1_000_000), Clocks::at(10_000, 1_000_000));
    let state = ConnState {
        epoch: 2,
        until: 50_000,
        last: Failure {
            at: 19_000,
            level: 1,
            status: 429,
            ..Default::default()
        },
        ok_at: 0,
        probe_ok_at: 0,
        terminal: None,
    };
    let fact = outgoing(
        &Event::Conn {
            conn: ConnId::new(1),
            state,
        },
        &na,
        ca,
    )
    .expect("named");
    let text = serde_json::to_string(&Message {
        from: "a".into(),
        fact: fact.clone(),
    })
    .expect("json");
    assert!(text.contains("\"conn\":\"p/k2\""), "{text}");
    assert!(!text.contains("sk-B"), "no key in the message: {text}");
    let back: Message = serde_json::from_str(&text).expect("parse");
    let Some(Event::Conn { conn, state: s }) = incoming(back.fact, &nb, cb) else {
        panic!("not a conn event");
    };
    assert_eq!(conn, ConnId::new(0), "k2 is B's first slot");
    assert_eq!(s.until, 40_000, "the same wall-clock end on B's clock");
    assert_eq!(s.last.at, 9_000);
    assert_eq!(s.ok_at, 0, "never stays never");
    assert_eq!(s.epoch, 2);
}

#[test]
fn a_newer_members_reason_keeps_its_cooldown_without_its_name() {
    let n = Names::of(&generation(&[("k1", "A")]));
    let c = Clocks::at(20_000, 1_000_000);
    let state = ConnState {
        until: 50_000,
        last: Failure {
            at: 19_000,
            level: 2,
            reason: Some(Reason::EgressRefused),
            ..Default::default()
        },
        ..Default::default()
    };
    let fact = outgoing(
        &Event::Conn {
            conn: ConnId::new(0),
            state,
        },
        &n,
        c,
    )
    .expect("named");
    let known = serde_json::to_string(&Message {
        from: "a".into(),
        fact,
    })
    .expect("json");
    // A member of a later build names a reason this one has never heard of.
    let text = known.replace("\"egress_refused\"", "\"some_later_reason\"");
    assert_ne!(text, known);
    let back: Message = serde_json::from_str(&text).expect("a later reason still reads");
    let Some(Event::Conn { state: s, .. }) = incoming(back.fact, &n, c) else {
        panic!("not a conn event");
    };
    assert_eq!(s.until, 50_000, "the cooldown holds as long here");
    assert_eq!((s.last.at, s.last.level), (19_000, 2));
    assert_eq!(s.last.reason, None, "unnamed, not misnamed");
    // A reason this build knows reads as itself; none stays none.
    let back: Message = serde_json::from_str(&known).expect("parse");
    let Some(Event::Conn { state: s, .. }) = incoming(back.fact, &n, c) else {
        panic!("not a conn event");
    };
    assert_eq!(s.last.reason, Some(Reason::EgressRefused));
    let none = known.replace("\"egress_refused\"", "null");
    let back: Message = serde_json::from_str(&none).expect("parse");
    assert!(matches!(back.fact, Fact::Conn { state, .. } if state.last.reason.is_none()));
}

#[test]
fn another_key_behind_the_same_name_is_not_the_same_connection() {
    let a = generation(&[("k1", "A")]);
    let b = generation(&[("k1", "OTHER")]);
    let state = ConnState {
        terminal: Some(Terminal::Banned),
        ..Default::default()
    };
    let c = Clocks::at(1, 1);
    let fact = outgoing(
        &Event::Conn {
            conn: ConnId::new(0),
            state,
        },
        &Names::of(&a),
        c,
    )
    .expect("named");
    assert!(incoming(fact, &Names::of(&b), c).is_none());
}

#[test]
fn locks_and_breakers_travel_by_name_and_pins_stay_home() {
    let a = generation(&[("k1", "A")]);
    let n = Names::of(&a);
    let c = Clocks::at(100, 5_000);
    let lock = Lock {
        conn: ConnId::new(0),
        key: Arc::from("gpt-x"),
        scope: LockScope::Model,
        reason: Reason::RateLimited,
        until: 400,
        failures: 2,
        last_failure: 90,
        last_cooldown: 300,
    };
    let fact = outgoing(&Event::Lock(lock.clone()), &n, c).expect("named");
    assert_eq!(
        fact.field(),
        Some(("lock", format!("p/k1#{}#Model#gpt-x", fingerprint("sk-A"))))
    );
    let Some(Event::Lock(back)) = incoming(fact, &n, c) else {
        panic!("not a lock");
    };
    assert_eq!(back, lock);
    let f = outgoing(
        &Event::BreakerFailure {
            provider: 0,
            at: 50,
            tenant: 7,
        },
        &n,
        c,
    )
    .expect("named");
    assert_eq!(
        f,
        Fact::BreakerFailure {
            provider: "p".into(),
            at: 4_950,
            tenant: 7
        }
    );
    let pin = Event::Pin {
        key: Arc::from("s"),
        conn: ConnId::new(0),
        until: 1,
    };
    assert!(outgoing(&pin, &n, c).is_none());
}

use super::*;
use crate::config::load_str;
use crate::ids::ConnId;
use crate::route::strategy::SelectorState;

const CFG: &str = r#"
[[providers]]
id = "oa"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
  [[providers.connections]]
  id = "a"
  key_env = "K"
  models = ["gpt-4o", "gpt-4o-mini"]
  [[providers.connections]]
  id = "b"
  key_env = "K"
  models = ["gpt-4o"]
  [[providers.connections]]
  id = "backup"
  key_env = "K"
  models = ["gpt-4o"]
  priority = 5
[[providers]]
id = "an"
dialect = "anthropic"
base_url = "http://127.0.0.1:9/v1"
  [[providers.connections]]
  id = "c"
  key_env = "K"
  models = ["claude"]
[[routes]]
name = "smart"
strategy = "priority"
targets = [{ provider = "oa", model = "gpt-4o", connection = "b" }, { provider = "oa", model = "gpt-4o-mini" }]
"#;

fn setup() -> (Config, RouteTable) {
    let cfg = load_str(CFG, "t", &|n| (n == "K").then(|| "k".to_string())).unwrap();
    let t = RouteTable::build(&cfg);
    (cfg, t)
}

#[test]
fn a_route_keeps_its_order_and_pins() {
    let (cfg, t) = setup();
    let e = t.lookup(&cfg, "smart").unwrap();
    let mut st = SelectorState::new(t.slot_count(), 1);
    let c = t.candidates(&e, openai(), &mut st, &|_| Default::default());
    assert_eq!(
        c,
        vec![
            Candidate {
                target: TargetIdx::new(0),
                connection: ConnId::new(1)
            },
            Candidate {
                target: TargetIdx::new(1),
                connection: ConnId::new(0)
            }
        ]
    );
    assert_eq!(e.targets[1].model, "gpt-4o-mini");
}

#[test]
fn a_plain_model_spreads_over_top_priority_and_keeps_backups_last() {
    let (cfg, t) = setup();
    let e = t.lookup(&cfg, "gpt-4o").unwrap();
    let mut st = SelectorState::new(t.slot_count(), 1);
    let first: Vec<ConnId> = (0..4)
        .map(|_| t.candidates(&e, openai(), &mut st, &|_| Default::default())[0].connection)
        .collect();
    assert_eq!(first, [0, 1, 0, 1].map(ConnId::new));
    let all = t.candidates(&e, openai(), &mut st, &|_| Default::default());
    assert_eq!(
        all.last().unwrap().connection,
        ConnId::new(2),
        "priority 5 stays a fallback"
    );
}

#[test]
fn provider_prefix_and_dialects() {
    let (cfg, t) = setup();
    let e = t.lookup(&cfg, "oa/gpt-4o-mini").unwrap();
    assert_eq!(e.targets[0].connections, [ConnId::new(0)]);
    assert!(t.lookup(&cfg, "oa/unknown").is_none());
    assert!(t.lookup(&cfg, "nope").is_none());
    let e = t.lookup(&cfg, "claude").unwrap();
    let mut st = SelectorState::new(t.slot_count(), 1);
    assert!(
        t.candidates(&e, openai(), &mut st, &|_| Default::default())
            .is_empty()
    );
    assert!(t.other_dialect_only(&e, openai()));
    let names: Vec<&str> = t.model_list().iter().map(|(n, _)| *n).collect();
    assert!(names.contains(&"smart") && names.contains(&"claude") && names.contains(&"an/claude"));
}

/// An OpenAI endpoint that is not translated (the tests of dialect matching).
fn openai() -> crate::route::Reach {
    crate::route::Reach::of(crate::dialect::Endpoint::Embeddings)
}

#[test]
fn patterns_match_what_no_name_does_and_the_default_route_comes_last() {
    let cfg_text = format!(
        "{CFG}[[routes]]\nname = \"*\"\ntargets = [{{ provider = \"oa\", model = \"gpt-4o-mini\" }}]\n\
         [[routes]]\nname = \"claude-*\"\ntargets = [{{ provider = \"an\", model = \"*\" }}, {{ provider = \"oa\", model = \"gpt-4o\" }}]\n"
    );
    let cfg = load_str(&cfg_text, "t", &|n| (n == "K").then(|| "k".to_string())).unwrap();
    let t = RouteTable::build(&cfg);
    // An exact name wins over any pattern.
    assert_eq!(t.lookup(&cfg, "smart").unwrap().name, "smart");
    assert_eq!(t.lookup(&cfg, "claude").unwrap().name, "claude");
    // A pattern passes the client's model to its `*` targets, the others keep theirs.
    let e = t.lookup(&cfg, "claude-opus-4-8").unwrap();
    assert_eq!(e.name, "claude-*");
    assert_eq!(e.targets[0].model, "claude-opus-4-8");
    assert_eq!(
        e.targets[0].connections,
        [ConnId::new(3)],
        "an's connection, models not listed"
    );
    assert_eq!(e.targets[1].model, "gpt-4o");
    // Anything else: the default route, although it came first in the file.
    let e = t.lookup(&cfg, "gpt-6.2-sol").unwrap();
    assert_eq!(e.name, "*");
    assert_eq!(e.targets[0].model, "gpt-4o-mini");
    // Patterns are not model names a client lists.
    assert!(t.model_list().iter().all(|(n, _)| !n.contains('*')));
}

#[test]
fn glob_matches_runs_of_any_characters() {
    for (p, n, want) in [
        ("claude-*", "claude-opus-4-8", true),
        ("claude-*", "claude-", true),
        ("claude-*", "gpt-claude-x", false),
        ("*", "", true),
        ("gpt-*-mini", "gpt-4o-mini", true),
        ("gpt-*-mini", "gpt-4o", false),
        ("*sonnet*", "claude-sonnet-4", true),
        ("a*a", "a", false),
        ("exact", "exact", true),
        ("exact", "exactly", false),
    ] {
        assert_eq!(glob(p, n), want, "{p} ~ {n}");
    }
}

use super::*;
use crate::config::load_str;
use crate::ids::ConnId;

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

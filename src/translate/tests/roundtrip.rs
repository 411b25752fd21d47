//! A → B → A keeps content, tool calls and usage, for every pair of client APIs.

use crate::translate::answer::{self, Stamp};
use crate::translate::ir::{Answer, Block, Conversation, Finish, Role, Tool, Turn, Usage};
use crate::translate::{Api, read, write};
use proptest::prelude::*;
use serde_json::json;

const CLIENTS: [Api; 3] = [Api::Chat, Api::Responses, Api::Messages];

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 \"\\\\\u{e9}\u{4e2d}]{1,12}"
}

fn conversation() -> impl Strategy<Value = Conversation> {
    let turn = (
        any::<bool>(),
        proptest::collection::vec(text(), 1..3),
        proptest::option::of((text(), 0u8..3)),
    );
    (
        proptest::collection::vec(turn, 1..5),
        proptest::option::of(text()),
    )
        .prop_map(|(turns, system)| {
            let mut c = Conversation {
                system: system.into_iter().collect(),
                tools: vec![Tool {
                    name: "f".into(),
                    description: None,
                    parameters: json!({"type": "object"}),
                    strict: None,
                }],
                ..Default::default()
            };
            let mut n = 0;
            for (assistant, texts, call) in turns {
                let mut blocks: Vec<Block> = texts.into_iter().map(Block::Text).collect();
                if assistant {
                    if let Some((arg, k)) = call {
                        n += 1;
                        let id = format!("call_{n}");
                        blocks.push(Block::ToolCall {
                            id: id.clone(),
                            name: "f".into(),
                            arguments: json!({"a": arg, "k": k}).to_string(),
                        });
                        c.push(Role::Assistant, blocks);
                        let result = Block::ToolResult {
                            id,
                            content: vec![Block::Text("ok".into())],
                            is_error: false,
                        };
                        c.push(Role::User, vec![result]);
                        continue;
                    }
                    c.push(Role::Assistant, blocks);
                } else {
                    c.push(Role::User, blocks);
                }
            }
            c
        })
}

/// What must survive: each turn's words (joined), its calls and its results, in order.
fn essence(c: &Conversation) -> Vec<(Role, String, Vec<String>)> {
    let mut out: Vec<(Role, String, Vec<String>)> = Vec::new();
    for Turn { role, blocks } in &c.turns {
        let words: String = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let mut rest: Vec<String> = blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let args: serde_json::Value = serde_json::from_str(arguments).unwrap();
                    Some(format!("call {id} {name} {args}"))
                }
                Block::ToolResult { id, content, .. } => Some(format!(
                    "result {id} {}",
                    crate::translate::ir::result_text(content, false)
                )),
                _ => None,
            })
            .collect();
        rest.sort();
        match out.last_mut() {
            Some(last) if last.0 == *role => {
                last.1.push_str(&words);
                last.2.extend(rest);
                last.2.sort();
            }
            _ => out.push((*role, words, rest)),
        }
    }
    out
}

proptest! {
    #[test]
    fn requests_survive_a_round_trip(c in conversation(), a in 0usize..3, b in 0usize..3) {
        let (a, b) = (CLIENTS[a], CLIENTS[b]);
        let t = super::target("m");
        let in_a = write(a, &c, t).unwrap();
        let from_a = read(a, &in_a.body).unwrap();
        let in_b = write(b, &from_a, t).unwrap();
        let from_b = read(b, &in_b.body).unwrap();
        let back = read(a, &write(a, &from_b, t).unwrap().body).unwrap();
        prop_assert_eq!(essence(&c), essence(&back));
        prop_assert_eq!(&c.system.join("\n\n"), &back.system.join("\n\n"));
    }

    #[test]
    fn answers_survive_a_round_trip(words in text(), calls in 0usize..3, input in 0u64..1000, cached in 0u64..100, output in 0u64..1000, a in 0usize..3, b in 0usize..3) {
        let (a, b) = (CLIENTS[a], CLIENTS[b]);
        let mut blocks = vec![Block::Text(words)];
        for i in 0..calls {
            blocks.push(Block::ToolCall { id: format!("call_{i}"), name: "f".into(), arguments: json!({"i": i}).to_string() });
        }
        let ans = Answer {
            id: "x".into(),
            model: "m".into(),
            blocks,
            finish: Some(if calls > 0 { Finish::ToolCalls } else { Finish::Stop }),
            usage: Usage { input: input + cached, output, cache_read: cached, cache_write: 0, reasoning: 0 },
        };
        let stamp = Stamp { model: "m", created: 1, request_id: "r", tools: &crate::translate::ir::ClientTools::NONE };
        let in_a = answer::write(a, &ans, stamp);
        let in_b = answer::translate(a, b, &in_a, stamp).unwrap();
        let back = answer::read(a, &answer::translate(b, a, &in_b, stamp).unwrap(), stamp).unwrap();
        prop_assert_eq!(back.text(), ans.text());
        prop_assert_eq!(back.finish, ans.finish);
        prop_assert_eq!(back.usage, ans.usage);
        let calls_of = |x: &Answer| x.blocks.iter().filter(|b| matches!(b, Block::ToolCall { .. })).cloned().collect::<Vec<_>>();
        prop_assert_eq!(calls_of(&back).len(), calls);
        for (got, want) in calls_of(&back).iter().zip(calls_of(&ans)) {
            let (Block::ToolCall { id: gi, name: gn, arguments: ga }, Block::ToolCall { id: wi, name: wn, arguments: wa }) = (got, &want) else { unreachable!() };
            prop_assert_eq!((gi, gn), (wi, wn));
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(ga).unwrap(), serde_json::from_str::<serde_json::Value>(wa).unwrap());
        }
    }
}

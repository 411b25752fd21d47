//! The answer's contract: a fallback must keep what the request needs (tools, structured
//! output, a data region, policy tags). The drill's clients send a share of requests that need
//! one of these (as the primary target can serve them), each saying so in `x-drill-need`; the
//! simulator counts what arrived at each model; a request that reached a model without what it
//! needed is a violation. What a model supports is what the config declares for it, folded over
//! every route that names it (one route saying "no tools" is enough), and what the drill file's
//! `[[models]]` say (the operator's word on the real provider, which wins).

use super::stage::{Key, Route};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one model supports, as one target of the config or the drill file declares it; unset
/// means "not restricted" for tools and structured output, and "none" for region and tags.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Declared {
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub tools: Option<bool>,
    #[serde(default)]
    pub structured_output: Option<bool>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
}

/// What each model supports, every declaration folded.
#[derive(Debug, Default)]
pub struct Supports {
    by_model: BTreeMap<(String, String), Declared>,
}

impl Supports {
    /// The config's declarations folded (a "no" wins; regions that disagree leave none; a tag
    /// only where every declaration has it), then the drill file's, which replace what they
    /// state.
    pub fn fold(config: &[Declared], file: &[Declared]) -> Supports {
        let mut by_model: BTreeMap<(String, String), Declared> = BTreeMap::new();
        for d in config {
            let id = (d.provider.clone(), d.model.clone());
            let Some(seen) = by_model.get_mut(&id) else {
                by_model.insert(id, d.clone());
                continue;
            };
            if d.tools == Some(false) {
                seen.tools = Some(false);
            }
            if d.structured_output == Some(false) {
                seen.structured_output = Some(false);
            }
            if seen.region != d.region {
                seen.region = None;
            }
            let mine = d.tags.clone().unwrap_or_default();
            if let Some(t) = &mut seen.tags {
                t.retain(|x| mine.iter().any(|m| m.eq_ignore_ascii_case(x)));
            }
        }
        for d in file {
            let seen = by_model
                .entry((d.provider.clone(), d.model.clone()))
                .or_insert_with(|| d.clone());
            if d.tools.is_some() {
                seen.tools = d.tools;
            }
            if d.structured_output.is_some() {
                seen.structured_output = d.structured_output;
            }
            if d.region.is_some() {
                seen.region.clone_from(&d.region);
            }
            if d.tags.is_some() {
                seen.tags.clone_from(&d.tags);
            }
        }
        Supports { by_model }
    }

    /// Whether `provider`'s `model` lacks `need` (a label of [`needs_of`]).
    pub fn lacks(&self, provider: &str, model: &str, need: &str) -> bool {
        let d = self
            .by_model
            .get(&(provider.to_string(), model.to_string()));
        // (A model nobody declares: not restricted, no region, no tags.)
        let tools = d.and_then(|d| d.tools);
        let structured = d.and_then(|d| d.structured_output);
        let region = d.and_then(|d| d.region.as_deref());
        let tags = d.and_then(|d| d.tags.as_deref()).unwrap_or_default();
        match need.split_once('=') {
            None if need == "tools" => tools == Some(false),
            None if need == "structured_output" => structured == Some(false),
            Some(("region", r)) => region.is_none_or(|mine| !mine.eq_ignore_ascii_case(r)),
            Some(("tag", t)) => !tags.iter().any(|mine| mine.eq_ignore_ascii_case(t)),
            _ => false,
        }
    }
}

/// What the `n`-th request to `route` needs: one in four plain, then tools, structured output,
/// and the primary's region and tags, each only where the primary target can serve it (the
/// traffic the primary takes in production).
pub fn needs_of(route: &Route, n: usize) -> Vec<String> {
    let p = &route.declared;
    match n % 4 {
        1 if p.tools != Some(false) => vec!["tools".into()],
        2 if p.structured_output != Some(false) => vec!["structured_output".into()],
        3 => {
            let mut v: Vec<String> = p.region.iter().map(|r| format!("region={r}")).collect();
            v.extend(p.tags.iter().flatten().map(|t| format!("tag={t}")));
            v
        }
        _ => Vec::new(),
    }
}

/// Requests that reached a model without what they needed.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Violation {
    /// `provider/model`.
    pub target: String,
    pub need: String,
    pub requests: u64,
}

/// The violations in the simulator's counts (`/_sim/stats`).
pub fn violations(keys: &[Key], supports: &Supports, stats: &serde_json::Value) -> Vec<Violation> {
    let mut found: BTreeMap<(String, String), u64> = BTreeMap::new();
    for k in keys {
        let Some(models) = stats["keys"][&k.key]["needs"].as_object() else {
            continue;
        };
        for (model, needs) in models {
            let Some(needs) = needs.as_object() else {
                continue;
            };
            for (need, n) in needs {
                if supports.lacks(&k.provider, model, need) {
                    let id = (format!("{}/{model}", k.provider), need.clone());
                    *found.entry(id).or_default() += n.as_u64().unwrap_or(0);
                }
            }
        }
    }
    found
        .into_iter()
        .map(|((target, need), requests)| Violation {
            target,
            need,
            requests,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(model: &str, tools: Option<bool>, region: Option<&str>, tags: &[&str]) -> Declared {
        Declared {
            provider: "p".into(),
            model: model.into(),
            tools,
            structured_output: None,
            region: region.map(str::to_string),
            tags: Some(tags.iter().map(|t| t.to_string()).collect()),
        }
    }

    #[test]
    fn a_no_anywhere_wins_and_the_drill_file_has_the_last_word() {
        let config = [
            d("big", None, Some("eu"), &["hipaa", "zdr"]),
            d("big", Some(false), Some("eu"), &["zdr"]),
            d("small", None, Some("eu"), &[]),
            d("small", None, Some("us"), &[]),
        ];
        let file = [Declared {
            provider: "p".into(),
            model: "fast".into(),
            structured_output: Some(false),
            ..Default::default()
        }];
        let s = Supports::fold(&config, &file);
        assert!(s.lacks("p", "big", "tools"));
        assert!(!s.lacks("p", "big", "region=EU"));
        assert!(s.lacks("p", "big", "tag=hipaa") && !s.lacks("p", "big", "tag=zdr"));
        assert!(s.lacks("p", "small", "region=eu"), "regions disagree: none");
        assert!(s.lacks("p", "fast", "structured_output"));
        assert!(!s.lacks("p", "fast", "tools") && !s.lacks("p", "unknown", "tools"));
        assert!(s.lacks("p", "unknown", "region=eu"));
    }

    #[test]
    fn violations_name_the_model_and_the_need() {
        let keys = [Key {
            provider: "p".into(),
            connection: "c".into(),
            key: "sk-1".into(),
            var: "V".into(),
            models: vec![],
            max_concurrent: None,
            account: None,
        }];
        let s = Supports::fold(&[d("small", Some(false), None, &[])], &[]);
        let stats = serde_json::json!({"keys": {"sk-1": {"needs": {
            "small": {"tools": 3, "structured_output": 2},
            "big": {"tools": 5}
        }}}});
        assert_eq!(
            violations(&keys, &s, &stats),
            vec![Violation {
                target: "p/small".into(),
                need: "tools".into(),
                requests: 3
            }]
        );
    }
}

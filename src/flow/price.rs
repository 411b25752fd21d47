//! What tokens cost: `[[prices]]` from the config over a built-in table of well-known models,
//! in US dollars per million tokens (which is micro-dollars per token: spend is counted in
//! micro-dollars, `flow::spend`). A model is found by its exact name, else by the longest known
//! name it starts with followed by `-` (dated snapshots: `gpt-4o-2024-08-06` is `gpt-4o`).

use rustc_hash::FxHashMap;

use serde::Serialize;

/// A model's price, in dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache (else the input price).
    pub cached_input: f64,
}

impl Price {
    /// What `prompt` tokens in (of them `cached` from the cache) and `completion` out cost, in
    /// micro-dollars.
    pub fn micro_usd(&self, prompt: u64, cached: u64, completion: u64) -> u64 {
        let cached = cached.min(prompt);
        let v = (prompt - cached) as f64 * self.input
            + cached as f64 * self.cached_input
            + completion as f64 * self.output;
        v.round().clamp(0.0, u64::MAX as f64) as u64
    }
}

/// Prices as the config declares them (`provider` narrows one to that provider's model).
#[derive(Clone, Debug, Default)]
pub struct Prices {
    pub entries: Vec<(Option<String>, String, Price)>,
    /// Each configured provider's models, priced once when the config is read: finding a
    /// price by name (a walk over the table, prefix by prefix) ran for every target of every
    /// billed request.
    known: FxHashMap<String, FxHashMap<String, Option<Price>>>,
}

/// Dollars per million tokens, 2026-12 list prices: (model, input, output, cached input).
const BUILT_IN: &[(&str, f64, f64, f64)] = &[
    ("gpt-4o", 2.50, 10.00, 1.25),
    ("gpt-4o-mini", 0.15, 0.60, 0.075),
    ("gpt-4.1", 2.00, 8.00, 0.50),
    ("gpt-4.1-mini", 0.40, 1.60, 0.10),
    ("gpt-4.1-nano", 0.10, 0.40, 0.025),
    ("gpt-5", 1.25, 10.00, 0.125),
    ("gpt-5-mini", 0.25, 2.00, 0.025),
    ("gpt-5-nano", 0.05, 0.40, 0.005),
    ("o3", 2.00, 8.00, 0.50),
    ("o4-mini", 1.10, 4.40, 0.275),
    ("claude-opus-4", 15.00, 75.00, 1.50),
    ("claude-opus-4-1", 15.00, 75.00, 1.50),
    ("claude-sonnet-4", 3.00, 15.00, 0.30),
    ("claude-sonnet-4-5", 3.00, 15.00, 0.30),
    ("claude-haiku-4-5", 1.00, 5.00, 0.10),
    ("claude-3-5-haiku", 0.80, 4.00, 0.08),
    ("gemini-2.5-pro", 1.25, 10.00, 0.31),
    ("gemini-2.5-flash", 0.30, 2.50, 0.075),
    ("gemini-2.5-flash-lite", 0.10, 0.40, 0.025),
];

/// Whether `model` is `name`, or `name` followed by a `-` (a dated snapshot of it).
fn names(model: &str, name: &str) -> bool {
    model
        .strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// The longest name that `model` is or starts with, among `candidates`.
fn best<'a, T>(model: &str, candidates: impl Iterator<Item = (&'a str, T)>) -> Option<T> {
    candidates
        .filter(|(name, _)| names(model, name))
        .max_by_key(|(name, _)| name.len())
        .map(|(_, v)| v)
}

impl Prices {
    /// Price these (provider, model) pairs now (the config's providers and their models).
    pub fn remember<'a>(&mut self, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
        for (provider, model) in pairs {
            let price = self.find(provider, model);
            self.known
                .entry(provider.to_string())
                .or_default()
                .insert(model.to_string(), price);
        }
    }

    /// The price of `model` served by `provider`: the config's (a provider's own first), else
    /// the built-in table's.
    pub fn of(&self, provider: &str, model: &str) -> Option<Price> {
        match self.known.get(provider).and_then(|m| m.get(model)) {
            Some(&price) => price,
            None => self.find(provider, model),
        }
    }

    fn find(&self, provider: &str, model: &str) -> Option<Price> {
        let own = |p: &Option<String>| p.as_deref() == Some(provider);
        let configured = |by_provider: bool| {
            let it = self.entries.iter().filter(
                move |(p, _, _)| {
                    if by_provider { own(p) } else { p.is_none() }
                },
            );
            best(model, it.map(|(_, m, price)| (m.as_str(), *price)))
        };
        configured(true).or_else(|| configured(false)).or_else(|| {
            let it = BUILT_IN.iter().map(|&(m, input, output, cached_input)| {
                let p = Price {
                    input,
                    output,
                    cached_input,
                };
                (m, p)
            });
            best(model, it)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_price_is_the_one_found() {
        let mut p = Prices::default();
        let own = Price {
            input: 1.0,
            output: 2.0,
            cached_input: 0.5,
        };
        p.entries.push((Some("acme".into()), "gpt-4o".into(), own));
        let asked = [
            ("acme", "gpt-4o-2024"),
            ("openai", "gpt-4o"),
            ("x", "unknown"),
        ];
        let found: Vec<_> = asked.iter().map(|&(pr, m)| p.of(pr, m)).collect();
        p.remember(asked.iter().copied());
        let remembered: Vec<_> = asked.iter().map(|&(pr, m)| p.of(pr, m)).collect();
        assert_eq!(found, remembered);
        assert_eq!(remembered[0], Some(own));
        assert_eq!(remembered[2], None);
        // A pair not remembered is still found.
        assert_eq!(p.of("acme", "gpt-4o"), Some(own));
    }

    #[test]
    fn dated_snapshots_take_their_models_price_and_the_longest_name_wins() {
        let p = Prices::default();
        assert_eq!(
            p.of("openai", "gpt-4o-2024-08-06"),
            p.of("openai", "gpt-4o")
        );
        let mini = p.of("openai", "gpt-4o-mini").expect("known");
        assert_eq!(mini.input, 0.15);
        assert_eq!(p.of("openai", "gpt-4o-mini-2024-07-18"), Some(mini));
        assert!(p.of("openai", "gpt-4oo").is_none());
        assert!(p.of("local", "llama-3").is_none());
    }

    #[test]
    fn the_config_overrides_and_a_providers_own_price_comes_first() {
        let price = |input| Price {
            input,
            output: 1.0,
            cached_input: 0.5,
        };
        let p = Prices {
            entries: vec![
                (None, "gpt-4o".into(), price(1.0)),
                (Some("azure".into()), "gpt-4o".into(), price(2.0)),
                (None, "llama-3".into(), price(0.2)),
            ],
            ..Default::default()
        };
        assert_eq!(p.of("openai", "gpt-4o").map(|p| p.input), Some(1.0));
        assert_eq!(p.of("azure", "gpt-4o").map(|p| p.input), Some(2.0));
        assert_eq!(p.of("local", "llama-3-8b").map(|p| p.input), Some(0.2));
    }

    #[test]
    fn cost_counts_cached_prompt_tokens_at_their_price() {
        let p = Price {
            input: 2.5,
            output: 10.0,
            cached_input: 1.25,
        };
        // 1,000 prompt tokens (400 cached) and 100 out: 600 × 2.5 + 400 × 1.25 + 100 × 10.
        assert_eq!(p.micro_usd(1_000, 400, 100), 1_500 + 500 + 1_000);
        assert_eq!(p.micro_usd(10, 50, 0), 13);
    }
}

//! What a drill scenario spent: the tokens the upstreams reported in usage (the metrics'
//! `ringside_tokens_total`, before and after) and their price.

use serde::Serialize;

/// A scenario's tokens and money.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Spent {
    pub tokens: u64,
    pub usd: f64,
}

/// What the tokens each connection reported (`provider/connection` -> prompt, completion,
/// cached) cost, at the price of the first model each serves.
pub fn spent(
    tokens: &std::collections::BTreeMap<String, [u64; 3]>,
    keys: &[super::stage::Key],
    prices: &crate::flow::price::Prices,
) -> Spent {
    let mut out = Spent::default();
    for (label, [prompt, completion, cached]) in tokens {
        out.tokens += prompt + completion;
        let price = keys
            .iter()
            .find(|k| format!("{}/{}", k.provider, k.connection) == *label)
            .and_then(|k| Some((k.provider.as_str(), k.models.first()?.as_str())))
            .and_then(|(p, m)| prices.of(p, m));
        if let Some(p) = price {
            out.usd += p.micro_usd(*prompt, *cached, *completion) as f64 / 1e6;
        }
    }
    out
}

/// What tokens cost, as the config says over the built-in table (a config that does not read
/// prices nothing of its own).
pub fn prices(text: &str) -> crate::flow::price::Prices {
    toml::from_str::<crate::config::FileConfig>(text)
        .map(|f| crate::config::prices_in(&f))
        .unwrap_or_default()
}

//! How a route orders its targets, parsed once from the config's `strategy` name (the ordering
//! itself lives in `route::strategy`).

/// A selection strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Ordered fallback: first listed first.
    Priority,
    /// Rotate the starting point on every request.
    RoundRobin,
    /// Smooth weighted round robin over connection weights.
    Weighted,
    /// Uniformly random order.
    Random,
    /// Shuffled deck: every option once per cycle, in random order, then reshuffle.
    Deck,
    /// Power of two choices: of two random options, the one with less in flight and latency.
    P2c,
    /// Fewest requests in flight (across all cores) first.
    LeastInFlight,
    /// Use the first option until it cannot serve, then the next (priority order).
    FillFirst,
    /// Cheapest target first (`cost` in the route).
    Cost,
    /// Most quota headroom first, then the soonest reset (from rate-limit headers).
    ResetAware,
}

impl Strategy {
    pub const NAMES: [&'static str; 10] = [
        "priority",
        "round_robin",
        "weighted",
        "random",
        "deck",
        "p2c",
        "least_in_flight",
        "fill_first",
        "cost",
        "reset_aware",
    ];

    pub fn parse(s: &str) -> Option<Strategy> {
        Some(match s {
            "priority" | "fallback" => Strategy::Priority,
            "round_robin" | "round-robin" => Strategy::RoundRobin,
            "weighted" => Strategy::Weighted,
            "random" => Strategy::Random,
            "deck" | "shuffled_deck" | "strict-random" => Strategy::Deck,
            "p2c" | "power_of_two" => Strategy::P2c,
            "least_in_flight" | "least-used" | "least_used" => Strategy::LeastInFlight,
            "fill_first" | "fill-first" => Strategy::FillFirst,
            "cost" | "cost-optimized" => Strategy::Cost,
            "reset_aware" | "reset-aware" => Strategy::ResetAware,
            _ => return None,
        })
    }

    /// The strategy's name as `ringside check` prints it (the canonical one of its spellings).
    pub fn as_str(self) -> &'static str {
        Strategy::NAMES[self as usize]
    }

    /// Whether ordering needs the options' load figures.
    pub fn needs_load(self) -> bool {
        matches!(
            self,
            Strategy::P2c | Strategy::LeastInFlight | Strategy::Cost | Strategy::ResetAware
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Strategy;

    #[test]
    fn each_name_parses_to_the_strategy_that_prints_it() {
        for name in Strategy::NAMES {
            let s = Strategy::parse(name).expect("a name");
            assert_eq!(s.as_str(), name);
        }
        assert_eq!(
            Strategy::parse("fallback").map(Strategy::as_str),
            Some("priority")
        );
        assert_eq!(Strategy::parse("nope"), None);
    }
}

//! Renumbering a config onto the running process's slots. A freshly resolved config numbers
//! its connections and providers by their place in the file; a reload gives every connection
//! and provider the slot its identity already has (`state::slots`), so that the per-slot state
//! the cores keep (cooldowns, breakers, flow gates, in-flight counts) stays with it, and a
//! request that started on the old config still means the same connection by the same index.

use super::Config;
use crate::ids::ConnId;

/// A `locator` entry for a slot that holds no connection of this config.
pub const NO_SLOT: (usize, usize) = (usize::MAX, usize::MAX);

impl Config {
    /// Move every flat connection index and provider index onto slots.
    /// `conn_slot[i]`: the slot of the connection resolved at flat index `i`;
    /// `provider_slot[p]`: the slot of the provider at place `p` in `providers`.
    /// The slot counts are at least one past the highest slot used.
    pub fn renumber(
        &mut self,
        conn_slot: &[usize],
        slot_count: usize,
        provider_slot: &[usize],
        provider_slot_count: usize,
    ) {
        let map = |c: ConnId| ConnId::new(conn_slot.get(c.index()).copied().unwrap_or(c.index()));
        let mut locator = vec![NO_SLOT; slot_count];
        for (pi, p) in self.providers.iter_mut().enumerate() {
            p.slot = provider_slot.get(pi).copied().unwrap_or(pi);
            for (ci, c) in p.connections.iter_mut().enumerate() {
                c.index = map(c.index);
                if let Some(l) = locator.get_mut(c.index.index()) {
                    *l = (pi, ci);
                }
            }
        }
        self.locator = locator;
        let s = &mut self.resilience;
        // Per-provider settings by slot; a slot no provider of this config holds keeps a copy of
        // the first policy (nothing routes to it).
        if let Some(filler) = s.providers.first().cloned() {
            let mut by_slot = vec![filler; provider_slot_count];
            let mut conns = vec![Vec::new(); provider_slot_count];
            let old = std::mem::take(&mut s.providers);
            let old_conns = std::mem::take(&mut s.provider_conns);
            for (pi, (pol, list)) in old.into_iter().zip(old_conns).enumerate() {
                let slot = provider_slot.get(pi).copied().unwrap_or(pi);
                if slot < provider_slot_count {
                    by_slot[slot] = pol;
                    conns[slot] = list.into_iter().map(map).collect();
                }
            }
            s.providers = by_slot;
            s.provider_conns = conns;
        }
        let siblings = std::mem::take(&mut s.account_siblings)
            .into_iter()
            .map(|list| list.into_iter().map(map).collect());
        s.account_siblings = onto_slots(siblings, map, slot_count);
        s.one_model = onto_slots(std::mem::take(&mut s.one_model), map, slot_count);
        for c in &mut self.clients.list {
            // Not shared yet: the configuration is still being built.
            if let Some(allowed) = &mut std::sync::Arc::make_mut(c).allowed {
                for a in allowed.iter_mut() {
                    *a = map(*a);
                }
            }
        }
    }
}

/// Per-connection values by flat index, moved onto their slots (a slot no connection holds
/// gets the default).
fn onto_slots<T: Clone + Default>(
    by_index: impl IntoIterator<Item = T>,
    map: impl Fn(ConnId) -> ConnId,
    slot_count: usize,
) -> Vec<T> {
    let mut by_slot = vec![T::default(); slot_count];
    for (i, v) in by_index.into_iter().enumerate() {
        if let Some(to) = by_slot.get_mut(map(ConnId::new(i)).index()) {
            *to = v;
        }
    }
    by_slot
}

#[cfg(test)]
mod tests {
    use crate::config::{NO_SLOT, load_str};
    use crate::ids::ConnId;

    const TWO: &str = r#"
[[providers]]
id = "a"
base_url = "http://127.0.0.1:1/v1"
dialect = "openai"
[[providers.connections]]
id = "k1"
key_env = "K"
[[providers.connections]]
id = "k2"
key_env = "K"
models = ["m"]
[[providers]]
id = "b"
base_url = "http://127.0.0.1:2/v1"
dialect = "openai"
[[providers.connections]]
id = "k3"
key_env = "K"
"#;

    #[test]
    fn renumbering_moves_every_index_onto_its_slot() {
        let env = |n: &str| (n == "K").then(|| "sk-x".to_string());
        let mut c = load_str(TWO, "t", &env).expect("valid");
        // k1 keeps slot 0, k2 moves to 4, k3 to 2; provider b takes slot 3.
        c.renumber(&[0, 4, 2], 5, &[0, 3], 4);
        assert_eq!(c.slot_count(), 5);
        assert_eq!(c.locator[4], (0, 1));
        assert_eq!(c.locator[2], (1, 0));
        assert_eq!(c.locator[1], NO_SLOT);
        assert!(c.connection(ConnId::new(1)).is_none());
        assert_eq!(c.provider_of(ConnId::new(2)), Some(3));
        assert_eq!(c.provider_of(ConnId::new(4)), Some(0));
        assert_eq!(c.resilience.providers.len(), 4);
        assert_eq!(c.resilience.provider_conns[0], [0, 4].map(ConnId::new));
        assert_eq!(c.resilience.provider_conns[3], [ConnId::new(2)]);
        assert_eq!(c.resilience.account_siblings.len(), 5);
        // k2, the one-model key, at its slot.
        assert_eq!(c.resilience.one_model, [false, false, false, false, true]);
    }
}

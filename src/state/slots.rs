//! Slots: where each connection, provider and route keeps its per-process state. A slot means
//! one identity for as long as any configuration that knew it may still be serving a request,
//! so a reload never has to move state between indices: a connection whose identity is
//! unchanged (provider id, connection id and the key's fingerprint) keeps its slot and with it
//! its cooldown, lockouts, flow gate and in-flight count; a removed connection's slot is
//! retired, and given to a new identity only once no generation that knew it is alive.
//!
//! The shared per-slot arrays are allocated once, for `capacity` slots: a reload that would
//! need more answers that a restart is needed.

use crate::config::Config;
use crate::ids::ConnId;

/// A connection's identity (not its slot, `ids::ConnId`): a changed key is a new credential
/// and starts clean.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    provider: String,
    conn: String,
    key: [u8; 32],
}

#[derive(Clone, Debug)]
struct ConnSlot {
    id: Identity,
    /// `None` while a config holds it; else the generation that first lacked it.
    retired_at: Option<u64>,
}

/// What a reload did to the slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Slots whose state starts clean: new identities, and retired slots given out again.
    pub fresh_conns: Vec<ConnId>,
    /// Slots of connections this config no longer has (removed, or their key changed).
    pub retired_conns: Vec<ConnId>,
    pub fresh_providers: Vec<usize>,
}

/// Every slot ever handed out in this process.
#[derive(Debug)]
pub struct Slots {
    conns: Vec<ConnSlot>,
    /// Provider id by slot (a removed provider's slot waits for its id to come back).
    providers: Vec<String>,
    live_providers: Vec<bool>,
    /// Route metric labels by index; the last index is `other`.
    routes: Vec<String>,
    pub conn_capacity: usize,
    pub provider_capacity: usize,
    pub route_capacity: usize,
}

/// Room for growth past the start: twice the configured count, and at least this many more.
const HEADROOM: usize = 256;

fn capacity(n: usize) -> usize {
    (n * 2).max(n + HEADROOM)
}

fn fingerprint(secret: &str) -> [u8; 32] {
    crate::secret::digest(secret.as_bytes())
}

impl Slots {
    /// The slots of the config the process starts with (its indices are kept as they are).
    pub fn new(config: &Config) -> Slots {
        let mut s = Slots {
            conns: Vec::new(),
            providers: config.providers.iter().map(|p| p.id.clone()).collect(),
            live_providers: vec![true; config.providers.len()],
            routes: Vec::new(),
            conn_capacity: capacity(config.connection_count()),
            provider_capacity: capacity(config.providers.len()),
            route_capacity: capacity(config.routes.len() * 2 + 16),
        };
        for p in &config.providers {
            for c in &p.connections {
                s.conns.push(ConnSlot {
                    id: Identity {
                        provider: p.id.clone(),
                        conn: c.id.clone(),
                        key: fingerprint(c.secret.expose()),
                    },
                    retired_at: None,
                });
            }
        }
        s
    }

    /// Give `config`, a freshly resolved config of generation `generation`, the slots of the
    /// identities it shares with the running one, and renumber it onto them. Retired slots are
    /// given out again only when every live generation is at least as new as their
    /// retirement (`oldest_live`). Nothing changes when the slots would run out.
    pub fn assign(
        &mut self,
        config: &mut Config,
        generation: u64,
        oldest_live: u64,
    ) -> Result<Plan, String> {
        let mut trial = self.clone_state();
        let plan = trial.assign_in(config, generation, oldest_live)?;
        *self = trial;
        Ok(plan)
    }

    fn clone_state(&self) -> Slots {
        Slots {
            conns: self.conns.clone(),
            providers: self.providers.clone(),
            live_providers: self.live_providers.clone(),
            routes: self.routes.clone(),
            ..*self
        }
    }

    fn assign_in(
        &mut self,
        config: &mut Config,
        generation: u64,
        oldest_live: u64,
    ) -> Result<Plan, String> {
        let mut plan = Plan::default();
        let provider_slot = self.provider_slots(config, &mut plan)?;
        let mut seen = vec![false; self.conns.len()];
        let mut conn_slot = Vec::with_capacity(config.connection_count());
        for p in &config.providers {
            for c in &p.connections {
                let id = Identity {
                    provider: p.id.clone(),
                    conn: c.id.clone(),
                    key: fingerprint(c.secret.expose()),
                };
                let slot = self.conn_slot(id, oldest_live, &seen, &mut plan)?;
                if slot >= seen.len() {
                    seen.resize(slot + 1, false);
                }
                seen[slot] = true;
                conn_slot.push(slot);
            }
        }
        for (i, s) in self.conns.iter_mut().enumerate() {
            if !seen[i] && s.retired_at.is_none() {
                s.retired_at = Some(generation);
                plan.retired_conns.push(ConnId::new(i));
            }
        }
        config.renumber(
            &conn_slot,
            self.conns.len(),
            &provider_slot,
            self.providers.len(),
        );
        Ok(plan)
    }

    fn provider_slots(&mut self, config: &Config, plan: &mut Plan) -> Result<Vec<usize>, String> {
        let mut live = vec![false; self.providers.len()];
        let mut out = Vec::new();
        for p in &config.providers {
            let slot = match self.providers.iter().position(|id| *id == p.id) {
                Some(s) => s,
                None if self.providers.len() < self.provider_capacity => {
                    self.providers.push(p.id.clone());
                    live.push(false);
                    self.live_providers.push(false);
                    self.providers.len() - 1
                }
                None => {
                    return Err(format!(
                        "more than {} providers since the start: restart to add `{}`",
                        self.provider_capacity, p.id
                    ));
                }
            };
            if !self.live_providers[slot] {
                plan.fresh_providers.push(slot);
            }
            live[slot] = true;
            out.push(slot);
        }
        self.live_providers = live;
        Ok(out)
    }

    /// The slot for one connection of the new config.
    fn conn_slot(
        &mut self,
        id: Identity,
        oldest_live: u64,
        taken: &[bool],
        plan: &mut Plan,
    ) -> Result<usize, String> {
        if let Some(i) = self.conns.iter().position(|s| s.id == id) {
            if self.conns[i].retired_at.take().is_some() {
                plan.fresh_conns.push(ConnId::new(i)); // back after a removal: it starts clean
            }
            return Ok(i);
        }
        let reusable = self.conns.iter().enumerate().position(|(i, s)| {
            !taken.get(i).copied().unwrap_or(false)
                && s.retired_at.is_some_and(|at| at <= oldest_live)
        });
        let i = match reusable {
            Some(i) => i,
            None if self.conns.len() < self.conn_capacity => {
                self.conns.push(ConnSlot {
                    id: id.clone(),
                    retired_at: None,
                });
                self.conns.len() - 1
            }
            None => {
                return Err(format!(
                    "no free connection slot for `{}/{}` ({} in use or still referred to by requests in flight): restart to apply",
                    id.provider, id.conn, self.conn_capacity
                ));
            }
        };
        self.conns[i] = ConnSlot {
            id,
            retired_at: None,
        };
        plan.fresh_conns.push(ConnId::new(i));
        Ok(i)
    }

    /// The metric index of a route label: fixed for the process; `other` once they run out.
    pub fn route_index(&mut self, label: &str) -> usize {
        if let Some(i) = self.routes.iter().position(|r| r == label) {
            return i;
        }
        if self.routes.len() + 1 < self.route_capacity {
            self.routes.push(label.to_string());
            return self.routes.len() - 1;
        }
        self.other_route()
    }

    /// The metric index of names that are not routes (`other`): the last of the capacity.
    pub fn other_route(&self) -> usize {
        self.route_capacity - 1
    }
}

#[cfg(test)]
mod tests;

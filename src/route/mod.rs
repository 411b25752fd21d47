//! Routes: what the client names in `model`, resolved to an ordered list of candidate
//! (target, connection) pairs. The table is built once from the config and shared read-only.

mod candidates;
pub mod eligibility;
pub mod load;
mod patterns;
pub mod strategy;

pub use patterns::glob;

use crate::config::Config;
use crate::dialect::Dialect;
use crate::ids::{ConnId, TargetIdx};
use eligibility::Caps;
use load::Load;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use strategy::Strategy;

/// A name from the config, kept for the life of the process (the route table is built once at
/// start), or owned for a name resolved on the fly: decision records take it without copying.
pub use crate::names::Name;

fn keep(s: String) -> Name {
    Cow::Borrowed(crate::names::intern(&s))
}

/// One upstream model at one provider, with the connections that may serve it.
#[derive(Clone, Debug)]
pub struct Target {
    pub provider: usize,
    pub model: Name,
    /// `provider/model`.
    pub label: Name,
    /// Flat connection indices, highest priority (lowest number) first.
    pub connections: Vec<ConnId>,
    pub priorities: Vec<u32>,
    pub weights: Vec<u32>,
    /// Selector slot for ordering this target's connections.
    pub slot: usize,
    pub caps: Caps,
    /// Pinned to one connection (`connection = ...`).
    pub pinned: bool,
}

/// A resolvable name: a configured route, a plain model, or `provider/model`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: Name,
    pub strategy: Strategy,
    pub targets: Vec<Target>,
    /// Metrics label index (`other` for names resolved on the fly).
    pub index: usize,
    /// Selector slot for ordering targets.
    pub slot: usize,
    /// Request deadline for this route, if it has its own.
    pub deadline_ms: Option<u64>,
    /// Targets of another dialect may serve, translated.
    pub cross_dialect: bool,
    /// Keep-alive for waiting streams, if the route has its own (`stream.keepalive_ms`).
    pub keepalive_ms: Option<u32>,
    /// The dialects its targets' providers speak (a bit per `Dialect`).
    pub dialects: u8,
}

impl Entry {
    /// Whether a request in `reach` may go to a target of another API than its own: only then
    /// is it read for translation.
    #[inline]
    pub fn crosses(&self, reach: Reach) -> bool {
        reach.translatable && self.cross_dialect && self.dialects & !dialect_bit(reach.dialect) != 0
    }
}

fn dialect_bit(d: Dialect) -> u8 {
    1 << (d as u8)
}

/// The route a request resolved to: a configured entry, or one made for a `provider/model`
/// name. (Not a `Cow`: a request keeps its route to its end, in every held stream's task, and
/// a `Cow` is as wide as the entry itself, 88 bytes against 16.)
pub enum Resolved<'a> {
    Configured(&'a Entry),
    Made(Box<Entry>),
}

impl std::ops::Deref for Resolved<'_> {
    type Target = Entry;

    fn deref(&self) -> &Entry {
        match self {
            Resolved::Configured(e) => e,
            Resolved::Made(e) => e,
        }
    }
}

/// The targets a request can reach: those whose provider speaks its dialect, and, when its API
/// can be translated (Chat Completions, Responses, Messages), every other one on a route that
/// allows it (`cross_dialect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    pub dialect: Dialect,
    pub translatable: bool,
}

impl Reach {
    pub const fn of(endpoint: crate::dialect::Endpoint) -> Reach {
        use crate::dialect::Endpoint as E;
        Reach {
            dialect: endpoint.dialect(),
            translatable: matches!(endpoint, E::ChatCompletions | E::Responses | E::Messages),
        }
    }
}

/// One attempt option: a target of the entry and one of its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub target: TargetIdx,
    pub connection: ConnId,
}

#[derive(Debug)]
pub struct RouteTable {
    entries: Vec<Entry>,
    /// Built from the config only: a client's model name is looked up, never added.
    by_name: FxHashMap<String, usize>,
    /// Routes whose name is a pattern (`claude-*`; `*` alone is the default route, tried last),
    /// in config order: for names no exact entry has.
    patterns: Vec<usize>,
    /// Metric index used for names that are not in the table.
    pub other_index: usize,
    slots: usize,
    dialects: Vec<Dialect>,
    provider_ids: Vec<String>,
}

fn make_target(
    cfg: &Config,
    provider: usize,
    model: &str,
    pinned: Option<&str>,
    slot: usize,
    keep_names: bool,
) -> Target {
    make_target_for(
        cfg,
        provider,
        model,
        pinned,
        (slot, keep_names),
        model == "*",
    )
}

fn make_target_for(
    cfg: &Config,
    provider: usize,
    model: &str,
    pinned: Option<&str>,
    (slot, keep_names): (usize, bool),
    any_model: bool,
) -> Target {
    let p = &cfg.providers[provider];
    let name = |s: String| if keep_names { keep(s) } else { Cow::Owned(s) };
    let caps = Caps {
        region: p.region.clone(),
        tags: p.tags.clone(),
        ..Default::default()
    };
    let mut conns: Vec<_> = p
        .connections
        .iter()
        .filter(|c| match pinned {
            Some(id) => c.id == id,
            // `*` (a pattern route's target that passes the client's model on): every
            // connection of the provider, whatever models it lists.
            None => any_model || c.models.is_empty() || c.models.iter().any(|m| m == model),
        })
        .collect();
    conns.sort_by_key(|c| c.priority);
    Target {
        provider,
        model: name(model.to_string()),
        label: name(format!("{}/{model}", p.id)),
        connections: conns.iter().map(|c| c.index).collect(),
        priorities: conns.iter().map(|c| c.priority).collect(),
        weights: conns.iter().map(|c| c.weight).collect(),
        slot,
        caps,
        pinned: pinned.is_some(),
    }
}

/// A route's target as configured: its provider's connections for its model, and what it
/// declares it supports.
fn configured_target(
    cfg: &Config,
    provider: usize,
    tg: &crate::config::schema::TargetSection,
    slot: usize,
) -> Target {
    let mut target = make_target(
        cfg,
        provider,
        &tg.model,
        tg.connection.as_deref(),
        slot,
        true,
    );
    let caps = &mut target.caps;
    caps.tools = tg.tools;
    caps.vision = tg.vision;
    caps.structured_output = tg.structured_output;
    caps.context_window = tg.context_window;
    if tg.region.is_some() {
        caps.region = tg.region.clone();
    }
    if let Some(tags) = &tg.tags {
        caps.tags = tags.clone();
    }
    caps.cost = tg.cost.unwrap_or(0.0);
    target
}

impl RouteTable {
    pub fn build(cfg: &Config) -> RouteTable {
        let mut t = RouteTable {
            entries: Vec::new(),
            by_name: FxHashMap::default(),
            patterns: Vec::new(),
            other_index: 0,
            slots: 0,
            dialects: cfg.providers.iter().map(|p| p.dialect).collect(),
            provider_ids: cfg.providers.iter().map(|p| p.id.clone()).collect(),
        };
        for r in &cfg.routes {
            let strategy = r.strategy;
            let mut targets = Vec::new();
            for tg in &r.targets {
                if let Some(pi) = cfg.providers.iter().position(|p| p.id == tg.provider) {
                    let slot = t.next_slot();
                    targets.push(configured_target(cfg, pi, tg, slot));
                }
            }
            t.push(r.name.clone(), strategy, targets);
            if let Some(e) = t.entries.last_mut() {
                e.deadline_ms = r.deadline_ms;
                e.cross_dialect = r.cross_dialect;
                e.keepalive_ms = r.keepalive_ms;
                // A route across APIs judges each target by what its model supports before a
                // fallback translates for it (the known table where the config says nothing).
                if e.cross_dialect && e.dialects.count_ones() > 1 {
                    for tg in &mut e.targets {
                        eligibility::fill_from_known(&mut tg.caps, &tg.model, &cfg.models);
                    }
                }
            }
            if r.name.contains('*') {
                t.by_name.remove(&r.name);
                t.patterns.push(t.entries.len() - 1);
            }
        }
        // Plain model names: every provider whose connections list the model.
        let mut models: Vec<String> = Vec::new();
        for p in &cfg.providers {
            for c in &p.connections {
                for m in &c.models {
                    if !models.contains(m) {
                        models.push(m.clone());
                    }
                }
            }
        }
        for m in &models {
            if t.by_name.contains_key(m) {
                continue; // a route of the same name wins
            }
            let mut targets = Vec::new();
            for (pi, p) in cfg.providers.iter().enumerate() {
                if p.connections
                    .iter()
                    .any(|c| c.models.iter().any(|x| x == m))
                {
                    let slot = t.next_slot();
                    targets.push(make_target(cfg, pi, m, None, slot, true));
                }
            }
            t.push(m.clone(), Strategy::RoundRobin, targets);
            for (pi, p) in cfg.providers.iter().enumerate() {
                let name = format!("{}/{}", p.id, m);
                if !t.by_name.contains_key(&name)
                    && p.connections
                        .iter()
                        .any(|c| c.models.iter().any(|x| x == m))
                {
                    let slot = t.next_slot();
                    let target = make_target(cfg, pi, m, None, slot, true);
                    t.push(name, Strategy::RoundRobin, vec![target]);
                }
            }
        }
        t.other_index = t.entries.len();
        // The default route (`*`) after every other pattern, whatever the config's order.
        let entries = &t.entries;
        t.patterns.sort_by_key(|&i| entries[i].name == "*");
        t
    }

    fn next_slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    fn push(&mut self, name: String, strategy: Strategy, targets: Vec<Target>) {
        let index = self.entries.len();
        let slot = self.next_slot();
        self.by_name.insert(name.clone(), index);
        let dialects = self.dialects_of(&targets);
        self.entries.push(Entry {
            name: keep(name),
            strategy,
            targets,
            index,
            slot,
            deadline_ms: None,
            keepalive_ms: None,
            cross_dialect: true,
            dialects,
        });
    }

    fn dialects_of(&self, targets: &[Target]) -> u8 {
        targets
            .iter()
            .fold(0, |m, t| m | dialect_bit(self.dialects[t.provider]))
    }

    /// Number of selector slots a core needs.
    pub fn slot_count(&self) -> usize {
        self.slots + 1
    }

    /// Label names for metrics, indexed by `Entry::index` (plus `other`).
    pub fn labels(&self) -> Vec<String> {
        let mut v: Vec<String> = self.entries.iter().map(|e| e.name.to_string()).collect();
        v.push("other".into());
        v
    }

    /// Give every entry the metric index its name has for the life of the process (a reload
    /// keeps a route's series), and `other` to names resolved on the fly. Returns the labels
    /// by index, `""` where no entry of this table has the index.
    pub fn reindex(
        &mut self,
        mut index: impl FnMut(&str) -> usize,
        other: usize,
        capacity: usize,
    ) -> Vec<String> {
        let mut labels = vec![String::new(); capacity.max(other + 1)];
        for k in 0..self.entries.len() {
            let i = index(&self.entries[k].name);
            self.entries[k].index = i;
            if let Some(l) = labels.get_mut(i)
                && i != other
            {
                *l = self.metric_label(&self.entries[k].name).to_string();
            }
        }
        self.other_index = other;
        labels[other] = "other".into();
        labels
    }

    /// The metric label of a route: its name, or for a model's provider-pinned route
    /// (`openai/gpt-4o`, made from the connections' model lists) the model's, so that each
    /// model is one label value.
    fn metric_label<'n>(&self, name: &'n str) -> &'n str {
        match name.split_once('/') {
            Some((pid, model))
                if self.provider_ids.iter().any(|p| p == pid)
                    && self.by_name.contains_key(model) =>
            {
                model
            }
            _ => name,
        }
    }

    /// Resolve what the client put in `model`.
    pub fn lookup<'a>(&'a self, cfg: &Config, model: &str) -> Option<Resolved<'a>> {
        if let Some(&i) = self.by_name.get(model) {
            return Some(Resolved::Configured(&self.entries[i]));
        }
        if let Some(made) = self.made_for_provider(cfg, model) {
            return Some(made);
        }
        let &i = self
            .patterns
            .iter()
            .find(|&&i| glob(&self.entries[i].name, model))?;
        Some(self.matched(cfg, &self.entries[i], model))
    }

    /// `provider/model` for a model the provider's connections do not list.
    fn made_for_provider<'a>(&'a self, cfg: &Config, model: &str) -> Option<Resolved<'a>> {
        let (pid, m) = model.split_once('/')?;
        let pi = self.provider_ids.iter().position(|p| p == pid)?;
        if m.is_empty() {
            return None;
        }
        let target = make_target(cfg, pi, m, None, self.slots, false);
        if target.connections.is_empty() {
            return None;
        }
        Some(Resolved::Made(Box::new(Entry {
            name: Cow::Owned(model.to_string()),
            strategy: Strategy::Priority,
            targets: vec![target],
            index: self.other_index,
            slot: self.slots,
            deadline_ms: None,
            keepalive_ms: None,
            cross_dialect: true,
            dialects: dialect_bit(self.dialects[pi]),
        })))
    }

    /// Names clients may use in `model`, for `GET /v1/models`: (id, owner).
    pub fn model_list(&self) -> Vec<(&str, &str)> {
        self.entries
            .iter()
            .filter(|e| !e.name.contains('*'))
            .map(|e| {
                let owner = match e.targets.as_slice() {
                    [one] => self.provider_ids[one.provider].as_str(),
                    _ => "ringside",
                };
                (e.name.as_ref(), owner)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;

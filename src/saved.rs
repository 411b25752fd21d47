//! Resilience state that survives a restart: cooling keys, model and quota lockouts and
//! troubled breakers are kept in the store (`saved/…`) on the wall clock, and every core starts
//! from them with their remaining time, so a crash loop does not hammer a key the provider rate
//! limited a second ago; and the spacing learned from a key's rate-limit headers (until its
//! window resets); and what each configured tenant spent this day and this month against its
//! budgets (`flow::spend`), so that a restart does not hand a tenant a fresh budget. (Terminal states have their own entries, `terminal/…`, kept until an
//! operator resets them.)
//!
//! Off the request path: core 0, whose tables replicate every core's events, compares its
//! tables with what it last wrote once a second and writes only what changed. A state is named
//! as the fleet names it (`fleet::wire`: `provider/connection` with the key's fingerprint), so
//! a key replaced in the config starts clean.

use crate::fleet::wire::{Clocks, Fact, Names, incoming, outgoing};
use crate::flow::gate::Gate;
use crate::flow::spend::Ledgers;
use crate::resilience::breaker::Breaker;
use crate::resilience::{Event, Tables};
use crate::state::core::Core;
use crate::state::generation::Gen;
use serde_json::Value;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering::{self, Relaxed};
use std::time::Duration;

/// The store's prefix for these entries.
const PREFIX: &str = "saved/";
/// How often core 0 writes what changed (what a SIGKILL may lose at most).
const EVERY: Duration = Duration::from_secs(1);

/// What the tables and the keys' gates hold worth keeping now, by store key.
fn entries(
    (t, gates): (&Tables, &[Gate]),
    generation: &Gen,
    (names, clocks): (&Names, Clocks),
    now: u64,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (i, g) in gates.iter().enumerate() {
        let (spacing, until) = (
            g.learned_spacing_ms.load(Relaxed),
            g.learned_until_ms.load(Relaxed),
        );
        if spacing > 0
            && until > now
            && let Some(name) = names.label_with_key(crate::ids::ConnId::new(i))
        {
            let v = serde_json::json!({"spacing_ms": spacing, "until": clocks.to_unix(until)});
            out.insert(format!("{PREFIX}pace/{name}"), v);
        }
    }
    let mut fact = |ev: Event| {
        if let Some(f) = outgoing(&ev, names, clocks)
            && let Some((kind, field)) = f.field()
            && let Ok(v) = serde_json::to_value(&f)
        {
            out.insert(format!("{PREFIX}{kind}/{field}"), v);
        }
    };
    for (i, c) in t.conns.iter().enumerate() {
        if c.terminal.is_none() && c.cooling(now) {
            let conn = crate::ids::ConnId::new(i);
            fact(Event::Conn { conn, state: *c });
        }
    }
    for l in t.lockouts.iter().filter(|l| l.until > now) {
        fact(Event::Lock(l.clone()));
    }
    for p in &generation.config.providers {
        let Some(b) = t.breakers.get(p.slot).filter(|b| b.troubled()) else {
            continue;
        };
        if let Ok(v) = serde_json::to_value(b.with_times(|x| clocks.to_unix(x))) {
            out.insert(format!("{PREFIX}breaker/{}", p.id), v);
        }
    }
    out
}

/// Each budgeted tenant's counters in the periods now running (none while it spent nothing).
fn spend_entries(generation: &Gen, spend: &Ledgers) -> BTreeMap<String, Value> {
    let now = crate::clock::unix_ms();
    let (day, month) = crate::flow::spend::periods(now);
    let rules = generation.config.tenants.rules.iter();
    rules
        .filter(|r| r.budget.any())
        .filter_map(|r| {
            let used = spend.spent(r.id, now);
            let v = serde_json::json!({"day": day, "month": month, "used": used});
            (used != [0; 4]).then(|| (format!("{PREFIX}spend/{}", r.name), v))
        })
        .collect()
}

/// Give each budgeted tenant back what it spent in the periods still running.
pub fn restore_spend(store: &crate::store::Store, generation: &Gen, spend: &Ledgers) {
    let now = crate::clock::unix_ms();
    for (key, v) in store.scan(&format!("{PREFIX}spend/")) {
        let Some(name) = key
            .strip_prefix(PREFIX)
            .and_then(|k| k.strip_prefix("spend/"))
        else {
            continue;
        };
        let rules = &generation.config.tenants.rules;
        let rule = rules.iter().find(|r| r.name == name);
        let used: Option<[u64; 4]> = serde_json::from_value(v["used"].clone()).ok();
        if let (Some(rule), Some(day), Some(month), Some(used)) =
            (rule, v["day"].as_u64(), v["month"].as_u64(), used)
        {
            spend.restore(rule.id, day, month, used, now);
        }
    }
}

/// Core 0's task: write what changed once a second until shutdown (then once more).
pub async fn run(core: Rc<Core>) {
    let store = core.shared.store;
    let mut written: BTreeMap<String, Value> = store.scan(PREFIX).into_iter().collect();
    let mut names = Names::default();
    // Read once: an unchanged state then maps to the same wall-clock times every second, and
    // is not written again (two clock reads a second apart differ by a millisecond or so).
    let clocks = Clocks::now();
    loop {
        monoio::time::sleep(EVERY).await;
        let generation = core.generation();
        let g = &generation.generation;
        if names.generation != g.number {
            names = Names::of(g);
        }
        let now = crate::clock::now_ms();
        let gates = &core.shared.flow.gates;
        let mut fresh = entries((&core.tables.borrow(), gates), g, (&names, clocks), now);
        fresh.extend(spend_entries(g, &core.shared.flow.spend));
        for (k, v) in &fresh {
            if written.get(k) != Some(v) {
                store.put(k.clone(), v.clone());
            }
        }
        for k in written.keys().filter(|k| !fresh.contains_key(*k)) {
            store.delete(k.clone());
        }
        written = fresh;
        if core.shared.shutdown.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// Start `tables` from the saved states, with the time each has left.
pub fn restore(store: &crate::store::Store, generation: &Gen, tables: &mut Tables) {
    let saved = store.scan(PREFIX);
    if saved.is_empty() {
        return;
    }
    let names = Names::of(generation);
    let clocks = Clocks::now();
    let s = &generation.config.resilience;
    for (key, value) in saved {
        if let Some(provider) = key
            .strip_prefix(PREFIX)
            .and_then(|k| k.strip_prefix("breaker/"))
        {
            let slot = generation
                .config
                .providers
                .iter()
                .find(|p| p.id == provider)
                .map(|p| p.slot);
            if let (Some(slot), Ok(b)) = (slot, serde_json::from_value::<Breaker>(value))
                && let Some(mine) = tables.breakers.get_mut(slot)
            {
                *mine = b.with_times(|x| clocks.to_mono(x));
            }
            continue;
        }
        let Ok(fact) = serde_json::from_value::<Fact>(value) else {
            continue; // written by another version: its timers are not worth a refusal
        };
        if let Some(ev) = incoming(fact, &names, clocks) {
            tables.apply(&ev, s);
        }
    }
}

/// Give each key's gate back the spacing it had learned, for the time its window has left
/// (before the cores serve: the gates are shared).
pub fn restore_pacing(store: &crate::store::Store, generation: &Gen, gates: &[Gate]) {
    let saved = store.scan(&format!("{PREFIX}pace/"));
    if saved.is_empty() {
        return;
    }
    let names = Names::of(generation);
    let clocks = Clocks::now();
    for (key, v) in saved {
        let name = key
            .strip_prefix(PREFIX)
            .and_then(|k| k.strip_prefix("pace/"));
        let Some(slot) = name.and_then(|n| names.slot_of_label_with_key(n)) else {
            continue; // a connection gone, or its key replaced
        };
        let (Some(spacing), Some(until)) = (v["spacing_ms"].as_u64(), v["until"].as_u64()) else {
            continue;
        };
        if let Some(g) = gates.get(slot.index()) {
            g.learned_until_ms.store(clocks.to_mono(until), Relaxed);
            g.learned_spacing_ms.store(spacing.min(60_000), Relaxed);
        }
    }
}

//! Concurrency caps across the fleet. A connection's or an account's `max_concurrent` holds
//! for the fleet as a whole (an account by its id): each instance holds a share of the cap's slots in Redis (a sorted set of holders
//! scored by expiry, so a crashed instance's slots come back when they expire) and its flow
//! gate admits up to that share (`Gate::fleet_share`). The share follows demand from this
//! thread, never from a request: the request path reads one more atomic for a capped
//! connection, and an uncapped one touches nothing. Redis away: each instance falls back to
//! the cap divided by the instances last seen (at least 1), or to none (`when_unavailable`).
//! When Redis comes back (empty, or with the others' entries expired), an instance keeps its
//! fallback share until every instance it last saw holds slots again (or `REJOIN_GRACE`
//! passes): the others still admit their fallback shares until their own link is back, so a
//! first instance that took the whole cap at once would over-admit (`Rejoin`).

use super::link::{Backoff, Link, describe};
use super::wire::Names;
use crate::config::{FleetSettings, FleetUnavailable};
use crate::flow::gate::{Gate, NO_SHARE};
use crate::ids::ConnId;
use crate::state::core::Shared;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

/// Take the holder entries of this instance to `want` (at most what the cap leaves the other
/// instances' live entries), on the server's clock; returns the share granted and how many
/// instances hold slots.
const SHARE: &str = r#"
local key, me = KEYS[1], ARGV[1]
local want, cap, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local prefix = me .. '#'
local mine, others, seen = {}, 0, {}
for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
  if string.sub(m, 1, #prefix) == prefix then
    table.insert(mine, m)
  else
    others = others + 1
    local inst = string.match(m, '^(.*)#%d+$')
    if inst then seen[inst] = true end
  end
end
local grant = math.max(0, math.min(want, cap - others))
for _, m in ipairs(mine) do redis.call('ZREM', key, m) end
for i = 1, grant do redis.call('ZADD', key, now + ttl, prefix .. i) end
seen[me] = true
local n = 0
for _ in pairs(seen) do n = n + 1 end
redis.call('PEXPIRE', key, ttl * 10)
return {grant, n}
"#;

/// A holder entry lives this long unless refreshed (a crashed instance's slots come back then).
const TTL_MS: u64 = 3_000;
/// Entries are refreshed this often.
const REFRESH: Duration = Duration::from_secs(1);
/// A share above demand is kept this long before it is given back (no thrash on bursts).
const LINGER: Duration = Duration::from_millis(200);
/// After Redis returns, how long an instance waits at most for the others it last saw to hold
/// slots again: their link's longest backoff (5 s, +25 % jitter) and a refresh.
const REJOIN_GRACE: Duration = Duration::from_secs(8);

/// Back from a Redis outage with a fallback share: asked for no more until `instances` hold
/// slots again or `until` (set when Redis answers again) passes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rejoin {
    share: u32,
    instances: u32,
    until: Option<Instant>,
}

impl Rejoin {
    /// The share to ask for now (`want` clamped while rejoining).
    fn clamp(&mut self, want: u32, now: Instant) -> u32 {
        self.until.get_or_insert(now + REJOIN_GRACE);
        want.min(self.share.max(1))
    }

    /// Whether the fleet agrees again: every instance last seen is back, or the grace is over.
    fn over(&self, instances: u32, now: Instant) -> bool {
        instances >= self.instances || self.until.is_some_and(|u| now >= u)
    }
}

pub(super) struct Caps {
    pub link: Link,
    pub shared: Arc<Shared>,
    pub stop: Arc<AtomicBool>,
    pub settings: FleetSettings,
}

/// What this instance holds for one capped connection.
#[derive(Default)]
struct Held {
    share: u32,
    synced: Option<Instant>,
    surplus_since: Option<Instant>,
    /// Instances holding slots when last seen (for the fallback share).
    instances: u32,
    /// Back from an outage, until the fleet agrees again.
    rejoin: Option<Rejoin>,
}

/// The shares before the instance serves: from Redis, or the fallback when it is away.
pub(super) fn prime(c: &Caps) {
    let names = Names::of(&c.shared.staged());
    let mut held = HashMap::new();
    let result = c
        .link
        .connect()
        .and_then(|mut k| round(c, &mut k, &names, &mut held));
    if let Err(e) = result {
        unavailable(c, &names, &mut held, &e, true);
    }
}

pub(super) fn run(c: Caps) {
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::default();
    let mut retry_at = Instant::now();
    let mut held: HashMap<String, Held> = HashMap::new();
    let mut names = Names::default();
    while !c.stop.load(Acquire) {
        let generation = c.shared.staged();
        if generation.number != names.generation {
            names = Names::of(&generation);
            let capped: Vec<ConnId> = names.capped().map(|(slot, _, _)| slot).collect();
            release_uncapped(&c.shared.flow.gates, &capped);
        }
        if con.is_none() && Instant::now() >= retry_at {
            match c.link.connect() {
                Ok(k) => {
                    con = Some(k);
                    backoff.reset();
                }
                Err(e) => {
                    unavailable(&c, &names, &mut held, &e, backoff.is_fresh());
                    retry_at = Instant::now() + backoff.next();
                }
            }
        }
        let busy = match con.as_mut() {
            Some(k) => match round(&c, k, &names, &mut held) {
                Ok(busy) => busy,
                Err(e) => {
                    con = None;
                    unavailable(&c, &names, &mut held, &e, true);
                    retry_at = Instant::now() + backoff.next();
                    false
                }
            },
            None => false,
        };
        // Waiting requests: look again soon; otherwise a relaxed pace.
        std::thread::sleep(Duration::from_millis(if busy { 2 } else { 20 }));
    }
    // Leaving: give the slots back so the others need not wait for their expiry.
    if let Some(k) = con.as_mut() {
        for (key, h) in &held {
            if h.share > 0 {
                let _ = share(k, key, &c.settings.instance_id, 0, 0);
            }
        }
    }
}

/// A gate with a cap the fleet shares: a connection's, or an account's.
struct Capped<'a> {
    key: String,
    gate: &'a Gate,
    cap: u32,
    /// Requests waiting for this gate (an account's wait on its keys' gates).
    queued: u32,
    /// The connections whose waiters more room may let start.
    wake: Vec<ConnId>,
}

/// Every gate of this generation whose cap the fleet shares.
fn capped<'a>(c: &'a Caps, names: &Names) -> Vec<Capped<'a>> {
    let flow = c.shared.flow;
    let mut out = Vec::new();
    for (slot, label, cap) in names.capped() {
        if let Some(gate) = flow.gates.get(slot.index()) {
            out.push(Capped {
                key: c.settings.key(&format!("slots:{label}")),
                gate,
                cap,
                queued: gate.queued(),
                wake: vec![slot],
            });
        }
    }
    for (i, id, cap) in names.capped_accounts() {
        if let Some(gate) = flow.accounts.gate(i) {
            let members = flow.accounts.members(i).to_vec();
            out.push(Capped {
                key: c.settings.key(&format!("slots:account:{id}")),
                gate,
                cap,
                queued: members
                    .iter()
                    .filter_map(|&m| flow.gates.get(m.index()))
                    .map(Gate::queued)
                    .sum(),
                wake: members,
            });
        }
    }
    out
}

/// One pass over the capped gates; whether any has requests waiting.
fn round(
    c: &Caps,
    con: &mut redis::Connection,
    names: &Names,
    held: &mut HashMap<String, Held>,
) -> redis::RedisResult<bool> {
    let mut busy = false;
    let now = Instant::now();
    for g in capped(c, names) {
        let h = held.entry(g.key.clone()).or_default();
        busy |= g.queued > 0;
        let Some(mut want) = wanted(h, g.gate.running() + g.queued, g.cap, now) else {
            continue;
        };
        if let Some(r) = h.rejoin.as_mut() {
            want = r.clamp(want, now);
        }
        // Lowered here first, so that no start takes a slot about to be given back.
        let want = if want < h.share {
            want.max(g.gate.set_fleet_share(want))
        } else {
            want
        };
        let (granted, instances) = share(con, &g.key, &c.settings.instance_id, want, g.cap)?;
        h.share = granted;
        h.instances = instances.max(1);
        if h.rejoin.is_some_and(|r| r.over(h.instances, now)) {
            h.rejoin = None;
        }
        h.synced = Some(now);
        let before = g.gate.fleet_share();
        g.gate.set_fleet_share(granted);
        // More room: the cores with requests waiting for it take them.
        if before == NO_SHARE || granted > before {
            for &conn in &g.wake {
                if c.shared.flow.gates[conn].waiting_cores.load(Acquire) != 0 {
                    c.shared.flow.ring(conn);
                }
            }
        }
    }
    Ok(busy)
}

/// The share to ask Redis for now, if anything is to change (or to be refreshed).
fn wanted(h: &mut Held, demand: u32, cap: u32, now: Instant) -> Option<u32> {
    // Always one slot at hand, so that a first request does not wait for a round trip.
    let need = demand.max(1).min(cap);
    let refresh = h.synced.is_none_or(|t| now.duration_since(t) >= REFRESH);
    if need > h.share {
        h.surplus_since = None;
        return Some(need);
    }
    if need < h.share {
        let since = *h.surplus_since.get_or_insert(now);
        if now.duration_since(since) >= LINGER {
            h.surplus_since = None;
            return Some(need);
        }
    } else {
        h.surplus_since = None;
    }
    refresh.then_some(h.share)
}

fn share(
    con: &mut redis::Connection,
    key: &str,
    me: &str,
    want: u32,
    cap: u32,
) -> redis::RedisResult<(u32, u32)> {
    redis::cmd("EVAL")
        .arg(SHARE)
        .arg(1)
        .arg(key)
        .arg(me)
        .arg(want)
        .arg(cap)
        .arg(TTL_MS)
        .query(con)
}

/// Redis is away: each capped gate falls back to its local share (or to none).
fn unavailable(
    c: &Caps,
    names: &Names,
    held: &mut HashMap<String, Held>,
    e: &redis::RedisError,
    say: bool,
) {
    if say {
        crate::log::event(
            "warn",
            "fleet: Redis away; concurrency caps fall back to this instance's share",
            serde_json::json!({"error": describe(e), "when_unavailable": c.settings.when_unavailable.as_str()}),
        );
    }
    for g in capped(c, names) {
        let h = held.entry(g.key).or_default();
        h.share = match c.settings.when_unavailable {
            FleetUnavailable::LocalShare => (g.cap / h.instances.max(1)).max(1),
            FleetUnavailable::Reject => 0,
        };
        // (Rejecting, the others admit nothing meanwhile: nothing to wait for on return.)
        if c.settings.when_unavailable == FleetUnavailable::LocalShare && h.instances > 1 {
            let instances = h.rejoin.map_or(h.instances, |r| r.instances);
            h.rejoin = Some(Rejoin {
                share: h.share,
                instances,
                until: None,
            });
        }
        h.synced = None;
        g.gate.set_fleet_share(h.share);
    }
}

/// A connection no longer capped (a reload) is the instance's own again.
fn release_uncapped(gates: &[Gate], capped: &[ConnId]) {
    for (i, g) in gates.iter().enumerate() {
        if !capped.contains(&ConnId::new(i)) && g.fleet_share() != NO_SHARE {
            g.set_fleet_share(NO_SHARE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_from_an_outage_the_fallback_share_holds_until_the_fleet_agrees() {
        let t0 = Instant::now();
        // Two instances were seen; the fallback share of a cap of 6 was 3.
        let mut r = Rejoin {
            share: 3,
            instances: 2,
            until: None,
        };
        // Redis answers again, empty: this instance alone holds slots; it asks for 3, not 6.
        assert_eq!(r.clamp(6, t0), 3);
        assert!(!r.over(1, t0 + Duration::from_secs(1)));
        // The other instance holds slots again: the fleet agrees, shares follow demand.
        assert!(r.over(2, t0 + Duration::from_secs(1)));
        // Or it never comes back: the grace ends it.
        assert!(r.over(1, t0 + REJOIN_GRACE));
        // A fallback share of 0 still keeps one slot at hand.
        let mut none = Rejoin {
            share: 0,
            instances: 3,
            until: None,
        };
        assert_eq!(none.clamp(4, t0), 1);
    }
}

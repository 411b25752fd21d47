//! Fleet mode: several Ringside instances behind one load balancer, or one beside each gateway
//! pod, share what they learn through Redis (or Valkey), so that a key one instance saw
//! refused is left alone by all of them.
//!
//! Shared today: connection health (cooldowns, terminal states, operator resets), model
//! lockouts, and breaker and window-gate failures, as the same events the cores replicate to
//! each other (`wire`); every connection's concurrency cap, held across the fleet (`caps`);
//! the exclusive lease book (`leases`); session pins and managed client keys (`kv`); tenant
//! quotas (`quotas`). Threads of the fleet own the Redis connections; the request path waits
//! on Redis only to fence a leased request and to count a tenant that has quotas (one round
//! trip each): otherwise it reads its core's tables and gates as in a single instance. Redis
//! away: health stays local, and what was learned meanwhile is sent when it is back; caps fall
//! back to a share of their own; quotas to the instance's own count; leases fail closed.

mod caps;
mod idempotency;
mod kv;
mod leases;
mod link;
mod pace;
mod publish;
mod quotas;
pub mod signed;
mod subscribe;
mod trust;
pub mod wire;

use crate::config::FleetSettings;
use crate::resilience::Event;
use crate::state::core::Shared;
use crossbeam_channel::Receiver;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::thread::JoinHandle;

fn spawn(name: &str, f: Box<dyn FnOnce() + Send>) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| format!("cannot start the fleet's threads: {e}"))
}

/// The running fleet link of this instance.
pub struct Fleet {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// One worker thread of the fleet, ready to start.
type Worker = (&'static str, Box<dyn FnOnce() + Send>);

/// Join the fleet: read what the others know (before this instance serves, within the Redis
/// timeout), take over what the fleet keeps (leases, shared entries, quotas), then publish and
/// listen on threads of their own. A Redis that cannot be reached is said and retried; it does
/// not stop the instance.
pub fn start(
    shared: Arc<Shared>,
    inbox: Receiver<Event>,
    s: &FleetSettings,
) -> Result<Fleet, String> {
    let link = link::Link::new(s)?;
    let key = signed::FleetKey::new(s.secret.expose());
    shared.fleet.enabled.store(true, Release);
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = vec![health(&link, &key, &shared, inbox, s, &stop)];
    let caps = caps::Caps {
        link: link.clone(),
        shared: shared.clone(),
        stop: stop.clone(),
        settings: s.clone(),
    };
    caps::prime(&caps);
    workers.push(("ringside-fleet-caps", Box::new(move || caps::run(caps))));
    workers.extend(keepers(&link, &key, &shared, s, &stop));
    let mut threads = Vec::new();
    for (name, work) in workers {
        threads.push(spawn(name, work)?);
    }
    Ok(Fleet { stop, threads })
}

/// Health: what the others know is loaded now; then a publisher and a listener.
fn health(
    link: &link::Link,
    key: &signed::FleetKey,
    shared: &Arc<Shared>,
    inbox: Receiver<Event>,
    s: &FleetSettings,
    stop: &Arc<AtomicBool>,
) -> Worker {
    let channel = s.key("health");
    let sub = subscribe::Subscriber {
        link: link.clone(),
        shared: shared.clone(),
        stop: stop.clone(),
        instance: s.instance_id.clone(),
        channel: channel.clone(),
        lease_channel: leases::Leases::channel(s),
        pattern: s.key("health:*"),
        settings: s.clone(),
    };
    let mut reader = trust::Reader::new(key, shared);
    match subscribe::load(&sub, &mut wire::Names::default(), &mut reader) {
        Ok(n) => crate::log::event(
            "info",
            "fleet: joined; the other instances' health is loaded",
            serde_json::json!({"instance": s.instance_id, "states_loaded": n}),
        ),
        Err(e) => crate::log::event(
            "warn",
            "fleet: Redis cannot be reached at start; serving on local health until it can",
            serde_json::json!({"instance": s.instance_id, "error": e.to_string()}),
        ),
    }
    let publisher = publish::Publisher {
        link: link.clone(),
        shared: shared.clone(),
        inbox,
        stop: stop.clone(),
        instance: s.instance_id.clone(),
        channel,
        key: key.clone(),
        hashes: [
            ("conn", s.key(&format!("health:conn:{}", s.instance_id))),
            ("lock", s.key(&format!("health:lock:{}", s.instance_id))),
        ],
    };
    (
        "ringside-fleet-health",
        Box::new(move || {
            let listener = std::thread::Builder::new()
                .name("ringside-fleet-sub".into())
                .spawn(move || subscribe::run(sub, reader));
            publish::run(publisher);
            if let Ok(l) = listener {
                let _ = l.join();
            }
        }),
    )
}

/// What the fleet keeps from now on, before the instance serves: the lease book, the shared
/// store entries (pins, client keys) and the tenant quotas' counts.
fn keepers(
    link: &link::Link,
    key: &signed::FleetKey,
    shared: &Arc<Shared>,
    s: &FleetSettings,
    stop: &Arc<AtomicBool>,
) -> Vec<Worker> {
    let (to_leases, lease_rx) = crossbeam_channel::unbounded();
    shared.store.lease_elsewhere(to_leases);
    let lease_book = leases::Leases {
        link: link.clone(),
        shared: shared.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: lease_rx,
        key: key.clone(),
        reader: trust::Reader::new(key, shared),
    };
    let (to_kv, kv_rx) = crossbeam_channel::unbounded();
    shared.store.replicate_to(to_kv);
    let kv = kv::Kv {
        link: link.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: kv_rx,
        key: key.clone(),
    };
    let (to_quotas, quota_rx) = crossbeam_channel::unbounded();
    let tenants = &shared.flow.tenants;
    tenants.count_elsewhere(to_quotas);
    let quota_keeper = quotas::Quotas {
        link: link.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: quota_rx,
    };
    let (to_pace, pace_rx) = crossbeam_channel::unbounded();
    shared.flow.pace_elsewhere(to_pace);
    let pacer = pace::Pace {
        link: link.clone(),
        shared: shared.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: pace_rx,
    };
    vec![
        ("ringside-fleet-pace", Box::new(move || pace::run(pacer))),
        (
            "ringside-fleet-leases",
            Box::new(move || leases::run(lease_book)),
        ),
        ("ringside-fleet-kv", Box::new(move || kv::run(kv))),
        (
            "ringside-fleet-quota",
            Box::new(move || quotas::run(quota_keeper)),
        ),
    ]
}

/// Where an entry of a hash is, for its signature: the hash's key and the field.
fn entry_place(hash: &str, field: &str) -> String {
    format!("{hash}#{field}")
}

impl Fleet {
    /// Send what is still queued, then leave (at the end of the drain).
    pub fn stop(self) {
        self.stop.store(true, Release);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

//! Fleet mode: several Ringside instances behind one load balancer, or one beside each gateway
//! pod, share what they learn through Redis (or Valkey), so that a key one instance saw
//! refused is left alone by all of them.
//!
//! Shared today: connection health (cooldowns, terminal states, operator resets), model
//! lockouts, and breaker and window-gate failures, as the same events the cores replicate to
//! each other (`wire`); every connection's concurrency cap, held across the fleet (`caps`);
//! the exclusive lease book (`leases`); session pins and managed client keys (`kv`). Five
//! threads per instance own the Redis connections (`publish`, `subscribe`, `caps`, `leases`,
//! `kv`); the request path never waits on
//! Redis except to fence a leased request: it reads its core's tables and gates as in a
//! single instance. Redis away: health stays local, and what was learned meanwhile is sent
//! when it is back; caps fall back to a share of their own; leases fail closed.

mod caps;
mod kv;
mod leases;
mod link;
mod publish;
mod subscribe;
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

/// Join the fleet: read what the others know (before this instance serves, within the Redis
/// timeout), then publish and listen on threads of their own. A Redis that cannot be reached
/// is said and retried; it does not stop the instance.
pub fn start(
    shared: Arc<Shared>,
    inbox: Receiver<Event>,
    s: &FleetSettings,
) -> Result<Fleet, String> {
    let link = link::Link::new(s)?;
    shared.fleet.enabled.store(true, Release);
    let stop = Arc::new(AtomicBool::new(false));
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
    match subscribe::load(&sub, &mut wire::Names::default()) {
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
        link,
        shared,
        inbox,
        stop: stop.clone(),
        instance: s.instance_id.clone(),
        channel,
        hashes: [
            ("conn", s.key(&format!("health:conn:{}", s.instance_id))),
            ("lock", s.key(&format!("health:lock:{}", s.instance_id))),
        ],
    };
    let caps = caps::Caps {
        link: publisher.link.clone(),
        shared: publisher.shared.clone(),
        stop: stop.clone(),
        settings: s.clone(),
    };
    caps::prime(&caps);
    // The lease book is the fleet's from now on, before the instance serves.
    let (to_leases, lease_rx) = crossbeam_channel::unbounded();
    caps.shared.store.lease_elsewhere(to_leases);
    // Pins and managed client keys written here reach the fleet too.
    let (to_kv, kv_rx) = crossbeam_channel::unbounded();
    caps.shared.store.replicate_to(to_kv);
    let kv = kv::Kv {
        link: caps.link.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: kv_rx,
    };
    let lease_book = leases::Leases {
        link: caps.link.clone(),
        shared: caps.shared.clone(),
        stop: stop.clone(),
        settings: s.clone(),
        rx: lease_rx,
    };

    let threads = vec![
        spawn(
            "ringside-fleet-pub",
            Box::new(move || publish::run(publisher)),
        )?,
        spawn("ringside-fleet-sub", Box::new(move || subscribe::run(sub)))?,
        spawn("ringside-fleet-caps", Box::new(move || caps::run(caps)))?,
        spawn("ringside-fleet-kv", Box::new(move || kv::run(kv)))?,
        spawn(
            "ringside-fleet-leases",
            Box::new(move || leases::run(lease_book)),
        )?,
    ];
    Ok(Fleet { stop, threads })
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

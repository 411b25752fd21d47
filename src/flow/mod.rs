//! Flow control: Bottleneck-style admission per connection. The limits (concurrency, spacing,
//! reservoir) hold for the connection as a whole through lock-free [`gate::Gate`]s shared by
//! every core; waiters queue on their own core ([`queue::LocalQueue`]: priority, tenant turns,
//! FIFO) and cores take freed slots by urgency and in turn, so a slot freed on one core wakes a
//! waiter on another (through that core's doorbell) and no core can hog a connection.

pub mod account;
mod acquire;
pub mod bill;
pub mod estimate;
pub mod gate;
pub mod live;
pub mod price;
mod pump;
pub mod queue;
pub mod settings;
pub mod spend;
pub mod tenant;

use crate::ids::ConnId;
pub use acquire::{Ask, acquire};
use gate::{Blocked, Gate};
pub use pump::{run_doorbell, run_pump};
use queue::LocalQueue;
use serde::Serialize;
use settings::{Budgets, Knob, Value};
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::task::{Poll, Waker};

/// What to do when a connection has no free slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Saturation {
    /// Wait in the queue (within `max_wait_ms`).
    #[default]
    Queue,
    /// Skip this connection; try the next candidate.
    Reject,
    /// Go anyway, over the cap (as the reference's quota-share fail-open).
    FailOpen,
}

impl Saturation {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Saturation::Queue => "queue",
            Saturation::Reject => "reject",
            Saturation::FailOpen => "fail_open",
        }
    }
}

impl Saturation {
    pub fn parse(s: &str) -> Option<Saturation> {
        Some(match s {
            "queue" => Saturation::Queue,
            "reject" => Saturation::Reject,
            "fail_open" => Saturation::FailOpen,
            _ => return None,
        })
    }
}

/// A connection's flow settings from the config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnFlow {
    pub max_concurrent: u32,
    pub min_time_ms: u64,
    pub reservoir: i64,
    pub reservoir_refresh_ms: u64,
    pub on_saturation: Saturation,
    pub max_wait_ms: Option<u64>,
    pub execution_max_wait_ms: Option<u64>,
    pub max_queue_depth: Option<u64>,
    /// The key's account, when the account has limits of its own (`account::Accounts`).
    pub account: Option<usize>,
}

/// Shared by every core: the gates, the budgets, the doorbells.
#[derive(Debug)]
pub struct FlowShared {
    /// By connection slot, for every slot the process may hand out (`state::slots`).
    pub gates: Vec<Gate>,
    pub conns: Vec<live::LiveConnFlow>,
    pub budgets: Budgets,
    pub tenants: tenant::Tenants,
    /// What each tenant spent against its budgets (`[[tenants]]`).
    pub spend: spend::Ledgers,
    /// Bytes per prompt token, learned per provider (budget reservations).
    pub ratios: estimate::Ratios,
    pub accounts: account::Accounts,
    /// Write ends; one byte wakes that core's queue pump.
    doorbells: Vec<UnixStream>,
    /// In fleet mode, where spacing and reservoirs are reserved fleet-wide (`fleet_pace`).
    pace: std::sync::OnceLock<crossbeam_channel::Sender<PaceAsk>>,
}

/// A start on a paced connection (spacing or a reservoir), reserved across the fleet: the
/// answer is how long to wait before starting, or, with the reservoir empty fleet-wide, when
/// it refills (`Err`). Dropped unanswered: the fleet could not be asked.
#[derive(Debug)]
pub struct PaceAsk {
    pub conn: ConnId,
    pub reply: futures_channel::oneshot::Sender<Result<u64, u64>>,
}

impl FlowShared {
    pub fn new(conns: Vec<ConnFlow>, budgets: Budgets, doorbells: Vec<UnixStream>) -> Self {
        Self::with_tenants(conns, budgets, doorbells, tenant::TenantLimits::default())
    }

    pub fn with_tenants(
        conns: Vec<ConnFlow>,
        budgets: Budgets,
        doorbells: Vec<UnixStream>,
        limits: tenant::TenantLimits,
    ) -> Self {
        FlowShared {
            tenants: tenant::Tenants::new(limits),
            spend: spend::Ledgers::default(),
            ratios: estimate::Ratios::default(),
            gates: conns.iter().map(gate_for).collect(),
            conns: conns.iter().map(live::LiveConnFlow::new).collect(),
            budgets,
            doorbells,
            accounts: account::Accounts::default(),
            pace: Default::default(),
        }
    }

    /// The accounts with limits of their own, and their gates.
    pub fn with_accounts(mut self, limits: &[account::AccountLimits]) -> Self {
        let of: Vec<Option<usize>> = self.conns.iter().map(|c| c.account()).collect();
        self.accounts = account::Accounts::new(limits, &of);
        self
    }

    /// Start on the key's gate and its account's (both or neither).
    pub fn try_start(&self, conn: ConnId, now: u64) -> Result<(), gate::Blocked> {
        let account = self.conns.get(conn.index()).and_then(|c| c.account());
        self.accounts.try_start(&self.gates[conn], account, now)
    }

    /// Nothing to count for this key: neither it nor its account has a limit.
    fn unlimited(&self, conn: ConnId) -> bool {
        self.gates[conn].unlimited()
            && self
                .conns
                .get(conn.index())
                .and_then(|c| c.account())
                .and_then(|a| self.accounts.gate(a))
                .is_none_or(Gate::unlimited)
    }

    pub fn effective(&self, conn: ConnId, k: Knob) -> Value {
        let own = self.conns.get(conn.index()).and_then(|c| c.own(k));
        self.budgets.effective(k, own)
    }

    /// From now on, paced connections reserve their starts across the fleet too.
    pub fn pace_elsewhere(&self, to: crossbeam_channel::Sender<PaceAsk>) {
        let _ = self.pace.set(to);
    }

    /// Whether a start on `conn` must be reserved across the fleet (`fleet_pace`).
    pub fn paced_elsewhere(&self, conn: ConnId) -> bool {
        self.pace.get().is_some()
            && self.gates.get(conn.index()).is_some_and(|g| {
                g.min_time_ms.load(Relaxed) > 0 || g.reservoir_amount.load(Relaxed) > 0
            })
    }

    /// Reserve a start on `conn` across the fleet: how long to wait first (`Ok`), or how long
    /// until the fleet's reservoir refills (`Err`). A fleet that does not answer within a
    /// second leaves the pace to this instance's own gate.
    pub async fn fleet_pace(&self, conn: ConnId) -> Result<u64, u64> {
        let Some(to) = self.pace.get() else {
            return Ok(0);
        };
        let (reply, answer) = futures_channel::oneshot::channel();
        if to.send(PaceAsk { conn, reply }).is_err() {
            return Ok(0);
        }
        match crate::timer::timeout(std::time::Duration::from_secs(1), answer).await {
            Ok(Ok(r)) => r,
            _ => Ok(0),
        }
    }

    /// A reload's settings for the connection in slot `conn`: the knobs always; the gate's
    /// limits only where the config changed them from `was` (a limit an operator set through
    /// the admin API stays until the config says otherwise). A fresh slot (`was` = None)
    /// starts with a clean gate.
    pub fn apply(&self, conn: ConnId, now: &ConnFlow, was: Option<&ConnFlow>) {
        let (Some(live), Some(gate)) = (self.conns.get(conn.index()), self.gates.get(conn.index()))
        else {
            return;
        };
        live.set(now);
        let changed = |f: fn(&ConnFlow) -> u64| was.is_none_or(|w| f(w) != f(now));
        if changed(|c| u64::from(c.max_concurrent)) {
            gate.max_concurrent.store(now.max_concurrent, Relaxed);
        }
        if changed(|c| c.min_time_ms) {
            gate.min_time_ms.store(now.min_time_ms, Relaxed);
        }
        if changed(|c| c.reservoir as u64) || changed(|c| c.reservoir_refresh_ms) {
            gate.reset_reservoir(now.reservoir, now.reservoir_refresh_ms);
        }
        if was.is_none() {
            gate.learned_spacing_ms.store(0, Relaxed);
        }
    }

    /// Wake every core holding tickets for `conn`.
    pub fn ring(&self, conn: ConnId) {
        let mut bits = self.gates[conn].waiting_cores.load(Acquire);
        while bits != 0 {
            let core = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.ring_core(core);
        }
    }

    pub fn ring_core(&self, core: usize) {
        if let Some(mut s) = self.doorbells.get(core) {
            // Full pipe: the core already has a wake-up pending.
            let _ = s.write(&[1]);
        }
    }
}

/// A connection's gate as the config sets it up.
fn gate_for(c: &ConnFlow) -> Gate {
    Gate::new(
        c.max_concurrent,
        c.min_time_ms,
        c.reservoir,
        c.reservoir_refresh_ms,
    )
}

/// A held slot. Dropping it frees the slot and wakes waiters on every core; it is dropped
/// only after the request's upstream connection has been closed or pooled.
#[derive(Debug)]
pub struct Permit {
    flow: &'static FlowShared,
    conn: ConnId,
    /// False for a fail-open start over the cap (nothing to free).
    counted: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let flow = self.flow;
        flow.gates[self.conn].release();
        let account = flow.conns.get(self.conn.index()).and_then(|c| c.account());
        match account.and_then(|a| flow.accounts.gate(a).map(|g| (a, g))) {
            Some((a, g)) => {
                g.release();
                // The account's slot may let any of its keys' waiters start.
                for &conn in flow.accounts.members(a) {
                    if flow.gates[conn].waiting_cores.load(Acquire) != 0 {
                        flow.ring(conn);
                    }
                }
            }
            None => {
                if flow.gates[self.conn].waiting_cores.load(Acquire) != 0 {
                    flow.ring(self.conn);
                }
            }
        }
    }
}

/// Why admission failed (local overload: never counted against the upstream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max_queue_depth` waiters already wait.
    QueueFull,
    /// Waited `max_wait_ms` (or the request's deadline) without a slot.
    QueueTimeout { waited_ms: u64 },
    /// `on_saturation = "reject"` and no slot free.
    Saturated,
}

/// A minimal single-threaded notification (the pump sleeps on it).
#[derive(Default)]
pub struct LocalNotify {
    flag: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl LocalNotify {
    pub fn notify(&self) {
        self.flag.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    pub async fn notified(&self) {
        std::future::poll_fn(|cx| {
            if self.flag.replace(false) {
                Poll::Ready(())
            } else {
                *self.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

type Grant = futures_channel::oneshot::Sender<Permit>;

/// One core's queues and its pump's wake-up.
pub struct FlowCore {
    pub id: usize,
    pub queues: RefCell<Vec<LocalQueue<Grant>>>,
    pub notify: LocalNotify,
}

impl FlowCore {
    pub fn new(id: usize, connections: usize) -> Self {
        FlowCore {
            id,
            queues: RefCell::new((0..connections).map(|_| LocalQueue::default()).collect()),
            notify: LocalNotify::default(),
        }
    }

    /// Room for `connections` slots after a reload (waiters already queued stay).
    pub fn fit(&self, connections: usize) {
        let mut q = self.queues.borrow_mut();
        if q.len() < connections {
            q.resize_with(connections, LocalQueue::default);
        }
    }

    /// Hand out slots whose turn has come. Returns the time until the next spacing/reservoir
    /// retry, if any connection is waiting on one.
    pub fn pump(&self, flow: &'static FlowShared, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut queues = self.queues.borrow_mut();
        for (slot, q) in queues.iter_mut().enumerate() {
            let conn = ConnId::new(slot);
            let gate = &flow.gates[conn];
            if q.is_empty() && gate.waiting_cores.load(Acquire) & (1 << (self.id % 64)) == 0 {
                continue;
            }
            q.prune(|w| w.grant.is_canceled());
            gate.publish(self.id, q.best_priority());
            while !q.is_empty() && gate.my_turn(self.id) {
                match flow.try_start(conn, now) {
                    Ok(()) => {
                        gate.served(self.id);
                        let permit = Permit {
                            flow,
                            conn,
                            counted: true,
                        };
                        if let Some(w) = q.pop() {
                            // A waiter that left at this very moment drops the permit again.
                            let _ = w.grant.send(permit);
                        }
                        gate.publish(self.id, q.best_priority());
                        // Another core may be next in turn for a slot that is still free.
                        flow.ring(conn);
                    }
                    Err(Blocked::Full) => break,
                    Err(Blocked::Later(ms)) => {
                        next = Some(next.map_or(ms, |n: u64| n.min(ms)));
                        break;
                    }
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests;

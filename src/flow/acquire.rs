//! One attempt's admission on a connection: a slot at once when the connection is free and
//! nobody queues ahead, else a place in this core's queue (or a refusal, as the connection's
//! saturation policy says).

use super::queue::Waiter;
use super::settings::Knob;
use super::{FlowCore, FlowShared, Permit, Refused, Saturation};
use crate::ids::ConnId;
use std::sync::atomic::Ordering::Relaxed;

/// Admission for one attempt on `conn`.
pub struct Ask {
    pub conn: ConnId,
    pub tenant: u64,
    pub priority: u8,
    /// The request's remaining time: a queue wait never outlives the request.
    pub time_left_ms: u64,
}

/// Take a slot now if the connection is free and nobody queues ahead; otherwise queue (or
/// refuse, per the connection's saturation policy). `watch` aborts the wait when the client
/// leaves (`Err(None)`).
pub async fn acquire<F>(
    flow: &'static FlowShared,
    fc: &FlowCore,
    ask: Ask,
    now: u64,
    wait_with: impl FnOnce(futures_channel::oneshot::Receiver<Permit>, u64) -> F,
) -> Result<Permit, Option<Refused>>
where
    F: std::future::Future<Output = Option<Option<Permit>>>,
{
    let gate = &flow.gates[ask.conn];
    if flow.unlimited(ask.conn) {
        // Nothing to count against: no shared write at all on this path.
        return Ok(Permit {
            flow,
            conn: ask.conn,
            counted: false,
        });
    }
    if !gate.has_queue() && flow.try_start(ask.conn, now).is_ok() {
        return Ok(Permit {
            flow,
            conn: ask.conn,
            counted: true,
        });
    }
    match flow.conns[ask.conn].on_saturation() {
        Saturation::Queue => {}
        Saturation::Reject => {
            gate.stats.rejected_saturated.fetch_add(1, Relaxed);
            return Err(Some(Refused::Saturated));
        }
        Saturation::FailOpen => {
            return Ok(Permit {
                flow,
                conn: ask.conn,
                counted: false,
            });
        }
    }
    let depth = flow.effective(ask.conn, Knob::MaxQueueDepth).value;
    if !gate.try_enqueue(depth) {
        gate.stats.rejected_full.fetch_add(1, Relaxed);
        return Err(Some(Refused::QueueFull));
    }
    let max_wait = flow
        .effective(ask.conn, Knob::MaxWaitMs)
        .value
        .min(ask.time_left_ms);
    let (tx, rx) = futures_channel::oneshot::channel();
    {
        let mut queues = fc.queues.borrow_mut();
        let q = &mut queues[ask.conn];
        q.push(Waiter {
            tenant: ask.tenant,
            priority: ask.priority,
            enqueued_at: now,
            grant: tx,
        });
        gate.publish(fc.id, q.best_priority());
    }
    fc.notify.notify();
    flow.tenants.queued(ask.tenant, 1);
    let got = wait_with(rx, max_wait).await;
    flow.tenants.queued(ask.tenant, -1);
    gate.dequeue();
    let waited = crate::clock::now_ms().saturating_sub(now);
    match got {
        Some(Some(permit)) => {
            gate.stats.observe_wait(waited);
            Ok(permit)
        }
        Some(None) => {
            gate.stats.queue_timeouts.fetch_add(1, Relaxed);
            fc.notify.notify(); // let the pump drop this waiter and republish
            Err(Some(Refused::QueueTimeout { waited_ms: waited }))
        }
        None => {
            gate.stats.cancelled.fetch_add(1, Relaxed);
            fc.notify.notify();
            Err(None)
        }
    }
}

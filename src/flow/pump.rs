//! What wakes a core's queues: its pump (a freed slot, a local enqueue, a spacing timer) and
//! its doorbell (a slot freed on another core).

use super::{FlowCore, FlowShared};
use std::os::unix::net::UnixStream;
use std::rc::Rc;

/// The core's queue pump: woken by its doorbell, by a local enqueue, or by a timer for
/// spacing; it also polls briefly while it holds tickets, in case a wake-up was missed.
pub async fn run_pump(flow: &'static FlowShared, fc: Rc<FlowCore>, stop: impl Fn() -> bool) {
    loop {
        let next = fc.pump(flow, crate::clock::now_ms());
        let holding = fc.queues.borrow().iter().any(|q| !q.is_empty());
        let idle_ms = match (next, holding) {
            (Some(ms), _) => ms.clamp(1, 1_000),
            (None, true) => 25,
            (None, false) => 250,
        };
        monoio::select! {
            _ = fc.notify.notified() => {}
            _ = monoio::time::sleep(std::time::Duration::from_millis(idle_ms)) => {}
        }
        if stop() {
            return;
        }
    }
}

/// Read the core's doorbell forever, turning each ring into a local notification.
pub async fn run_doorbell(read_end: UnixStream, fc: Rc<FlowCore>) {
    if read_end.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut s) = monoio::net::UnixStream::from_std(read_end) else {
        return;
    };
    let mut buf = vec![0u8; 64];
    loop {
        let (res, b) = monoio::io::AsyncReadRent::read(&mut s, buf).await;
        buf = b;
        match res {
            Ok(n) if n > 0 => fc.notify.notify(),
            _ => return,
        }
    }
}

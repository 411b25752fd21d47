//! The cross-core event bus: one inbox per core, then one for the admin replica and one for
//! fleet mode's publisher. A core that
//! learns a fact applies it and sends the same event to every other inbox; receivers drain
//! their inbox before each routing decision and on the core tick. No locks, no waiting.

use super::Event;
use crossbeam_channel::{Receiver, Sender, TryRecvError, unbounded};

/// Senders to every member. Member `i` never sends to itself.
#[derive(Clone, Debug)]
pub struct Bus {
    senders: Vec<Sender<Event>>,
}

/// Create a bus with `members` inboxes.
pub fn bus(members: usize) -> (Bus, Vec<Receiver<Event>>) {
    let (senders, receivers) = (0..members).map(|_| unbounded()).unzip();
    (Bus { senders }, receivers)
}

impl Bus {
    /// Send `ev` to every member except `from`.
    pub fn broadcast(&self, from: usize, ev: &Event) {
        for (i, s) in self.senders.iter().enumerate() {
            if i != from {
                // A member that has shut down no longer needs news.
                let _ = s.send(ev.clone());
            }
        }
    }

    pub fn members(&self) -> usize {
        self.senders.len()
    }

    /// The admin port's replica: the member after the cores.
    pub fn admin(&self) -> usize {
        self.senders.len().saturating_sub(2)
    }

    /// Fleet mode's publisher (the last member; its inbox is dropped when fleet mode is off,
    /// and sending to it then costs a failed send).
    pub fn fleet(&self) -> usize {
        self.senders.len().saturating_sub(1)
    }
}

/// Apply every pending event with `f`; returns how many there were.
pub fn drain(rx: &Receiver<Event>, mut f: impl FnMut(&Event)) -> usize {
    let mut n = 0;
    loop {
        match rx.try_recv() {
            Ok(ev) => {
                f(&ev);
                n += 1;
            }
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_skips_the_sender() {
        let (b, rx) = bus(3);
        b.broadcast(1, &Event::BreakerSuccess { provider: 7, at: 0 });
        assert_eq!(drain(&rx[0], |_| {}), 1);
        assert_eq!(drain(&rx[1], |_| {}), 0);
        assert_eq!(drain(&rx[2], |_| {}), 1);
        assert_eq!(drain(&rx[2], |_| {}), 0);
    }
}

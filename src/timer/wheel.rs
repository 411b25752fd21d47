//! The timer wheel itself: ticks in, wakers out. No clock and no I/O, so tests drive it by
//! hand; `timer` runs one per core.

use std::task::Waker;

/// Slots in the wheel (a power of two): one turn is this many milliseconds.
pub const SLOTS: usize = 512;
const MASK: u64 = SLOTS as u64 - 1;
/// No entry (an unregistered sleep, or an idle ticker's target).
pub(super) const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum State {
    Free,
    Armed,
    Fired,
}

pub(super) struct Entry {
    pub(super) tick: u64,
    waker: Option<Waker>,
    /// Index in its slot's list while armed.
    pos: u32,
    pub(super) state: State,
}

/// The wheel itself: ticks in, wakers out. No clock and no I/O, so tests drive it by hand.
pub struct Wheel {
    /// Every tick up to and including this one has been fired.
    done: u64,
    pub(super) entries: Vec<Entry>,
    free: Vec<u32>,
    slots: Vec<Vec<u32>>,
    pub(super) armed: usize,
    /// The tick the ticker sleeps until (`u64::MAX`: idle, waiting for an entry).
    pub(super) ticker_at: u64,
    pub(super) ticker: Option<Waker>,
}

impl Default for Wheel {
    fn default() -> Self {
        Wheel::new()
    }
}

impl Wheel {
    pub fn new() -> Self {
        Wheel {
            done: 0,
            entries: Vec::new(),
            free: Vec::new(),
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            armed: 0,
            ticker_at: u64::MAX,
            ticker: None,
        }
    }

    /// The last tick fired.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Entries waiting to fire.
    pub fn armed(&self) -> usize {
        self.armed
    }

    /// Register a wait for `tick`. `None`: it is already due (nothing registered).
    pub fn insert(&mut self, tick: u64, waker: Option<Waker>) -> Option<u32> {
        if tick <= self.done {
            return None;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.entries.push(Entry {
                    tick: 0,
                    waker: None,
                    pos: 0,
                    state: State::Free,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let e = &mut self.entries[id as usize];
        e.waker = waker;
        self.arm(id, tick);
        Some(id)
    }

    fn arm(&mut self, id: u32, tick: u64) {
        let slot = &mut self.slots[(tick & MASK) as usize];
        let e = &mut self.entries[id as usize];
        e.tick = tick;
        e.state = State::Armed;
        e.pos = slot.len() as u32;
        slot.push(id);
        self.armed += 1;
        // A deadline sooner than the one the ticker sleeps until: it must sleep less.
        if tick < self.ticker_at {
            self.ticker_at = tick;
            if let Some(t) = self.ticker.take() {
                t.wake();
            }
        }
    }

    /// Take an armed entry out of its slot (it stays allocated).
    fn unlink(&mut self, id: u32) {
        let e = &self.entries[id as usize];
        let (slot, pos) = ((e.tick & MASK) as usize, e.pos as usize);
        let list = &mut self.slots[slot];
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            self.entries[moved as usize].pos = pos as u32;
        }
        self.armed -= 1;
    }

    /// Forget an entry, armed or fired; its id may be handed out again.
    pub fn remove(&mut self, id: u32) {
        // An id this wheel never gave (a sleep from before `install` on this thread): nothing.
        let Some(state) = self.entries.get(id as usize).map(|e| e.state) else {
            return;
        };
        if state == State::Armed {
            self.unlink(id);
        }
        if state != State::Free {
            let e = &mut self.entries[id as usize];
            e.state = State::Free;
            e.waker = None;
            self.free.push(id);
        }
    }

    /// Move an entry (armed or fired) to `tick`. `false`: that is already due (the entry is
    /// then fired).
    pub fn reset(&mut self, id: u32, tick: u64) -> bool {
        let Some((state, old)) = self.entries.get(id as usize).map(|e| (e.state, e.tick)) else {
            return false;
        };
        match state {
            State::Free => return false,
            State::Armed if old == tick => return true,
            State::Armed => self.unlink(id),
            State::Fired => {}
        }
        if tick <= self.done {
            self.entries[id as usize].state = State::Fired;
            return false;
        }
        self.arm(id, tick);
        true
    }

    /// Has the entry fired? If not, `waker` is the one it will wake.
    pub fn poll(&mut self, id: u32, waker: &Waker) -> bool {
        // An unknown or freed id reads as fired: a wait ends early rather than never.
        let Some(e) = self.entries.get_mut(id as usize) else {
            return true;
        };
        if e.state != State::Armed {
            return true;
        }
        match &e.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => e.waker = Some(waker.clone()),
        }
        false
    }

    /// Fire every entry due by `now`, pushing the wakers to wake into `due`.
    pub fn advance(&mut self, now: u64, due: &mut Vec<Waker>) {
        if now <= self.done {
            return;
        }
        // A gap longer than a turn visits every slot once: each entry is in exactly one.
        let span = (now - self.done).min(SLOTS as u64);
        for t in self.done + 1..=self.done + span {
            let slot = (t & MASK) as usize;
            let mut i = 0;
            while i < self.slots[slot].len() {
                let id = self.slots[slot][i];
                let e = &mut self.entries[id as usize];
                if e.tick > now {
                    i += 1;
                    continue;
                }
                e.state = State::Fired;
                if let Some(w) = e.waker.take() {
                    due.push(w);
                }
                self.unlink(id);
            }
        }
        self.done = now;
    }

    /// The first tick after `done` whose slot holds an entry (it may be one a turn later: a
    /// wasted wake at most once per turn per far entry). `None`: nothing armed.
    pub fn next_tick(&self) -> Option<u64> {
        if self.armed == 0 {
            return None;
        }
        (self.done + 1..=self.done + SLOTS as u64)
            .find(|&t| !self.slots[(t & MASK) as usize].is_empty())
    }
}

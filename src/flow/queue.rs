//! One core's waiters for one connection: priority 0–9 (lower first), round robin across
//! tenants within a priority (so one tenant's burst cannot starve another's trickle), FIFO
//! within a tenant. Plain data owned by the core.

use std::collections::{HashMap, VecDeque};

pub const PRIORITIES: usize = 10;
pub const DEFAULT_PRIORITY: u8 = 5;

/// A queued request. `T` is what the pump hands it (a grant channel in production).
#[derive(Debug)]
pub struct Waiter<T> {
    pub tenant: u64,
    pub priority: u8,
    pub enqueued_at: u64,
    pub grant: T,
}

#[derive(Debug)]
struct Level<T> {
    /// Tenants with waiters, in turn order.
    turn: VecDeque<u64>,
    by_tenant: HashMap<u64, VecDeque<Waiter<T>>>,
}

impl<T> Default for Level<T> {
    fn default() -> Self {
        Level {
            turn: VecDeque::new(),
            by_tenant: HashMap::new(),
        }
    }
}

#[derive(Debug)]
pub struct LocalQueue<T> {
    levels: Vec<Level<T>>,
    len: usize,
}

impl<T> Default for LocalQueue<T> {
    fn default() -> Self {
        LocalQueue {
            levels: (0..PRIORITIES).map(|_| Level::default()).collect(),
            len: 0,
        }
    }
}

impl<T> LocalQueue<T> {
    pub fn push(&mut self, w: Waiter<T>) {
        let p = usize::from(w.priority).min(PRIORITIES - 1);
        let level = &mut self.levels[p];
        let q = level.by_tenant.entry(w.tenant).or_default();
        if q.is_empty() {
            level.turn.push_back(w.tenant);
        }
        q.push_back(w);
        self.len += 1;
    }

    /// The next waiter by priority, then tenant turn, then arrival.
    pub fn pop(&mut self) -> Option<Waiter<T>> {
        for level in &mut self.levels {
            while let Some(tenant) = level.turn.pop_front() {
                let Some(q) = level.by_tenant.get_mut(&tenant) else {
                    continue;
                };
                let Some(w) = q.pop_front() else {
                    level.by_tenant.remove(&tenant);
                    continue;
                };
                if q.is_empty() {
                    level.by_tenant.remove(&tenant);
                } else {
                    level.turn.push_back(tenant);
                }
                self.len -= 1;
                return Some(w);
            }
        }
        None
    }

    /// Remove every waiter `dead` says is gone; returns how many.
    pub fn prune(&mut self, mut dead: impl FnMut(&Waiter<T>) -> bool) -> usize {
        let mut n = 0;
        for level in &mut self.levels {
            for q in level.by_tenant.values_mut() {
                let before = q.len();
                q.retain(|w| !dead(w));
                n += before - q.len();
            }
            level.by_tenant.retain(|_, q| !q.is_empty());
            let by = &level.by_tenant;
            level.turn.retain(|t| by.contains_key(t));
        }
        self.len -= n;
        n
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The most urgent priority waiting, if any.
    pub fn best_priority(&self) -> Option<u8> {
        self.levels
            .iter()
            .position(|l| !l.turn.is_empty())
            .map(|p| p as u8)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(tenant: u64, priority: u8, id: u32) -> Waiter<u32> {
        Waiter {
            tenant,
            priority,
            enqueued_at: 0,
            grant: id,
        }
    }

    fn drain(q: &mut LocalQueue<u32>) -> Vec<u32> {
        std::iter::from_fn(|| q.pop().map(|w| w.grant)).collect()
    }

    #[test]
    fn priority_then_fifo() {
        let mut q = LocalQueue::default();
        q.push(w(1, 5, 1));
        q.push(w(1, 5, 2));
        q.push(w(1, 0, 3));
        q.push(w(1, 9, 4));
        q.push(w(1, 5, 5));
        assert_eq!(q.len(), 5);
        assert_eq!(drain(&mut q), [3, 1, 2, 5, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn tenants_take_turns() {
        let mut q = LocalQueue::default();
        for i in 0..6 {
            q.push(w(1, 5, 10 + i)); // a burst from tenant 1
        }
        q.push(w(2, 5, 20)); // a trickle from tenant 2
        q.push(w(2, 5, 21));
        assert_eq!(drain(&mut q), [10, 20, 11, 21, 12, 13, 14, 15]);
    }

    #[test]
    fn prune_removes_the_dead() {
        let mut q = LocalQueue::default();
        for i in 0..5 {
            q.push(w(u64::from(i % 2), 5, i));
        }
        assert_eq!(q.prune(|w| w.grant % 2 == 0), 3);
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q), [1, 3]);
    }
}

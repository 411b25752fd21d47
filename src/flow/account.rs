//! Accounts: the limits a provider enforces per organisation, not per key. Keys that name the
//! same `account` share, besides its cooldowns, its own gate (`[[providers.accounts]]`:
//! `max_concurrent`, `min_time_ms`): a start takes a slot of the key's gate and of the
//! account's, and a release of either wakes the waiters of every key of the account.

use super::gate::{Blocked, Gate};
use crate::ids::ConnId;

/// One account's limits, as configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountLimits {
    pub id: String,
    /// 0: unlimited.
    pub max_concurrent: u32,
    pub min_time_ms: u64,
}

/// Every account's gate and its keys.
#[derive(Debug, Default)]
pub struct Accounts {
    gates: Vec<Gate>,
    /// By account: its keys.
    members: Vec<Vec<ConnId>>,
}

impl Accounts {
    /// `of[conn]`: the account a key belongs to, if its account has limits.
    pub fn new(limits: &[AccountLimits], of: &[Option<usize>]) -> Accounts {
        let mut members = vec![Vec::new(); limits.len()];
        for (conn, a) in of.iter().enumerate() {
            if let Some(list) = a.and_then(|a| members.get_mut(a)) {
                list.push(ConnId::new(conn));
            }
        }
        Accounts {
            gates: limits
                .iter()
                .map(|l| Gate::new(l.max_concurrent, l.min_time_ms, 0, 0))
                .collect(),
            members,
        }
    }

    pub fn gate(&self, account: usize) -> Option<&Gate> {
        self.gates.get(account)
    }

    pub fn members(&self, account: usize) -> &[ConnId] {
        self.members.get(account).map_or(&[], Vec::as_slice)
    }

    /// Start on the key's gate and, if it has one, its account's; either both or neither.
    pub fn try_start(&self, key: &Gate, account: Option<usize>, now: u64) -> Result<(), Blocked> {
        let taken = key.take(now)?;
        if let Some(g) = account.and_then(|a| self.gate(a))
            && let Err(b) = g.try_start(now)
        {
            // The key's own spacing turn and reservoir token come back with its slot: a full
            // account must not cost the key its pace.
            key.give_back(taken);
            return Err(b);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_keys_share_their_account_s_slot() {
        let limits = [AccountLimits {
            id: "org".into(),
            max_concurrent: 1,
            min_time_ms: 0,
        }];
        let accounts = Accounts::new(&limits, &[Some(0), Some(0), None]);
        let (a, b, c) = (Gate::default(), Gate::default(), Gate::default());
        assert_eq!(accounts.members(0), [ConnId::new(0), ConnId::new(1)]);
        assert_eq!(accounts.try_start(&a, Some(0), 0), Ok(()));
        // b's own gate is free, the account's is not: neither is taken.
        assert_eq!(accounts.try_start(&b, Some(0), 0), Err(Blocked::Full));
        assert_eq!(b.running(), 0);
        // A key outside the account is not held back.
        assert_eq!(accounts.try_start(&c, None, 0), Ok(()));
        accounts.gate(0).map(Gate::release);
        a.release();
        assert_eq!(accounts.try_start(&b, Some(0), 0), Ok(()));
    }

    #[test]
    fn a_full_account_does_not_spend_the_key_s_pace() {
        let limits = [AccountLimits {
            id: "org".into(),
            max_concurrent: 1,
            min_time_ms: 0,
        }];
        let accounts = Accounts::new(&limits, &[Some(0), Some(0)]);
        let a = Gate::default();
        // b is paced (one start per second) and has a reservoir of one.
        let b = Gate::new(0, 1_000, 1, 60_000);
        assert_eq!(accounts.try_start(&a, Some(0), 0), Ok(()));
        assert_eq!(accounts.try_start(&b, Some(0), 10), Err(Blocked::Full));
        assert_eq!(b.running(), 0);
        // The account frees: b starts at once, its turn and token untouched by the refusal.
        accounts.gate(0).map(Gate::release);
        assert_eq!(accounts.try_start(&b, Some(0), 20), Ok(()));
        assert_eq!(
            b.stats.started.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }
}

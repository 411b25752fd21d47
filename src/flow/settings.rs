//! The two budgets and the queue depth, with their precedence: built-in defaults, then the
//! environment (`RINGSIDE_RATE_LIMIT_*`), then settings changed through the admin API, then a
//! connection's own values in the config. Every value is clamped (1 ms – 24 h; depth 0 –
//! 100,000) and reported with where it came from.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const DEFAULT_MAX_WAIT_MS: u64 = 30_000;
pub const DEFAULT_EXECUTION_MAX_WAIT_MS: u64 = 600_000;
pub const MAX_MS: u64 = 86_400_000;
pub const MAX_DEPTH: u64 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Default,
    Env,
    Admin,
    Connection,
}

impl Source {
    /// As `ringside check` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::Env => "environment",
            Source::Admin => "admin",
            Source::Connection => "connection",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Value {
    pub value: u64,
    pub source: Source,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    MaxWaitMs,
    ExecutionMaxWaitMs,
    MaxQueueDepth,
}

impl Knob {
    pub const ALL: [Knob; 3] = [
        Knob::MaxWaitMs,
        Knob::ExecutionMaxWaitMs,
        Knob::MaxQueueDepth,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Knob::MaxWaitMs => "max_wait_ms",
            Knob::ExecutionMaxWaitMs => "execution_max_wait_ms",
            Knob::MaxQueueDepth => "max_queue_depth",
        }
    }

    pub fn env(self) -> &'static str {
        match self {
            Knob::MaxWaitMs => crate::env_vars::RATE_LIMIT_MAX_WAIT_MS,
            Knob::ExecutionMaxWaitMs => crate::env_vars::RATE_LIMIT_EXECUTION_MAX_WAIT_MS,
            Knob::MaxQueueDepth => crate::env_vars::RATE_LIMIT_MAX_QUEUE_DEPTH,
        }
    }

    /// The seed's name for the same variable, accepted too (the prefixed name wins).
    pub fn seed_env(self) -> &'static str {
        &self.env()["RINGSIDE_".len()..]
    }

    pub fn default(self) -> u64 {
        match self {
            Knob::MaxWaitMs => DEFAULT_MAX_WAIT_MS,
            Knob::ExecutionMaxWaitMs => DEFAULT_EXECUTION_MAX_WAIT_MS,
            Knob::MaxQueueDepth => 0,
        }
    }

    /// Clamp into the knob's range.
    pub fn clamp(self, v: u64) -> u64 {
        match self {
            Knob::MaxQueueDepth => v.min(MAX_DEPTH),
            _ => v.clamp(1, MAX_MS),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Process-wide values: the environment's (read once) and the admin API's (changeable live).
#[derive(Debug)]
pub struct Budgets {
    env: [Option<u64>; 3],
    /// `u64::MAX` = not set through the admin API.
    admin: [AtomicU64; 3],
}

/// Where the store keeps budgets saved through the admin API, one row per knob.
pub const SAVED_PREFIX: &str = "settings/flow/";

impl Budgets {
    /// Read the environment; garbage is ignored (the default stays).
    pub fn read_env(env: &dyn Fn(&str) -> Option<String>) -> [Option<u64>; 3] {
        let parse = |k: Knob, name: &str| {
            let v: f64 = env(name)?.trim().parse().ok()?;
            (v.is_finite() && v >= 0.0 && (v > 0.0 || k == Knob::MaxQueueDepth))
                .then(|| k.clamp(v as u64))
        };
        let read = |k: Knob| parse(k, k.env()).or_else(|| parse(k, k.seed_env()));
        Knob::ALL.map(read)
    }

    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self::new(Self::read_env(env))
    }

    pub fn new(env: [Option<u64>; 3]) -> Self {
        Budgets {
            env,
            admin: [
                AtomicU64::new(u64::MAX),
                AtomicU64::new(u64::MAX),
                AtomicU64::new(u64::MAX),
            ],
        }
    }

    /// Set through the admin API (clamped); `None` clears it.
    pub fn set_admin(&self, k: Knob, v: Option<u64>) -> Option<u64> {
        let stored = v.map(|v| k.clamp(v));
        self.admin[k.index()].store(stored.unwrap_or(u64::MAX), Relaxed);
        stored
    }

    /// Apply what `PATCH /admin/settings` saved: the store's `settings/flow/{knob}` rows
    /// (unknown names and non-numbers are ignored).
    pub fn apply_saved(&self, rows: impl IntoIterator<Item = (String, serde_json::Value)>) {
        for (k, v) in rows {
            let name = k.trim_start_matches(SAVED_PREFIX);
            let knob = Knob::ALL.into_iter().find(|x| x.name() == name);
            if let (Some(knob), Some(n)) = (knob, v.as_u64()) {
                self.set_admin(knob, Some(n));
            }
        }
    }

    /// The value in force for a connection whose own config says `own`.
    pub fn effective(&self, k: Knob, own: Option<u64>) -> Value {
        if let Some(v) = own {
            return Value {
                value: k.clamp(v),
                source: Source::Connection,
            };
        }
        let admin = self.admin[k.index()].load(Relaxed);
        if admin != u64::MAX {
            return Value {
                value: admin,
                source: Source::Admin,
            };
        }
        match self.env[k.index()] {
            Some(v) => Value {
                value: v,
                source: Source::Env,
            },
            None => Value {
                value: k.default(),
                source: Source::Default,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_default_env_admin_connection() {
        let none = |_: &str| None;
        let b = Budgets::from_env(&none);
        assert_eq!(
            b.effective(Knob::MaxWaitMs, None),
            Value {
                value: 30_000,
                source: Source::Default
            }
        );
        let env = |n: &str| (n == "RINGSIDE_RATE_LIMIT_MAX_WAIT_MS").then(|| "5000".to_string());
        let b = Budgets::from_env(&env);
        assert_eq!(
            b.effective(Knob::MaxWaitMs, None),
            Value {
                value: 5_000,
                source: Source::Env
            }
        );
        b.set_admin(Knob::MaxWaitMs, Some(7_000));
        assert_eq!(
            b.effective(Knob::MaxWaitMs, None),
            Value {
                value: 7_000,
                source: Source::Admin
            }
        );
        assert_eq!(
            b.effective(Knob::MaxWaitMs, Some(9_000)),
            Value {
                value: 9_000,
                source: Source::Connection
            }
        );
        b.set_admin(Knob::MaxWaitMs, None);
        assert_eq!(b.effective(Knob::MaxWaitMs, None).source, Source::Env);
    }

    #[test]
    fn clamps_and_garbage() {
        let env = |n: &str| match n {
            "RINGSIDE_RATE_LIMIT_MAX_WAIT_MS" => Some("0".to_string()),
            "RINGSIDE_RATE_LIMIT_EXECUTION_MAX_WAIT_MS" => Some("999999999999".to_string()),
            "RINGSIDE_RATE_LIMIT_MAX_QUEUE_DEPTH" => Some("lots".to_string()),
            _ => None,
        };
        let b = Budgets::from_env(&env);
        assert_eq!(
            b.effective(Knob::MaxWaitMs, None).source,
            Source::Default,
            "0 is not a wait"
        );
        assert_eq!(b.effective(Knob::ExecutionMaxWaitMs, None).value, MAX_MS);
        assert_eq!(b.effective(Knob::MaxQueueDepth, None).value, 0);
        assert_eq!(
            b.set_admin(Knob::MaxQueueDepth, Some(1 << 40)),
            Some(MAX_DEPTH)
        );
        assert_eq!(b.effective(Knob::MaxWaitMs, Some(0)).value, 1);
        assert_eq!(
            b.effective(Knob::ExecutionMaxWaitMs, Some(u64::MAX)).value,
            MAX_MS
        );
    }

    #[test]
    fn the_seed_s_names_are_accepted_and_the_prefixed_ones_win() {
        let env = |k: &str| match k {
            "RATE_LIMIT_MAX_WAIT_MS" => Some("1500".to_string()),
            "RATE_LIMIT_MAX_QUEUE_DEPTH" => Some("9".to_string()),
            "RINGSIDE_RATE_LIMIT_MAX_QUEUE_DEPTH" => Some("4".to_string()),
            _ => None,
        };
        let read = Budgets::read_env(&env);
        assert_eq!(read[Knob::MaxWaitMs.index()], Some(1_500));
        assert_eq!(read[Knob::MaxQueueDepth.index()], Some(4));
        assert_eq!(Knob::MaxWaitMs.seed_env(), "RATE_LIMIT_MAX_WAIT_MS");
    }
}

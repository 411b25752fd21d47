//! Times between instances: each process's monotonic milliseconds against the wall clock.

/// This process's monotonic milliseconds against the wall clock, read once per batch.
#[derive(Clone, Copy, Debug)]
pub struct Clocks {
    /// Unix ms minus monotonic ms.
    offset: i128,
}

impl Clocks {
    pub fn now() -> Clocks {
        Clocks::at(crate::clock::now_ms(), crate::clock::unix_ms())
    }

    pub fn at(mono_ms: u64, unix_ms: u64) -> Clocks {
        Clocks {
            offset: i128::from(unix_ms) - i128::from(mono_ms),
        }
    }

    /// 0 stays 0 (never).
    pub fn to_unix(self, t: u64) -> u64 {
        if t == 0 {
            0
        } else {
            (i128::from(t) + self.offset).max(1) as u64
        }
    }

    /// 0 stays 0; a time before this process began is its first millisecond.
    pub fn to_mono(self, t: u64) -> u64 {
        if t == 0 {
            0
        } else {
            (i128::from(t) - self.offset).clamp(1, i128::from(u64::MAX)) as u64
        }
    }
}

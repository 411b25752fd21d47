//! Bounded jitter for the waits Ringside computes itself (backoff cooldowns, breaker open
//! time, lease `Retry-After`), so that cores, instances and clients that saw the same failure
//! do not come back in one burst. Deterministic in a seed: every core that applies the same
//! replicated event computes the same value, and tests need no random source. Waits an
//! upstream announced are honoured as given and never jittered.

/// `ms` spread by up to ±`pct` percent (at most 50), the same for the same `seed`.
pub fn spread(ms: u64, pct: u8, seed: u64) -> u64 {
    if pct == 0 || ms == 0 {
        return ms;
    }
    let pct = u64::from(pct.min(50));
    let r = mix(seed) % (2 * pct + 1);
    (u128::from(ms) * u128::from(100 - pct + r) / 100) as u64
}

/// A number in `0..=max`, the same for the same `seed` (spreads waiters over a window).
pub fn up_to(max: u64, seed: u64) -> u64 {
    if max == 0 { 0 } else { mix(seed) % (max + 1) }
}

/// A seed from bytes (FNV-1a): a request's id gives each request its own place in a window.
pub fn seed_of(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64's finaliser: neighbouring seeds (milliseconds apart) land far apart.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_its_bounds_and_spreads() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..10_000u64 {
            let v = spread(10_000, 20, seed);
            assert!((8_000..=12_000).contains(&v), "{v}");
            seen.insert(v / 500);
        }
        // Spread over the whole band, not bunched (eight 500 ms slices of 8 to 12 s).
        assert!(seen.len() >= 8, "{seen:?}");
        assert_eq!(
            spread(10_000, 20, 7),
            spread(10_000, 20, 7),
            "deterministic"
        );
        assert_eq!(spread(10_000, 0, 7), 10_000, "0 turns it off");
        assert!(spread(10_000, 90, 7) >= 5_000, "at most ±50 %");
    }
}

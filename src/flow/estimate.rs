//! How many tokens a prompt of so many bytes is, learned per provider from what each provider
//! reports: a billed request's body size against the prompt tokens its answer's usage says.
//! Admission reserves budget on this estimate before the provider has counted anything; four
//! bytes a token until a provider has reported (JSON bodies of English prompts run 3 to 5, other
//! scripts fewer).
//!
//! Not a tokenizer: one (tiktoken's) costs 65 ns a byte, many times what a billed request may
//! add (docs/budgets.md). A ratio learned from the provider's own count follows its tokenizer,
//! its message framing and the client's language at the cost of one atomic per answer.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Providers whose ratio is learned, by slot; one beyond uses the default.
const SLOTS: usize = 64;
/// Fixed point: bytes per token × 256.
const ONE: u32 = 256;
const DEFAULT: u32 = 4 * ONE;
/// A sample counts for an eighth: a few dozen answers move the ratio most of the way.
const WEIGHT: u32 = 8;
/// Samples outside 1 to 8 bytes a token teach nothing: a body of base64 images (a thousand bytes
/// a token), a tiny body with a large system prompt the provider adds, a usage that is wrong.
const MIN: u32 = ONE;
const MAX: u32 = 8 * ONE;

/// Bytes per token by provider slot (`config::Provider::slot`; a reload that reorders the
/// providers leaves each slot's ratio to be learned again from the next answers).
#[derive(Debug)]
pub struct Ratios {
    slots: Box<[AtomicU32]>,
}

impl Default for Ratios {
    fn default() -> Self {
        Ratios {
            slots: (0..SLOTS).map(|_| AtomicU32::new(DEFAULT)).collect(),
        }
    }
}

impl Ratios {
    fn ratio(&self, provider: usize) -> u32 {
        self.slots
            .get(provider)
            .map_or(DEFAULT, |r| r.load(Relaxed))
    }

    /// The tokens a prompt of `bytes` is estimated to be at `provider` (rounded up).
    pub fn tokens(&self, provider: usize, bytes: u64) -> u64 {
        (bytes.saturating_mul(u64::from(ONE))).div_ceil(u64::from(self.ratio(provider)))
    }

    /// `provider` counted `tokens` for a prompt of `bytes`. (Two answers at once may each move
    /// the ratio from the same value, one of them lost: an estimate, not a count.)
    pub fn learn(&self, provider: usize, bytes: u64, tokens: u64) {
        let Some(slot) = self.slots.get(provider) else {
            return;
        };
        if bytes == 0 || tokens == 0 {
            return;
        }
        let sample = bytes.saturating_mul(u64::from(ONE)) / tokens;
        if !(u64::from(MIN)..=u64::from(MAX)).contains(&sample) {
            return;
        }
        let sample = sample as u32;
        let old = slot.load(Relaxed);
        let new = if sample >= old {
            old + (sample - old) / WEIGHT
        } else {
            old - (old - sample) / WEIGHT
        };
        slot.store(new, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bytes_a_token_until_a_provider_reports() {
        let r = Ratios::default();
        assert_eq!(r.tokens(0, 400), 100);
        assert_eq!(r.tokens(0, 401), 101);
        assert_eq!(
            r.tokens(SLOTS + 3, 400),
            100,
            "beyond the table: the default"
        );
    }

    #[test]
    fn the_ratio_follows_what_the_provider_counts() {
        let r = Ratios::default();
        // The provider counts a token per two bytes: the estimate moves toward it.
        let mut last = r.tokens(1, 1000);
        for _ in 0..40 {
            r.learn(1, 1000, 500);
            let now = r.tokens(1, 1000);
            assert!(now >= last, "estimates only rise toward the count");
            last = now;
        }
        assert!((480..=500).contains(&last), "{last}");
        // Another provider is untouched.
        assert_eq!(r.tokens(2, 1000), 250);
        // A report outside 1 to 8 bytes a token (an image's base64) teaches nothing.
        r.learn(2, 1_000_000, 1000);
        r.learn(2, 10, 100);
        assert_eq!(r.tokens(2, 1000), 250);
        r.learn(3, 0, 10);
        r.learn(3, 10, 0);
        assert_eq!(r.tokens(3, 400), 100, "empty reports teach nothing");
    }
}

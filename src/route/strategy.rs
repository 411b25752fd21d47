//! How a route orders its targets, and a target its connections. The state is core-local plain
//! data (counters), so choosing never takes a lock.

/// A selection strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Ordered fallback: first listed first.
    Priority,
    /// Rotate the starting point on every request.
    RoundRobin,
    /// Smooth weighted round robin over connection weights.
    Weighted,
    /// Uniformly random order.
    Random,
}

impl Strategy {
    pub const NAMES: [&'static str; 4] = ["priority", "round_robin", "weighted", "random"];

    pub fn parse(s: &str) -> Option<Strategy> {
        Some(match s {
            "priority" | "fallback" => Strategy::Priority,
            "round_robin" | "round-robin" => Strategy::RoundRobin,
            "weighted" => Strategy::Weighted,
            "random" => Strategy::Random,
            _ => return None,
        })
    }
}

/// Core-local selector state: one rotating counter and one weight table per route entry.
#[derive(Debug, Default)]
pub struct SelectorState {
    pub rotation: Vec<u64>,
    /// Smooth-WRR current weights, per entry, per slot.
    pub current: Vec<Vec<i64>>,
    pub rng: u64,
}

impl SelectorState {
    pub fn new(entries: usize, seed: u64) -> Self {
        SelectorState {
            rotation: vec![0; entries],
            current: vec![Vec::new(); entries],
            rng: seed | 1,
        }
    }

    pub fn next_random(&mut self) -> u64 {
        // xorshift64*: fast, good enough for spreading load.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Put `order` (indices 0..n, already in priority order) into the strategy's order.
    pub fn order(
        &mut self,
        strategy: Strategy,
        entry: usize,
        weights: &[u32],
        order: &mut [usize],
    ) {
        let n = order.len();
        if n <= 1 {
            return;
        }
        match strategy {
            Strategy::Priority => {}
            Strategy::RoundRobin => {
                let slot = self.rotation.get_mut(entry);
                let start = slot.map(|r| {
                    let s = *r;
                    *r = r.wrapping_add(1);
                    s
                });
                order.rotate_left((start.unwrap_or(0) % n as u64) as usize);
            }
            Strategy::Random => {
                for i in (1..n).rev() {
                    let j = (self.next_random() % (i as u64 + 1)) as usize;
                    order.swap(i, j);
                }
            }
            Strategy::Weighted => {
                let Some(cur) = self.current.get_mut(entry) else {
                    return;
                };
                if cur.len() != n {
                    *cur = vec![0; n];
                }
                let total: i64 = order
                    .iter()
                    .map(|&i| i64::from(weights.get(i).copied().unwrap_or(1)))
                    .sum();
                let mut best = 0;
                for (k, &i) in order.iter().enumerate() {
                    cur[k] += i64::from(weights.get(i).copied().unwrap_or(1));
                    if cur[k] > cur[best] {
                        best = k;
                    }
                }
                cur[best] -= total;
                // The chosen one first; the rest keep their order as fallbacks.
                order[..=best].rotate_right(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_rotates() {
        let mut s = SelectorState::new(1, 7);
        let mut firsts = Vec::new();
        for _ in 0..4 {
            let mut o = [0, 1, 2];
            s.order(Strategy::RoundRobin, 0, &[1, 1, 1], &mut o);
            firsts.push(o[0]);
        }
        assert_eq!(firsts, vec![0, 1, 2, 0]);
    }

    #[test]
    fn weighted_follows_weights() {
        let mut s = SelectorState::new(1, 7);
        let mut counts = [0; 2];
        for _ in 0..400 {
            let mut o = [0, 1];
            s.order(Strategy::Weighted, 0, &[3, 1], &mut o);
            counts[o[0]] += 1;
        }
        assert_eq!(counts, [300, 100]);
    }

    #[test]
    fn random_is_a_permutation() {
        let mut s = SelectorState::new(1, 99);
        for _ in 0..50 {
            let mut o = [0, 1, 2, 3];
            s.order(Strategy::Random, 0, &[1; 4], &mut o);
            let mut sorted = o;
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2, 3]);
        }
    }
}

//! How a route orders its targets, and a target its connections. The state is core-local plain
//! data (counters), so choosing never takes a lock.

pub use crate::config::Strategy;

/// Core-local selector state: one rotating counter and one weight table per route entry.
#[derive(Debug, Default)]
pub struct SelectorState {
    pub rotation: Vec<u64>,
    /// Smooth-WRR current weights, per entry, per slot.
    pub current: Vec<Vec<i64>>,
    /// Shuffled decks, per slot: options not yet dealt in this cycle.
    pub decks: Vec<Vec<u32>>,
    pub rng: u64,
    /// Reused buffers for building candidate lists (no allocation per request once warm).
    pub scratch: Scratch,
}

#[derive(Debug, Default)]
pub struct Scratch {
    /// (candidate, priority, weight) of usable connections, grouped by target.
    pub kept: Vec<(super::Candidate, u32, u32)>,
    /// (target, start, end) into `kept`.
    pub groups: Vec<(usize, usize, usize)>,
    pub gorder: Vec<usize>,
    pub corder: Vec<usize>,
    pub weights: Vec<u32>,
    pub out: Vec<super::Candidate>,
}

impl SelectorState {
    pub fn new(entries: usize, seed: u64) -> Self {
        SelectorState {
            rotation: vec![0; entries],
            current: vec![Vec::new(); entries],
            decks: vec![Vec::new(); entries],
            rng: seed | 1,
            scratch: Scratch::default(),
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
        load: &dyn Fn(usize) -> super::load::Load,
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
            Strategy::Weighted => self.weighted(entry, weights, order),
            Strategy::Deck => self.deck(entry, order),
            Strategy::P2c => self.p2c(order, load),
            // The best first; the rest keep their priority order as fallbacks (one pass, no sort).
            Strategy::LeastInFlight => {
                let best = (0..n)
                    .min_by_key(|&k| load(order[k]).in_flight)
                    .unwrap_or(0);
                order[..=best].rotate_right(1);
            }
            Strategy::ResetAware => {
                let best = (0..n)
                    .min_by_key(|&k| {
                        let l = load(order[k]);
                        (std::cmp::Reverse(l.headroom), l.reset_in_ms)
                    })
                    .unwrap_or(0);
                order[..=best].rotate_right(1);
            }
            Strategy::FillFirst => {}
            Strategy::Cost => order.sort_by(|&a, &b| load(a).cost.total_cmp(&load(b).cost)),
        }
    }
    /// Smooth weighted round-robin (nginx's): each pick adds every weight to its running
    /// score and takes the highest, which then gives back the total.
    fn weighted(&mut self, entry: usize, weights: &[u32], order: &mut [usize]) {
        let n = order.len();
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

    /// A shuffled deck: every candidate is dealt once before any is dealt again.
    fn deck(&mut self, entry: usize, order: &mut [usize]) {
        let Some(deck) = self.decks.get_mut(entry) else {
            return;
        };
        deck.retain(|&i| order.contains(&(i as usize)));
        if deck.is_empty() {
            deck.extend(order.iter().map(|&i| i as u32));
        }
        let len = deck.len() as u64;
        let k = (self.next_random() % len) as usize;
        let Some(deck) = self.decks.get_mut(entry) else {
            return;
        };
        let chosen = deck.swap_remove(k) as usize;
        if let Some(pos) = order.iter().position(|&i| i == chosen) {
            order[..=pos].rotate_right(1);
        }
    }

    /// The power of two choices: the less loaded of two random candidates.
    fn p2c(&mut self, order: &mut [usize], load: &dyn Fn(usize) -> super::load::Load) {
        let n = order.len();
        let a = (self.next_random() % n as u64) as usize;
        let mut b = (self.next_random() % (n as u64 - 1)) as usize;
        if b >= a {
            b += 1;
        }
        let score = |i: usize| {
            let l = load(i);
            (u64::from(l.in_flight) + 1) * (u64::from(l.latency_ms) + 50)
        };
        let (first, second) = (a.min(b), a.max(b));
        let pick = if score(order[second]) < score(order[first]) {
            second
        } else {
            first
        };
        order[..=pick].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::load::Load;

    #[test]
    fn round_robin_rotates() {
        let mut s = SelectorState::new(1, 7);
        let mut firsts = Vec::new();
        for _ in 0..4 {
            let mut o = [0, 1, 2];
            s.order(Strategy::RoundRobin, 0, &[1, 1, 1], &mut o, &|_| {
                Load::default()
            });
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
            s.order(Strategy::Weighted, 0, &[3, 1], &mut o, &|_| Load::default());
            counts[o[0]] += 1;
        }
        assert_eq!(counts, [300, 100]);
    }

    #[test]
    fn random_is_a_permutation() {
        let mut s = SelectorState::new(1, 99);
        for _ in 0..50 {
            let mut o = [0, 1, 2, 3];
            s.order(Strategy::Random, 0, &[1; 4], &mut o, &|_| Load::default());
            let mut sorted = o;
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2, 3]);
        }
    }

    fn load(in_flight: u32, latency_ms: u32, headroom: u16, reset_in_ms: u64, cost: f64) -> Load {
        Load {
            in_flight,
            latency_ms,
            headroom,
            reset_in_ms,
            cost,
        }
    }

    #[test]
    fn deck_deals_each_once_per_cycle() {
        let mut s = SelectorState::new(1, 5);
        for _ in 0..5 {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let mut o = [0, 1, 2];
                s.order(Strategy::Deck, 0, &[1; 3], &mut o, &|_| Load::default());
                seen.push(o[0]);
            }
            seen.sort();
            assert_eq!(seen, [0, 1, 2]);
        }
    }

    #[test]
    fn load_aware_orders() {
        let mut s = SelectorState::new(1, 3);
        let loads = [
            load(5, 100, 900, 10_000, 3.0),
            load(0, 100, 100, 1_000, 1.0),
            load(2, 100, 900, 5_000, 2.0),
        ];
        let mut o = [0, 1, 2];
        s.order(Strategy::LeastInFlight, 0, &[1; 3], &mut o, &|i| loads[i]);
        assert_eq!(
            o,
            [1, 0, 2],
            "the least busy first, the rest in priority order"
        );
        let mut o = [0, 1, 2];
        s.order(Strategy::Cost, 0, &[1; 3], &mut o, &|i| loads[i]);
        assert_eq!(o, [1, 2, 0]);
        let mut o = [0, 1, 2];
        s.order(Strategy::ResetAware, 0, &[1; 3], &mut o, &|i| loads[i]);
        assert_eq!(o, [2, 0, 1], "most headroom, then the soonest reset");
        let mut o = [0, 1, 2];
        s.order(Strategy::FillFirst, 0, &[1; 3], &mut o, &|i| loads[i]);
        assert_eq!(o, [0, 1, 2]);
        // p2c never picks the busiest of three as long as it compares it with a lighter one.
        for _ in 0..100 {
            let mut o = [0, 1, 2];
            s.order(Strategy::P2c, 0, &[1; 3], &mut o, &|i| loads[i]);
            assert_ne!(o[0], 0);
            let mut sorted = o;
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2]);
        }
    }
}

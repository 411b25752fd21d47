//! A route's candidates for one request: the targets in its reach, their connections the
//! caller accepts, ordered by the route's strategy (the top priority group spread by it, lower
//! groups kept as fallbacks).

use super::strategy::{Scratch, SelectorState};
use super::{Candidate, Dialect, Entry, Load, Reach, RouteTable, Target};
use crate::ids::{ConnId, TargetIdx};

impl RouteTable {
    /// Candidates in attempt order, restricted to the targets in `reach`.
    pub fn candidates(
        &self,
        entry: &Entry,
        reach: Reach,
        st: &mut SelectorState,
        load: &dyn Fn(ConnId) -> Load,
    ) -> Vec<Candidate> {
        self.candidates_where(entry, reach, st, load, |_| true)
            .to_vec()
    }

    /// Whether a target is in reach.
    #[inline]
    fn reaches(&self, entry: &Entry, t: &Target, reach: Reach) -> bool {
        self.dialects[t.provider] == reach.dialect || (reach.translatable && entry.cross_dialect)
    }

    /// Every candidate of the entry in reach, in the config's order (no strategy applied).
    pub fn all_candidates(&self, entry: &Entry, reach: Reach) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (ti, t) in entry.targets.iter().enumerate() {
            if self.reaches(entry, t, reach) {
                out.extend(t.connections.iter().map(|&c| Candidate {
                    target: TargetIdx::new(ti),
                    connection: c,
                }));
            }
        }
        out
    }

    /// The dialect a target's provider speaks.
    pub fn dialect_of(&self, t: &Target) -> Dialect {
        self.dialects[t.provider]
    }

    /// Whether the entry has any connection in reach.
    pub fn serves(&self, entry: &Entry, reach: Reach) -> bool {
        entry
            .targets
            .iter()
            .any(|t| self.reaches(entry, t, reach) && !t.connections.is_empty())
    }

    /// The candidates `keep` accepts, grouped by target (targets out of reach skipped), with
    /// each one's priority and weight.
    #[inline]
    fn gather(
        &self,
        entry: &Entry,
        reach: Reach,
        sc: &mut Scratch,
        keep: &mut impl FnMut(Candidate) -> bool,
    ) {
        sc.kept.clear();
        sc.groups.clear();
        for (ti, t) in entry.targets.iter().enumerate() {
            if !self.reaches(entry, t, reach) {
                continue;
            }
            let start = sc.kept.len();
            for (ci, &c) in t.connections.iter().enumerate() {
                let cand = Candidate {
                    target: TargetIdx::new(ti),
                    connection: c,
                };
                if keep(cand) {
                    sc.kept.push((cand, t.priorities[ci], t.weights[ci]));
                }
            }
            if sc.kept.len() > start {
                sc.groups.push((ti, start, sc.kept.len()));
            }
        }
    }

    /// Candidates in attempt order among those `keep` accepts. The strategy chooses among the
    /// usable options only (so a cooling key does not hand its share to its neighbour). `load`
    /// gives a connection's load; only load-aware strategies consult it. The list lives in the
    /// selector's scratch space: building it allocates nothing once the buffers are warm.
    pub fn candidates_where<'s>(
        &self,
        entry: &Entry,
        reach: Reach,
        st: &'s mut SelectorState,
        load: &dyn Fn(ConnId) -> Load,
        mut keep: impl FnMut(Candidate) -> bool,
    ) -> &'s [Candidate] {
        let mut sc = std::mem::take(&mut st.scratch);
        self.gather(entry, reach, &mut sc, &mut keep);
        let needs_load = entry.strategy.needs_load();
        sc.gorder.clear();
        sc.gorder.extend(0..sc.groups.len());
        if sc.groups.len() > 1 {
            let (kept, groups) = (&sc.kept, &sc.groups);
            // A target's load aggregates its usable connections; computed only when looked at.
            let target_load = |g: usize| {
                let (ti, a, b) = groups[g];
                let mut agg = Load {
                    headroom: 0,
                    reset_in_ms: u64::MAX,
                    cost: entry.targets[ti].caps.cost,
                    ..Default::default()
                };
                if !needs_load {
                    return agg;
                }
                for (c, _, _) in &kept[a..b] {
                    let l = load(c.connection);
                    agg.in_flight += l.in_flight;
                    if l.latency_ms > 0 && (agg.latency_ms == 0 || l.latency_ms < agg.latency_ms) {
                        agg.latency_ms = l.latency_ms;
                    }
                    agg.headroom = agg.headroom.max(l.headroom);
                    agg.reset_in_ms = agg.reset_in_ms.min(l.reset_in_ms);
                }
                agg
            };
            st.order(
                entry.strategy,
                entry.slot,
                &[],
                &mut sc.gorder,
                &target_load,
            );
        }
        sc.out.clear();
        for &g in &sc.gorder {
            let (ti, a, b) = sc.groups[g];
            let group = &sc.kept[a..b];
            // The strategy spreads load inside the top priority group; lower groups stay fallbacks.
            let top = group[0].1;
            let top_n = group.iter().take_while(|x| x.1 == top).count();
            sc.corder.clear();
            sc.corder.extend(0..top_n);
            if top_n > 1 {
                sc.weights.clear();
                sc.weights.extend(group[..top_n].iter().map(|x| x.2));
                let conn_load = |j: usize| load(group[j].0.connection);
                st.order(
                    entry.strategy,
                    entry.targets[ti].slot,
                    &sc.weights,
                    &mut sc.corder,
                    &conn_load,
                );
            }
            sc.out.extend(sc.corder.iter().map(|&j| group[j].0));
            sc.out.extend(group[top_n..].iter().map(|x| x.0));
        }
        st.scratch = sc;
        &st.scratch.out
    }

    /// Whether every target of the entry is out of reach (to explain a 404).
    pub fn other_dialect_only(&self, entry: &Entry, reach: Reach) -> bool {
        !entry.targets.is_empty() && entry.targets.iter().all(|t| !self.reaches(entry, t, reach))
    }
}

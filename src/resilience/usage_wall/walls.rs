//! Every connection's usage-wall state, shared by all cores. A Claude subscription account
//! hits its wall on whichever core sent the request, and every core must then send the lane's
//! header (a sibling request that raced the activation joins the lane at once). So the lane
//! and the reset memo are one per connection behind a lock, taken only for the answers of
//! opted-in connections; what the send path reads on every request of such a connection is
//! one atomic: until when the lane is on.

use super::headers::Unified;
use super::lane::{Answer, Decision, EndReason, Lane, OptIn, RESET_GRACE_MS, Via, Waits};
use super::reset::{Memo, Outcome};
use crate::ids::ConnId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One connection's usage wall.
#[derive(Default)]
pub struct Wall {
    /// Unix ms until which requests carry the lane's header (0: the lane is off). The lane
    /// ends lazily at its reset plus the grace, and so does this.
    slow_until_ms: AtomicU64,
    state: Mutex<State>,
    pub counts: Counts,
}

/// The lane and the reset memo, and whether a reset claim is in flight.
#[derive(Default)]
pub struct State {
    pub lane: Lane,
    pub memo: Memo,
    /// A status + claim round trip is under way (one per account, across cores).
    pub claiming: bool,
}

/// What happened on the wall, for metrics.
#[derive(Default)]
pub struct Counts {
    pub activations: AtomicU64,
    pub ends: [AtomicU64; 9],
    pub waits: AtomicU64,
    /// Limit-reset attempts that made the calls, and those granted.
    pub claims: AtomicU64,
    pub claims_granted: AtomicU64,
}

/// How a limit reset attempt begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    /// The memo answers without I/O.
    Answered(Outcome),
    /// This caller makes the calls, then [`Wall::claimed`].
    Call,
    /// Another request's calls are in flight: wait for their outcome.
    InFlight,
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

impl Wall {
    /// Whether a request sent now goes in the lane.
    pub fn slow(&self, now_unix_ms: u64) -> bool {
        now_unix_ms < self.slow_until_ms.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lane's decision on one answer of the account (`Lane::handle`), with the shared
    /// flag and the counters kept in step.
    pub fn answer(
        &self,
        opt: OptIn,
        a: Answer<'_>,
        now_ms: u64,
        waits: &mut Waits,
        ceiling_ms: Option<i64>,
        r: f64,
    ) -> Decision {
        let mut st = self.lock();
        let before = (st.lane.accepted_at(), st.lane.last_end);
        let d = st.lane.handle(opt, a, now_ms, waits, ceiling_ms, r);
        self.settle(&mut st.lane, now_ms, before);
        if let Decision::Retry {
            via: Via::SlotBusy | Via::CapacityBusy,
            ..
        } = d
        {
            bump(&self.counts.waits);
        }
        d
    }

    /// After a limit reset attempt (`Lane::after_limit_reset`).
    pub fn after_limit_reset(
        &self,
        granted: bool,
        opt: OptIn,
        u: &Unified,
        now_ms: u64,
    ) -> Decision {
        let mut st = self.lock();
        let before = (st.lane.accepted_at(), st.lane.last_end);
        let d = st.lane.after_limit_reset(granted, opt, u, now_ms);
        self.settle(&mut st.lane, now_ms, before);
        d
    }

    /// An operator ends the lane.
    pub fn end(&self, now_ms: u64) -> bool {
        let mut st = self.lock();
        let before = (st.lane.accepted_at(), st.lane.last_end);
        let on = st.lane.active_until(now_ms).is_some();
        if on {
            st.lane.end(EndReason::Operator, now_ms);
        }
        self.settle(&mut st.lane, now_ms, before);
        on
    }

    /// The shared flag follows the lane; an activation or an end is counted once.
    fn settle(
        &self,
        lane: &mut Lane,
        now_ms: u64,
        before: (Option<u64>, Option<(EndReason, u64)>),
    ) {
        let until = lane
            .active_until(now_ms)
            .map_or(0, |s| (s * 1_000).saturating_add(RESET_GRACE_MS));
        self.slow_until_ms.store(until, Ordering::Relaxed);
        if lane.accepted_at().is_some() && lane.accepted_at() != before.0 {
            bump(&self.counts.activations);
        }
        if let Some((reason, at)) = lane.last_end
            && Some((reason, at)) != before.1
        {
            bump(&self.counts.ends[reason.index()]);
        }
    }

    /// Begin a limit reset: the memo's answer, this caller's turn, or another's in flight.
    pub fn begin_claim(&self, now_ms: u64) -> Begin {
        let mut st = self.lock();
        if st.claiming {
            return Begin::InFlight;
        }
        match st.memo.before_calls(now_ms) {
            Some(o) => Begin::Answered(o),
            None => {
                st.claiming = true;
                bump(&self.counts.claims);
                Begin::Call
            }
        }
    }

    /// The calls ended: `settle` updates the memo (the status, the claim).
    pub fn claimed(&self, settle: impl FnOnce(&mut Memo) -> Outcome) -> Outcome {
        let mut st = self.lock();
        st.claiming = false;
        let o = settle(&mut st.memo);
        if o.granted() {
            bump(&self.counts.claims_granted);
        }
        o
    }

    /// The last reset attempt's outcome and when (unix ms), while none is in flight.
    pub fn last_claim(&self) -> (bool, Option<(Outcome, u64)>) {
        let st = self.lock();
        (st.claiming, st.memo.last)
    }

    /// A copy of the state, for the admin API.
    pub fn view(&self, now_ms: u64) -> (Lane, Memo) {
        let mut st = self.lock();
        let before = (st.lane.accepted_at(), st.lane.last_end);
        st.lane.active_until(now_ms);
        self.settle(&mut st.lane, now_ms, before);
        (st.lane.clone(), st.memo)
    }
}

/// One wall per connection slot (room for every slot a reload may add).
pub struct Walls(Vec<Wall>);

impl Walls {
    pub fn new(capacity: usize) -> Walls {
        Walls((0..capacity).map(|_| Wall::default()).collect())
    }

    pub fn get(&self, conn: ConnId) -> Option<&Wall> {
        self.0.get(conn.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resilience::usage_wall::headers::Offer;

    const NOW: u64 = 1_800_000_000_000;

    fn wall_429() -> Unified {
        Unified {
            rejected: true,
            reset: Some(NOW / 1_000 + 3_600),
            slow_offer: Some(Offer::Treatment),
            ..Default::default()
        }
    }

    #[test]
    fn the_shared_flag_follows_the_lane_and_counts_once() {
        let w = Wall::default();
        let opt = OptIn {
            low_priority_lane: true,
            auto_limit_reset: false,
        };
        let u = wall_429();
        let a = Answer {
            status: 429,
            unified: &u,
            sent_slow: false,
        };
        assert!(!w.slow(NOW));
        let d = w.answer(opt, a, NOW, &mut Waits::default(), None, 0.5);
        assert!(matches!(d, Decision::Retry { delay_ms: 0, .. }));
        assert!(w.slow(NOW + 1));
        // A raced sibling joins; nothing is counted twice.
        w.answer(opt, a, NOW + 2, &mut Waits::default(), None, 0.5);
        assert_eq!(w.counts.activations.load(Ordering::Relaxed), 1);
        // Until the reset plus the grace, then off (lazily, without an answer).
        let end = (NOW / 1_000 + 3_600) * 1_000 + RESET_GRACE_MS;
        assert!(w.slow(end - 1) && !w.slow(end));
        assert!(w.end(NOW + 3));
        assert!(!w.slow(NOW + 4));
        let operator = EndReason::Operator.index();
        assert_eq!(w.counts.ends[operator].load(Ordering::Relaxed), 1);
        assert!(!w.end(NOW + 5), "already off");
    }

    #[test]
    fn one_claim_at_a_time_and_the_memo_answers_siblings() {
        let w = Wall::default();
        assert_eq!(w.begin_claim(NOW), Begin::Call);
        assert_eq!(w.begin_claim(NOW), Begin::InFlight);
        let body = serde_json::json!({"result": "reset"});
        let o = w.claimed(|m| m.after_claim(NOW, Some((200, &body)), None));
        assert_eq!(o, Outcome::Reset);
        assert_eq!(
            w.begin_claim(NOW + 1),
            Begin::Answered(Outcome::RecentReset)
        );
        assert_eq!(w.counts.claims.load(Ordering::Relaxed), 1);
        assert_eq!(w.counts.claims_granted.load(Ordering::Relaxed), 1);
    }
}

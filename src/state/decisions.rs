//! A core's rings of recent decision records, which the admin API reads over the bus.
//!
//! Two rings, because the records are worth different amounts of memory. With one ring of
//! 1,024 for everything, a proxy serving 20k requests/s kept the last 50 ms: the 429 an
//! operator asks about had long scrolled out behind successes. And every request writes a
//! slot last touched a ring's length ago, moves the evicted record out and frees its strings,
//! which is cheaper when the ring every request touches is small. So:
//!
//! - **notable** records (a retry, a wait, an exclusion, a restatement, an error status, a
//!   refusal, a stream that failed) get the large ring (`decision_ring`). These are the ones an
//!   operator must be able to explain afterwards, and they no longer scroll out behind a flood
//!   of successes;
//! - **plain** first-try successes get a small one (`decision_ring_plain`), which stays in
//!   cache. Every request, plain or not, is in the access log.

use crate::audit::Record;
use std::collections::VecDeque;

/// Each record is kept with its arrival number on this core, so the two rings merge back in
/// the exact order the requests ended (their millisecond timestamps can tie).
#[derive(Default)]
pub struct Decisions {
    notable: VecDeque<(u64, Record)>,
    plain: VecDeque<(u64, Record)>,
    notable_cap: usize,
    plain_cap: usize,
    seq: u64,
}

impl Decisions {
    /// Capacities for this core (the configured totals divided among the cores).
    pub fn new(notable_cap: usize, plain_cap: usize) -> Self {
        Decisions {
            notable: VecDeque::new(),
            plain: VecDeque::new(),
            notable_cap,
            plain_cap,
            seq: 0,
        }
    }

    /// Per-core capacities from the configured totals: the notable ring keeps at least 16
    /// per core (unless turned off), the plain one exactly its share.
    pub fn per_core(notable_total: usize, plain_total: usize, cores: usize) -> Self {
        let cores = cores.max(1);
        let notable = match notable_total {
            0 => 0,
            n => n.div_ceil(cores).max(16),
        };
        Decisions::new(notable, plain_total.div_ceil(cores))
    }

    /// Keep a finished request's record; the oldest of its ring goes when that ring is full.
    pub fn remember(&mut self, r: Record) {
        let (ring, cap) = if r.is_plain() {
            (&mut self.plain, self.plain_cap)
        } else {
            (&mut self.notable, self.notable_cap)
        };
        if cap == 0 {
            return;
        }
        if ring.len() >= cap {
            ring.pop_front();
        }
        self.seq += 1;
        ring.push_back((self.seq, r));
    }

    /// The record of one request, if it is still kept.
    pub fn find(&self, request_id: &str) -> Option<Record> {
        let hit = |ring: &VecDeque<(u64, Record)>| {
            ring.iter()
                .rev()
                .find(|(_, r)| r.request_id == request_id)
                .map(|(_, r)| r.clone())
        };
        hit(&self.notable).or_else(|| hit(&self.plain))
    }

    /// The latest `limit` records of both rings, newest first.
    pub fn latest(&self, limit: usize) -> Vec<Record> {
        let mut a = self.notable.iter().rev().peekable();
        let mut b = self.plain.iter().rev().peekable();
        let mut out = Vec::with_capacity(limit.min(self.notable.len() + self.plain.len()));
        while out.len() < limit {
            let take_a = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.0 > y.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let next = if take_a { a.next() } else { b.next() };
            out.extend(next.map(|(_, r)| r.clone()));
        }
        out
    }

    /// How many records each ring holds (notable, plain).
    pub fn sizes(&self) -> (usize, usize) {
        (self.notable.len(), self.plain.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AttemptOutcome, AttemptRecord, Decision, Outcome};

    fn plain(id: &str, ts: u64) -> Record {
        Record {
            request_id: id.into(),
            status: 200,
            outcome: Outcome::Ok,
            ts_ms: ts,
            attempts: vec![AttemptRecord {
                outcome: AttemptOutcome::Ok,
                status: Some(200),
                decision: Decision::Deliver,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn retried(id: &str, ts: u64) -> Record {
        let mut r = plain(id, ts);
        r.attempts.insert(
            0,
            AttemptRecord {
                outcome: AttemptOutcome::Http429,
                status: Some(429),
                decision: Decision::Next,
                ..Default::default()
            },
        );
        r
    }

    #[test]
    fn what_counts_as_plain() {
        assert!(plain("a", 1).is_plain());
        assert!(!retried("a", 1).is_plain());
        let mut r = plain("a", 1);
        r.status = 429;
        assert!(!r.is_plain(), "an error status");
        let mut r = plain("a", 1);
        r.waited_ms = 5;
        assert!(!r.is_plain(), "a wait");
        let mut r = plain("a", 1);
        r.outcome = crate::audit::Outcome::FailedAfterCommit;
        r.error_code = Some("upstream_no_terminal");
        assert!(!r.is_plain(), "a stream that failed after its head");
        let mut r = plain("a", 1);
        r.attempts[0].restated_from = Some(403);
        assert!(!r.is_plain(), "a restatement");
        let mut r = plain("a", 1);
        r.outcome = crate::audit::Outcome::Rejected;
        r.status = 200;
        assert!(!r.is_plain(), "a refusal");
        let mut r = plain("a", 1);
        r.attempts.clear();
        assert!(r.is_plain(), "answered by Ringside itself (GET /v1/models)");
    }

    #[test]
    fn successes_do_not_push_out_the_decisions_worth_explaining() {
        let mut d = Decisions::new(4, 2);
        d.remember(retried("r1", 1));
        for i in 0..100 {
            d.remember(plain(&format!("p{i}"), 2 + i));
        }
        assert!(
            d.find("r1").is_some(),
            "the retried request is still explained"
        );
        assert!(
            d.find("p0").is_none(),
            "old successes left their small ring"
        );
        assert!(d.find("p99").is_some() && d.find("p98").is_some());
        assert_eq!(d.sizes(), (1, 2));
        for i in 0..10 {
            d.remember(retried(&format!("r{}", i + 2), 200 + i));
        }
        assert_eq!(d.sizes(), (4, 2));
        assert!(
            d.find("r1").is_none(),
            "the notable ring evicts its own oldest"
        );
        assert!(d.find("r11").is_some());
    }

    #[test]
    fn latest_merges_both_rings_newest_first() {
        let mut d = Decisions::new(8, 8);
        d.remember(plain("a", 10));
        d.remember(retried("b", 20));
        d.remember(plain("c", 30));
        d.remember(retried("d", 40));
        d.remember(plain("e", 50));
        let ids = |v: Vec<Record>| v.into_iter().map(|r| r.request_id).collect::<Vec<_>>();
        assert_eq!(ids(d.latest(10)), ["e", "d", "c", "b", "a"]);
        assert_eq!(ids(d.latest(3)), ["e", "d", "c"]);
        assert!(d.latest(0).is_empty());
    }

    #[test]
    fn a_ring_of_zero_keeps_nothing() {
        let mut d = Decisions::per_core(0, 0, 2);
        d.remember(plain("a", 1));
        d.remember(retried("b", 2));
        assert_eq!(d.sizes(), (0, 0));
        assert!(d.find("a").is_none() && d.latest(5).is_empty());
        // Per-core shares: the notable ring keeps at least 16 per core.
        let d = Decisions::per_core(1024, 64, 2);
        assert_eq!((d.notable_cap, d.plain_cap), (512, 32));
        let d = Decisions::per_core(20, 1, 4);
        assert_eq!((d.notable_cap, d.plain_cap), (16, 1));
    }
}

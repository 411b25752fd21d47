//! `Retry-After` honesty of Ringside's fail-fast answers: each answer that told a client when
//! to come back is held against when a retry would in fact have succeeded: the first answer,
//! after it, to a request of the same route that was served promptly on its first send (a
//! request that waited inside Ringside for the route to come back only says when it did). Told to
//! wait past that moment, a client sat idle while the route worked (an overstatement, the
//! figure with a budget); told to come back more than a second before it, a client that obeyed
//! was refused again (early: counted, but a fault that outlasts the upstream's own hint makes
//! those, not Ringside).

use super::traffic::Done;
use serde::Serialize;
use std::time::Duration;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Honesty {
    /// Fail-fast answers (429, 503) that carried a `Retry-After`.
    pub answers: usize,
    /// Of them, those after which some request to the route succeeded (the ones judged).
    pub judged: usize,
    /// Told to come back more than a second before a retry would have succeeded.
    pub early: usize,
    /// How long past that moment the answers told clients to wait, 90th percentile and most
    /// (0 when none told them to wait too long).
    pub overstatement_p90_s: f64,
    pub overstatement_max_s: f64,
}

/// Measure the answers the clients of `done` were given.
pub fn measure(done: &[&Done]) -> Honesty {
    let mut h = Honesty::default();
    let mut over = Vec::new();
    for d in done {
        for &(told_at, after_s) in &d.told_retry_after {
            h.answers += 1;
            let back = done
                .iter()
                .filter(|e| e.route == d.route && e.first_ok && e.took <= super::verdict::PROMPT)
                .map(|e| e.started + e.took)
                .filter(|&served| served >= told_at)
                .min();
            let Some(back) = back else { continue };
            h.judged += 1;
            let come_back = told_at + Duration::from_secs_f64(after_s.max(0.0));
            if come_back + Duration::from_secs(1) < back {
                h.early += 1;
            }
            over.push(come_back.saturating_sub(back).as_secs_f64());
        }
    }
    over.sort_by(f64::total_cmp);
    if let Some(&max) = over.last() {
        let i = ((over.len() as f64 - 1.0) * 0.9).round() as usize;
        h.overstatement_p90_s = over[i.min(over.len() - 1)];
        h.overstatement_max_s = max;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(at_ms: u64, first_ok: bool, told: Option<(u64, f64)>) -> Done {
        Done {
            started: Duration::from_millis(at_ms),
            took: Duration::from_millis(5),
            status: if first_ok { 200 } else { 429 },
            sends: 1,
            first_ok,
            stream: false,
            route: 0,
            cancelled: None,
            told_retry_after: told
                .map(|(at, s)| vec![(Duration::from_millis(at), s)])
                .unwrap_or_default(),
        }
    }

    #[test]
    fn answers_are_held_against_the_next_first_send_success() {
        let all = [
            // Told at 1 s to come back in 2 s; the route worked again from 2 s: 1 s too long.
            done(1_000, false, Some((1_000, 2.0))),
            // Told at 1.5 s to come back in 0 s: refused again until 2 s (early by 0.5 s: not
            // more than a second, so not counted).
            done(1_500, false, Some((1_500, 0.0))),
            // Told at 0.5 s to come back at once: early by 1.5 s.
            done(500, false, Some((500, 0.0))),
            done(2_000, true, None),
            done(2_500, true, None),
        ];
        let refs: Vec<&Done> = all.iter().collect();
        let h = measure(&refs);
        assert_eq!((h.answers, h.judged, h.early), (3, 3, 1));
        // (Served 5 ms after it started.)
        assert!((h.overstatement_max_s - 0.995).abs() < 1e-9, "{h:?}");
        // A request held inside Ringside until the route came back says when it did, not
        // when it started.
        let mut held = done(1_200, true, None);
        held.took = Duration::from_secs(10);
        let all = [done(1_000, false, Some((1_000, 2.0))), held];
        let h = measure(&all.iter().collect::<Vec<_>>());
        assert_eq!((h.answers, h.judged), (1, 0), "{h:?}");
        // Nothing after an answer to judge it by: counted, not judged.
        let late = [done(3_000, false, Some((3_000, 5.0)))];
        let h = measure(&late.iter().collect::<Vec<_>>());
        assert_eq!((h.answers, h.judged), (1, 0));
    }
}

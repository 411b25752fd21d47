//! One scenario of a drill: a clean slate, the three phases with the clients and the admin
//! sampler running throughout, then the figures from what the clients, the simulator and the
//! admin API saw, held against the budgets.

use super::plan::Scenario;
use super::stage::Stage;
use super::{Remote, Verdict, call, clean_slate, contract, fault_bodies, metrics, samples};
use super::{signals, traffic, upstream, verdict, watch};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every scenario of one drill shares.
pub(super) struct Drive<'a> {
    pub stage: &'a Stage,
    pub remote: &'a Remote,
    pub token: String,
    pub supports: contract::Supports,
    pub clients: traffic::Shape,
    /// What tokens cost (the config's prices over the built-in table).
    pub prices: crate::flow::price::Prices,
}

/// What the clients and the admin samples saw during a scenario.
struct Seen {
    done: Vec<traffic::Done>,
    watched: Vec<watch::Sample>,
    /// The scenario's length, and its phases as they ran (the recovery may have been
    /// lengthened while the breaker was open).
    took: Duration,
    phases: [f64; 3],
    /// Upstream attempts counted at the simulator in each phase (the fault's is judged).
    phase_attempts: [u64; 3],
}

impl Drive<'_> {
    /// One scenario from a clean state: its phases, then its verdict.
    pub fn scenario(&self, s: &Scenario) -> Result<Verdict, String> {
        let (admin, sim) = (self.remote.admin, self.remote.simulator);
        clean_slate(self.stage, admin, &self.token);
        call(sim, "POST", "/_sim/reset", "", None)?;
        let before = metrics(admin, &self.token);
        // (The clean slate's own messages are not the scenario's.)
        crate::log::take_captured();
        let mut phases = s.phases_s;
        phases[2] = phases[2].max(s.min_recovery_s);
        let shape = traffic::Shape {
            cancel_after: s.cancel_after_ms.map(Duration::from_millis),
            ..self.clients.clone()
        };
        let seen = self.phases(s, phases, &shape)?;
        let phases = seen.phases;
        let stats = call(sim, "GET", "/_sim/stats", "", None)?;
        let path = "/admin/decisions?limit=1000";
        let decisions = call(admin, "GET", path, "", Some(&self.token))
            .map(|d| d["decisions"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default();
        let after = metrics(admin, &self.token);
        let signals = signals::moved(&before, &after);
        let tokens = signals::tokens_moved(&before, &after);
        let mut figures = verdict::figures(
            &seen.done,
            (Duration::ZERO, seen.took),
            Duration::from_secs_f64(phases[0] + phases[1]),
            shape.deadline,
            upstream(self.stage, &self.supports, &stats),
        );
        figures.queues = watch::queue_figures(&seen.watched);
        figures.spent = super::spend::spent(&tokens, &self.stage.keys, &self.prices);
        figures.sent_after_cancel =
            verdict::sent_after_cancel(&seen.done, &decisions, s.cancel_after_ms);
        figures.states = watch::states(&seen.watched);
        let edges = [0.0, phases[0], phases[0] + phases[1], f64::INFINITY];
        for (i, attempts) in seen.phase_attempts.iter().enumerate() {
            // Per client request the phase touched: started in it, or still running at its
            // start (their attempts in the phase are counted too). Counting only those that
            // started in a 2 s fault divided by a handful when requests waited, and the figure
            // swung across its budget from run to run.
            let (from, to) = (edges[i], edges[i + 1]);
            let touched = seen
                .done
                .iter()
                .filter(|d| {
                    let (start, end) =
                        (d.started.as_secs_f64(), (d.started + d.took).as_secs_f64());
                    start < to && end > from
                })
                .count();
            figures.phase_amplification[i] = *attempts as f64 / touched.max(1) as f64;
        }
        figures.fault_amplification = figures.phase_amplification[1];
        let scenario = Scenario {
            phases_s: phases,
            ..s.clone()
        };
        let mut v = verdict::judge(scenario, figures);
        v.samples = samples(decisions);
        v.signals = signals;
        v.logged = signals::logged(&crate::log::take_captured());
        v.findings = super::findings::of(&v, self.stage);
        Ok(v)
    }

    /// Steady traffic, the fault, recovery: the clients and the admin sampler run throughout.
    /// An outage's recovery lasts, beyond its own length, as long as the first route's breaker
    /// is still open when the fault ends (traffic only comes back through its probe).
    fn phases(
        &self,
        s: &Scenario,
        mut phases: [f64; 3],
        shape: &traffic::Shape,
    ) -> Result<Seen, String> {
        let (proxy, admin, sim) = (self.remote.proxy, self.remote.admin, self.remote.simulator);
        let faults = fault_bodies(self.stage, s);
        let done = Arc::new(Mutex::new(Vec::new()));
        let [steady, fault, recovery] = phases.map(Duration::from_secs_f64);
        let t0 = Instant::now();
        let ms = |d: Duration| d.as_millis() as u64;
        let until = traffic::Until::new(ms(steady + fault + recovery));
        let mut watched = Vec::new();
        let mut phase_attempts = [0u64; 3];
        let routes = &self.stage.routes;
        let total = || -> Result<u64, String> {
            Ok(call(sim, "GET", "/_sim/stats", "", None)?["total"]
                .as_u64()
                .unwrap_or(0))
        };
        std::thread::scope(|scope| -> Result<(), String> {
            scope.spawn(|| traffic::run(proxy, routes, shape, t0, &until, &done));
            let sampler = scope.spawn(|| watch::sample(admin, &self.token, t0, &until));
            std::thread::sleep(steady);
            let before = total()?;
            for b in &faults {
                call(sim, "POST", "/_sim/faults", b, None)?;
            }
            std::thread::sleep(fault);
            for b in &faults {
                let mut v: serde_json::Value = serde_json::from_str(b).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("spec");
                }
                call(sim, "POST", "/_sim/faults", &v.to_string(), None)?;
            }
            let after = total()?;
            phase_attempts[0] = before;
            phase_attempts[1] = after.saturating_sub(before);
            if s.waits_for_breaker {
                let open = breaker_open_for(self, admin);
                let end = ms(t0.elapsed()) + open + ms(recovery);
                until.fetch_max(end, std::sync::atomic::Ordering::AcqRel);
                phases[2] = (end as f64 / 1_000.0 - phases[0] - phases[1]).max(phases[2]);
            }
            watched = sampler.join().unwrap_or_default();
            Ok(())
        })?;
        // (The traffic has ended with the scope: what came after the fault is recovery's.)
        let end = total()?;
        phase_attempts[2] = end.saturating_sub(phase_attempts[0] + phase_attempts[1]);
        let done = done.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(Seen {
            done,
            watched,
            took: t0.elapsed(),
            phases,
            phase_attempts,
        })
    }
}

/// How much longer (ms) the first route's provider keeps its breaker open (0: closed, or the
/// admin API cannot say).
fn breaker_open_for(d: &Drive<'_>, admin: std::net::SocketAddr) -> u64 {
    let Some(route) = d.stage.routes.first() else {
        return 0;
    };
    let Ok(b) = call(admin, "GET", "/admin/breakers", "", Some(&d.token)) else {
        return 0;
    };
    b["breakers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["provider"] == route.primary.0.as_str())
        .and_then(|x| x["retry_after_ms"].as_u64())
        .unwrap_or(0)
}

//! Refusals on the way to a provider: its egress proxy refusing the tunnel (credentials,
//! policy) or its TLS refusing the client certificate. Nothing reached the provider, and only
//! the operator can change the answer, so these cooldowns are not probed (a proxy asked with
//! wrong credentials every few hundred milliseconds may lock the company's account out) and do
//! not count for the breaker (nothing was learned about the provider's health). Their timers
//! back off as a failed connect's do, one request trying again as each ends; and a reload,
//! the operator's change, ends them at once.

use super::{Event, Tables};
use crate::ids::ConnId;

impl Tables {
    /// After a reload: each key whose last failure was a refusal on the way starts clean (as
    /// an operator's reset), told to the other cores by `emit`.
    pub fn forget_refusals(&mut self, emit: &mut dyn FnMut(Event)) {
        for (i, st) in self.conns.iter_mut().enumerate() {
            let refused = st.last.reason.is_some_and(|r| r.refused_on_the_way());
            if refused && st.has_error() && st.terminal.is_none() {
                let state = st.reset();
                emit(Event::Conn {
                    conn: ConnId::new(i),
                    state,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::ConnId;
    use crate::resilience::classify::{Reason, refused_on_the_way, transport};
    use crate::resilience::tests::settings;
    use crate::resilience::{Exclusion, Probes, Site, Tables, breaker::BreakerState};

    fn site(conn: usize) -> Site<'static> {
        Site {
            provider: conn / 2,
            conn: ConnId::new(conn),
            model: "m",
            tenant: 0,
            sent: 0,
            probe: false,
        }
    }

    #[test]
    fn a_refusal_is_not_probed_nor_counted_and_a_reload_ends_it() {
        let mut s = settings(2, 2);
        s.providers[0].breaker.open_at = 1;
        let (mut t, probes) = (Tables::new(2, 4), Probes::new(2));
        for at in [0, 10_000, 30_000] {
            t.on_failure(
                &s,
                site(0),
                &refused_on_the_way(Reason::EgressRefused),
                at,
                &mut |_| {},
            );
        }
        for conn in [2, 3] {
            t.on_failure(&s, site(conn), &transport(false), 30_000, &mut |_| {});
        }
        assert_ne!(
            t.breakers[0].state,
            BreakerState::Open,
            "the provider was not reached"
        );
        assert!(
            t.probe_need(&s, 0, 30_001).is_none(),
            "its proxy is not asked again"
        );
        assert!(
            t.probe_need(&s, 1, 30_001).is_some(),
            "every key's failed connect is"
        );
        let e = t.check(&s, &probes, site(1), 30_001).expect_err("cooling");
        assert!(matches!(e, Exclusion::Cooling { .. }), "{e:?}");
        let mut told = Vec::new();
        t.forget_refusals(&mut |ev| told.push(ev));
        assert_eq!(
            told.len(),
            2,
            "both keys of the provider, told to the other cores"
        );
        assert!(t.check(&s, &probes, site(1), 30_001).is_ok());
        assert!(
            t.check(&s, &probes, site(2), 30_001).is_err(),
            "the other provider's runs"
        );
    }
}

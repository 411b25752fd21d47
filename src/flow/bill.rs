//! What one request holds of its bill until it ends (`proxy::bill` reserves and settles it):
//! its tenant's place under the minute quotas, its reservation on the tenant's budgets
//! (`spend`), and the cap its client set on it (`x-ringside-max-tokens-budget`,
//! `x-ringside-max-cost-usd`), and its `Idempotency-Key` claim (one bill per request).

use super::price::Price;
use super::spend::{Budget, Exhausted, Hold, Spent, period_ends};
use super::tenant::{TenantAsk, TenantPermit};
use crate::dialect::needs::Needs;

/// What a request holds of its bill until it ends: its tenant's place under the minute quotas,
/// its reservation on the tenant's budgets, and its own cap (boxed, and only made when one of
/// them applies: every request's task carries it).
#[derive(Default)]
pub struct RequestBill {
    /// Held for its drop, which gives the tenant's place under its quotas back.
    _permit: Option<TenantPermit>,
    pub spend: Option<Hold>,
    pub cap: Option<RequestCap>,
    /// Its `Idempotency-Key` claim (`proxy::idempotent`).
    pub idempotency: Option<crate::store::idempotency::Claim>,
    /// Its reservation on the fleet's spend counters (fleet mode, when Redis answered).
    pub fleet_spend: Option<FleetHold>,
    /// Ringside asked the provider for a stream's usage chunk the client did not ask for: it is
    /// left out of what the client reads.
    pub usage_asked: bool,
    /// What attempts that failed before the commit produced (billed by their providers all
    /// the same): added to the request's bill.
    pub unbilled: super::spend::Spent,
}

impl RequestBill {
    /// The request's quota place and cap; `None` when it has neither.
    pub fn new(permit: Option<TenantPermit>, cap: Option<RequestCap>) -> Option<Box<RequestBill>> {
        (permit.is_some() || cap.is_some()).then(|| {
            Box::new(RequestBill {
                _permit: permit,
                spend: None,
                cap,
                idempotency: None,
                fleet_spend: None,
                usage_asked: false,
                unbilled: Default::default(),
            })
        })
    }
}

/// The most one request may cost, as its client asked.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestCap {
    pub tokens: Option<u64>,
    pub micro_usd: Option<u64>,
}

pub const MAX_TOKENS_HEADER: &str = "x-ringside-max-tokens-budget";
pub const MAX_COST_HEADER: &str = "x-ringside-max-cost-usd";

impl RequestCap {
    /// The cap a request's head asks for (`Ok(None)`: none); `Err`: the header that does not
    /// read as a number.
    pub fn from_head(head: &crate::http::Head) -> Result<Option<RequestCap>, &'static str> {
        let tokens = match head.get_str(MAX_TOKENS_HEADER) {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| MAX_TOKENS_HEADER)?),
        };
        let micro_usd = match head.get_str(MAX_COST_HEADER) {
            None => None,
            Some(v) => {
                let usd: f64 = v.trim().parse().map_err(|_| MAX_COST_HEADER)?;
                if !usd.is_finite() || usd < 0.0 {
                    return Err(MAX_COST_HEADER);
                }
                Some((usd * 1e6).round().min(u64::MAX as f64) as u64)
            }
        };
        Ok((tokens.is_some() || micro_usd.is_some()).then_some(RequestCap { tokens, micro_usd }))
    }

    /// Whether an attempt of `needs` on a model of `price` (unpriced: `None`) fits.
    pub fn admits(&self, needs: &Needs, price: Option<Price>) -> bool {
        if self.tokens.is_some_and(|max| needs.context_tokens > max) {
            return false;
        }
        let Some(max) = self.micro_usd else {
            return true;
        };
        // An unpriced model costs nothing Ringside knows of.
        let Some(p) = price else {
            return true;
        };
        let prompt = needs.context_tokens.saturating_sub(needs.output_tokens);
        p.micro_usd(prompt, 0, needs.output_tokens) <= max
    }
}

/// How long admission waits for the fleet's spend before deciding on this instance's alone.
const FLEET_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A request's reservation on its tenant's spend across the fleet (Redis, through the fleet's
/// quota keeper): settled by what it spent, given back if dropped unsettled.
#[derive(Debug)]
pub struct FleetHold {
    to: crossbeam_channel::Sender<TenantAsk>,
    tenant: u64,
    periods: (u64, u64),
    reserved: [u64; 4],
}

impl FleetHold {
    /// Reserve what the local reservation `local` holds, on the fleet's counters too, while
    /// each budget is under its limit fleet-wide. `Ok(None)`: the fleet did not answer in time
    /// (Redis away): this instance's own count decides.
    pub async fn reserve(
        to: &crossbeam_channel::Sender<TenantAsk>,
        tenant: u64,
        budget: &Budget,
        local: &Hold,
        now: u64,
    ) -> Result<Option<FleetHold>, Exhausted> {
        let (ask, periods) = local.reserved();
        let limits = budget.limits();
        let (reply, answer) = futures_channel::oneshot::channel();
        let asked = to.send(TenantAsk::Reserve {
            tenant,
            limits: limits.map(|(_, max)| max),
            ask,
            periods,
            reply,
        });
        if asked.is_err() {
            return Ok(None);
        }
        match crate::timer::timeout(FLEET_WAIT, answer).await {
            Ok(Ok(None)) => Ok(Some(FleetHold {
                to: to.clone(),
                tenant,
                periods,
                reserved: ask,
            })),
            Ok(Ok(Some(i))) => {
                let limit = limits[i.min(3)].0;
                let (day_end, month_end) = period_ends(now);
                let end = if limit.monthly() { month_end } else { day_end };
                Err(Exhausted {
                    limit,
                    retry_ms: end.saturating_sub(now),
                })
            }
            _ => Ok(None),
        }
    }

    /// The request spent `actual`: the fleet's counters take it in place of the reservation.
    pub fn settle(mut self, actual: Spent) {
        let add = actual.counters();
        self.correct(add);
    }

    fn correct(&mut self, add: [u64; 4]) {
        let delta: [i64; 4] =
            std::array::from_fn(|c| add[c] as i64 - std::mem::take(&mut self.reserved[c]) as i64);
        if delta != [0; 4] {
            let _ = self.to.send(TenantAsk::Settle {
                tenant: self.tenant,
                periods: self.periods,
                delta,
            });
        }
    }
}

impl Drop for FleetHold {
    fn drop(&mut self) {
        if self.reserved != [0; 4] {
            self.correct([0; 4]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(extra: &str) -> crate::http::Head {
        let raw = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{extra}\r\n");
        let limits = crate::http::HeadLimits {
            max_head_bytes: 8192,
            max_headers: 64,
        };
        crate::http::head::parse_request(raw.as_bytes(), limits)
            .expect("parses")
            .expect("whole")
            .0
    }

    #[test]
    fn a_cap_reads_from_its_headers_and_admits_what_fits() {
        assert_eq!(RequestCap::from_head(&head("")), Ok(None));
        let cap = RequestCap::from_head(&head(
            "x-ringside-max-cost-usd: 0.01\r\nx-ringside-max-tokens-budget: 500\r\n",
        ));
        let cap = cap.expect("reads").expect("a cap");
        assert_eq!((cap.tokens, cap.micro_usd), (Some(500), Some(10_000)));
        for bad in ["-1", "NaN", "inf", "a lot"] {
            let h = head(&format!("x-ringside-max-cost-usd: {bad}\r\n"));
            assert_eq!(RequestCap::from_head(&h), Err(MAX_COST_HEADER), "{bad}");
        }
        let h = head("x-ringside-max-tokens-budget: 1.5\r\n");
        assert_eq!(RequestCap::from_head(&h), Err(MAX_TOKENS_HEADER));
        // 100 prompt and 100 output tokens: $0.0002 at $1 a million, $0.2 at $1,000.
        let needs = Needs {
            context_tokens: 200,
            output_tokens: 100,
            ..Default::default()
        };
        let price = |p: f64| {
            Some(Price {
                input: p,
                output: p,
                cached_input: p,
            })
        };
        assert!(cap.admits(&needs, price(1.0)));
        assert!(!cap.admits(&needs, price(1000.0)));
        // Unpriced: only the token cap applies.
        assert!(cap.admits(&needs, None));
        let few = RequestCap {
            tokens: Some(199),
            micro_usd: None,
        };
        assert!(!few.admits(&needs, None));
    }
}

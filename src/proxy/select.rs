//! Select: the candidates of a route that may serve this request now, in strategy order with
//! the session's pinned connection first, and the first one the breaker admits. Every candidate
//! passed over is recorded with why (`Exclusion`), for the wait decision and the diagnostics.

use super::exchange::Ctx;
use crate::dialect::needs::Needs;
use crate::ids::ConnId;
use crate::resilience::breaker::Admit;
use crate::resilience::{Exclusion, Ineligible, Site};
use crate::route::{Candidate, Entry};

/// What this request has already seen of its candidates.
pub(super) struct Seen<'a> {
    /// Failed once already in this request.
    pub tried: &'a [Candidate],
    /// At their concurrency cap with `on_saturation = "reject"`.
    pub saturated: &'a [Candidate],
    /// The connection the request's exclusive lease holds.
    pub bound: Option<ConnId>,
    /// The session's pinned connection (soft affinity).
    pub pinned: Option<ConnId>,
}

/// The first usable candidate and its breaker admission (a probe claim, if half-open), or
/// `None` with every candidate's exclusion in `excluded`. `(t, unix_now)`: the monotonic and
/// the wall clock in ms (the latter 0 when no lease exists anywhere).
pub(super) fn select(
    ctx: &Ctx<'_, '_>,
    entry: &Entry,
    needs: &Needs,
    seen: &Seen<'_>,
    (t, unix_now): (u64, u64),
    excluded: &mut Vec<(Candidate, Exclusion)>,
) -> Option<(Candidate, Admit)> {
    let core = ctx.core;
    let s = &ctx.config().resilience;

    // Filter first, then let the strategy choose among the usable candidates.
    let shared = &core.shared;
    let loads = core.loads.borrow();
    let load = |c: ConnId| loads.load(c, &shared.in_flight, t);
    let mut tables = core.tables.borrow_mut();
    let mut selector = ctx.generation.selector.borrow_mut();
    let ordered = ctx.generation.routes.candidates_where(
        entry,
        crate::route::Reach::of(ctx.admitted.endpoint),
        &mut selector,
        &load,
        |c| {
            let why = if seen.tried.contains(&c) {
                Some(Exclusion::Tried)
            } else if seen.saturated.contains(&c) {
                Some(Exclusion::Ineligible(Ineligible::Saturated))
            } else if ctx
                .admitted
                .client
                .as_ref()
                .is_some_and(|k| !k.may_use(c.connection))
            {
                Some(Exclusion::Ineligible(Ineligible::NotAllowedForKey))
            } else if let Err(why) = entry.targets[c.target].caps.admits(needs) {
                Some(Exclusion::Ineligible(why))
            } else if !translatable(ctx, entry, c) {
                Some(Exclusion::Ineligible(Ineligible::Untranslatable))
            } else if !super::bill::within_cap(ctx, entry, needs, c) {
                Some(Exclusion::Ineligible(Ineligible::OverRequestBudget))
            } else if let Some(e) = tables.blocked(s, site(ctx, entry, c, t), t) {
                Some(e)
            } else if seen.bound == Some(c.connection) {
                None
            } else if let Some(until) = shared.leases.leased_until(c.connection, unix_now) {
                Some(Exclusion::Leased {
                    ms: until - unix_now,
                })
            } else if seen.bound.is_some() {
                // Usable and free, but not this request's lease: a place to move to.
                Some(Exclusion::Ineligible(Ineligible::NotThisLease))
            } else {
                None
            };
            match why {
                Some(e) => {
                    excluded.push((c, e));
                    false
                }
                None => true,
            }
        },
    );
    let pinned_first = seen
        .pinned
        .and_then(|pc| ordered.iter().position(|c| c.connection == pc));
    let order = pinned_first
        .into_iter()
        .chain((0..ordered.len()).filter(|&k| Some(k) != pinned_first));
    // A half-open breaker's one real request goes where success is likely: a key that has not
    // failed lately goes before one that has (the key that opened it is tried last).
    let mut doubtful: Option<Candidate> = None;
    for k in order {
        let c = ordered[k];
        if doubtful.is_none() && ordered.len() > 1 && doubtful_probe(ctx, &tables, c) {
            doubtful = Some(c);
            continue;
        }
        match tables.admit(s, &shared.probes, site(ctx, entry, c, t), t) {
            Ok(admit) => return Some((c, admit)),
            Err(e) => excluded.push((c, e)),
        }
    }
    let c = doubtful?;
    match tables.admit(s, &shared.probes, site(ctx, entry, c, t), t) {
        Ok(admit) => Some((c, admit)),
        Err(e) => {
            excluded.push((c, e));
            None
        }
    }
}

/// Whether `c` would be a half-open breaker's probe with a key that failed lately.
fn doubtful_probe(ctx: &Ctx<'_, '_>, tables: &crate::resilience::Tables, c: Candidate) -> bool {
    let p = ctx.config().provider_of(c.connection).unwrap_or(0);
    tables
        .breakers
        .get(p)
        // (An open breaker whose time is up half-opens when it is asked.)
        .is_some_and(|b| {
            use crate::resilience::breaker::BreakerState::{HalfOpen, Open};
            matches!(b.state, Open | HalfOpen)
        })
        && tables
            .conns
            .get(c.connection.index())
            .is_some_and(|st| st.has_error())
}

/// Where an attempt on `c` picked at `t` would go: its provider, connection, model and the
/// tenant (its send time is set when it goes).
pub(super) fn site<'a>(ctx: &Ctx<'_, '_>, entry: &'a Entry, c: Candidate, t: u64) -> Site<'a> {
    Site {
        provider: ctx.config().provider_of(c.connection).unwrap_or(0),
        conn: c.connection,
        model: &entry.targets[c.target].model,
        tenant: ctx.tenant,
        sent: t,
        probe: false,
    }
}

/// Whether a candidate of another API than the client's can take the request translated (a
/// candidate of the client's own API always can).
fn translatable(ctx: &Ctx<'_, '_>, entry: &Entry, c: Candidate) -> bool {
    let Some(session) = ctx.translation.as_deref() else {
        return true;
    };
    let dialect = ctx.generation.routes.dialect_of(&entry.targets[c.target]);
    crate::translate::session::target_api(ctx.admitted.endpoint, dialect)
        .is_none_or(|api| session.admits(api))
}

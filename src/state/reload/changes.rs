//! What a reload changed, by name: connections, providers and routes added, removed or
//! changed. Credentials are compared by fingerprint and never shown.

use crate::config::Config;
use crate::ids::ConnId;
use crate::state::generation::Gen;
use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    pub connections_added: Vec<String>,
    pub connections_removed: Vec<String>,
    /// Same `provider/connection`, new key: a new credential, its state starts clean.
    pub keys_changed: Vec<String>,
    /// Same identity, other settings (models, weight, priority, flow limits): state kept.
    pub connections_changed: Vec<String>,
    pub providers_added: Vec<String>,
    pub providers_removed: Vec<String>,
    pub providers_changed: Vec<String>,
    pub routes_added: Vec<String>,
    pub routes_removed: Vec<String>,
    pub routes_changed: Vec<String>,
    /// Other sections whose values differ (resilience, limits, stream, clients, ...).
    pub sections_changed: Vec<&'static str>,
}

impl Changes {
    pub fn between(old: &Gen, new: &Gen) -> Changes {
        let mut c = Changes::default();
        connections(&mut c, old, new);
        providers(&mut c, &old.config, &new.config);
        routes(&mut c, &old.config, &new.config);
        sections(&mut c, &old.config, &new.config);
        c
    }

    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

fn connections(out: &mut Changes, old: &Gen, new: &Gen) {
    let label = |g: &Gen, i: usize| {
        let (p, c) = &g.conn_labels[i];
        format!("{p}/{c}")
    };
    for (i, (p, _)) in new.conn_labels.iter().enumerate() {
        if p.is_empty() {
            continue;
        }
        let conn = ConnId::new(i);
        let name = label(new, i);
        let same_slot = old.conn_labels.get(i).is_some_and(|(op, _)| !op.is_empty())
            && !new.fresh_conns.contains(&conn);
        if same_slot {
            let (Some((_, was)), Some((_, now))) =
                (old.config.connection(conn), new.config.connection(conn))
            else {
                continue;
            };
            if format!("{was:?}") != format!("{now:?}") {
                out.connections_changed.push(name);
            }
        } else if old.generation_has(&name) {
            out.keys_changed.push(name);
        } else {
            out.connections_added.push(name);
        }
    }
    for (i, (p, _)) in old.conn_labels.iter().enumerate() {
        let name = label(old, i);
        if !p.is_empty() && new.conn_by_label(&name).is_none() {
            out.connections_removed.push(name);
        }
    }
}

impl Gen {
    fn generation_has(&self, label: &str) -> bool {
        self.conn_by_label(label).is_some()
    }
}

/// A provider without its connections, for comparing its own settings.
fn bare(p: &crate::config::Provider) -> String {
    let mut p = p.clone();
    p.connections.clear();
    format!("{p:?}")
}

fn providers(out: &mut Changes, old: &Config, new: &Config) {
    for p in &new.providers {
        match old.providers.iter().find(|o| o.id == p.id) {
            None => out.providers_added.push(p.id.clone()),
            Some(o) if bare(o) != bare(p) => out.providers_changed.push(p.id.clone()),
            Some(_) => {}
        }
    }
    for o in &old.providers {
        if !new.providers.iter().any(|p| p.id == o.id) {
            out.providers_removed.push(o.id.clone());
        }
    }
}

fn routes(out: &mut Changes, old: &Config, new: &Config) {
    for r in &new.routes {
        match old.routes.iter().find(|o| o.name == r.name) {
            None => out.routes_added.push(r.name.clone()),
            Some(o) if format!("{o:?}") != format!("{r:?}") => {
                out.routes_changed.push(r.name.clone())
            }
            Some(_) => {}
        }
    }
    for o in &old.routes {
        if !new.routes.iter().any(|r| r.name == o.name) {
            out.routes_removed.push(o.name.clone());
        }
    }
}

fn sections(out: &mut Changes, old: &Config, new: &Config) {
    let mut check = |name: &'static str, a: String, b: String| {
        if a != b {
            out.sections_changed.push(name);
        }
    };
    check(
        "limits",
        format!("{:?}", old.limits),
        format!("{:?}", new.limits),
    );
    check(
        "upstream",
        format!("{:?}", old.upstream),
        format!("{:?}", new.upstream),
    );
    check(
        "stream",
        format!("{:?}", old.stream),
        format!("{:?}", new.stream),
    );
    check(
        "clients",
        format!("{:?}", old.clients.list),
        format!("{:?}", new.clients.list),
    );
    // Per-provider policies are by slot and follow the providers; the rest of resilience:
    let rest = |c: &Config| {
        let r = &c.resilience;
        format!(
            "{:?}{:?}{:?}{:?}{:?}{}{}{}",
            r.lockout,
            r.rate_limit_scope,
            r.operator_rules,
            r.restate,
            r.gate_enabled,
            r.deadline_ms,
            r.max_wait_ms,
            r.jitter_pct
        )
    };
    check("resilience", rest(old), rest(new));
    // The admin token is compared by its fingerprint; it is never put in the report.
    let server = |c: &Config| {
        let token = c
            .server
            .admin_token
            .as_ref()
            .map(|t| crate::secret::digest(t.expose().as_bytes()));
        format!(
            "{:?}{:?}{token:?}{:?}",
            c.server.shutdown_grace, c.server.drain_delay, c.server.admin_hosts
        )
    };
    check("server (drain, grace, admin)", server(old), server(new));
    check(
        "affinity and leases",
        format!("{}{}", old.affinity_ttl_ms, old.lease_ttl_ms),
        format!("{}{}", new.affinity_ttl_ms, new.lease_ttl_ms),
    );
}

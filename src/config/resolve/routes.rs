//! `[[routes]]`: names, strategies (parsed once into [`Strategy`]), targets that name known
//! providers and connections.

use super::super::problems::Problems;
use super::super::schema::FileConfig;
use super::super::*;
use std::collections::HashSet;

/// Check every route against the providers and resolve it into a [`RouteSpec`].
pub(in crate::config) fn routes(
    p: &mut Problems,
    file: &FileConfig,
    providers: &[Provider],
) -> Vec<RouteSpec> {
    let mut route_names = HashSet::new();
    for (i, r) in file.routes.iter().enumerate() {
        let at = format!("routes[{i}]");
        if r.name.is_empty() || r.name.len() > 256 {
            p.add(format!("{at}.name"), "must be 1-256 characters");
        }
        if !route_names.insert(r.name.clone()) {
            p.add(
                format!("{at}.name"),
                format!("duplicate route `{}`", r.name),
            );
        }
        if Strategy::parse(&r.strategy).is_none() {
            p.add(
                format!("{at}.strategy"),
                format!(
                    "`{}` is not one of {}",
                    r.strategy,
                    Strategy::NAMES.join(", ")
                ),
            );
        }
        if r.targets.is_empty() {
            p.add(format!("{at}.targets"), "a route needs at least one target");
        }
        for (j, t) in r.targets.iter().enumerate() {
            let tat = format!("{at}.targets[{j}]");
            match providers.iter().find(|pr| pr.id == t.provider) {
                None => p.add(
                    format!("{tat}.provider"),
                    format!("no provider `{}`", t.provider),
                ),
                Some(pr) => {
                    if let Some(c) = &t.connection
                        && !pr.connections.iter().any(|pc| &pc.id == c)
                    {
                        p.add(
                            format!("{tat}.connection"),
                            format!("provider `{}` has no connection `{c}`", t.provider),
                        );
                    }
                }
            }
            if t.model.is_empty() {
                p.add(format!("{tat}.model"), "must not be empty");
            }
        }
    }

    file.routes
        .iter()
        .enumerate()
        .map(|(i, r)| RouteSpec {
            strategy: Strategy::parse(&r.strategy).unwrap_or(Strategy::Priority),
            name: r.name.clone(),
            targets: r.targets.clone(),
            deadline_ms: r.deadline_ms,
            cross_dialect: r.cross_dialect,
            keepalive_ms: r
                .keepalive_ms
                .map(|v| super::sections::keepalive_ms(p, &format!("routes[{i}].keepalive_ms"), v)),
        })
        .collect()
}

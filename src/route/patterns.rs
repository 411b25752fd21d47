//! Routes named by a pattern (`claude-*`, `*` for the default route): a model name no route,
//! plain model or `provider/model` has is matched against them, and a target whose model is
//! `*` gets the client's own.

use super::{Config, Entry, Resolved, RouteTable, make_target_for};

impl RouteTable {
    /// A pattern route matched `model`: as configured, or with `model` for its targets whose
    /// model is `*` (the client's own, passed on).
    pub(super) fn matched<'a>(&'a self, cfg: &Config, e: &'a Entry, model: &str) -> Resolved<'a> {
        if !e.targets.iter().any(|t| t.model == "*") {
            return Resolved::Configured(e);
        }
        let mut made = e.clone();
        for t in &mut made.targets {
            if t.model == "*" {
                let pinned = cfg.providers[t.provider]
                    .connections
                    .iter()
                    .find(|c| t.connections.len() == 1 && c.index == t.connections[0])
                    .filter(|_| t.pinned)
                    .map(|c| c.id.as_str());
                let caps = t.caps.clone();
                *t = make_target_for(cfg, t.provider, model, pinned, (t.slot, false), true);
                t.caps = caps;
                if made.cross_dialect && made.dialects.count_ones() > 1 {
                    super::eligibility::fill_from_known(&mut t.caps, model, &cfg.models);
                }
            }
        }
        Resolved::Made(Box::new(made))
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters (none included).
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for p in middle {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

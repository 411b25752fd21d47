//! The environment's values that are read without failing the start, checked: `serve` logs a
//! warning for each one it cannot use, `check` prints it on stderr.

use crate::env_vars::*;

/// A number the variable holds, if it is one (finite, not negative).
fn number(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
}

/// What is wrong with the environment's values that are read without failing the start: one
/// line per variable whose value is ignored, saying what is used instead.
pub(super) fn warnings(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(v) = env(LOG).filter(|v| !crate::log::spec_is_valid(v)) {
        out.push(format!(
            "{LOG}=`{v}` is not a log level (error, warn, info, debug, off): info is used"
        ));
    }
    let numbers = [
        RATE_LIMIT_MAX_WAIT_MS,
        RATE_LIMIT_EXECUTION_MAX_WAIT_MS,
        RATE_LIMIT_MAX_QUEUE_DEPTH,
    ];
    let breakers = [BREAKER_OAUTH, BREAKER_API_KEY]
        .into_iter()
        .flat_map(|p| BREAKER_SUFFIXES.map(|s| format!("{p}{s}")));
    for name in numbers.map(String::from).into_iter().chain(breakers) {
        if let Some(v) = env(&name).filter(|v| number(v).is_none()) {
            out.push(format!(
                "{name}=`{v}` is not a number >= 0: ignored, the default is used"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_values_are_warned_about() {
        let env = |n: &str| match n {
            LOG => Some("bogus".to_string()),
            RATE_LIMIT_MAX_WAIT_MS => Some("lots".to_string()),
            "RINGSIDE_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS" => Some("-1".to_string()),
            RATE_LIMIT_MAX_QUEUE_DEPTH => Some("4".to_string()),
            _ => None,
        };
        let w = warnings(&env);
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(w[0].contains("RINGSIDE_LOG=`bogus`"), "{w:#?}");
        assert!(w.iter().any(|l| l.contains("OAUTH_COOLDOWN_MS")), "{w:#?}");
        let fine = |n: &str| (n == LOG).then(|| "ringside=debug".to_string());
        assert!(warnings(&fine).is_empty());
    }
}

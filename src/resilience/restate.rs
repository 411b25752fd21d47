//! Status restatement: some relays answer a temporary quota wall with 403/400, which clients
//! treat as permanent. Before classification such answers are restated (by default to 429 with
//! a 60 s hint) so that both Ringside and the client see them as worth retrying. Unlike the
//! reference, this also applies to an error event inside a 200 stream seen before commit.

#[derive(Clone, Debug, PartialEq)]
pub struct RestateRule {
    pub id: String,
    /// Provider id; `None` for every provider.
    pub provider: Option<String>,
    pub from: Vec<u16>,
    pub to: u16,
    /// Lower-case substrings; any one triggers the rule.
    pub markers: Vec<String>,
    /// Any of these vetoes it (a real permission error stays what it is).
    pub exclude: Vec<String>,
    pub retry_after_ms: u64,
}

/// The built-in rule: quota exhaustion misreported as 403/400 by new-api style relays.
pub fn builtin() -> RestateRule {
    RestateRule {
        id: "relay-quota-misstatus".into(),
        provider: None,
        from: vec![403, 400],
        to: 429,
        markers: vec!["额度不足".into(), "额度已用尽".into()],
        exclude: vec!["无权访问".into(), "无效的令牌".into()],
        retry_after_ms: 60_000,
    }
}

/// What a matching rule changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restated {
    pub rule: String,
    pub from: u16,
    pub to: u16,
    /// The hint to use when the upstream gave none.
    pub default_retry_after_ms: u64,
}

/// First matching rule for this answer. `lower` is the body, lower-cased. An in-band stream
/// error is passed with status 200 and matches rules listing 200 or any 4xx they restate.
pub fn apply(rules: &[RestateRule], provider: &str, status: u16, lower: &str) -> Option<Restated> {
    if lower.trim().is_empty() {
        return None;
    }
    rules.iter().find_map(|r| {
        let provider_ok = r.provider.as_deref().is_none_or(|p| p == provider);
        // An in-band error inside a 200 stream is the same misstatement in another envelope.
        let status_ok = r.from.contains(&status) || status == 200;
        (provider_ok
            && status_ok
            && status != r.to
            && r.markers.iter().any(|m| lower.contains(m.as_str()))
            && !r.exclude.iter().any(|m| lower.contains(m.as_str())))
        .then(|| Restated {
            rule: r.id.clone(),
            from: status,
            to: r.to,
            default_retry_after_ms: r.retry_after_ms,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(provider: &str, status: u16, body: &str) -> Option<Restated> {
        apply(&[builtin()], provider, status, &body.to_lowercase())
    }

    #[test]
    fn reference_cases() {
        // R1: 403 + quota text -> 429 with the 60 s default.
        let r = run("agentrouter", 403, "用户额度不足, 剩余额度: ¥-0.013362").unwrap();
        assert_eq!((r.from, r.to, r.default_retry_after_ms), (403, 429, 60_000));
        assert_eq!(r.rule, "relay-quota-misstatus");
        // R2: a real permission error stays.
        assert_eq!(run("agentrouter", 403, "无权访问模型 额度不足"), None);
        // R3: marker inside a JSON body.
        assert!(
            run(
                "x",
                403,
                r#"{"error":{"message":"Forbidden","detail":"额度不足"}}"#
            )
            .is_some()
        );
        // R5: 400 too.
        assert_eq!(run("x", 400, "额度不足").map(|r| r.to), Some(429));
        // R6: an invalid key is untouched.
        assert_eq!(run("x", 403, "Invalid API key"), None);
        // R8: already 429.
        assert_eq!(run("x", 429, "额度不足"), None);
        // Other statuses are not restated; an in-band stream error is.
        assert_eq!(run("x", 500, "额度不足"), None);
        assert_eq!(run("x", 200, "额度不足").map(|r| r.from), Some(200));
        assert_eq!(run("x", 403, "  "), None);
    }

    #[test]
    fn provider_scoped_rules() {
        let mut r = builtin();
        r.provider = Some("relay".into());
        assert!(apply(std::slice::from_ref(&r), "relay", 403, "额度不足").is_some());
        assert!(apply(std::slice::from_ref(&r), "openai", 403, "额度不足").is_none());
    }
}

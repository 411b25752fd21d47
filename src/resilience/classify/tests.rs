use super::*;

fn judge(status: u16, body: &str) -> Verdict {
    judge_for(status, body, b"")
}

/// `request`: the client's body, which the provider may quote.
fn judge_for(status: u16, body: &str, request: &[u8]) -> Verdict {
    let none = |_: &str| None;
    let lower = body.to_lowercase();
    let a = Answer {
        provider: "p",
        status,
        lower: &lower,
        get: &none,
        hint: None,
        request,
    };
    classify(&[], &builtin_rules(), &a)
}

fn answer<'a>(provider: &'a str, get: &'a dyn Fn(&str) -> Option<String>) -> Answer<'a> {
    Answer {
        provider,
        status: 429,
        lower: "",
        get,
        hint: None,
        request: b"",
    }
}

#[test]
fn structure_may_set_lasting_states_and_words_alone_may_not() {
    // OpenAI's own quota answer: the code says it.
    let v = judge(
        429,
        r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
    );
    assert_eq!((v.reason, v.lasting), (Reason::CreditsExhausted, true));
    // Anthropic's credit answer is words in an invalid_request_error: named, not lasting.
    let v = judge(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#,
    );
    assert_eq!((v.reason, v.lasting), (Reason::CreditsExhausted, false));
    let v = judge(403, "Your account has been suspended");
    assert_eq!((v.reason, v.lasting), (Reason::Banned, false));
    // Transient reasons named by words are fine as they are.
    assert!(judge(400, "too many requests, slow down").lasting);
}

#[test]
fn words_the_client_sent_and_the_provider_quoted_are_not_evidence() {
    // OpenAI quoting an invalid enum value.
    let req = br#"{"model":"m","messages":[{"role":"insufficient_quota","content":"x"}]}"#;
    let v = judge_for(
        400,
        r#"{"error":{"message":"Invalid value: 'insufficient_quota'. Supported values are: 'system', 'assistant', 'user', 'function', and 'tool'.","type":"invalid_request_error","param":"messages[0].role","code":"invalid_value"}}"#,
        req,
    );
    assert_eq!(
        (v.reason, v.scope, v.retryable),
        (Reason::BadRequest, Scope::Request, false)
    );
    // Anthropic quoting a bad role.
    let req =
        br#"{"model":"m","messages":[{"role":"Account has been deactivated","content":"x"}]}"#;
    let v = judge_for(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.role: Input should be 'user' or 'assistant' (got 'account has been deactivated')"}}"#,
        req,
    );
    assert_eq!(v.reason, Reason::BadRequest);
    // Gemini's OpenAI-compatible endpoint quoting a model name.
    let req = br#"{"model":"out of credits","messages":[]}"#;
    let v = judge_for(
        404,
        r#"[{"error":{"code":404,"message":"models/out of credits is not found for API version v1main","status":"NOT_FOUND"}}]"#,
        req,
    );
    assert_ne!(v.reason, Reason::CreditsExhausted);
    // The same words not in the request still count (as a short state).
    let v = judge_for(403, "Your account has been suspended", b"{}");
    assert_eq!(v.reason, Reason::Banned);
}

#[test]
fn statuses_without_markers() {
    assert_eq!(judge(429, "slow down").reason, Reason::RateLimited);
    assert_eq!(judge(401, "nope").reason, Reason::AuthFailure);
    assert_eq!(judge(403, "forbidden").reason, Reason::Rejected);
    assert_eq!(judge(402, "").reason, Reason::CreditsExhausted);
    assert_eq!(judge(500, "").reason, Reason::ServerError);
    assert_eq!(judge(529, "").reason, Reason::Overloaded);
    let v = judge(400, "bad field");
    assert_eq!(
        (v.reason, v.scope, v.retryable),
        (Reason::BadRequest, Scope::Request, false)
    );
    // A bare 404 is no evidence that the model is missing (a wrong path answers the same):
    // the key cools briefly, the request moves on, no model is locked.
    for body in ["", "<html>404 Not Found</html>", r#"{"error":"Not Found"}"#] {
        let v = judge(404, body);
        assert_eq!(
            (v.reason, v.scope, v.retryable),
            (Reason::NotFound, Scope::Connection, true),
            "{body}"
        );
    }
    // With evidence it is the model's.
    let v = judge(
        404,
        r#"{"error":{"code":"model_not_found","message":"nope"}}"#,
    );
    assert_eq!((v.reason, v.scope), (Reason::ModelNotFound, Scope::Model));
}

#[test]
fn body_markers_beat_status() {
    let v = judge(
        429,
        r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#,
    );
    assert_eq!(v.reason, Reason::CreditsExhausted);
    assert_eq!(
        judge(200, r#"{"type":"overloaded_error"}"#).reason,
        Reason::Overloaded
    );
    let v = judge(400, "This model's maximum context length is 8192 tokens");
    assert_eq!((v.reason, v.retryable), (Reason::ContextOverflow, true));
    assert_eq!(
        judge(403, "Your account has been suspended").reason,
        Reason::Banned
    );
    assert_eq!(
        judge(400, "too many requests, slow down").reason,
        Reason::RateLimited
    );
    assert_eq!(
        judge(429, "用户额度不足, 剩余额度: ¥-0.01").reason,
        Reason::QuotaExhausted
    );
    assert_eq!(judge(403, "无权访问该资源").reason, Reason::AuthFailure);
    assert_eq!(
        judge(404, "The model `x` does not exist").scope,
        Scope::Model
    );
}

#[test]
fn operator_rules_come_first_and_filter_by_provider_and_header() {
    let op = Rule {
        id: "gw-daily".into(),
        provider: Some("gw".into()),
        statuses: vec![429],
        markers: vec![],
        codes: vec![],
        header_markers: vec![("x-quota-kind".into(), "daily".into())],
        exclude: vec![],
        reason: Reason::QuotaExhausted,
        scope: Scope::Provider,
        cooldown_ms: Some(600_000),
    };
    let h = |n: &str| (n == "x-quota-kind").then(|| "Daily".to_string());
    let none = |_: &str| None;
    let b = builtin_rules();
    let v = classify(std::slice::from_ref(&op), &b, &answer("gw", &h));
    assert_eq!(
        (
            v.reason,
            v.scope,
            v.cooldown_ms,
            v.rule.as_deref(),
            v.lasting
        ),
        (
            Reason::QuotaExhausted,
            Scope::Provider,
            Some(600_000),
            Some("gw-daily"),
            true
        )
    );
    let v = classify(std::slice::from_ref(&op), &b, &answer("other", &h));
    assert_eq!(v.reason, Reason::RateLimited);
    let v = classify(std::slice::from_ref(&op), &b, &answer("gw", &none));
    assert_eq!(v.reason, Reason::RateLimited);
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/errors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn google_resource_exhausted_is_a_quota_wall_not_spent_credits() {
    let body = fixture("gemini_resource_exhausted.json");
    let v = judge(429, &body);
    assert_eq!(v.reason, Reason::QuotaExhausted, "{v:?}");
    assert_eq!(v.scope, Scope::Connection);
    assert_eq!(v.rule.as_deref(), Some("resource_exhausted"));
    // Its RetryInfo is a retry hint.
    let hint = crate::resilience::hints::from_text(&body, 0).map(|h| h.ms);
    assert_eq!(hint, Some(37_000));
}

#[test]
fn a_missing_stored_object_is_the_request_s_not_the_model_s() {
    for name in [
        "openai_response_not_found.json",
        "openai_file_not_found.json",
    ] {
        let v = judge(404, &fixture(name));
        assert_eq!(v.scope, Scope::Request, "{name}: {v:?}");
        assert_ne!(v.reason, Reason::ModelNotFound, "{name}");
    }
    // A model that does not exist still locks the model out.
    let v = judge(
        404,
        r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#,
    );
    assert_eq!((v.reason, v.scope), (Reason::ModelNotFound, Scope::Model));
}

#[test]
fn status_529_is_overload() {
    let v = judge(529, &fixture("anthropic_overloaded_529.json"));
    assert_eq!(v.reason, Reason::Overloaded);
    assert!(v.retryable);
}

#[test]
fn an_aggregator_s_error_is_judged_by_the_upstream_s_status() {
    let body = fixture("openrouter_provider_error.json").to_lowercase();
    assert_eq!(aggregated_status(&body), Some(529));
    let v = judge(529, &body);
    assert_eq!(v.reason, Reason::Overloaded);
    // Without metadata, the code field is not taken for a status.
    assert_eq!(
        aggregated_status(r#"{"error":{"code":429,"message":"x"}}"#),
        None
    );
}

#[test]
fn an_in_band_error_stands_for_the_status_its_type_names() {
    let cases = [
        (
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}}"#,
            429,
        ),
        (
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            529,
        ),
        (
            r#"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#,
            500,
        ),
        (
            r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#,
            429,
        ),
        (
            r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
            500,
        ),
        // Words alone are not a type: the neutral stand-in.
        (r#"{"error":{"message":"rate limit of the relay"}}"#, 502),
        ("not json at all", 502),
    ];
    for (body, status) in cases {
        assert_eq!(in_band_status(&body.to_lowercase()), status, "{body}");
    }
    // So an in-band rate-limit error is judged as the 429 it stands for.
    let lower = cases[0].0.to_lowercase();
    let v = judge(in_band_status(&lower), &lower);
    assert_eq!(v.reason, Reason::RateLimited);
}

/// A refusal on the way to the provider (its egress proxy, its TLS) holds for every key of it:
/// all cool at once, the wait is not waited out inside a request, another provider serves.
#[test]
fn a_refusal_on_the_way_cools_every_key_of_its_provider_and_is_not_waited_for() {
    use crate::ids::ConnId;
    use crate::resilience::{Exclusion, Probes, Site, Tables, breaker::Admit};
    let s = crate::resilience::tests::settings(2, 2);
    let site = |provider, conn| Site {
        provider,
        conn: ConnId::new(conn),
        model: "m",
        tenant: 0,
        sent: 0,
        probe: false,
    };
    for reason in [Reason::EgressRefused, Reason::TlsRefused] {
        let v = refused_on_the_way(reason);
        assert!(v.retryable, "another provider may serve");
        assert!(reason.refused_on_the_way() && !reason.trips_breaker());
        assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        let (mut t, probes) = (Tables::new(2, 4), Probes::new(2));
        t.on_failure(&s, site(0, 0), &v, 0, &mut |_| {});
        let e = t
            .check(&s, &probes, site(0, 1), 1)
            .expect_err("its sibling cools");
        assert!(
            matches!(e, Exclusion::Cooling { reason: Some(r), .. } if r == reason),
            "{e:?}"
        );
        assert!(!e.waitable(), "the refusal would not change");
        assert_eq!(t.check(&s, &probes, site(1, 2), 1), Ok(Admit::Yes));
    }
}

/// nginx in front of a private endpoint answers a missing client certificate with an HTML 400:
/// the provider's certificate setting, not the client's request.
#[test]
fn an_edges_page_about_the_client_certificate_is_a_refusal_on_the_way() {
    let page = "<html>\r\n<head><title>400 No required SSL certificate was sent</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>No required SSL certificate was sent</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
    let v = judge(400, page);
    assert_eq!(v.reason, Reason::TlsRefused);
    assert_eq!(v.scope, Scope::Provider);
    assert!(v.retryable, "another provider may serve");
    // The client's own prompt quoting the words is not it.
    let quoted = judge_for(
        400,
        r#"{"error":{"message":"Invalid value: 'no required ssl certificate was sent'"}}"#,
        br#"{"messages":[{"content":"no required ssl certificate was sent"}]}"#,
    );
    assert_ne!(quoted.reason, Reason::TlsRefused);
}

/// No room on the provider's HTTP/2 connections is the provider's: every key shares them.
#[test]
fn no_room_on_the_providers_connections_cools_every_key() {
    let v = super::no_room();
    assert_eq!(v.scope, Scope::Provider);
    assert_eq!(v.reason, Reason::Timeout);
    assert!(v.retryable, "another provider may serve");
    assert!(v.reason.trips_breaker());
}

use super::*;
use std::time::Instant;

static JUDGING: std::sync::LazyLock<crate::resilience::settings::Settings> =
    std::sync::LazyLock::new(Default::default);

fn relay_with(hard_deadline: Option<Instant>, stream: &crate::sse::StreamSettings) -> Relay<'_> {
    Relay {
        endpoint: crate::dialect::Endpoint::ChatCompletions,
        request_id: "r",
        route: "m",
        connection_label: Some("p/a"),
        attempts: "1",
        secrets: Default::default(),
        client_keep_alive: true,
        client_http11: true,
        head_sent: false,
        budget_warning: None,
        coalesce: stream.coalesce_events,
        idle_timeout_ms: 600_000,
        send_timeout_ms: 60_000,
        hard_deadline,
        stream,
        client_fd: -1,
        judging: &JUDGING,
    }
}

#[test]
fn the_next_read_waits_for_whichever_limit_ends_first() {
    let t0 = Instant::now();
    let mut st = crate::sse::StreamSettings {
        readiness_timeout_ms: 30_000,
        total_timeout_ms: 0,
        ..Default::default()
    };
    // A plain body: idle silence only.
    let r = relay_with(None, &st);
    assert_eq!(
        next_wait(&r, None, t0, t0),
        (Duration::from_secs(600), RelayFailure::IdleTimeout)
    );
    // A stream with nothing useful yet: its readiness timeout.
    assert_eq!(
        next_wait(&r, Some(false), t0, t0 + Duration::from_secs(10)),
        (Duration::from_secs(20), RelayFailure::ReadinessTimeout)
    );
    // Once useful output came, readiness no longer applies; a total time does.
    st.total_timeout_ms = 120_000;
    let r = relay_with(None, &st);
    assert_eq!(
        next_wait(&r, Some(true), t0, t0 + Duration::from_secs(100)),
        (Duration::from_secs(20), RelayFailure::TotalTimeout)
    );
    // The execution budget ends sooner than anything else.
    let r = relay_with(Some(t0 + Duration::from_secs(5)), &st);
    assert_eq!(
        next_wait(&r, Some(false), t0, t0),
        (Duration::from_secs(5), RelayFailure::ExecutionTimeout)
    );
    // Past it: no wait at all.
    assert_eq!(
        next_wait(&r, Some(true), t0, t0 + Duration::from_secs(9)).0,
        Duration::ZERO
    );
}

#[test]
fn events_are_joined_only_when_asked_or_busy_and_never_the_head_or_the_end() {
    use crate::http::nowait::Push;
    use crate::sse::Coalesce;
    // A thread of its own: the core's load is its thread's state.
    std::thread::spawn(|| {
        let mut st = crate::sse::StreamSettings::default();
        assert_eq!(st.coalesce_events, Coalesce::WhenBusy, "auto by default");
        for mode in [Coalesce::WhenBusy, Coalesce::Never] {
            st.coalesce_events = mode;
            let r = relay_with(None, &st);
            for (first, ends) in [(true, false), (false, false), (false, true), (true, true)] {
                assert_eq!(push_for(&r, first, ends), Push::Now, "{mode:?}, quiet core");
            }
        }
        st.coalesce_events = Coalesce::Always;
        let r = relay_with(None, &st);
        assert_eq!(push_for(&r, false, false), Push::WithNext);
        assert_eq!(
            push_for(&r, true, false),
            Push::Now,
            "the head goes at once"
        );
        assert_eq!(push_for(&r, false, true), Push::Now, "the end goes at once");
        // The core turns busy: auto joins the middle writes as `true` does; `false` does not.
        for _ in 0..crate::core_load::BUSY_COUNT {
            let tick = crate::core_load::late_tick(Duration::from_millis(10));
            crate::core_load::observe(tick, crate::core_load::Marks::SHIPPED);
        }
        for (mode, middle) in [
            (Coalesce::WhenBusy, Push::WithNext),
            (Coalesce::Never, Push::Now),
        ] {
            st.coalesce_events = mode;
            let r = relay_with(None, &st);
            assert_eq!(push_for(&r, false, false), middle, "{mode:?}, busy core");
            assert_eq!(push_for(&r, true, false), Push::Now);
            assert_eq!(push_for(&r, false, true), Push::Now);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_client_key_s_choice_wins_over_the_instance_s() {
    use crate::sse::Coalesce::{Always, Never, WhenBusy};
    let client = |c| crate::clients::Client {
        id: "k".into(),
        scopes: Vec::new(),
        allowed: None,
        tenant: 0,
        priority: 5,
        coalesce_events: c,
    };
    let mut st = crate::sse::StreamSettings::default();
    assert_eq!(coalesce_for(None, &st), WhenBusy, "auto by default");
    assert_eq!(
        coalesce_for(Some(&client(Some(Always))), &st),
        Always,
        "a batch key joins"
    );
    assert_eq!(
        coalesce_for(Some(&client(None)), &st),
        WhenBusy,
        "a key without a choice follows"
    );
    st.coalesce_events = Always;
    assert_eq!(
        coalesce_for(None, &st),
        Always,
        "open mode follows the instance"
    );
    assert_eq!(coalesce_for(Some(&client(None)), &st), Always);
    assert_eq!(
        coalesce_for(Some(&client(Some(Never))), &st),
        Never,
        "an interactive key opts out"
    );
}

/// What a committed event stream keeps of an SDK's request head: its first line and the two
/// headers the access log reads, in a head a fraction of the size.
#[test]
fn a_stream_s_request_head_keeps_what_the_log_reads() {
    let mut text = String::from("POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for i in 0..12 {
        text.push_str(&format!("x-stainless-header-{i}: {}\r\n", "v".repeat(30)));
    }
    text.push_str("User-Agent: OpenAI/Python 1.99.9\r\nX-Forwarded-For: 203.0.113.7\r\n");
    text.push_str("authorization: Bearer sk-not-kept\r\ncontent-length: 2\r\n\r\n");
    let (mut head, _) = crate::http::head::parse_request(text.as_bytes(), Default::default())
        .expect("parses")
        .expect("whole");
    let before = head.raw().len();
    stream::let_go_of_request_head(&mut head);
    assert!(
        head.raw().len() < before / 3,
        "{} of {before}",
        head.raw().len()
    );
    assert_eq!(head.get_str("user-agent"), Some("OpenAI/Python 1.99.9"));
    assert_eq!(head.get_str("x-forwarded-for"), Some("203.0.113.7"));
    assert_eq!(
        (head.method(), head.path()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        head.get_str("authorization"),
        None,
        "the credential goes too"
    );
    assert_eq!(head.get_str("x-stainless-header-3"), None);
}

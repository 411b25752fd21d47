//! The reference's tests for the weekly limit reset (behaviour-spec §15.5, §15.6), on a manual
//! clock.

use super::reset::{Memo, Offer, Outcome};

/// Now, in ms.
const NOW: u64 = 1_800_000_000_000;

fn offer(eligible: bool, arm: &str, available: bool) -> serde_json::Value {
    serde_json::json!({"juniper_tide": {"eligible": eligible, "arm": arm, "available": available}})
}

#[test]
fn the_usage_status_says_whether_the_reset_is_offered() {
    let o = Offer::read(&offer(true, "reset", true)).expect("offer");
    assert_eq!((o.eligible, o.resets_per_week), (true, 1));
    assert_eq!(
        Offer::read(&serde_json::json!({"juniper_tide": {"eligible": "yes"}})),
        None
    );
    assert_eq!(Offer::read(&serde_json::json!({})), None);
    let at = serde_json::json!({"juniper_tide": {"eligible": true, "next_available_at": "2027-01-15T00:00:00Z"}});
    assert_eq!(
        Offer::read(&at).and_then(|o| o.next_available_at),
        Some(1_799_971_200)
    );
    let mut m = Memo::default();
    assert_eq!(m.before_calls(NOW), None);
    assert_eq!(m.after_status(NOW, None), Err(Outcome::NoStatus));
    assert_eq!(
        m.before_calls(NOW + 15 * 60_000 - 1),
        Some(Outcome::MemoSkip)
    );
    assert_eq!(m.before_calls(NOW + 15 * 60_000), None);
    for refused in [
        offer(false, "reset", true),
        offer(true, "control", true),
        offer(true, "reset", false),
    ] {
        let mut m = Memo::default();
        let o = Offer::read(&refused);
        assert_eq!(m.after_status(NOW, o.as_ref()), Err(Outcome::NotOffered));
    }
    // Not offered until an announced time: the memo keeps it.
    let mut m = Memo::default();
    let later = Offer {
        next_available_at: Some(NOW / 1_000 + 86_400),
        ..Offer::default()
    };
    assert_eq!(m.after_status(NOW, Some(&later)), Err(Outcome::NotOffered));
    assert_eq!(
        m.before_calls(NOW + 86_400_000 - 1),
        Some(Outcome::MemoSkip)
    );
    let ok = Offer::read(&offer(true, "reset", true));
    assert_eq!(Memo::default().after_status(NOW, ok.as_ref()), Ok(()));
    let mut m = Memo::default();
    assert_eq!(m.no_organization(NOW), Outcome::NoOrganization);
    assert_eq!(m.before_calls(NOW + 1), Some(Outcome::MemoSkip));
}

#[test]
fn the_claims_answers_are_remembered() {
    let body = |r: &str| serde_json::json!({ "result": r });
    let cases = [
        (Some((200, body("reset"))), Outcome::Reset, true),
        (Some((200, body("not_limited"))), Outcome::NotLimited, true),
        (
            Some((200, body("already_used"))),
            Outcome::AlreadyUsed,
            false,
        ),
        (Some((200, body("ineligible"))), Outcome::Ineligible, false),
        (
            Some((200, body("something new"))),
            Outcome::Unavailable,
            false,
        ),
        (Some((429, body(""))), Outcome::RateLimited, false),
        (Some((401, body(""))), Outcome::AuthError, false),
        (Some((403, body(""))), Outcome::AuthError, false),
        (Some((500, body("reset"))), Outcome::Error, false),
        (None, Outcome::Error, false),
    ];
    for (reply, want, granted) in cases {
        let mut m = Memo::default();
        let got = m.after_claim(NOW, reply.as_ref().map(|(s, b)| (*s, b)), None);
        assert_eq!((got, got.granted()), (want, granted), "{reply:?}");
        let spent = granted || want == Outcome::AlreadyUsed;
        let hold = if spent { 7 * 86_400_000 } else { 15 * 60_000 };
        let sibling = m.before_calls(NOW + 59_999);
        if granted {
            assert_eq!(
                sibling,
                Some(Outcome::RecentReset),
                "siblings told it was reset"
            );
            assert!(sibling.is_some_and(Outcome::granted));
            assert_eq!(m.before_calls(NOW + 60_000), Some(Outcome::MemoSkip));
        } else {
            assert_eq!(sibling, Some(Outcome::MemoSkip));
        }
        assert_eq!(
            m.before_calls(NOW + hold - 1),
            Some(Outcome::MemoSkip),
            "{want:?}"
        );
        assert_eq!(m.before_calls(NOW + hold), None, "{want:?}");
    }
    // An announced next time wins over the fallbacks.
    let mut m = Memo::default();
    m.after_claim(
        NOW,
        Some((200, &body("already_used"))),
        Some(NOW / 1_000 + 3_600),
    );
    assert_eq!(m.before_calls(NOW + 3_600_000), None);
}

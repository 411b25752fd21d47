//! The fleet trusts only its members. Every message a member publishes and every entry it
//! writes to Redis is signed with the fleet's shared secret (`[fleet] secret_env`): an
//! HMAC-SHA256 over the place it is written to (the channel, or the key and field, prefix
//! included), the time it was written and the text. A member ignores what does not carry a
//! valid signature, so whoever can write to Redis without the secret cannot mint a client key,
//! cool or ban a connection, pin a session or take a connection for a lease. The place in the
//! signature keeps a genuine entry from being moved to another key, channel or fleet.
//!
//! Replays: a message is accepted once, and only within [`MESSAGE_WINDOW_MS`] of its time
//! (members' clocks are assumed within that of each other); an entry is refused when it is
//! older than the newest one this member has read at the same place.
//!
//! The wire form is text: `rs1.<unix ms>.<64 hex digits>.<the JSON>`.

use ring::hmac;
use std::collections::HashMap;

/// How far a message's time may be from the reader's clock.
pub const MESSAGE_WINDOW_MS: u64 = 60_000;
/// The most signatures or places remembered (each a few dozen bytes).
const REMEMBERED: usize = 100_000;
const MAGIC: &str = "rs1";

/// Why something read from Redis was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not in the signed form at all (written by something other than a member).
    Unsigned,
    /// Signed, but not with this fleet's secret for this place.
    BadSignature,
    /// A message from outside the time window.
    Stale,
    /// A message seen before, or an entry older than one already read at its place.
    Replayed,
    /// Signed, but what it says fails the rules local input meets.
    Invalid,
}

impl Refused {
    pub const ALL: [Refused; 5] = [
        Refused::Unsigned,
        Refused::BadSignature,
        Refused::Stale,
        Refused::Replayed,
        Refused::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Unsigned => "unsigned",
            Refused::BadSignature => "bad_signature",
            Refused::Stale => "stale",
            Refused::Replayed => "replayed",
            Refused::Invalid => "invalid",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The fleet's signing key.
#[derive(Clone)]
pub struct FleetKey(hmac::Key);

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(***)")
    }
}

/// A signed text, opened: when it was written and what it says.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    pub at: u64,
    pub body: &'a str,
    /// The first half of its signature: what a replay is recognised by.
    tag: u128,
}

impl FleetKey {
    pub fn new(secret: &str) -> FleetKey {
        FleetKey(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()))
    }

    /// `body` signed for `place` at `at` (Unix ms).
    pub fn sign(&self, place: &str, at: u64, body: &str) -> String {
        let tag = hmac::sign(&self.0, &signed_bytes(place, at, body));
        format!("{MAGIC}.{at}.{}.{body}", crate::secret::hex(tag.as_ref()))
    }

    /// The time and body of `text` if this key signed it for `place`.
    pub fn open<'a>(&self, place: &str, text: &'a str) -> Result<Opened<'a>, Refused> {
        let mut parts = text.splitn(4, '.');
        let (Some(MAGIC), Some(at), Some(mac), Some(body)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refused::Unsigned);
        };
        let at: u64 = at.parse().map_err(|_| Refused::Unsigned)?;
        let mac = unhex(mac).ok_or(Refused::Unsigned)?;
        // `verify` compares in constant time.
        hmac::verify(&self.0, &signed_bytes(place, at, body), &mac)
            .map_err(|_| Refused::BadSignature)?;
        let mut head = [0u8; 16];
        head.copy_from_slice(&mac[..16]);
        Ok(Opened {
            at,
            body,
            tag: u128::from_be_bytes(head),
        })
    }
}

/// What the signature covers. The place's length first: no two (place, body) pairs give the
/// same bytes.
fn signed_bytes(place: &str, at: u64, body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + place.len() + body.len());
    out.extend_from_slice(&(place.len() as u64).to_be_bytes());
    out.extend_from_slice(place.as_bytes());
    out.extend_from_slice(&at.to_be_bytes());
    out.extend_from_slice(body.as_bytes());
    out
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// What a reader remembers to refuse replays: the messages it accepted (within the window)
/// and the newest entry time at each place it read.
#[derive(Default)]
pub struct Replays {
    seen: HashMap<u128, u64>,
    newest: HashMap<String, u64>,
}

impl Replays {
    /// Accept a message once, and only near `now` (Unix ms).
    pub fn message(&mut self, m: &Opened<'_>, now: u64) -> Result<(), Refused> {
        if m.at.abs_diff(now) > MESSAGE_WINDOW_MS {
            return Err(Refused::Stale);
        }
        if self.seen.len() >= REMEMBERED {
            self.seen
                .retain(|_, at| now.saturating_sub(*at) <= MESSAGE_WINDOW_MS);
        }
        if self.seen.len() >= REMEMBERED {
            return Err(Refused::Replayed); // cannot tell: refuse rather than take a replay
        }
        match self.seen.insert(m.tag, m.at) {
            None => Ok(()),
            Some(_) => Err(Refused::Replayed),
        }
    }

    /// Accept an entry unless one newer was read at `place`.
    pub fn entry(&mut self, place: &str, e: &Opened<'_>) -> Result<(), Refused> {
        match self.newest.get_mut(place) {
            Some(newest) if e.at < *newest => Err(Refused::Replayed),
            Some(newest) => {
                *newest = e.at;
                Ok(())
            }
            None => {
                if self.newest.len() >= REMEMBERED {
                    // Forget the older half: their places were written least recently.
                    let mut times: Vec<u64> = self.newest.values().copied().collect();
                    times.sort_unstable();
                    let cut = times[times.len() / 2];
                    self.newest.retain(|_, at| *at > cut);
                }
                self.newest.insert(place.to_string(), e.at);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signature_holds_for_its_place_key_and_text_only() {
        let k = FleetKey::new(SECRET);
        let s = k.sign("{ringside}:health", 1_000, r#"{"a":1}"#);
        let o = k.open("{ringside}:health", &s).expect("opens");
        assert_eq!((o.at, o.body), (1_000, r#"{"a":1}"#));
        // Another place, another fleet, another secret, another text or time: refused.
        assert_eq!(k.open("{ringside}:kv", &s), Err(Refused::BadSignature));
        assert_eq!(k.open("{other}:health", &s), Err(Refused::BadSignature));
        let other = FleetKey::new("another secret of the same length!!");
        assert_eq!(
            other.open("{ringside}:health", &s),
            Err(Refused::BadSignature)
        );
        let changed = s.replace(r#"{"a":1}"#, r#"{"a":2}"#);
        assert_eq!(
            k.open("{ringside}:health", &changed),
            Err(Refused::BadSignature)
        );
        let moved = s.replacen("1000", "1001", 1);
        assert_eq!(
            k.open("{ringside}:health", &moved),
            Err(Refused::BadSignature)
        );
        // What a Redis writer without the secret can write.
        for plain in [r#"{"a":1}"#, "rs1.x.y.z", "rs1.5.zz.{}", ""] {
            assert_eq!(k.open("{ringside}:health", plain), Err(Refused::Unsigned));
        }
        // A place and body that run together differently sign differently.
        let a = k.sign("ab", 1, "c");
        assert_eq!(
            k.open("a", &a.replacen(".c", ".bc", 1)),
            Err(Refused::BadSignature)
        );
    }

    #[test]
    fn a_message_is_taken_once_and_only_near_its_time() {
        let k = FleetKey::new(SECRET);
        let mut r = Replays::default();
        let s = k.sign("c", 100_000, "{}");
        let m = k.open("c", &s).expect("opens");
        assert_eq!(r.message(&m, 100_500), Ok(()));
        assert_eq!(r.message(&m, 100_600), Err(Refused::Replayed));
        let old = k.sign("c", 1_000, "{}");
        let m = k.open("c", &old).expect("opens");
        assert_eq!(
            r.message(&m, 1_000 + MESSAGE_WINDOW_MS + 1),
            Err(Refused::Stale)
        );
        let ahead = k.sign("c", 200_000 + MESSAGE_WINDOW_MS + 1, "{}");
        let m = k.open("c", &ahead).expect("opens");
        assert_eq!(r.message(&m, 200_000), Err(Refused::Stale));
    }

    #[test]
    fn an_entry_older_than_the_newest_read_at_its_place_is_a_replay() {
        let k = FleetKey::new(SECRET);
        let mut r = Replays::default();
        let new = k.sign("kv:a", 2_000, "{}");
        let old = k.sign("kv:a", 1_000, "{}");
        assert_eq!(r.entry("kv:a", &k.open("kv:a", &new).expect("new")), Ok(()));
        // Read again (a reconnect reads every entry): the same one is fine.
        assert_eq!(r.entry("kv:a", &k.open("kv:a", &new).expect("new")), Ok(()));
        assert_eq!(
            r.entry("kv:a", &k.open("kv:a", &old).expect("old")),
            Err(Refused::Replayed)
        );
        // Another place has its own history.
        let b = k.sign("kv:b", 1_000, "{}");
        assert_eq!(r.entry("kv:b", &k.open("kv:b", &b).expect("b")), Ok(()));
    }
}

//! W3C trace context: Ringside takes part in a client's trace as one hop. It keeps the trace
//! id of a `traceparent` the client sent (or starts a trace when none came) and gives each
//! upstream attempt a span id of its own, sent upstream as the parent id; the access log and
//! the decision record carry both, so that a log pipeline can join them with the client's and
//! the provider's spans.

use serde::{Serialize, Serializer};
use std::cell::Cell;
use std::fmt;

/// A request's trace: its id and the flags the client sent (sampled by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub id: [u8; 16],
    pub flags: u8,
}

impl Trace {
    /// The trace of a `traceparent` header (version 00 and its layout; any other version is
    /// read by the same layout, as the spec asks), or a new one.
    pub fn from_header(value: Option<&[u8]>) -> Trace {
        value.and_then(parse).unwrap_or_else(Trace::start)
    }

    /// A new trace (sampled).
    pub fn start() -> Trace {
        let (a, b) = (next_random(), next_random());
        let mut id = [0; 16];
        id[..8].copy_from_slice(&a.to_be_bytes());
        id[8..].copy_from_slice(&b.to_be_bytes());
        Trace { id, flags: 1 }
    }

    /// The span id of attempt `n` (0-based): derived from the trace, so that the log can name
    /// the last attempt's span without keeping every one.
    pub fn span(&self, n: usize) -> [u8; 8] {
        let lo = u64::from_be_bytes(self.id[8..].try_into().unwrap_or_default());
        let hi = u64::from_be_bytes(self.id[..8].try_into().unwrap_or_default());
        let s = mix(lo ^ mix(hi) ^ (n as u64).wrapping_add(0x5EED));
        // An all-zero span id is invalid.
        s.max(1).to_be_bytes()
    }

    /// `traceparent: 00-<trace>-<span of attempt n>-<flags>` for the upstream. (Inlined into
    /// the request's head, which every attempt writes.)
    #[inline(always)]
    pub fn write_header(&self, n: usize, out: &mut Vec<u8>) {
        // Built on the stack and appended once (once per attempt, on the request path).
        const PREFIX: &[u8] = b"traceparent: 00-";
        let mut line = [0u8; PREFIX.len() + 32 + 1 + 16 + 1 + 2 + 2];
        line[..PREFIX.len()].copy_from_slice(PREFIX);
        let mut at = PREFIX.len();
        at = hex_into(&self.id, &mut line, at);
        line[at] = b'-';
        at = hex_into(&self.span(n), &mut line, at + 1);
        line[at] = b'-';
        at = hex_into(&[self.flags], &mut line, at + 1);
        line[at..].copy_from_slice(b"\r\n");
        out.extend_from_slice(&line);
    }
}

/// The parent id (the client's span) of a `traceparent` value, if it is a valid one.
pub fn parent_of(value: &[u8]) -> Option<[u8; 8]> {
    parse(value)?;
    let mut parent = [0; 8];
    unhex(&value[36..52], &mut parent)?;
    Some(parent)
}

fn parse(v: &[u8]) -> Option<Trace> {
    // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
    if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    if &v[..2] == b"ff" || (v.len() > 55 && &v[..2] == b"00") {
        return None;
    }
    let mut id = [0; 16];
    unhex(&v[3..35], &mut id)?;
    let mut parent = [0; 8];
    unhex(&v[36..52], &mut parent)?;
    let mut flags = [0; 1];
    unhex(&v[53..55], &mut flags)?;
    (id != [0; 16] && parent != [0; 8]).then_some(Trace {
        id,
        flags: flags[0],
    })
}

fn unhex(s: &[u8], out: &mut [u8]) -> Option<()> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None, // the spec allows lowercase only
    };
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(s[2 * i])? << 4 | digit(s[2 * i + 1])?;
    }
    Some(())
}

/// Lowercase hex of `bytes` into `out` from `at`; returns where it ended.
pub(super) fn hex_into(bytes: &[u8], out: &mut [u8], mut at: usize) -> usize {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out[at] = DIGITS[usize::from(b >> 4)];
        out[at + 1] = DIGITS[usize::from(b & 15)];
        at += 2;
    }
    at
}

/// splitmix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

thread_local! {
    /// Each core's own generator: trace ids need to be unique, not secret.
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    mix(t ^ (&local as *const u8 as u64) ^ u64::from(std::process::id()))
}

fn next_random() -> u64 {
    STATE.with(|s| {
        let x = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(x);
        mix(x)
    })
}

/// Lowercase hex, as `traceparent` writes ids.
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The trace id as the log writes it (no allocation).
pub fn serialize_trace<S: Serializer>(t: &Trace, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Hex(&t.id))
}

impl Serialize for Trace {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_trace(self, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIVEN: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_clients_trace_is_kept_and_each_attempt_gets_its_own_span() {
        let t = Trace::from_header(Some(GIVEN));
        let mut out = Vec::new();
        t.write_header(0, &mut out);
        let line = String::from_utf8(out).unwrap_or_default();
        assert!(
            line.starts_with("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{line}"
        );
        assert!(line.ends_with("-01\r\n"), "{line}");
        assert!(
            !line.contains("00f067aa0ba902b7"),
            "a new parent id: {line}"
        );
        assert_ne!(t.span(0), t.span(1));
        assert_eq!(t.span(1), Trace::from_header(Some(GIVEN)).span(1));
    }

    #[test]
    fn a_bad_or_missing_header_starts_a_trace() {
        for bad in [
            &b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"[..],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"garbage",
        ] {
            let t = Trace::from_header(Some(bad));
            assert_ne!(t.id, [0; 16]);
            assert_ne!(&t.id[..4], &[0x4b, 0xf9, 0x2f, 0x35]);
        }
        assert_ne!(Trace::start().id, Trace::start().id);
        // A later version may add fields: read by version 00's layout.
        let v2 = b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
        assert_eq!(Trace::from_header(Some(v2)).id[0], 0x4b);
    }
}

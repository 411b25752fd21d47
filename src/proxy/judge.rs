//! Judging an upstream answer before commit: read an error body whole (bounded), or hold a 200
//! event stream until its first useful event to catch an in-band error; then restate and
//! classify. Nothing here has reached the client yet, so whatever it finds may be retried.

use super::redact::Secrets;
use super::watch::{ClientWatch, Raced};
use crate::dialect::ratelimit::RateLimits;
use crate::http::chunk::ChunkTracker;
use crate::http::io::read_more;
use crate::http::{Framing, Head};
use crate::resilience::classify::{self, Verdict};
use crate::resilience::hints::{self, Hint, HintSource};
use crate::resilience::{Settings, restate};
use crate::timer;
use crate::upstream::UpConn;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// Error bodies are read whole up to this size. A larger one is judged on its first part and
/// never relayed: it could carry the key anywhere, and nobody sends a 1 MiB error on purpose.
pub const MAX_ERROR_BODY: usize = 256 * 1024;

/// An upstream error body as read for judging.
pub struct ErrorBody {
    pub body: Bytes,
    /// The body ended cleanly (the upstream connection may be pooled).
    pub complete: bool,
    /// Over [`MAX_ERROR_BODY`]: `body` is only its first part, and is not for the client.
    pub oversized: bool,
}

pub enum Read<T> {
    Ok(T),
    ClientGone,
    /// The upstream failed or ran out of time while we read.
    Failed {
        detail: String,
        timeout: bool,
    },
}

/// Payload bytes of `raw` (de-chunked when chunked). `Err` on bad framing.
fn payload(raw: &[u8], framing: Framing) -> Result<(Vec<u8>, bool), ()> {
    match framing {
        Framing::Chunked => {
            let mut t = ChunkTracker::new();
            let mut out = Vec::with_capacity(raw.len());
            t.feed(raw, |p| out.extend_from_slice(p)).map_err(|_| ())?;
            Ok((out, t.is_done()))
        }
        Framing::Length(n) => {
            let end = (n as usize).min(raw.len());
            Ok((raw[..end].to_vec(), raw.len() as u64 >= n))
        }
        Framing::Empty => Ok((Vec::new(), true)),
        Framing::Close => Ok((raw.to_vec(), false)),
    }
}

/// Read a whole (error) body into memory; `up.buf` keeps the raw bytes so that the connection
/// may be pooled afterwards.
pub async fn read_error_body(
    up: &mut UpConn,
    head: &Head,
    deadline: Instant,
    watch: &mut ClientWatch<'_>,
) -> Read<ErrorBody> {
    read_whole_body(up, head, deadline, watch, MAX_ERROR_BODY).await
}

/// Read a whole body into memory, up to `max` bytes (`oversized` past that).
pub async fn read_whole_body(
    up: &mut UpConn,
    head: &Head,
    deadline: Instant,
    watch: &mut ClientWatch<'_>,
    max: usize,
) -> Read<ErrorBody> {
    let whole = |body: Vec<u8>, complete: bool| {
        Read::Ok(ErrorBody {
            body: Bytes::from(body),
            complete,
            oversized: false,
        })
    };
    loop {
        let Ok((body, done)) = payload(&up.buf, head.framing) else {
            return Read::Failed {
                detail: "bad framing in the error body".into(),
                timeout: false,
            };
        };
        if done {
            return whole(body, true);
        }
        if up.buf.len() > max {
            let mut body = body;
            body.truncate(max);
            return Read::Ok(ErrorBody {
                body: Bytes::from(body),
                complete: false,
                oversized: true,
            });
        }
        let read = timer::timeout_at(deadline, read_more(&mut up.stream, &mut up.buf));
        match watch.race(std::pin::pin!(read)).await {
            Raced::ClientGone => return Read::ClientGone,
            Raced::Done(Err(_)) => {
                return Read::Failed {
                    detail: "error body not received in time".into(),
                    timeout: true,
                };
            }
            Raced::Done(Ok(Ok(0))) if head.framing == Framing::Close => {
                return whole(body, false);
            }
            Raced::Done(Ok(Ok(0))) | Raced::Done(Ok(Err(_))) => {
                return Read::Failed {
                    detail: "upstream closed inside the error body".into(),
                    timeout: false,
                };
            }
            Raced::Done(Ok(Ok(_))) => {}
        }
    }
}

/// What holding the start of a 200 stream showed.
pub enum Hold {
    /// A useful event, a complete short stream, or the window ended with events held: commit.
    Commit,
    /// An in-band error before any content: its JSON text.
    Error(String),
    /// No useful event before the readiness timeout (nothing was committed).
    Stalled,
    /// The stream ended before the commit without its end marker, after the provider produced
    /// output (retried elsewhere; what it produced was billed by the provider all the same).
    /// (Boxed: rare, and every held stream's task has room for the hold's outcome.)
    Cut(Box<(String, Produced)>),
}

/// What a held stream carried before it failed: its text, and the usage it reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Produced {
    pub text_bytes: u64,
    pub prompt: Option<u32>,
    pub completion: Option<u32>,
    pub cached: Option<u32>,
}

/// Hold a 200 event stream before commit (early recovery): read until its first useful event,
/// an in-band error, `holdback_bytes`, or (judged when bytes arrive) the end of the holdback
/// window with at least one event held; a stream that shows nothing useful keeps being held up
/// to the readiness timeout. The SSE scanner
/// reads the held bytes in place (no copy); they stay in `up.buf` for the relay.
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub fn hold_stream(
    up: &mut UpConn,
    head: &Head,
    st: &crate::sse::StreamSettings,
    (deadline, marked_end): (Instant, bool),
    watch: &mut ClientWatch<'_>,
) -> impl std::future::Future<Output = Read<Hold>> {
    async move {
        let start = crate::clock::instant();
        let mut held = Held {
            marked_end,
            scanner: crate::sse::Scanner::default(),
            tracker: (head.framing == Framing::Chunked).then(ChunkTracker::new),
            fed: 0,
            payload_len: 0,
            body_done: false,
            window_end: start + Duration::from_millis(st.holdback_ms),
            ready_end: start + Duration::from_millis(st.readiness_timeout_ms),
            deadline,
        };
        loop {
            if held.scan(&up.buf, head.framing).is_err() {
                return Read::Ok(Hold::Commit); // the relay reports it
            }
            if let Some(done) = held.judge(&up.buf, head.framing, st.holdback_bytes) {
                return done;
            }
            // The window is judged when bytes arrive (as the reference does), never by cutting a
            // read short: a read dropped mid-flight on io_uring can lose the bytes it took.
            let until = held.ready_end.min(deadline);
            // Readiness first: the hold waits for the first useful event with no pooled buffer.
            let read = timer::timeout_at(until, up.stream.read_when_ready(&mut up.buf));
            match watch.race(std::pin::pin!(read)).await {
                Raced::ClientGone => return Read::ClientGone,
                Raced::Done(Err(_)) => {} // a timer: decided at the top
                Raced::Done(Ok(Ok(0))) | Raced::Done(Ok(Err(_))) => {
                    let ended = held.scanner.totals.terminal || !held.marked_end;
                    if head.framing == Framing::Close && ended {
                        return Read::Ok(Hold::Commit);
                    }
                    return held.cut("stream ended before its first useful event");
                }
                Raced::Done(Ok(Ok(_))) => {}
            }
        }
    }
}

/// A held stream so far: what the scanner saw, how far the bytes were read, and the times
/// that end the hold.
struct Held {
    /// The provider ends its streams with a marker (every API but Gemini's, whose stream ends
    /// with its body).
    marked_end: bool,
    scanner: crate::sse::Scanner,
    tracker: Option<ChunkTracker>,
    /// Raw bytes of the buffer already scanned.
    fed: usize,
    payload_len: usize,
    body_done: bool,
    window_end: Instant,
    ready_end: Instant,
    deadline: Instant,
}

impl Held {
    /// Scan what arrived since the last look. `Err` on bad chunk framing. Not inlined, for the
    /// same reason as the relay's `Stream::next_write`.
    #[inline(never)]
    fn scan(&mut self, buf: &[u8], framing: Framing) -> Result<(), ()> {
        let fresh = &buf[self.fed.min(buf.len())..];
        let (scanner, payload_len) = (&mut self.scanner, &mut self.payload_len);
        match &mut self.tracker {
            Some(t) => {
                let used = t
                    .feed(fresh, |p| {
                        *payload_len += p.len();
                        scanner.feed(p, |_| {});
                    })
                    .map_err(|_| ())?;
                self.fed += used;
                self.body_done = t.is_done();
            }
            None => {
                *payload_len += fresh.len();
                scanner.feed(fresh, |_| {});
                self.fed = buf.len();
                if let Framing::Length(n) = framing {
                    self.body_done = *payload_len as u64 >= n;
                }
            }
        }
        if self.body_done {
            self.scanner.finish(|_| {});
        }
        Ok(())
    }

    /// The held stream failed: what it produced goes with the verdict when it produced
    /// anything (`Hold::Cut`, to be billed).
    fn cut(&self, detail: &str) -> Read<Hold> {
        let t = &self.scanner.totals;
        let produced = Produced {
            text_bytes: t.text_bytes,
            prompt: t.input_tokens,
            completion: t.output_tokens,
            cached: t.cached_tokens,
        };
        if produced == Produced::default() {
            return Read::Failed {
                detail: detail.into(),
                timeout: false,
            };
        }
        Read::Ok(Hold::Cut(Box::new((detail.into(), produced))))
    }

    /// Whether the hold ends now, and how; `None`: read more.
    fn judge(&self, buf: &[u8], framing: Framing, holdback_bytes: usize) -> Option<Read<Hold>> {
        let t = self.scanner.totals;
        if t.first_error_seen {
            let text = match payload(buf, framing) {
                Ok((p, _)) => crate::sse::error_text(&p),
                Err(()) => String::new(),
            };
            return Some(Read::Ok(Hold::Error(text)));
        }
        if self.body_done && !t.terminal && self.marked_end {
            // The whole stream arrived inside the window without its terminal marker: nothing
            // was committed, so it is retried rather than passed on as a success.
            return Some(self.cut("stream ended without its terminal marker"));
        }
        if t.decisive || self.body_done || self.payload_len >= holdback_bytes {
            return Some(Read::Ok(Hold::Commit));
        }
        let now = crate::clock::instant();
        let held_events = t.events > 0 || t.heartbeats > 0;
        if held_events && now >= self.window_end {
            return Some(Read::Ok(Hold::Commit));
        }
        if now >= self.deadline {
            return Some(Read::Failed {
                detail: "no stream event before the deadline".into(),
                timeout: true,
            });
        }
        (now >= self.ready_end).then_some(Read::Ok(Hold::Stalled))
    }
}

/// What was sent and what came back, for [`judge`].
pub struct Exchange<'a> {
    pub provider: &'a str,
    /// The upstream's status; 200 for an in-band stream error.
    pub status: u16,
    pub head: &'a Head,
    /// What the head says about limits (`RateLimits::read`, once per answer).
    pub limits: &'a RateLimits,
    /// The error body (or the in-band error event's data).
    pub body: &'a [u8],
    /// The client's request body (words of it quoted back are not evidence).
    pub request: &'a [u8],
}

/// Restate, find the retry hint, classify.
pub fn judge(s: &Settings, x: &Exchange, now_unix: u64) -> (Verdict, Option<restate::Restated>) {
    let (provider, status, head, body) = (x.provider, x.status, x.head, x.body);
    let lower = String::from_utf8_lossy(body).to_lowercase();
    let get = |n: &str| head.get_str(n).map(str::to_string);
    let restated = restate::apply(&s.restate, provider, status, &lower);
    let status = match (&restated, status) {
        (Some(r), _) => r.to,
        // An aggregator's error names the upstream's own status.
        (None, s) => match classify::aggregated_status(&lower) {
            Some(raw) => raw,
            // An in-band error stands for the status its type names (502 when it names none).
            None if s == 200 => classify::in_band_status(&lower),
            None => s,
        },
    };
    let mut hint = hints::from_limits(x.limits)
        .or_else(|| hints::from_text(&String::from_utf8_lossy(body), now_unix));
    if hint.is_none()
        && let Some(r) = &restated
    {
        hint = Some(Hint {
            ms: r.default_retry_after_ms,
            source: HintSource::Restated,
        });
    }
    let answer = classify::Answer {
        provider,
        status,
        lower: &lower,
        get: &get,
        hint,
        request: x.request,
    };
    let mut v = classify::classify(&s.operator_rules, &s.builtin_rules, &answer);
    if v.reason == classify::Reason::QuotaExhausted && v.hint.is_none() {
        v.hint = hints::daily_reset(&lower, now_unix);
    }
    (v, restated)
}

/// An upstream's in-band error event, judged like an error answer with that type and message
/// (restatement and rules included), with the decision record's detail.
pub(super) struct InBand {
    pub verdict: Verdict,
    pub detail: String,
    pub restated_from: Option<u16>,
}

/// Judge an in-band error event's data (`text`): before the commit while a stream is held,
/// or after it, when the stream carried one.
pub(super) fn in_band(
    ctx: &super::exchange::Ctx<'_, '_>,
    provider: &crate::config::Provider,
    conn: &crate::config::Connection,
    head: &Head,
    text: &str,
) -> InBand {
    let limits = RateLimits::read(head, crate::clock::unix_ms());
    let x = Exchange {
        provider: &provider.id,
        status: 200,
        head,
        limits: &limits,
        body: text.as_bytes(),
        request: &ctx.admitted.body,
    };
    let s = &ctx.config().resilience;
    let (verdict, restated) = judge(s, &x, crate::clock::unix_ms());
    InBand {
        verdict,
        detail: format!(
            "in-band stream error: {}",
            clean(text, &Secrets::of(ctx.core, ctx.config(), conn.index))
        ),
        restated_from: restated.map(|r| r.from),
    }
}

/// The first line of an upstream error, short, with the connection's secrets redacted.
/// What an error body says, for the record: a JSON error's first line; anything else (an HTML
/// page from a load balancer, which may name internal hosts) only by its type and size.
pub(super) fn describe(body: &[u8], head: &Head, secrets: &Secrets<'_>) -> String {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => clean(&String::from_utf8_lossy(body), secrets),
        None => "an empty body".into(),
        Some(_) => {
            let kind = head
                .get_str("content-type")
                .and_then(|v| v.split(';').next())
                .map(str::trim)
                .filter(|t| t.len() <= 64 && t.bytes().all(|b| b.is_ascii_graphic()))
                .unwrap_or("untyped");
            format!("a {}-byte {kind} body (not JSON; not shown)", body.len())
        }
    }
}

/// What a page that is not the API's says, when a rule read it (the page itself is not shown).
pub(super) fn meaning(v: &Verdict) -> Option<&'static str> {
    (v.reason == classify::Reason::TlsRefused).then_some(
        "the provider's edge refused the TLS client certificate (check the provider's \
         client_cert_file and client_key_file): ",
    )
}

/// Whether an error body reads as an API's own answer (JSON, or nothing at all) rather than
/// a page some box on the way wrote.
pub(super) fn api_shaped(body: &[u8]) -> bool {
    matches!(
        body.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[') | None
    )
}

/// Redacted before it is shortened: a key cut at the limit would no longer match in full.
pub(super) fn clean(s: &str, secrets: &Secrets<'_>) -> String {
    let line = s.lines().next().unwrap_or("");
    secrets.redact_str(line).chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_dechunks() {
        let (p, done) = payload(b"5\r\nhello\r\n0\r\n\r\n", Framing::Chunked).unwrap();
        assert_eq!((p.as_slice(), done), (&b"hello"[..], true));
        let (p, done) = payload(b"5\r\nhel", Framing::Chunked).unwrap();
        assert_eq!((p.as_slice(), done), (&b"hel"[..], false));
        assert!(payload(b"zz\r\n", Framing::Chunked).is_err());
        assert!(payload(b"abc", Framing::Length(3)).unwrap().1);
    }

    /// Google's per-day quota gives no `retryDelay`: the hint is the assumed daily reset, which
    /// the cooldown caps; the per-minute one keeps its own `retryDelay`.
    #[test]
    fn a_google_per_day_quota_cools_until_the_daily_reset() {
        let fixture = |name: &str| {
            let path = format!(
                "{}/tests/fixtures/errors/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
        };
        let raw = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\r\n";
        let (head, _) = crate::http::head::parse_response(raw, Default::default(), false)
            .unwrap()
            .unwrap();
        let at = |body: &[u8]| {
            let x = Exchange {
                provider: "gemini",
                status: 429,
                head: &head,
                limits: &RateLimits::default(),
                body,
                request: b"",
            };
            // 2026-12-01T07:00:00Z: one hour before midnight Pacific.
            judge(&Settings::default(), &x, 1_796_083_200_000 + 7 * 3_600_000).0
        };
        let day = at(&fixture("gemini_per_day.json"));
        assert_eq!(day.reason, classify::Reason::QuotaExhausted);
        let hint = day.hint.expect("an assumed reset");
        assert_eq!((hint.ms, hint.source), (3_600_000, HintSource::DailyReset));
        let minute = at(&fixture("gemini_resource_exhausted.json"));
        assert_eq!(minute.hint.map(|h| h.ms), Some(37_000));
    }
}

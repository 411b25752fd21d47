//! The access-log line, written by hand into the core's batch: the same fields, in the same
//! order, as the record's `Serialize` (which the admin API uses), without `fmt` (serde only
//! escapes the rare value that needs it).
//! Through serde_json a line cost about 20,000 instructions (callgrind, 2026-12-02): every key
//! and value went through its byte-by-byte escaper, each trace-id byte through `{:02x}`, the
//! time through `Display`. Here keys are written as they are (they are ours), a value is copied
//! whole when it needs no escape, numbers and hex come from the writers the request path uses.

use super::{AttemptRecord, Excluded, LogClient, Record};
use crate::http::response::push_u64 as number;

/// `,"name":` as one constant: a copy of known length, which the compiler inlines (a copy of
/// a length it cannot see is a call to `memcpy`, and a line has some sixty fields).
macro_rules! k {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

/// One JSON object's fields after its first (the first is written with its `{`).
struct Obj<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Obj<'a> {
    #[inline(always)]
    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        self.out.extend_from_slice(key.as_bytes());
        self.out
    }

    #[inline(always)]
    fn str(&mut self, key: &'static str, v: &str) {
        string(self.key(key), v);
    }

    /// A word of the record's own vocabulary (an outcome, a decision): plain ASCII letters
    /// and underscores, written without the escape check.
    #[inline(always)]
    fn word(&mut self, key: &'static str, v: &'static str) {
        debug_assert!(!needs_escape(v.as_bytes()));
        let out = self.key(key);
        out.push(b'"');
        out.extend_from_slice(v.as_bytes());
        out.push(b'"');
    }

    #[inline(always)]
    fn opt_str(&mut self, key: &'static str, v: Option<&str>) {
        if let Some(v) = v {
            self.str(key, v);
        }
    }

    #[inline(always)]
    fn num(&mut self, key: &'static str, v: u64) {
        number(self.key(key), v);
    }

    #[inline(always)]
    fn opt_num(&mut self, key: &'static str, v: Option<u64>) {
        if let Some(v) = v {
            self.num(key, v);
        }
    }

    #[inline(always)]
    fn nonzero(&mut self, key: &'static str, v: u32) {
        if v != 0 {
            self.num(key, u64::from(v));
        }
    }

    #[inline(always)]
    fn bool(&mut self, key: &'static str, v: bool) {
        let v: &[u8] = if v { b"true" } else { b"false" };
        self.key(key).extend_from_slice(v);
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// Whether any byte of `s` needs a JSON escape (a control byte, `"` or `\\`): eight bytes at
/// a time (the classic "has a byte less than n" and "has a zero byte" word tricks), the three
/// tests folded into one branch per word.
fn needs_escape(s: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let flags = |x: u64| {
        let (quote, backslash) = (x ^ (ONES * u64::from(b'"')), x ^ (ONES * u64::from(b'\\')));
        // A byte below 0x20 (never flagged for bytes >= 0x80: their high bit is masked out),
        // then a zero byte in each of the two comparisons.
        (x.wrapping_sub(ONES * 0x20) & !x)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
    };
    let (words, rest) = s.as_chunks::<8>();
    // The last few bytes as one more word, padded with a byte that needs no escape.
    let mut tail = [b'a'; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let mut any = flags(u64::from_le_bytes(tail));
    for w in words {
        any |= flags(u64::from_le_bytes(*w));
    }
    any & HIGHS != 0
}

/// A JSON string: copied whole when nothing in it needs escaping (the usual case), else
/// through serde_json's escaper.
pub(super) fn string(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        let _ = serde_json::to_writer(&mut *out, s);
        return;
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Lowercase hex in quotes, as `traceparent` writes ids (at most 16 bytes: a trace id).
fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut digits = [0u8; 32];
    let end = super::trace::hex_into(bytes, &mut digits, 0);
    out.push(b'"');
    out.extend_from_slice(&digits[..end]);
    out.push(b'"');
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix milliseconds (UTC; the proleptic Gregorian calendar,
/// days to civil date by Howard Hinnant's algorithm).
pub(super) fn rfc3339_millis(out: &mut Vec<u8>, unix_ms: u64) {
    let (days, ms_of_day) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let two = |out: &mut Vec<u8>, v: u64| {
        out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8])
    };
    let year = year.clamp(0, 9_999) as u64;
    two(out, year / 100);
    two(out, year % 100);
    out.push(b'-');
    two(out, month as u64);
    out.push(b'-');
    two(out, day as u64);
    out.push(b'T');
    let secs = ms_of_day / 1_000;
    two(out, secs / 3_600);
    out.push(b':');
    two(out, secs / 60 % 60);
    out.push(b':');
    two(out, secs % 60);
    out.push(b'.');
    let ms = ms_of_day % 1_000;
    out.extend_from_slice(&[
        b'0' + (ms / 100) as u8,
        b'0' + (ms / 10 % 10) as u8,
        b'0' + (ms % 10) as u8,
    ]);
    out.push(b'Z');
}

fn ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            out.push(b'"');
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                number(out, u64::from(o));
            }
            out.push(b'"');
        }
        v6 => string(out, &v6.to_string()),
    }
}

fn attempt(out: &mut Vec<u8>, a: &AttemptRecord) {
    string(out_first(out, "\"provider\":"), a.provider);
    let mut o = Obj { out };
    o.str(k!("connection"), a.connection);
    o.str(k!("model"), &a.model);
    o.word(k!("outcome"), a.outcome.as_str());
    o.opt_num(k!("status"), a.status.map(u64::from));
    o.opt_str(k!("reason"), a.reason);
    o.opt_str(k!("scope"), a.scope);
    o.opt_str(k!("rule"), a.rule.as_deref());
    o.opt_str(k!("hint_source"), a.hint_source);
    o.opt_num(k!("restated_from"), a.restated_from.map(u64::from));
    o.opt_num(k!("retry_after_ms"), a.retry_after_ms);
    o.word(k!("decision"), a.decision.as_str());
    o.opt_str(k!("via"), a.via);
    o.num(k!("attempts_left"), u64::from(a.attempts_left));
    o.num(k!("ms_left"), a.ms_left);
    o.opt_str(k!("detail"), a.detail.as_deref());
    o.num(k!("ms"), a.ms);
    o.close();
}

/// `{"name":` for an object's first field.
fn out_first<'o>(out: &'o mut Vec<u8>, first: &'static str) -> &'o mut Vec<u8> {
    out.push(b'{');
    out.extend_from_slice(first.as_bytes());
    out
}

fn excluded(out: &mut Vec<u8>, e: &Excluded) {
    string(out_first(out, "\"target\":"), &e.target);
    let mut o = Obj { out };
    o.str(k!("connection"), &e.connection);
    o.str(k!("reason"), e.reason);
    o.opt_num(k!("remaining_s"), e.remaining_s);
    o.close();
}

fn list<T>(out: &mut Vec<u8>, items: &[T], each: fn(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, x);
    }
    out.push(b']');
}

/// The whole line (without its newline).
pub(super) fn write(r: &Record, client: &LogClient<'_>, out: &mut Vec<u8>) {
    // Room for the usual line at once: the pushes below then never grow the batch.
    out.reserve(1024 + 256 * r.attempts.len());
    out.extend_from_slice(br#"{"kind":"access","time":""#);
    rfc3339_millis(out, r.ts_ms);
    out.push(b'"');
    let mut o = Obj { out };
    o.str(k!("request_id"), &r.request_id);
    o.num(k!("core"), r.core as u64);
    o.str(k!("method"), &r.method);
    o.str(k!("path"), &r.path);
    // The client key's id; `client` is the peer address, at the end.
    o.opt_str(k!("client_key"), r.client.as_deref());
    o.opt_str(k!("route"), r.route.as_deref());
    o.opt_str(k!("model"), r.model.as_deref());
    o.opt_str(k!("target"), r.target.as_deref());
    o.opt_str(k!("connection"), r.connection);
    o.num(k!("status"), u64::from(r.status));
    o.bool(k!("stream"), r.stream);
    list(o.key(k!("attempts")), &r.attempts, attempt);
    if !r.excluded.is_empty() {
        list(o.key(k!("excluded")), &r.excluded, excluded);
    }
    o.nonzero(k!("waited_ms"), r.waited_ms);
    if let Some(w) = &r.waited_for {
        excluded(o.key(k!("waited_for")), w);
    }
    o.word(k!("outcome"), r.outcome.as_str());
    o.opt_str(k!("error_code"), r.error_code);
    o.opt_num(k!("ttfb_ms"), r.ttfb_ms.map(u64::from));
    o.num(k!("total_ms"), u64::from(r.total_ms));
    o.num(k!("bytes_in"), r.bytes_in);
    o.num(k!("bytes_out"), r.bytes_out);
    o.num(k!("ts_ms"), r.ts_ms);
    o.opt_num(k!("lease_generation"), r.lease_generation);
    o.opt_num(k!("client_retry"), r.client_retry.map(u64::from));
    if r.early_head {
        o.bool(k!("early_head"), true);
    }
    if r.same_request_retry {
        o.bool(k!("same_request_retry"), true);
    }
    if let Some(s) = &r.stream_stats {
        number(
            out_first(o.key(k!("stream_stats")), "\"events\":"),
            s.events,
        );
        let mut st = Obj { out: &mut *o.out };
        st.num(k!("text_bytes"), s.text_bytes);
        st.bool(k!("terminal"), s.terminal);
        st.close();
    }
    if !r.tokens.is_empty() {
        tokens(o.key(k!("tokens")), &r.tokens);
    }
    if r.cost_micro_usd > 0 {
        // Micro-dollar precision, as the spend is counted (`flow::spend`).
        let usd = f64::from(r.cost_micro_usd) / 1e6;
        let out = o.key(k!("cost_usd"));
        out.extend_from_slice(format!("{usd:.6}").as_bytes());
    }
    o.num(k!("total_us"), r.total_us);
    o.num(k!("upstream_us"), u64::from(r.upstream_us));
    o.nonzero(k!("waits_us"), r.waits_us);
    o.nonzero(k!("head_us"), r.head_us);
    o.nonzero(k!("ttft_us"), r.ttft_us);
    hex(o.key(k!("trace_id")), &r.trace.id);
    if let Some(a) = client.peer {
        ip(o.key(k!("client")), a);
    }
    if let Some(a) = client.forwarded_for {
        ip(o.key(k!("forwarded_for")), a);
    }
    o.opt_str(k!("user_agent"), client.user_agent);
    if let Some(last) = r.attempts.len().checked_sub(1) {
        hex(o.key(k!("span_id")), &r.trace.span(last));
    }
    o.close();
}

/// `tokens`: every count is optional, so the first one written has no comma.
fn tokens(out: &mut Vec<u8>, t: &super::Tokens) {
    out.push(b'{');
    let mut sep = "";
    for (key, v) in [
        ("prompt", t.prompt),
        ("completion", t.completion),
        ("cached", t.cached),
    ] {
        if let Some(v) = v {
            out.extend_from_slice(sep.as_bytes());
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            number(out, u64::from(v));
            sep = ",";
        }
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests;

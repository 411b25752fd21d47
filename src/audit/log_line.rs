//! The access-log line, written by hand into the core's batch: the same fields, in the same
//! order, as the record's `Serialize` (which the admin API uses), without `fmt` or serde.
//! Through serde_json a line cost about 20,000 instructions (callgrind, 2026-12-02): every key
//! and value went through its byte-by-byte escaper, each trace-id byte through `{:02x}`, the
//! time through `Display`. Here keys are written as they are (they are ours), a value is copied
//! whole when it needs no escape, numbers and hex come from small tables.

use super::{AttemptRecord, Excluded, LogClient, Record};

/// One JSON object being written: `,` between fields.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn open(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// `"key":` (keys are ours: plain ASCII, never escaped).
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn str(&mut self, key: &str, v: &str) {
        let out = self.key(key);
        string(out, v);
    }

    fn opt_str(&mut self, key: &str, v: Option<&str>) {
        if let Some(v) = v {
            self.str(key, v);
        }
    }

    fn num(&mut self, key: &str, v: u64) {
        let out = self.key(key);
        number(out, v);
    }

    fn opt_num(&mut self, key: &str, v: Option<u64>) {
        if let Some(v) = v {
            self.num(key, v);
        }
    }

    fn nonzero(&mut self, key: &str, v: u32) {
        if v != 0 {
            self.num(key, u64::from(v));
        }
    }

    fn bool(&mut self, key: &str, v: bool) {
        let out = self.key(key);
        out.extend_from_slice(if v { b"true" } else { b"false" });
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// A JSON string: copied whole when nothing in it needs escaping (the usual case).
pub(super) fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.extend_from_slice(s.as_bytes());
    } else {
        for &b in s.as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..0x20 => {
                    out.extend_from_slice(b"\\u00");
                    out.extend_from_slice(&hex_byte(b));
                }
                _ => out.push(b),
            }
        }
    }
    out.push(b'"');
}

pub(super) fn number(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(crate::http::response::decimal(v, &mut [0u8; 20]).as_bytes());
}

fn hex_byte(b: u8) -> [u8; 2] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]
}

/// Lowercase hex in quotes, as `traceparent` writes ids.
fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        out.extend_from_slice(&hex_byte(b));
    }
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
    let mut o = Obj::open(out);
    o.str("provider", a.provider);
    o.str("connection", a.connection);
    o.str("model", &a.model);
    o.str("outcome", a.outcome.as_str());
    o.opt_num("status", a.status.map(u64::from));
    o.opt_str("reason", a.reason);
    o.opt_num("restated_from", a.restated_from.map(u64::from));
    o.opt_num("retry_after_ms", a.retry_after_ms);
    o.str("decision", a.decision.as_str());
    o.opt_str("via", a.via);
    o.num("attempts_left", u64::from(a.attempts_left));
    o.num("ms_left", a.ms_left);
    o.opt_str("detail", a.detail.as_deref());
    o.num("ms", a.ms);
    o.close();
}

fn excluded(out: &mut Vec<u8>, e: &Excluded) {
    let mut o = Obj::open(out);
    o.str("target", &e.target);
    o.str("connection", &e.connection);
    o.str("reason", e.reason);
    o.opt_num("remaining_s", e.remaining_s);
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
    let mut o = Obj::open(out);
    o.str("kind", "access");
    rfc3339_millis_field(&mut o, r.ts_ms);
    o.str("request_id", &r.request_id);
    o.num("core", r.core as u64);
    o.str("method", &r.method);
    o.str("path", &r.path);
    // The client key's id; `client` is the peer address, at the end.
    o.opt_str("client_key", r.client.as_deref());
    o.opt_str("route", r.route.as_deref());
    o.opt_str("model", r.model.as_deref());
    o.opt_str("target", r.target.as_deref());
    o.opt_str("connection", r.connection);
    o.num("status", u64::from(r.status));
    o.bool("stream", r.stream);
    list(o.key("attempts"), &r.attempts, attempt);
    if !r.excluded.is_empty() {
        list(o.key("excluded"), &r.excluded, excluded);
    }
    o.nonzero("waited_ms", r.waited_ms);
    o.str("outcome", r.outcome.as_str());
    o.opt_str("error_code", r.error_code);
    o.opt_num("ttfb_ms", r.ttfb_ms.map(u64::from));
    o.num("total_ms", u64::from(r.total_ms));
    o.num("bytes_in", r.bytes_in);
    o.num("bytes_out", r.bytes_out);
    o.num("ts_ms", r.ts_ms);
    o.opt_num("lease_generation", r.lease_generation);
    o.opt_num("client_retry", r.client_retry.map(u64::from));
    if let Some(s) = &r.stream_stats {
        let mut st = Obj::open(o.key("stream_stats"));
        st.num("events", s.events);
        st.num("text_bytes", s.text_bytes);
        st.bool("terminal", s.terminal);
        st.close();
    }
    if !r.tokens.is_empty() {
        let mut t = Obj::open(o.key("tokens"));
        t.opt_num("prompt", r.tokens.prompt.map(u64::from));
        t.opt_num("completion", r.tokens.completion.map(u64::from));
        t.opt_num("cached", r.tokens.cached.map(u64::from));
        t.close();
    }
    o.num("total_us", r.total_us);
    o.num("upstream_us", u64::from(r.upstream_us));
    o.nonzero("waits_us", r.waits_us);
    o.nonzero("head_us", r.head_us);
    o.nonzero("ttft_us", r.ttft_us);
    hex(o.key("trace_id"), &r.trace.id);
    if let Some(a) = client.peer {
        ip(o.key("client"), a);
    }
    if let Some(a) = client.forwarded_for {
        ip(o.key("forwarded_for"), a);
    }
    o.opt_str("user_agent", client.user_agent);
    if let Some(last) = r.attempts.len().checked_sub(1) {
        hex(o.key("span_id"), &r.trace.span(last));
    }
    o.close();
}

fn rfc3339_millis_field(o: &mut Obj<'_>, unix_ms: u64) {
    let out = o.key("time");
    out.push(b'"');
    rfc3339_millis(out, unix_ms);
    out.push(b'"');
}

#[cfg(test)]
mod tests;

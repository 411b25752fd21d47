//! A streaming look inside one SSE event's JSON data without building anything: it follows
//! strings and keys just enough to count the bytes of string values under the keys that carry
//! output (text, tool arguments, reasoning) and to read usage numbers. Whole 64-byte blocks go
//! through bit masks (`json_blocks.rs`); the rest byte by byte, with the same result.

/// What a string value under a key counts as (the discriminant indexes the scanner's sums).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ValueKind {
    Text,
    Tool,
    Reasoning,
    Other,
}

/// Which usage figure a number under a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageKey {
    Input,
    Output,
    /// Prompt tokens served from the provider's cache.
    Cached,
}

#[path = "json_blocks.rs"]
mod blocks;
#[path = "json_envelope.rs"]
mod envelope;
#[path = "json_keys.rs"]
mod keys;

use keys::{Flag, KeyClass, PLAIN_KEY, class_of};

const KEY_MAX: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Between tokens.
    Outside,
    InKey,
    InValue(ValueKind),
    InOtherString,
    Number,
}

/// Counters of one event's data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub text: u32,
    pub tool: u32,
    pub reasoning: u32,
    /// Usage figures (u32: no answer reports four billion tokens; larger ones are kept at
    /// the most).
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    /// A top-level `"error"` key or `"type":"error"` was seen.
    pub error: bool,
    /// `"usage"` appeared.
    pub usage: bool,
    /// `"choices"` appeared (an OpenAI chunk).
    pub choices: bool,
}

/// The skim. The common case, a string whose closing quote is in the same read and that holds
/// no escape, is taken whole from the slice (no copy, one classification); strings split across
/// reads or holding escapes go through the byte-level states, which give the same result for any
/// split (the property tests hold both paths to that).
#[derive(Clone, Debug)]
pub struct JsonScan {
    st: St,
    escape: bool,
    /// Hex digits left of a `\uXXXX` escape, and the code point so far.
    hex_left: u8,
    code: u32,
    /// A key being read across reads (or through escapes).
    key: [u8; KEY_MAX],
    key_len: usize,
    key_long: bool,
    /// The class of the last complete key (for the value that follows it).
    last: KeyClass,
    after_colon: bool,
    depth: u32,
    number: u64,
    number_key: Option<UsageKey>,
    /// Value string matching `"error"` under `"type"`.
    type_value: [u8; 8],
    type_len: usize,
    /// Value bytes by `ValueKind` (indexed, so that adding needs no branch on the kind).
    sums: [u32; 4],
    counts: Counts,
    /// The stream's repeated JSON up to the output value (kept across events).
    envelope: envelope::Envelope,
}

impl Default for JsonScan {
    fn default() -> Self {
        JsonScan {
            st: St::Outside,
            escape: false,
            hex_left: 0,
            code: 0,
            key: [0; KEY_MAX],
            key_len: 0,
            key_long: false,
            last: PLAIN_KEY,
            after_colon: false,
            depth: 0,
            number: 0,
            number_key: None,
            type_value: [0; 8],
            type_len: 0,
            sums: [0; 4],
            counts: Counts::default(),
            envelope: envelope::Envelope::default(),
        }
    }
}

/// The index of the first `"` or `\` (strings are short: a plain loop first).
#[inline]
fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    let head = s.len().min(32);
    match s[..head].iter().position(|&c| c == b'"' || c == b'\\') {
        Some(n) => Some(n),
        None => memchr::memchr2(b'"', b'\\', &s[head..]).map(|n| head + n),
    }
}

impl JsonScan {
    pub fn reset(&mut self) {
        // Only the fields that carry meaning across events (buffers are overwritten before use).
        self.st = St::Outside;
        self.escape = false;
        self.hex_left = 0;
        self.key_len = 0;
        self.key_long = false;
        self.last = PLAIN_KEY;
        self.after_colon = false;
        self.depth = 0;
        self.number_key = None;
        self.type_len = 0;
        self.sums = [0; 4];
        self.counts = Counts::default();
    }

    fn end_number(&mut self) {
        if let Some(key) = self.number_key.take() {
            let n = Some(self.number.min(u64::from(u32::MAX)) as u32);
            match key {
                UsageKey::Input => self.counts.input_tokens = n,
                UsageKey::Output => self.counts.output_tokens = n,
                UsageKey::Cached => self.counts.cached_tokens = n,
            }
        }
        self.st = St::Outside;
    }

    /// Feed data bytes (multi-line data is fed with its joining newlines).
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        let n = bytes.len();
        while i < n {
            if self.st != St::Outside {
                i = self.slow(bytes, i);
                continue;
            }
            // 64 bytes at a time where it can; a usage key's number is read byte by byte.
            if self.last.usage.is_none() {
                let j = blocks::skim(self, bytes, i);
                if j > i {
                    i = j;
                    continue;
                }
            }
            i = self.step(bytes, i, n.min(i + 64));
        }
    }

    /// Feed one SSE line's data: the bytes up to the first CR or LF. Returns that index, or
    /// `None` when `bytes` holds none (then all of it was fed). The line's end comes from the
    /// skim's own masks, so the common line is read once. `first`: these are the first bytes
    /// of an event's data (the scanner is fresh), where the envelope memo applies.
    pub fn feed_line(&mut self, bytes: &[u8], first: bool) -> Option<usize> {
        let (mut at, mut end) = (0, None);
        if self.st == St::Outside && self.last.usage.is_none() {
            let mut from = 0;
            if first && let Some((n, state)) = self.envelope.lookup(bytes) {
                // The state the same bytes led to last time: right before a value's quote.
                self.last = state.last;
                self.depth = state.depth;
                self.sums = state.sums;
                self.counts = state.counts;
                self.after_colon = true;
                from = n;
            }
            (at, end) = blocks::skim_line(self, bytes, from);
            self.envelope.armed = false;
        }
        let end = end.or_else(|| memchr::memchr2(b'\r', b'\n', &bytes[at..]).map(|n| at + n));
        let stop = end.unwrap_or(bytes.len());
        if at < stop {
            self.feed(&bytes[at..stop]);
        }
        end
    }

    /// Byte-level structure between strings, up to `end` (or until a token stays open).
    fn step(&mut self, bytes: &[u8], mut i: usize, end: usize) -> usize {
        let n = bytes.len();
        while i < end && self.st == St::Outside {
            let b = bytes[i];
            i += 1;
            match b {
                b'"' => {
                    let rest = &bytes[i..];
                    match quote_or_backslash(rest) {
                        // A whole string without escapes: taken from the slice.
                        Some(k) if rest[k] == b'"' => {
                            self.whole_string(&rest[..k]);
                            i += k + 1;
                        }
                        _ => self.open_string(),
                    }
                }
                b':' => self.after_colon = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    self.after_colon = false;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.after_colon = false;
                }
                b',' => self.after_colon = false,
                b'0'..=b'9' if self.after_colon => {
                    self.after_colon = false;
                    let mut v = u64::from(b - b'0');
                    while i < n && bytes[i].is_ascii_digit() {
                        v = v
                            .saturating_mul(10)
                            .saturating_add(u64::from(bytes[i] - b'0'));
                        i += 1;
                    }
                    self.number = v;
                    self.number_key = self.last.usage;
                    self.st = St::Number;
                    if i < n {
                        self.end_number(); // the byte after it is structure, read next
                    }
                }
                // Whitespace; control bytes (not JSON) are read as whitespace too, as the block
                // path does.
                _ if b <= b' ' => {}
                _ => self.after_colon = false, // true/false/null/-
            }
        }
        i
    }

    /// A string that opened and closed in this read, without escapes.
    #[inline]
    fn whole_string(&mut self, s: &[u8]) {
        if self.after_colon {
            self.after_colon = false;
            let class = self.last;
            self.add_value(class.value, s.len());
            if class.is_type && self.depth == 1 && s == b"error" {
                self.counts.error = true;
            }
        } else {
            self.end_key(if s.len() > KEY_MAX { b"" } else { s });
        }
    }

    #[inline]
    fn end_key(&mut self, key: &[u8]) {
        self.last = class_of(key);
        match self.last.flag {
            Flag::Error if self.depth == 1 => self.counts.error = true,
            Flag::Usage => self.counts.usage = true,
            Flag::Choices => self.counts.choices = true,
            _ => {}
        }
    }

    /// A string continues past this read or holds an escape: read it byte by byte.
    fn open_string(&mut self) {
        if self.after_colon {
            self.after_colon = false;
            self.type_len = 0;
            let k = self.last.value;
            self.st = if k == ValueKind::Other {
                St::InOtherString
            } else {
                St::InValue(k)
            };
        } else {
            self.key_len = 0;
            self.key_long = false;
            self.st = St::InKey;
        }
    }

    /// The byte-level states (a token left open by the previous read, or a string with
    /// escapes); returns where the structure resumes.
    fn slow(&mut self, bytes: &[u8], mut i: usize) -> usize {
        while i < bytes.len() && self.st != St::Outside {
            match self.st {
                St::InKey | St::InValue(_) | St::InOtherString
                    if !self.escape && self.hex_left == 0 =>
                {
                    let rest = &bytes[i..];
                    let run = quote_or_backslash(rest).unwrap_or(rest.len());
                    self.string_run(&rest[..run]);
                    i += run;
                    if i < bytes.len() {
                        if bytes[i] == b'"' {
                            self.end_string();
                        } else {
                            self.escape = true;
                        }
                        i += 1;
                    }
                }
                St::InKey | St::InValue(_) | St::InOtherString => {
                    let b = bytes[i];
                    i += 1;
                    if self.hex_left > 0 {
                        self.code = (self.code << 4) | (b as char).to_digit(16).unwrap_or(0);
                        self.hex_left -= 1;
                        if self.hex_left == 0 {
                            // Decoded size: UTF-8 length (a surrogate half counts 2, a pair 4).
                            let n = match self.code {
                                0..=0x7f => 1,
                                0x80..=0x7ff | 0xd800..=0xdfff => 2,
                                _ => 3,
                            };
                            self.add(n);
                        }
                    } else {
                        self.escape = false;
                        if b == b'u' {
                            self.hex_left = 4;
                            self.code = 0;
                        } else {
                            self.string_run(&[b]);
                        }
                    }
                }
                St::Number => {
                    let b = bytes[i];
                    if b.is_ascii_digit() {
                        i += 1;
                        self.number = self
                            .number
                            .saturating_mul(10)
                            .saturating_add(u64::from(b - b'0'));
                    } else {
                        self.end_number(); // the byte is structure, read by `feed`
                    }
                }
                St::Outside => {}
            }
        }
        i
    }

    /// Plain string bytes (no quote, no backslash).
    fn string_run(&mut self, run: &[u8]) {
        match self.st {
            St::InKey => {
                let n = run.len().min(KEY_MAX - self.key_len);
                self.key[self.key_len..self.key_len + n].copy_from_slice(&run[..n]);
                self.key_len += n;
                if n < run.len() {
                    self.key_long = true;
                }
            }
            St::InOtherString if self.last.is_type => {
                let n = run.len().min(self.type_value.len() - self.type_len);
                self.type_value[self.type_len..self.type_len + n].copy_from_slice(&run[..n]);
                self.type_len += n;
            }
            St::InValue(_) => self.add(run.len() as u32),
            _ => {}
        }
    }

    fn add(&mut self, n: u32) {
        if let St::InValue(kind) = self.st {
            self.add_value(kind, n as usize);
        }
    }

    /// Bytes of a value string (`Other` lands in a slot nobody reads).
    #[inline(always)]
    fn add_value(&mut self, kind: ValueKind, n: usize) {
        let slot = &mut self.sums[kind as usize];
        *slot = slot.wrapping_add(n as u32);
    }

    fn end_string(&mut self) {
        if self.st == St::InKey {
            let (key, n) = (self.key, if self.key_long { 0 } else { self.key_len });
            self.end_key(&key[..n]);
        } else if self.st == St::InOtherString
            && self.last.is_type
            && self.depth == 1
            && &self.type_value[..self.type_len] == b"error"
        {
            self.counts.error = true;
        }
        self.st = St::Outside;
    }

    /// Call at the end of the event's data.
    pub fn finish(&mut self) -> Counts {
        if self.st == St::Number {
            self.end_number();
        }
        self.counts.text = self.sums[ValueKind::Text as usize];
        self.counts.tool = self.sums[ValueKind::Tool as usize];
        self.counts.reasoning = self.sums[ValueKind::Reasoning as usize];
        self.counts
    }
}

#[cfg(test)]
mod tests;

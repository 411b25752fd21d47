//! The request body checked as JSON at memory speed, with the places of its top-level `model`
//! and `stream` values.
//!
//! Why not serde_json alone: an agent's request carries the whole conversation (tens of KB,
//! nearly all of it string contents), and skipping those strings eight bytes at a time was a
//! third of the proxy's CPU per request on such bodies, more than nginx spent on the whole
//! request. Here strings are read by `json_strings` (64 bytes at a time, short ones 8 at a
//! time), and the grammar between strings is a small state machine without recursion. It is
//! compiled twice, for the x86_64 baseline and for AVX2, and each body takes the copy its CPU
//! can run.
//!
//! What it accepts is exactly what `serde_json` accepts for the parts of a body Ringside skips
//! (a property test holds the two to the same answers): RFC 8259 JSON, one object, whitespace
//! around it; `\u` escapes need four hex digits but surrogates are not paired (serde_json does
//! not pair them in strings it skips). UTF-8 is the caller's check, made once for the whole
//! body. Top-level keys with escapes are decoded (by serde_json) before they are compared, so
//! `"mod\u0065l"` is `model`, as it is to an upstream.

use super::json_strings::{self as strings, Strings};
use std::ops::Range;

/// Where the values of the top-level fields Ringside routes on are (each value whole: a string
/// with its quotes, an array with its brackets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopFields {
    pub model: Option<Range<usize>>,
    pub stream: Option<Range<usize>>,
}

/// Why a body is not a JSON object, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub what: &'static str,
    pub at: usize,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Right after `{`: a key or `}`.
    FirstKey,
    /// After `,` in an object: a key.
    Key,
    /// After a key.
    Colon,
    /// Right after `[`: a value or `]`.
    FirstValue,
    Value,
    /// After a value inside a container: `,` or the container's end.
    Next,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TopKey {
    Model,
    Stream,
    Other,
}

/// Check that `b` is one JSON object and find its top-level `model` and `stream` values.
pub fn check_object(b: &[u8]) -> Result<TopFields, Invalid> {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::fast() {
        // SAFETY: the CPU has the instructions `check_avx2` is compiled for (just checked).
        return unsafe { check_avx2(b) };
    }
    // SAFETY: `Base` needs nothing beyond the baseline.
    unsafe { check::<strings::Base>(b) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,pclmulqdq")]
fn check_avx2(b: &[u8]) -> Result<TopFields, Invalid> {
    // SAFETY: this copy runs only on such a CPU (`check_object`).
    unsafe { check::<strings::Avx2>(b) }
}

/// # Safety
/// The CPU has what `S` needs (`Strings::end`).
#[inline(always)]
#[expect(
    clippy::too_many_lines,
    reason = "one byte-level state machine: split, its states would pass the parse position, \
              nesting and field state through every call on the per-request hot path"
)]
unsafe fn check<S: Strings>(b: &[u8]) -> Result<TopFields, Invalid> {
    let bad = |what, at| Err(Invalid { what, at });
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return bad("expected `{`", i);
    }
    i += 1;
    let mut nest = Nest::default();
    nest.push(true);
    let mut fields = TopFields::default();
    // The top-level key whose value comes next, and where that value starts.
    let mut key = TopKey::Other;
    let mut value_at = 0;
    let mut want = Want::FirstKey;
    loop {
        i = skip_ws(b, i);
        let Some(&c) = b.get(i) else {
            return bad("unexpected end", i);
        };
        match want {
            Want::FirstKey | Want::Key => {
                if c == b'}' && want == Want::FirstKey {
                    i += 1;
                } else if c == b'"' {
                    // SAFETY: `S` was picked for this CPU's instruction sets (`Strings`).
                    let end = unsafe { S::end(b, i + 1) }?;
                    if nest.depth() == 1 {
                        key = top_key(&b[i..end], i)?;
                        let seen = match key {
                            TopKey::Model => fields.model.is_some(),
                            TopKey::Stream => fields.stream.is_some(),
                            TopKey::Other => false,
                        };
                        if seen {
                            return bad("a repeated top-level `model` or `stream`", i);
                        }
                    }
                    i = end;
                    want = Want::Colon;
                    continue;
                } else {
                    return bad("expected a key", i);
                }
            }
            Want::Colon => {
                if c != b':' {
                    return bad("expected `:`", i);
                }
                i += 1;
                want = Want::Value;
                continue;
            }
            Want::FirstValue if c == b']' => i += 1,
            Want::FirstValue | Want::Value => {
                if nest.depth() == 1 {
                    value_at = i;
                }
                match c {
                    b'{' | b'[' => {
                        nest.push(c == b'{');
                        i += 1;
                        want = if c == b'{' {
                            Want::FirstKey
                        } else {
                            Want::FirstValue
                        };
                        continue;
                    }
                    // SAFETY: `S` was picked for this CPU's instruction sets (`Strings`).
                    b'"' => i = unsafe { S::end(b, i + 1) }?,
                    b't' => i = literal(b, i, b"true")?,
                    b'f' => i = literal(b, i, b"false")?,
                    b'n' => i = literal(b, i, b"null")?,
                    b'-' | b'0'..=b'9' => i = number_end(b, i)?,
                    _ => return bad("expected a value", i),
                }
                // A scalar value ends here; containers end below, at their closing byte.
                if nest.depth() == 1 {
                    record(&mut fields, key, value_at..i);
                }
                want = Want::Next;
                continue;
            }
            Want::Next => {
                let object = nest.top();
                match c {
                    b',' => {
                        i += 1;
                        want = if object { Want::Key } else { Want::Value };
                        continue;
                    }
                    b'}' if object => i += 1,
                    b']' if !object => i += 1,
                    _ if object => return bad("expected `,` or `}`", i),
                    _ => return bad("expected `,` or `]`", i),
                }
            }
        }
        // A container closed at `i - 1`.
        nest.pop();
        match nest.depth() {
            0 => break,
            1 => record(&mut fields, key, value_at..i),
            _ => {}
        }
        want = Want::Next;
    }
    let end = skip_ws(b, i);
    if end != b.len() {
        return bad("trailing characters after the object", end);
    }
    Ok(fields)
}

fn record(fields: &mut TopFields, key: TopKey, span: Range<usize>) {
    match key {
        TopKey::Model => fields.model = Some(span),
        TopKey::Stream => fields.stream = Some(span),
        TopKey::Other => {}
    }
}

/// A top-level key (with its quotes): one Ringside reads, or another. Escaped keys are decoded
/// as serde_json decodes them (a lone surrogate escape in a key is an error there too).
fn top_key(quoted: &[u8], at: usize) -> Result<TopKey, Invalid> {
    let plain = |k: &[u8]| match k {
        b"model" => TopKey::Model,
        b"stream" => TopKey::Stream,
        _ => TopKey::Other,
    };
    let inner = &quoted[1..quoted.len() - 1];
    if !inner.contains(&b'\\') {
        return Ok(plain(inner));
    }
    match serde_json::from_slice::<String>(quoted) {
        Ok(k) => Ok(plain(k.as_bytes())),
        Err(_) => Err(Invalid {
            what: "an invalid escape in a key",
            at,
        }),
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Invalid> {
    if b.get(i..i + word.len()) == Some(word) {
        Ok(i + word.len())
    } else {
        Err(Invalid {
            what: "expected `true`, `false` or `null`",
            at: i,
        })
    }
}

/// `b[i]` starts a number (`-` or a digit); returns where it ends.
fn number_end(b: &[u8], mut i: usize) -> Result<usize, Invalid> {
    let bad = |at| {
        Err(Invalid {
            what: "an invalid number",
            at,
        })
    };
    let digits = |mut i: usize| {
        while let Some(b'0'..=b'9') = b.get(i) {
            i += 1;
        }
        i
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        // One leading zero only.
        Some(b'0') => {
            i += 1;
            if let Some(b'0'..=b'9') = b.get(i) {
                return bad(i);
            }
        }
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return bad(i),
    }
    if b.get(i) == Some(&b'.') {
        let j = digits(i + 1);
        if j == i + 1 {
            return bad(j);
        }
        i = j;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let j = digits(i);
        if j == i {
            return bad(j);
        }
        i = j;
    }
    Ok(i)
}

/// Which containers are open, innermost last (true: an object). Bits inline for the first 256
/// levels, so a request body costs no allocation; deeper nesting, which serde_json's skipping
/// allows too, spills to the heap.
#[derive(Default)]
struct Nest {
    bits: [u64; 4],
    deeper: Vec<bool>,
    depth: usize,
}

impl Nest {
    fn depth(&self) -> usize {
        self.depth
    }

    fn push(&mut self, object: bool) {
        let d = self.depth;
        if d < 256 {
            let (w, bit) = (d / 64, 1u64 << (d % 64));
            if object {
                self.bits[w] |= bit;
            } else {
                self.bits[w] &= !bit;
            }
        } else {
            self.deeper.push(object);
        }
        self.depth += 1;
    }

    fn pop(&mut self) {
        if self.depth > 256 {
            self.deeper.pop();
        }
        self.depth -= 1;
    }

    /// Whether the innermost open container is an object (depth ≥ 1).
    fn top(&self) -> bool {
        let d = self.depth - 1;
        if d < 256 {
            self.bits[d / 64] & (1u64 << (d % 64)) != 0
        } else {
            self.deeper.last().copied().unwrap_or(false)
        }
    }
}

#[cfg(test)]
mod tests;

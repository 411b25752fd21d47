//! What a JSON key means to the stream guard, decided once per key with one table probe:
//! the key's length and its first and last four bytes pick the only candidate it can be
//! (a perfect hash built at compile time), and a full compare runs only for a candidate
//! longer than eight bytes. Most keys (`id`, `object`, `index`, `finish_reason`) mean nothing
//! and cost a multiply and a compare.

use super::{UsageKey, ValueKind};

/// What a key means for the value that follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KeyClass {
    pub value: ValueKind,
    pub usage: Option<UsageKey>,
    pub is_type: bool,
    pub flag: Flag,
}

/// What seeing the key itself says about the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flag {
    None,
    /// `error` (at the top level: an in-band error).
    Error,
    Usage,
    Choices,
}

pub(super) const PLAIN_KEY: KeyClass = KeyClass {
    value: ValueKind::Other,
    usage: None,
    is_type: false,
    flag: Flag::None,
};

const fn value(value: ValueKind) -> KeyClass {
    KeyClass {
        value,
        usage: None,
        is_type: false,
        flag: Flag::None,
    }
}

const fn flag(flag: Flag) -> KeyClass {
    KeyClass {
        value: ValueKind::Other,
        usage: None,
        is_type: false,
        flag,
    }
}

const fn usage(u: UsageKey) -> KeyClass {
    KeyClass {
        value: ValueKind::Other,
        usage: Some(u),
        is_type: false,
        flag: Flag::None,
    }
}

/// Every key that means something.
const KEYS: [(&[u8], KeyClass); 20] = [
    (b"content", value(ValueKind::Text)),
    (b"text", value(ValueKind::Text)),
    (b"delta", value(ValueKind::Text)),
    (b"refusal", value(ValueKind::Text)),
    (b"arguments", value(ValueKind::Tool)),
    (b"partial_json", value(ValueKind::Tool)),
    (b"thinking", value(ValueKind::Reasoning)),
    (b"reasoning", value(ValueKind::Reasoning)),
    (b"reasoning_content", value(ValueKind::Reasoning)),
    (b"reasoning_text", value(ValueKind::Reasoning)),
    (b"prompt_tokens", usage(UsageKey::Input)),
    (b"input_tokens", usage(UsageKey::Input)),
    (b"completion_tokens", usage(UsageKey::Output)),
    (b"output_tokens", usage(UsageKey::Output)),
    // OpenAI's `prompt_tokens_details` / `input_tokens_details`, Anthropic's `usage`.
    (b"cached_tokens", usage(UsageKey::Cached)),
    (b"cache_read_input_tokens", usage(UsageKey::Cached)),
    (
        b"type",
        KeyClass {
            value: ValueKind::Other,
            usage: None,
            is_type: true,
            flag: Flag::None,
        },
    ),
    (b"error", flag(Flag::Error)),
    (b"usage", flag(Flag::Usage)),
    (b"choices", flag(Flag::Choices)),
];

const MIN_LEN: usize = 4;
const MAX_LEN: usize = 23;
const SLOTS: usize = 64;
/// Chosen so that the 20 keys land in 20 different slots (the table build checks it).
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy)]
struct Slot {
    len: u8,
    word: u64,
    key: &'static [u8],
    class: KeyClass,
}

const EMPTY: Slot = Slot {
    len: 0,
    word: 0,
    key: b"",
    class: PLAIN_KEY,
};

/// The first and last four bytes (they overlap for keys under eight bytes).
#[inline(always)]
const fn word_of(k: &[u8]) -> u64 {
    let n = k.len();
    let head = u32::from_le_bytes([k[0], k[1], k[2], k[3]]);
    let tail = u32::from_le_bytes([k[n - 4], k[n - 3], k[n - 2], k[n - 1]]);
    head as u64 | (tail as u64) << 32
}

#[inline(always)]
const fn slot_of(word: u64, len: usize) -> usize {
    ((word ^ len as u64).wrapping_mul(MULTIPLIER) >> 58) as usize
}

const TABLE: [Slot; SLOTS] = {
    let mut t = [EMPTY; SLOTS];
    let mut i = 0;
    while i < KEYS.len() {
        let (k, class) = KEYS[i];
        assert!(k.len() >= MIN_LEN && k.len() <= MAX_LEN);
        let s = slot_of(word_of(k), k.len());
        assert!(
            t[s].len == 0,
            "two keys share a slot: pick another MULTIPLIER"
        );
        t[s] = Slot {
            len: k.len() as u8,
            word: word_of(k),
            key: k,
            class,
        };
        i += 1;
    }
    t
};

/// One probe for everything a key can mean.
#[inline(always)]
pub(super) fn class_of(key: &[u8]) -> KeyClass {
    let n = key.len();
    if !(MIN_LEN..=MAX_LEN).contains(&n) {
        return PLAIN_KEY;
    }
    let word = word_of(key);
    let s = &TABLE[slot_of(word, n)];
    // Up to eight bytes, the two words cover the whole key.
    if s.len as usize == n && s.word == word && (n <= 8 || s.key == key) {
        s.class
    } else {
        PLAIN_KEY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_found_and_near_misses_are_plain() {
        for (k, class) in KEYS {
            assert_eq!(class_of(k), class, "{}", String::from_utf8_lossy(k));
            // Same length, same first and last four bytes, different middle.
            if k.len() > 8 {
                let mut m = k.to_vec();
                m[5] ^= 1;
                assert_eq!(class_of(&m), PLAIN_KEY);
            }
            let mut longer = k.to_vec();
            longer.push(b's');
            assert_eq!(class_of(&longer), PLAIN_KEY);
            assert_eq!(class_of(&k[1..]), PLAIN_KEY);
        }
        for k in [
            &b""[..],
            b"id",
            b"object",
            b"index",
            b"finish_reason",
            b"Content",
            b"texts",
        ] {
            assert_eq!(class_of(k), PLAIN_KEY);
        }
    }
}

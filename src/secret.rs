//! What Ringside keeps of a secret: its SHA-256, never the secret. Client keys, lease owners and
//! session keys are looked up and stored by digest (hex where it is a store key).

use sha2::{Digest, Sha256};

/// SHA-256 of a key.
pub fn digest(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

/// Lower-case hex, in one allocation (this runs on the request path for pins and leases).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

//! Secrets the store must keep (refreshed OAuth tokens) are sealed with ChaCha20-Poly1305 under
//! a key from the environment: the store file alone never gives them away. The key is derived
//! from the operator's value with PBKDF2-HMAC-SHA256 (600,000 rounds) and a random salt kept in
//! the store (`seal/salt`, made at first use), so that a guessable passphrase is slow to try
//! and the same passphrase gives another key in another store. Each seal has a fresh random
//! nonce, kept in front of the ciphertext, and is bound to its row: the row's key is the
//! associated data, so a sealed record copied to another row does not open.
//!
//! Seals made before the salt and the row binding (a plain SHA-256 of the passphrase, no
//! associated data) still open, so that a restart does not lose a refreshed token; the next
//! refresh writes the new form.

use base64::Engine;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use std::num::NonZeroU32;

/// PBKDF2 rounds (OWASP's figure for PBKDF2-HMAC-SHA256): once per start.
const ROUNDS: u32 = 600_000;
/// The store row that keeps the salt.
pub const SALT_ROW: &str = "seal/salt";
/// What a seal of the current form starts with.
const V2: &str = "v2:";

/// A sealing key.
pub struct SealKey {
    key: LessSafeKey,
    /// The key of seals made before salts (opened, never made).
    legacy: LessSafeKey,
}

fn chacha(bytes: &[u8; 32]) -> LessSafeKey {
    // A 32-byte key is what the algorithm takes: this cannot fail.
    let key = UnboundKey::new(&CHACHA20_POLY1305, bytes)
        .unwrap_or_else(|_| unreachable!("a 32-byte ChaCha20-Poly1305 key"));
    LessSafeKey::new(key)
}

impl SealKey {
    /// The key for the operator's secret value and the store's salt.
    pub fn new(secret: &str, salt: &[u8]) -> SealKey {
        let mut derived = [0u8; 32];
        let rounds = NonZeroU32::new(ROUNDS).unwrap_or(NonZeroU32::MIN);
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            rounds,
            salt,
            secret.as_bytes(),
            &mut derived,
        );
        let mut material = b"ringside sealed store v1\0".to_vec();
        material.extend_from_slice(secret.as_bytes());
        SealKey {
            key: chacha(&derived),
            legacy: chacha(&crate::secret::digest(&material)),
        }
    }

    /// The salt kept in `store`, made (16 random bytes) if there is none yet.
    pub fn salt(store: &super::Store) -> Vec<u8> {
        let kept = store
            .get(SALT_ROW)
            .and_then(|v| v["salt"].as_str().map(str::to_string))
            .and_then(|h| unhex(&h));
        if let Some(salt) = kept {
            return salt;
        }
        let mut salt = [0u8; 16];
        if SystemRandom::new().fill(&mut salt).is_err() {
            // No random source: a salt from the clock is still one per store.
            salt[..16].copy_from_slice(&crate::clock::unix_ms().to_le_bytes().repeat(2));
        }
        store.put(
            SALT_ROW.to_string(),
            serde_json::json!({"salt": crate::secret::hex(&salt)}),
        );
        store.flush();
        salt.to_vec()
    }

    /// `plain` sealed for the store row `row`, as text (a version, then base64 of the nonce,
    /// ciphertext and tag); `None` if the system's random source fails.
    pub fn seal(&self, row: &str, plain: &[u8]) -> Option<String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(row.as_bytes()),
                &mut data,
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Some(format!(
            "{V2}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// The plain bytes of a seal this key made for `row`; `None` for another key, another row
    /// or a damaged seal.
    pub fn open(&self, row: &str, sealed: &str) -> Option<Vec<u8>> {
        match sealed.strip_prefix(V2) {
            Some(rest) => open_with(&self.key, row.as_bytes(), rest),
            None => open_with(&self.legacy, b"", sealed),
        }
    }
}

fn open_with(key: &LessSafeKey, aad: &[u8], text: &str) -> Option<Vec<u8>> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    if raw.len() < NONCE_LEN {
        return None;
    }
    let (nonce, data) = raw.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut data = data.to_vec();
    let plain = key.open_in_place(nonce, Aad::from(aad), &mut data).ok()?;
    Some(plain.to_vec())
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.is_empty() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: &[u8] = b"0123456789abcdef";

    #[test]
    fn a_seal_opens_with_its_key_salt_and_row_only_and_hides_the_text() {
        let k = SealKey::new("a long operator secret", SALT);
        let s = k
            .seal("oauth/claude/a", b"sk-ant-oat-secret")
            .expect("seal");
        assert!(!s.contains("sk-ant"));
        assert_eq!(
            k.open("oauth/claude/a", &s).as_deref(),
            Some(&b"sk-ant-oat-secret"[..])
        );
        // Copied to another row: does not open.
        assert_eq!(k.open("oauth/claude/b", &s), None);
        // Another passphrase, or the same one in another store (another salt).
        assert_eq!(
            SealKey::new("another secret value", SALT).open("oauth/claude/a", &s),
            None
        );
        assert_eq!(
            SealKey::new("a long operator secret", b"another salt....").open("oauth/claude/a", &s),
            None
        );
        // Two seals of one text differ (fresh nonces).
        assert_ne!(k.seal("r", b"x"), k.seal("r", b"x"));
        let mut damaged = s.clone();
        damaged.replace_range(20..21, if &s[20..21] == "A" { "B" } else { "A" });
        assert_eq!(k.open("oauth/claude/a", &damaged), None);
        assert_eq!(k.open("r", "v2:not base64!"), None);
    }

    #[test]
    fn a_seal_made_before_salts_still_opens() {
        // What the earlier form wrote: SHA-256 of the passphrase, no associated data.
        let k = SealKey::new("a long operator secret", SALT);
        let mut nonce = [7u8; NONCE_LEN];
        nonce[0] = 1;
        let mut data = b"old token".to_vec();
        k.legacy
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
            .expect("seal");
        let mut raw = nonce.to_vec();
        raw.extend_from_slice(&data);
        let old = base64::engine::general_purpose::STANDARD.encode(raw);
        assert_eq!(k.open("any/row", &old).as_deref(), Some(&b"old token"[..]));
    }

    #[test]
    fn salts_are_hex_in_the_store() {
        assert_eq!(unhex("00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }
}

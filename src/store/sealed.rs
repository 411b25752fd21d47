//! Secrets the store must keep (refreshed OAuth tokens) are sealed with ChaCha20-Poly1305 under
//! a key from the environment: the store file alone never gives them away. The key is derived
//! from the operator's value with SHA-256 (domain-separated); each seal has a fresh random
//! nonce, kept in front of the ciphertext.

use base64::Engine;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// A sealing key.
pub struct SealKey(LessSafeKey);

impl SealKey {
    /// The key for the operator's secret value.
    pub fn new(secret: &str) -> SealKey {
        let mut material = b"ringside sealed store v1\0".to_vec();
        material.extend_from_slice(secret.as_bytes());
        let digest = crate::secret::digest(&material);
        // A 32-byte key is what the algorithm takes: this cannot fail.
        let key = UnboundKey::new(&CHACHA20_POLY1305, &digest)
            .unwrap_or_else(|_| unreachable!("a 32-byte ChaCha20-Poly1305 key"));
        SealKey(LessSafeKey::new(key))
    }

    /// `plain` sealed, as base64 (nonce, then ciphertext and tag); `None` if the system's
    /// random source fails.
    pub fn seal(&self, plain: &[u8]) -> Option<String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let mut data = plain.to_vec();
        self.0
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Some(base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// The plain bytes of a seal made with this key; `None` for another key or a damaged seal.
    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .ok()?;
        if raw.len() < NONCE_LEN {
            return None;
        }
        let (nonce, data) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = data.to_vec();
        let plain = self.0.open_in_place(nonce, Aad::empty(), &mut data).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::SealKey;

    #[test]
    fn a_seal_opens_with_its_key_only_and_hides_the_text() {
        let k = SealKey::new("a long operator secret");
        let s = k.seal(b"sk-ant-oat-secret").expect("seal");
        assert!(!s.contains("sk-ant"));
        assert_eq!(k.open(&s).as_deref(), Some(&b"sk-ant-oat-secret"[..]));
        assert_eq!(SealKey::new("another secret value").open(&s), None);
        // Two seals of one text differ (fresh nonces).
        assert_ne!(k.seal(b"x"), k.seal(b"x"));
        let mut damaged = s.clone();
        damaged.replace_range(20..21, if &s[20..21] == "A" { "B" } else { "A" });
        assert_eq!(k.open(&damaged), None);
        assert_eq!(k.open("not base64!"), None);
    }
}

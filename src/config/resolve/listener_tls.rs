//! TLS on the data port (`[server] tls_cert_file`, `tls_key_file`): the certificate chain and
//! key are read and checked with the config, and the server config built once per config (a
//! reload reads the files again: a renewed certificate applies to new connections).

use super::super::problems::Problems;
use super::super::schema::ServerSection;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The data port's TLS config, when both files are set.
pub(in crate::config) fn listener_tls(
    p: &mut Problems,
    s: &ServerSection,
) -> Option<Arc<rustls::ServerConfig>> {
    let (cert_file, key_file) = match (&s.tls_cert_file, &s.tls_key_file) {
        (None, None) => return None,
        (Some(c), Some(k)) => (c, k),
        _ => {
            p.add(
                "server.tls_cert_file",
                "tls_cert_file and tls_key_file go together",
            );
            return None;
        }
    };
    let chain: Vec<CertificateDer<'static>> = match CertificateDer::pem_file_iter(cert_file) {
        Ok(certs) => certs.filter_map(Result::ok).collect(),
        Err(e) => {
            p.add(
                "server.tls_cert_file",
                format!("cannot read `{cert_file}`: {e}"),
            );
            return None;
        }
    };
    if chain.is_empty() {
        p.add(
            "server.tls_cert_file",
            format!("`{cert_file}` holds no PEM certificate"),
        );
        return None;
    }
    // (The key's own error could quote it: only its file is named.)
    let Ok(key) = PrivateKeyDer::from_pem_file(key_file) else {
        p.add(
            "server.tls_key_file",
            format!("`{key_file}` holds no readable PEM private key"),
        );
        return None;
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let built = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .and_then(|b| {
            b.with_no_client_auth()
                .with_single_cert(chain, key)
                .map_err(|e| e.to_string())
        });
    match built {
        Ok(mut cfg) => {
            // HTTP/1.1 only for now: a client offering h2 falls back to it.
            cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
            cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(64 * 1024);
            Some(Arc::new(cfg))
        }
        Err(e) => {
            p.add(
                "server.tls_cert_file",
                format!("the certificate and key: {e}"),
            );
            None
        }
    }
}

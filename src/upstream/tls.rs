//! The rustls client configuration, built once per process: ring provider, ALPN http/1.1,
//! webpki and/or system roots, plus an optional extra CA for private upstreams.

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use std::sync::Arc;

const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

fn add_pem_file(roots: &mut RootCertStore, path: &str) -> Result<usize, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read CA file {path}: {e}"))?
        .filter_map(Result::ok)
        .collect();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    Ok(added)
}

/// A core's own copy of the client config, with its own TLS session store
/// (`tls_sessions`): a burst of new connections resumes what the core's earlier ones made.
pub fn for_core(base: &rustls::ClientConfig) -> Arc<rustls::ClientConfig> {
    let mut cfg = base.clone();
    let sessions = Arc::new(super::tls_sessions::Sessions::default());
    cfg.resumption = rustls::client::Resumption::store(sessions);
    Arc::new(cfg)
}

/// Build the client config. `roots` is "webpki", "system" or "both".
pub fn client_config(
    roots: &str,
    ca_file: Option<&str>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut store = RootCertStore::empty();
    if roots == "webpki" || roots == "both" {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if roots == "system" || roots == "both" {
        let found = SYSTEM_BUNDLES
            .iter()
            .find(|p| std::path::Path::new(p).exists());
        match found {
            Some(p) => {
                add_pem_file(&mut store, p)?;
            }
            None => return Err("no system CA bundle found; use tls_roots = \"webpki\"".into()),
        }
    }
    if let Some(f) = ca_file
        && add_pem_file(&mut store, f)? == 0
    {
        return Err(format!("CA file {f} holds no usable certificate"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(store)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

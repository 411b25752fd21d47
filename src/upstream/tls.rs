//! The rustls client configuration, built once per process: ring provider, ALPN http/1.1,
//! webpki and/or system roots, plus an optional extra CA for private upstreams; each core's own
//! copy (its own TLS sessions), and a provider's own (its CA, its client certificate).

use super::tls_sessions::Sessions;
use crate::config::ProviderTls;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
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

/// Which protocols a connection offers in its TLS handshake (ALPN), by the provider's `http2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// `http/1.1` alone (`http2 = "never"`, and the side calls).
    Http1 = 0,
    /// `h2` first, then `http/1.1`: the server chooses (`auto`).
    Either = 1,
    /// `h2` alone (`always`).
    H2 = 2,
}

impl Alpn {
    fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            Alpn::Http1 => vec![b"http/1.1".to_vec()],
            Alpn::Either => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Alpn::H2 => vec![b"h2".to_vec()],
        }
    }
}

/// One client config per [`Alpn`], sharing one TLS session store.
#[derive(Clone)]
pub struct Configs {
    by_alpn: [Arc<rustls::ClientConfig>; 3],
    /// Their session store, where a connect waits for a ticket in a burst.
    pub sessions: Arc<Sessions>,
}

impl Configs {
    /// The config offering `alpn`.
    pub fn get(&self, alpn: Alpn) -> &Arc<rustls::ClientConfig> {
        &self.by_alpn[alpn as usize]
    }
}

/// `cfg` with each ALPN choice, all with one new session store (`tls_sessions`): a burst of
/// new connections resumes what the earlier ones made, whichever protocol they spoke. Each
/// asks the server for tickets enough for a burst (RFC 9149, `tls_sessions::ASK`).
fn with_sessions(cfg: &rustls::ClientConfig) -> Configs {
    let sessions = Arc::new(Sessions::default());
    let by_alpn = [Alpn::Http1, Alpn::Either, Alpn::H2].map(|alpn| {
        let mut c = cfg.clone();
        c.alpn_protocols = alpn.protocols();
        c.resumption = rustls::client::Resumption::store(sessions.clone());
        c.send_ticket_request = Some(super::tls_sessions::ASK);
        Arc::new(c)
    });
    Configs { by_alpn, sessions }
}

/// What a core opens TLS connections with: the client configs (its own session store) and the
/// trusted roots, from which a provider with TLS settings of its own gets its configs.
#[derive(Clone)]
pub struct CoreTls {
    pub configs: Configs,
    pub roots: Arc<RootCertStore>,
}

impl CoreTls {
    /// The config offering `alpn`.
    pub fn config(&self, alpn: Alpn) -> &Arc<rustls::ClientConfig> {
        self.configs.get(alpn)
    }
}

/// A core's own copy of the client configs, with its own TLS session store.
pub fn for_core(base: &CoreTls) -> CoreTls {
    CoreTls {
        configs: with_sessions(base.config(Alpn::Http1)),
        roots: base.roots.clone(),
    }
}

/// The trusted roots. `roots` is "webpki", "system" or "both"; `ca_file` adds a private CA.
fn root_store(roots: &str, ca_file: Option<&str>) -> Result<RootCertStore, String> {
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
    Ok(store)
}

fn builder() -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))
}

/// Build the process's client config. `roots` is "webpki", "system" or "both".
pub fn client_config(roots: &str, ca_file: Option<&str>) -> Result<CoreTls, String> {
    let store = root_store(roots, ca_file)?;
    let cfg = builder()?
        .with_root_certificates(store.clone())
        .with_no_client_auth();
    Ok(CoreTls {
        configs: with_sessions(&cfg),
        roots: Arc::new(store),
    })
}

/// A provider's own client configs (on a core: their own session store): the roots plus its CA,
/// and its client certificate (mTLS). The PEMs were read and checked with the config.
pub fn for_provider(roots: &RootCertStore, own: &ProviderTls) -> Result<Configs, String> {
    let mut store = roots.clone();
    if let Some(pem) = &own.ca_pem {
        let certs = CertificateDer::pem_slice_iter(pem).filter_map(Result::ok);
        store.add_parsable_certificates(certs);
    }
    let b = builder()?.with_root_certificates(store);
    let cfg = match (&own.client_cert_pem, &own.client_key_pem) {
        (Some(cert), Some(key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                .filter_map(Result::ok)
                .collect();
            let key = PrivateKeyDer::from_pem_slice(key.expose().as_bytes())
                .map_err(|e| format!("the client key does not read: {e}"))?;
            b.with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate does not fit its key: {e}"))?
        }
        _ => b.with_no_client_auth(),
    };
    Ok(with_sessions(&cfg))
}

/// What `e` says when it is the provider's TLS refusing Ringside's client credentials (an
/// alert it sent about a client certificate missing or not accepted): the same for every key
/// of the provider, since the certificate is the provider's setting. `None` for any other
/// failure. In TLS 1.3 the server judges the certificate after the client's handshake ended,
/// so its alert comes with the first read, not from the handshake.
pub fn refusal(e: &std::io::Error) -> Option<String> {
    use rustls::AlertDescription as A;
    let Some(rustls::Error::AlertReceived(alert)) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return None;
    };
    let name = match alert {
        A::CertificateRequired => {
            return Some(
                "the provider requires a TLS client certificate (certificate_required): set \
                 the provider's client_cert_file and client_key_file"
                    .into(),
            );
        }
        A::BadCertificate => "bad_certificate",
        A::UnsupportedCertificate => "unsupported_certificate",
        A::CertificateRevoked => "certificate_revoked",
        A::CertificateExpired => "certificate_expired",
        A::CertificateUnknown => "certificate_unknown",
        A::UnknownCA => "unknown_ca",
        A::AccessDenied => {
            // Not always about the certificate (an edge may refuse a server name so too).
            return Some(
                "the provider's TLS refused the connection (access_denied): check the \
                 provider's client_cert_file, client_key_file and tls_server_name"
                    .into(),
            );
        }
        _ => return None,
    };
    Some(format!(
        "the provider refused Ringside's TLS client certificate ({name}): check the \
         provider's client_cert_file and client_key_file"
    ))
}

#[cfg(test)]
mod tests {
    use super::refusal;
    use rustls::AlertDescription as A;
    use std::io;

    fn alert(a: A) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, rustls::Error::AlertReceived(a))
    }

    #[test]
    fn only_alerts_about_the_client_certificate_are_refusals() {
        let missing = refusal(&alert(A::CertificateRequired)).unwrap_or_default();
        assert!(
            missing.contains("requires a TLS client certificate"),
            "{missing}"
        );
        let bad = refusal(&alert(A::UnknownCA)).unwrap_or_default();
        assert!(
            bad.contains("refused Ringside's TLS client certificate (unknown_ca)"),
            "{bad}"
        );
        assert!(refusal(&alert(A::AccessDenied)).is_some());
        // The server's own trouble, or a failure of ours: not the certificate's.
        assert_eq!(refusal(&alert(A::InternalError)), None);
        assert_eq!(refusal(&alert(A::HandshakeFailure)), None);
        assert_eq!(
            refusal(&io::Error::other(
                "received fatal alert: CertificateRequired"
            )),
            None
        );
        assert_eq!(
            refusal(&io::Error::from(io::ErrorKind::ConnectionReset)),
            None
        );
    }
}

//! A provider's own TLS settings: a CA trusted for it alone (`ca_file`), a client certificate
//! for providers that ask for one (`client_cert_file`, `client_key_file`), and the name its
//! certificate carries when the URL names an address (`tls_server_name`). The files are read
//! and checked here, once: a core builds the provider's TLS config from their contents.

use super::super::Secret;
use super::super::problems::Problems;
use super::super::schema::ProviderSection;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::Arc;

/// A provider's own TLS settings (`ca_file`, `client_cert_file` and `client_key_file`,
/// `tls_server_name`), read and checked with the config: the files' contents, not their paths,
/// so that a core builds its TLS config without touching the disk.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderTls {
    pub ca_pem: Option<Vec<u8>>,
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Secret>,
    pub server_name: Option<String>,
}

impl std::fmt::Debug for ProviderTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.client_cert_pem.is_some())
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// Provider `ps`'s own TLS settings (at `at`; `tls`: its URL is `https://`), if it has any.
pub(in crate::config) fn provider_tls(
    p: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    tls: bool,
) -> Option<Arc<ProviderTls>> {
    let any = ps.ca_file.is_some()
        || ps.client_cert_file.is_some()
        || ps.client_key_file.is_some()
        || ps.tls_server_name.is_some();
    if !any {
        return None;
    }
    if !tls {
        p.add(
            format!("{at}.base_url"),
            "ca_file, client_cert_file, client_key_file and tls_server_name are for https:// providers",
        );
        return None;
    }
    let ca_pem = ps
        .ca_file
        .as_deref()
        .and_then(|f| certificates(p, &format!("{at}.ca_file"), f));
    let (client_cert_pem, client_key_pem) = match (
        ps.client_cert_file.as_deref(),
        ps.client_key_file.as_deref(),
    ) {
        (Some(c), Some(k)) => (
            certificates(p, &format!("{at}.client_cert_file"), c),
            key(p, &format!("{at}.client_key_file"), k),
        ),
        (None, None) => (None, None),
        _ => {
            p.add(
                format!("{at}.client_cert_file"),
                "client_cert_file and client_key_file go together",
            );
            (None, None)
        }
    };
    let server_name = ps.tls_server_name.clone();
    if let Some(n) = &server_name
        && ServerName::try_from(n.as_str()).is_err()
    {
        p.add(
            format!("{at}.tls_server_name"),
            format!("`{n}` is not a DNS name or an IP address"),
        );
    }
    Some(Arc::new(ProviderTls {
        ca_pem,
        client_cert_pem,
        client_key_pem,
        server_name,
    }))
}

fn read(p: &mut Problems, at: &str, file: &str) -> Option<Vec<u8>> {
    match std::fs::read(file) {
        Ok(b) => Some(b),
        Err(e) => {
            p.add(at.to_string(), format!("cannot read {file}: {e}"));
            None
        }
    }
}

/// A PEM file holding at least one certificate.
fn certificates(p: &mut Problems, at: &str, file: &str) -> Option<Vec<u8>> {
    let pem = read(p, at, file)?;
    let n = CertificateDer::pem_slice_iter(&pem)
        .filter(Result::is_ok)
        .count();
    if n == 0 {
        p.add(at.to_string(), format!("{file} holds no certificate (PEM)"));
        return None;
    }
    Some(pem)
}

/// A PEM file holding a private key (never shown in a problem).
fn key(p: &mut Problems, at: &str, file: &str) -> Option<Secret> {
    let pem = read(p, at, file)?;
    if PrivateKeyDer::from_pem_slice(&pem).is_err() {
        p.add(at.to_string(), format!("{file} holds no private key (PEM)"));
        return None;
    }
    match String::from_utf8(pem) {
        Ok(s) => Some(Secret::new(s)),
        Err(_) => {
            p.add(at.to_string(), format!("{file} is not a PEM text file"));
            None
        }
    }
}

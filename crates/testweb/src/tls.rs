//! The synthetic web over TLS: a certificate authority made up at start, a certificate for
//! every host name a client asks for, ALPN offering `h2` and `http/1.1` (or `http/1.1`
//! alone), and the pages' absolute links turned to `https`.
//!
//! Why a CA and a certificate per name rather than one self-signed certificate for
//! `*.test`: certificate verifiers (webpki, which rustls uses, like NSS) refuse a wildcard
//! with fewer than two labels after it, so `*.test` would match no `hN.test`; and a
//! certificate listing every host would outgrow a TLS handshake message on a web of 20,000
//! hosts. So the server holds one CA ([`TlsIdentity::ca_pem`] is what a client trusts) and
//! issues, on a connection's first use of a name (its SNI), a leaf certificate for exactly
//! that name, signed by the CA and cached; all leaves share one key, so issuing costs one
//! signature. A connection without SNI (to an IP address) gets the leaf for `localhost`
//! and `127.0.0.1`. rcgen makes the certificates, rustls (aws-lc-rs, the provider reqwest
//! already brings) speaks TLS through tokio-rustls.
//!
//! The generated pages spell links as `http://hN.test/…` (and variants of it); served over
//! TLS, [`https_links`] rewrites those spellings (and `Location`) to `https`, so a crawl
//! seeded with `https://` stays on TLS, while the request log, which carries no scheme,
//! still compares with the ground truth as it is.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::crypto::aws_lc_rs;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, SigningKey};

/// Whether and how a [`crate::TestWebServer`] speaks TLS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain HTTP/1.1.
    #[default]
    Off,
    /// TLS; ALPN offers `h2` and `http/1.1`, and the client's choice decides.
    H2,
    /// TLS; ALPN offers `http/1.1` only (a server that does not speak HTTP/2).
    Http1Only,
}

impl TlsMode {
    /// `off`, `h2` or `http1` (the CLI's spelling).
    pub fn parse(s: &str) -> Option<TlsMode> {
        match s {
            "off" => Some(TlsMode::Off),
            "h2" => Some(TlsMode::H2),
            "http1" => Some(TlsMode::Http1Only),
            _ => None,
        }
    }
}

/// The TLS set-up could not be made (certificate generation or rustls configuration).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("testweb TLS: cannot generate the certificate authority: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("testweb TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The server's TLS side: its rustls configuration and the CA a client must trust.
pub(crate) struct TlsIdentity {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) ca_pem: String,
}

impl TlsIdentity {
    pub(crate) fn new(mode: TlsMode) -> Result<TlsIdentity, TlsSetupError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "testweb synthetic web CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let ca_pem = ca.pem();
        let leaf_key = KeyPair::generate()?;
        let signing_key = aws_lc_rs::sign::any_supported_type(&PrivateKeyDer::Pkcs8(
            PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
        ))?;
        let issuer = LeafIssuer {
            ca,
            leaf_key,
            signing_key,
            issued: Mutex::new(HashMap::new()),
        };
        let no_sni = issuer.issue(&["localhost", "127.0.0.1"])?;
        let resolver = PerNameCertificates {
            issuer,
            no_sni: Arc::new(no_sni),
        };
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = match mode {
            TlsMode::H2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            TlsMode::Http1Only | TlsMode::Off => vec![b"http/1.1".to_vec()],
        };
        Ok(TlsIdentity {
            config: Arc::new(config),
            ca_pem,
        })
    }
}

/// Issues leaf certificates signed by the CA, one per name, on demand.
struct LeafIssuer {
    ca: CertifiedIssuer<'static, KeyPair>,
    leaf_key: KeyPair,
    signing_key: Arc<dyn SigningKey>,
    issued: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl LeafIssuer {
    fn issue(&self, names: &[&str]) -> Result<CertifiedKey, rcgen::Error> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or(""));
        let leaf = params.signed_by(&self.leaf_key, &*self.ca)?;
        let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone(), self.ca.der().clone()];
        Ok(CertifiedKey::new(chain, Arc::clone(&self.signing_key)))
    }

    /// The cached leaf for `name`, issued on first use.
    fn for_name(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.to_ascii_lowercase();
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(key) = issued.get(&name) {
            return Some(Arc::clone(key));
        }
        match self.issue(&[&name]) {
            Ok(key) => {
                let key = Arc::new(key);
                issued.insert(name, Arc::clone(&key));
                Some(key)
            }
            Err(e) => {
                // The handshake fails (no certificate): the client sees a TLS alert.
                tracing::warn!("testweb TLS: cannot issue a certificate for {name:?}: {e}");
                None
            }
        }
    }
}

struct PerNameCertificates {
    issuer: LeafIssuer,
    no_sni: Arc<CertifiedKey>,
}

impl fmt::Debug for PerNameCertificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PerNameCertificates")
    }
}

impl ResolvesServerCert for PerNameCertificates {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match client_hello.server_name() {
            Some(name) => self.issuer.for_name(name),
            None => Some(Arc::clone(&self.no_sni)),
        }
    }
}

/// `body` with every `http` URL spelling of the generated pages and `Location`s turned to
/// `https`: `http:`, `HTTP:` and `&#104;ttp:` gain their `s`, and the explicit default
/// port of `HTTP://H3.TEST:80/…` becomes `:443`. `None` when there is none (the bytes stay
/// as they are). Found with memchr's SIMD substring search, so the pass costs the server
/// about a memory scan per page rather than a byte-by-byte loop: the benchmark reads
/// the server's CPU per page as the price of TLS.
pub(crate) fn https_links(body: &[u8]) -> Option<Vec<u8>> {
    // (where the scheme's `ttp:` starts, upper case)
    let mut hits: Vec<(usize, bool)> = memchr::memmem::find_iter(body, b"ttp:")
        .map(|at| (at, false))
        .chain(memchr::memmem::find_iter(body, b"TTP:").map(|at| (at, true)))
        .filter(|&(at, _)| {
            (at >= 1 && matches!(body[at - 1], b'h' | b'H')) || body[..at].ends_with(b"&#104;")
        })
        .collect();
    if hits.is_empty() {
        return None;
    }
    hits.sort_unstable();
    let mut out = Vec::with_capacity(body.len() + hits.len() + 16);
    let mut copied = 0;
    for (at, upper) in hits {
        if at < copied {
            continue;
        }
        let colon = at + 3;
        out.extend_from_slice(&body[copied..colon]);
        out.push(if upper { b'S' } else { b's' });
        copied = colon;
        // `HTTP://HOST:80/`: the authority ends at the next `/` after `//`.
        let authority = colon + 3;
        if upper && body[colon..].starts_with(b"://") {
            let end = memchr::memchr(b'/', &body[authority.min(body.len())..])
                .map_or(body.len(), |i| authority + i);
            if body[..end].ends_with(b":80") {
                out.extend_from_slice(&body[copied..end - 3]);
                out.extend_from_slice(b":443");
                copied = end;
            }
        }
    }
    out.extend_from_slice(&body[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_spellings_turn_to_https() {
        let page = b"<a href=\"http://h1.test/p/2\">x</a> <A HREF=HTTP://H3.TEST:80/p/4> \
<a href='&#104;ttp:&#x2F;/h2.test/'> //h5.test/ /rel";
        let rewritten = https_links(page).unwrap();
        assert_eq!(
            String::from_utf8(rewritten).unwrap(),
            "<a href=\"https://h1.test/p/2\">x</a> <A HREF=HTTPS://H3.TEST:443/p/4> \
<a href='&#104;ttps:&#x2F;/h2.test/'> //h5.test/ /rel"
        );
        assert_eq!(https_links(b"no links here, only hosts.test"), None);
        assert_eq!(
            https_links(b"HTTP://H3.TEST:80").as_deref(),
            Some(&b"HTTPS://H3.TEST:443"[..])
        );
        assert_eq!(
            https_links(b"Location: http://127.0.0.1:80x/").as_deref(),
            Some(&b"Location: https://127.0.0.1:80x/"[..])
        );
    }

    #[test]
    fn alpn_offers_follow_the_mode() {
        let identity = TlsIdentity::new(TlsMode::H2).unwrap();
        assert!(identity.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(
            identity.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let http1 = TlsIdentity::new(TlsMode::Http1Only).unwrap();
        assert_eq!(http1.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}

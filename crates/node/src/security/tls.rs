//! TLS with rustls: the server's certificate and key, and the authority
//! that clients (peers, the command line) trust.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// Installs the TLS crypto provider (ring) once per process; every
/// client and server needs one before it is built.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub key: Option<PathBuf>,
    /// The certificate authority peers' certificates are checked against
    /// (PEM); without it, the system's roots.
    pub ca: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert and --tls-key go together")]
    Pair,
    #[error("cannot read {path}: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("TLS configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("{path} holds no certificate")]
    Empty { path: PathBuf },
    #[cfg(feature = "testsuite")]
    #[error("cannot make a certificate: {0}")]
    Generate(String),
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Read {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

impl TlsConfig {
    pub fn serves_tls(&self) -> bool {
        self.cert.is_some()
    }

    /// The server side, when a certificate is configured.
    pub fn server(&self) -> Result<Option<Arc<rustls::ServerConfig>>, TlsError> {
        install_crypto();
        let (cert, key) = match (&self.cert, &self.key) {
            (None, None) => return Ok(None),
            (Some(c), Some(k)) => (c, k),
            _ => return Err(TlsError::Pair),
        };
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Read {
            path: key.clone(),
            detail: e.to_string(),
        })?;
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs(cert)?, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(Arc::new(config)))
    }

    /// The certificates clients should trust (only these), if configured.
    pub fn trust(&self) -> Result<Option<Vec<reqwest::Certificate>>, TlsError> {
        let Some(path) = &self.ca else {
            return Ok(None);
        };
        let pem = std::fs::read(path).map_err(|e| TlsError::Read {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| TlsError::Read {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        if certs.is_empty() {
            return Err(TlsError::Empty { path: path.clone() });
        }
        Ok(Some(certs))
    }
}

/// A throwaway certificate authority and a certificate it signed for
/// `127.0.0.1` and `localhost`, written as PEM files: for benchmarks and
/// tests of TLS on one machine, never for a real deployment.
#[cfg(feature = "testsuite")]
pub struct LoopbackCa {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[cfg(feature = "testsuite")]
impl LoopbackCa {
    /// Writes `ca.pem`, `cert.pem` and `key.pem` into `dir`.
    pub fn create(dir: &Path) -> Result<LoopbackCa, TlsError> {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let failed = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "xarchive loopback CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?)
            .map_err(failed)?;
        let key = KeyPair::generate().map_err(failed)?;
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(failed)?
            .signed_by(&key, &ca)
            .map_err(failed)?;
        let paths = LoopbackCa {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        let write = |path: &Path, text: String| {
            std::fs::write(path, text).map_err(|e| TlsError::Read {
                path: path.to_owned(),
                detail: e.to_string(),
            })
        };
        write(&paths.ca, ca.pem())?;
        write(&paths.cert, cert.pem())?;
        write(&paths.key, key.serialize_pem())?;
        Ok(paths)
    }

    /// The configuration serving with this certificate and trusting this CA.
    pub fn config(&self) -> TlsConfig {
        TlsConfig {
            cert: Some(self.cert.clone()),
            key: Some(self.key.clone()),
            ca: Some(self.ca.clone()),
        }
    }
}

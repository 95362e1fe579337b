//! A throwaway certificate authority and a server certificate for
//! loopback, written as PEM files, for tests of TLS.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// PEM files of a test CA and a certificate it signed for `127.0.0.1`
/// and `localhost`.
pub struct TestCa {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    /// Writes `ca.pem`, `cert.pem` and `key.pem` into `dir`.
    pub fn create(dir: &Path) -> TestCa {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("empty SAN list");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "xarchive test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key"))
            .expect("self-signed CA");
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("loopback names");
        let cert = params.signed_by(&key, &ca).expect("signed certificate");
        let paths = TestCa {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        std::fs::write(&paths.ca, ca.pem()).expect("write ca.pem");
        std::fs::write(&paths.cert, cert.pem()).expect("write cert.pem");
        std::fs::write(&paths.key, key.serialize_pem()).expect("write key.pem");
        paths
    }
}

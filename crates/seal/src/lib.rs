//! What an archive seals and anyone checks with nothing but a trust list:
//! the keys (SM2 with SM3, Ed25519), sealed statements (a holding
//! archive's copy and answer, a receiving archive's certificate), the
//! cluster's signed trust list, the certificate's payload and QR code, and
//! its PDF. A crate of its own so that a verifier needs none of a domain's
//! machinery (`xarchive certificate verify` runs with no server).

pub mod certificate;
pub mod key;
pub mod pdf;
pub mod sealed;
pub mod statement;
pub mod trust;
pub mod verify;

pub use key::{Algorithm, BadSignature, KeyError, KeyId, PublicKey, SecretKey, SM2_DIST_ID};
pub use sealed::{seal, Opened, SealError};
pub use trust::{ArchiveEntry, KeyNotValid, KeyRecord, SignedTrustList, TrustError, TrustList};
pub use verify::{
    verify_answer, verify_certificate, verify_copy, Rejected, VerifiedCertificate, VerifiedCopy,
};

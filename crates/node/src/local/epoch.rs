//! How 64-bit identifiers (epochs) are written in JSON bodies.
//!
//! Epochs are random 64-bit values, almost all above 2^53, where a JSON
//! parser that keeps only IEEE doubles (JavaScript's, jq's) rounds them:
//! a client that sent such an epoch back to `/v1/filter/delta` would be
//! refused every time. So they are written as decimal strings, like the
//! `x-xarchive-epoch` header, and read from either form (earlier releases
//! wrote numbers). Counts and versions (which cannot reach 2^53) stay
//! numbers.

use serde::{Deserialize, Deserializer, Serializer};

/// An epoch as it goes into a JSON body built by hand.
pub fn json(epoch: u64) -> serde_json::Value {
    serde_json::Value::String(epoch.to_string())
}

/// `#[serde(with = "crate::local::epoch::u64_string")]`: written as a decimal
/// string; read from a string or (as written before) a number.
pub mod u64_string {
    use super::{Deserialize, Deserializer, Serializer};

    // serde's `with` hands the field over by reference.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(u64),
            Text(String),
        }
        match Either::deserialize(d)? {
            Either::Number(n) => Ok(n),
            Either::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// [`u64_string`] for an optional value (`null` when absent).
pub mod opt_u64_string {
    use super::{Deserialize, Deserializer, Serializer};

    // serde's `with` hands the field over by reference.
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super::u64_string")] u64);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(v)| v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(with = "u64_string")]
        epoch: u64,
        #[serde(with = "opt_u64_string")]
        replica: Option<u64>,
    }

    #[test]
    fn an_epoch_is_written_as_a_string_and_read_from_either_form() {
        let body = Body {
            epoch: 15506711840260162855,
            replica: None,
        };
        let text = serde_json::to_string(&body).unwrap();
        assert_eq!(text, r#"{"epoch":"15506711840260162855","replica":null}"#);
        assert_eq!(serde_json::from_str::<Body>(&text).unwrap(), body);
        let old = r#"{"epoch":15506711840260162855,"replica":15506711840260162855}"#;
        let read = serde_json::from_str::<Body>(old).unwrap();
        assert_eq!(read.replica, Some(15506711840260162855));
        assert!(serde_json::from_str::<Body>(r#"{"epoch":"-1","replica":null}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"epoch":"1e3","replica":null}"#).is_err());
    }
}

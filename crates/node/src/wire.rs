//! Forms of the HTTP API's JSON bodies that the server and its clients
//! must agree on.
//!
//! Epochs are random 64-bit values, almost all above 2^53, where a JSON
//! parser that keeps only IEEE doubles (JavaScript's, jq's) rounds them:
//! a client that sent such an epoch back to `/v1/filter/delta` would be
//! refused every time. So they are written as decimal strings, like the
//! `x-xarchive-epoch` header. Counts and versions (which cannot reach
//! 2^53) stay numbers.

use serde::{Deserialize, Deserializer, Serializer};

/// An epoch as it goes into a `json!` body.
pub fn epoch(epoch: u64) -> serde_json::Value {
    serde_json::Value::String(epoch.to_string())
}

/// `#[serde(with = "crate::wire::u64_string")]`: written as a decimal
/// string; read from a string or (as written before) a number.
pub mod u64_string {
    use super::*;

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

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(with = "super::u64_string")]
        epoch: u64,
    }

    #[test]
    fn an_epoch_is_written_as_a_string_and_read_from_either_form() {
        let body = Body {
            epoch: 15506711840260162855,
        };
        let text = serde_json::to_string(&body).unwrap();
        assert_eq!(text, r#"{"epoch":"15506711840260162855"}"#);
        assert_eq!(serde_json::from_str::<Body>(&text).unwrap(), body);
        let old = r#"{"epoch":15506711840260162855}"#;
        assert_eq!(serde_json::from_str::<Body>(old).unwrap(), body);
        assert!(serde_json::from_str::<Body>(r#"{"epoch":"-1"}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"epoch":"1e3"}"#).is_err());
    }
}

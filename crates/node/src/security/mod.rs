//! Who may do what: API tokens and roles, the cluster secret, rate limits
//! ([`auth`]), how members prove who they are ([`member`]), and TLS for
//! serving and for calling peers ([`tls`]). Plain decisions and
//! configurations; the HTTP layer turns refusals into responses.

pub mod auth;
pub mod member;
pub mod signing;
pub mod tls;

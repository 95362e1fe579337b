//! Who may do what: API tokens and roles, the cluster secret, rate limits
//! ([`auth`]), how members prove who they are ([`member`]), the keys an
//! archive seals what it releases with ([`seal`]), and TLS for serving and
//! for calling peers ([`tls`]). Plain decisions and
//! configurations; the HTTP layer turns refusals into responses.

pub mod auth;
pub mod member;
pub mod seal;
pub mod tls;

//! Redis: one multiplexed connection, re-established in the background
//! when lost; every call bounded by a timeout so a dead Redis costs a
//! lookup no more than that.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{CacheError, RecordCache};

pub struct RedisCache {
    connection: ConnectionManager,
    url: String,
}

impl RedisCache {
    /// Connects lazily: Redis may be down when the domain starts.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, CacheError> {
        let client = redis::Client::open(url).map_err(CacheError::from)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let connection = client
            .get_connection_manager_lazy(config)
            .map_err(CacheError::from)?;
        Ok(RedisCache {
            connection,
            url: url.to_owned(),
        })
    }
}

impl RecordCache for RedisCache {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, CacheError>> {
        let mut c = self.connection.clone();
        async move {
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<Vec<u8>>>(&mut c)
                .await
                .map_err(CacheError::from)
        }
        .boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        let mut c = self.connection.clone();
        async move {
            redis::cmd("SET")
                .arg(key)
                .arg(value)
                .arg("PX")
                .arg(u64::try_from(ttl.as_millis().max(1)).unwrap_or(u64::MAX))
                .query_async::<()>(&mut c)
                .await
                .map_err(CacheError::from)
        }
        .boxed()
    }

    fn evict<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<(), CacheError>> {
        let mut c = self.connection.clone();
        async move {
            redis::cmd("DEL")
                .arg(keys)
                .query_async::<u64>(&mut c)
                .await
                .map(|_| ())
                .map_err(CacheError::from)
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!("redis {}", self.url)
    }
}

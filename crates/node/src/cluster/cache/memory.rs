//! The in-process cache: moka, bounded by the bytes it holds.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{CacheError, RecordCache};

pub struct MemoryCache {
    cache: moka::future::Cache<String, Vec<u8>>,
    max_bytes: u64,
}

impl MemoryCache {
    /// Entries live `ttl`; the least used go first beyond `max_bytes`.
    pub fn new(max_bytes: u64, ttl: Duration) -> Self {
        MemoryCache {
            cache: moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|k: &String, v: &Vec<u8>| {
                    (k.len() + v.len()).try_into().unwrap_or(u32::MAX)
                })
                .time_to_live(ttl)
                .build(),
            max_bytes,
        }
    }
}

impl RecordCache for MemoryCache {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, CacheError>> {
        async move { Ok(self.cache.get(key).await) }.boxed()
    }

    /// The TTL is the cache's own (one for all entries).
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        _ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        async move {
            self.cache.insert(key.to_owned(), value).await;
            Ok(())
        }
        .boxed()
    }

    fn evict<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<(), CacheError>> {
        async move {
            for key in keys {
                self.cache.invalidate(key).await;
            }
            Ok(())
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!("memory ({} MiB)", self.max_bytes / (1024 * 1024))
    }
}

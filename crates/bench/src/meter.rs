//! A TCP link that counts the bytes it carries: put between a measured
//! domain and ZooKeeper (its `--zk` names the link), it tells what that
//! domain's reads cost ZooKeeper in bytes, for any build of the domain
//! (ZooKeeper's own `mntr` counts packets, not bytes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::task::AbortOnDropHandle;

/// Bytes carried so far, each way.
#[derive(Default)]
pub struct Carried {
    /// From the target (ZooKeeper) to whoever connected.
    pub down: AtomicU64,
    /// From whoever connected to the target.
    pub up: AtomicU64,
}

/// A listening link to `target`; it stops when dropped.
pub struct Meter {
    pub address: String,
    pub carried: Arc<Carried>,
    _accepting: AbortOnDropHandle<()>,
}

impl Meter {
    pub async fn to(target: &str) -> anyhow::Result<Meter> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let carried = Arc::new(Carried::default());
        let (target, counts) = (target.to_owned(), carried.clone());
        let accepting = tokio::spawn(async move {
            let mut links = tokio::task::JoinSet::new();
            while let Ok((inbound, _)) = listener.accept().await {
                let (target, counts) = (target.clone(), counts.clone());
                links.spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&target).await {
                        // Segments pass as they come: Nagle's algorithm on
                        // a hop the real link does not have could hold a
                        // pipelined request back for a delayed ACK.
                        let _ = inbound.set_nodelay(true);
                        let _ = outbound.set_nodelay(true);
                        carry(inbound, outbound, counts).await;
                    }
                });
                while links.try_join_next().is_some() {}
            }
        });
        Ok(Meter {
            address,
            carried,
            _accepting: AbortOnDropHandle::new(accepting),
        })
    }

    /// Bytes from the target so far.
    pub fn down(&self) -> u64 {
        self.carried.down.load(Ordering::Relaxed)
    }
}

/// Copies both ways until either side closes, counting.
async fn carry(inbound: TcpStream, outbound: TcpStream, counts: Arc<Carried>) {
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let up = {
        let counts = counts.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = in_read.read(&mut buf).await {
                counts.up.fetch_add(n as u64, Ordering::Relaxed);
                if out_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = out_write.shutdown().await;
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = out_read.read(&mut buf).await {
            counts.down.fetch_add(n as u64, Ordering::Relaxed);
            if in_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = in_write.shutdown().await;
    };
    tokio::join!(up, down);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_meter_carries_bytes_both_ways_and_counts_them() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(b"hello, hello").await.unwrap();
        });
        let meter = Meter::to(&target).await.unwrap();
        let mut client = TcpStream::connect(&meter.address).await.unwrap();
        client.write_all(b"hello").await.unwrap();
        let mut answer = vec![0u8; 12];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, b"hello, hello");
        assert_eq!(
            (meter.carried.up.load(Ordering::Relaxed), meter.down()),
            (5, 12)
        );
    }
}

//! A TCP link on loopback between one domain and another that a test can
//! cut and heal: a partition between two in-process domains, without
//! network namespaces. (Process-level partitions use namespaces; see the
//! fault test.) It also counts the requests sent through it and the bytes
//! answered, for a test of what an operation costs a server (ZooKeeper's
//! requests are frames led by their length).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Forwards connections made to [`address`](Self::address) to `target`
/// while healed; cutting it closes every connection and refuses new ones.
pub struct LoopbackLink {
    address: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    frames: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
}

impl LoopbackLink {
    /// A link to `target` (`host:port`), healed.
    pub fn to(target: &str) -> io::Result<LoopbackLink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?.to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let frames = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let (target, is_cut, streams) = (target.to_owned(), cut.clone(), open.clone());
        let (counted, bytes) = (frames.clone(), answered.clone());
        std::thread::spawn(move || {
            for incoming in listener.incoming() {
                let Ok(client) = incoming else { continue };
                if is_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                    let mut held = streams.lock().unwrap_or_else(|e| e.into_inner());
                    held.push(c2);
                    held.push(s2);
                }
                pump(&client, &server, Some(counted.clone()), None);
                pump(&server, &client, None, Some(bytes.clone()));
            }
        });
        Ok(LoopbackLink {
            address,
            cut,
            open,
            frames,
            answered,
        })
    }

    /// How many bytes the target has sent the clients through the link.
    pub fn bytes_answered(&self) -> u64 {
        self.answered.load(Ordering::SeqCst)
    }

    /// How many frames led by a 4-byte big-endian length (ZooKeeper's
    /// framing: one per request) the clients have sent through the link,
    /// pings left out.
    pub fn frames_sent(&self) -> u64 {
        self.frames.load(Ordering::SeqCst)
    }

    /// `host:port` to reach the target through the link.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Closes every connection through the link and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` into `to` on a thread of its own until either closes,
/// counting the length-led frames that pass into `frames` and the bytes
/// into `bytes`, if given.
fn pump(
    from: &TcpStream,
    to: &TcpStream,
    frames: Option<Arc<AtomicU64>>,
    bytes: Option<Arc<AtomicU64>>,
) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut counter = FrameCounter::default();
        let mut buf = [0u8; 16 << 10];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(frames) = &frames {
                frames.fetch_add(counter.take(&buf[..n]), Ordering::SeqCst);
            }
            if let Some(bytes) = &bytes {
                bytes.fetch_add(n as u64, Ordering::SeqCst);
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// ZooKeeper's `xid` of a ping: the session's keep-alive, sent every
/// third of its timeout whatever the client reads, so not counted.
const PING_XID: [u8; 4] = (-2i32).to_be_bytes();

/// Finds where frames led by a 4-byte big-endian length end in a stream
/// read in pieces of any size, and counts those that are not pings.
#[derive(Default)]
struct FrameCounter {
    /// The length bytes read so far of the next frame, then the first four
    /// bytes of its body (ZooKeeper's `xid`).
    header: Vec<u8>,
    /// Bytes left of the frame being read.
    left: u64,
}

impl FrameCounter {
    /// Takes in the next bytes; returns how many frames other than pings
    /// began in them.
    // `n` is at most `bytes.len()`: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    fn take(&mut self, mut bytes: &[u8]) -> u64 {
        let mut began = 0;
        while !bytes.is_empty() {
            if self.header.is_empty() && self.left > 0 {
                let n = self.left.min(bytes.len() as u64);
                self.left -= n;
                bytes = &bytes[n as usize..];
                continue;
            }
            let wanted = if self.header.len() < 4 { 4 } else { 8 };
            let n = (wanted - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() > 4 {
                self.left -= n as u64;
            }
            if self.header.len() == 4 {
                let length = u32::from_be_bytes([
                    self.header[0],
                    self.header[1],
                    self.header[2],
                    self.header[3],
                ]);
                self.left = u64::from(length);
                if self.left < 4 {
                    // Too short to be a ping.
                    began += 1;
                    self.header.clear();
                }
            } else if self.header.len() == 8 {
                began += u64::from(self.header[4..] != PING_XID);
                self.header.clear();
            }
        }
        began
    }
}

impl Drop for LoopbackLink {
    fn drop(&mut self) {
        self.cut();
    }
}

#[cfg(test)]
mod tests {
    use super::FrameCounter;

    #[test]
    fn frames_but_pings_are_counted_however_the_stream_is_cut_into_reads() {
        let ping = [&(-2i32).to_be_bytes()[..], &11i32.to_be_bytes()].concat();
        let mut stream = Vec::new();
        for body in [&b"abc"[..], b"", &ping, b"0123456789", &ping, b"wxyz"] {
            stream.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
            stream.extend_from_slice(body);
        }
        for piece in 1..=stream.len() {
            let mut counter = FrameCounter::default();
            let counted: u64 = stream.chunks(piece).map(|c| counter.take(c)).sum();
            assert_eq!(counted, 4, "read {piece} bytes at a time");
        }
    }
}

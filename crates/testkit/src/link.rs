//! A TCP link on loopback between one domain and another that a test can
//! cut and heal: a partition between two in-process domains, without
//! network namespaces. (Process-level partitions use namespaces; see the
//! fault test.)

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Forwards connections made to [`address`](Self::address) to `target`
/// while healed; cutting it closes every connection and refuses new ones.
pub struct LoopbackLink {
    address: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl LoopbackLink {
    /// A link to `target` (`host:port`), healed.
    pub fn to(target: &str) -> io::Result<LoopbackLink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?.to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (target, is_cut, streams) = (target.to_owned(), cut.clone(), open.clone());
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
                pump(&client, &server);
                pump(&server, &client);
            }
        });
        Ok(LoopbackLink { address, cut, open })
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

/// Copies `from` into `to` on a thread of its own until either closes.
fn pump(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}

impl Drop for LoopbackLink {
    fn drop(&mut self) {
        self.cut();
    }
}

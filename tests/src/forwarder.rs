//! A loopback TCP forwarder with a stable port whose target can be switched, cutting the connections it carries: the stable address (a virtual IP, a DNS name) that clients of a promoted replica reconnect to.
//!
//! Plain threads, so it serves plain and `#[tokio::test]` tests alike. It only
//! ever connects to the loopback port it was given.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long connecting to the target may take before the client is turned away.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Forwards every connection to its port on to the current target port.
pub struct Forwarder {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    stopping: AtomicBool,
    next_id: AtomicU64,
    /// The target and the connections to it, under one lock: a connection
    /// accepted during a switch is either cut by it or made to the new target.
    routes: Mutex<Routes>,
}

struct Routes {
    target: u16,
    /// Both sockets of every forwarded connection, to cut them on a switch.
    open: HashMap<u64, (TcpStream, TcpStream)>,
}

impl Forwarder {
    /// Listens on a free loopback port and forwards to `127.0.0.1:target`.
    pub fn start(target: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let port = listener.local_addr().expect("a bound address").port();
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            routes: Mutex::new(Routes {
                target,
                open: HashMap::new(),
            }),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("forwarder-{port}"))
                .spawn(move || accept_loop(&listener, &shared))
                .expect("spawning the forwarder thread")
        };
        Forwarder {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The stable port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port connections are forwarded to now.
    pub fn target(&self) -> u16 {
        self.shared.routes().target
    }

    /// Sends new connections to `target` and cuts every open one, as a
    /// moved virtual IP would: clients see their connection drop and
    /// reconnect to the new target through the same address.
    pub fn switch_to(&self, target: u16) {
        let mut routes = self.shared.routes();
        routes.target = target;
        routes.cut_all();
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor blocked in accept(); it sees `stopping` and ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.shared.routes().cut_all();
    }
}

impl Shared {
    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Routes {
    fn cut_all(&mut self) {
        for (_, (client, server)) in self.open.drain() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        // Connecting under the lock: a switch waits for this connection to
        // be registered (and then cuts it), or this one sees the new target.
        let mut routes = shared.routes();
        let server = ("127.0.0.1", routes.target)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .and_then(|addr| TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).ok());
        // An unreachable target: the client sees its connection closed, as
        // it would connecting to a dead server's address.
        let Some(server) = server else { continue };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(client_copy), Ok(server_copy)) = (client.try_clone(), server.try_clone()) else {
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        routes.open.insert(id, (client_copy, server_copy));
        drop(routes);
        spawn_pump(shared, id, &client, &server);
        spawn_pump(shared, id, &server, &client);
    }
}

/// Copies `from` to `to` until either side closes, then closes both.
fn spawn_pump(shared: &Arc<Shared>, id: u64, from: &TcpStream, to: &TcpStream) {
    let (Ok(mut reader), Ok(mut writer)) = (from.try_clone(), to.try_clone()) else {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
        return;
    };
    let shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name(format!("forward-{id}"))
        .spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if writer.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = reader.shutdown(Shutdown::Both);
            let _ = writer.shutdown(Shutdown::Both);
            shared.routes().open.remove(&id);
        });
    if spawned.is_err() {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}

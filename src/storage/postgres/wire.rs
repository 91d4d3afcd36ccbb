//! A pooled PostgreSQL connection driven by the thread that uses it, as libpq does: the caller
//! writes its request and reads the answer itself, waiting on the socket with `poll(2)`, instead of
//! handing every round trip to an I/O thread and being woken by it (two thread wake-ups a round
//! trip, which on a small machine cost more than the round trip: docs/scale-out.md, section 10).
//!
//! tokio-postgres speaks the protocol. This module gives it a non-blocking socket that needs no
//! reactor (a read or write that would block is `Pending`) and runs a request together with its
//! connection until the request's answer is in. A connection is used by one thread at a time (the
//! pool hands it out), so nothing else polls it meanwhile.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use super::tls::{Tls, TlsStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, LoadBalanceHosts, TargetSessionAttrs};

/// A connected socket in non-blocking mode.
pub struct Socket {
    stream: Stream,
    /// Set when a write would have blocked: the wait is then for room to write too.
    write_blocked: Arc<AtomicBool>,
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }

    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// `Pending` for an operation that would block (the caller waits on the socket, then asks again).
fn ready<T>(r: io::Result<T>) -> Poll<io::Result<T>> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            // at most 16 KiB zeroed per read, however large the buffer grew
            let room = buf.remaining().min(16 * 1024);
            match ready(this.stream.io().read(buf.initialize_unfilled_to(room))) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Poll::Ready(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match ready(this.stream.io().write(data)) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Poll::Pending => {
                    this.write_blocked.store(true, Ordering::Relaxed);
                    return Poll::Pending;
                }
                done => return done,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // a socket keeps nothing back once written
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shut = match &self.stream {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
        Poll::Ready(match shut {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

/// The socket's side of a connection: what a request is run with.
pub struct Wire {
    connection: Option<tokio_postgres::Connection<Socket, TlsStream<Socket>>>,
    waiter: Waiter,
}

/// Waits until the socket can be read (or written, when a write would have blocked).
#[derive(Clone)]
struct Waiter {
    fd: RawFd,
    write_blocked: Arc<AtomicBool>,
}

impl Waiter {
    fn wait(&self) {
        let mut events = libc::POLLIN;
        if self.write_blocked.swap(false, Ordering::Relaxed) {
            events |= libc::POLLOUT;
        }
        let mut p = libc::pollfd { fd: self.fd, events, revents: 0 };
        // SAFETY: one initialised pollfd, alive for the whole call; the descriptor is the
        // connection's socket, open while its connection is (`run` never waits once the
        // connection has ended; an error or a timeout only loops)
        unsafe {
            libc::poll(&mut p, 1, 1000);
        }
    }
}

/// Polls `f` with a waker that does nothing: whoever polls waits on the socket instead.
fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    f.poll(&mut cx)
}

/// A waker that records that it was woken: the request and its connection hand each other work
/// through channels (a response in parts, a follow-up request), which the socket does not show.
struct Woken(AtomicBool);

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Wire {
    /// Runs `f`, a request on this connection's client, to its answer, writing the request and
    /// reading the answer meanwhile. It waits on the socket only when neither side was woken.
    pub fn run<F: Future>(&mut self, f: F) -> F::Output {
        let woken = Arc::new(Woken(AtomicBool::new(false)));
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        loop {
            woken.0.store(false, Ordering::Relaxed);
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
            let Some(connection) = self.connection.as_mut() else {
                // the connection has ended: the request fails at once
                return futures::executor::block_on(f);
            };
            if let Poll::Ready(ended) = Pin::new(connection).poll(&mut cx) {
                if let Err(e) = ended {
                    tracing::warn!(error = %super::plain(&e), "a PostgreSQL connection ended");
                }
                self.connection = None;
                continue;
            }
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
            if !woken.0.load(Ordering::Relaxed) {
                self.waiter.wait();
            }
        }
    }
}

/// Connects to the first of `config`'s hosts that answers and signs in, over TLS as `tls` and the
/// configuration's `sslmode` say (a Unix socket never: PostgreSQL offers none there).
pub fn connect(config: &tokio_postgres::Config, tls: &Tls) -> Result<(tokio_postgres::Client, Wire), String> {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<Host> = if config.get_hostaddrs().is_empty() {
        config.get_hosts().to_vec()
    } else {
        config.get_hostaddrs().iter().map(|ip| Host::Tcp(ip.to_string())).collect()
    };
    if hosts.is_empty() {
        return Err("the database URL names no host".into());
    }
    let setup = TcpSetup::of(config);
    let mut last = String::new();
    for i in order(hosts.len(), config.get_load_balance_hosts()) {
        let host = &hosts[i];
        // the name the server's certificate is checked against: the host's, even when it was
        // reached by `hostaddr`
        let name = match (config.get_hosts().get(i), host) {
            (Some(Host::Tcp(name)), _) | (_, Host::Tcp(name)) => Some(name.as_str()),
            _ => None,
        };
        match open(host, port(i), &setup) {
            Ok(stream) => match handshake(config, stream, tls, name) {
                // `target_session_attrs=read-write`: a server that takes no writes (a standby, or
                // one set read-only) is passed over for the next host, as libpq does
                Ok((client, mut wire)) if config.get_target_session_attrs() == TargetSessionAttrs::ReadWrite => {
                    match wire.run(client.simple_query("SHOW transaction_read_only")) {
                        Ok(rows) if !read_only(&rows) => return Ok((client, wire)),
                        Ok(_) => {
                            last = format!(
                                "PostgreSQL at {} takes no writes (target_session_attrs=read-write asks for one that does)",
                                shown(host, port(i))
                            )
                        }
                        Err(e) => last = super::plain(&e),
                    }
                }
                Ok(connected) => return Ok(connected),
                Err(e) => last = e,
            },
            Err(e) => last = format!("cannot reach PostgreSQL at {}: {e}", shown(host, port(i))),
        }
    }
    Err(last)
}

/// The order the hosts are tried in: as listed, or with `load_balance_hosts=random` shuffled
/// for each connection, as libpq does, so a pool's connections spread over the servers.
fn order(n: usize, balance: LoadBalanceHosts) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    spread(&mut order, balance == LoadBalanceHosts::Random);
    order
}

/// Shuffles `items` (hosts, or the addresses a name resolves to) when `random`.
fn spread<T>(items: &mut [T], random: bool) {
    if random {
        use rand::seq::SliceRandom;
        items.shuffle(&mut rand::rng());
    }
}

/// Whether `SHOW transaction_read_only` answered `on`.
fn read_only(rows: &[tokio_postgres::SimpleQueryMessage]) -> bool {
    rows.iter().any(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0) == Some("on"),
        _ => false,
    })
}

fn shown(host: &Host, port: u16) -> String {
    match host {
        Host::Tcp(h) => format!("{h}:{port}"),
        Host::Unix(dir) => dir.join(format!(".s.PGSQL.{port}")).display().to_string(),
    }
}

/// What a pooled TCP connection is set up with, from the URL, as libpq and tokio-postgres set
/// up theirs: TCP keepalives (`keepalives`, on by default; `keepalives_idle`, 2 hours by default;
/// `keepalives_interval`, `keepalives_retries`), so the kernel finds a connection dropped while it
/// sat idle; `tcp_user_timeout`, so a request sent on a connection that died is failed after that
/// long instead of waiting for TCP's own retries (Linux); `load_balance_hosts=random`, which also
/// shuffles the addresses one host name resolves to.
struct TcpSetup {
    keepalive: Option<socket2::TcpKeepalive>,
    user_timeout: Option<std::time::Duration>,
    connect_timeout: Option<std::time::Duration>,
    shuffle: bool,
}

impl TcpSetup {
    fn of(config: &tokio_postgres::Config) -> TcpSetup {
        let keepalive = config.get_keepalives().then(|| {
            let mut k = socket2::TcpKeepalive::new().with_time(config.get_keepalives_idle());
            if let Some(interval) = config.get_keepalives_interval() {
                k = k.with_interval(interval);
            }
            if let Some(retries) = config.get_keepalives_retries() {
                k = k.with_retries(retries);
            }
            k
        });
        TcpSetup {
            keepalive,
            user_timeout: config.get_tcp_user_timeout().copied(),
            connect_timeout: config.get_connect_timeout().copied(),
            shuffle: config.get_load_balance_hosts() == LoadBalanceHosts::Random,
        }
    }

    fn connect(&self, addr: &SocketAddr) -> io::Result<TcpStream> {
        let s = match self.connect_timeout {
            Some(t) => TcpStream::connect_timeout(addr, t)?,
            None => TcpStream::connect(addr)?,
        };
        s.set_nodelay(true)?;
        let sock = socket2::SockRef::from(&s);
        if let Some(k) = &self.keepalive {
            sock.set_tcp_keepalive(k)?;
        }
        #[cfg(target_os = "linux")]
        if let Some(t) = self.user_timeout {
            sock.set_tcp_user_timeout(Some(t))?;
        }
        Ok(s)
    }
}

fn open(host: &Host, port: u16, setup: &TcpSetup) -> io::Result<Stream> {
    match host {
        Host::Unix(dir) => Ok(Stream::Unix(UnixStream::connect(dir.join(format!(".s.PGSQL.{port}")))?)),
        Host::Tcp(name) => {
            let mut addrs: Vec<SocketAddr> = (name.as_str(), port).to_socket_addrs()?.collect();
            spread(&mut addrs, setup.shuffle);
            let mut last = io::Error::new(io::ErrorKind::NotFound, "the host name has no address");
            for addr in addrs {
                match setup.connect(&addr) {
                    Ok(s) => return Ok(Stream::Tcp(s)),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// Signs in on a connected stream (TLS first when asked for, the startup messages,
/// authentication).
fn handshake(
    config: &tokio_postgres::Config,
    stream: Stream,
    tls: &Tls,
    name: Option<&str>,
) -> Result<(tokio_postgres::Client, Wire), String> {
    let unix = matches!(stream, Stream::Unix(_));
    match &stream {
        Stream::Tcp(s) => s.set_nonblocking(true),
        Stream::Unix(s) => s.set_nonblocking(true),
    }
    .map_err(|e| e.to_string())?;
    let waiter = Waiter { fd: stream.fd(), write_blocked: Arc::new(AtomicBool::new(false)) };
    let socket = Socket { stream, write_blocked: waiter.write_blocked.clone() };
    // no TLS on a Unix socket; over TCP the mode stands (without a name, TLS fails closed)
    let mut plain = config.clone();
    let config = if unix { plain.ssl_mode(tokio_postgres::config::SslMode::Disable) } else { config };
    let mut signing_in = std::pin::pin!(config.connect_raw(socket, tls.connect_to(name.unwrap_or_default())));
    loop {
        if let Poll::Ready(out) = poll_once(signing_in.as_mut()) {
            let (client, connection) = out.map_err(|e| super::plain(&e))?;
            return Ok((client, Wire { connection: Some(connection), waiter }));
        }
        waiter.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn opened(url: &str, listener: &std::net::TcpListener) -> TcpStream {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let port = listener.local_addr().unwrap().port();
        let Stream::Tcp(s) = open(&Host::Tcp("127.0.0.1".into()), port, &TcpSetup::of(&config)).unwrap() else {
            panic!("a TCP host opens a TCP stream")
        };
        s
    }

    #[test]
    fn hosts_are_tried_in_order_unless_the_url_asks_for_random() {
        assert_eq!(order(3, LoadBalanceHosts::Disable), vec![0, 1, 2]);
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut o = order(3, LoadBalanceHosts::Random);
            firsts.insert(o[0]);
            o.sort();
            assert_eq!(o, vec![0, 1, 2], "every host, once");
        }
        assert_eq!(firsts.len(), 3, "each host comes first sometimes");
        let config: tokio_postgres::Config = "postgres://u@a,b/db?load_balance_hosts=random".parse().unwrap();
        assert_eq!(config.get_load_balance_hosts(), LoadBalanceHosts::Random);
    }

    #[test]
    fn pooled_connections_keep_alive_and_time_out_as_the_url_says() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // by default: on, after 2 hours idle (libpq's and tokio-postgres's default)
        let stream = opened("postgres://u@127.0.0.1/db", &listener);
        let s = socket2::SockRef::from(&stream);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), Duration::from_secs(7200));
        assert_eq!(s.tcp_user_timeout().unwrap(), None, "the kernel's own retries unless asked");
        // the URL's settings
        let stream = opened(
            "postgres://u@127.0.0.1/db?keepalives_idle=30&keepalives_interval=5&keepalives_retries=3&tcp_user_timeout=20",
            &listener,
        );
        let s = socket2::SockRef::from(&stream);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), Duration::from_secs(30));
        assert_eq!(s.tcp_keepalive_interval().unwrap(), Duration::from_secs(5));
        assert_eq!(s.tcp_keepalive_retries().unwrap(), 3);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(Duration::from_secs(20)));
        // turned off
        let stream = opened("postgres://u@127.0.0.1/db?keepalives=0", &listener);
        assert!(!socket2::SockRef::from(&stream).keepalive().unwrap());
    }
}

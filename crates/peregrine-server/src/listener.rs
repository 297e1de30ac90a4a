//! Listening sockets: bound by the engine (TCP with `SO_REUSEPORT`, one per worker; Unix domain
//! sockets), or handed to it already bound (listener injection: a `std::net::TcpListener` or
//! `UnixListener` of the application's, systemd socket activation, or a listener inherited from
//! the process being replaced in a zero-downtime restart).

use crate::config::ListenAddr;
use crate::transport::{Accepted, Stream};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// A bound, listening socket the server accepts from.
///
/// ```
/// use peregrine_server::Listener;
/// let listener = Listener::from(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
/// assert!(matches!(listener.local_addr().unwrap(), peregrine_server::config::ListenAddr::Tcp(_)));
/// ```
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(std::net::TcpListener),
    /// A Unix domain socket listener.
    Unix(UnixListener),
}

impl From<std::net::TcpListener> for Listener {
    fn from(l: std::net::TcpListener) -> Self {
        Listener::Tcp(l)
    }
}

impl From<UnixListener> for Listener {
    fn from(l: UnixListener) -> Self {
        Listener::Unix(l)
    }
}

impl Listener {
    /// Binds a TCP listener with `SO_REUSEPORT` (so that several, one per worker, share the
    /// address and the kernel spreads connections over them) and `SO_REUSEADDR`.
    pub fn bind_tcp(addr: SocketAddr, backlog: u32) -> io::Result<Listener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(backlog.min(i32::MAX as u32) as i32)?;
        Ok(Listener::Tcp(socket.into()))
    }

    /// Binds a Unix domain socket at `path`. A socket file left by a server that is gone (nothing
    /// accepts on it) is replaced; one that a live server listens on is `AddrInUse`.
    pub fn bind_unix(path: &Path, backlog: u32) -> io::Result<Listener> {
        let addr = SockAddr::unix(path)?;
        if path.exists() {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{}: a server listens there", path.display()),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path)?;
                }
                Err(e) => return Err(e),
            }
        }
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr)?;
        socket.listen(backlog.min(i32::MAX as u32) as i32)?;
        Ok(Listener::Unix(UnixListener::from(OwnedFd::from(socket))))
    }

    /// Binds what `addr` names (see [`Listener::bind_tcp`], [`Listener::bind_unix`]).
    pub fn bind(addr: &ListenAddr, backlog: u32) -> io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(a) => Listener::bind_tcp(*a, backlog),
            ListenAddr::Unix(p) => Listener::bind_unix(p, backlog),
        }
    }

    /// The listeners passed by systemd socket activation (`LISTEN_PID` = this process,
    /// `LISTEN_FDS` = n: file descriptors 3 to 3 + n − 1), or `None` when the environment passes
    /// none to this process. The descriptors are taken at most once per process; a second call
    /// returns `None`.
    ///
    /// A process handing its listener to its replacement (zero-downtime restart) uses the same
    /// convention: the listener at descriptor 3 (without close-on-exec), `LISTEN_FDS=1`, and
    /// `LISTEN_PID` set to the new process's id (for example by a shell's `exec`).
    pub fn from_systemd_env() -> io::Result<Option<Vec<Listener>>> {
        static TAKEN: AtomicBool = AtomicBool::new(false);
        let Some(n) = listen_fds(
            std::env::var("LISTEN_PID").ok().as_deref(),
            std::env::var("LISTEN_FDS").ok().as_deref(),
            std::process::id(),
        )?
        else {
            return Ok(None);
        };
        if TAKEN.swap(true, Ordering::AcqRel) {
            return Ok(None);
        }
        let mut listeners = Vec::with_capacity(n);
        for fd in 3..3 + n as RawFd {
            // SAFETY: by the socket-activation protocol the descriptors 3..3+n are open, belong
            // to this process and are given to it to own; `TAKEN` makes sure they are taken
            // once, so no other owner exists.
            let socket = unsafe { Socket::from_raw_fd(fd) };
            listeners.push(Listener::from_socket(socket)?);
        }
        Ok(Some(listeners))
    }

    /// A listener from an inherited socket, by its address family.
    fn from_socket(socket: Socket) -> io::Result<Listener> {
        let fd = socket.as_raw_fd();
        if !socket.is_listener()? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inherited descriptor {fd} is not a listening socket"),
            ));
        }
        socket.set_nonblocking(true)?;
        socket.set_cloexec(true)?;
        match socket.local_addr()?.domain() {
            Domain::IPV4 | Domain::IPV6 => Ok(Listener::Tcp(socket.into())),
            Domain::UNIX => Ok(Listener::Unix(UnixListener::from(OwnedFd::from(socket)))),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("inherited descriptor {fd} is neither TCP nor a Unix socket"),
            )),
        }
    }

    /// Another handle on the same listening socket (`dup`): several workers accept from one
    /// injected listener this way.
    pub fn try_clone(&self) -> io::Result<Listener> {
        Ok(match self {
            Listener::Tcp(l) => Listener::Tcp(l.try_clone()?),
            Listener::Unix(l) => Listener::Unix(l.try_clone()?),
        })
    }

    /// Where the listener listens.
    pub fn local_addr(&self) -> io::Result<ListenAddr> {
        Ok(match self {
            Listener::Tcp(l) => ListenAddr::Tcp(l.local_addr()?),
            Listener::Unix(l) => ListenAddr::Unix(
                l.local_addr()?
                    .as_pathname()
                    .map_or_else(PathBuf::new, Path::to_path_buf),
            ),
        })
    }

    /// Registers the listener with the current tokio runtime.
    pub(crate) fn into_async(self) -> io::Result<AsyncListener> {
        Ok(match self {
            Listener::Tcp(l) => {
                l.set_nonblocking(true)?;
                AsyncListener::Tcp(tokio::net::TcpListener::from_std(l)?)
            }
            Listener::Unix(l) => {
                l.set_nonblocking(true)?;
                AsyncListener::Unix(tokio::net::UnixListener::from_std(l)?)
            }
        })
    }
}

/// How many descriptors socket activation passes to process `pid` (see
/// [`Listener::from_systemd_env`]).
fn listen_fds(pid_var: Option<&str>, fds_var: Option<&str>, pid: u32) -> io::Result<Option<usize>> {
    let (Some(listen_pid), Some(listen_fds)) = (pid_var, fds_var) else {
        return Ok(None);
    };
    if listen_pid.trim().parse::<u32>().ok() != Some(pid) {
        return Ok(None);
    }
    match listen_fds.trim().parse::<usize>() {
        Ok(0) => Ok(None),
        Ok(n) if n <= 1024 => Ok(Some(n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("LISTEN_FDS={listen_fds:?} is not a descriptor count"),
        )),
    }
}

/// A listener registered with a worker's runtime.
pub(crate) enum AsyncListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

impl AsyncListener {
    /// The next connection. TCP connections get `TCP_NODELAY`: responses are written once per
    /// batch, so Nagle would only add delay.
    pub(crate) async fn accept(&self) -> io::Result<Accepted> {
        match self {
            AsyncListener::Tcp(l) => {
                let (stream, peer) = l.accept().await?;
                let _ = stream.set_nodelay(true);
                Ok(Accepted {
                    stream: Stream::Tcp(stream),
                    peer,
                })
            }
            AsyncListener::Unix(l) => {
                let (stream, _) = l.accept().await?;
                Ok(Accepted {
                    stream: Stream::Unix(stream),
                    peer: SocketAddr::from(([0, 0, 0, 0], 0)),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_activation_variables_are_checked() {
        assert_eq!(listen_fds(None, Some("1"), 7).unwrap(), None);
        assert_eq!(listen_fds(Some("7"), None, 7).unwrap(), None);
        assert_eq!(listen_fds(Some("8"), Some("1"), 7).unwrap(), None);
        assert_eq!(listen_fds(Some("7"), Some("0"), 7).unwrap(), None);
        assert_eq!(listen_fds(Some("7"), Some("2"), 7).unwrap(), Some(2));
        assert!(listen_fds(Some("7"), Some("x"), 7).is_err());
        assert!(listen_fds(Some("7"), Some("100000"), 7).is_err());
    }

    #[test]
    fn a_stale_unix_socket_file_is_replaced_and_a_live_one_is_not() {
        let dir = std::env::temp_dir().join(format!("peregrine-listener-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let live = Listener::bind_unix(&path, 16).unwrap();
        let err = Listener::bind_unix(&path, 16).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(live); // the file stays, nothing listens: stale
        let again = Listener::bind_unix(&path, 16).unwrap();
        assert_eq!(again.local_addr().unwrap(), ListenAddr::Unix(path.clone()));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_inherited_socket_is_classified_by_family() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let l = Listener::from_socket(Socket::from(tcp)).unwrap();
        assert_eq!(l.local_addr().unwrap(), ListenAddr::Tcp(addr));
        let not_listening = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        assert!(Listener::from_socket(not_listening).is_err());
    }
}

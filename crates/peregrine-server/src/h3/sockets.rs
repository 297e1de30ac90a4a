//! The workers' UDP sockets: one per worker on the TCP listeners' port (`SO_REUSEPORT`), bound
//! in worker order before the workers start, with the connection-ID program on their group
//! when it can be used (`steer`). The server keeps them for its whole life: a restarted worker
//! gets its predecessor's socket back, so it keeps its place in the group (the index the
//! program returns) and the connection IDs its predecessor gave out still reach it.

use super::steer;
use std::io;
use std::net::{SocketAddr, UdpSocket};

/// The UDP sockets of a server's workers (worker i's at index i, joined to the group in that
/// order).
#[derive(Debug)]
pub(crate) struct QuicSockets {
    sockets: Vec<UdpSocket>,
}

/// A worker's UDP socket and its place among the workers, for its connection IDs.
#[derive(Debug)]
pub(crate) struct WorkerSocket {
    pub(crate) socket: UdpSocket,
    pub(crate) worker: usize,
    pub(crate) workers: usize,
}

impl QuicSockets {
    /// Binds `n` sockets on UDP `addr` (the TCP listeners' address and port) in order; with
    /// `steer`, attaches the connection-ID program to their group when the group holds no
    /// other process's sockets and the kernel accepts it, and logs what it did. Fails when
    /// the port cannot be bound over UDP.
    pub(crate) fn bind(addr: SocketAddr, n: usize, steer: bool) -> io::Result<QuicSockets> {
        let fresh = crate::steering::group_is_fresh(addr, socket2::Type::DGRAM);
        let first = bind_one(addr)?;
        // Port 0: the first socket's port is the one the others join.
        let addr = first.local_addr()?;
        let mut sockets = vec![first];
        for _ in 1..n {
            sockets.push(bind_one(addr)?);
        }
        if !fresh {
            detach_foreign(&sockets[0]);
        }
        if steer {
            attach(&sockets, fresh);
        }
        Ok(QuicSockets { sockets })
    }

    /// Worker `index`'s socket: a new handle on the same socket, so that a restarted worker
    /// keeps its predecessor's place in the group.
    pub(crate) fn for_worker(&self, index: usize) -> io::Result<WorkerSocket> {
        let socket = self
            .sockets
            .get(index)
            .ok_or_else(|| io::Error::other("no UDP socket for this worker"))?;
        Ok(WorkerSocket {
            socket: socket.try_clone()?,
            worker: index,
            workers: self.sockets.len(),
        })
    }
}

/// One worker's socket: `SO_REUSEPORT` (every worker binds the same port), IPv6 only on an
/// IPv6 address (as the TCP listeners), non-blocking for quinn.
fn bind_one(addr: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Attaches the connection-ID program to the group of `sockets` (`fresh`: it holds no other
/// process's sockets) and logs the outcome; false (the kernel's address hash) when it is not
/// attached.
fn attach(sockets: &[UdpSocket], fresh: bool) -> bool {
    let why_not = if sockets.len() < 2 {
        return false;
    } else if sockets.len() > steer::MAX_STEERED_WORKERS {
        format!(
            "more than {} workers; datagrams spread by address hash",
            steer::MAX_STEERED_WORKERS
        )
    } else if !fresh {
        "the port's UDP reuseport group already had sockets of another process, so the program's socket indices would be wrong; datagrams spread by address hash".to_owned()
    } else {
        match attach_program(&sockets[0], sockets.len()) {
            Ok(()) => {
                tracing::info!(
                    workers = sockets.len(),
                    "HTTP/3: datagrams steered by connection ID (a client whose address changes stays on its worker)"
                );
                return true;
            }
            Err(e) => {
                format!("the kernel refused the program ({e}); datagrams spread by address hash")
            }
        }
    };
    tracing::warn!("HTTP/3 connection-ID steering off: {why_not}; a client whose address changes may be reset and reconnect");
    false
}

/// Detaches the program another process put on the group `socket` just joined (the previous
/// process of a restart that hands the port over): it applies to this server's sockets too,
/// with socket indices that are not theirs, and would send their datagrams to the wrong worker,
/// or to the other process, for as long as the group lives. The kernel's address hash is
/// right for every process in the group.
fn detach_foreign(socket: &UdpSocket) {
    match detach_reuseport_program(socket) {
        Ok(true) => tracing::warn!(
            "HTTP/3: removed the connection-ID program another process put on this UDP port; datagrams spread by address hash"
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "HTTP/3: could not remove another process's program from this UDP port"),
    }
}

/// Detaches whatever program the reuseport group of `socket` has (`SO_DETACH_REUSEPORT_BPF`,
/// Linux 5.3): `Ok(true)` when one was detached, `Ok(false)` when there was none (`ENOENT`) or
/// where the option is not known here.
#[cfg(target_os = "linux")]
fn detach_reuseport_program(socket: &impl std::os::fd::AsRawFd) -> io::Result<bool> {
    // From `<asm-generic/socket.h>` (libc exports it for Android only); the architectures with
    // a `socket.h` of their own number it otherwise.
    const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;
    if cfg!(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )) {
        return Ok(false);
    }
    let unused: libc::c_int = 0;
    // SAFETY: the option's value is a valid `c_int` (the kernel ignores it) of the length
    // passed; the descriptor is the socket's, open for the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DETACH_REUSEPORT_BPF,
            std::ptr::addr_of!(unused).cast(),
            std::mem::size_of_val(&unused) as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        e => Err(e),
    }
}

/// Not Linux: no program to detach.
#[cfg(not(target_os = "linux"))]
fn detach_reuseport_program(_socket: &impl std::os::fd::AsRawFd) -> io::Result<bool> {
    Ok(false)
}

#[cfg(target_os = "linux")]
fn attach_program(socket: &UdpSocket, workers: usize) -> io::Result<()> {
    crate::steering::attach_reuseport_cbpf(socket, &steer::cid_program(workers))
}

#[cfg(not(target_os = "linux"))]
fn attach_program(_socket: &UdpSocket, _workers: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "supported on Linux only",
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use quinn_proto::ConnectionIdGenerator;

    /// Sends `payload` to `addr` from a new socket and returns the index of the socket among
    /// `sockets` that received it.
    fn receiver(sockets: &QuicSockets, addr: SocketAddr, payload: &[u8]) -> usize {
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(payload, addr).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut buf = [0u8; 2048];
        loop {
            for (i, s) in sockets.sockets.iter().enumerate() {
                if let Ok(n) = s.recv(&mut buf) {
                    assert_eq!(&buf[..n], payload);
                    return i;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no socket received it"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn a_short_header_packet_reaches_the_worker_its_id_names_from_any_source_port() {
        let sockets = QuicSockets::bind("127.0.0.1:0".parse().unwrap(), 4, true).unwrap();
        let addr = sockets.sockets[0].local_addr().unwrap();
        assert!(sockets
            .sockets
            .iter()
            .all(|s| s.local_addr().unwrap() == addr));
        for worker in 0..4 {
            let mut ids = steer::WorkerCids::new(5, worker, 4);
            // Many source ports: the kernel's hash alone would spread these over all four.
            for _ in 0..8 {
                let mut packet = vec![0x41];
                packet.extend_from_slice(&ids.generate_cid());
                packet.extend_from_slice(&[0; 32]);
                assert_eq!(receiver(&sockets, addr, &packet), worker);
            }
        }
    }

    #[test]
    fn one_worker_or_a_group_with_a_foreign_socket_gets_no_program() {
        let one = QuicSockets::bind("127.0.0.1:0".parse().unwrap(), 1, false).unwrap();
        assert!(!attach(&one.sockets, true), "one worker needs no program");
        let other = bind_one("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = other.local_addr().unwrap();
        assert!(!crate::steering::group_is_fresh(addr, socket2::Type::DGRAM));
        let joined = QuicSockets::bind(addr, 2, false).unwrap();
        assert!(!attach(&joined.sockets, false));
        drop((other, joined));
        assert!(crate::steering::group_is_fresh(addr, socket2::Type::DGRAM));
    }

    #[test]
    fn a_second_server_on_the_port_removes_the_first_ones_program() {
        // The first server steers: every packet naming worker 0 reaches its socket 0.
        let first = QuicSockets::bind("127.0.0.1:0".parse().unwrap(), 2, true).unwrap();
        let addr = first.sockets[0].local_addr().unwrap();
        let mut ids = steer::WorkerCids::new(5, 0, 2);
        let named = |ids: &mut steer::WorkerCids| {
            let mut packet = vec![0x41];
            packet.extend_from_slice(&ids.generate_cid());
            packet.extend_from_slice(&[0; 32]);
            packet
        };
        for _ in 0..4 {
            assert_eq!(receiver(&first, addr, &named(&mut ids)), 0);
        }
        // A second server joins the group (a restart handing the port over): the first one's
        // program, with indices that are not the joined group's, is removed, and the kernel's
        // hash spreads the same packets over all four sockets.
        let second = QuicSockets::bind(addr, 2, true).unwrap();
        let all = QuicSockets {
            sockets: first
                .sockets
                .iter()
                .chain(&second.sockets)
                .map(|s| s.try_clone().unwrap())
                .collect(),
        };
        let landed: std::collections::HashSet<usize> = (0..32)
            .map(|_| receiver(&all, addr, &named(&mut ids)))
            .collect();
        assert!(
            landed.len() > 1,
            "every packet on socket {landed:?}: still steered"
        );
    }

    #[test]
    fn a_worker_gets_the_same_socket_again() {
        let sockets = QuicSockets::bind("127.0.0.1:0".parse().unwrap(), 2, true).unwrap();
        let (a, b) = (
            sockets.for_worker(1).unwrap(),
            sockets.for_worker(1).unwrap(),
        );
        assert_eq!((a.worker, a.workers), (1, 2));
        assert_eq!(
            a.socket.local_addr().unwrap(),
            b.socket.local_addr().unwrap()
        );
        assert!(sockets.for_worker(2).is_err());
    }
}

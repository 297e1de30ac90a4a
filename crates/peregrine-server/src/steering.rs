//! Connection steering (`ServerConfig::steer`): each new TCP connection goes to the listener of
//! the worker that belongs to the CPU which received it, instead of the kernel's hash spread
//! over the `SO_REUSEPORT` group.
//!
//! Two kernel mechanisms, both set up when steering is on:
//! * a classic BPF program attached to the group (`SO_ATTACH_REUSEPORT_CBPF`, Linux 4.6+) that
//!   reads the receiving CPU (`SKF_AD_OFF + SKF_AD_CPU`) and returns the index of that CPU's
//!   socket. The kernel indexes a group's sockets in the order they joined it, so the program is
//!   only right when the group holds the engine's sockets alone, joined in worker order;
//! * `SO_INCOMING_CPU` on every listener, set to its worker's CPU. It does not depend on the
//!   order: since Linux 6.1 the kernel's own choice (without a program, or when the program
//!   returns an index out of range) prefers the listener whose `SO_INCOMING_CPU` is the
//!   receiving CPU. It is what remains when the program cannot be used.
//!
//! A CPU that no worker owns (outside the process's affinity mask) makes the program return an
//! index out of range, which hands the choice back to the kernel.

use crate::cpus;
use crate::listener::Listener;
use std::io;
use std::net::{SocketAddr, TcpListener};

/// How new connections are distributed over the workers' listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Steering {
    /// The CPU program is attached (and `SO_INCOMING_CPU` is set on every listener).
    Program,
    /// `SO_INCOMING_CPU` alone (honoured by Linux 6.1 and later).
    IncomingCpu,
    /// The kernel's hash spread.
    Spread,
}

/// What the program returns for a CPU no worker owns: out of any group's range, so the kernel
/// chooses itself.
pub(crate) const NO_WORKER: u32 = u32::MAX;

/// The longest program the kernel loads (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;

/// One classic BPF instruction.
#[cfg(target_os = "linux")]
pub(crate) fn insn(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The reuseport program for workers on `cpus` (`cpus[i]` is worker i's CPU, and worker i's
/// socket is the group's i-th): load the receiving CPU, then for each worker "if equal, return
/// its index", then return [`NO_WORKER`]. A table rather than "return the CPU number", so CPU
/// sets with gaps (`taskset -c 2,3`, offline CPUs) still map CPU to worker. `None` when the
/// program would pass the kernel's length limit.
#[cfg(target_os = "linux")]
pub(crate) fn cpu_program(cpus: &[usize]) -> Option<Vec<libc::sock_filter>> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, SKF_AD_CPU, SKF_AD_OFF};
    if 2 + 2 * cpus.len() > MAX_INSNS {
        return None;
    }
    let mut prog = Vec::with_capacity(2 + 2 * cpus.len());
    // Ancillary load: the CPU running the program (the one that received the SYN).
    prog.push(insn(
        BPF_LD | BPF_W | BPF_ABS,
        0,
        0,
        (SKF_AD_OFF + SKF_AD_CPU) as u32,
    ));
    for (worker, &cpu) in cpus.iter().enumerate() {
        // Equal: fall through to the next instruction (return the index); else skip it.
        prog.push(insn(
            BPF_JMP | BPF_JEQ | BPF_K,
            0,
            1,
            u32::try_from(cpu).ok()?,
        ));
        prog.push(insn(BPF_RET | BPF_K, 0, 0, u32::try_from(worker).ok()?));
    }
    prog.push(insn(BPF_RET | BPF_K, 0, 0, NO_WORKER));
    Some(prog)
}

/// Whether the `SO_REUSEPORT` group at `addr` will hold the engine's sockets of type `kind`
/// (TCP listeners, or the UDP sockets of HTTP/3) alone: port 0 binds a fresh port (the kernel
/// never picks a port that a reuseport group holds), and a fixed port is free when a plain
/// socket (without `SO_REUSEPORT`) can bind it. A socket of another process there (a second
/// instance, the previous process of a restart) would put sockets before the engine's in the
/// group and shift every index. The probe is closed before the engine binds; a socket that
/// joins in between is not seen (a narrow window at startup).
pub(crate) fn group_is_fresh(addr: SocketAddr, kind: socket2::Type) -> bool {
    if addr.port() == 0 {
        return true;
    }
    let protocol = if kind == socket2::Type::DGRAM {
        socket2::Protocol::UDP
    } else {
        socket2::Protocol::TCP
    };
    let probe = socket2::Socket::new(socket2::Domain::for_address(addr), kind, Some(protocol));
    probe
        .and_then(|s| {
            // SO_REUSEADDR: TCP connections in TIME_WAIT from an earlier run do not count.
            s.set_reuse_address(true)?;
            s.bind(&addr.into())
        })
        .is_ok()
}

/// Sets up steering on `listeners` (worker i's at index i, joined to their group in that
/// order) for workers on `cpus` (from `cpus::worker_cpus`; `None` for a worker without a CPU),
/// and logs what it could do. `group_fresh`: see [`group_is_fresh`]. Never fails: whatever the
/// kernel refuses leaves the spread, with a log line saying why.
pub(crate) fn steer(
    listeners: &[&TcpListener],
    cpus: &[Option<usize>],
    group_fresh: bool,
) -> Steering {
    let (steering, why) = try_steer(listeners, cpus, group_fresh);
    match (steering, why) {
        (Steering::Program, _) => {
            tracing::info!(cpus = ?cpus, "connection steering: each CPU's connections go to its worker (reuseport CPU program)")
        }
        (s, Some(why)) => tracing::warn!(steering = ?s, "connection steering: {why}"),
        (s, None) => tracing::info!(steering = ?s, "connection steering"),
    }
    steering
}

/// [`steer`] for the listeners the engine bound (worker i's at index i, bound in that order),
/// with the workers' CPUs from the process's affinity mask (`cpus::worker_cpus`).
pub(crate) fn steer_listeners(listeners: &[Listener], group_fresh: bool) -> Steering {
    let tcp: Vec<&TcpListener> = listeners
        .iter()
        .filter_map(|l| match l {
            Listener::Tcp(t) => Some(t),
            Listener::Unix(_) => None,
        })
        .collect();
    match cpus::allowed_cpus() {
        Ok(allowed) => steer(&tcp, &cpus::worker_cpus(&allowed, tcp.len()), group_fresh),
        Err(e) => {
            tracing::warn!(error = %e, "connection steering: cannot read the CPUs this process may use; connections spread by hash");
            Steering::Spread
        }
    }
}

/// [`steer`] without the log: the outcome and, when it is not the program, why.
#[cfg(target_os = "linux")]
pub(crate) fn try_steer(
    listeners: &[&TcpListener],
    cpus: &[Option<usize>],
    group_fresh: bool,
) -> (Steering, Option<String>) {
    let owned: Option<Vec<usize>> = cpus.iter().copied().collect();
    let Some(owned) = owned.filter(|c| c.len() == listeners.len()) else {
        return (
            Steering::Spread,
            Some(format!(
                "off: {} workers and only {} CPUs this process may use (one CPU per worker is needed); connections spread by hash",
                listeners.len(),
                cpus.iter().flatten().count()
            )),
        );
    };
    // SO_INCOMING_CPU first: it is independent of the group's order, so it is the fallback.
    let mut incoming = Ok(());
    for (l, &cpu) in listeners.iter().zip(&owned) {
        incoming = incoming.and_then(|()| socket2::SockRef::from(*l).set_cpu_affinity(cpu));
    }
    let fallback = match &incoming {
        Ok(()) => Steering::IncomingCpu,
        Err(_) => Steering::Spread,
    };
    let fallback_what = match &incoming {
        Ok(()) => "by SO_INCOMING_CPU alone (Linux 6.1+; older kernels spread by hash)".to_owned(),
        Err(e) => format!("SO_INCOMING_CPU refused ({e}) too; connections spread by hash"),
    };
    if !group_fresh {
        return (
            fallback,
            Some(format!(
                "the port's reuseport group already had sockets of another process, so the CPU program's socket indices would be wrong; steering {fallback_what}"
            )),
        );
    }
    let Some(prog) = cpu_program(&owned) else {
        return (
            fallback,
            Some(format!(
                "too many workers for a CPU program; steering {fallback_what}"
            )),
        );
    };
    match listeners.first().map(|l| attach_reuseport_cbpf(*l, &prog)) {
        Some(Ok(())) => (Steering::Program, None),
        Some(Err(e)) => (
            fallback,
            Some(format!(
                "the kernel refused the CPU program ({e}); steering {fallback_what}"
            )),
        ),
        None => (Steering::Spread, Some("no listener".into())),
    }
}

/// Not Linux: no steering.
#[cfg(not(target_os = "linux"))]
pub(crate) fn try_steer(
    _listeners: &[&TcpListener],
    _cpus: &[Option<usize>],
    _group_fresh: bool,
) -> (Steering, Option<String>) {
    (
        Steering::Spread,
        Some("supported on Linux only; connections spread by hash".into()),
    )
}

/// Attaches `prog` to the reuseport group of `socket` (`SO_ATTACH_REUSEPORT_CBPF`): a TCP
/// listener's, or a UDP socket's.
#[cfg(target_os = "linux")]
pub(crate) fn attach_reuseport_cbpf(
    socket: &impl std::os::fd::AsRawFd,
    prog: &[libc::sock_filter],
) -> io::Result<()> {
    let len = u16::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, `len` instructions that live across the call (the kernel
    // copies them); the option length is the size of the `sock_fprog` passed; the descriptor
    // is the socket's, open for the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            std::ptr::addr_of!(fprog).cast(),
            std::mem::size_of_val(&fprog) as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Runs the subset of classic BPF that [`cpu_program`] uses, as the kernel would with
    /// `cpu` as the receiving CPU.
    fn run(prog: &[libc::sock_filter], cpu: u32) -> u32 {
        let mut a = 0u32;
        let mut pc = 0;
        loop {
            let i = prog[pc];
            match u32::from(i.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    assert_eq!(i.k, (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32);
                    a = cpu;
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += usize::from(if a == i.k { i.jt } else { i.jf });
                }
                c if c == libc::BPF_RET | libc::BPF_K => return i.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn the_program_maps_each_cpu_to_its_worker_and_others_to_the_kernel() {
        let prog = cpu_program(&[0, 1]).unwrap();
        // ld cpu; jeq 0 → ret 0; jeq 1 → ret 1; ret NO_WORKER
        assert_eq!(prog.len(), 6);
        let codes: Vec<(u16, u8, u8, u32)> =
            prog.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect();
        assert_eq!(
            codes,
            [
                (0x20, 0, 0, 0xffff_f024), // BPF_LD|BPF_W|BPF_ABS, SKF_AD_OFF + SKF_AD_CPU
                (0x15, 0, 1, 0),           // BPF_JMP|BPF_JEQ|BPF_K #0
                (0x06, 0, 0, 0),           // BPF_RET|BPF_K #0
                (0x15, 0, 1, 1),
                (0x06, 0, 0, 1),
                (0x06, 0, 0, NO_WORKER),
            ]
        );
        assert_eq!(
            (run(&prog, 0), run(&prog, 1), run(&prog, 2)),
            (0, 1, NO_WORKER)
        );
        // CPUs with gaps (taskset -c 1,3,4 or CPU 2 offline): by position, not by number.
        let prog = cpu_program(&[1, 3, 4]).unwrap();
        let got: Vec<u32> = (0..6).map(|c| run(&prog, c)).collect();
        assert_eq!(got, [NO_WORKER, 0, NO_WORKER, 1, 2, NO_WORKER]);
        // Past the kernel's length limit: no program.
        assert!(cpu_program(&(0..2048).collect::<Vec<_>>()).is_none());
        let longest = cpu_program(&(0..2047).collect::<Vec<_>>()).unwrap();
        assert_eq!(longest.len(), MAX_INSNS);
        // ... which the kernel loads (its checker accepts every jump and return).
        let group = bind_group(1);
        attach_reuseport_cbpf(&group[0], &longest).unwrap();
    }

    fn bind_group(n: usize) -> Vec<TcpListener> {
        let first = Listener::bind_tcp("127.0.0.1:0".parse().unwrap(), 64).unwrap();
        let Listener::Tcp(first) = first else {
            unreachable!()
        };
        let addr = first.local_addr().unwrap();
        let mut out = vec![first];
        for _ in 1..n {
            let Listener::Tcp(l) = Listener::bind_tcp(addr, 64).unwrap() else {
                unreachable!()
            };
            out.push(l);
        }
        out
    }

    /// Connects to `addr` from a thread pinned to `cpu`: on loopback the SYN is processed on
    /// the sender's CPU, so `cpu` is the receiving CPU the program sees.
    fn connect_from(cpu: usize, addr: SocketAddr) -> std::net::TcpStream {
        std::thread::spawn(move || {
            cpus::pin_current_thread(cpu).unwrap();
            std::net::TcpStream::connect(addr).unwrap()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn with_the_program_each_connection_lands_on_its_cpus_listener() {
        let allowed = cpus::allowed_cpus().unwrap();
        let n = allowed.len().min(4);
        let listeners = bind_group(n);
        let refs: Vec<&TcpListener> = listeners.iter().collect();
        let plan = cpus::worker_cpus(&allowed, n);
        assert_eq!(try_steer(&refs, &plan, true), (Steering::Program, None));
        let addr = listeners[0].local_addr().unwrap();
        for l in &listeners {
            l.set_nonblocking(true).unwrap();
        }
        for round in 0..3 {
            for (worker, cpu) in plan.iter().enumerate() {
                let cpu = cpu.unwrap();
                let _client = connect_from(cpu, addr);
                // The handshake is complete when connect returns (loopback): the connection
                // waits in exactly one listener's queue.
                let got: Vec<usize> = listeners
                    .iter()
                    .enumerate()
                    .filter_map(|(i, l)| l.accept().ok().map(|(s, _)| (i, s)))
                    .map(|(i, s)| {
                        let seen = socket2::SockRef::from(&s).cpu_affinity().unwrap();
                        assert_eq!(seen, cpu, "SO_INCOMING_CPU of the accepted connection");
                        i
                    })
                    .collect();
                assert_eq!(got, [worker], "round {round}: connection from CPU {cpu}");
            }
        }
    }

    #[test]
    fn too_few_cpus_leave_the_spread() {
        let listeners = bind_group(3);
        let refs: Vec<&TcpListener> = listeners.iter().collect();
        let (s, why) = try_steer(&refs, &[Some(0), Some(1), None], true);
        assert_eq!(s, Steering::Spread);
        assert!(why.unwrap().contains("3 workers and only 2 CPUs"));
    }

    #[test]
    fn a_foreign_group_or_a_refused_program_falls_back_to_incoming_cpu() {
        // A listener the engine did not put in a group (no SO_REUSEPORT): the kernel refuses
        // the program (EINVAL) and SO_INCOMING_CPU is all that is left.
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        let (s, why) = try_steer(&[&plain], &[Some(0)], true);
        assert_eq!(s, Steering::IncomingCpu);
        assert!(why.unwrap().contains("refused the CPU program"));
        // A port where another process's reuseport socket listens: not fresh, no program.
        let listeners = bind_group(1);
        let addr = listeners[0].local_addr().unwrap();
        assert!(!group_is_fresh(addr, socket2::Type::STREAM));
        drop(listeners);
        assert!(group_is_fresh(addr, socket2::Type::STREAM));
        assert!(group_is_fresh(
            "127.0.0.1:0".parse().unwrap(),
            socket2::Type::STREAM
        ));
        let listeners = bind_group(1);
        let refs: Vec<&TcpListener> = listeners.iter().collect();
        let (s, why) = try_steer(&refs, &[Some(0)], false);
        assert_eq!(s, Steering::IncomingCpu);
        assert!(why.unwrap().contains("another process"));
        // Connections are still accepted.
        let addr = listeners[0].local_addr().unwrap();
        let _c = std::net::TcpStream::connect(addr).unwrap();
        listeners[0].accept().unwrap();
    }
}

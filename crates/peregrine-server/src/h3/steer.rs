//! Connection-ID steering ([`Http3Config::steer_by_connection_id`](super::Http3Config::steer_by_connection_id)):
//! every datagram of a QUIC connection reaches the worker that holds it, also after the
//! client's address changed (NAT rebinding, migration), where the kernel's `SO_REUSEPORT` hash
//! of the addresses would pick any worker, which could only answer with a stateless reset.
//!
//! * Each worker's connection IDs start with a byte whose residue modulo the worker count is the
//!   worker's index ([`WorkerCids`]). The rest is quinn's hashed generator (random nonce, keyed
//!   signature, one key for every worker); the nonce is drawn again until its first byte fits,
//!   so an ID tells an observer no more than that residue, as QUIC-LB's plaintext algorithm
//!   (draft-ietf-quic-load-balancers) does.
//! * A classic BPF program on the UDP reuseport group ([`cid_program`]) reads the first byte of
//!   the destination connection ID (offset 1 in a short header, 6 in a long one) and returns it
//!   modulo the worker count as the socket's index. A client's first Initial carries an ID the
//!   client chose at random, so new connections spread evenly; the worker it lands on answers
//!   with IDs of its own, and every later packet (and the answer to a Retry) comes back to it.
//! * The kernel indexes a group's sockets in the order they joined, so the sockets are bound in
//!   worker order before the workers start (`sockets`).

use quinn_proto::{ConnectionId, ConnectionIdGenerator, HashedConnectionIdGenerator, InvalidCid};
use std::time::Duration;

/// The most workers the first byte of a connection ID can tell apart.
pub(crate) const MAX_STEERED_WORKERS: usize = 256;

/// The worker a connection ID steers to among `workers`.
fn worker_of(cid: &[u8], workers: usize) -> usize {
    cid.first().map_or(0, |&b| usize::from(b) % workers)
}

/// The connection IDs of worker `worker` of `workers`: quinn's hashed IDs whose first byte is
/// the worker's index modulo `workers`. Every worker's generator validates every worker's IDs
/// (one key), so a worker that is handed a packet of another's connection still recognises it
/// and can reset it.
pub(crate) struct WorkerCids {
    hashed: HashedConnectionIdGenerator,
    worker: usize,
    workers: usize,
}

impl WorkerCids {
    /// Worker `worker`'s IDs, signed with `key`; `workers` is clamped to
    /// `1..=`[`MAX_STEERED_WORKERS`] (one worker: any ID).
    pub(crate) fn new(key: u64, worker: usize, workers: usize) -> WorkerCids {
        let workers = workers.clamp(1, MAX_STEERED_WORKERS);
        WorkerCids {
            hashed: HashedConnectionIdGenerator::from_key(key),
            worker: worker % workers,
            workers,
        }
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        // A new draw until the first byte fits: `workers` draws on average, each a few
        // nanoseconds, a few times per connection (its first ID and the spares it announces).
        loop {
            let cid = self.hashed.generate_cid();
            if worker_of(&cid, self.workers) == self.worker {
                return cid;
            }
        }
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        self.hashed.validate(cid)
    }

    fn cid_len(&self) -> usize {
        self.hashed.cid_len()
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        self.hashed.cid_lifetime()
    }
}

/// The reuseport program for `workers` sockets (`workers` in `2..=`[`MAX_STEERED_WORKERS`]):
/// the first byte of the datagram's destination connection ID modulo `workers`. A datagram too
/// short to hold it ends the program with 0 (the kernel's rule for a load out of bounds), which
/// hands it to the first worker; it is no QUIC packet a connection could use anyway.
#[cfg(target_os = "linux")]
pub(crate) fn cid_program(workers: usize) -> Vec<libc::sock_filter> {
    use crate::steering::insn;
    use libc::{
        BPF_A, BPF_ABS, BPF_ALU, BPF_B, BPF_JA, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_MOD, BPF_RET,
    };
    // The header form bit (RFC 9000 §17.2): set in a long header.
    const LONG_HEADER: u32 = 0x80;
    // Where the destination connection ID starts: after the first byte in a short header
    // (§17.3); after the first byte, the 4-byte version and the 1-byte length in a long one.
    const SHORT_DCID: u32 = 1;
    const LONG_DCID: u32 = 6;
    let workers = u32::try_from(workers.clamp(1, MAX_STEERED_WORKERS)).unwrap_or(1);
    vec![
        insn(BPF_LD | BPF_B | BPF_ABS, 0, 0, 0),
        // Long header: fall through to load offset 6; short: jump to load offset 1.
        insn(BPF_JMP | BPF_JSET | BPF_K, 0, 2, LONG_HEADER),
        insn(BPF_LD | BPF_B | BPF_ABS, 0, 0, LONG_DCID),
        insn(BPF_JMP | BPF_JA, 0, 0, 1),
        insn(BPF_LD | BPF_B | BPF_ABS, 0, 0, SHORT_DCID),
        insn(BPF_ALU | BPF_MOD | BPF_K, 0, 0, workers),
        insn(BPF_RET | BPF_A, 0, 0, 0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_issues_ids_of_its_own_residue_that_every_worker_validates() {
        for workers in [1, 2, 3, 7, 64, 256, 1000] {
            let mut gens: Vec<WorkerCids> = (0..workers.min(MAX_STEERED_WORKERS))
                .map(|w| WorkerCids::new(42, w, workers))
                .collect();
            let steered = workers.min(MAX_STEERED_WORKERS);
            for w in 0..gens.len() {
                for _ in 0..8 {
                    let cid = gens[w].generate_cid();
                    assert_eq!(cid.len(), 8);
                    assert_eq!(worker_of(&cid, steered), w, "{workers} workers");
                    for other in &gens {
                        assert!(other.validate(&cid).is_ok());
                    }
                }
            }
        }
        // Another server's key: not recognised.
        let mut ours = WorkerCids::new(1, 0, 2);
        let theirs = WorkerCids::new(2, 0, 2);
        let rejected = (0..32)
            .filter(|_| theirs.validate(&ours.generate_cid()).is_err())
            .count();
        assert!(rejected >= 30, "{rejected} of 32 foreign IDs rejected");
    }

    #[test]
    fn ids_stay_random_apart_from_the_residue() {
        let mut g = WorkerCids::new(7, 1, 4);
        let ids: std::collections::HashSet<Vec<u8>> =
            (0..1000).map(|_| g.generate_cid().to_vec()).collect();
        // quinn's nonce is 3 bytes, 22 bits of it free here: a repeat among 1,000 happens
        // (about one run in 9; quinn skips an ID one of its connections holds), more do not.
        assert!(ids.len() >= 995, "{} distinct of 1000", ids.len());
        // The first byte takes many values (64 fit residue 1 of 4), not one fixed marker.
        let firsts: std::collections::HashSet<u8> = ids.iter().map(|id| id[0]).collect();
        assert!(firsts.len() > 40, "{} first bytes", firsts.len());
    }

    /// Runs the subset of classic BPF that [`cid_program`] uses on `packet`, as the kernel
    /// does on a UDP datagram's payload (a load out of bounds ends the program with 0).
    #[cfg(target_os = "linux")]
    fn run(prog: &[libc::sock_filter], packet: &[u8]) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            match u32::from(i.code) {
                c if c == libc::BPF_LD | libc::BPF_B | libc::BPF_ABS => {
                    let Some(&b) = packet.get(i.k as usize) else {
                        return 0;
                    };
                    a = u32::from(b);
                }
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                    pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf });
                }
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += i.k as usize,
                c if c == libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K => a %= i.k,
                c if c == libc::BPF_RET | libc::BPF_A => return a,
                other => panic!("unexpected instruction {other:#x}"),
            }
            pc += 1;
        }
    }

    /// A short-header packet to `dcid`.
    fn short(dcid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x40 | 0x03];
        p.extend_from_slice(dcid);
        p.extend_from_slice(&[0xaa; 24]);
        p
    }

    /// A long-header packet (an Initial, or a Handshake with `kind` 2) to `dcid`.
    fn long(kind: u8, dcid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0 | (kind << 4), 0, 0, 0, 1, dcid.len() as u8];
        p.extend_from_slice(dcid);
        p.extend_from_slice(&[8, 1, 2, 3, 4, 5, 6, 7, 8]);
        p.extend_from_slice(&[0xbb; 1200]);
        p
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_program_returns_the_worker_of_the_destination_id_in_either_header() {
        for workers in [2usize, 3, 4, 16, 256] {
            let prog = cid_program(workers);
            let mut gens: Vec<WorkerCids> = (0..workers)
                .map(|w| WorkerCids::new(9, w, workers))
                .collect();
            for (w, g) in gens.iter_mut().enumerate() {
                for _ in 0..16 {
                    let cid = g.generate_cid();
                    assert_eq!(run(&prog, &short(&cid)) as usize, w);
                    assert_eq!(run(&prog, &long(2, &cid)) as usize, w);
                    assert_eq!(run(&prog, &long(0, &cid)) as usize, w);
                }
            }
        }
        // A client's first Initial: its random ID's first byte picks the worker.
        let prog = cid_program(4);
        assert_eq!(run(&prog, &long(0, &[0x07, 1, 2, 3, 4, 5, 6, 7])), 3);
        assert_eq!(run(&prog, &long(0, &[0x08, 1, 2, 3, 4, 5, 6, 7])), 0);
        // Too short to hold an ID: 0.
        assert_eq!(run(&prog, &[0x40]), 0);
        assert_eq!(run(&prog, &[0xc0, 0, 0, 0, 1]), 0);
        assert_eq!(run(&prog, &[]), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_loads_the_program_on_a_udp_reuseport_group() {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        socket.set_reuse_port(true).unwrap();
        socket
            .bind(
                &"127.0.0.1:0"
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
        for workers in [2, 256] {
            crate::steering::attach_reuseport_cbpf(&socket, &cid_program(workers)).unwrap();
        }
    }
}

//! Multi-worker steering and pinning through a real server (`ServerConfig::steer`,
//! `ServerConfig::pin`) with two workers: every connection is served, by the worker of the CPU
//! the client connected from when steering is on, and pinned workers run on their CPU alone
//! (the threads of their blocking pool on the process's CPUs).
//!
//! On loopback the SYN is processed on the sending CPU, so a client thread pinned to CPU c
//! makes c the receiving CPU the kernel steers by.
#![cfg(target_os = "linux")]

use peregrine_server::{service_fn, Request, Response, Server, ServerConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The CPUs the calling thread may run on.
fn affinity() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size passed is the size of `set`.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: every index is inside the set.
    (0..1024)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn pin(cpu: usize) {
    // SAFETY: as in `affinity`; `cpu` < 1024, inside the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is initialised and its size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// One request from a thread pinned to `cpu`; the body names the worker thread that served it
/// and that thread's CPUs (`peregrine-w1 [1]`).
fn served_by(addr: SocketAddr, cpu: usize) -> String {
    std::thread::spawn(move || {
        pin(cpu);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
        out.split_once("\r\n\r\n").unwrap().1.to_owned()
    })
    .join()
    .unwrap()
}

fn run(steer: bool, pin: bool) {
    let allowed = affinity();
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(2)
        .steer(steer)
        .pin(pin)
        .build();
    let service = service_fn(|_req: Request| async {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        let helper = tokio::task::spawn_blocking(affinity).await.unwrap();
        Response::text(format!("{name} {:?} {helper:?}", affinity()))
    });
    let handle = Server::new(config).serve(service).unwrap();
    let addr = handle.local_addr();
    let cpus: Vec<usize> = allowed.iter().copied().take(2).collect();
    for round in 0..4 {
        for (i, &cpu) in cpus.iter().enumerate() {
            let body = served_by(addr, cpu);
            let (worker, rest) = body.split_once(' ').unwrap();
            let (cpus_of_worker, cpus_of_helper) = rest.split_once("] ").unwrap();
            let cpus_of_worker = format!("{cpus_of_worker}]");
            // Every connection is served by one of the two workers.
            let w: usize = worker.strip_prefix("peregrine-w").unwrap().parse().unwrap();
            assert!(w < 2, "{body}");
            // Steering with a CPU per worker: the worker of the client's CPU.
            if steer && cpus.len() == 2 {
                assert_eq!(w, i, "round {round}: from CPU {cpu}: {body}");
            }
            let expected = if pin && w < allowed.len() {
                format!("{:?}", [allowed[w]])
            } else {
                format!("{allowed:?}")
            };
            assert_eq!(cpus_of_worker, expected, "steer={steer} pin={pin}: {body}");
            // A thread the worker's runtime starts (blocking pool) has the process's CPUs.
            assert_eq!(cpus_of_helper, format!("{allowed:?}"), "{body}");
        }
    }
    handle.shutdown();
}

#[test]
fn two_workers_spread() {
    run(false, false);
}

#[test]
fn two_workers_steered() {
    run(true, false);
}

#[test]
fn two_workers_pinned() {
    run(false, true);
}

#[test]
fn two_workers_steered_and_pinned() {
    run(true, true);
}

/// A fixed port where another socket of the same user already listens with `SO_REUSEPORT`
/// (another instance): the group's indices are not the engine's, so no CPU program; the server
/// still starts and serves every connection (sharing them with the other socket's group).
#[test]
fn a_shared_port_falls_back_and_serves() {
    let other = peregrine_server::Listener::bind_tcp("127.0.0.1:0".parse().unwrap(), 64).unwrap();
    let peregrine_server::config::ListenAddr::Tcp(addr) = other.local_addr().unwrap() else {
        unreachable!()
    };
    let config = ServerConfig::builder()
        .addr(addr)
        .workers(2)
        .steer(true)
        .build();
    let service = service_fn(|_req: Request| async {
        Response::text(std::thread::current().name().unwrap_or("?").to_owned())
    });
    let handle = Server::new(config).serve(service).unwrap();
    // The other socket takes no part: close it, so every connection reaches the server.
    drop(other);
    for &cpu in affinity().iter().take(2) {
        for _ in 0..3 {
            let body = served_by(addr, cpu);
            assert!(body.starts_with("peregrine-w"), "{body}");
        }
    }
    handle.shutdown();
}

//! The lab's environment for a peer: where to listen (`ADDR`) and how many workers (`WORKERS`).
//! Shared by the Rust peers and TechEmpower's leaders (lab/peers/rust-tfb includes this file).

use std::net::SocketAddr;

/// Listen address from `ADDR` (host:port), defaulting to 127.0.0.1:8080.
pub fn addr() -> SocketAddr {
    let raw = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:8080".to_string());
    raw.parse()
        .unwrap_or_else(|e| panic!("ADDR={raw:?} is not host:port: {e}"))
}

/// Worker threads from `WORKERS` (the lab always sets it; 1 otherwise). TechEmpower's entries
/// take the machine's CPU count; the lab gives the server its CPUs through `WORKERS` instead.
pub fn workers() -> usize {
    match std::env::var("WORKERS") {
        Ok(raw) => match raw.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("WORKERS={raw:?} is not a positive integer"),
        },
        Err(_) => 1,
    }
}

//! What the TechEmpower-leader peers share: the lab's environment (`ADDR`, `WORKERS`) and the
//! contract's JSON message. Each binary keeps its own framework's routing and response path, as
//! its TechEmpower entry does.

use serde::Serialize;
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

/// `GET /json`: `{"message":"Hello, World!"}`, serialised per request as the contract asks.
#[derive(Serialize)]
pub struct Message {
    pub message: &'static str,
}

/// The message every `/json` answer carries.
pub const HELLO: Message = Message {
    message: "Hello, World!",
};

/// `/plaintext`'s body.
pub const PLAINTEXT: &str = "Hello, World!";

/// TechEmpower's database rules, the same file as the other Rust peers' (no driver in it).
#[path = "../../rust/src/db_rules.rs"]
pub mod db_rules;

pub mod pg;

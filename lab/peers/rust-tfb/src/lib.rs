//! What the TechEmpower-leader peers share: the lab's environment (`ADDR`, `WORKERS`) and the
//! contract's JSON message. Each binary keeps its own framework's routing and response path, as
//! its TechEmpower entry does.

use serde::Serialize;

#[path = "../../rust/src/env.rs"]
mod env;
pub use env::{addr, workers};

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

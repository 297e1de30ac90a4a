//! # peregrine
//!
//! A small web framework on the Peregrine engine.

pub use peregrine_server as server;

//! # peregrine-server
//!
//! The engine: N worker threads, each a tokio current-thread runtime with its own `SO_REUSEPORT`
//! listener (no work stealing), driving HTTP/1.1 connections with the strict
//! [`peregrine_codec`] parser. Handlers are async and may await anything in the tokio ecosystem;
//! their futures run on the worker that owns the connection and need not be `Send`.
//!
//! API CONTRACT: the public items below are what the framework crate (`peregrine`) is written
//! against. Their names and signatures are fixed; internals are free.

pub mod body;
pub mod config;
mod conn;
mod idle;
pub mod request;
pub mod response;
pub mod server;
pub mod service;
mod worker;

pub use body::{Body, BodyError};
pub use config::ServerConfig;
pub use peregrine_codec::{Limits, Method, Version};
pub use request::Request;
pub use response::{Response, ResponseBody};
pub use server::{Server, ServerHandle};
pub use service::{service_fn, Service};

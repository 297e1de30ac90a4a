//! The combination matrix's parts: the table (`table`), the service under test (`app`), the
//! client (`client`) and one checker per route kind (`checks`).

pub mod app;
pub mod checks;
pub mod client;
pub mod table;

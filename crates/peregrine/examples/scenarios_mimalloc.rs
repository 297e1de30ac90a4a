//! The lab's scenario application (`scenarios.rs`) with mimalloc as its allocator instead of
//! the system's, as TechEmpower's Rust leaders ship: the same app, routes and options, so the
//! lab can measure the allocator alone (docs/performance.md, "Database paths"). Without
//! `GET /debug/heap`: it reads glibc's heap, which holds nothing of this app's.
//!
//! ```sh
//! DATABASE_URL=postgres://... cargo run --release --example scenarios_mimalloc -- --addr 127.0.0.1:8080
//! ```

#[allow(dead_code)]
#[path = "scenarios.rs"]
mod scenarios;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    scenarios::GLIBC_HEAP.store(false, std::sync::atomic::Ordering::Relaxed);
    scenarios::main();
}

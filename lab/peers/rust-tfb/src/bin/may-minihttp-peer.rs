//! may-minihttp as TechEmpower's may-minihttp entry sets it up: mimalloc as the global allocator,
//! may's coroutine pool of 1000 with 4 KiB stacks, one service per connection, the path matched
//! by hand, every response of a read written in one write (may-minihttp parses all pipelined
//! requests of a read before it writes). It serves `/plaintext` and `/json`; the entry's database
//! tests need may_postgres, which is not in the Rust registry (see lab/peers/README.md).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};
use std::io;

struct Peer;

impl HttpService for Peer {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        // may-minihttp writes `Server: M`, `Date` and `Content-Length` itself.
        match req.path() {
            "/plaintext" => {
                rsp.header("Content-Type: text/plain").body(tfb::PLAINTEXT);
            }
            "/json" => {
                rsp.header("Content-Type: application/json");
                serde_json::to_writer(BodyWriter(rsp.body_mut()), &tfb::HELLO)?;
            }
            _ => {
                rsp.status_code(404, "Not Found");
            }
        }
        Ok(())
    }
}

/// `io::Write` into the response body buffer, so JSON is serialised straight into it.
struct BodyWriter<'a>(&'a mut bytes::BytesMut);

impl io::Write for BodyWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Server;

impl HttpServiceFactory for Server {
    type Service = Peer;

    fn new_service(&self, _id: usize) -> Peer {
        Peer
    }
}

fn main() {
    // The entry's settings; the worker count is the lab's (the entry leaves may's default, one
    // scheduler thread per CPU).
    may::config()
        .set_pool_capacity(1000)
        .set_stack_size(0x1000)
        .set_workers(tfb::workers());
    let server = Server
        .start(tfb::addr())
        .unwrap_or_else(|e| panic!("bind ADDR: {e}"));
    // A panic in the accept coroutine is the only way join returns an error.
    if server.join().is_err() {
        std::process::exit(1);
    }
}

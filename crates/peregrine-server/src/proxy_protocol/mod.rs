//! The PROXY protocol (HAProxy's, versions 1 and 2): the header a load balancer sends first on
//! a connection to tell the server who the real client is. Pure functions over bytes, no I/O,
//! so the listener that reads it and the tests that fuzz it share one parser.
//!
//! Only listeners configured for it may parse it: a header accepted from an untrusted client
//! lets that client choose its own address.
//!
//! ```
//! use peregrine_server::proxy_protocol::{parse, ProxyHeader, Status};
//! let buf = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET / HTTP/1.1\r\n";
//! let Ok(Status::Complete(p)) = parse(buf) else { panic!() };
//! assert_eq!(p.version, 1);
//! assert_eq!(&buf[p.consumed..p.consumed + 3], b"GET");
//! let ProxyHeader::Proxied { source, .. } = p.header else { panic!() };
//! assert_eq!(source, "203.0.113.7:51234".parse().unwrap());
//! ```
//!
//! One job per module: `header` (the types both versions share), `v1` (text), `v2` (binary,
//! and its encoder), `read` (reading the header off a socket), `acceptor` (the listener step).
//! [`parse`], below, picks the version.

mod acceptor;
mod header;
mod parse;
mod read;
mod v1;
mod v2;

pub use acceptor::ProxyProtocolAcceptor;
pub use header::{Parsed, ProxyError, ProxyHeader, Status};
pub use parse::parse;
pub use read::{read_header, ReadError, READ_MAX};
pub use v1::V1_MAX_LEN;
pub use v2::{encode_v2, V2_SIGNATURE};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_panic_on_arbitrary_bytes() {
        // Mutations of valid headers and random bytes: any result but a panic.
        let seeds: Vec<Vec<u8>> = vec![
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".to_vec(),
            b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n".to_vec(),
            encode_v2(
                "192.0.2.1:1".parse().unwrap(),
                "192.0.2.2:2".parse().unwrap(),
            ),
            encode_v2("[::1]:1".parse().unwrap(), "[::2]:2".parse().unwrap()),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for seed in &seeds {
            for _ in 0..20_000 {
                let mut b = seed.clone();
                for _ in 0..(rnd() % 4 + 1) {
                    let i = (rnd() as usize) % b.len();
                    b[i] = rnd() as u8;
                }
                let cut = (rnd() as usize) % (b.len() + 1);
                let _ = parse(&b[..cut]);
                let _ = parse(&b);
            }
        }
        for _ in 0..20_000 {
            let n = (rnd() % 64) as usize;
            let b: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let _ = parse(&b);
        }
    }
}

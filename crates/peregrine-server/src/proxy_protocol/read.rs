//! Reading exactly the header off a TCP stream ([`read_header`]), leaving the request behind it
//! in the socket.

use super::{parse, Parsed, ProxyError, Status};
use std::fmt;

/// Largest header [`read_header`] accepts: both versions' addresses and the TLVs load
/// balancers send (ALPN, authority, a unique id, TLS details) fit with room to spare.
pub const READ_MAX: usize = 4096;

/// Why [`read_header`] gave up.
#[derive(Debug)]
pub enum ReadError {
    /// The header is malformed (or missing).
    Invalid(ProxyError),
    /// The header did not arrive whole within the deadline.
    Timeout,
    /// The header is longer than [`READ_MAX`].
    TooLarge,
    /// The client closed, or the socket failed.
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Invalid(e) => e.fmt(f),
            ReadError::Timeout => f.write_str("PROXY header timed out"),
            ReadError::TooLarge => f.write_str("PROXY header too large"),
            ReadError::Io(e) => write!(f, "reading the PROXY header: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads the PROXY header at the start of `stream` and nothing more: the bytes are peeked until
/// the header is whole, then exactly the header is consumed, so the connection's first request
/// stays in the socket for the connection driver. For the accept path of a listener that
/// requires the header; `timeout` bounds the wait (use the header timeout).
pub async fn read_header(
    stream: &tokio::net::TcpStream,
    timeout: std::time::Duration,
) -> Result<Parsed, ReadError> {
    let work = async {
        let mut buf = vec![0u8; READ_MAX];
        let mut seen = 0;
        loop {
            let n = stream.peek(&mut buf).await.map_err(ReadError::Io)?;
            if n == 0 {
                return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            match parse(&buf[..n]).map_err(ReadError::Invalid)? {
                Status::Complete(p) => {
                    // Through `readable` + `try_read`: reading needs only `&TcpStream`.
                    let mut taken = 0;
                    while taken < p.consumed {
                        stream.readable().await.map_err(ReadError::Io)?;
                        match stream.try_read(&mut buf[taken..p.consumed]) {
                            Ok(0) => {
                                return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()))
                            }
                            Ok(k) => taken += k,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(ReadError::Io(e)),
                        }
                    }
                    return Ok(p);
                }
                Status::Partial if n == buf.len() => return Err(ReadError::TooLarge),
                Status::Partial => {
                    // Peeking again returns at once while the same bytes wait: pause instead
                    // of spinning (a header split over packets is rare).
                    if n == seen {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    seen = n;
                }
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(ReadError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy_protocol::{encode_v2, V2_SIGNATURE};

    /// `read_header` over a real loopback connection: the header arrives in pieces, exactly
    /// the header is consumed, the request behind it stays in the socket.
    async fn over_socket(
        pieces: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> (Result<Parsed, ReadError>, Vec<u8>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            for p in pieces {
                c.write_all(&p).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        });
        let (mut s, _) = listener.accept().await.unwrap();
        let r = read_header(&s, std::time::Duration::from_millis(timeout_ms)).await;
        let mut rest = vec![0; 64];
        let n = if r.is_ok() {
            s.read(&mut rest).await.unwrap()
        } else {
            0
        };
        rest.truncate(n);
        client.await.unwrap();
        (r, rest)
    }

    #[test]
    fn read_header_consumes_exactly_the_header() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let v1 = b"PROXY TCP4 203.0.113.1 10.0.0.1 4000 80\r\n".to_vec();
            let (r, rest) = over_socket(
                vec![v1[..9].to_vec(), v1[9..].to_vec(), b"GET /".to_vec()],
                2000,
            )
            .await;
            let p = r.unwrap();
            assert_eq!(p.consumed, v1.len());
            assert_eq!(rest, b"GET /");
            let mut v2 = encode_v2(
                "[2001:db8::1]:1".parse().unwrap(),
                "[2001:db8::2]:2".parse().unwrap(),
            );
            v2.extend_from_slice(b"GET /x");
            let (r, rest) = over_socket(vec![v2[..20].to_vec(), v2[20..].to_vec()], 2000).await;
            assert_eq!(r.unwrap().version, 2);
            assert_eq!(rest, b"GET /x");
            // Malformed, missing, cut short, too large.
            let (r, _) = over_socket(
                vec![b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n".to_vec()],
                2000,
            )
            .await;
            assert!(
                matches!(r, Err(ReadError::Invalid(ProxyError::V1Malformed))),
                "{r:?}"
            );
            let (r, _) = over_socket(vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()], 2000).await;
            assert!(
                matches!(r, Err(ReadError::Invalid(ProxyError::NotProxy))),
                "{r:?}"
            );
            let (r, _) = over_socket(vec![b"PROXY TCP4 1.2.3.4".to_vec()], 100).await;
            assert!(matches!(r, Err(ReadError::Timeout)), "{r:?}");
            let mut big = V2_SIGNATURE.to_vec();
            big.extend_from_slice(&[0x21, 0x11, 0x20, 0x00]);
            big.resize(16 + 0x2000, 0);
            let (r, _) = over_socket(vec![big], 2000).await;
            assert!(matches!(r, Err(ReadError::TooLarge)), "{r:?}");
        });
    }
}

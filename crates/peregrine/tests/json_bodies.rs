//! `Json` answers through real sockets. Each worker cuts JSON bodies out of one buffer and reuses
//! it once the answers cut from it are gone, so what follows checks what that must not change:
//! every answer keeps its own bytes while others are written after it, whether the engine copied
//! it out at once (small) or still holds it (large, on a connection that is not reading).

mod common;
use common::TestServer;
use peregrine::{get, App, Error, Json, Request};
use std::time::Duration;

/// `{"n": N, "fill": "<c repeated len times>"}`: each answer's bytes say which it is.
#[derive(serde::Serialize)]
struct Numbered {
    n: u64,
    fill: String,
}

fn numbered(n: u64, len: usize) -> Numbered {
    let c = (b'a' + (n % 26) as u8) as char;
    Numbered {
        n,
        fill: std::iter::repeat_n(c, len).collect(),
    }
}

/// Writes part of its JSON, then panics (a bug in a `Serialize` impl).
struct PanicsHalfway;

impl serde::Serialize for PanicsHalfway {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("partial", "written before the panic")?;
        panic!("Serialize impl bug");
    }
}

fn app() -> App {
    App::new()
        .route(
            "/panics",
            get(|_req: Request| async { Json(PanicsHalfway) }),
        )
        .route(
            "/json/{n}/{len}",
            get(|req: Request| async move {
                let n: u64 = req.param("n")?;
                let len: usize = req.param("len")?;
                Ok::<_, Error>(Json(numbered(n, len)))
            }),
        )
}

fn check(body: &[u8], n: u64, len: usize) {
    let want = serde_json::to_vec(&numbered(n, len)).unwrap();
    assert!(body == want, "answer {n} ({len} bytes of fill) was altered");
}

#[test]
fn pipelined_answers_of_every_size_keep_their_bytes() {
    let srv = TestServer::start(app());
    let mut conn = srv.connect();
    // Sizes around the buffer's thresholds: small, several per chunk, a chunk, beyond.
    let sizes = [0, 10, 900, 1_100, 5_000, 8_200, 20_000, 70_000, 3];
    for round in 0..4u64 {
        let batch: String = sizes
            .iter()
            .enumerate()
            .map(|(i, len)| {
                let n = round * 100 + i as u64;
                format!("GET /json/{n}/{len} HTTP/1.1\r\nHost: t\r\n\r\n")
            })
            .collect();
        conn.write(batch.as_bytes());
        for (i, &len) in sizes.iter().enumerate() {
            let r = conn.read(false);
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-type"), Some("application/json"));
            check(&r.body, round * 100 + i as u64, len);
        }
    }
}

#[test]
fn an_answer_held_for_a_slow_reader_is_not_overwritten_by_later_ones() {
    let srv = TestServer::start(app());
    // A client that asks for 8 MB of answers and does not read: more than the socket buffers
    // take, so the engine still holds some of them while it serves the other connection.
    let mut slow = srv.connect();
    let held: String = (0..8)
        .map(|n| format!("GET /json/{n}/1000000 HTTP/1.1\r\nHost: t\r\n\r\n"))
        .collect();
    slow.write(held.as_bytes());
    std::thread::sleep(Duration::from_millis(200));
    // Meanwhile the same worker answers many others, cutting them from its buffer.
    let mut fast = srv.connect();
    for n in 1_000..1_400u64 {
        let len = (n as usize * 37) % 3_000;
        fast.write(format!("GET /json/{n}/{len} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        check(&fast.read(false).body, n, len);
    }
    // The slow client's answers arrive intact.
    for n in 0..8 {
        let r = slow.read(false);
        check(&r.body, n, 1_000_000);
    }
    // And the connection is still usable.
    slow.write(b"GET /json/9/1 HTTP/1.1\r\nHost: t\r\n\r\n");
    check(&slow.read(false).body, 9, 1);
}

#[test]
fn a_serialisation_that_panicked_answers_500_and_the_next_body_is_clean() {
    let srv = TestServer::start(app());
    let mut conn = srv.connect();
    for n in 0..3u64 {
        let r = srv.get("/panics", &[]);
        assert_eq!(r.status, 500);
        assert!(!r.text().contains("partial"));
        // The same worker's next JSON body starts where it should.
        conn.write(format!("GET /json/{n}/5 HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        check(&conn.read(false).body, n, 5);
    }
}

//! Request bodies: content-coding decoding with the limit on the decoded size, one body limit
//! shared by engine and framework (answered as problem+json), multipart with limits and
//! streaming to disk.

mod common;
use common::{request, TestServer};
use peregrine::{post, App, Error, MultipartLimits, Request};
use std::io::Write;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(data).unwrap();
    }
    out
}

async fn echo_json(mut req: Request) -> Result<String, Error> {
    let v: serde_json::Value = req.json().await?;
    Ok(v.to_string())
}

async fn echo_text(mut req: Request) -> Result<String, Error> {
    req.text().await
}

fn app() -> App {
    App::new()
        .route("/json", post(echo_json))
        .route("/text", post(echo_text))
        .body_limit(64 * 1024)
}

#[tokio::test]
async fn gzip_deflate_and_br_bodies_are_decoded() {
    let c = app().test();
    let json = br#"{"title":"fly","done":false}"#;
    let r = c
        .post("/json")
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(gzip(json))
        .send()
        .await;
    assert_eq!(
        (r.status(), r.text()),
        (200, r#"{"done":false,"title":"fly"}"#)
    );
    let r = c
        .post("/text")
        .header("content-encoding", "br")
        .body(brotli(b"brotli text"))
        .send()
        .await;
    assert_eq!(r.text(), "brotli text");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(b"deflated").unwrap();
    let r = c
        .post("/text")
        .header("content-encoding", "deflate")
        .body(z.finish().unwrap())
        .send()
        .await;
    assert_eq!(r.text(), "deflated");
}

#[tokio::test]
async fn bad_codings_are_415_or_400_and_bombs_413() {
    let c = app().test();
    let r = c
        .post("/text")
        .header("content-encoding", "zstd")
        .body("x")
        .send()
        .await;
    assert_eq!(r.status(), 415);
    assert_eq!(r.header("accept-encoding"), Some("gzip, deflate, br"));
    let r = c
        .post("/text")
        .header("content-encoding", "gzip")
        .body("not gzip at all")
        .send()
        .await;
    assert_eq!(r.status(), 400);
    // ~1 KiB of gzip that decodes to 1 MiB, against a 64 KiB limit.
    let bomb = gzip(&vec![b'a'; 1 << 20]);
    assert!(bomb.len() < 2048, "{}", bomb.len());
    let r = c
        .post("/text")
        .header("content-encoding", "gzip")
        .body(bomb)
        .send()
        .await;
    assert_eq!(r.status(), 413);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
}

#[tokio::test]
async fn decoding_can_be_turned_off() {
    let c = app().decode_request_bodies(false).test();
    let r = c
        .post("/text")
        .header("content-encoding", "gzip")
        .body(gzip(b"hi"))
        .send()
        .await;
    // The raw gzip bytes are not UTF-8.
    assert_eq!(r.status(), 400);
}

#[test]
fn one_body_limit_answered_as_problem_json_by_the_framework() {
    // The app's limit, with the engine's default config.
    let s = TestServer::start(App::new().route("/text", post(echo_text)).body_limit(10));
    let r = s.send(&request("POST", "/text", &[], &"x".repeat(11)));
    let j = r.assert_problem(413, "Content Too Large");
    assert_eq!(j["detail"], "request body exceeds the size limit");
    assert_eq!(
        s.send(&request("POST", "/text", &[], "0123456789")).text(),
        "0123456789"
    );
    // Chunked past the limit.
    let raw = "POST /text HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
               6\r\nabcdef\r\n6\r\nghijkl\r\n0\r\n\r\n";
    s.send(raw).assert_problem(413, "Content Too Large");

    // Only the engine's max_body_size set: the framework takes it as the limit.
    let s = TestServer::start_with(App::new().route("/text", post(echo_text)), |c| {
        c.server.limits.max_body_size = 10
    });
    s.send(&request("POST", "/text", &[], &"x".repeat(11)))
        .assert_problem(413, "Content Too Large");
    // A declared length far past the limit, body never sent: answered at once, not awaited.
    let raw = "POST /text HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n";
    s.send(raw).assert_problem(413, "Content Too Large");
}

fn form(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, file, data) in parts {
        b.extend_from_slice(b"--BOUNDARY\r\ncontent-disposition: form-data; name=\"");
        b.extend_from_slice(name.as_bytes());
        b.push(b'"');
        if let Some(f) = file {
            b.extend_from_slice(
                format!("; filename=\"{f}\"\r\ncontent-type: application/octet-stream").as_bytes(),
            );
        }
        b.extend_from_slice(b"\r\n\r\n");
        b.extend_from_slice(data);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"--BOUNDARY--\r\n");
    b
}

fn upload_app(dir: std::path::PathBuf, limits: MultipartLimits) -> App {
    App::new().route(
        "/upload",
        post(move |mut req: Request| {
            let dir = dir.clone();
            async move {
                let mut mp = req.multipart_with(limits)?;
                let mut out = Vec::new();
                while let Some(mut f) = mp.next_field().await? {
                    let name = f.name().unwrap_or("").to_owned();
                    if f.file_name().is_some() {
                        let n = f.save_to(dir.join(&name)).await?;
                        out.push(format!("{name}:{n}"));
                    } else {
                        out.push(format!("{name}={}", f.text().await?));
                    }
                }
                Ok::<_, Error>(out.join(","))
            }
        }),
    )
}

#[tokio::test]
async fn multipart_parts_limits_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let limits = MultipartLimits {
        total: 4096,
        per_part: 1024,
    };
    let c = upload_app(dir.path().to_owned(), limits).test();
    let ct = "multipart/form-data; boundary=BOUNDARY";
    let r = c
        .post("/upload")
        .header("content-type", ct)
        .body(form(&[
            ("title", None, b"falcon"),
            ("photo", Some("a.bin"), &[7u8; 1000]),
        ]))
        .send()
        .await;
    assert_eq!((r.status(), r.text()), (200, "title=falcon,photo:1000"));
    assert_eq!(
        std::fs::read(dir.path().join("photo")).unwrap(),
        vec![7u8; 1000]
    );

    // A part past its limit: 413, and the partial file is gone.
    let r = c
        .post("/upload")
        .header("content-type", ct)
        .body(form(&[("big", Some("b.bin"), &[1u8; 2000])]))
        .send()
        .await;
    assert_eq!(r.status(), 413);
    assert!(r.json::<serde_json::Value>()["detail"]
        .as_str()
        .unwrap()
        .contains("`big`"));
    assert!(!dir.path().join("big").exists());

    // The whole body past its limit.
    let parts: Vec<(&str, Option<&str>, &[u8])> =
        (0..6).map(|_| ("p", None, &[b'x'; 900][..])).collect();
    let r = c
        .post("/upload")
        .header("content-type", ct)
        .body(form(&parts))
        .send()
        .await;
    assert_eq!(r.status(), 413);

    // Not multipart, and malformed multipart.
    let r = c
        .post("/upload")
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await;
    assert_eq!(r.status(), 415);
    let r = c
        .post("/upload")
        .header("content-type", ct)
        .body("--BOUNDARY\r\nbroken")
        .send()
        .await;
    assert_eq!(r.status(), 400);
}

#[test]
fn multipart_streams_a_large_upload_to_disk_over_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let limits = MultipartLimits {
        total: 8 << 20,
        per_part: 6 << 20,
    };
    let s = TestServer::start(upload_app(dir.path().to_owned(), limits));
    let data: Vec<u8> = (0..(5 << 20)).map(|i| (i % 251) as u8).collect();
    let body = form(&[("file", Some("f.bin"), &data)]);
    let mut raw = format!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=BOUNDARY\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    let r = s.send_bytes(&raw, false);
    assert_eq!(
        (r.status, r.text()),
        (200, format!("file:{}", data.len()).as_str())
    );
    assert_eq!(std::fs::read(dir.path().join("file")).unwrap(), data);
}

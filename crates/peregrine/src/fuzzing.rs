//! Entry points shared by the fuzz targets (`crates/peregrine/fuzz`, nightly + libFuzzer) and
//! their bounded proptest twins (`tests/fuzz_props.rs`, run by `cargo test`). Each takes
//! arbitrary bytes, drives the real code (through a compiled [`App`] where a request is
//! involved) and panics if an invariant breaks. Not a stable API.

use crate::fs::{safe_relative, ServeDir};
use crate::middleware::compression::{negotiate, Coding};
use crate::middleware::Compression;
use crate::path::{normalize_with, EncodedSlashes};
use crate::request::find_cookie;
use crate::{get, post, App, AppService, Request};
use peregrine_server::{Response, ResponseBody, Service};
use std::borrow::Cow;
use std::collections::HashMap;

thread_local! {
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    static ROUTING_APPS: [AppService; 2] = [
        routing_app().into_service(),
        routing_app().encoded_slashes(EncodedSlashes::Keep).into_service(),
    ];
    static MISC_APP: AppService = misc_app().into_service();
    static FILES: (tempfile_dir::Dir, AppService) = files_app();
}

/// Header fields of an answer, names lower-cased.
type Fields = Vec<(String, Vec<u8>)>;

/// Sends `raw` (a whole request) to `svc`; `None` if the codec refuses it.
fn call(svc: &AppService, raw: &[u8]) -> Option<(u16, Fields, Vec<u8>)> {
    let req = peregrine_server::Request::from_bytes(raw, "127.0.0.1:1".parse().unwrap()).ok()?;
    let res: Response = RT.with(|rt| rt.block_on(svc.call(req)));
    let body = match res.body {
        ResponseBody::Empty | ResponseBody::Upgrade(_) => Vec::new(),
        ResponseBody::Full(b) => b.to_vec(),
        ResponseBody::Static(b) => b.to_vec(),
        ResponseBody::File { file, offset, len } => {
            use std::os::unix::fs::FileExt;
            let mut buf = vec![0u8; len as usize];
            file.read_exact_at(&mut buf, offset).unwrap();
            buf
        }
        ResponseBody::Stream(_) | ResponseBody::SizedStream { .. } => {
            panic!("no streamed bodies expected here")
        }
    };
    let headers = res
        .headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_vec()))
        .collect();
    Some((res.status, headers, body))
}

fn header<'a>(h: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    h.iter().find(|(n, _)| n == name).map(|(_, v)| &v[..])
}

// ---------------------------------------------------------------- routing

fn routing_app() -> App {
    App::new()
        .route(
            "/static/{*path}",
            get(|req: Request| async move {
                let raw = req.param_raw("path").unwrap_or("");
                match safe_relative(raw, false) {
                    Some(rel) => format!("S|{}", rel.display()),
                    None => "S-".to_owned(),
                }
            }),
        )
        .route("/static/private/{*path}", get(|_r: Request| async { "P" }))
        .route(
            "/users/{id}",
            get(|req: Request| async move {
                let _ = req.param::<u64>("id");
                req.param_str("id").map(|s| format!("U|{s}"))
            }),
        )
        .route(
            "/a/{x}/b/{*rest}",
            get(|req: Request| async move {
                let x = req.param_str("x")?.into_owned();
                let rest = req.param_str("rest")?.into_owned();
                Ok::<_, crate::Error>(format!("A|{x}|{rest}"))
            }),
        )
}

/// Path normalisation, routing and parameter decoding. First byte: encoded-slash policy;
/// the rest: a request-target.
pub fn routing(data: &[u8]) {
    let Some((&policy, target)) = data.split_first() else {
        return;
    };
    let keep = policy & 1 == 1;
    let slashes = if keep {
        EncodedSlashes::Keep
    } else {
        EncodedSlashes::Refuse
    };
    let text = String::from_utf8_lossy(target);
    let slashed = format!("/{text}");
    for p in [&*text, &*slashed] {
        check_normal_form(p, slashes);
    }

    let mut raw = b"GET ".to_vec();
    raw.extend_from_slice(target);
    raw.extend_from_slice(b" HTTP/1.1\r\nHost: f\r\n\r\n");
    let Some((status, _, body)) = ROUTING_APPS.with(|a| call(&a[usize::from(keep)], &raw)) else {
        return;
    };
    assert_ne!(status, 500, "a handler failed on {text:?}");
    // The path as the codec delivered it (origin-form or the path of absolute-form).
    let parsed = peregrine_server::Request::from_bytes(&raw, "127.0.0.1:1".parse().unwrap())
        .expect("parsed once already");
    let Ok(canon) = normalize_with(parsed.path(), slashes) else {
        assert_eq!(status, 400, "a refused path must be answered 400: {text:?}");
        return;
    };
    let body = String::from_utf8_lossy(&body);
    // The bypass property: whatever the spelling, a path whose decoded segments name
    // something under /static/private/ reaches only the protected route.
    let segs = decoded_segments(&canon);
    let under_private =
        segs.len() >= 3 && segs[0] == b"static" && segs[1] == b"private" && !segs[2].is_empty();
    if under_private && status == 200 {
        assert_eq!(body, "P", "{text:?} reached another route");
    }
    if let Some(rel) = body.strip_prefix("S|") {
        let mut parts = rel.split('/');
        let first = parts.next();
        assert!(
            !(first == Some("private") && parts.next().is_some()),
            "{text:?} served {rel:?} outside the protected route"
        );
    }
}

fn decoded_segments(canon: &str) -> Vec<Vec<u8>> {
    canon
        .split('/')
        .skip(1)
        .map(|s| percent_encoding::percent_decode_str(s).collect())
        .collect()
}

fn check_normal_form(p: &str, slashes: EncodedSlashes) {
    let Ok(c) = normalize_with(p, slashes) else {
        return;
    };
    if !p.starts_with('/') && !p.is_empty() {
        assert_eq!(&*c, p, "non-origin paths pass untouched");
        return;
    }
    assert!(
        matches!(normalize_with(&c, slashes), Ok(Cow::Borrowed(_))),
        "{p:?} -> {c:?} is not stable"
    );
    assert!(!c.contains("//"), "{p:?} -> {c:?}");
    let segs = decoded_segments(&c);
    for (i, s) in segs.iter().enumerate() {
        assert!(s != b"." && s != b"..", "{p:?} -> {c:?}");
        assert!(!s.contains(&0), "{p:?} -> {c:?}");
        if slashes == EncodedSlashes::Refuse {
            assert!(!s.contains(&b'/') && !s.contains(&b'\\'), "{p:?} -> {c:?}");
        }
        assert!(!s.is_empty() || i == segs.len() - 1, "{p:?} -> {c:?}");
    }
}

// ---------------------------------------------------------------- query, form, cookies

#[derive(serde::Deserialize)]
#[allow(dead_code)] // Read only by serde: the point is that decoding into it never panics.
struct Typed {
    a: Option<u32>,
    b: Option<String>,
    c: Option<bool>,
    d: Option<f64>,
}

fn misc_app() -> App {
    App::new()
        .route(
            "/q",
            get(|req: Request| async move {
                let pairs: Vec<(String, String)> = req.query()?;
                let _ = req.query::<HashMap<String, String>>();
                let _ = req.query::<Typed>();
                Ok::<_, crate::Error>(pairs.len().to_string())
            }),
        )
        .route(
            "/form",
            post(|mut req: Request| async move {
                let pairs: Vec<(String, String)> = req.form().await?;
                Ok::<_, crate::Error>(pairs.len().to_string())
            }),
        )
        .route(
            "/cookie",
            get(|req: Request| async move {
                let names = ["sid", "a", "", "b c"];
                let found: Vec<String> = names
                    .iter()
                    .map(|n| req.cookie(n).unwrap_or("-").to_owned())
                    .collect();
                found.join("|")
            }),
        )
        .route(
            "/text",
            get(|_r: Request| async { "negotiate me ".repeat(200) }),
        )
        .layer(Compression::new())
}

/// Query strings (through `Request::query`) and form bodies (through `Request::form`), and the
/// decoder's round trip: pairs decoded, encoded again and decoded give the same pairs.
pub fn query_and_form(data: &[u8]) {
    if let Ok(pairs) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(data) {
        let again = serde_urlencoded::to_string(&pairs).expect("pairs encode");
        let back: Vec<(String, String)> =
            serde_urlencoded::from_str(&again).expect("encoded pairs decode");
        assert_eq!(pairs, back, "round trip of {data:?}");
    }
    let mut q = b"GET /q?".to_vec();
    q.extend_from_slice(data);
    q.extend_from_slice(b" HTTP/1.1\r\nHost: f\r\n\r\n");
    let mut f = format!(
        "POST /form HTTP/1.1\r\nHost: f\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        data.len()
    )
    .into_bytes();
    f.extend_from_slice(data);
    MISC_APP.with(|app| {
        for raw in [&q, &f] {
            if let Some((status, _, body)) = call(app, raw) {
                assert!(matches!(status, 200 | 400), "{status} for {data:?}");
                if status == 200 {
                    assert!(std::str::from_utf8(&body).is_ok_and(|b| b.parse::<usize>().is_ok()));
                }
            }
        }
    });
}

/// `Cookie` parsing (through `Request::cookie`) and the `SetCookie` → `Cookie` round trip.
pub fn cookies(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // What `find_cookie` returns is always a piece of the header.
    for name in ["sid", "a", ""] {
        if let Some(v) = find_cookie(&text, name) {
            let (start, end) = (text.as_ptr() as usize, text.as_ptr() as usize + text.len());
            let p = v.as_ptr() as usize;
            assert!(p >= start && p + v.len() <= end);
        }
    }
    // A cookie the framework agrees to set is read back unchanged.
    let (name, value) = text.split_once('=').unwrap_or((&text, ""));
    if let Ok(h) = crate::cookie::SetCookie::new(name.to_owned(), value.to_owned()).to_header() {
        assert!(!h.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0));
        let h = String::from_utf8(h).expect("cookie header is text");
        let pair = h.split("; ").next().unwrap();
        let plain = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        let header = format!("x=1; {pair}; y=2");
        if name != "x" && name != "y" {
            assert_eq!(find_cookie(&header, name), Some(plain), "{h:?}");
        }
    }
    let mut raw = b"GET /cookie HTTP/1.1\r\nHost: f\r\nCookie: ".to_vec();
    raw.extend_from_slice(data);
    raw.extend_from_slice(b"\r\n\r\n");
    if let Some((status, _, _)) = MISC_APP.with(|app| call(app, &raw)) {
        assert_eq!(status, 200);
    }
}

// ---------------------------------------------------------------- content negotiation

/// `Accept-Encoding` negotiation, directly and through the `Compression` layer (the coding
/// sent is the one negotiated, and the body decodes to the original).
pub fn negotiation(data: &[u8]) {
    let one = |g, b| negotiate(data, g, b);
    assert_eq!(one(false, false), None);
    assert!(matches!(one(true, false), None | Some(Coding::Gzip)));
    assert!(matches!(one(false, true), None | Some(Coding::Brotli)));
    match one(true, true) {
        None => assert_eq!((one(true, false), one(false, true)), (None, None)),
        Some(Coding::Gzip) => assert_eq!(one(true, false), Some(Coding::Gzip)),
        Some(Coding::Brotli) => assert_eq!(one(false, true), Some(Coding::Brotli)),
    }
    let mut raw = b"GET /text HTTP/1.1\r\nHost: f\r\nAccept-Encoding: ".to_vec();
    raw.extend_from_slice(data);
    raw.extend_from_slice(b"\r\n\r\n");
    let Some((status, headers, body)) = MISC_APP.with(|app| call(app, &raw)) else {
        return;
    };
    assert_eq!(status, 200);
    let original = "negotiate me ".repeat(200);
    // What the layer saw: the first Accept-Encoding line, as the codec delivered it.
    let req = peregrine_server::Request::from_bytes(&raw, "127.0.0.1:1".parse().unwrap()).unwrap();
    let expect = req
        .header("accept-encoding")
        .and_then(|a| negotiate(a, true, true));
    let decoded = match header(&headers, "content-encoding") {
        None => {
            assert_eq!(expect, None);
            body
        }
        Some(b"gzip") => {
            assert_eq!(expect, Some(Coding::Gzip));
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut out)
                .expect("gzip decodes");
            out
        }
        Some(b"br") => {
            assert_eq!(expect, Some(Coding::Brotli));
            let mut out = Vec::new();
            brotli::BrotliDecompress(&mut &body[..], &mut out).expect("brotli decodes");
            out
        }
        Some(other) => panic!("unexpected coding {other:?}"),
    };
    assert!(decoded == original.as_bytes());
}

// ---------------------------------------------------------------- conditional requests

/// A temporary directory removed on drop (kept tiny: the fuzz build avoids dev-dependencies).
mod tempfile_dir {
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

const FILE_LEN: usize = 100;

fn file_bytes() -> Vec<u8> {
    (0..FILE_LEN as u8).collect()
}

fn files_app() -> (tempfile_dir::Dir, AppService) {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    let dir = std::env::temp_dir().join(format!("peregrine-fuzz-{}-{r:x}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("f.bin"), file_bytes()).expect("temp file");
    let svc = App::new()
        .route("/s/{*path}", get(ServeDir::new(&dir)))
        .into_service();
    (tempfile_dir::Dir(dir), svc)
}

/// Conditional headers and `Range` against a real 100-byte file through `ServeDir`. The input
/// is split on `\n` into the values of If-None-Match, If-Modified-Since, If-Match,
/// If-Unmodified-Since, If-Range and Range (a `*` at the start of a value uses the file's
/// current ETag in its place, so that matching validators are reached too).
pub fn conditionals(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    FILES.with(|(_, svc)| {
        let etag = match call(svc, b"GET /s/f.bin HTTP/1.1\r\nHost: f\r\n\r\n") {
            Some((200, h, _)) => String::from_utf8(header(&h, "etag").unwrap().to_vec()).unwrap(),
            other => panic!("plain GET failed: {other:?}"),
        };
        let names = [
            "If-None-Match",
            "If-Modified-Since",
            "If-Match",
            "If-Unmodified-Since",
            "If-Range",
            "Range",
        ];
        let mut raw = b"GET /s/f.bin HTTP/1.1\r\nHost: f\r\n".to_vec();
        for (name, value) in names.iter().zip(text.split('\n')) {
            if value.is_empty() {
                continue;
            }
            let value = match value.strip_prefix('*') {
                Some(rest) if !rest.is_empty() => format!("{etag}{rest}"),
                _ => value.to_owned(),
            };
            raw.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        let Some((status, h, body)) = call(svc, &raw) else {
            return;
        };
        let file = file_bytes();
        match status {
            200 => assert!(body == file),
            304 => assert!(body.is_empty()),
            412 => {}
            416 => assert_eq!(header(&h, "content-range"), Some(&b"bytes */100"[..])),
            206 => check_partial(&h, &body, &file),
            other => panic!("status {other} for {raw:?}"),
        }
    });
}

fn check_partial(h: &[(String, Vec<u8>)], body: &[u8], file: &[u8]) {
    let ct = header(h, "content-type").expect("206 has a content type");
    if let Some(b) = ct.strip_prefix(b"multipart/byteranges; boundary=") {
        let b = std::str::from_utf8(b).unwrap();
        let text = String::from_utf8_lossy(body);
        let mut total = 0;
        let parts: Vec<&str> = text.split(&format!("\r\n--{b}")).collect();
        assert!(parts.len() >= 3, "at least two parts");
        assert_eq!(parts[0], "");
        assert_eq!(*parts.last().unwrap(), "--\r\n");
        // Positions in the raw body, so binary data is compared exactly.
        let mut at = 0;
        for part in &parts[1..parts.len() - 1] {
            at += 2 + 2 + b.len();
            let head_end = part.find("\r\n\r\n").expect("part head");
            let range_line = part[..head_end]
                .lines()
                .find_map(|l| l.strip_prefix("Content-Range: bytes "))
                .expect("part Content-Range");
            let (a, z) = parse_content_range(range_line);
            let data = &body[at + head_end + 4..at + head_end + 4 + (z - a + 1)];
            assert!(data == &file[a..=z]);
            total += z - a + 1;
            at += part.len();
        }
        assert!(total <= file.len(), "multipart sends no more than the file");
    } else {
        let cr = header(h, "content-range").expect("206 has Content-Range");
        let cr = std::str::from_utf8(cr).unwrap();
        let (a, z) = parse_content_range(cr.strip_prefix("bytes ").unwrap());
        assert!(body == &file[a..=z]);
    }
}

fn parse_content_range(s: &str) -> (usize, usize) {
    let (range, len) = s.split_once('/').unwrap();
    assert_eq!(len, "100");
    let (a, z) = range.split_once('-').unwrap();
    let (a, z): (usize, usize) = (a.parse().unwrap(), z.parse().unwrap());
    assert!(a <= z && z < FILE_LEN);
    (a, z)
}

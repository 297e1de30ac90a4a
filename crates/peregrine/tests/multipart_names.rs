//! Client file names in multipart uploads, over a real socket: `file_name()` is one safe path
//! component, so both the obvious `save_to(dir.join(field.file_name()))` and `save_in(dir)`
//! keep every file inside the upload directory, whatever name the client sends; `save_in`
//! never overwrites nor follows a planted symbolic link, and removes the partial file of an
//! upload the client abandoned.

mod common;
use common::TestServer;
use peregrine::{post, App, Error, Request};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Names a client may send to escape the upload directory, and the name each is saved as
/// (`None`: refused, nothing written).
const HOSTILE: [(&[u8], Option<&str>); 9] = [
    (b"../x", Some("x")),
    (b"../../x", Some("x")),
    (b"/etc/x", Some("x")),
    (b"C:\\x", Some("x")),
    (b"a/b", Some("b")),
    (b"..", None),
    (b"x\0y", None), // refused by the part-header parser (400) or saved as "xy"
    (b"..\\..\\x", Some("x")),
    (b"uploads/../../x", Some("x")),
];

/// The upload handlers: `x-dir` (set by the test, not a client) names the upload directory.
fn app() -> App {
    App::new()
        .route(
            "/save_in",
            post(|mut req: Request| async move {
                let dir = PathBuf::from(req.header("x-dir").unwrap_or_default());
                let mut form = req.multipart()?;
                let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
                let n = field.save_in(&dir).await?;
                Ok::<_, Error>(format!("{} {n}", field.file_name().unwrap_or_default()))
            }),
        )
        .route(
            // What applications wrote before: the client's name joined to the directory.
            "/save_to",
            post(|mut req: Request| async move {
                let dir = PathBuf::from(req.header("x-dir").unwrap_or_default());
                let mut form = req.multipart()?;
                let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
                let name = field.file_name().unwrap_or("unnamed").to_owned();
                let n = field.save_to(dir.join(&name)).await?;
                Ok::<_, Error>(format!("{name} {n}"))
            }),
        )
}

/// A multipart request with one file part named `file_name` (raw bytes) holding `data`.
fn upload(path: &str, dir: &Path, file_name: &[u8], data: &[u8]) -> Vec<u8> {
    let mut body = b"--XX\r\ncontent-disposition: form-data; name=\"f\"; filename=\"".to_vec();
    body.extend_from_slice(file_name);
    body.extend_from_slice(b"\"\r\ncontent-type: application/octet-stream\r\n\r\n");
    body.extend_from_slice(data);
    body.extend_from_slice(b"\r\n--XX--\r\n");
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nx-dir: {}\r\ncontent-type: multipart/form-data; boundary=XX\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        dir.display(),
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    req
}

/// Every file under `root`, recursively.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// Sends each hostile name to `path` with a fresh upload directory three levels down in its
/// own temporary tree, and checks that the only file written is `uploads/<safe name>`.
fn hostile_names_stay_inside(path: &str) {
    let s = TestServer::start(app());
    for (i, (raw, want)) in HOSTILE.iter().enumerate() {
        let tree = tempfile::tempdir().unwrap();
        let uploads = tree.path().join("a/b/uploads");
        std::fs::create_dir_all(&uploads).unwrap();
        let shown = String::from_utf8_lossy(raw);
        let r = s.send_bytes(&upload(path, &uploads, raw, b"payload"), false);
        let files = files_under(tree.path());
        match want {
            Some(name) => {
                assert_eq!(r.status, 200, "{i} {shown:?}: {}", r.text());
                assert_eq!(r.text(), format!("{name} 7"), "{shown:?}");
                assert_eq!(files, vec![uploads.join(name)], "{shown:?}");
                assert_eq!(std::fs::read(uploads.join(name)).unwrap(), b"payload");
            }
            None if raw.contains(&0) && r.status == 200 => {
                assert_eq!(r.text(), "xy 7", "{shown:?}");
                assert_eq!(files, vec![uploads.join("xy")]);
            }
            None => {
                assert_eq!(r.status, 400, "{shown:?}: {}", r.text());
                assert!(files.is_empty(), "{shown:?}: {files:?}");
            }
        }
    }
}

#[test]
fn hostile_file_names_stay_in_the_upload_directory_with_save_in() {
    hostile_names_stay_inside("/save_in");
}

#[test]
fn the_client_file_name_joined_to_a_directory_stays_inside_it() {
    // The names whose `file_name()` is `None` fall back to "unnamed" in this handler.
    let s = TestServer::start(app());
    for (raw, want) in HOSTILE {
        let tree = tempfile::tempdir().unwrap();
        let uploads = tree.path().join("a/b/uploads");
        std::fs::create_dir_all(&uploads).unwrap();
        // An absolute name pointing into this test's own tree, so the old behaviour (writing
        // there) is visible without touching the real filesystem root.
        let raw = if raw == b"/etc/x" {
            format!("{}/x", tree.path().display()).into_bytes()
        } else {
            raw.to_vec()
        };
        let r = s.send_bytes(&upload("/save_to", &uploads, &raw, b"payload"), false);
        let shown = String::from_utf8_lossy(&raw);
        if r.status == 400 {
            assert!(raw.contains(&0), "{shown:?}: {}", r.text());
            continue;
        }
        assert_eq!(r.status, 200, "{shown:?}: {}", r.text());
        let name = want.unwrap_or(if raw.contains(&0) { "xy" } else { "unnamed" });
        assert_eq!(
            files_under(tree.path()),
            vec![uploads.join(name)],
            "{shown:?}"
        );
    }
}

#[test]
fn save_in_never_overwrites_nor_follows_a_symbolic_link() {
    let s = TestServer::start(app());
    let tree = tempfile::tempdir().unwrap();
    let uploads = tree.path().join("uploads");
    std::fs::create_dir(&uploads).unwrap();
    std::fs::write(uploads.join("taken.txt"), b"original").unwrap();
    let r = s.send_bytes(&upload("/save_in", &uploads, b"taken.txt", b"new"), false);
    r.assert_problem(409, "Conflict");
    assert_eq!(
        std::fs::read(uploads.join("taken.txt")).unwrap(),
        b"original"
    );

    // A link planted in the upload directory, to a file outside it and to nowhere.
    let outside = tree.path().join("secret");
    std::fs::write(&outside, b"secret").unwrap();
    std::os::unix::fs::symlink(&outside, uploads.join("link")).unwrap();
    std::os::unix::fs::symlink(tree.path().join("nowhere"), uploads.join("dangling")).unwrap();
    for name in [&b"link"[..], b"../uploads/link", b"dangling"] {
        let r = s.send_bytes(&upload("/save_in", &uploads, name, b"pwned"), false);
        assert_eq!(r.status, 409, "{}", r.text());
    }
    assert_eq!(std::fs::read(&outside).unwrap(), b"secret");
    assert!(!tree.path().join("nowhere").exists());
}

#[test]
fn an_abandoned_upload_leaves_no_partial_file() {
    let s = TestServer::start(app());
    let tree = tempfile::tempdir().unwrap();
    let uploads = tree.path().join("uploads");
    std::fs::create_dir(&uploads).unwrap();
    // A part announced as 512 KiB (within the default body limit), of which the client sends 64 KiB and then goes away.
    let full = upload("/save_in", &uploads, b"big.bin", &vec![b'z'; 512 << 10]);
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.write_all(&full[..full.len() - (512 << 10) + (64 << 10)])
        .unwrap();
    let target = uploads.join("big.bin");
    let start = Instant::now();
    while !target.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the upload never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(conn);
    let start = Instant::now();
    while target.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the partial file was left behind"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(files_under(tree.path()).is_empty());
}

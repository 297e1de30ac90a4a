//! `ServeDir`'s symlink policy (`ServeDir::symlinks`), over real sockets: by default no link
//! below the root is followed, so a link can neither publish a file outside the root nor
//! alias a directory that another route protects with a hook; the other policies are
//! explicit.
#![cfg(unix)]

mod common;
use common::TestServer;
use peregrine::fs::{ServeDir, Symlinks};
use peregrine::middleware::Hook;
use peregrine::{App, Request, Response};
use std::os::unix::fs::symlink;
use std::path::Path;

struct RequireToken;

impl Hook for RequireToken {
    fn before(&self, req: &mut Request) -> Result<(), Response> {
        if req.header("authorization") == Some("Bearer let-me-in") {
            Ok(())
        } else {
            Err(Response::new(401))
        }
    }
}

/// A public root with a protected `private/` inside (the layout of the old docs/security.md
/// recipe), a secret outside, and links of every kind in the public part.
struct Site {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn site() -> Site {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (r, o) = (root.path(), outside.path());
    std::fs::write(o.join("secret.txt"), "outside secret").unwrap();
    std::fs::create_dir(o.join("dir")).unwrap();
    std::fs::write(o.join("dir/file.txt"), "outside dir file").unwrap();
    std::fs::create_dir(r.join("private")).unwrap();
    std::fs::write(r.join("private/x.txt"), "the secret").unwrap();
    std::fs::write(r.join("public.txt"), "public").unwrap();
    std::fs::create_dir(r.join("real")).unwrap();
    std::fs::write(r.join("real/page.txt"), "real page").unwrap();
    std::fs::write(r.join(".hidden.txt"), "hidden").unwrap();
    // Into the protected directory, as a file and as a directory.
    symlink(r.join("private/x.txt"), r.join("leak.txt")).unwrap();
    symlink(r.join("private"), r.join("door")).unwrap();
    // Out of the root, as a file and as a directory.
    symlink(o.join("secret.txt"), r.join("escape.txt")).unwrap();
    symlink(o.join("dir"), r.join("outdir")).unwrap();
    // Inside the public part, relative.
    symlink("real/page.txt", r.join("alias.txt")).unwrap();
    symlink("real", r.join("realdir")).unwrap();
    // To a hidden name.
    symlink(".hidden.txt", r.join("shown.txt")).unwrap();
    Site { root, outside }
}

/// The recipe's routes: the public root under `/static`, the private directory (nested in it)
/// under `/static/private` behind the hook.
fn app(root: &Path, dir: ServeDir) -> App {
    App::new().merge(dir.router("/static")).merge(
        ServeDir::new(root.join("private"))
            .router("/static/private")
            .hook(RequireToken),
    )
}

/// The review's case: a link in the public part into the hook-protected directory served it
/// without the hook (200 "the secret" before). By default every link is refused.
#[test]
fn a_link_into_a_hooked_directory_does_not_bypass_the_hook() {
    let site = site();
    let r = site.root.path();
    let s = TestServer::start(app(r, ServeDir::new(r)));
    for path in ["/static/leak.txt", "/static/door/x.txt"] {
        let res = s.get(path, &[]);
        assert_eq!(res.status, 404, "{path}: {:?}", res.text());
    }
    // The protected file itself: only through its hooked route.
    assert_eq!(s.get("/static/private/x.txt", &[]).status, 401);
    let res = s.get(
        "/static/private/x.txt",
        &["Authorization: Bearer let-me-in"],
    );
    assert_eq!(res.text(), "the secret");
    assert_eq!(s.get("/static/public.txt", &[]).text(), "public");
}

/// By default no link below the root is followed: out of the root, inside it, as the last
/// name or as a directory on the way.
#[test]
fn links_are_refused_by_default() {
    let site = site();
    let r = site.root.path();
    assert!(site.outside.path().join("secret.txt").exists());
    let s = TestServer::start(App::new().merge(ServeDir::new(r).router("/static")));
    for path in [
        "/static/escape.txt",
        "/static/outdir/file.txt",
        "/static/alias.txt",
        "/static/realdir/page.txt",
        "/static/shown.txt",
    ] {
        s.get(path, &[]).assert_problem(404, "Not Found");
    }
    assert_eq!(s.get("/static/real/page.txt", &[]).text(), "real page");
}

/// The root itself may be a link (a `current -> releases/42` deployment): it is resolved once.
#[test]
fn the_root_may_be_a_link() {
    let site = site();
    let base = tempfile::tempdir().unwrap();
    let current = base.path().join("current");
    symlink(site.root.path(), &current).unwrap();
    let s = TestServer::start(App::new().merge(ServeDir::new(&current).router("/static")));
    assert_eq!(s.get("/static/public.txt", &[]).text(), "public");
    assert_eq!(s.get("/static/alias.txt", &[]).status, 404);
}

/// A link as the index file or as a precompressed sibling is a link too.
#[test]
fn linked_index_and_siblings_are_refused_by_default() {
    let site = site();
    let r = site.root.path();
    std::fs::create_dir(r.join("docs")).unwrap();
    symlink(r.join("private/x.txt"), r.join("docs/index.html")).unwrap();
    std::fs::write(r.join("app.js"), "plain js").unwrap();
    symlink(r.join("private/x.txt"), r.join("app.js.gz")).unwrap();
    let s = TestServer::start(
        App::new().merge(ServeDir::new(r).precompressed_gzip().router("/static")),
    );
    assert_eq!(s.get("/static/docs/", &[]).status, 404);
    let res = s.get("/static/app.js", &["Accept-Encoding: gzip"]);
    assert_eq!((res.status, res.text()), (200, "plain js"));
    assert_eq!(res.header("content-encoding"), None);
}

/// `Symlinks::WithinRoot`: links that stay under the root (and off hidden names) are
/// followed; out of the root, still 404.
#[test]
fn within_root_follows_links_that_stay_inside() {
    let site = site();
    let r = site.root.path();
    let s = TestServer::start(
        App::new().merge(
            ServeDir::new(r)
                .symlinks(Symlinks::WithinRoot)
                .router("/static"),
        ),
    );
    assert_eq!(s.get("/static/alias.txt", &[]).text(), "real page");
    assert_eq!(s.get("/static/realdir/page.txt", &[]).text(), "real page");
    for path in [
        "/static/escape.txt",
        "/static/outdir/file.txt",
        "/static/shown.txt",
    ] {
        s.get(path, &[]).assert_problem(404, "Not Found");
    }
    // With hidden names allowed, a link to one is followed too.
    let s = TestServer::start(
        App::new().merge(
            ServeDir::new(r)
                .symlinks(Symlinks::WithinRoot)
                .hidden(true)
                .router("/static"),
        ),
    );
    assert_eq!(s.get("/static/shown.txt", &[]).text(), "hidden");
}

/// `Symlinks::Follow`: links are followed wherever they lead.
#[test]
fn follow_allows_links_out_of_the_root() {
    let site = site();
    let r = site.root.path();
    let s = TestServer::start(
        App::new().merge(
            ServeDir::new(r)
                .symlinks(Symlinks::Follow)
                .router("/static"),
        ),
    );
    assert_eq!(s.get("/static/escape.txt", &[]).text(), "outside secret");
    assert_eq!(
        s.get("/static/outdir/file.txt", &[]).text(),
        "outside dir file"
    );
    assert_eq!(s.get("/static/alias.txt", &[]).text(), "real page");
}

/// A link flipped between a file inside the root and a secret outside while requests run,
/// under `Symlinks::Deny`: never the secret, and never the inside file through the link.
#[test]
fn a_flipping_link_is_never_followed_by_default() {
    let site = site();
    let r = site.root.path().to_owned();
    std::fs::write(r.join("inside.txt"), "inside").unwrap();
    let link = r.join("flip.txt");
    symlink(r.join("inside.txt"), &link).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, link) = (stop.clone(), link.clone());
        let (inside, secret) = (r.join("inside.txt"), site.outside.path().join("secret.txt"));
        std::thread::spawn(move || {
            let tmp = link.with_extension("tmp");
            let mut out = true;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if out { &secret } else { &inside };
                let _ = std::fs::remove_file(&tmp);
                symlink(target, &tmp).unwrap();
                std::fs::rename(&tmp, &link).unwrap();
                out = !out;
            }
        })
    };
    let s = TestServer::start(App::new().merge(ServeDir::new(&r).router("/static")));
    for _ in 0..200 {
        let res = s.get("/static/flip.txt", &[]);
        assert_eq!(res.status, 404, "{:?}", String::from_utf8_lossy(&res.body));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
}

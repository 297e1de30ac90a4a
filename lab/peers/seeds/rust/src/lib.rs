//! What every seed server of this crate shares: which seed's shape to serve (`SEED`), the
//! answers the seeds define, and the worker count.

/// The five seed experiments; each server registers only its seed's paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    /// NURL: `GET /` → `Hello, World!\n`, text/plain; charset=utf-8.
    Nurl,
    /// rust-http (2013): `GET /` → the Apache default page ("Apache fake").
    RustHttp,
    /// Kourier: `GET /hello` → `Hello World!` (TechEmpower's plaintext shape).
    Kourier,
    /// NextRush's suite: JSON hello, route params, query, POST JSON, a middleware chain.
    NextRush,
    /// Lemire: `GET /simple` → a short text.
    Lemire,
}

impl Seed {
    /// The seed named by `SEED` (`nurl`, `rust-http`, `kourier`, `nextrush`, `lemire`).
    pub fn from_env() -> Result<Seed, String> {
        let raw = std::env::var("SEED").unwrap_or_default();
        match raw.as_str() {
            "nurl" => Ok(Seed::Nurl),
            "rust-http" => Ok(Seed::RustHttp),
            "kourier" => Ok(Seed::Kourier),
            "nextrush" => Ok(Seed::NextRush),
            "lemire" => Ok(Seed::Lemire),
            _ => Err(format!(
                "SEED={raw:?}: expected nurl, rust-http, kourier, nextrush or lemire"
            )),
        }
    }
}

/// NURL's answer: 14 bytes.
pub const NURL_BODY: &str = "Hello, World!\n";
/// Kourier's `/hello` answer.
pub const KOURIER_BODY: &str = "Hello World!";
/// Lemire's `/simple` answer (his Go server's `Hello!`).
pub const LEMIRE_BODY: &str = "Hello!";
/// rust-http's "Apache fake": the page Apache 2.2 served by default, 177 bytes.
pub const APACHE_BODY: &str = "<html><body><h1>It works!</h1>\n<p>This is the default web page for this server.</p>\n<p>The web server software is running but no content has been added, yet.</p>\n</body></html>\n";
/// The header fields rust-http's Apache fake sent besides Date, Content-Length and Content-Type.
pub const APACHE_FIELDS: [(&str, &str); 5] = [
    ("server", "Apache/2.2.22 (Ubuntu)"),
    ("last-modified", "Thu, 05 May 2011 11:46:42 GMT"),
    ("etag", "\"501b29-b1-4a285ed47404a\""),
    ("accept-ranges", "bytes"),
    ("vary", "Accept-Encoding"),
];

/// `WORKERS` when set (the lab's measured checks, e.g. hyper on 1 vs 2 threads); None otherwise,
/// so each server keeps its own default (tokio and Peregrine: one per CPU it may run on).
pub fn workers() -> Result<Option<usize>, String> {
    match std::env::var("WORKERS") {
        Err(_) => Ok(None),
        Ok(raw) => match raw.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!("WORKERS={raw:?} is not a positive integer")),
        },
    }
}

/// `ADDR` (host:port), default 127.0.0.1:8080.
pub fn addr() -> String {
    std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into())
}

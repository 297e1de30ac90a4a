//! The `Compression` layer (feature `compression`, br with `brotli`) and the
//! `Accept-Encoding` negotiation it shares with static files' precompressed siblings.

#[cfg(feature = "compression")]
use {
    super::{Middleware, Next},
    crate::handler::BoxFuture,
    crate::request::Request,
    bytes::Bytes,
    peregrine_server::{Response, ResponseBody},
    std::borrow::Cow,
    std::io::Write,
};

/// A content coding this layer can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    Brotli,
    Gzip,
}

#[cfg(feature = "compression")]
impl Coding {
    fn token(self) -> &'static [u8] {
        match self {
            Coding::Brotli => b"br",
            Coding::Gzip => b"gzip",
        }
    }
}

/// Compresses response bodies with gzip or brotli (feature `brotli`), negotiated on
/// `Accept-Encoding` with q-values (RFC 9110 §12.5.3; at equal q the server prefers brotli),
/// for bodies of at least `min_size` bytes (default 1024) whose content type compresses well
/// (text, JSON, JavaScript, XML, SVG, WASM). Every response with such a content type gets
/// `Vary: Accept-Encoding`, so caches keep the variants apart; a strong `ETag` becomes weak on a
/// compressed answer.
///
/// Left untouched: streamed bodies, responses that already have a `Content-Encoding`, partial
/// content (206, or any response with `Content-Range`: compressing it would break the range),
/// and responses with `Cache-Control: no-transform`.
///
/// **Where it runs.** Bodies up to [`Compression::inline_limit`] (default 64 KiB) are compressed
/// on the worker thread: that is microseconds and cheaper than a hand-off. Larger ones, up to
/// [`Compression::max_size`] (default 4 MiB), go to tokio's blocking pool so that one big body
/// does not stall every other connection of the worker; bodies past `max_size` are sent as they
/// are. The default levels (brotli 4, gzip 5) trade a little ratio for speed, as servers
/// compressing on the fly usually do.
///
/// **BREACH.** Compressing a response that reflects attacker-chosen input next to a secret (a
/// CSRF token in a page that echoes a query parameter) over TLS leaks the secret through the
/// compressed length. Do not put this layer on such routes, or mask the secret per response;
/// see `docs/security.md`.
///
/// ```
/// use peregrine::middleware::Compression;
/// use peregrine::{get, App, Request};
/// use std::io::Read;
///
/// let report = "quarterly numbers, ".repeat(100); // 1.9 kB of text
/// let client = App::new()
///     .route("/report", get(move |_r: Request| { let r = report.clone(); async move { r } }))
///     .layer(Compression::new().min_size(512))
///     .test();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let res = client.get("/report").header("accept-encoding", "gzip;q=1, br;q=0.5").send().await;
/// assert_eq!(res.header("content-encoding"), Some("gzip"));
/// assert_eq!(res.header("vary"), Some("Accept-Encoding"));
/// assert!(res.bytes().len() < 200);
/// let mut text = String::new();
/// flate2::read::GzDecoder::new(&res.bytes()[..]).read_to_string(&mut text).unwrap();
/// assert!(text.starts_with("quarterly numbers, quarterly"));
///
/// // A client that does not ask gets the body as it is.
/// assert_eq!(client.get("/report").send().await.header("content-encoding"), None);
/// # });
/// ```
#[cfg(feature = "compression")]
#[derive(Debug, Clone, Copy)]
pub struct Compression {
    min_size: usize,
    gzip_level: u32,
    #[cfg(feature = "brotli")]
    brotli_quality: u32,
    gzip: bool,
    brotli: bool,
    inline_limit: usize,
    max_size: usize,
}

#[cfg(feature = "compression")]
#[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
impl Default for Compression {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "compression")]
#[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
impl Compression {
    /// gzip and (with the `brotli` feature) brotli, bodies of 1 KiB and more.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/big", get(|_r: Request| async { "x".repeat(4096) }))
    ///     .route("/small", get(|_r: Request| async { "tiny" }))
    ///     .layer(Compression::new())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let big = client.get("/big").header("accept-encoding", "gzip, br").send().await;
    /// # #[cfg(feature = "brotli")]
    /// assert_eq!(big.header("content-encoding"), Some("br")); // brotli preferred at equal q
    /// # #[cfg(not(feature = "brotli"))]
    /// # assert_eq!(big.header("content-encoding"), Some("gzip"));
    /// let small = client.get("/small").header("accept-encoding", "gzip, br").send().await;
    /// assert_eq!((small.header("content-encoding"), small.text()), (None, "tiny"));
    /// # });
    /// ```
    pub fn new() -> Self {
        Compression {
            min_size: 1024,
            gzip_level: 5,
            #[cfg(feature = "brotli")]
            brotli_quality: 4,
            gzip: true,
            brotli: cfg!(feature = "brotli"),
            inline_limit: 64 * 1024,
            max_size: 4 * 1024 * 1024,
        }
    }
    /// Largest body compressed on the worker thread itself; larger ones are compressed on the
    /// blocking pool.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// // Anything over 16 KiB is compressed off the worker thread; the answer is the same.
    /// let client = App::new()
    ///     .route("/export.csv", get(|_r: Request| async { "id,name\n1,ada\n".repeat(5000) }))
    ///     .layer(Compression::new().inline_limit(16 * 1024))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/export.csv").header("accept-encoding", "gzip").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("gzip"));
    /// assert!(res.bytes().len() < 75_000 / 10);
    /// # });
    /// ```
    pub fn inline_limit(mut self, bytes: usize) -> Self {
        self.inline_limit = bytes;
        self
    }
    /// Largest body compressed at all; larger bodies are sent uncompressed.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/dump", get(|_r: Request| async { "y".repeat(300_000) }))
    ///     .layer(Compression::new().max_size(256 * 1024))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/dump").header("accept-encoding", "gzip").send().await;
    /// assert_eq!(res.header("content-encoding"), None);
    /// assert_eq!(res.bytes().len(), 300_000);
    /// # });
    /// ```
    pub fn max_size(mut self, bytes: usize) -> Self {
        self.max_size = bytes;
        self
    }
    /// Smallest body (in bytes) worth compressing.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/status", get(|_r: Request| async { "{\"ok\":true}".repeat(10) })) // 110 bytes
    ///     .layer(Compression::new().min_size(100))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/status").header("accept-encoding", "gzip").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("gzip"));
    /// # });
    /// ```
    pub fn min_size(mut self, bytes: usize) -> Self {
        self.min_size = bytes;
        self
    }
    /// gzip level 0–9 (default 5; more is clamped to 9).
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    /// use std::io::Read;
    ///
    /// let client = App::new()
    ///     .route("/page", get(|_r: Request| async { "<li>item</li>".repeat(500) }))
    ///     .layer(Compression::new().no_brotli().gzip_level(9))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/page").header("accept-encoding", "gzip").send().await;
    /// let mut page = String::new();
    /// flate2::read::GzDecoder::new(&res.bytes()[..]).read_to_string(&mut page).unwrap();
    /// assert_eq!(page.len(), 13 * 500);
    /// # });
    /// ```
    pub fn gzip_level(mut self, level: u32) -> Self {
        self.gzip_level = level.min(9);
        self
    }
    /// brotli quality 0–11 (default 4; more is clamped to 11).
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    /// use std::io::Read;
    ///
    /// let client = App::new()
    ///     .route("/app.css", get(|_r: Request| async { ".btn{color:red}".repeat(300) }))
    ///     .layer(Compression::new().brotli_quality(9))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/app.css").header("accept-encoding", "br").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("br"));
    /// let mut css = String::new();
    /// brotli::Decompressor::new(&res.bytes()[..], 4096).read_to_string(&mut css).unwrap();
    /// assert!(css.starts_with(".btn{color:red}.btn"));
    /// # });
    /// ```
    #[cfg(feature = "brotli")]
    #[cfg_attr(docsrs, doc(cfg(feature = "brotli")))]
    pub fn brotli_quality(mut self, q: u32) -> Self {
        self.brotli_quality = q.min(11);
        self
    }
    /// Disable gzip.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "z".repeat(2048) }))
    ///     .layer(Compression::new().no_gzip())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let gzip_only = client.get("/").header("accept-encoding", "gzip").send().await;
    /// assert_eq!(gzip_only.header("content-encoding"), None);
    /// # });
    /// ```
    pub fn no_gzip(mut self) -> Self {
        self.gzip = false;
        self
    }
    /// Disable brotli.
    ///
    /// ```
    /// use peregrine::middleware::Compression;
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|_r: Request| async { "z".repeat(2048) }))
    ///     .layer(Compression::new().no_brotli())
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("accept-encoding", "br, gzip").send().await;
    /// assert_eq!(res.header("content-encoding"), Some("gzip"));
    /// # });
    /// ```
    pub fn no_brotli(mut self) -> Self {
        self.brotli = false;
        self
    }

    fn compress(&self, coding: Coding, data: &[u8]) -> std::io::Result<Vec<u8>> {
        match coding {
            Coding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(data.len() / 3 + 64),
                    flate2::Compression::new(self.gzip_level),
                );
                e.write_all(data)?;
                e.finish()
            }
            #[cfg(feature = "brotli")]
            Coding::Brotli => {
                let mut out = Vec::with_capacity(data.len() / 3 + 64);
                {
                    let mut w =
                        brotli::CompressorWriter::new(&mut out, 4096, self.brotli_quality, 22);
                    w.write_all(data)?;
                    w.flush()?;
                }
                Ok(out)
            }
            // `new` leaves brotli off in a build without it and nothing turns it on.
            #[cfg(not(feature = "brotli"))]
            Coding::Brotli => Err(std::io::Error::other("brotli is not compiled in")),
        }
    }
}

/// Picks the coding for an `Accept-Encoding` value: the acceptable coding with the highest
/// q-value, brotli first at equal q. `None` means identity.
pub(crate) fn negotiate(accept: &[u8], gzip: bool, brotli: bool) -> Option<Coding> {
    let Ok(accept) = std::str::from_utf8(accept) else {
        return None;
    };
    let (mut q_br, mut q_gzip, mut q_star) = (None, None, None);
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if coding.is_empty() {
            continue;
        }
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    // A malformed q-value makes the member unusable rather than preferred.
                    q = v
                        .trim()
                        .parse::<f32>()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                }
            }
        }
        if coding.eq_ignore_ascii_case("br") {
            q_br = Some(q);
        } else if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            q_gzip = Some(q_gzip.map_or(q, |g: f32| g.max(q)));
        } else if coding == "*" {
            q_star = Some(q);
        }
    }
    let br = if brotli {
        q_br.or(q_star).unwrap_or(0.0)
    } else {
        0.0
    };
    let gz = if gzip {
        q_gzip.or(q_star).unwrap_or(0.0)
    } else {
        0.0
    };
    if br <= 0.0 && gz <= 0.0 {
        None
    } else if br >= gz {
        Some(Coding::Brotli)
    } else {
        Some(Coding::Gzip)
    }
}

/// Content types worth compressing (already-compressed formats such as images, video and
/// archives are not).
#[cfg(feature = "compression")]
pub(crate) fn compressible(content_type: &[u8]) -> bool {
    let ct = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or(b"")
        .trim_ascii();
    let ct = ct.to_ascii_lowercase();
    ct.starts_with(b"text/")
        || ct.ends_with(b"+json")
        || ct.ends_with(b"+xml")
        || matches!(
            &ct[..],
            b"application/json"
                | b"application/javascript"
                | b"application/xml"
                | b"application/wasm"
                | b"image/svg+xml"
                | b"application/x-www-form-urlencoded"
        )
}

#[cfg(feature = "compression")]
fn find<'a>(res: &'a Response, name: &str) -> Option<&'a [u8]> {
    crate::response::header_value(res, name)
}

#[cfg(feature = "compression")]
fn add_vary(res: &mut Response) {
    if let Some((_, v)) = res
        .headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case("vary"))
    {
        let has = v.split(|&b| b == b',').any(|t| {
            let t = t.trim_ascii();
            t == b"*" || t.eq_ignore_ascii_case(b"accept-encoding")
        });
        if !has {
            let mut nv = v.to_vec();
            nv.extend_from_slice(b", Accept-Encoding");
            *v = Cow::Owned(nv);
        }
    } else {
        res.headers
            .push((Cow::Borrowed("vary"), Cow::Borrowed(b"Accept-Encoding")));
    }
}

#[cfg(feature = "compression")]
#[cfg_attr(docsrs, doc(cfg(feature = "compression")))]
impl Middleware for Compression {
    fn call(&self, req: Request, next: Next) -> BoxFuture<Response> {
        let coding = req
            .header_bytes("accept-encoding")
            .and_then(|a| negotiate(a, self.gzip, self.brotli));
        let this = *self;
        let fut = next.run(req);
        Box::pin(async move {
            let mut res = fut.await;
            if res.status < 200 || res.status == 204 || res.status == 206 || res.status == 304 {
                return res;
            }
            if find(&res, "content-range").is_some() {
                return res;
            }
            if !find(&res, "content-type").is_some_and(compressible) {
                return res;
            }
            if find(&res, "content-encoding").is_some() {
                return res;
            }
            if find(&res, "cache-control").is_some_and(|v| {
                v.windows(12)
                    .any(|w| w.eq_ignore_ascii_case(b"no-transform"))
            }) {
                return res;
            }
            add_vary(&mut res);
            let (Some(coding), Some(body)) = (coding, res.body.in_memory()) else {
                return res;
            };
            if body.len() < this.min_size || body.len() > this.max_size {
                return res;
            }
            let compressed = if body.len() <= this.inline_limit {
                this.compress(coding, &body)
            } else {
                // Off the worker thread: a multi-megabyte brotli run takes tens of ms.
                tokio::task::spawn_blocking(move || this.compress(coding, &body))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            };
            let compressed = match compressed {
                Ok(c) => c,
                Err(e) => {
                    // Only an allocation failure could get here; the identity body is still right.
                    tracing::warn!(error = %e, "compression failed; sending identity");
                    return res;
                }
            };
            res.body = ResponseBody::Full(Bytes::from(compressed));
            res.headers.push((
                Cow::Borrowed("content-encoding"),
                Cow::Borrowed(coding.token()),
            ));
            // A strong validator names exact bytes; the compressed bytes differ (RFC 9110 §8.8.1).
            for (n, v) in res.headers.iter_mut() {
                if n.eq_ignore_ascii_case("etag") && v.first() == Some(&b'"') {
                    let mut w = b"W/".to_vec();
                    w.extend_from_slice(v);
                    *v = Cow::Owned(w);
                }
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(
            negotiate(b"gzip, deflate, br", true, true),
            Some(Coding::Brotli)
        );
        assert_eq!(negotiate(b"gzip", true, true), Some(Coding::Gzip));
        assert_eq!(
            negotiate(b"br;q=0.5, gzip;q=0.8", true, true),
            Some(Coding::Gzip)
        );
        assert_eq!(negotiate(b"br;q=0, gzip;q=0", true, true), None);
        assert_eq!(negotiate(b"identity", true, true), None);
        assert_eq!(negotiate(b"*", true, true), Some(Coding::Brotli));
        assert_eq!(
            negotiate(b"*;q=0.1, br;q=0", true, true),
            Some(Coding::Gzip)
        );
        assert_eq!(negotiate(b"GZIP;Q=0.9", true, true), Some(Coding::Gzip));
        assert_eq!(negotiate(b"br;q=abc, gzip", true, true), Some(Coding::Gzip));
        assert_eq!(negotiate(b"br", true, false), None);
        assert_eq!(negotiate(b"", true, true), None);
    }

    #[cfg(feature = "compression")]
    #[test]
    fn compressible_types() {
        assert!(compressible(b"text/plain; charset=utf-8"));
        assert!(compressible(b"application/json"));
        assert!(compressible(b"application/problem+json"));
        assert!(compressible(b"image/svg+xml"));
        assert!(!compressible(b"image/png"));
        assert!(!compressible(b"application/zip"));
    }

    #[cfg(feature = "compression")]
    #[test]
    fn round_trips() {
        let c = Compression::new();
        let data = b"hello hello hello hello hello hello hello hello".repeat(50);
        let gz = c.compress(Coding::Gzip, &data).unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out).unwrap();
        assert_eq!(out, data);
        #[cfg(feature = "brotli")]
        {
            let br = c.compress(Coding::Brotli, &data).unwrap();
            let mut out = Vec::new();
            brotli::BrotliDecompress(&mut &br[..], &mut out).unwrap();
            assert_eq!(out, data);
            assert!(br.len() < data.len() / 10);
        }
        #[cfg(not(feature = "brotli"))]
        assert!(c.compress(Coding::Brotli, &data).is_err());
    }

    /// A build without brotli never picks it, even for a client that prefers it.
    #[cfg(all(feature = "compression", not(feature = "brotli")))]
    #[test]
    fn without_brotli_gzip_is_chosen() {
        let c = Compression::new();
        assert!(!c.brotli);
        assert_eq!(
            negotiate(b"br, gzip;q=0.5", c.gzip, c.brotli),
            Some(Coding::Gzip)
        );
        assert_eq!(negotiate(b"br", c.gzip, c.brotli), None);
    }

    #[cfg(feature = "compression")]
    #[test]
    fn vary_is_merged() {
        let mut r = Response::new(200).with_header("Vary", &b"Origin"[..]);
        add_vary(&mut r);
        assert_eq!(find(&r, "vary"), Some(&b"Origin, Accept-Encoding"[..]));
        add_vary(&mut r);
        assert_eq!(find(&r, "vary"), Some(&b"Origin, Accept-Encoding"[..]));
    }
}

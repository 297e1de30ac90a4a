//! Reading the header fields (the engine's, or middleware's rewritten copy) and the cookies
//! carried in `Cookie` fields.

use super::parts::{OwnedField, Request};

impl Request {
    /// First value of header `name` (case-insensitive) as text; `None` if absent or not UTF-8
    /// (use [`Request::header_bytes`] for opaque bytes).
    ///
    /// ```
    /// async fn agent(req: peregrine::Request) -> String {
    ///     req.header("User-Agent").unwrap_or("unknown").to_owned()
    /// }
    /// # let _ = agent;
    /// ```
    #[inline]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// First value of header `name` (case-insensitive), byte-exact.
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// let client = App::new()
    ///     .route("/", get(|req: Request| async move { req.header_bytes("x-raw").unwrap_or_default().len().to_string() }))
    ///     .test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// // Not UTF-8, so `header` would say `None`; the bytes are still there.
    /// assert_eq!(client.get("/").header("x-raw", &b"caf\xe9"[..]).send().await.text(), "4");
    /// # });
    /// ```
    #[inline]
    pub fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        match self.rewritten_headers() {
            None => self.inner.header(name),
            Some(h) => h
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| &v[..]),
        }
    }

    /// All header fields in the order received (with middleware's changes, if any).
    ///
    /// ```
    /// use peregrine::{get, App, Request};
    ///
    /// async fn names(req: Request) -> String {
    ///     req.headers().map(|(name, _)| name).collect::<Vec<_>>().join(",")
    /// }
    /// let client = App::new().route("/", get(names)).test();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let res = client.get("/").header("x-a", "1").header("x-b", "2").send().await;
    /// assert_eq!(res.text(), "host,x-a,x-b"); // the test client sends `host` first
    /// # });
    /// ```
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        let (engine, rewritten) = match self.rewritten_headers() {
            None => (Some(self.inner.headers()), None),
            Some(h) => (None, Some(h.iter().map(|(n, v)| (&**n, &v[..])))),
        };
        engine
            .into_iter()
            .flatten()
            .chain(rewritten.into_iter().flatten())
    }

    #[inline]
    fn rewritten_headers(&self) -> Option<&Vec<OwnedField>> {
        self.extras.as_deref()?.headers.as_ref()
    }

    /// The value of cookie `name` from the `Cookie` header(s), surrounding quotes removed.
    ///
    /// ```
    /// async fn session(req: peregrine::Request) -> String {
    ///     req.cookie("sid").unwrap_or("none").to_owned()
    /// }
    /// # let _ = session;
    /// ```
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .find_map(|v| find_cookie(v, name))
    }
}

/// Finds `name` in a `Cookie` header value (`a=1; b="2"`, RFC 6265 §4.2.1).
pub(crate) fn find_cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        if k.trim() != name {
            return None;
        }
        let v = v.trim();
        Some(
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies() {
        let h = "a=1; sid=\"abc\";b=2 ; empty=";
        assert_eq!(find_cookie(h, "a"), Some("1"));
        assert_eq!(find_cookie(h, "sid"), Some("abc"));
        assert_eq!(find_cookie(h, "b"), Some("2"));
        assert_eq!(find_cookie(h, "empty"), Some(""));
        assert_eq!(find_cookie(h, "c"), None);
        assert_eq!(find_cookie("noequals", "noequals"), None);
    }
}

//! How a [`ServeDir`] answers a request: the routed path is checked (`resolve.rs`) and opened
//! under the root on the blocking pool, with the directory index or a redirect to the
//! trailing-slash form; a precompressed sibling is picked if the client accepts one; a miss
//! from a browser navigation gets the SPA fallback document when one is configured.

use super::open::{self, blocking, miss_response, Miss};
use super::precompressed::{pick_sibling, wanted_codings};
use super::resolve::safe_relative;
use super::respond::serve;
use super::serve_dir::{DirConfig, ServeDir};
use crate::error::Error;
use crate::handler::{BoxFuture, Handler};
use crate::request::Request;
use crate::response::IntoResponse;
use peregrine_server::{Method, Response};
use std::borrow::Cow;
use std::path::PathBuf;

impl Handler for ServeDir {
    fn call(&self, req: Request) -> BoxFuture<Response> {
        let cfg = self.inner.clone();
        Box::pin(async move {
            let param = req.param_raw(&cfg.param);
            let raw = param.unwrap_or("");
            let Some(rel) = safe_relative(raw, cfg.hidden) else {
                return Error::not_found().into_response();
            };
            // A path ending in `/` may show an index, and so may a route without the parameter
            // (the root); the bare prefix without its slash (the catch-all reached as
            // `/static`, empty) redirects to the slash form like any directory.
            let slash = match param {
                None => true,
                Some(p) => p.ends_with('/') || (p.is_empty() && req.path().ends_with('/')),
            };
            let wants = wanted_codings(&req, &cfg.files);
            let root = cfg.root.clone();
            let index = cfg.index.clone();
            let policy = cfg.policy();
            let found = blocking(move || {
                let opened = open::open_under(&root, &rel, index.as_deref(), slash, policy)?;
                let sibling = pick_sibling(&root, &opened.path, wants, policy);
                Ok((opened, sibling))
            })
            .await;
            match found {
                Ok((opened, sibling)) => serve(&req, opened, sibling, &cfg.files, None).await,
                Err(Miss::NeedsSlash) => {
                    moved_permanently(with_query(&format!("{}/", req.path()), req.query_string()))
                }
                Err(Miss::NotFound) => match &cfg.spa_fallback {
                    Some(f) if accepts_html(&req) => spa(&req, &cfg, f.clone()).await,
                    _ => Error::not_found().into_response(),
                },
                Err(miss) => miss_response(miss),
            }
        })
    }
}

/// The SPA fallback document, `no-cache` so a new deployment is picked up at once.
async fn spa(req: &Request, cfg: &DirConfig, file: PathBuf) -> Response {
    let root = cfg.root.clone();
    let policy = cfg.policy();
    match blocking(move || open::open_under(&root, &file, None, true, policy)).await {
        Ok(opened) => {
            let mut files = cfg.files.clone();
            files.cache_control = Some(Cow::Borrowed(&b"no-cache"[..]));
            files.immutable_hashed = false;
            serve(req, opened, None, &files, None).await
        }
        Err(miss) => miss_response(miss),
    }
}

fn accepts_html(req: &Request) -> bool {
    matches!(req.method_kind(), Method::Get | Method::Head)
        && req
            .header("accept")
            .is_some_and(|a| a.to_ascii_lowercase().contains("text/html"))
}

/// `path` with `query` (as sent) appended, for a redirect that keeps the query string.
pub(super) fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// A 301 to `location`.
pub(super) fn moved_permanently(location: String) -> Response {
    Response::new(301).with_header("location", Cow::Owned(location.into_bytes()))
}

//! The [`IntoResponse`] trait, apart from its implementations, so that the error type and the
//! streamed body implement it without importing the response module that uses them (the
//! split of axum-core's `response/into_response.rs`).

use peregrine_server::Response;

/// `text/plain; charset=utf-8` (text answers take the engine's own field: `Response::text`).
#[cfg(test)]
pub(crate) const TEXT_PLAIN: &[u8] = b"text/plain; charset=utf-8";
/// `application/json` (JSON answers take the engine's own field: `Response::json`).
#[cfg(test)]
pub(crate) const APPLICATION_JSON: &[u8] = b"application/json";
/// `application/octet-stream`.
pub(crate) const OCTET_STREAM: &[u8] = b"application/octet-stream";

/// Anything a handler may return. Implemented for [`Response`], strings (text/plain), bytes
/// (application/octet-stream), [`Json`](crate::Json), [`Html`](crate::Html),
/// [`Redirect`](crate::Redirect), [`StreamBody`](crate::StreamBody), `()` (empty 200), a bare
/// [`StatusCode`](crate::StatusCode), [`Error`](crate::Error), `Result<T, E>` where both sides are responses
/// (so your own error type works as soon as it implements `IntoResponse`), `(status, T)` to set
/// the status and `(status, headers, T)` / `(headers, T)` to add headers, where `status` is a
/// `u16` or a [`StatusCode`](crate::StatusCode) and `headers` an array or `Vec` of `(name, value)` pairs or a
/// [`Headers`](crate::Headers), values being anything [`IntoHeaderValue`](crate::IntoHeaderValue)
/// (`&str`, `String`, bytes, numbers, `SystemTime`).
///
/// ```
/// use peregrine::{IntoResponse, Json, StatusCode};
/// let r = (201, Json(serde_json::json!({"ok": true}))).into_response();
/// assert_eq!(r.status, 201);
/// let r = (202, [("x-job", "7")], "queued").into_response();
/// assert_eq!(r.status, 202);
/// let r = (StatusCode::CREATED, [("location", format!("/jobs/{}", 7))], "made").into_response();
/// assert_eq!(r.status, 201);
/// let r = ([("cache-control", "no-store")], "fresh").into_response();
/// assert_eq!(r.status, 200);
/// ```
///
/// Your own error type: implement `IntoResponse` and return `Result<T, AppError>`; its answer
/// is used as is (an `AppError` that also implements `std::error::Error` is *not* turned into
/// a 500 on the way):
///
/// ```
/// use peregrine::server::{Request as Raw, Service};
/// use peregrine::{get, App, Error, IntoResponse, Json, Request, Response, StatusCode};
///
/// #[derive(Debug)]
/// enum AppError { NotFound(u64), Invalid(&'static str), Peregrine(Error) }
///
/// impl std::fmt::Display for AppError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{self:?}") }
/// }
/// impl std::error::Error for AppError {}
///
/// impl IntoResponse for AppError {
///     fn into_response(self) -> Response {
///         match self {
///             AppError::NotFound(id) => Error::not_found().with_detail(format!("no todo {id}")),
///             AppError::Invalid(why) => Error::new(422).with_detail(why),
///             AppError::Peregrine(e) => e,
///         }
///         .into_response()
///     }
/// }
/// // Extractor errors (`req.param()?`) keep their own status.
/// impl From<Error> for AppError {
///     fn from(e: Error) -> Self { AppError::Peregrine(e) }
/// }
///
/// async fn show(req: Request) -> Result<Json<u64>, AppError> {
///     let id: u64 = req.param("id")?;
///     if id == 0 { return Err(AppError::Invalid("id must be positive")); }
///     Err(AppError::NotFound(id))
/// }
///
/// let svc = App::new().route("/todos/{id}", get(show)).into_service();
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let call = |t: &str| {
///     let raw = format!("GET {t} HTTP/1.1\r\nHost: x\r\n\r\n");
///     rt.block_on(svc.call(Raw::from_bytes(raw.as_bytes(), "127.0.0.1:1".parse().unwrap()).unwrap()))
/// };
/// assert_eq!(call("/todos/7").status, StatusCode::NOT_FOUND);   // AppError's answer, not a 500
/// assert_eq!(call("/todos/0").status, 422);
/// assert_eq!(call("/todos/x").status, StatusCode::BAD_REQUEST); // from req.param
/// ```
pub trait IntoResponse {
    /// Converts into a response.
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    #[inline]
    fn into_response(self) -> Response {
        self
    }
}

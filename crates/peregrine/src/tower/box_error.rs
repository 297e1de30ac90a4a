//! Errors as tower passes them around, and the answer to one: a leaf the layer and the mounted
//! service share.

use crate::error::Error;
use crate::response::IntoResponse;
use peregrine_server::Response;

/// Errors as tower passes them around.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A tower service's error, logged and answered 500 (its text is not for the client).
pub(super) fn service_error(e: BoxError) -> Response {
    tracing::error!(error = %e, "tower service failed");
    Error::internal().into_response()
}

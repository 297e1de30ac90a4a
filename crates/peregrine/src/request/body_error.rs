//! The problem answer for a body that could not be read, a leaf both the request's readers
//! and the raw body stream use.

use crate::error::Error;
use peregrine_server::BodyError;

/// The problem document for `e`, with its status (413, 408 or 400) and a safe detail.
pub(crate) fn body_error(e: BodyError) -> Error {
    let err = Error::new(e.status());
    match e {
        BodyError::TooLarge => err.with_detail("request body exceeds the size limit"),
        BodyError::Timeout => err.with_detail("timed out waiting for the request body"),
        BodyError::Incomplete => err.with_detail("request body incomplete"),
        BodyError::Invalid(r) => err.with_detail(format!("invalid request body: {r}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_errors_map_to_statuses() {
        assert_eq!(body_error(BodyError::TooLarge).status(), 413);
        assert_eq!(body_error(BodyError::Invalid("x")).status(), 400);
        assert_eq!(body_error(BodyError::Timeout).status(), 408);
        assert_eq!(body_error(BodyError::Incomplete).status(), 400);
    }
}

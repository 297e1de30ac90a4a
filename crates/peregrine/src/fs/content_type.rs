//! `Content-Type` of a served file, guessed from its extension (`mime_guess`), with
//! `charset=utf-8` for text and the textual application types; `application/octet-stream`
//! when the extension is unknown.

use std::borrow::Cow;
use std::path::Path;

/// The `Content-Type` value for the file at `path`.
pub(super) fn content_type(path: &Path) -> Cow<'static, [u8]> {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let essence = mime.essence_str();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || essence == "application/javascript"
        || essence == "application/json"
        || essence == "image/svg+xml";
    if textual {
        Cow::Owned(format!("{essence}; charset=utf-8").into_bytes())
    } else {
        Cow::Owned(essence.as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(
            &content_type(Path::new("a.html"))[..],
            b"text/html; charset=utf-8"
        );
        assert_eq!(&content_type(Path::new("a.png"))[..], b"image/png");
        assert_eq!(
            &content_type(Path::new("a.unknownext"))[..],
            b"application/octet-stream"
        );
    }
}

//! Field values a response or its trailers take without copying: `'static` text and bytes, or
//! owned ones. Its own file so that `Response` and `Trailers` share it without importing each
//! other.

use std::borrow::Cow;

/// A header field's value as [`Response::with_header`](crate::Response::with_header) and
/// [`Response::insert_header`](crate::Response::insert_header) take
/// it: text or bytes, `'static` (not copied) or owned.
///
/// ```
/// use peregrine_server::FieldValue;
/// assert_eq!(&*"text/plain".into_field_value(), b"text/plain");
/// assert_eq!(&*String::from("7").into_field_value(), b"7");
/// assert_eq!(&*(&b"raw"[..]).into_field_value(), b"raw");
/// ```
pub trait FieldValue {
    /// The value's bytes.
    fn into_field_value(self) -> Cow<'static, [u8]>;
}

impl FieldValue for &'static str {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }
}
impl FieldValue for String {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self.into_bytes())
    }
}
impl FieldValue for &'static [u8] {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(self)
    }
}
impl<const N: usize> FieldValue for &'static [u8; N] {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Borrowed(self)
    }
}
impl FieldValue for Vec<u8> {
    fn into_field_value(self) -> Cow<'static, [u8]> {
        Cow::Owned(self)
    }
}

//! Split `cookie` fields joined again (RFC 9113 §8.2.3): an HTTP/2 client may send the cookie as
//! several fields for better compression; an HTTP/1.1-style consumer must see one, joined with
//! `"; "`.

use http::header::COOKIE;
use http::HeaderMap;

/// The joined `cookie` value of a request, if it came split (otherwise nothing is allocated).
pub(crate) struct JoinedCookies(Option<Vec<u8>>);

impl JoinedCookies {
    /// Joins the `cookie` fields of `headers` when there are several.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let mut values = headers.get_all(COOKIE).iter();
        let (Some(first), Some(_)) = (values.next(), values.next()) else {
            return JoinedCookies(None);
        };
        let mut joined = first.as_bytes().to_vec();
        for v in headers.get_all(COOKIE).iter().skip(1) {
            joined.extend_from_slice(b"; ");
            joined.extend_from_slice(v.as_bytes());
        }
        JoinedCookies(Some(joined))
    }

    /// The fields of `headers` in order, the cookie fields replaced by one joined field where
    /// the first of them was.
    pub(crate) fn fields<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let mut cookie_done = false;
        headers
            .iter()
            .filter_map(move |(name, value)| match &self.0 {
                Some(joined) if name == COOKIE => {
                    if std::mem::replace(&mut cookie_done, true) {
                        None
                    } else {
                        Some((name.as_str().as_bytes(), joined.as_slice()))
                    }
                }
                _ => Some((name.as_str().as_bytes(), value.as_bytes())),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&'static str, &'static str)]) -> Vec<(String, String)> {
        let mut headers = HeaderMap::new();
        for (n, v) in pairs {
            headers.append(*n, v.parse().unwrap());
        }
        let joined = JoinedCookies::of(&headers);
        joined
            .fields(&headers)
            .map(|(n, v)| {
                (
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn split_cookies_become_one_field_and_others_are_untouched() {
        assert_eq!(
            fields(&[
                ("x-a", "1"),
                ("cookie", "a=1"),
                ("cookie", "b=2"),
                ("cookie", "c=3")
            ]),
            [("x-a", "1"), ("cookie", "a=1; b=2; c=3")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
        );
        // One cookie field, or none: as they came.
        assert_eq!(
            fields(&[("cookie", "a=1"), ("x-a", "1"), ("x-a", "2")]),
            [("cookie", "a=1"), ("x-a", "1"), ("x-a", "2")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
        );
        assert!(fields(&[]).is_empty());
    }
}

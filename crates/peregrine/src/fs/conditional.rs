//! Validators of a file (`ETag`, `Last-Modified`) and the conditional request headers
//! evaluated in the order of RFC 9110 §13.2.2.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The latest time an HTTP-date can express (9999-12-31T23:59:59Z); `httpdate` panics past it.
const LAST_HTTP_DATE_SECS: u64 = 253_402_300_799;

/// Validators of a file: `(etag, last_modified)`. The ETag is strong (size and modification
/// time to the nanosecond); `Last-Modified` is left out for times an HTTP-date cannot express
/// (before 1970 or after 9999), which used to panic in `httpdate`.
pub(crate) fn validators(len: u64, modified: Option<SystemTime>) -> (String, Option<String>) {
    let etag = match modified.map(|m| m.duration_since(UNIX_EPOCH)) {
        Some(Ok(d)) => format!("\"{:x}.{:x}-{len:x}\"", d.as_secs(), d.subsec_nanos()),
        // Before 1970: the distance back from the epoch, marked.
        Some(Err(e)) => {
            let d = e.duration();
            format!("\"m{:x}.{:x}-{len:x}\"", d.as_secs(), d.subsec_nanos())
        }
        None => format!("\"0.0-{len:x}\""),
    };
    (etag, modified.and_then(http_date))
}

/// `t` as an HTTP-date, if it can be one.
pub(crate) fn http_date(t: SystemTime) -> Option<String> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    (secs <= LAST_HTTP_DATE_SECS)
        .then(|| httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs)))
}

/// Does an `If-None-Match` value match `etag`? Weak comparison (RFC 9110 §8.8.3.2, §13.1.2).
pub(crate) fn none_match(header: &str, etag: &str) -> bool {
    let strip = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    let etag = strip(etag);
    header
        .split(',')
        .any(|t| t.trim() == "*" || strip(t) == etag)
}

/// Does an `If-Match` value match `etag`? Strong comparison (§13.1.1): weak tags never match.
pub(crate) fn strong_match(header: &str, etag: &str) -> bool {
    header.split(',').any(|t| {
        let t = t.trim();
        t == "*" || (!t.starts_with("W/") && t == etag)
    })
}

/// Is a file modified at `modified` unmodified since the HTTP-date `header`? One-second
/// resolution, as HTTP dates have. `None` if the date does not parse (then the condition is
/// ignored, §13.1.3 and §13.1.4).
pub(crate) fn unmodified_since(header: &str, modified: SystemTime) -> Option<bool> {
    let since = httpdate::parse_http_date(header.trim()).ok()?;
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Some(secs(modified) <= secs(since))
}

/// Is a file modified at `modified` unmodified since `header`? An unparseable date is ignored.
pub(crate) fn not_modified_since(header: &str, modified: SystemTime) -> bool {
    unmodified_since(header, modified).unwrap_or(false)
}

/// Does `If-Range` allow the `Range` to be honoured (§13.1.5)? An entity-tag must match
/// strongly; a date must equal `Last-Modified` exactly (our dates are strong validators only
/// for files not modified within the same second as they are served, which a one-second
/// resolution cannot tell: equality is the rule the RFC gives).
pub(crate) fn if_range_holds(header: &str, etag: &str, last_modified: Option<&str>) -> bool {
    let h = header.trim();
    if h.starts_with('"') || h.starts_with("W/") {
        return !h.starts_with("W/") && h == etag;
    }
    match (httpdate::parse_http_date(h), last_modified) {
        (Ok(d), Some(lm)) => httpdate::parse_http_date(lm).is_ok_and(|m| m == d),
        _ => false,
    }
}

/// The outcome of the preconditions of a GET or HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Precondition {
    /// Go on (and honour `Range` if `If-Range` allows).
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Request header values the preconditions read.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Conditions<'a> {
    pub(crate) if_match: Option<&'a str>,
    pub(crate) if_unmodified_since: Option<&'a str>,
    pub(crate) if_none_match: Option<&'a str>,
    pub(crate) if_modified_since: Option<&'a str>,
}

/// Evaluates the preconditions in the order of §13.2.2 for a safe method (GET or HEAD).
pub(crate) fn evaluate(
    c: Conditions<'_>,
    etag: &str,
    modified: Option<SystemTime>,
) -> Precondition {
    if let Some(im) = c.if_match {
        if !strong_match(im, etag) {
            return Precondition::Failed;
        }
    } else if let (Some(ius), Some(m)) = (c.if_unmodified_since, modified) {
        if unmodified_since(ius, m) == Some(false) {
            return Precondition::Failed;
        }
    }
    if let Some(inm) = c.if_none_match {
        if none_match(inm, etag) {
            return Precondition::NotModified;
        }
    } else if let (Some(ims), Some(m)) = (c.if_modified_since, modified) {
        if not_modified_since(ims, m) {
            return Precondition::NotModified;
        }
    }
    Precondition::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn etag_matching() {
        let (etag, _) = validators(10, Some(UNIX_EPOCH + Duration::new(100, 5)));
        assert_eq!(etag, "\"64.5-a\"");
        assert!(none_match(&etag, &etag));
        assert!(none_match(&format!("W/{etag}"), &etag));
        assert!(none_match(&format!("\"x\", {etag}"), &etag));
        assert!(none_match("*", &etag));
        assert!(!none_match("\"other\"", &etag));
        assert!(strong_match(&etag, &etag));
        assert!(strong_match("*", &etag));
        assert!(!strong_match(&format!("W/{etag}"), &etag));
    }

    #[test]
    fn times_outside_http_dates_do_not_panic() {
        let before = UNIX_EPOCH - Duration::from_secs(86_400);
        let (etag, lm) = validators(3, Some(before));
        assert_eq!((etag.as_str(), lm), ("\"m15180.0-3\"", None));
        let after = UNIX_EPOCH + Duration::from_secs(LAST_HTTP_DATE_SECS + 1);
        assert_eq!(validators(3, Some(after)).1, None);
        let last = UNIX_EPOCH + Duration::from_secs(LAST_HTTP_DATE_SECS);
        assert_eq!(
            validators(3, Some(last)).1.as_deref(),
            Some("Fri, 31 Dec 9999 23:59:59 GMT")
        );
    }

    #[test]
    fn modified_since() {
        let m = UNIX_EPOCH + Duration::new(1_700_000_000, 500_000_000);
        let same = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert!(not_modified_since(&same, m));
        let before = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_699_999_999));
        assert!(!not_modified_since(&before, m));
        assert!(!not_modified_since("garbage", m));
    }

    #[test]
    fn precondition_order() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let m = Some(t);
        let lm = http_date(t).unwrap();
        let old = "Sat, 01 Jan 2000 00:00:00 GMT";
        let e = "\"a\"";
        let c = |im, ius, inm, ims| Conditions {
            if_match: im,
            if_unmodified_since: ius,
            if_none_match: inm,
            if_modified_since: ims,
        };
        use Precondition::*;
        assert_eq!(evaluate(c(None, None, None, None), e, m), Proceed);
        assert_eq!(evaluate(c(Some("\"b\""), None, None, None), e, m), Failed);
        assert_eq!(evaluate(c(Some(e), Some(old), None, None), e, m), Proceed);
        assert_eq!(evaluate(c(None, Some(old), None, None), e, m), Failed);
        assert_eq!(evaluate(c(None, Some("junk"), None, None), e, m), Proceed);
        assert_eq!(
            evaluate(c(None, None, Some(e), Some(old)), e, m),
            NotModified
        );
        assert_eq!(
            evaluate(c(None, None, Some("\"b\""), Some(&lm)), e, m),
            Proceed
        );
        assert_eq!(evaluate(c(None, None, None, Some(&lm)), e, m), NotModified);
        assert_eq!(evaluate(c(None, None, None, Some(old)), e, m), Proceed);
    }

    #[test]
    fn if_range() {
        let lm = "Tue, 14 Nov 2023 22:13:20 GMT";
        assert!(if_range_holds("\"a\"", "\"a\"", Some(lm)));
        assert!(!if_range_holds("W/\"a\"", "\"a\"", Some(lm)));
        assert!(!if_range_holds("\"b\"", "\"a\"", Some(lm)));
        assert!(if_range_holds(lm, "\"a\"", Some(lm)));
        assert!(!if_range_holds(
            "Tue, 14 Nov 2023 22:13:21 GMT",
            "\"a\"",
            Some(lm)
        ));
        assert!(!if_range_holds(lm, "\"a\"", None));
        assert!(!if_range_holds("junk", "\"a\"", Some(lm)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Arbitrary header values never panic, and a value that names the current ETag
        /// (in any list position, weak or strong) always means 304 for If-None-Match.
        #[test]
        fn conditional_headers(h in "\\PC{0,40}", pre in "[ ,\"a-z/W]{0,10}", secs in any::<u32>(), len in any::<u64>()) {
            let m = UNIX_EPOCH + Duration::from_secs(u64::from(secs));
            let (etag, lm) = validators(len, Some(m));
            let c = Conditions { if_match: Some(&h), if_unmodified_since: Some(&h), if_none_match: Some(&h), if_modified_since: Some(&h) };
            let _ = evaluate(c, &etag, Some(m));
            let _ = if_range_holds(&h, &etag, lm.as_deref());
            let _ = unmodified_since(&h, m);
            let listed = format!("{pre},{etag}");
            prop_assert!(none_match(&listed, &etag));
            let c = Conditions { if_none_match: Some(&listed), ..Conditions::default() };
            prop_assert_eq!(evaluate(c, &etag, Some(m)), Precondition::NotModified);
        }
    }
}

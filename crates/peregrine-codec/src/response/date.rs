//! The `Date` line, formatted at most once a second per thread ([`DateCache`]).

use std::cell::Cell;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n` (IMF-fixdate is always 29 bytes).
const DATE_LINE_LEN: usize = 6 + DATE_VALUE_LEN + 2;

/// A per-thread cache of the `Date: <IMF-fixdate>\r\n` header line, refreshed at most once a
/// second: [`DateCache::write_date_header`] never writes a value more than one second stale.
///
/// Each call reads the wall clock (a vDSO call, tens of nanoseconds) and compares whole seconds
/// with the cached line; the line is re-formatted only when the second changed. The cache lives
/// in a thread-local, so thread-per-core workers never share or lock it.
#[derive(Debug)]
pub struct DateCache {
    _private: (),
}

thread_local! {
    /// (unix second of the cached line, the line). Second `u64::MAX` means "never formatted".
    static DATE_LINE: Cell<(u64, [u8; DATE_LINE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LINE_LEN])) };
}

impl DateCache {
    /// Appends the current `Date: ...\r\n` line to `out` (HTTP/1.1).
    pub fn write_date_header(out: &mut Vec<u8>) {
        out.extend_from_slice(&current_line());
    }

    /// The current `Date` value alone, `Sun, 06 Nov 1994 08:49:37 GMT` (HTTP/2, whose fields
    /// are name and value pairs): the same cached line as [`DateCache::write_date_header`].
    ///
    /// ```
    /// use peregrine_codec::response::DateCache;
    /// let value = DateCache::date_value();
    /// assert!(value.ends_with(b" GMT") && value[3] == b',');
    /// ```
    pub fn date_value() -> [u8; DATE_VALUE_LEN] {
        let line = current_line();
        let mut value = [0u8; DATE_VALUE_LEN];
        value.copy_from_slice(&line[6..6 + DATE_VALUE_LEN]);
        value
    }
}

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
const DATE_VALUE_LEN: usize = 29;

/// This thread's cached line, re-formatted first if the second changed.
fn current_line() -> [u8; DATE_LINE_LEN] {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE_LINE.with(|cell| {
        let (cached_secs, mut line) = cell.get();
        if cached_secs != secs {
            line = format_date_line(now);
            cell.set((secs, line));
        }
        line
    })
}

fn format_date_line(now: SystemTime) -> [u8; DATE_LINE_LEN] {
    let mut line = [0u8; DATE_LINE_LEN];
    let mut w = &mut line[..];
    // Writing 37 bytes into a 37-byte array cannot fail: IMF-fixdate has a fixed width.
    let _ = write!(w, "Date: {}\r\n", httpdate::HttpDate::from(now));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_line_is_refreshed_when_the_second_changes() {
        let read = || {
            let mut out = Vec::new();
            DateCache::write_date_header(&mut out);
            httpdate::parse_http_date(std::str::from_utf8(&out[6..out.len() - 2]).unwrap()).unwrap()
        };
        let first = read();
        // Sleeping past the next whole second must give a later Date (the cache is keyed by the
        // second, not refreshed on a timer).
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(read() > first);
        // Each thread has its own cache, and a fresh thread formats its own line.
        let other = std::thread::spawn(read).join().unwrap();
        assert!(other > first);
    }

    #[test]
    fn date_line_is_well_formed_and_current() {
        let mut out = Vec::new();
        DateCache::write_date_header(&mut out);
        assert_eq!(out.len(), DATE_LINE_LEN);
        assert!(out.starts_with(b"Date: ") && out.ends_with(b" GMT\r\n"));
        let text = std::str::from_utf8(&out[6..out.len() - 2]).unwrap();
        let when = httpdate::parse_http_date(text).unwrap();
        let now = SystemTime::now();
        // The cached line is at most one second behind the clock, and never ahead of it.
        let behind = now.duration_since(when).unwrap();
        assert!(behind.as_secs() <= 1, "date is {behind:?} behind");
        // A second call in the same thread gives the same or a later second.
        let mut again = Vec::new();
        DateCache::write_date_header(&mut again);
        let text2 = std::str::from_utf8(&again[6..again.len() - 2]).unwrap();
        assert!(httpdate::parse_http_date(text2).unwrap() >= when);
        // The bare value (HTTP/2) is the line's value, from the same cache.
        let value = DateCache::date_value();
        let value = httpdate::parse_http_date(std::str::from_utf8(&value).unwrap()).unwrap();
        assert!(value >= when && now.duration_since(value).unwrap_or_default().as_secs() <= 1);
    }
}

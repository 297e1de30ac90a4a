//! Response heads per worker: the prepared `Date`/`Server` prefix, refreshed every 250 ms, and
//! the memo of whole heads for responses whose fields are all `'static` (see
//! `docs/performance.md`, "Response heads").

use peregrine_codec::response::{
    asks_close, check_field, finish_head, is_engine_owned, is_server_field, status_line,
    CloseReason, ConnectionLine, DateCache, Framing, KeepAlive,
};
use peregrine_codec::Version;
use std::borrow::Cow;
use std::time::Duration;

/// A response's field list, as handlers give it.
type Fields = [(Cow<'static, str>, Cow<'static, [u8]>)];

/// The start of every response head, prepared once per refresh instead of per response: the
/// `Date` line (from the codec's formatter) and `Server` line, and the whole prefix of a 200.
/// Refreshed by a worker task every `HEAD_CACHE_REFRESH`, so `Date` is never more than that
/// behind; per response this saves a clock read and several small copies.
pub(crate) struct HeadCache {
    server: Vec<u8>,
    date_server: Vec<u8>,
    date_only: Vec<u8>,
    ok_prefix: Vec<u8>,
    /// Whole response heads recently encoded for responses whose fields are all `'static`
    /// (see [`HeadMemo`]); cleared with every refresh, since they contain the `Date` line.
    pub(crate) memo: Vec<HeadMemo>,
}

/// At most this many memoized heads per worker (a few routes answering in turn); each lookup
/// compares against all of them, so few.
pub(crate) const HEAD_MEMO_MAX: usize = 4;
/// Responses with more fields than this are not memoized (the key compare would cost more).
pub(crate) const HEAD_MEMO_FIELDS: usize = 4;

/// Identity of a response's field list whose names and values are all `Cow::Borrowed`
/// `'static` data: (name address, name length, value address, value length) per field. A
/// `&'static` slice is immutable and never freed, so equal address and length mean equal bytes:
/// a handler returning the same constant fields gets the same key, and an equal key can only come
/// from the same bytes. A fixed array with its length rather than a `SmallVec`: the lookup runs
/// once per response, and without the inline/spilled branch it costs fewer instructions.
pub(crate) struct FieldsKey {
    len: usize,
    ids: [(usize, usize, usize, usize); HEAD_MEMO_FIELDS],
}

/// A complete response head (status line to the empty line) as the engine encoded it, kept so the
/// next response with the same status, the same `'static` fields, the same framing and the same
/// `Connection` line is one copy: no field validation, no number formatting, one `memcpy`.
/// Everything in the head is a function of this key and of the cached `Date`/`Server` lines.
pub(crate) struct HeadMemo {
    pub(crate) status: u16,
    pub(crate) key: FieldsKey,
    pub(crate) conn: ConnectionLine,
    pub(crate) framing: Framing,
    /// The fields themselves ask for `Connection: close`.
    pub(crate) close: bool,
    /// The fields are exactly [`Response::text`](crate::Response::text)'s one field.
    pub(crate) text: bool,
    /// `bytes[..fields_len]` is the head up to the `Connection` and framing lines.
    pub(crate) fields_len: usize,
    /// `bytes[..head_len]` is the head; what follows is the `'static` body `body` identifies.
    pub(crate) head_len: usize,
    /// The body kept after the head (see [`StaticBody`]; none if `head_len == bytes.len()`).
    pub(crate) body: StaticBody,
    pub(crate) bytes: Vec<u8>,
}

/// A `'static` body by address and length. Like [`FieldsKey`], equal ids mean equal bytes:
/// static memory is immutable and never freed. A memoized head keeps the first such body sent
/// with it, so that the next identical response is one copy, head and body.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct StaticBody(usize, usize);

impl StaticBody {
    /// The id of `body`.
    #[inline(always)]
    pub(crate) fn of(body: &'static [u8]) -> StaticBody {
        StaticBody(body.as_ptr() as usize, body.len())
    }
}

impl HeadMemo {
    #[inline(always)]
    fn text_fields(&self) -> TextFields {
        if self.text {
            TextFields::Yes
        } else {
            TextFields::Unknown
        }
    }
}

/// How a response's body goes out, as [`HeadCache::write_head`] needs it.
#[derive(Clone, Copy)]
pub(crate) struct BodyOut {
    /// Its framing (`Content-Length`, chunked, none).
    pub(crate) framing: Framing,
    /// The body itself when it is small, `'static` and sent; else empty.
    pub(crate) bytes: &'static [u8],
}

/// What [`HeadCache::write_head`] wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadWritten {
    /// Nothing: the status or a field would break the message.
    Refused,
    /// The head; the body (if any) is the caller's to write.
    Head(TextFields),
    /// The head and the `'static` body it was given, from the memo.
    HeadAndBody(TextFields),
}

/// Whether a memoized head showed the response's field list to be exactly
/// [`Response::text`](crate::Response::text)'s (then its recycling needs no check of its own);
/// `Unknown` when no memo matched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextFields {
    Yes,
    Unknown,
}

/// How often [`HeadCache`] is refreshed (`Date` has one-second resolution; well under a second
/// keeps it current).
pub(crate) const HEAD_CACHE_REFRESH: Duration = Duration::from_millis(250);

impl HeadCache {
    pub(super) fn new(server_name: Option<&str>) -> Self {
        let server = server_name
            .map(|n| [b"Server: ".as_slice(), n.as_bytes(), b"\r\n"].concat())
            .unwrap_or_default();
        let mut c = HeadCache {
            server,
            date_server: Vec::new(),
            date_only: Vec::new(),
            ok_prefix: Vec::new(),
            memo: Vec::new(),
        };
        c.refresh();
        c
    }

    pub(super) fn refresh(&mut self) {
        self.memo.clear();
        self.date_only.clear();
        DateCache::write_date_header(&mut self.date_only);
        self.date_server.clear();
        self.date_server.extend_from_slice(&self.date_only);
        self.date_server.extend_from_slice(&self.server);
        self.ok_prefix.clear();
        self.ok_prefix.extend_from_slice(status_line(200));
        self.ok_prefix.extend_from_slice(&self.date_server);
    }

    /// Appends the status line, `Date`, and (if `with_server`) the configured `Server` line.
    pub(crate) fn write_prefix(&self, out: &mut Vec<u8>, status: u16, with_server: bool) {
        match (status, with_server) {
            (200, true) => out.extend_from_slice(&self.ok_prefix),
            (_, true) => {
                out.extend_from_slice(status_line(status));
                out.extend_from_slice(&self.date_server);
            }
            (_, false) => {
                out.extend_from_slice(status_line(status));
                out.extend_from_slice(&self.date_only);
            }
        }
    }

    /// Appends the head of a response (status line to the empty line) with `status`, the
    /// handler's `headers`, `framing`, and the `Connection` line `keep_alive` calls for: one
    /// copy when a memoized head matches (see [`HeadMemo`]), else encoded field by field and
    /// memoized when its fields are all `'static`. A field asking for `Connection: close`
    /// disables `keep_alive`. [`HeadWritten::Refused`], with nothing appended, if the status (0:
    /// not a valid final status) or a field would break the message.
    ///
    /// `body.bytes` is the response's body when it is `'static` and sent (else empty): the memo
    /// keeps the first one after the head, and when it is the same again, head and body are
    /// appended as one copy ([`HeadWritten::HeadAndBody`]).
    pub(crate) fn write_head(
        &mut self,
        out: &mut Vec<u8>,
        status: u16,
        headers: &Fields,
        keep_alive: &mut KeepAlive,
        version: Version,
        body: BodyOut,
    ) -> HeadWritten {
        let BodyOut {
            framing,
            bytes: body,
        } = body;
        let hit = self
            .memo
            .iter()
            .position(|m| m.status == status && same_fields(&m.key, headers));
        if let Some(i) = hit {
            let m = &mut self.memo[i];
            if m.close {
                keep_alive.disable(CloseReason::ResponseAsked);
            }
            let conn = keep_alive.connection_line(version);
            if m.conn == conn && m.framing == framing {
                // (Equal ids and a body: `bytes` holds it after the head.)
                if m.body == StaticBody::of(body) && !body.is_empty() {
                    out.extend_from_slice(&m.bytes);
                    return HeadWritten::HeadAndBody(m.text_fields());
                }
                out.extend_from_slice(&m.bytes[..m.head_len]);
                if m.head_len == m.bytes.len() && !body.is_empty() {
                    // The first `'static` body sent with this head: kept for next time.
                    m.body = StaticBody::of(body);
                    m.bytes.extend_from_slice(body);
                }
            } else {
                // Same start, other ending (another body length, say): remember the new ending.
                out.extend_from_slice(&m.bytes[..m.fields_len]);
                let mark = out.len();
                finish_head(out, conn, framing);
                m.conn = conn;
                m.framing = framing;
                m.bytes.truncate(m.fields_len);
                m.bytes.extend_from_slice(&out[mark..]);
                m.head_len = m.bytes.len();
                m.body = StaticBody::of(body);
                m.bytes.extend_from_slice(body);
            }
            return HeadWritten::Head(m.text_fields());
        }
        let close = headers.iter().any(|(n, v)| asks_close(n.as_bytes(), v));
        if close {
            keep_alive.disable(CloseReason::ResponseAsked);
        }
        let mark = out.len();
        if status == 0 || !self.write_fields(out, status, headers) {
            out.truncate(mark);
            return HeadWritten::Refused;
        }
        let fields_len = out.len() - mark;
        let conn = keep_alive.connection_line(version);
        finish_head(out, conn, framing);
        if let Some(key) = fields_key(headers) {
            if self.memo.len() >= HEAD_MEMO_MAX {
                // Oldest out: the memo is refilled from scratch every refresh anyway.
                self.memo.remove(0);
            }
            let mut bytes = out[mark..].to_vec();
            let head_len = bytes.len();
            bytes.extend_from_slice(body);
            self.memo.push(HeadMemo {
                status,
                key,
                conn,
                framing,
                close,
                text: crate::response::is_text_fields(headers),
                fields_len,
                head_len,
                body: StaticBody::of(body),
                bytes,
            });
        }
        HeadWritten::Head(TextFields::Unknown)
    }

    /// Encodes the status line, `Date`, `Server` (unless the handler sets its own) and the
    /// handler's fields, skipping the ones the engine owns. `false` (logged) if a field fails
    /// the codec's [`check_field`], the rule HTTP/2 applies too.
    fn write_fields(&self, out: &mut Vec<u8>, status: u16, headers: &Fields) -> bool {
        let own_server = headers.iter().any(|(n, _)| is_server_field(n.as_bytes()));
        self.write_prefix(out, status, !own_server);
        for (name, value) in headers {
            // Checked before the engine-owned ones are dropped, as HTTP/2 does: the same fields
            // are refused whichever protocol carries them.
            if let Err(why) = check_field(name.as_bytes(), value) {
                crate::response::log_refused_field(status, name, why);
                return false;
            }
            // Framing, Date and Connection are the engine's: a handler's could contradict it.
            if is_engine_owned(name.as_bytes()) {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        true
    }
}

/// The memo key of `headers` if every name and value is borrowed `'static` data (see
/// [`FieldsKey`]) and there are few enough of them.
fn fields_key(headers: &Fields) -> Option<FieldsKey> {
    if headers.len() > HEAD_MEMO_FIELDS {
        return None;
    }
    let mut key = FieldsKey {
        len: headers.len(),
        ids: [(0, 0, 0, 0); HEAD_MEMO_FIELDS],
    };
    for (id, field) in key.ids.iter_mut().zip(headers) {
        *id = match field {
            (Cow::Borrowed(n), Cow::Borrowed(v)) => {
                (n.as_ptr() as usize, n.len(), v.as_ptr() as usize, v.len())
            }
            _ => return None,
        };
    }
    Some(key)
}

/// Whether `headers` has exactly the identity `key` (see [`FieldsKey`]).
#[inline]
fn same_fields(key: &FieldsKey, headers: &Fields) -> bool {
    // (Equal lengths, at most `HEAD_MEMO_FIELDS`: the zip covers every field.)
    key.len == headers.len()
        && key.ids.iter().zip(headers).all(|(k, (n, v))| match (n, v) {
            (Cow::Borrowed(n), Cow::Borrowed(v)) => {
                *k == (n.as_ptr() as usize, n.len(), v.as_ptr() as usize, v.len())
            }
            _ => false,
        })
}

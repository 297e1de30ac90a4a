//! Incremental decoder for `Transfer-Encoding: chunked` (RFC 9112 §7.1).
//!
//! API CONTRACT (fixed; the engine is written against it).

use crate::{Limits, ParseError};

/// One step of chunked decoding over the bytes given to [`ChunkedDecoder::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkedStep {
    /// `consumed` bytes of framing were used and more input is needed to progress.
    NeedMore {
        /// Bytes of the input used (framing only).
        consumed: usize,
    },
    /// Body data: `input[data_start..data_start + data_len]` is body, and the caller should drop
    /// `consumed` bytes (framing before it plus the data) from the front of its input.
    Data {
        /// Bytes of input consumed, including this data.
        consumed: usize,
        /// Offset of the data in the input.
        data_start: usize,
        /// Length of the data.
        data_len: usize,
    },
    /// The last chunk and trailer section ended; `consumed` bytes used. What follows is the next
    /// request.
    Done {
        /// Bytes of input consumed.
        consumed: usize,
    },
}

/// State machine that decodes a chunked body piece by piece, without copying body bytes.
///
/// Framing lines (chunk sizes with their extensions, trailer fields) are only consumed once they
/// are complete, so a caller that keeps the unconsumed bytes and appends new ones can feed any
/// split of the input. A framing line that is already invalid, or already over a limit, is an
/// error as soon as that is certain.
///
/// ```
/// use peregrine_codec::{ChunkedDecoder, ChunkedStep, Limits};
///
/// let mut input: &[u8] = b"5\r\nhello\r\n6;lang=en\r\n world\r\n0\r\nX-Sum: 1\r\n\r\nNEXT";
/// let (mut dec, limits, mut body) = (ChunkedDecoder::new(), Limits::default(), Vec::new());
/// loop {
///     match dec.decode(input, &limits).unwrap() {
///         ChunkedStep::Data { consumed, data_start, data_len } => {
///             body.extend_from_slice(&input[data_start..data_start + data_len]);
///             input = &input[consumed..];
///         }
///         ChunkedStep::NeedMore { .. } => unreachable!("the whole body is here"),
///         ChunkedStep::Done { consumed } => {
///             input = &input[consumed..];
///             break;
///         }
///     }
/// }
/// assert_eq!(body, b"hello world");
/// assert_eq!(input, b"NEXT");
/// assert!(dec.is_done());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChunkedDecoder {
    state: State,
    /// Chunk-extension bytes seen so far (see [`ChunkedDecoder::extension_bytes`]).
    ext_bytes: u64,
    /// The trailer fields decoded so far (see [`ChunkedDecoder::take_trailers`]).
    trailers: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// After chunk data, expecting CRLF.
    DataEnd,
    /// After the last chunk: trailer lines so far (bytes, fields).
    Trailers(usize, usize),
    /// The body ended.
    Done,
}

/// Most hex digits accepted in a chunk size: 16 is exactly a u64, so no overflow is possible.
const MAX_SIZE_DIGITS: usize = 16;

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes as far as possible in `input` (the unconsumed bytes received so far). Call in a
    /// loop, dropping `consumed` bytes each time, until `NeedMore` (read more) or `Done`.
    ///
    /// Errors (always status 400 or 431) are final: the body is malformed.
    pub fn decode(&mut self, input: &[u8], limits: &Limits) -> Result<ChunkedStep, ParseError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Size => match parse_size_line(&input[pos..], limits)? {
                    None => return Ok(ChunkedStep::NeedMore { consumed: pos }),
                    Some((0, line, ext)) => {
                        pos += line;
                        self.ext_bytes += ext as u64;
                        self.state = State::Trailers(0, 0);
                    }
                    Some((size, line, ext)) => {
                        pos += line;
                        self.ext_bytes += ext as u64;
                        self.state = State::Data(size);
                    }
                },
                State::Data(remaining) => {
                    let avail = input.len() - pos;
                    if avail == 0 {
                        return Ok(ChunkedStep::NeedMore { consumed: pos });
                    }
                    // `take` fits in usize because it is at most `avail`.
                    let take = remaining.min(avail as u64) as usize;
                    self.state = if remaining == take as u64 {
                        State::DataEnd
                    } else {
                        State::Data(remaining - take as u64)
                    };
                    return Ok(ChunkedStep::Data {
                        consumed: pos + take,
                        data_start: pos,
                        data_len: take,
                    });
                }
                State::DataEnd => match input.get(pos) {
                    None => return Ok(ChunkedStep::NeedMore { consumed: pos }),
                    Some(b'\r') => match input.get(pos + 1) {
                        None => return Ok(ChunkedStep::NeedMore { consumed: pos }),
                        Some(b'\n') => {
                            pos += 2;
                            self.state = State::Size;
                        }
                        Some(_) => return Err(bad("bare CR after chunk data")),
                    },
                    Some(_) => return Err(bad("chunk data not followed by CRLF")),
                },
                State::Trailers(bytes, count) => {
                    let rest = &input[pos..];
                    let Some(eol) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
                        check_trailer_progress(rest.len(), bytes, limits)?;
                        return Ok(ChunkedStep::NeedMore { consumed: pos });
                    };
                    // `eol` is where this line's CR is (or a bare LF, rejected below).
                    if rest[eol] == b'\n' {
                        return Err(bad("bare LF in chunked trailer section"));
                    }
                    match rest.get(eol + 1) {
                        None => {
                            check_trailer_progress(eol, bytes, limits)?;
                            return Ok(ChunkedStep::NeedMore { consumed: pos });
                        }
                        Some(b'\n') => {}
                        Some(_) => return Err(bad("bare CR in chunked trailer section")),
                    }
                    let bytes = bytes + eol + 2;
                    if bytes > limits.max_trailer_bytes {
                        return Err(ParseError::new(431, "trailer section too large"));
                    }
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = State::Done;
                        return Ok(ChunkedStep::Done { consumed: pos });
                    }
                    if eol > limits.max_field_line {
                        return Err(ParseError::new(431, "trailer field line too long"));
                    }
                    if count == limits.max_fields {
                        return Err(ParseError::new(431, "too many trailer fields"));
                    }
                    let (name, value) = crate::parse::parse_field_line(&rest[..eol])?;
                    // Trailers never change framing or routing (http1-rules.md E): a sender that
                    // tries is refused rather than silently ignored.
                    for forbidden in [&b"content-length"[..], b"transfer-encoding", b"host"] {
                        if name.eq_ignore_ascii_case(forbidden) {
                            return Err(bad("framing or Host field in chunked trailers"));
                        }
                    }
                    self.trailers.push((name.to_vec(), value.to_vec()));
                    self.state = State::Trailers(bytes, count + 1);
                }
                State::Done => return Ok(ChunkedStep::Done { consumed: pos }),
            }
        }
    }

    /// The trailer fields decoded so far (name, OWS-trimmed value), in order, taken out: all
    /// of them once [`ChunkedDecoder::is_done`]. They passed the header-field rules and the
    /// trailer limits, and none frames or routes the message (those fail the decode).
    ///
    /// ```
    /// use peregrine_codec::{ChunkedDecoder, ChunkedStep, Limits};
    /// let mut dec = ChunkedDecoder::new();
    /// let step = dec.decode(b"0\r\nX-Sum: 7 \r\n\r\n", &Limits::default()).unwrap();
    /// assert!(matches!(step, ChunkedStep::Done { consumed: 16 }));
    /// assert_eq!(dec.take_trailers(), [(b"X-Sum".to_vec(), b"7".to_vec())]);
    /// assert!(dec.take_trailers().is_empty());
    /// ```
    pub fn take_trailers(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        std::mem::take(&mut self.trailers)
    }

    /// `true` once the terminating chunk and trailers were decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Data bytes the current chunk still declares (0 between chunks): lets a caller refuse a
    /// chunk whose declared size already breaks its body limit before its data arrives.
    ///
    /// ```
    /// use peregrine_codec::{ChunkedDecoder, ChunkedStep, Limits};
    /// let mut dec = ChunkedDecoder::new();
    /// let step = dec.decode(b"100000\r\nab", &Limits::default()).unwrap();
    /// assert!(matches!(step, ChunkedStep::Data { data_len: 2, .. }));
    /// assert_eq!(dec.chunk_data_remaining(), 0x100000 - 2);
    /// ```
    pub fn chunk_data_remaining(&self) -> u64 {
        match self.state {
            State::Data(n) => n,
            _ => 0,
        }
    }

    /// Chunk-extension bytes (everything between a chunk size and its CRLF) consumed so far, so
    /// a caller can count them toward its body limit: each line is bounded by
    /// `Limits::max_chunk_ext_len`, but their number is not.
    ///
    /// ```
    /// use peregrine_codec::{ChunkedDecoder, Limits};
    /// let mut dec = ChunkedDecoder::new();
    /// dec.decode(b"1;a=b\r\nx\r\n0\r\n\r\n", &Limits::default()).unwrap();
    /// assert_eq!(dec.extension_bytes(), 4);
    /// ```
    pub fn extension_bytes(&self) -> u64 {
        self.ext_bytes
    }
}

fn bad(reason: &'static str) -> ParseError {
    ParseError::new(400, reason)
}

/// An incomplete trailer line with at least `line` bytes before its CRLF, after `bytes` bytes of
/// trailers: error if it is already certain to break a limit.
fn check_trailer_progress(line: usize, bytes: usize, limits: &Limits) -> Result<(), ParseError> {
    if line > limits.max_field_line {
        return Err(ParseError::new(431, "trailer field line too long"));
    }
    if bytes + line + 2 > limits.max_trailer_bytes {
        return Err(ParseError::new(431, "trailer section too large"));
    }
    Ok(())
}

#[inline]
fn is_tchar(b: u8) -> bool {
    crate::grammar::is_tchar(b)
}

/// Parses `chunk-size [ chunk-ext ] CRLF` at the start of `s`. `Ok(None)`: valid so far, need
/// more bytes. `Ok(Some((size, line_len, ext_len)))` with `line_len` including the CRLF and
/// `ext_len` the bytes between the size and the CRLF.
fn parse_size_line(s: &[u8], limits: &Limits) -> Result<Option<(u64, usize, usize)>, ParseError> {
    let digits = s.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits > MAX_SIZE_DIGITS {
        return Err(bad("chunk size has more than 16 hex digits"));
    }
    if digits == s.len() {
        return Ok(None);
    }
    if digits == 0 {
        return Err(bad("chunk size is not a hex number"));
    }
    let size = s[..digits].iter().fold(0u64, |n, &d| {
        // Cannot overflow: at most 16 digits of 4 bits.
        (n << 4) | u64::from((d as char).to_digit(16).unwrap_or(0) as u8)
    });

    // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] )
    #[derive(Clone, Copy, PartialEq)]
    enum E {
        /// After the size, a complete extension, or a closing quote. `true`: whitespace seen,
        /// so only `;` may follow.
        Between(bool),
        AfterSemi,
        Name,
        AfterName,
        AfterEq,
        Token,
        Quoted,
        QuotedEscape,
    }
    let mut st = E::Between(false);
    let ext = &s[digits..];
    for (i, &b) in ext.iter().enumerate() {
        if i > limits.max_chunk_ext_len {
            return Err(bad("chunk extension too long"));
        }
        let ws = b == b' ' || b == b'\t';
        st = match (st, b) {
            (E::Quoted, b'"') => E::Between(false),
            (E::Quoted, b'\\') => E::QuotedEscape,
            (E::Quoted, _) if b == b'\t' || (0x20..0x7F).contains(&b) || b >= 0x80 => E::Quoted,
            (E::QuotedEscape, _) if b == b'\t' || (0x20..0x7F).contains(&b) || b >= 0x80 => {
                E::Quoted
            }
            (E::Quoted | E::QuotedEscape, b'\r' | b'\n') => {
                return Err(bad("unterminated quoted string in chunk extension"))
            }
            (E::Quoted | E::QuotedEscape, _) => {
                return Err(bad("control character in chunk extension"))
            }
            (E::Between(false) | E::Name | E::Token, b'\r') => {
                return match ext.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((size, digits + i + 2, i))),
                    Some(_) => Err(bad("bare CR in chunk size line")),
                };
            }
            (_, b'\n') => return Err(bad("bare LF in chunk size line")),
            (E::Between(_) | E::Name | E::AfterName | E::Token, b';') => E::AfterSemi,
            (E::Between(_) | E::Token, _) if ws => E::Between(true),
            (E::AfterSemi, _) if ws => E::AfterSemi,
            (E::AfterSemi | E::Name, _) if is_tchar(b) => E::Name,
            (E::Name | E::AfterName, _) if ws => E::AfterName,
            (E::Name | E::AfterName, b'=') => E::AfterEq,
            (E::AfterEq, _) if ws => E::AfterEq,
            (E::AfterEq, b'"') => E::Quoted,
            (E::AfterEq | E::Token, _) if is_tchar(b) => E::Token,
            (E::AfterSemi, b'\r') => return Err(bad("empty chunk extension")),
            (_, b'\r') => return Err(bad("whitespace before CRLF in chunk size line")),
            (E::Between(_), _) => return Err(bad("invalid byte after chunk size")),
            _ => return Err(bad("invalid chunk extension")),
        };
    }
    if ext.len() > limits.max_chunk_ext_len {
        return Err(bad("chunk extension too long"));
    }
    Ok(None)
}

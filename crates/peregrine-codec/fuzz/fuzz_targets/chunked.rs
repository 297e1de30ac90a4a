//! Chunked decoder: no panic on any input; steps stay inside the input; the result (body, what
//! follows, or failure) does not depend on how the input is split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine_codec::{ChunkedDecoder, ChunkedStep, Limits};

type Outcome = Result<Option<(Vec<u8>, Vec<u8>)>, ()>;

fn feed(input: &[u8], piece: usize, limits: &Limits) -> Outcome {
    let mut dec = ChunkedDecoder::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut body = Vec::new();
    let mut pieces = input.chunks(piece.max(1));
    loop {
        match dec
            .decode(&pending, limits)
            .map_err(|e| assert!(e.status == 400 || e.status == 431))?
        {
            ChunkedStep::Data {
                consumed,
                data_start,
                data_len,
            } => {
                assert!(
                    data_len > 0 && data_start + data_len == consumed && consumed <= pending.len()
                );
                body.extend_from_slice(&pending[data_start..consumed]);
                pending.drain(..consumed);
            }
            ChunkedStep::NeedMore { consumed } => {
                assert!(consumed <= pending.len());
                pending.drain(..consumed);
                match pieces.next() {
                    Some(p) => pending.extend_from_slice(p),
                    None => return Ok(None),
                }
            }
            ChunkedStep::Done { consumed } => {
                assert!(consumed <= pending.len() && dec.is_done());
                pending.drain(..consumed);
                for p in pieces {
                    pending.extend_from_slice(p);
                }
                return Ok(Some((body, pending)));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let limits = if selector & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_chunk_ext_len: 8,
            max_trailer_bytes: 32,
            max_field_line: 16,
            max_fields: 2,
            ..Limits::default()
        }
    };
    let whole = feed(input, input.len(), &limits);
    let piece = usize::from(selector >> 1) % 17 + 1;
    let split = feed(input, piece, &limits);
    match (&whole, &split) {
        (Err(()), Err(())) => {}
        _ => assert_eq!(
            whole, split,
            "split into pieces of {piece} changed the outcome"
        ),
    }
});

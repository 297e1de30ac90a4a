//! A multipart part read into memory (`Field::bytes`) when the allocator refuses the room: the
//! request gets `503` + `Retry-After`, the process does not abort, the next request is served.
//! The refusal comes from this test binary's global allocator, which fails every allocation of
//! 1 MiB or more while armed (a `Vec` that grows by `extend_from_slice` would abort here).

mod common;

use common::TestServer;
use peregrine::{post, App, Error, MultipartLimits, Request};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Refuses allocations of [`CAP`] bytes or more while [`ARMED`].
struct Capped;

static ARMED: AtomicBool = AtomicBool::new(false);
const CAP: usize = 1 << 20;

// SAFETY: every call is forwarded to `System` unchanged, or refused with a null pointer,
// which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) && layout.size() >= CAP {
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) && new_size >= CAP {
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Capped = Capped;

async fn part_len(mut req: Request) -> Result<String, Error> {
    let limits = MultipartLimits {
        total: 8 << 20,
        per_part: 8 << 20,
    };
    let mut form = req.multipart_with(limits)?;
    let mut field = form.next_field().await?.ok_or_else(Error::bad_request)?;
    Ok(field.bytes().await?.len().to_string())
}

/// The request for a multipart `body` (built before the allocator is armed).
fn request(body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "POST / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\
         content-type: multipart/form-data; boundary=XX\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    raw
}

#[test]
fn a_part_too_big_for_the_memory_left_is_503_and_the_server_goes_on() {
    let s = TestServer::start_with(App::new().route("/", post(part_len)), |c| {
        c.server.limits.max_body_size = 8 << 20;
    });
    let form = |n: usize| {
        let mut b = b"--XX\r\ncontent-disposition: form-data; name=\"f\"\r\n\r\n".to_vec();
        b.resize(b.len() + n, b'x');
        b.extend_from_slice(b"\r\n--XX--\r\n");
        b
    };
    let (big, small) = (request(&form(3 << 20)), request(&form(1000)));
    ARMED.store(true, Ordering::SeqCst);
    let refused = s.send_bytes(&big, false);
    let answered = s.send_bytes(&small, false);
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!((answered.status, answered.text()), (200, "1000"));
    // With the memory back, the big part is read whole.
    assert_eq!(s.send_bytes(&big, false).text(), (3 << 20).to_string());
}

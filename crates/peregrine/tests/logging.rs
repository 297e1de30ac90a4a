//! The request-logging layer emits one `tracing` event per request (checked by capturing the
//! formatted output of a real subscriber), and errors/panics are logged with their cause while
//! the client sees none of it.

mod common;
use common::{LogCapture, TestServer};
use peregrine::middleware::Logger;
use peregrine::{get, App, Error, Request};

#[test]
fn requests_and_failures_are_logged() {
    let capture = LogCapture::install();

    let app = App::new()
        .route(
            "/users/{id}",
            get(|req: Request| async move {
                let id: u32 = req.param("id")?;
                Ok::<_, Error>(id.to_string())
            }),
        )
        .route(
            "/fail",
            get(|_r: Request| async {
                Err::<(), _>(Error::internal_from(std::io::Error::other("disk on fire")))
            }),
        )
        .layer(Logger::new());
    let s = TestServer::start(app);
    assert_eq!(s.get("/users/7", &[]).text(), "7");
    assert_eq!(s.get("/missing", &[]).status, 404);
    let r = s.get("/fail", &[]);
    assert!(!r.text().contains("disk on fire"));
    drop(s); // shut down: every event has been written

    let out = capture.text();
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("peregrine::request"))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].contains("method=GET") && lines[0].contains("path=/users/7"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("route=/users/{id}") && lines[0].contains("status=200"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("peer=127.0.0.1:"), "{}", lines[0]);
    assert!(
        lines[1].contains("route=-") && lines[1].contains("status=404"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains("status=500"), "{}", lines[2]);
    // The cause of the 500 is in the log (ERROR level), not in the response.
    assert!(
        out.lines()
            .any(|l| l.contains("ERROR") && l.contains("disk on fire")),
        "{out}"
    );
}

//! The engine's log lines, captured from a real `tracing` subscriber (process-wide: one test
//! binary per capture).
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};

/// What the subscriber wrote.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Installs a subscriber (WARN and up, no colours) that writes here, for the whole process.
    pub fn install() -> Capture {
        let capture = Capture::default();
        let sink = capture.clone();
        tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .init();
        capture
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The captured line that contains `needle`.
    pub fn line_with(&self, needle: &str) -> String {
        let out = self.text();
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle:?} in:\n{out}"))
            .to_string()
    }
}

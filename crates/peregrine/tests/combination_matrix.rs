//! The combination matrix: every transport × observer set × middleware stack × route kind, over
//! real sockets with real clients (raw HTTP/1.1, rustls, the `h2` crate, tokio-tungstenite).
//! Every cell must answer what the bare app answers (status, `Content-Length` where it has
//! one, the bytes, the upgrade) or the app must be refused when it is built; never a 500 or a
//! 505 at run time. Each server must also shut down promptly once its clients left (an SSE
//! client among them), and its observers must have seen the traffic.
//!
//! The table is `matrix/table.rs`: a new feature is a new entry there (and, for a new route
//! kind, a checker in `matrix/checks.rs`), not a new test file. See docs/combinations.md.

#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

// Its echo handler only.
#[allow(dead_code)]
mod ws_support;

mod h2_stream;
mod matrix;

use matrix::app::{start, Fixture, NotStarted, Running};
use matrix::checks::check;
use matrix::client::Target;
use matrix::table::{stacks, Observers, Stack, ROUTES};
use std::time::{Duration, Instant};

/// A cell that takes longer than this has hung (every read also has its own wait).
const CELL_BUDGET: Duration = Duration::from_secs(30);
/// Shutdown is graceful but must not wait for clients that already left (the servers'
/// `shutdown_timeout` is 5 s: this catches a connection that held the drain to it).
const SHUTDOWN_BUDGET: Duration = Duration::from_secs(3);

/// The sum of a Prometheus counter over all its label sets.
fn counter_sum(scrape: &str, name: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What the stack's observers must have recorded of the cells just run.
fn observed(
    fx: &Fixture,
    stack: Stack,
    running: &Running,
    opened_before: f64,
) -> Result<(), String> {
    let scrape = fx.prometheus.render();
    match stack.observers {
        Observers::None => Ok(()),
        Observers::EngineEvents => {
            let opened = counter_sum(&scrape, "peregrine_connections_total");
            if opened > opened_before {
                Ok(())
            } else {
                Err(format!(
                    "engine events saw no connection ({opened_before} → {opened})"
                ))
            }
        }
        Observers::TraceMetricsOtel => {
            let spans = running
                .spans
                .as_ref()
                .map(|e| e.get_finished_spans().unwrap_or_default())
                .unwrap_or_default();
            if !spans.iter().any(|s| s.name == "GET /api/json") {
                let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
                return Err(format!("no OpenTelemetry span GET /api/json in {names:?}"));
            }
            if !scrape.contains(r#"route="/api/json""#) {
                return Err("no Prometheus series for route /api/json".into());
            }
            Ok(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cell_answers_like_the_bare_app() {
    let fx = Fixture::new();
    let started = Instant::now();
    let (mut cells, mut refused, mut failures) = (0usize, Vec::new(), Vec::new());
    let mut shutdowns = Vec::new();
    for stack in stacks() {
        let opened_before = counter_sum(&fx.prometheus.render(), "peregrine_connections_total");
        let running = match start(&fx, stack) {
            Ok(r) => r,
            Err(NotStarted::Refused(e)) => {
                // A refusal at build time is an allowed answer; it must say why.
                assert!(
                    !e.to_string().is_empty(),
                    "{stack}: refused without a reason"
                );
                refused.push(format!("{stack}: refused: {e}"));
                cells += ROUTES.len();
                continue;
            }
            Err(NotStarted::Panicked(why)) => {
                cells += ROUTES.len();
                failures.push(format!(
                    "{stack} × (start): App::serve panicked ({why}); its {} cells did not run",
                    ROUTES.len()
                ));
                continue;
            }
        };
        let target = Target {
            transport: stack.transport,
            addr: running.handle.local_addr(),
            ca: &fx.ca,
        };
        for &route in ROUTES {
            cells += 1;
            let outcome = tokio::time::timeout(
                CELL_BUDGET,
                Box::pin(check(route, &target, stack.middleware)),
            )
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {CELL_BUDGET:?}")));
            if let Err(e) = outcome {
                failures.push(format!("{stack} × {route:?}: {e}"));
            }
        }
        if let Err(e) = observed(&fx, stack, &running, opened_before) {
            failures.push(format!("{stack} × (observers): {e}"));
        }
        // Shut down in the background while the next stacks run; timed below.
        let handle = running.handle;
        shutdowns.push((
            stack,
            tokio::task::spawn_blocking(move || {
                let t = Instant::now();
                handle.shutdown();
                t.elapsed()
            }),
        ));
    }
    let mut slowest = Duration::ZERO;
    for (stack, took) in shutdowns {
        let took = took.await.unwrap();
        slowest = slowest.max(took);
        if took > SHUTDOWN_BUDGET {
            failures.push(format!(
                "{stack} × (shutdown): took {took:?}; a connection whose client left held the drain"
            ));
        }
    }
    eprintln!(
        "combination matrix: {cells} cells on {} servers in {:?} (slowest shutdown {slowest:?}); \
         {} refused at build, {} failures",
        stacks().len(),
        started.elapsed(),
        refused.len(),
        failures.len()
    );
    for r in &refused {
        eprintln!("  {r}");
    }
    assert!(
        failures.is_empty(),
        "{} of the matrix's checks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

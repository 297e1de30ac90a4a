//! The scenario application (examples/scenarios.rs) against every scenario of the lab contract
//! (lab/contract/scenarios.json), checked the way the lab runner checks peers.

#[allow(dead_code)]
#[path = "../examples/scenarios.rs"]
mod scenarios;

mod common;
use common::TestServer;
use serde_json::Value;
use std::path::PathBuf;

fn contract_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../lab/contract")
}

fn build_request(req: &Value) -> String {
    let method = req["method"].as_str().unwrap();
    let path = req["path"].as_str().unwrap();
    let body = req["body"].as_str().unwrap_or("");
    let mut s = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    if let Some(h) = req["headers"].as_object() {
        for (k, v) in h {
            s.push_str(&format!("{k}: {}\r\n", v.as_str().unwrap()));
        }
    }
    if !body.is_empty() {
        s.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    s.push_str("\r\n");
    s.push_str(body);
    s
}

#[test]
fn every_contract_scenario_is_answered_exactly() {
    let contract: Value =
        serde_json::from_slice(&std::fs::read(contract_dir().join("scenarios.json")).unwrap())
            .unwrap();
    let s = TestServer::start(scenarios::app());
    let required: Vec<&str> = contract["required_headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let list = contract["scenarios"].as_array().unwrap();
    assert!(list.len() >= 10);
    for sc in list {
        let name = sc["name"].as_str().unwrap();
        let exp = &sc["expect"];
        // Twice on one connection: the answer must not depend on connection state.
        let mut conn = s.connect();
        for round in 0..2 {
            conn.write(build_request(&sc["request"]).as_bytes());
            let r = conn.read(false);
            let ctx = format!(
                "{name} (round {round}): {:?} {:?}",
                r.headers,
                String::from_utf8_lossy(&r.body)
            );
            assert_eq!(r.status as u64, exp["status"].as_u64().unwrap(), "{ctx}");
            for h in &required {
                assert!(r.header(h).is_some(), "missing {h}: {ctx}");
            }
            if let Some(prefix) = exp["content_type_prefix"].as_str() {
                assert!(
                    r.header("content-type").unwrap_or("").starts_with(prefix),
                    "{ctx}"
                );
            }
            if let Some(body) = exp["body"].as_str() {
                assert_eq!(r.text(), body, "{ctx}");
            }
            if !exp["json"].is_null() {
                assert_eq!(r.json(), exp["json"], "{ctx}");
            }
            if let Some(file) = exp["json_file"].as_str() {
                let want: Value =
                    serde_json::from_slice(&std::fs::read(contract_dir().join(file)).unwrap())
                        .unwrap();
                assert_eq!(r.json(), want, "{ctx}");
                assert!(
                    r.body.len() > 8 * 1024,
                    "large payload is ~10 KiB: {}",
                    r.body.len()
                );
            }
            for h in exp["headers"].as_array().into_iter().flatten() {
                let h = h.as_str().unwrap();
                assert!(r.header(h).is_some(), "missing {h}: {ctx}");
            }
            if let Some(hv) = exp["header_values"].as_object() {
                for (k, v) in hv {
                    assert_eq!(r.header(k), v.as_str(), "{k}: {ctx}");
                }
            }
            for h in exp["absent_headers"].as_array().into_iter().flatten() {
                let h = h.as_str().unwrap();
                assert!(r.header(h).is_none(), "unexpected {h}: {ctx}");
            }
        }
    }
}

#[test]
fn scenario_app_rejects_bad_input_with_problems() {
    let s = TestServer::start(scenarios::app());
    s.get("/users/abc", &[]).assert_problem(400, "Bad Request");
    s.get("/search?q=x", &[]).assert_problem(400, "Bad Request");
    let r = s.send(&common::request(
        "POST",
        "/users",
        &["Content-Type: text/plain"],
        "{}",
    ));
    r.assert_problem(415, "Unsupported Media Type");
    let r = s.send(&common::request(
        "POST",
        "/users",
        &["Content-Type: application/json"],
        "{\"name\":1}",
    ));
    r.assert_problem(400, "Bad Request");
    s.get("/nope", &[]).assert_problem(404, "Not Found");
    let r = s.send(&common::request("DELETE", "/json", &[], ""));
    assert_eq!(
        (r.status, r.header("allow")),
        (405, Some("GET, HEAD, OPTIONS"))
    );
}

/// `POST /upload` counts the parts and bytes of a multipart body (the soak checks both).
#[cfg(feature = "multipart")]
#[test]
fn uploads_are_counted_part_by_part() {
    let s = TestServer::start(scenarios::app());
    let body = "--B\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a.bin\"\r\n\r\n\
                12345\r\n--B\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nxyz\r\n--B--\r\n";
    let ctype = "Content-Type: multipart/form-data; boundary=B";
    let r = s.send(&common::request("POST", "/upload", &[ctype], body));
    assert_eq!((r.status, r.text()), (200, r#"{"parts":2,"bytes":8}"#));
}

/// `GET /debug/heap` follows the live heap: 8 MiB held in 1 KiB blocks (in the allocator's
/// arenas, as a leak per request would be) show in `in_use`, and leave it when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_heap_route_reports_live_allocations() {
    let s = TestServer::start(scenarios::app());
    let in_use = || {
        let r = s.get("/debug/heap", &[]);
        assert_eq!(r.status, 200);
        let v = r.json();
        let (used, system) = (v["in_use"].as_u64().unwrap(), v["system"].as_u64().unwrap());
        assert!(used > 0 && used <= system, "{v}");
        used
    };
    let before = in_use();
    let held: Vec<Box<[u8; 1024]>> = (0..8192).map(|_| Box::new([1u8; 1024])).collect();
    let holding = in_use();
    drop(std::hint::black_box(held));
    let after = in_use();
    // Tests running in parallel allocate too: margins of 2 MiB.
    assert!(holding >= before + (6 << 20), "{before} -> {holding}");
    assert!(after + (6 << 20) <= holding, "{holding} -> {after}");
}

/// `POST /ledger` appends each id as a line (twice when sent twice: it counts executions, it
/// does not deduplicate) and refuses a body that is not one id of 1 to 64 bytes.
#[test]
fn the_ledger_records_every_execution_and_refuses_what_is_not_an_id() {
    let dir = std::env::temp_dir().join(format!("peregrine-ledger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ledger");
    let app = scenarios::with_ledger(scenarios::app(), Some(file.clone().into()));
    let s = TestServer::start(app);
    for id in ["id-1", "id-2", "id-1"] {
        let r = s.send(&common::request("POST", "/ledger", &[], id));
        assert_eq!(r.status, 201, "{id}");
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "id-1\nid-2\nid-1\n"
    );
    for bad in ["", "a\nb", &"x".repeat(65)] {
        let r = s.send(&common::request("POST", "/ledger", &[], bad));
        r.assert_problem(400, "Bad Request");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TLS is the `--tls` flag's choice, never the environment's alone: the lab's cleartext peer
/// (this binary without `--tls`) stays cleartext whatever TLS variables a shell left set, and
/// `--tls` without a certificate and key is an error that names what is missing.
#[test]
fn tls_is_chosen_by_the_flag_and_a_half_configuration_is_an_error() {
    use scenarios::{choose_transport, Transport};
    let env = |set: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            set.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let both = &[("TLS_CERT", "cert.pem"), ("TLS_KEY", "key.pem")];

    // A stray certificate in the environment: cleartext, and the caller is told what it ignores.
    let mut a = args(&["--workers", "2"]);
    assert_eq!(
        choose_transport(&mut a, env(both)),
        Ok(Transport::Cleartext {
            ignored: vec!["TLS_CERT", "TLS_KEY"]
        })
    );
    assert_eq!(
        a,
        args(&["--workers", "2"]),
        "other flags are left for the config"
    );
    let mut a = args(&[]);
    assert_eq!(
        choose_transport(&mut a, env(&[])),
        Ok(Transport::Cleartext { ignored: vec![] })
    );

    // The flag with both files: TLS; the flag is taken out of the arguments.
    let mut a = args(&["--addr", "127.0.0.1:8443", "--tls"]);
    assert_eq!(choose_transport(&mut a, env(both)), Ok(Transport::Tls));
    assert_eq!(a, args(&["--addr", "127.0.0.1:8443"]));

    // Half-configured: an error naming what is missing.
    for (set, missing) in [
        (&[("TLS_CERT", "cert.pem")][..], "TLS_KEY is not set"),
        (&[("TLS_KEY", "key.pem")][..], "TLS_CERT is not set"),
        (
            &[("TLS_CERT", "cert.pem"), ("TLS_KEY", " ")][..],
            "TLS_KEY is not set",
        ),
        (&[][..], "neither is set"),
    ] {
        let set: &'static [(&'static str, &'static str)] = set;
        let err = choose_transport(&mut args(&["--tls"]), env(set)).unwrap_err();
        assert!(err.starts_with("--tls needs TLS_CERT and TLS_KEY"), "{err}");
        assert!(err.ends_with(missing), "{set:?}: {err}");
    }
}

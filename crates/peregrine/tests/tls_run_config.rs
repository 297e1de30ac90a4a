//! `peregrine::config::from_env_and_args` / `from_vars_and_args`: the TLS settings from the
//! environment and from flags, and the errors a half-given setting gets.

use peregrine::config::{from_env_and_args, from_vars_and_args};
use peregrine::tls::{CertificateFiles, ClientAuth};

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// An environment holding only `vars`.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn files(pairs: &[(&str, &str)]) -> Vec<CertificateFiles> {
    pairs
        .iter()
        .map(|(c, k)| CertificateFiles::new(c, k))
        .collect()
}

#[test]
fn no_tls_setting_means_cleartext() {
    let cfg = from_vars_and_args(env(&[("WORKERS", "2")]), args(&[])).unwrap();
    assert_eq!(cfg.server.workers, 2);
    assert!(cfg.tls.is_none());
    // An empty variable (`TLS_CERT=` in a compose file) is no certificate.
    let cfg = from_vars_and_args(env(&[("TLS_CERT", ""), ("TLS_KEY", " ")]), args(&[])).unwrap();
    assert!(cfg.tls.is_none());
}

#[test]
fn environment_pairs_certificates_and_keys_in_order_for_sni() {
    let cfg = from_vars_and_args(
        env(&[("TLS_CERT", "a.crt, b.crt"), ("TLS_KEY", "a.key,b.key")]),
        args(&["--addr", "127.0.0.1:8443"]),
    )
    .unwrap();
    assert_eq!(cfg.server.addr.port(), 8443);
    let tls = cfg.tls.unwrap();
    assert_eq!(
        tls.certificates,
        files(&[("a.crt", "a.key"), ("b.crt", "b.key")])
    );
    assert_eq!(tls.client_auth, ClientAuth::None);
    // ALPN: h2 first with the `http2` feature (this test binary has every feature).
    assert_eq!(tls.alpn, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
}

#[test]
fn flags_replace_the_environment_and_repeat_for_sni() {
    let cfg = from_vars_and_args(
        env(&[("TLS_CERT", "env.crt"), ("TLS_KEY", "env.key")]),
        args(&[
            "--tls-cert",
            "a.crt",
            "--workers=1",
            "--tls-key=a.key",
            "--tls-cert",
            "b.crt",
            "--tls-key",
            "b.key",
        ]),
    )
    .unwrap();
    assert_eq!(cfg.server.workers, 1);
    assert_eq!(
        cfg.tls.unwrap().certificates,
        files(&[("a.crt", "a.key"), ("b.crt", "b.key")])
    );
    // A flag for the key alone replaces only the key.
    let cfg = from_vars_and_args(
        env(&[("TLS_CERT", "env.crt"), ("TLS_KEY", "env.key")]),
        args(&["--tls-key", "other.key"]),
    )
    .unwrap();
    assert_eq!(
        cfg.tls.unwrap().certificates,
        files(&[("env.crt", "other.key")])
    );
}

#[test]
fn a_missing_key_or_certificate_is_named() {
    let err =
        |vars: &[(&str, &str)], a: &[&str]| from_vars_and_args(env(vars), args(a)).unwrap_err();
    assert_eq!(
        err(&[("TLS_CERT", "a.crt")], &[]),
        "TLS_CERT is given but TLS_KEY is not (one key per certificate)"
    );
    assert_eq!(
        err(&[], &["--tls-cert", "a.crt"]),
        "--tls-cert is given but --tls-key is not (one key per certificate)"
    );
    assert_eq!(
        err(&[("TLS_KEY", "a.key")], &[]),
        "TLS_KEY is given but TLS_CERT is not (one certificate per key)"
    );
    assert_eq!(
        err(&[("TLS_CERT", "a.crt,b.crt"), ("TLS_KEY", "a.key")], &[]),
        "TLS_CERT names 2 certificate(s) but TLS_KEY names 1 key(s): one key per certificate, \
         in the same order"
    );
    assert_eq!(
        err(&[("TLS_CERT", "a.crt,"), ("TLS_KEY", "a.key,b.key")], &[]),
        "TLS_CERT has an empty path"
    );
    assert_eq!(err(&[], &["--tls-cert"]), "--tls-cert needs a value");
    // The next flag is not taken for the path.
    assert_eq!(
        err(&[], &["--tls-cert", "--tls-key", "a.key"]),
        "--tls-cert needs a value"
    );
    assert_eq!(err(&[], &["--tls-certs", "a"]), "unknown flag --tls-certs");
}

#[test]
fn client_certificates_optional_or_required() {
    let pair = [("TLS_CERT", "a.crt"), ("TLS_KEY", "a.key")];
    let auth = |extra: &[(&str, &str)], a: &[&str]| {
        from_vars_and_args(env(&[&pair[..], extra].concat()), args(a))
            .map(|c| c.tls.unwrap().client_auth)
    };
    assert_eq!(
        auth(&[("TLS_CLIENT_CA", "ca.pem")], &[]).unwrap(),
        ClientAuth::Required("ca.pem".into())
    );
    assert_eq!(
        auth(
            &[("TLS_CLIENT_CA", "ca.pem"), ("TLS_CLIENT_AUTH", "required")],
            &["--tls-client-auth", "optional"]
        )
        .unwrap(),
        ClientAuth::Optional("ca.pem".into())
    );
    assert_eq!(
        auth(
            &[("TLS_CLIENT_CA", "ca.pem"), ("TLS_CLIENT_AUTH", "maybe")],
            &[]
        )
        .unwrap_err(),
        "TLS_CLIENT_AUTH must be optional or required, not \"maybe\""
    );
    assert_eq!(
        auth(&[], &["--tls-client-auth", "required"]).unwrap_err(),
        "--tls-client-auth needs a client CA (TLS_CLIENT_CA / --tls-client-ca)"
    );
    assert_eq!(
        from_vars_and_args(env(&[("TLS_CLIENT_CA", "ca.pem")]), args(&[])).unwrap_err(),
        "TLS_CLIENT_CA needs a server certificate (TLS_CERT / --tls-cert)"
    );
}

/// The process environment is what `from_env_and_args` reads (the only test here that sets
/// variables, so no other test sees them change).
#[test]
fn from_env_and_args_reads_the_process_environment() {
    std::env::set_var("TLS_CERT", "/etc/ssl/site.crt");
    std::env::set_var("TLS_KEY", "/etc/ssl/site.key");
    let read = from_env_and_args(args(&["--workers", "1"]));
    let missing_key = {
        std::env::remove_var("TLS_KEY");
        from_env_and_args(args(&[]))
    };
    std::env::remove_var("TLS_CERT");
    assert_eq!(
        read.unwrap().tls.unwrap().certificates,
        files(&[("/etc/ssl/site.crt", "/etc/ssl/site.key")])
    );
    assert_eq!(
        missing_key.unwrap_err(),
        "TLS_CERT is given but TLS_KEY is not (one key per certificate)"
    );
}

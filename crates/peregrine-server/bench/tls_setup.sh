# Sourced by the TLS bench scripts (tls_interleaved.sh, h2_per_request.sh): writes into "$work"
# a self-signed ECDSA P-256 certificate for localhost (cert.pem, key.pem) and client.cnf, the
# lab's client OpenSSL setting (lab/peregrine_lab/tls_checks.py CLIENT_OPENSSL_CONF), so every
# server negotiates the same TLS 1.3 suite and group.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat >"$work/client.cnf" <<'EOF'
openssl_conf = lab_conf
[lab_conf]
ssl_conf = lab_ssl
[lab_ssl]
system_default = lab_tls
[lab_tls]
MinProtocol = TLSv1.3
MaxProtocol = TLSv1.3
Ciphersuites = TLS_AES_128_GCM_SHA256
Groups = X25519
EOF

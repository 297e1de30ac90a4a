// Command quicgo-h3 is quic-go's own HTTP/3 server for the lab's HTTP/3 lane (./scripts/lab h3):
// http3.Server on UDP ADDR and net/http's TLS server on TCP ADDR (HTTP/2 and HTTP/1.1 by ALPN),
// one handler for all three, so the lane compares the protocols on the same app. The lab's
// certificate comes from TLS_CERT / TLS_KEY; GOMAXPROCS=WORKERS.
package main

import (
	"crypto/tls"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func main() {
	if n, err := strconv.Atoi(os.Getenv("WORKERS")); err == nil && n > 0 {
		runtime.GOMAXPROCS(n)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8443"
	}
	cert, err := tls.LoadX509KeyPair(os.Getenv("TLS_CERT"), os.Getenv("TLS_KEY"))
	if err != nil {
		log.Fatalf("TLS_CERT / TLS_KEY: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /plaintext", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Server", "quic-go")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Length", "13")
		w.Write([]byte("Hello, World!"))
	})
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	h3 := &http3.Server{
		Addr:      addr,
		Handler:   mux,
		TLSConfig: http3.ConfigureTLSConfig(tlsConf.Clone()),
		// The idle-memory step holds connections open for a while; quic-go's default is 30 s.
		QUICConfig: &quic.Config{MaxIdleTimeout: 65 * time.Second},
	}
	tcp := &http.Server{Addr: addr, Handler: mux, TLSConfig: tlsConf, IdleTimeout: 65 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- h3.ListenAndServe() }()
	go func() { errs <- tcp.ListenAndServeTLS("", "") }()
	log.Fatal(<-errs)
}

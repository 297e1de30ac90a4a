// Command nethttp-tls is the Go net/http peer over TLS for the lab's HTTPS and HTTP/2 lanes
// (./scripts/lab protocols): the standard library's ListenAndServeTLS with the lab's certificate
// (TLS_CERT, TLS_KEY), which negotiates HTTP/2 or HTTP/1.1 by ALPN on its own, GOMAXPROCS=WORKERS.
// It serves /plaintext (the lanes' route) as the plaintext nethttp peer does.
package main

import (
	"crypto/tls"
	"log"
	"net/http"
	"os"
	"time"

	"peregrine.lab/peers/go/internal/contract"
)

func main() {
	contract.SetWorkers()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /plaintext", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Server", "Go net/http")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("Hello, World!"))
	})
	srv := &http.Server{
		Addr:    contract.Addr(),
		Handler: mux,
		// TLS 1.2 and 1.3 only, as every server of the lane; Go's own cipher suite choice.
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12},
		// The idle-memory step holds connections open; net/http has no idle limit by default.
		IdleTimeout: 65 * time.Second,
	}
	log.Fatal(srv.ListenAndServeTLS(os.Getenv("TLS_CERT"), os.Getenv("TLS_KEY")))
}

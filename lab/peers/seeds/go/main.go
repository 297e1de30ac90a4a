// Go net/http in the seeds' shape (SEED): rust-http's Apache fake on `/`, Kourier's `/hello`
// with the request, idle and write timers Kourier's Go server sets, and Lemire's `/simple` as his
// post writes it (http.HandleFunc + http.ListenAndServe, nothing configured). ADDR is host:port;
// GOMAXPROCS is Go's default (every CPU the process may use).
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const apacheBody = "<html><body><h1>It works!</h1>\n<p>This is the default web page for this server.</p>\n" +
	"<p>The web server software is running but no content has been added, yet.</p>\n</body></html>\n"

var apacheFields = [][2]string{
	{"Content-Type", "text/html"},
	{"Server", "Apache/2.2.22 (Ubuntu)"},
	{"Last-Modified", "Thu, 05 May 2011 11:46:42 GMT"},
	{"ETag", "\"501b29-b1-4a285ed47404a\""},
	{"Accept-Ranges", "bytes"},
	{"Vary", "Accept-Encoding"},
}

func main() {
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	mux := http.NewServeMux()
	var err error
	switch seed := os.Getenv("SEED"); seed {
	case "rust-http":
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			for _, f := range apacheFields {
				w.Header().Set(f[0], f[1])
			}
			io.WriteString(w, apacheBody)
		})
		err = http.ListenAndServe(addr, mux)
	case "kourier":
		mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "Hello World!")
		})
		srv := &http.Server{
			Addr:         addr,
			Handler:      mux,
			ReadTimeout:  20 * time.Second,
			IdleTimeout:  60 * time.Second,
			WriteTimeout: 20 * time.Second,
		}
		err = srv.ListenAndServe()
	case "lemire":
		http.HandleFunc("/simple", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "Hello!")
		})
		err = http.ListenAndServe(addr, nil)
	default:
		err = fmt.Errorf("SEED=%q: expected rust-http, kourier or lemire", seed)
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

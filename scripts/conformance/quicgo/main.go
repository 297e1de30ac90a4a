// HTTP/3 conformance against a running server (the chat example built with `http3`), with
// quic-go's HTTP/3 client (net/http over its QUIC stack): GET, a 128 KiB response, a 600 KiB
// request body, and 40 concurrent streams on one connection; 0-RTT refused there (zerortt.go),
// and, given a second server with 0-RTT on, only safe requests served in 0-RTT; given a third
// with several workers, a connection migrated to new ports (migrate.go). The certificate is
// self-signed, so it is not verified (as curl -k).
// Usage: quicgo HOST:PORT [0RTT-HOST:PORT [MIGRATION-HOST:PORT]]
package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

var failed, passed int

func check(name string, ok bool, detail string) {
	if ok {
		passed++
		fmt.Printf("PASS %s %s\n", name, detail)
	} else {
		failed++
		fmt.Printf("FAIL %s %s\n", name, detail)
	}
}

// fetch sends one request and reads the whole response; status 0 and the error on failure.
func fetch(client *http.Client, method, url string, body []byte) (int, http.Header, []byte, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, got, err
}

func main() {
	if len(os.Args) < 2 || len(os.Args) > 4 {
		fmt.Fprintln(os.Stderr, "usage: quicgo HOST:PORT [0RTT-HOST:PORT [MIGRATION-HOST:PORT]]")
		os.Exit(2)
	}
	base := "https://" + os.Args[1]
	transport := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer transport.Close()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	status, header, _, err := fetch(client, "GET", base+"/", nil)
	check("GET / over HTTP/3", status == 200, fmt.Sprintf("status %d %v", status, err))
	check("no Alt-Svc over HTTP/3", header != nil && header.Get("Alt-Svc") == "", "")
	status, _, body, err := fetch(client, "GET", base+"/big", nil)
	check("128 KiB response", status == 200 && len(body) == 128*1024,
		fmt.Sprintf("status %d, %d bytes %v", status, len(body), err))
	status, _, _, err = fetch(client, "POST", base+"/say", bytes.Repeat([]byte("h"), 600*1024))
	check("600 KiB request body", status == 200, fmt.Sprintf("status %d %v", status, err))

	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i], _, _, _ = fetch(client, "GET", base+"/", nil)
		}(i)
	}
	wg.Wait()
	all200 := true
	for _, s := range statuses {
		all200 = all200 && s == 200
	}
	check("40 concurrent streams", all200, fmt.Sprintf("statuses %v", statuses))

	checkZeroRTTRefused(os.Args[1])
	if len(os.Args) >= 3 {
		checkZeroRTTSafeOnly(os.Args[2])
	}
	if len(os.Args) == 4 {
		checkMigration(os.Args[3])
	}

	fmt.Printf("quic-go: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

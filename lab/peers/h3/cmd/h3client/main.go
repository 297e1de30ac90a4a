// Command h3client is the lab's HTTP/3 client on quic-go (./scripts/lab h3), for what a load
// generator does not show:
//
//	h3client get URL        one GET over HTTP/3; prints {"status", "proto", "headers", "body",
//	                        "tls"} as JSON, for the parity check of the contract's scenario
//	h3client idle URL N     opens N QUIC connections, one GET on each (so each is fully set up),
//	                        prints "ready N" and holds them open until stdin closes, for the
//	                        memory per idle connection
//	h3client load URL C P S  C QUIC connections with P requests in flight on each for S seconds
//	                        (closed loop); prints oha's JSON layout (summary, status codes,
//	                        errors, latency percentiles in seconds) for the lab's oha parser
//	h3client rate URL C R S  open loop: R requests a second spread over C QUIC connections for
//	                        S seconds, each latency from the request's scheduled start (so a
//	                        slow server's queue is counted, not hidden); oha's JSON layout plus
//	                        the offered and the sent rate
//	h3client relay TARGET [-loss PCT] [-reorder PCT -hold-ms MS] [-delay-ms MS] [-seed N]
//	                        a UDP relay to TARGET that drops, holds back and delays datagrams
//	                        (relay.go); prints "relay ADDR", forwards until stdin closes, then
//	                        prints its counts as JSON
//
// The server's certificate is trusted from the PEM file in H3_CA (the lab's certificate).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "h3client: "+format+"\n", args...)
	os.Exit(1)
}

func tlsConfig() *tls.Config {
	// X25519 only, as every client of the TLS lanes offers (tls_checks.GROUP): Go would otherwise
	// lead with the larger X25519MLKEM768 share, a different handshake from the TCP lanes'.
	conf := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.X25519}}
	if path := os.Getenv("H3_CA"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			fail("H3_CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("H3_CA: no certificate in %s", path)
		}
		conf.RootCAs = pool
	}
	return conf
}

func newTransport() *http3.Transport {
	return &http3.Transport{
		TLSClientConfig: tlsConfig(),
		// Idle connections must outlive the idle-memory step's reading of the server's memory.
		QUICConfig: &quic.Config{MaxIdleTimeout: 60 * time.Second, KeepAlivePeriod: 10 * time.Second},
	}
}

func get(client *http.Client, url string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: h3client get|idle|load|rate|relay ... (see the package comment)")
	}
	url := os.Args[2]
	switch os.Args[1] {
	case "get":
		tr := newTransport()
		defer tr.Close()
		resp, body, err := get(&http.Client{Transport: tr}, url)
		if err != nil {
			fail("GET %s: %v", url, err)
		}
		headers := map[string]string{}
		for k, v := range resp.Header {
			headers[k] = v[0]
		}
		// net/http moves Content-Length out of the header map into the response.
		if resp.ContentLength >= 0 {
			headers["Content-Length"] = strconv.FormatInt(resp.ContentLength, 10)
		}
		negotiated := map[string]string{}
		if st := resp.TLS; st != nil {
			negotiated["protocol"] = tls.VersionName(st.Version)
			negotiated["cipher"] = tls.CipherSuiteName(st.CipherSuite)
			negotiated["key_exchange"] = st.CurveID.String()
			negotiated["alpn"] = st.NegotiatedProtocol
		}
		out, _ := json.Marshal(map[string]any{
			"status": resp.StatusCode, "proto": resp.Proto, "headers": headers, "body": string(body),
			"tls": negotiated,
		})
		fmt.Println(string(out))
	case "idle":
		if len(os.Args) != 4 {
			fail("usage: h3client idle URL N")
		}
		n, err := strconv.Atoi(os.Args[3])
		if err != nil || n < 1 {
			fail("N must be a positive integer, got %q", os.Args[3])
		}
		// One transport per connection: a transport pools one connection per host.
		var transports []*http3.Transport
		for i := 0; i < n; i++ {
			tr := newTransport()
			transports = append(transports, tr)
			if _, _, err := get(&http.Client{Transport: tr}, url); err != nil {
				fail("connection %d: %v", i+1, err)
			}
		}
		fmt.Printf("ready %d\n", n)
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		for _, tr := range transports {
			tr.Close()
		}
	case "load":
		if len(os.Args) != 6 {
			fail("usage: h3client load URL CONNECTIONS STREAMS SECONDS")
		}
		load(url, positive(os.Args[3]), positive(os.Args[4]), positive(os.Args[5]))
	case "rate":
		if len(os.Args) != 6 {
			fail("usage: h3client rate URL CONNECTIONS RATE SECONDS")
		}
		rate(url, positive(os.Args[3]), positive(os.Args[4]), positive(os.Args[5]))
	case "relay":
		relayMain(os.Args[2:])
	default:
		fail("unknown command %q (get, idle, load, rate, relay)", os.Args[1])
	}
}

func positive(text string) int {
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 {
		fail("expected a positive integer, got %q", text)
	}
	return n
}

// worker is one request stream's tally, merged after the run (no locks on the hot path).
type worker struct {
	latencies []time.Duration
	statuses  map[int]int
	errors    map[string]int
	bytes     int64
}

func load(url string, conns, streams, seconds int) {
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	workers := make([]*worker, conns*streams)
	var wg sync.WaitGroup
	start := time.Now()
	transports := make([]*http3.Transport, conns)
	for c := 0; c < conns; c++ {
		// One transport per connection: a transport pools one QUIC connection per host, and
		// its streams share it.
		transports[c] = newTransport()
		client := &http.Client{Transport: transports[c], Timeout: 5 * time.Second}
		for s := 0; s < streams; s++ {
			w := &worker{statuses: map[int]int{}, errors: map[string]int{}}
			workers[c*streams+s] = w
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					t0 := time.Now()
					resp, body, err := get(client, url)
					if err != nil {
						w.errors[err.Error()]++
						continue
					}
					w.latencies = append(w.latencies, time.Since(t0))
					w.statuses[resp.StatusCode]++
					w.bytes += int64(len(body))
				}
			}()
		}
	}
	wg.Wait()
	total := time.Since(start)
	closeAll(transports)
	printResults(workers, total, nil)
}

// closeAll closes every connection (CONNECTION_CLOSE), so the server does not hold them until
// its idle timeout into the next run.
func closeAll(transports []*http3.Transport) {
	for _, tr := range transports {
		tr.Close()
	}
}

// printResults merges the tallies and prints oha's JSON layout (summary, status codes, errors,
// latency percentiles in seconds), with `extra` keys beside them.
func printResults(workers []*worker, total time.Duration, extra map[string]any) {
	var all []time.Duration
	statuses, errors := map[string]int{}, map[string]int{}
	var bytes int64
	for _, w := range workers {
		all = append(all, w.latencies...)
		for k, v := range w.statuses {
			statuses[strconv.Itoa(k)] += v
		}
		for k, v := range w.errors {
			errors[k] += v
		}
		bytes += w.bytes
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(q float64) any {
		if len(all) == 0 {
			return nil
		}
		return all[min(len(all)-1, int(q*float64(len(all))))].Seconds()
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	summary := map[string]any{"total": total.Seconds(), "totalData": bytes}
	if len(all) > 0 {
		summary["fastest"] = all[0].Seconds()
		summary["slowest"] = all[len(all)-1].Seconds()
		summary["average"] = (sum / time.Duration(len(all))).Seconds()
	}
	out := map[string]any{
		"summary":                summary,
		"statusCodeDistribution": statuses,
		"errorDistribution":      errors,
		"latencyPercentiles": map[string]any{
			"p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "p99.9": pct(0.999),
		},
	}
	for k, v := range extra {
		out[k] = v
	}
	text, _ := json.Marshal(out)
	fmt.Println(string(text))
}

package main

// Open-loop load at a fixed offered rate: every server gets the same requests at the same times,
// so CPU per request is compared at equal load, and a latency is counted from the request's
// scheduled start (a server that falls behind shows its queue in the latency).

import (
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// maxInFlight bounds the requests outstanding on one connection (quic-go's default stream
// limit); a request due while that many are open is counted as an error, not queued.
const maxInFlight = 100

func rate(url string, conns, perSecond, seconds int) {
	interval := time.Duration(float64(time.Second) * float64(conns) / float64(perSecond))
	// Every connection is set up (handshake and one request, not counted) before the clock
	// starts: the schedule measures requests, not handshakes.
	clients := make([]*http.Client, conns)
	transports := make([]*http3.Transport, conns)
	var wg sync.WaitGroup
	for c := range clients {
		transports[c] = newTransport()
		clients[c] = &http.Client{Transport: transports[c], Timeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := get(clients[c], url); err != nil {
				fail("connection %d: %v", c+1, err)
			}
		}()
	}
	wg.Wait()
	start := time.Now().Add(50 * time.Millisecond) // the goroutines are all scheduled by then
	deadline := start.Add(time.Duration(seconds) * time.Second)
	workers := make([]*worker, conns)
	var sent, skipped int64
	var tally sync.Mutex
	for c, client := range clients {
		w := &worker{statuses: map[int]int{}, errors: map[string]int{}}
		workers[c] = w
		// Connections take turns: connection c's requests are offset by c/conns of an interval.
		first := start.Add(interval * time.Duration(c) / time.Duration(conns))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			var requests sync.WaitGroup
			inFlight := 0
			for at := first; at.Before(deadline); at = at.Add(interval) {
				time.Sleep(time.Until(at))
				mu.Lock()
				full := inFlight >= maxInFlight
				if full {
					w.errors["client: a connection already had 100 requests in flight"]++
				} else {
					inFlight++
				}
				mu.Unlock()
				tally.Lock()
				if full {
					skipped++
				} else {
					sent++
				}
				tally.Unlock()
				if full {
					continue
				}
				requests.Add(1)
				go func(at time.Time) {
					defer requests.Done()
					resp, body, err := get(client, url)
					mu.Lock()
					defer mu.Unlock()
					inFlight--
					if err != nil {
						w.errors[err.Error()]++
						return
					}
					w.latencies = append(w.latencies, time.Since(at))
					w.statuses[resp.StatusCode]++
					w.bytes += int64(len(body))
				}(at)
			}
			requests.Wait()
		}()
	}
	wg.Wait()
	closeAll(transports)
	total := time.Duration(seconds) * time.Second
	printResults(workers, total, map[string]any{
		"offered_rps": perSecond,
		"sent_rps":    float64(sent) / total.Seconds(),
		"skipped":     skipped,
	})
}

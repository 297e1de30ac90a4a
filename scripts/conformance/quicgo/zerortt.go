// 0-RTT checks: a client that resumes its session and sends its request in early data (before
// the handshake completes) when the server's ticket allows it. quic-go reports whether the
// early data was accepted (ConnectionState().Used0RTT) once the handshake is done.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// earlyResult is what one resumed connection saw.
type earlyResult struct {
	status    int
	resumed   bool // the TLS session was resumed
	used0RTT  bool // the server accepted the early data
	sentEarly bool // the request went out before the handshake completed
}

func (r earlyResult) String() string {
	return fmt.Sprintf("status %d, resumed %v, 0-RTT %v, sent before the handshake %v",
		r.status, r.resumed, r.used0RTT, r.sentEarly)
}

// earlyRequest connects to addr with the sessions in cache (in 0-RTT when the ticket allows
// it), sends method path at once (without a body: quic-go's SendRequestHeader takes only
// requests without one), and reads the response.
func earlyRequest(addr string, cache tls.ClientSessionCache, method, path string) (earlyResult, error) {
	// Under the server's 10 s header timeout: a connection setup left waiting for it fails.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tlsConf := &tls.Config{
		InsecureSkipVerify: true,
		ServerName:         "localhost",
		NextProtos:         []string{http3.NextProtoH3},
		ClientSessionCache: cache,
	}
	conn, err := quic.DialAddrEarly(ctx, addr, tlsConf, &quic.Config{})
	if err != nil {
		return earlyResult{}, err
	}
	defer conn.CloseWithError(0, "")
	var r earlyResult
	select {
	case <-conn.HandshakeComplete():
	default:
		r.sentEarly = true
	}
	cc := (&http3.Transport{}).NewClientConn(conn)
	str, err := cc.OpenRequestStream(ctx)
	if err != nil {
		return r, err
	}
	req, err := http.NewRequest(method, "https://"+addr+path, nil)
	if err != nil {
		return r, err
	}
	if err := str.SendRequestHeader(req); err != nil {
		return r, err
	}
	str.Close()
	res, err := str.ReadResponse()
	if err != nil {
		return r, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	select {
	case <-conn.HandshakeComplete():
	case <-ctx.Done():
		return r, ctx.Err()
	}
	// The server's next session ticket follows the handshake: one more round trip (a 1-RTT
	// request) receives it before the connection closes, so the next check can resume.
	next, err := http.NewRequest("GET", "https://"+addr+"/", nil)
	if err != nil {
		return r, err
	}
	if later, err := cc.RoundTrip(next.WithContext(ctx)); err == nil {
		io.Copy(io.Discard, later.Body)
		later.Body.Close()
	}
	state := conn.ConnectionState()
	r.status, r.resumed, r.used0RTT = res.StatusCode, state.TLS.DidResume, state.Used0RTT
	return r, nil
}

// checkZeroRTTRefused: against a server with 0-RTT off (the default) the session resumes but
// no early data is accepted, and the request is served once the handshake is done.
func checkZeroRTTRefused(addr string) {
	cache := tls.NewLRUClientSessionCache(4)
	first, err := earlyRequest(addr, cache, "GET", "/")
	check("first visit (full handshake)", err == nil && first.status == 200 && !first.resumed,
		fmt.Sprintf("%v %v", first, err))
	second, err := earlyRequest(addr, cache, "GET", "/")
	check("0-RTT refused by default", err == nil && second.status == 200 && second.resumed && !second.used0RTT,
		fmt.Sprintf("%v %v", second, err))
}

// checkZeroRTTSafeOnly: against a server with 0-RTT on, an early GET is served in 0-RTT and an
// early POST is answered 425 Too Early.
func checkZeroRTTSafeOnly(addr string) {
	cache := tls.NewLRUClientSessionCache(4)
	first, err := earlyRequest(addr, cache, "GET", "/")
	check("0-RTT server, first visit", err == nil && first.status == 200,
		fmt.Sprintf("%v %v", first, err))
	get, err := earlyRequest(addr, cache, "GET", "/")
	check("GET in 0-RTT served", err == nil && get.status == 200 && get.used0RTT && get.sentEarly,
		fmt.Sprintf("%v %v", get, err))
	// The server decides as it takes the request up: one taken up after the handshake completed
	// is no replay and is served (RFC 8470 §3), which a slow server may do with a request the
	// client sent in 0-RTT. So up to 8 tries, until one is refused; any other outcome fails.
	var post earlyResult
	tries := 0
	for tries < 8 {
		tries++
		post, err = earlyRequest(addr, cache, "POST", "/say")
		if err != nil || post.status != 200 || !post.used0RTT {
			break
		}
	}
	check("POST in 0-RTT answered 425", err == nil && post.status == 425 && post.used0RTT && post.sentEarly,
		fmt.Sprintf("%v after %d tries %v", post, tries, err))
}

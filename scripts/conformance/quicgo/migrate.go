// Connection migration: quic-go's client moves its connection to a new local UDP socket (a new
// port, so a new 4-tuple) with a connection ID the server issued and not yet used, probes the
// new path (PATH_CHALLENGE), switches to it and sends the next request on the same connection.
// Against a server with several workers sharing the port, the new 4-tuple hashes to any worker:
// only steering by connection ID brings the datagrams to the worker that holds the connection.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// get sends GET path on cc and reads the whole response.
func get(cc *http3.ClientConn, addr, path string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	res, err := cc.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

// newTransport is a quic-go transport on a new local UDP socket (a new source port).
func newTransport() (*quic.Transport, error) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &quic.Transport{Conn: udp}, nil
}

// migrations opens one connection to addr and moves it to a new local port `moves` times,
// with a request after each move; it returns how many moves were followed by a served request
// on the same connection, and the first failure.
func migrations(addr string, moves int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	remote, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return 0, err
	}
	first, err := newTransport()
	if err != nil {
		return 0, err
	}
	defer first.Close()
	tlsConf := &tls.Config{
		InsecureSkipVerify: true,
		ServerName:         "localhost",
		NextProtos:         []string{http3.NextProtoH3},
	}
	conn, err := first.Dial(ctx, remote, tlsConf, &quic.Config{})
	if err != nil {
		return 0, err
	}
	defer conn.CloseWithError(0, "")
	cc := (&http3.Transport{}).NewClientConn(conn)
	if status, err := get(cc, addr, "/"); status != 200 {
		return 0, fmt.Errorf("before moving: status %d %v", status, err)
	}
	for i := 0; i < moves; i++ {
		tr, err := newTransport()
		if err != nil {
			return i, err
		}
		defer tr.Close()
		path, err := conn.AddPath(tr)
		if err != nil {
			return i, fmt.Errorf("move %d: AddPath: %w", i+1, err)
		}
		probe, cancelProbe := context.WithTimeout(ctx, 5*time.Second)
		err = path.Probe(probe)
		cancelProbe()
		if err != nil {
			return i, fmt.Errorf("move %d: the new path was not validated: %w", i+1, err)
		}
		if err := path.Switch(); err != nil {
			return i, fmt.Errorf("move %d: Switch: %w", i+1, err)
		}
		if status, err := get(cc, addr, "/"); status != 200 {
			return i, fmt.Errorf("move %d: status %d %v (connection: %v)", i+1, status, err,
				context.Cause(conn.Context()))
		}
	}
	return moves, nil
}

// checkMigration runs the migration check against addr, a server with several workers.
func checkMigration(addr string) {
	const moves = 8
	done, err := migrations(addr, moves)
	check("connection migration to 8 new ports, same connection served after each",
		done == moves && err == nil, fmt.Sprintf("%d of %d moves served; %v", done, moves, err))
}

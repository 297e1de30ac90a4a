package main

// The impairment relay: a UDP forwarder between the load client and a server that drops,
// delays and reorders datagrams in user space. The lab's kernel has no sch_netem, so `tc netem`
// (and a network namespace with it) is not an option; the relay runs on the client's CPUs, so
// its cost is never counted as the server's.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const socketBuffer = 4 << 20

// impairment is what the relay does to every datagram, in both directions.
type impairment struct {
	loss        float64       // share of datagrams dropped, 0..1
	reorder     float64       // share of the datagrams not dropped that are held back, 0..1
	hold        time.Duration // how long a held-back datagram waits beyond `delay`
	delay       time.Duration // fixed delay of every datagram
	seed        uint64
	maxDatagram int
}

// relayStats counts what the relay did; printed as JSON when it stops.
type relayStats struct {
	Flows     atomic.Int64 `json:"-"`
	Forwarded atomic.Int64 `json:"-"`
	Dropped   atomic.Int64 `json:"-"`
	Held      atomic.Int64 `json:"-"`
}

func (s *relayStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int64{
		"flows": s.Flows.Load(), "forwarded": s.Forwarded.Load(),
		"dropped": s.Dropped.Load(), "held": s.Held.Load(),
	})
}

// direction is one way of one flow: its own seeded random source (so the n-th datagram of a
// flow's direction meets the same fate in every run with the seed, whatever the goroutines'
// interleaving) and a FIFO of delayed datagrams.
type direction struct {
	imp   *impairment
	stats *relayStats
	rng   *rand.Rand
	send  func([]byte)
	queue chan timed
}

type timed struct {
	at   time.Time
	data []byte
}

func newDirection(imp *impairment, stats *relayStats, flow uint64, way uint64, send func([]byte)) *direction {
	d := &direction{
		imp: imp, stats: stats, send: send,
		rng: rand.New(rand.NewPCG(imp.seed, flow<<1|way)),
	}
	if imp.delay > 0 {
		// A fixed delay keeps the order, so one FIFO and one sender per direction suffice.
		d.queue = make(chan timed, 65536)
		go func() {
			for t := range d.queue {
				time.Sleep(time.Until(t.at))
				d.deliver(t.data)
			}
		}()
	}
	return d
}

func (d *direction) deliver(data []byte) {
	d.send(data)
	d.stats.Forwarded.Add(1)
}

// pass takes ownership of `data` and drops, holds, delays or forwards it.
func (d *direction) pass(data []byte) {
	if d.imp.loss > 0 && d.rng.Float64() < d.imp.loss {
		d.stats.Dropped.Add(1)
		return
	}
	if d.imp.reorder > 0 && d.rng.Float64() < d.imp.reorder {
		d.stats.Held.Add(1)
		time.AfterFunc(d.imp.delay+d.imp.hold, func() { d.deliver(data) })
		return
	}
	if d.queue != nil {
		select {
		case d.queue <- timed{time.Now().Add(d.imp.delay), data}:
		default: // a full queue is a full router buffer: tail drop
			d.stats.Dropped.Add(1)
		}
		return
	}
	d.deliver(data)
}

// relay listens on `listen` and forwards each client address's datagrams to `target` from a
// socket of its own (the server sees one address per client connection, as without the relay),
// the answers back to that client; until stdin closes.
func relay(listen, target string, imp *impairment, ready io.Writer) *relayStats {
	laddr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		fail("relay: listen address: %v", err)
	}
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		fail("relay: target address: %v", err)
	}
	front, err := net.ListenUDP("udp", laddr)
	if err != nil {
		fail("relay: %v", err)
	}
	// A burst from 50 connections must not overflow the kernel's default buffer (about 270
	// small datagrams): a drop there would be loss the relay did not choose. The kernel caps
	// the size at net.core.rmem_max; a refusal only leaves the default.
	_ = front.SetReadBuffer(socketBuffer)
	_ = front.SetWriteBuffer(socketBuffer)
	stats := &relayStats{}
	var mu sync.Mutex
	flows := map[string]*direction{} // client address -> the direction towards the server
	fmt.Fprintf(ready, "relay %s\n", front.LocalAddr())
	go func() {
		buf := make([]byte, imp.maxDatagram)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return // closed when stdin closes
			}
			key := from.String()
			mu.Lock()
			up, ok := flows[key]
			if !ok {
				back, err := net.DialUDP("udp", nil, taddr)
				if err != nil {
					mu.Unlock()
					fmt.Fprintf(os.Stderr, "h3client: relay: %v\n", err)
					continue
				}
				_ = back.SetReadBuffer(socketBuffer)
				flow := uint64(stats.Flows.Add(1))
				client := from
				up = newDirection(imp, stats, flow, 0, func(b []byte) { _, _ = back.Write(b) })
				down := newDirection(imp, stats, flow, 1, func(b []byte) {
					_, _ = front.WriteToUDP(b, client)
				})
				flows[key] = up
				go func() {
					rbuf := make([]byte, imp.maxDatagram)
					for {
						n, err := back.Read(rbuf)
						if err != nil {
							return
						}
						down.pass(append([]byte(nil), rbuf[:n]...))
					}
				}()
			}
			mu.Unlock()
			up.pass(append([]byte(nil), buf[:n]...))
		}
	}()
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	front.Close()
	return stats
}

// relayMain is `h3client relay TARGET [flags]`.
func relayMain(args []string) {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address the client sends to")
	loss := fs.Float64("loss", 0, "percent of datagrams dropped (each direction)")
	reorder := fs.Float64("reorder", 0, "percent of datagrams held back by -hold-ms")
	hold := fs.Float64("hold-ms", 0, "milliseconds a reordered datagram is held back")
	delay := fs.Float64("delay-ms", 0, "fixed delay of every datagram, milliseconds")
	seed := fs.Uint64("seed", 1, "seed of the drop and reorder draws")
	if len(args) < 1 {
		fail("usage: h3client relay TARGET [-listen ADDR] [-loss PCT] [-reorder PCT -hold-ms MS] [-delay-ms MS] [-seed N]")
	}
	if err := fs.Parse(args[1:]); err != nil {
		fail("relay: %v", err)
	}
	for name, v := range map[string]float64{"loss": *loss, "reorder": *reorder} {
		if v < 0 || v > 100 {
			fail("relay: -%s must be a percentage (0..100), got %v", name, v)
		}
	}
	if *hold < 0 || *delay < 0 {
		fail("relay: -hold-ms and -delay-ms must not be negative")
	}
	if *reorder > 0 && *hold == 0 {
		fail("relay: -reorder needs -hold-ms (how long a datagram is held back)")
	}
	imp := &impairment{
		loss: *loss / 100, reorder: *reorder / 100,
		hold:  time.Duration(*hold * float64(time.Millisecond)),
		delay: time.Duration(*delay * float64(time.Millisecond)),
		seed:  *seed, maxDatagram: 65535,
	}
	stats := relay(*listen, args[0], imp, os.Stdout)
	out, _ := json.Marshal(stats)
	fmt.Println(string(out))
}

package testbed

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy in the test process: every connection accepted on
// its address is forwarded to its upstream address. It stands between the
// hosts of a multi-host bed and a source node, whose REMOTE listener
// advertises the proxy's address, so that the link from the destination to
// the source can be slowed down (SetLatency), broken (Cut), made silent
// (Blackhole) and measured (Traffic) without touching the brokers.
type Proxy struct {
	ln       net.Listener
	upstream string
	latency  atomic.Int64 // one-way delay added to each direction, in ns
	up, down atomic.Int64 // bytes delivered to the upstream and to clients

	mu    sync.Mutex
	mode  proxyMode
	open  chan struct{}     // closed while the mode is not blackhole
	conns map[net.Conn]bool // true for the client side
	done  bool
	wg    sync.WaitGroup
}

type proxyMode int

const (
	proxyForward   proxyMode = iota
	proxyCut                 // connections are closed at once
	proxyBlackhole           // connections stay open, nothing moves
)

// Traffic counts the bytes a proxy delivered, per direction.
type Traffic struct {
	ToUpstream int64 // from clients to the upstream (requests)
	ToClients  int64 // from the upstream to clients (responses)
}

// Sub returns t minus an earlier reading, the traffic in between.
func (t Traffic) Sub(earlier Traffic) Traffic {
	return Traffic{ToUpstream: t.ToUpstream - earlier.ToUpstream, ToClients: t.ToClients - earlier.ToClients}
}

// Total returns the bytes of both directions.
func (t Traffic) Total() int64 { return t.ToUpstream + t.ToClients }

// chunkSize is what one read forwards; queued holds the chunks of one
// direction in flight, so that latency does not cut throughput below
// queued*chunkSize per latency (16 MiB per 50 ms: 2.5 Gbit/s).
const (
	chunkSize = 32 << 10
	queued    = 512
)

// NewProxy listens on listen (host:port, port 0 for any) and forwards to
// upstream.
func NewProxy(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("testbed: proxy to %s: %w", upstream, err)
	}
	p := &Proxy{ln: ln, upstream: upstream, open: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// NewProxy starts a proxy to upstream on the network's gateway address, so
// that every host reaches it; Close closes it with the network.
func (n *Network) NewProxy(upstream string) (*Proxy, error) {
	p, err := NewProxy(net.JoinHostPort(n.gateway, "0"), upstream)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		p.Close()
		return nil, errors.New("testbed: network closed")
	}
	n.proxies = append(n.proxies, p)
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// SetLatency delays every byte by d in each direction (a round trip gains
// 2d), for the data read from then on. Throughput is kept: data in flight
// is queued, not serialised behind the delay.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Cut closes every connection, and each new one as soon as it is accepted,
// until Restore: to clients the upstream looks down (connections end).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setModeLocked(proxyCut)
	for c := range p.conns {
		c.Close()
	}
}

// Blackhole stops forwarding until Restore, holding every connection open
// and accepting new ones that get no answer: to clients the upstream looks
// unreachable, as behind a network partition (requests time out). Nothing
// is lost: what was sent meanwhile flows on after Restore, as TCP would
// retransmit it, unless a side gave up on its connection.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setModeLocked(proxyBlackhole)
}

// Restore ends a Cut or a Blackhole.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setModeLocked(proxyForward)
}

func (p *Proxy) setModeLocked(m proxyMode) {
	if (m == proxyBlackhole) != (p.mode == proxyBlackhole) {
		if m == proxyBlackhole {
			p.open = make(chan struct{})
		} else {
			close(p.open)
		}
	}
	p.mode = m
}

// Traffic returns the bytes delivered so far.
func (p *Proxy) Traffic() Traffic {
	return Traffic{ToUpstream: p.up.Load(), ToClients: p.down.Load()}
}

// Connections returns the number of client connections open.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, client := range p.conns {
		if client {
			n++
		}
	}
	return n
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	if p.mode == proxyBlackhole {
		close(p.open) // wakes the waiting writers, which find their conns closed
		p.mode = proxyForward
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers a connection, the client side when client is true; it
// returns false (and closes c) when the proxy is cut or closed.
func (p *Proxy) track(c net.Conn, client bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.mode == proxyCut {
		c.Close()
		return false
	}
	p.conns[c] = client
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		c.Close()
	}
}

// serve forwards one client connection until either side ends it.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client, true) {
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(up, false) {
		p.untrack(client)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go p.pipe(&wg, client, up, &p.up)
	go p.pipe(&wg, up, client, &p.down)
	wg.Wait()
	p.untrack(client, up)
}

// read queues what src sends, each chunk due after the latency in force,
// and closes q when src ends.
func (p *Proxy) read(src net.Conn, q chan<- chunk) {
	defer p.wg.Done()
	defer close(q)
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{data: buf[:n], due: time.Now().Add(time.Duration(p.latency.Load()))}
		}
		if err != nil {
			return
		}
	}
}

// chunk is data read from one side, due for writing to the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst through a queue that delays each chunk by the
// latency of when it was read. When src ends, dst's write side is closed;
// when dst fails, both are closed.
func (p *Proxy) pipe(wg *sync.WaitGroup, src, dst net.Conn, counter *atomic.Int64) {
	defer wg.Done()
	q := make(chan chunk, queued)
	p.wg.Add(1)
	go p.read(src, q)
	for c := range q {
		p.mu.Lock()
		open := p.open
		p.mu.Unlock()
		<-open
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		// Counted before the write: the peer can read the bytes (and
		// ask for Traffic) before Write returns.
		counter.Add(int64(len(c.data)))
		if n, err := dst.Write(c.data); err != nil {
			counter.Add(int64(n - len(c.data)))
			src.Close()
			dst.Close()
			for range q { // let the reader end
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// Package kafkaproxy is a TCP proxy in front of one Kafka broker, for fault
// tests: the unit tests (in front of kfake) and the end-to-end test bed (in
// front of a real broker) inject the same faults with it.
//
// A client reaches the broker only through the proxy once it bootstraps from
// Proxy.Addr: the proxy rewrites the broker's own address in Metadata
// responses to its listener, so the client's later connections to that
// broker come back through it. A client of a cluster of several brokers
// would learn the broker's own address from the others' Metadata
// responses: StartCluster puts a proxy in front of each, and each rewrites
// all their addresses. Requests and responses are forwarded frame by
// frame (the Kafka size prefix), and the proxy can:
//   - delay every frame in both directions (SetLatency), without limiting
//     throughput: frames queue, each leaves when its delay is over;
//   - cut every open connection (Cut);
//   - hold one request (HoldNext): it is taken off the client's connection,
//     which is cut at once, so the client sees a dropped connection and no
//     response, while the connection to the broker stays open; the broker
//     gets the held request just before the next request the same rule
//     matches, on any connection, and its response is dropped. That is a
//     request the broker had queued when the client's connection died and
//     that it handles after the client came back: the case idempotent
//     producers exist for.
//
// Only the request and response headers are decoded, and Metadata
// responses; TLS is not supported (the proxy must read the frames).
package kafkaproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds a frame the proxy accepts (Kafka's default
// socket.request.max.bytes is 100 MiB).
const maxFrame = 128 << 20

// releaseWait bounds how long a release waits for the broker's answer to
// the held request before the matching request goes on anyway.
const releaseWait = 30 * time.Second

// Request is a client request as the proxy saw it.
type Request struct {
	Key      int16
	Version  int16
	ClientID string
	// Body is the decoded request; nil if the proxy could not decode it.
	Body kmsg.Request
	// Topics names the topics of a Produce request (from topic IDs too,
	// as far as Metadata responses through the proxy told them).
	Topics []string
}

// ProduceTo matches Produce requests that write to topic.
func ProduceTo(topic string) func(Request) bool {
	return func(r Request) bool {
		return r.Key == int16(kmsg.Produce) && slices.Contains(r.Topics, topic)
	}
}

// Proxy forwards the connections accepted on its listener to one broker.
type Proxy struct {
	ln       net.Listener
	upstream string
	rewrites map[hostPort]hostPort // broker address -> its proxy's; read-only after start
	host     string
	port     int32
	wg       sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	links    map[*link]struct{}
	latency  time.Duration
	topicIDs map[[16]byte]string // from Metadata responses
	rule     func(Request) bool  // armed by HoldNext, until a request matched
	held     *held
	released int
	holds    int
}

// held is the request taken off a cut client connection.
type held struct {
	l     *link
	frame []byte
	corr  int32
	match func(Request) bool
	done  chan struct{} // closed when the broker's response arrived or the link died
}

// Start listens on listen ("127.0.0.1:0" picks a port) and forwards to the
// broker at upstream (its advertised host:port). Metadata responses point
// clients at the proxy for that broker only: a client that also talks to
// other brokers of the cluster learns the broker's own address from them,
// so for a cluster use StartCluster.
func Start(listen, upstream string) (*Proxy, error) {
	ps, err := StartCluster(listen, []string{upstream})
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// StartCluster starts one proxy per broker of a cluster (upstreams: their
// advertised host:port), each listening on a port of listen's host. Every
// proxy points Metadata responses at the proxies for all of them, so a
// client bootstrapped on any of them reaches the whole cluster through the
// proxies.
func StartCluster(listen string, upstreams []string) ([]*Proxy, error) {
	rewrites := make(map[hostPort]hostPort)
	var ps []*Proxy
	fail := func(err error) ([]*Proxy, error) {
		for _, p := range ps {
			_ = p.Close()
		}
		return nil, err
	}
	for _, upstream := range upstreams {
		uh, up, err := splitHostPort(upstream)
		if err != nil {
			return fail(fmt.Errorf("kafkaproxy: upstream %q: %w", upstream, err))
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fail(fmt.Errorf("kafkaproxy: %w", err))
		}
		h, port, err := splitHostPort(ln.Addr().String())
		if err != nil {
			_ = ln.Close()
			return fail(fmt.Errorf("kafkaproxy: %w", err))
		}
		rewrites[hostPort{uh, up}] = hostPort{h, port}
		ps = append(ps, &Proxy{ln: ln, upstream: upstream, host: h, port: port, rewrites: rewrites,
			links: make(map[*link]struct{}), topicIDs: make(map[[16]byte]string)})
	}
	for _, p := range ps {
		p.wg.Add(1)
		go p.accept()
	}
	return ps, nil
}

type hostPort struct {
	host string
	port int32
}

func splitHostPort(addr string) (string, int32, error) {
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return "", 0, err
	}
	return h, int32(port), nil
}

// Addr is the proxy's host:port: the bootstrap address clients use.
func (p *Proxy) Addr() string { return net.JoinHostPort(p.host, strconv.Itoa(int(p.port))) }

// Upstream is the broker's address.
func (p *Proxy) Upstream() string { return p.upstream }

// SetLatency delays every frame by d in each direction from now on (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Cut closes every open connection; new connections are forwarded as usual.
// A held request is dropped.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// HoldNext arms the proxy to hold the next request that match accepts (see
// the package comment). match runs on the connections' goroutines.
func (p *Proxy) HoldNext(match func(Request) bool) {
	p.mu.Lock()
	p.rule = match
	p.mu.Unlock()
}

// Holds reports how many requests were held and how many of them the broker
// got afterwards.
func (p *Proxy) Holds() (held, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds, p.released
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{p: p, client: c, up: u, versions: make(map[int32][2]int16),
			toUp: make(chan frameAt, 1024), toClient: make(chan frameAt, 1024), dead: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = u.Close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(4)
		go l.fromClient()
		go l.fromUpstream()
		go l.write(l.up, l.toUp)
		go l.write(l.client, l.toClient)
	}
}

func (p *Proxy) remove(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

// nameTopics fills req.Topics for a Produce request.
func (p *Proxy) nameTopics(req *Request) {
	pr, ok := req.Body.(*kmsg.ProduceRequest)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range pr.Topics {
		if t.Topic == "" {
			t.Topic = p.topicIDs[t.TopicID]
		}
		req.Topics = append(req.Topics, t.Topic)
	}
}

// take holds frame if the armed rule matches req, and reports whether it did.
func (p *Proxy) take(l *link, req Request, corr int32, frame []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rule == nil || p.held != nil || !p.rule(req) {
		return false
	}
	h := &held{l: l, frame: frame, corr: corr, match: p.rule, done: make(chan struct{})}
	p.held, p.rule = h, nil
	p.holds++
	l.mu.Lock()
	l.holding, l.cut = h, true
	l.mu.Unlock()
	return true
}

// release sends the held request to the broker before req if its rule
// matches req, and waits for the broker's answer to it.
func (p *Proxy) release(req Request) {
	p.mu.Lock()
	h := p.held
	if h == nil || !h.match(req) {
		p.mu.Unlock()
		return
	}
	p.held = nil
	p.mu.Unlock()
	if !h.l.send(h.l.toUp, h.frame, 0) {
		return
	}
	select {
	case <-h.done:
		p.mu.Lock()
		p.released++
		p.mu.Unlock()
	case <-h.l.dead:
	case <-time.After(releaseWait):
	}
	h.l.close()
}

// link is one client connection and its connection to the broker.
type link struct {
	p        *Proxy
	client   net.Conn
	up       net.Conn
	toUp     chan frameAt
	toClient chan frameAt

	mu       sync.Mutex
	versions map[int32][2]int16 // correlation ID -> request key and version
	holding  *held              // the request this link took off its client
	cut      bool               // the client side is closed: the link lives on for holding
	once     sync.Once
	dead     chan struct{}
}

type frameAt struct {
	b   []byte
	due time.Time
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.dead)
		_ = l.client.Close()
		_ = l.up.Close()
		l.p.remove(l)
	})
}

// send queues frame b for w's connection after delay d; false if the link died.
func (l *link) send(ch chan frameAt, b []byte, d time.Duration) bool {
	select {
	case ch <- frameAt{b: b, due: time.Now().Add(d)}:
		return true
	case <-l.dead:
		return false
	}
}

// write sends the queued frames of one direction, each when it is due.
func (l *link) write(c net.Conn, ch chan frameAt) {
	defer l.p.wg.Done()
	for {
		select {
		case f := <-ch:
			if d := time.Until(f.due); d > 0 {
				select {
				case <-time.After(d):
				case <-l.dead:
					return
				}
			}
			if _, err := c.Write(f.b); err != nil {
				if c == l.up {
					l.close()
					return
				}
				// The client side was cut: drop what it would have got.
			}
		case <-l.dead:
			return
		}
	}
}

func (l *link) fromClient() {
	defer l.p.wg.Done()
	for {
		frame, err := readFrame(l.client)
		if err != nil {
			l.clientGone()
			return
		}
		req, corr, ok := parseRequest(frame)
		if !ok {
			l.close()
			return
		}
		l.mu.Lock()
		l.versions[corr] = [2]int16{req.Key, req.Version}
		l.mu.Unlock()
		l.p.nameTopics(&req)
		if l.p.take(l, req, corr, frame) {
			_ = l.client.Close()
			return
		}
		l.p.release(req)
		if !l.send(l.toUp, frame, l.p.delay()) {
			return
		}
	}
}

// clientGone closes the link when its client left, unless it holds a
// request, which then still goes to the broker.
func (l *link) clientGone() {
	l.mu.Lock()
	cut := l.cut
	l.mu.Unlock()
	if !cut {
		l.close()
	}
}

func (l *link) fromUpstream() {
	defer l.p.wg.Done()
	defer l.close()
	for {
		frame, err := readFrame(l.up)
		if err != nil {
			return
		}
		if len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		l.mu.Lock()
		kv, known := l.versions[corr]
		delete(l.versions, corr)
		h, cut := l.holding, l.cut
		l.mu.Unlock()
		if h != nil && h.corr == corr {
			close(h.done) // the broker handled the held request
			continue
		}
		if cut {
			continue // the client is gone: drop what it would have got
		}
		if known && kv[0] == int16(kmsg.Metadata) {
			if out, err := l.p.rewriteMetadata(frame, kv[1]); err == nil {
				frame = out
			}
		}
		if !l.send(l.toClient, frame, l.p.delay()) {
			return
		}
	}
}

// readFrame reads one size-prefixed frame, prefix included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("kafkaproxy: frame of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, size[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, err
	}
	return b, nil
}

var errShort = errors.New("kafkaproxy: short frame")

// parseRequest decodes a request frame's header and, where kmsg knows the
// key and version, its body.
func parseRequest(frame []byte) (Request, int32, bool) {
	b := frame[4:]
	if len(b) < 10 {
		return Request{}, 0, false
	}
	r := Request{Key: int16(binary.BigEndian.Uint16(b)), Version: int16(binary.BigEndian.Uint16(b[2:]))}
	corr := int32(binary.BigEndian.Uint32(b[4:]))
	idLen := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if idLen > 0 {
		if len(b) < int(idLen) {
			return Request{}, 0, false
		}
		r.ClientID, b = string(b[:idLen]), b[idLen:]
	}
	body := kmsg.RequestForKey(r.Key)
	if body == nil {
		return r, corr, true
	}
	body.SetVersion(r.Version)
	if body.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return r, corr, true
		}
	}
	if err := body.ReadFrom(b); err == nil {
		r.Body = body
	}
	return r, corr, true
}

// rewriteMetadata points the proxied brokers' entries of a Metadata response
// at their proxies.
func (p *Proxy) rewriteMetadata(frame []byte, version int16) ([]byte, error) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	hdr := 8 // size, correlation ID
	if resp.IsFlexible() {
		rest, err := skipTags(frame[hdr:])
		if err != nil {
			return nil, err
		}
		hdr = len(frame) - len(rest)
	}
	if err := resp.ReadFrom(frame[hdr:]); err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, t := range resp.Topics {
		if t.Topic != nil {
			p.topicIDs[t.TopicID] = *t.Topic
		}
	}
	p.mu.Unlock()
	for i := range resp.Brokers {
		b := &resp.Brokers[i]
		if to, ok := p.rewrites[hostPort{b.Host, b.Port}]; ok {
			b.Host, b.Port = to.host, to.port
		}
	}
	out := append([]byte(nil), frame[:hdr]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// skipTags skips a tagged-field section (flexible header versions).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errShort
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b) // tag
		if k <= 0 {
			return nil, errShort
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errShort
		}
		b = b[k+int(size):]
	}
	return b, nil
}

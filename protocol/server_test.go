package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// testServer is a Server on a loopback port with an observed log.
type testServer struct {
	*Server
	addr string
	logs *observer.ObservedLogs
}

func startServer(t *testing.T, h Handler, opts ...ServerOpt) *testServer {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	s := NewServer(h, append([]ServerOpt{Logger(zap.New(core))}, opts...)...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	serve := func() { served <- s.Serve(l) }
	go serve()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if n := logs.FilterMessageSnippet("panic").Len(); n > 0 && !strings.Contains(t.Name(), "Panic") {
			t.Errorf("server logged a panic: %v", logs.FilterMessageSnippet("panic").All()[0].ContextMap())
		}
	})
	return &testServer{Server: s, addr: l.Addr().String(), logs: logs}
}

func dial(t *testing.T, addr string, opts ...ClientOpt) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func do(t *testing.T, c *Client, req Request) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatalf("Do(%s): %v", KeyName(req.Key()), err)
	}
	return resp
}

// rawFrame returns a size-prefixed request frame.
func rawFrame(key, version int16, correlationID int32, body []byte) []byte {
	h := RequestHeader{RequestApiKey: key, RequestApiVersion: version, CorrelationId: correlationID, ClientId: strp("raw")}
	b := h.AppendTo(nil)
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// readRawResponse reads one response frame from conn.
func readRawResponse(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, b); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return b
}

func registryVersions() []ApiVersionsKey {
	var keys []ApiVersionsKey
	for _, a := range APIs() {
		keys = append(keys, ApiVersionsKey{ApiKey: a.Key, MinVersion: a.MinVersion, MaxVersion: a.MaxVersion})
	}
	return keys
}

func TestServerApiVersions(t *testing.T) {
	ts := startServer(t, echoHandler{})
	c := dial(t, ts.addr)
	for v := int16(0); v <= 3; v++ {
		req := &ApiVersionsRequest{ClientSoftwareName: "test", ClientSoftwareVersion: "1"}
		req.SetVersion(v)
		resp := do(t, c, req).(*ApiVersionsResponse)
		if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.ApiKeys, registryVersions()) {
			t.Fatalf("v%d: got %+v, want the registry %+v", v, resp, registryVersions())
		}
	}
}

// TestServerApiVersionsUnsupportedVersion checks KIP-511's answer to an
// ApiVersions request newer than ours, and that the connection stays open.
func TestServerApiVersionsUnsupportedVersion(t *testing.T) {
	ts := startServer(t, echoHandler{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := kbin.AppendCompactString(nil, "x")
	body = kbin.AppendCompactString(body, "y")
	body = append(body, 0)
	if _, err := conn.Write(rawFrame(KeyApiVersions, 4, 9, body)); err != nil {
		t.Fatal(err)
	}
	b := readRawResponse(t, conn)
	if corr := int32(binary.BigEndian.Uint32(b)); corr != 9 {
		t.Fatalf("correlation ID %d", corr)
	}
	resp := NewApiVersionsResponse() // v0: header v0 and body v0
	if err := resp.ReadFrom(b[4:]); err != nil {
		t.Fatal(err)
	}
	want := []ApiVersionsKey{{ApiKey: KeyApiVersions, MinVersion: 0, MaxVersion: 3}}
	if resp.ErrorCode != 35 || !reflect.DeepEqual(resp.ApiKeys, want) {
		t.Fatalf("got %+v", resp)
	}
	if _, err := conn.Write(rawFrame(KeyApiVersions, 3, 10, body)); err != nil {
		t.Fatal(err)
	}
	b = readRawResponse(t, conn)
	resp.SetVersion(3)
	if err := resp.ReadFrom(b[4:]); err != nil || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("v3 after the v4 attempt: %v %+v", err, resp)
	}
}

// TestServerFranzGoClient talks to the server with franz-go's client, which
// first tries its newest ApiVersions, gets KIP-511's answer and retries.
func TestServerFranzGoClient(t *testing.T) {
	ts := startServer(t, echoHandler{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	var got []ApiVersionsKey
	for _, k := range resp.ApiKeys {
		got = append(got, ApiVersionsKey{ApiKey: k.ApiKey, MinVersion: k.MinVersion, MaxVersion: k.MaxVersion})
	}
	if resp.ErrorCode != 0 || !reflect.DeepEqual(got, registryVersions()) {
		t.Fatalf("franz-go got %+v", resp)
	}
	if ts.logs.FilterMessageSnippet("unsupported version with v0").Len() == 0 {
		t.Errorf("franz-go did not need the v0 fallback; the test no longer covers it")
	}
}

// TestServerEveryAPI sends every sample request through the client and
// server and checks the handler's sample response arrives intact.
func TestServerEveryAPI(t *testing.T) {
	var mu sync.Mutex
	var gotReqs []Request
	var infos []ConnInfo
	h := HandlerFunc(func(ctx context.Context, c *ConnInfo, req Request) Response {
		mu.Lock()
		gotReqs = append(gotReqs, req)
		infos = append(infos, *c)
		mu.Unlock()
		return echoHandler{}.Handle(ctx, c, req)
	})
	ts := startServer(t, h)
	c := dial(t, ts.addr, ClientID("every-api"))
	var sent []Request
	for _, m := range sampleMessages() {
		req, ok := m.(Request)
		if !ok || req.Key() == KeyApiVersions || req.Key() == KeySaslHandshake || req.Key() == KeySaslAuthenticate {
			continue // the server answers these itself (sasl_test.go)
		}
		resp := do(t, c, req)
		want := echoHandler{}.Handle(context.Background(), nil, req)
		if !reflect.DeepEqual(resp, want) {
			t.Errorf("%s: got %+v, want %+v", sampleName(req), resp, want)
		}
		sent = append(sent, req)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(gotReqs, sent) {
		t.Errorf("the handler saw other requests than were sent")
	}
	for i, info := range infos {
		if info.ClientID != "every-api" || info.RemoteAddr == nil || info.CorrelationID != int32(i+1) {
			t.Errorf("ConnInfo %d = %+v", i, info)
		}
	}
}

// TestServerClosesOnlyBadConnection sends one protocol violation per case on
// its own connection and checks that the server logs one warning naming it,
// closes that connection, and keeps serving another one.
func TestServerClosesOnlyBadConnection(t *testing.T) {
	const limit = 1024
	validCreate := (&CreateClusterMirrorRequest{MirrorName: "m"}).AppendTo(nil)
	for _, tc := range []struct {
		name      string
		send      []byte
		halfClose bool // close our write side after sending
		wantLog   string
		wantField string // a log field that must be present
	}{
		{
			name:    "frame over the size limit",
			send:    binary.BigEndian.AppendUint32(nil, limit+1),
			wantLog: "frame too large", wantField: "max-frame-bytes",
		},
		{
			name:    "negative frame size",
			send:    []byte{0xff, 0xff, 0xff, 0xfe},
			wantLog: "negative frame size", wantField: "frame-size",
		},
		{
			name:    "garbage frame",
			send:    []byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'},
			wantLog: "request header does not decode", wantField: "frame-size",
		},
		{
			name:    "unknown api key",
			send:    rawFrame(999, 0, 1, nil),
			wantLog: "unknown api key", wantField: "api-key",
		},
		{
			name:    "unsupported version",
			send:    rawFrame(KeyCreateClusterMirror, 1, 1, validCreate),
			wantLog: "unsupported api version", wantField: "max-version",
		},
		{
			name:    "body that does not decode",
			send:    rawFrame(KeyCreateClusterMirror, 0, 1, []byte{0x7f, 'x'}),
			wantLog: "request body does not decode", wantField: "api",
		},
		{
			name:    "body with trailing bytes",
			send:    rawFrame(KeyCreateClusterMirror, 0, 1, append(validCreate[:len(validCreate):len(validCreate)], 1, 2)),
			wantLog: "request body does not decode", wantField: "api",
		},
		{
			name:      "truncated frame",
			send:      append(binary.BigEndian.AppendUint32(nil, 100), 1, 2, 3),
			halfClose: true,
			wantLog:   "truncated frame", wantField: "bytes-read",
		},
		{
			name:      "truncated size",
			send:      []byte{0, 0},
			halfClose: true,
			wantLog:   "truncated frame size", wantField: "bytes-read",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, echoHandler{}, MaxFrameBytes(limit))
			good := dial(t, ts.addr)
			do(t, good, &ListClusterMirrorsRequest{})

			bad, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			if _, err := bad.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.halfClose {
				_ = bad.(*net.TCPConn).CloseWrite()
			}
			_ = bad.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := bad.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("bad connection read %d bytes, %v; want EOF (closed by the server)", n, err)
			}

			warns := ts.logs.FilterLevelExact(zapcore.WarnLevel).All()
			if len(warns) != 1 || !strings.Contains(warns[0].Message, tc.wantLog) {
				t.Fatalf("want one warning containing %q, got %v", tc.wantLog, warns)
			}
			fields := warns[0].ContextMap()
			if fields["remote-addr"] != bad.LocalAddr().String() {
				t.Errorf("warning names remote-addr %v, want %v", fields["remote-addr"], bad.LocalAddr())
			}
			if _, ok := fields[tc.wantField]; !ok {
				t.Errorf("warning lacks field %q: %v", tc.wantField, fields)
			}

			// The other connection still works.
			if resp := do(t, good, &ListClusterMirrorsRequest{}); resp.Key() != KeyListClusterMirrors {
				t.Fatalf("good connection: %+v", resp)
			}
		})
	}
}

func TestServerConcurrentClients(t *testing.T) {
	h := HandlerFunc(func(_ context.Context, _ *ConnInfo, req Request) Response {
		r := req.(*DeleteClusterMirrorRequest)
		return &DeleteClusterMirrorResponse{ErrorMessage: strp("deleted " + r.MirrorName)}
	})
	ts := startServer(t, h)
	const clients, requests = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := dial(t, ts.addr)
		wg.Add(1)
		work := func() {
			defer wg.Done()
			for j := range requests {
				name := fmt.Sprintf("m-%d-%d", i, j)
				resp, err := c.Do(context.Background(), &DeleteClusterMirrorRequest{MirrorName: name})
				if err != nil {
					errs <- err
					return
				}
				if got := *resp.(*DeleteClusterMirrorResponse).ErrorMessage; got != "deleted "+name {
					errs <- fmt.Errorf("client %d got %q for %q", i, got, name)
					return
				}
			}
		}
		go work()
	}
	// One client shared by several goroutines, too.
	shared := dial(t, ts.addr)
	for i := range 4 {
		wg.Add(1)
		work := func() {
			defer wg.Done()
			for j := range requests {
				name := fmt.Sprintf("s-%d-%d", i, j)
				resp, err := shared.Do(context.Background(), &DeleteClusterMirrorRequest{MirrorName: name})
				if err != nil {
					errs <- err
					return
				}
				if got := *resp.(*DeleteClusterMirrorResponse).ErrorMessage; got != "deleted "+name {
					errs <- fmt.Errorf("shared client got %q for %q", got, name)
					return
				}
			}
		}
		go work()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestServerHandlerPanic(t *testing.T) {
	h := HandlerFunc(func(_ context.Context, _ *ConnInfo, req Request) Response {
		if r, ok := req.(*DeleteClusterMirrorRequest); ok && r.MirrorName == "boom" {
			panic("handler bug")
		}
		return req.ResponseKind()
	})
	ts := startServer(t, h)
	good := dial(t, ts.addr)
	bad := dial(t, ts.addr)
	if _, err := bad.Do(context.Background(), &DeleteClusterMirrorRequest{MirrorName: "boom"}); err == nil {
		t.Fatal("Do succeeded although the handler panicked")
	}
	if ts.logs.FilterMessageSnippet("panic").Len() != 1 {
		t.Fatalf("want one panic log, got %v", ts.logs.All())
	}
	do(t, good, &DeleteClusterMirrorRequest{MirrorName: "fine"})
}

func TestServerBadResponse(t *testing.T) {
	h := HandlerFunc(func(_ context.Context, _ *ConnInfo, req Request) Response {
		if _, ok := req.(*DeleteClusterMirrorRequest); ok {
			return nil
		}
		return &DeleteClusterMirrorResponse{} // wrong API for everything else
	})
	ts := startServer(t, h)
	for _, req := range []Request{&DeleteClusterMirrorRequest{}, &ListClusterMirrorsRequest{}} {
		c := dial(t, ts.addr)
		if _, err := c.Do(context.Background(), req); err == nil {
			t.Fatalf("%s: Do succeeded with a bad handler response", KeyName(req.Key()))
		}
	}
	if n := ts.logs.FilterMessageSnippet("bad response").Len(); n != 2 {
		t.Fatalf("want 2 bad-response logs, got %d", n)
	}
}

func TestServerClose(t *testing.T) {
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, _ *ConnInfo, req Request) Response {
		if _, ok := req.(*DescribeClusterMirrorsRequest); ok {
			close(started)
			<-ctx.Done() // a slow handler that respects its context
		}
		return req.ResponseKind()
	})
	ts := startServer(t, h)
	idle := dial(t, ts.addr)
	do(t, idle, &ListClusterMirrorsRequest{})
	busy := dial(t, ts.addr)
	busyErr := make(chan error, 1)
	describe := func() {
		_, err := busy.Do(context.Background(), &DescribeClusterMirrorsRequest{})
		busyErr <- err
	}
	go describe()
	<-started

	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-busyErr; err == nil {
		t.Error("the busy client got a response after Close")
	}
	if _, err := idle.Do(context.Background(), &ListClusterMirrorsRequest{}); err == nil {
		t.Error("the idle client still works after Close")
	}
	if err := ts.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close = %v", err)
	}
}

func TestServerReadTimeout(t *testing.T) {
	ts := startServer(t, echoHandler{}, ReadTimeout(50*time.Millisecond))
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection read %v, want EOF", err)
	}
	if ts.logs.FilterMessageSnippet("read timeout").Len() != 1 {
		t.Fatalf("no read-timeout log: %v", ts.logs.All())
	}
}

func TestClientContext(t *testing.T) {
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, _ *ConnInfo, req Request) Response {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return req.ResponseKind()
	})
	ts := startServer(t, h)
	defer close(release)
	c := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, &ListClusterMirrorsRequest{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want DeadlineExceeded", err)
	}
	if _, err := c.Do(context.Background(), &ListClusterMirrorsRequest{}); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Do after a broken exchange = %v, want ErrClientClosed", err)
	}
}

func TestClientRejectsUnknownRequests(t *testing.T) {
	ts := startServer(t, echoHandler{})
	c := dial(t, ts.addr)
	req := &CreateClusterMirrorRequest{}
	req.SetVersion(1)
	if _, err := c.Do(context.Background(), req); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Do(v1) = %v", err)
	}
	// The client is still usable: nothing was sent.
	do(t, c, &ListClusterMirrorsRequest{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), &ListClusterMirrorsRequest{}); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Do after Close = %v", err)
	}
}

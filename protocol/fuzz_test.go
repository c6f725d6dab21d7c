package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// apiIndex returns the registry index of key.
func apiIndex(key int16) uint8 {
	for i, a := range apis {
		if a.Key == key {
			return uint8(i)
		}
	}
	panic("key not in registry")
}

// pickAPI maps fuzz inputs onto a registry entry and one of its versions.
func pickAPI(index, version uint8) (API, int16) {
	a := apis[int(index)%len(apis)]
	return a, a.MinVersion + int16(version)%(a.MaxVersion-a.MinVersion+1)
}

// checkDecode is the fuzz invariant for a body decoder: ReadFrom never
// panics; when it accepts src, AppendTo re-encodes the value, ReadFrom of
// that encoding succeeds with a deeply equal value, and that value encodes
// to the same bytes again.
func checkDecode(t *testing.T, fresh func() Message, src []byte) {
	m := fresh()
	if err := m.ReadFrom(src); err != nil {
		return
	}
	b1 := m.AppendTo(nil)
	m2 := fresh()
	if err := m2.ReadFrom(b1); err != nil {
		t.Fatalf("%s: re-encoded value does not decode: %v\ninput: %x\nre-encoded: %x", sampleName(m), err, src, b1)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("%s: round trip changed the value\nfirst:  %+v\nsecond: %+v", sampleName(m), m, m2)
	}
	if b2 := m2.AppendTo(nil); !bytes.Equal(b1, b2) {
		t.Fatalf("%s: encoding is not stable\nfirst:  %x\nsecond: %x", sampleName(m), b1, b2)
	}
}

// FuzzRequests decodes arbitrary bytes as the request body of every API and
// version in the registry. Invariant (checkDecode): never panics; a
// successful decode re-encodes and decodes to the same value and bytes.
func FuzzRequests(f *testing.F) {
	for _, m := range sampleMessages() {
		if _, ok := m.(Request); ok {
			f.Add(apiIndex(m.Key()), uint8(m.Version()), m.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, index, version uint8, body []byte) {
		a, v := pickAPI(index, version)
		checkDecode(t, func() Message { r := a.NewRequest(); r.SetVersion(v); return r }, body)
	})
}

// FuzzResponses decodes arbitrary bytes as the response body of every API
// and version in the registry. Invariant (checkDecode): never panics; a
// successful decode re-encodes and decodes to the same value and bytes.
func FuzzResponses(f *testing.F) {
	for _, m := range sampleMessages() {
		if _, ok := m.(Request); !ok {
			f.Add(apiIndex(m.Key()), uint8(m.Version()), m.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, index, version uint8, body []byte) {
		a, v := pickAPI(index, version)
		checkDecode(t, func() Message { r := a.NewResponse(); r.SetVersion(v); return r }, body)
	})
}

// requestFrame returns the frame contents (no size prefix) of req.
func requestFrame(req Request, correlationID int32, clientID *string) []byte {
	h := RequestHeader{RequestApiKey: req.Key(), RequestApiVersion: req.Version(), CorrelationId: correlationID, ClientId: clientID}
	return req.AppendTo(h.AppendTo(nil))
}

// FuzzRequestHeader decodes arbitrary bytes as a request frame's header.
// Invariant: never panics; a successful decode re-encodes (header, then the
// returned body) to bytes that decode to the same header and body.
func FuzzRequestHeader(f *testing.F) {
	for _, m := range sampleMessages() {
		if req, ok := m.(Request); ok {
			f.Add(requestFrame(req, 7, strp("kafka-cluster-mirrors")))
		}
	}
	f.Add(requestFrame(&ListClusterMirrorsRequest{}, -1, nil))
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ReadRequestHeader(frame)
		if err != nil {
			return
		}
		again := append(h.AppendTo(nil), body...)
		h2, body2, err := ReadRequestHeader(again)
		if err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		if !reflect.DeepEqual(h, h2) || !bytes.Equal(body, body2) {
			t.Fatalf("round trip changed the header: %+v / %+v", h, h2)
		}
	})
}

// FuzzServeConn feeds arbitrary bytes to a server connection. Invariant:
// the server never panics (its last-resort recover would log "panic"), and
// Close returns once the connection is gone.
func FuzzServeConn(f *testing.F) {
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	for _, m := range sampleMessages() {
		if req, ok := m.(Request); ok {
			f.Add(frame(requestFrame(req, 1, strp("c"))))
		}
	}
	f.Add(frame(requestFrame(&ApiVersionsRequest{versioned: versioned{4}}, 1, nil)))
	f.Add(append(frame(requestFrame(&ListClusterMirrorsRequest{}, 1, nil)), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, data []byte) {
		core, logs := observer.New(zapcore.DebugLevel)
		s := NewServer(echoHandler{}, Logger(zap.New(core)), MaxFrameBytes(1<<16))
		client, server := net.Pipe()
		if !s.startConn(server, new(atomic.Int32)) {
			t.Fatal("server refused the connection")
		}
		done := make(chan struct{})
		writer := func() {
			defer close(done)
			_ = client.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = client.Write(data)
			_ = client.Close() // the server reads EOF after the last frame
		}
		go writer()
		_, _ = io.Copy(io.Discard, client) // responses, until either side closes
		<-done
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := logs.FilterMessageSnippet("panic").Len(); n > 0 {
			t.Fatalf("server panicked: %v", logs.FilterMessageSnippet("panic").All()[0].ContextMap())
		}
	})
}

// echoHandler answers every request with its API's sample response of the
// request's version, else its first sample response, or an empty one.
type echoHandler struct{}

func (echoHandler) Handle(_ context.Context, _ *ConnInfo, req Request) Response {
	var first Response
	for _, m := range sampleMessages() {
		if _, isReq := m.(Request); !isReq && m.Key() == req.Key() {
			if m.Version() == req.Version() {
				return m.(Response)
			}
			if first == nil {
				first = m.(Response)
			}
		}
	}
	if first != nil {
		return first
	}
	return req.ResponseKind()
}

// FuzzResponseHeader decodes arbitrary bytes as the header of a response
// to every API and version in the registry. Invariant: never panics; a
// successful decode re-encodes (header, then the returned body) to bytes
// that decode to the same correlation ID and body.
func FuzzResponseHeader(f *testing.F) {
	for _, m := range sampleMessages() {
		if _, ok := m.(Request); !ok {
			f.Add(apiIndex(m.Key()), uint8(m.Version()), m.AppendTo(appendResponseHeader(nil, m.Key(), m.Version(), 7)))
		}
	}
	f.Fuzz(func(t *testing.T, index, version uint8, frame []byte) {
		a, v := pickAPI(index, version)
		corr, body, err := readResponseHeader(frame, a.Key, v)
		if err != nil {
			return
		}
		again := append(appendResponseHeader(nil, a.Key, v, corr), body...)
		corr2, body2, err := readResponseHeader(again, a.Key, v)
		if err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		if corr != corr2 || !bytes.Equal(body, body2) {
			t.Fatalf("round trip changed the header: correlation ID %d -> %d", corr, corr2)
		}
	})
}

// FuzzClientResponse answers a client's request with arbitrary bytes, the
// size prefix included. Invariant: Do never panics and returns either an
// error or a response of the request's kind.
func FuzzClientResponse(f *testing.F) {
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	for _, m := range sampleMessages() {
		if _, ok := m.(Request); !ok {
			f.Add(apiIndex(m.Key()), uint8(m.Version()), frame(m.AppendTo(appendResponseHeader(nil, m.Key(), m.Version(), 1))))
		}
	}
	f.Add(uint8(0), uint8(0), []byte{0, 0, 0, 2, 0, 0})
	f.Add(uint8(0), uint8(0), []byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, index, version uint8, answer []byte) {
		a, v := pickAPI(index, version)
		req := a.NewRequest()
		req.SetVersion(v)
		clientConn, serverConn := net.Pipe()
		defer clientConn.Close()
		go func() {
			defer serverConn.Close()
			var size [4]byte
			if _, err := io.ReadFull(serverConn, size[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, serverConn, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			_, _ = serverConn.Write(answer)
		}()
		c := &Client{addr: "pipe", cfg: clientConfig{clientID: DefaultClientID, maxResponseBytes: 1 << 16}, conn: clientConn}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Do(ctx, req)
		if err != nil {
			return
		}
		if resp == nil || resp.Key() != req.Key() || resp.Version() != v && resp.Key() != KeyApiVersions {
			t.Fatalf("Do = %v, want a %s v%d response", resp, a.Name, v)
		}
	})
}

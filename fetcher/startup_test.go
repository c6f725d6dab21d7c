package fetcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestInitProducerIDLoadInProgress has the destination answer the first
// idempotent InitProducerID requests with COORDINATOR_LOAD_IN_PROGRESS and
// NOT_COORDINATOR, as a broker that has just started does: the Manager
// retries them at once, so the partitions start without a failed round (no
// retriable-error backoff, here 5 s) and with one producer ID.
func TestInitProducerIDLoadInProgress(t *testing.T) {
	const topic = "startup"
	parts := []int32{0, 1, 2}
	e := newTestEnv(t, 1, map[string]int32{topic: 3})
	var calls atomic.Int32
	codes := []int16{kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code}
	e.dst.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID != nil {
			return nil, nil, false
		}
		n := int(calls.Add(1))
		if n > len(codes) {
			e.dst.DropControl()
			return nil, nil, false
		}
		e.dst.KeepControl()
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = codes[n-1]
		return resp, nil, true
	})
	e.produce(e.producer(kgo.NoCompression()), topic, parts, 0, 100, 10)
	core, logs := observer.New(zap.InfoLevel)
	m := e.newManager(Logger(zap.New(core)), Backoff(5*time.Second, 10*time.Second))
	start := time.Now()
	startAll(t, m, topic, parts)
	e.waitCaughtUp(m, topic, parts)
	t.Logf("caught up %s after Start", time.Since(start))
	if n := calls.Load(); n != int32(len(codes))+1 {
		t.Fatalf("%d idempotent InitProducerID requests, want %d", n, len(codes)+1)
	}
	if n := logs.FilterMessageSnippet("retriable error").Len(); n != 0 {
		t.Fatalf("%d partition rounds failed: %v", n, logs.FilterMessageSnippet("retriable error").All())
	}
	if gen := m.pids.generation(); gen != 1 {
		t.Fatalf("%d producer IDs, want 1", gen)
	}
	if n := e.compareTopic(topic); n != 300 {
		t.Fatalf("compared %d records", n)
	}
}

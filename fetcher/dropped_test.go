package fetcher

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidemirror/sidemirror/internal/kafkaproxy"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDroppedProduceConnection: the connection to the local broker dies
// after a produce request went out and before its answer, and the broker
// appends that request only after the driver came back: read the LEO again
// and sent the batch anew. The proxy in front of the local broker makes the
// broker get the held request right before the resent one. With the same
// producer ID and sequences the broker answers the resent batch as a
// duplicate of the held one, at the same offset: no duplicate records, no
// FAILED partition, and no new producer ID.
func TestDroppedProduceConnection(t *testing.T) {
	tests := []struct {
		name string
		// warm: records mirrored before the proxy holds a request, so that
		// the held one is pipelined behind acknowledged batches; 0 holds
		// the partition's first batch (a producer the broker does not know).
		warm int
	}{
		{"first batch", 0},
		{"pipelined", 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "dropped"
			parts := []int32{0, 1}
			e := newTestEnv(t, 1, map[string]int32{topic: 2})
			px, err := kafkaproxy.Start("127.0.0.1:0", e.dst.ListenAddrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = px.Close() })
			e.local = e.client(e.dst, kgo.SeedBrokers(px.Addr()))
			cl := e.producer(kgo.NoCompression())
			m := e.newManager(MaxInFlightPerPartition(5))
			if tc.warm > 0 {
				e.produce(cl, topic, parts, 0, tc.warm, 10)
				startAll(t, m, topic, parts)
				e.waitCaughtUp(m, topic, parts)
			}
			px.HoldNext(kafkaproxy.ProduceTo(topic))
			e.produce(cl, topic, parts, tc.warm, 500, 10)
			if tc.warm == 0 {
				startAll(t, m, topic, parts)
			}
			testwait.For(t, waitTimeout, "the held produce request to reach the broker before its resent batches", func() bool {
				_, released := px.Holds()
				return released == 1
			})
			e.produce(cl, topic, parts, tc.warm+500, 200, 10)
			e.waitCaughtUp(m, topic, parts)
			if n, want := e.compareTopic(topic), 2*(tc.warm+700); n != want {
				t.Fatalf("compared %d records, want %d", n, want)
			}
			for _, p := range parts {
				for _, st := range e.events.statesOf(Partition{testMirror, topic, p}) {
					if st == StateFailed {
						t.Fatalf("partition %d went FAILED: %v", p, e.events.statesOf(Partition{testMirror, topic, p}))
					}
				}
			}
			if gen := m.pids.generation(); gen != 1 {
				t.Fatalf("producer ID generation %d after a dropped connection, want 1: the producer ID must survive it", gen)
			}
		})
	}
}

// TestProducerStateResume: where the destination LEO lies relative to the
// appends whose outcome is unknown decides the next sequence, or a new
// producer ID.
func TestProducerStateResume(t *testing.T) {
	id := &producerIdentity{id: 7, gen: 1}
	tests := []struct {
		name        string
		st          producerState
		leo         int64
		wantSeq     int32
		wantRenew   bool
		established bool
		wantLeft    bool // dropped because another writer appended after it
	}{
		{"nothing unknown, LEO unmoved", producerState{ident: id, seq: 40, at: 100, upTo: 100}, 100, 40, false, false, false},
		{"nothing unknown, another writer appended", producerState{ident: id, seq: 40, at: 100, upTo: 100}, 130, 0, true, false, true},
		{"nothing unknown, truncated below", producerState{ident: id, seq: 40, at: 100, upTo: 100}, 90, 0, true, false, false},
		{"none landed", producerState{ident: id, seq: 40, at: 100, upTo: 150}, 100, 40, false, false, false},
		{"some landed", producerState{ident: id, seq: 40, at: 100, upTo: 150}, 120, 60, false, true, false},
		{"all landed", producerState{ident: id, seq: 40, at: 100, upTo: 150}, 150, 90, false, true, false},
		{"sequence wraps", producerState{ident: id, seq: math.MaxInt32 - 5, at: 100, upTo: 150}, 110, 4, false, true, false},
		{"beyond what was sent", producerState{ident: id, seq: 40, at: 100, upTo: 150}, 151, 0, true, false, true},
		{"truncated below", producerState{ident: id, seq: 40, at: 100, upTo: 150}, 99, 0, true, false, false},
		{"refused out of order, LEO unmoved", producerState{ident: id, seq: 40, at: 100, upTo: 150, suspect: true}, 100, 0, true, false, false},
		{"refused out of order, LEO moved", producerState{ident: id, seq: 40, at: 100, upTo: 150, suspect: true}, 110, 50, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.resume(tc.leo)
			if renewed := st.ident == nil; renewed != tc.wantRenew {
				t.Fatalf("identity dropped: %v, want %v", renewed, tc.wantRenew)
			}
			if tc.wantRenew {
				dropped := st.stale
				if tc.wantLeft {
					dropped = st.left
				}
				if dropped != id {
					t.Fatalf("stale identity %v, left identity %v, want the dropped one as the %s one", st.stale, st.left, map[bool]string{true: "left", false: "stale"}[tc.wantLeft])
				}
				return
			}
			if st.seq != tc.wantSeq || st.at != tc.leo || st.upTo != tc.leo || st.suspect {
				t.Fatalf("seq %d at %d upTo %d suspect %v, want seq %d at %d upTo %d", st.seq, st.at, st.upTo, st.suspect, tc.wantSeq, tc.leo, tc.leo)
			}
			if st.established != tc.established {
				t.Fatalf("established %v, want %v", st.established, tc.established)
			}
		})
	}
}

// TestLateAppendOfDeadSidecar: a sidecar dies (kill -9) with a produce
// request on its way to the broker, and the broker appends it only after
// the next sidecar to drive the partition (the restarted process, or
// another host's) read the LEO. The proxy holds the dead Manager's request
// and hands it to the broker right before the new Manager's first one. The
// new Manager continues the producer of the destination's last batch, so
// the broker takes the late request and the new one as one: no duplicate,
// no FAILED partition.
func TestLateAppendOfDeadSidecar(t *testing.T) {
	const topic = "late"
	parts := []int32{0}
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	px, err := kafkaproxy.Start("127.0.0.1:0", e.dst.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	cl := e.producer(kgo.NoCompression())

	// The first sidecar mirrors 300 records, then loses its connection
	// with a produce request held; its long backoff keeps it from sending
	// again before it dies.
	e.local = e.client(e.dst, kgo.SeedBrokers(px.Addr()), kgo.ClientID("dead"))
	dead := e.newManager(MaxInFlightPerPartition(5), Backoff(time.Minute, time.Minute))
	e.produce(cl, topic, parts, 0, 300, 10)
	startAll(t, dead, topic, parts)
	e.waitCaughtUp(dead, topic, parts)
	var held atomic.Bool
	px.HoldNext(func(r kafkaproxy.Request) bool {
		if !kafkaproxy.ProduceTo(topic)(r) {
			return false
		}
		if !held.Load() { // take: the dead sidecar's request
			held.Store(r.ClientID == "dead")
			return held.Load()
		}
		return r.ClientID == "next" // release: before the next sidecar's first
	})
	e.produce(cl, topic, parts, 300, 200, 10)
	testwait.For(t, waitTimeout, "a produce request of the first sidecar held", func() bool {
		n, _ := px.Holds()
		return n == 1
	})
	dead.Close()

	e.local = e.client(e.dst, kgo.SeedBrokers(px.Addr()), kgo.ClientID("next"))
	e.reg = prometheus.NewRegistry()
	next := e.newManager(MaxInFlightPerPartition(5))
	startAll(t, next, topic, parts)
	testwait.For(t, waitTimeout, "the held request to reach the broker before the next sidecar's", func() bool {
		_, released := px.Holds()
		return released == 1
	})
	e.produce(cl, topic, parts, 500, 200, 10)
	e.waitCaughtUp(next, topic, parts)
	if n, want := e.compareTopic(topic), 700; n != want {
		t.Fatalf("compared %d records, want %d", n, want)
	}
	for _, st := range e.events.statesOf(Partition{testMirror, topic, 0}) {
		if st == StateFailed {
			t.Fatalf("partition went FAILED: %v", e.events.statesOf(Partition{testMirror, topic, 0}))
		}
	}
}

// TestLeadershipReturns: a partition moves to another sidecar and back, as
// its destination leadership does when a broker restarts and the preferred
// leader is elected again. The other sidecar continued the first one's
// producer (adoptLastWriter), so the first one's own sequence is stale
// when it drives the partition again: sent as it is, its next batch would
// repeat one of the other's last five, and the broker would answer it at
// that batch's offset (ErrExactness). It must continue from the
// destination's last batch instead.
func TestLeadershipReturns(t *testing.T) {
	const topic = "returns"
	parts := []int32{0}
	key := Partition{testMirror, topic, 0}
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	cl := e.producer(kgo.NoCompression())
	e.local = e.client(e.dst, kgo.ClientID("first"))
	first := e.newManager(MaxInFlightPerPartition(5))
	e.produce(cl, topic, parts, 0, 300, 10)
	startAll(t, first, topic, parts)
	e.waitCaughtUp(first, topic, parts)
	ctx := context.Background()
	if err := first.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}

	e.local = e.client(e.dst, kgo.ClientID("other"))
	e.reg = prometheus.NewRegistry()
	other := e.newManager(MaxInFlightPerPartition(5))
	e.produce(cl, topic, parts, 300, 10, 10) // one batch: the first one's next would match it
	startAll(t, other, topic, parts)
	e.waitCaughtUp(other, topic, parts)
	if err := other.Stop(ctx, key); err != nil {
		t.Fatal(err)
	}

	// One batch again, so that it goes alone, with the sequences of the
	// other one's.
	e.produce(cl, topic, parts, 310, 10, 10)
	startAll(t, first, topic, parts)
	e.waitCaughtUp(first, topic, parts)
	e.produce(cl, topic, parts, 320, 190, 10)
	e.waitCaughtUp(first, topic, parts)
	if n, want := e.compareTopic(topic), 510; n != want {
		t.Fatalf("compared %d records, want %d", n, want)
	}
	for _, st := range e.events.statesOf(key) {
		if st == StateFailed {
			t.Fatalf("partition went FAILED: %v", e.events.statesOf(key))
		}
	}
}

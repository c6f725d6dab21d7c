package fetcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countProduce counts the partition appends of the produce requests the
// destination receives.
func countProduce(c *kfake.Cluster) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, t := range kr.(*kmsg.ProduceRequest).Topics {
			n.Add(int64(len(t.Partitions)))
		}
		return nil, nil, false
	})
	return &n
}

// TestCatchUpCoalesces mirrors a backlog of small batches from an
// idempotent producer: by default the mirror must append many source
// batches per produce.
func TestCatchUpCoalesces(t *testing.T) {
	const topic, perPartition = "backlog", 5000
	e := newTestEnv(t, 1, map[string]int32{topic: 4})
	parts := []int32{0, 1, 2, 3}
	cl := e.producer(kgo.NoCompression())
	for i := 0; i < perPartition; i += 3 {
		e.produce(cl, topic, parts, i, 1, 1)
		e.produce(cl, topic, parts, i+1, 2, 2)
	}
	produces := countProduce(e.dst)
	m := e.newManager()
	start := time.Now()
	startAll(t, m, topic, parts)
	e.waitCaughtUp(m, topic, parts)
	took := time.Since(start)
	var batches int
	for _, p := range parts {
		n, _ := e.compareBatches(topic, p, 0, false)
		batches += n
	}
	records := e.compareTopic(topic)
	appends := produces.Load()
	t.Logf("%d records in %d source batches, %d partition appends, %s: %.0f records/s",
		records, batches, appends, took, float64(records)/took.Seconds())
	if appends == 0 || int64(batches) < 10*appends {
		t.Fatalf("%d source batches in %d partition appends: want at least 10 per append", batches, appends)
	}
}

// TestCatchUpAfterFault: the destination refuses appends while a backlog of
// small batches builds up on the source, then takes them again.
func TestCatchUpAfterFault(t *testing.T) {
	const topic, perPartition = "backlog", 5000
	e := newTestEnv(t, 1, map[string]int32{topic: 4})
	parts := []int32{0, 1, 2, 3}
	cl := e.producer(kgo.NoCompression())
	var refuse atomic.Bool
	var n atomic.Int64
	e.dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if !refuse.Load() {
			for _, t := range req.Topics {
				n.Add(int64(len(t.Partitions)))
			}
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	m := e.newManager()
	startAll(t, m, topic, parts)
	e.produce(cl, topic, parts, 0, 10, 1)
	e.waitCaughtUp(m, topic, parts)
	refuse.Store(true)
	for i := 10; i < perPartition; i += 3 {
		e.produce(cl, topic, parts, i, 1, 1)
		e.produce(cl, topic, parts, i+1, 2, 2)
	}
	n.Store(0)
	start := time.Now()
	refuse.Store(false)
	e.waitCaughtUp(m, topic, parts)
	took := time.Since(start)
	records := e.compareTopic(topic)
	appends := n.Load()
	t.Logf("%d records, %d partition appends after the fault, %s: %.0f records/s",
		records, appends, took, float64(records)/took.Seconds())
	if batches := 4 * (perPartition - 10) * 2 / 3; appends == 0 || int64(batches) < 10*appends {
		t.Fatalf("about %d source batches in %d partition appends: want at least 10 per append", batches, appends)
	}
}

// TestCatchUpSlowDestination: the source takes small batches faster than
// a slow destination takes appends, so the fetched data waits in many small
// fetch responses.
func TestCatchUpSlowDestination(t *testing.T) {
	const topic, perPartition = "backlog", 5000
	e := newTestEnv(t, 1, map[string]int32{topic: 4})
	parts := []int32{0, 1, 2, 3}
	cl := e.producer(kgo.NoCompression())
	var n atomic.Int64
	e.dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		for _, t := range kr.(*kmsg.ProduceRequest).Topics {
			n.Add(int64(len(t.Partitions)))
		}
		e.dst.SleepControl(func() { time.Sleep(20 * time.Millisecond) })
		return nil, nil, false
	})
	m := e.newManager()
	startAll(t, m, topic, parts)
	e.produce(cl, topic, parts, 0, 10, 1)
	e.waitCaughtUp(m, topic, parts)
	n.Store(0)
	start := time.Now()
	for i := 10; i < perPartition; i += 3 {
		e.produce(cl, topic, parts, i, 1, 1)
		e.produce(cl, topic, parts, i+1, 2, 2)
	}
	produced := time.Since(start)
	e.waitCaughtUp(m, topic, parts)
	took := time.Since(start)
	records := e.compareTopic(topic)
	var batches int
	for _, p := range parts {
		b, _ := e.compareBatches(topic, p, 0, false)
		batches += b
	}
	appends := n.Load()
	t.Logf("%d records in %d batches, produced in %s, %d partition appends, caught up after %s: %.0f records/s",
		records, batches, produced, appends, took, float64(records)/took.Seconds())
	if appends == 0 || int64(batches) < 10*appends {
		t.Fatalf("%d source batches in %d partition appends: want at least 10 per append", batches, appends)
	}
}

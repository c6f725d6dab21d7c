package fetcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestOffsetBatcher has many look-ups arrive at once: they share few
// requests, each gets its own partition's answer (a partition asked twice
// gets it twice), and a caller that gives up returns its context's error
// without spoiling the others' answers.
func TestOffsetBatcher(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"t": 1})
	m := e.newManager()
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	b := newOffsetBatcher(m, m.ctx, func(_ context.Context, qs []offsetQuery) map[offsetQuery]offsetAnswer {
		<-release
		mu.Lock()
		sizes = append(sizes, len(qs))
		mu.Unlock()
		out := make(map[offsetQuery]offsetAnswer)
		for _, q := range qs {
			if q.partition == 13 {
				out[q] = offsetAnswer{err: kerr.NotLeaderForPartition}
				continue
			}
			if q.partition != 14 { // 14: left out of the answer
				out[q] = offsetAnswer{offset: int64(q.partition)*10 + q.ts}
			}
		}
		return out
	})
	pending := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		waiting := 0
		for _, chs := range b.pending {
			waiting += len(chs)
		}
		return waiting
	}
	// A look-up whose caller gives up while its request is out.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan offsetAnswer, 1)
	go func() { gaveUp <- b.list(ctx, offsetQuery{"t", 7, -2}) }()
	testwait.For(t, waitTimeout, "the first request out", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running && len(b.pending) == 0
	})
	cancel()
	if a := <-gaveUp; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the look-up given up returned %+v, want context.Canceled", a)
	}
	// Many look-ups while that request is out: they make one batch.
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := int32(i % (n / 2)) // every partition twice
			a := b.list(context.Background(), offsetQuery{"t", p, -2})
			switch {
			case p == 13:
				if a.err != kerr.NotLeaderForPartition {
					errs <- fmt.Errorf("partition 13: %+v, want NOT_LEADER_OR_FOLLOWER", a)
				}
			case p == 14:
				if a.err != errMissingAnswer {
					errs <- fmt.Errorf("partition 14: %+v, want errMissingAnswer", a)
				}
			case a.err != nil || a.offset != int64(p)*10-2:
				errs <- fmt.Errorf("partition %d: %+v", p, a)
			}
		}()
	}
	testwait.For(t, waitTimeout, "every look-up pending", func() bool { return pending() == n })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != n/2 {
		t.Errorf("requests of %v partitions, want [1 %d]", sizes, n/2)
	}
}

// TestStartManyPartitions starts a thousand partitions at once: they read
// their destination log end offsets and source log starts in a few batched
// ListOffsets requests rather than one each per partition, and the one
// partition whose topic the source lacks fails its own look-up only.
func TestStartManyPartitions(t *testing.T) {
	const topic, n = "many", 1000
	e := newTestEnv(t, 2, map[string]int32{topic: n})
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	const missing = "destination-only"
	if _, err := e.dstAdm.CreateTopic(context.Background(), 1, 1, nil, missing); err != nil {
		t.Fatal(err)
	}
	count := func(c interface {
		ControlKey(int16, func(kmsg.Request) (kmsg.Response, error, bool))
		KeepControl()
	}, requests, partitions *atomic.Int64) {
		c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			requests.Add(1)
			for _, t := range kreq.(*kmsg.ListOffsetsRequest).Topics {
				partitions.Add(int64(len(t.Partitions)))
			}
			return nil, nil, false
		})
	}
	var srcReqs, srcParts, dstReqs, dstParts atomic.Int64
	count(e.src, &srcReqs, &srcParts)
	count(e.dst, &dstReqs, &dstParts)
	e.produce(e.producer(kgo.NoCompression(), kgo.MaxBufferedRecords(4*n)), topic, parts, 0, 2, 2)
	m := e.newManager(Logger(zap.NewNop()))
	startAll(t, m, topic, parts)
	startAll(t, m, missing, []int32{0})
	e.waitCaughtUp(m, topic, parts)
	t.Logf("ListOffsets: source %d requests for %d partitions, destination %d for %d", srcReqs.Load(), srcParts.Load(), dstReqs.Load(), dstParts.Load())
	// Two source brokers: one request per leader and batch. A look-up per
	// partition would be n requests on each side.
	if srcReqs.Load() > n/20 || dstReqs.Load() > n/20 {
		t.Errorf("%d source and %d destination ListOffsets requests for %d partitions, want at most %d each", srcReqs.Load(), dstReqs.Load(), n, n/20)
	}
	st := waitState(t, m, Partition{testMirror, missing, 0}, StateLogTruncation)
	testwait.For(t, waitTimeout, "the missing topic's error", func() bool {
		for _, s := range m.Status() {
			if s.Topic == missing {
				st = s
			}
		}
		return strings.Contains(st.LastError, "UNKNOWN_TOPIC_OR_PARTITION")
	})
	if n := e.compareTopic(topic); n != 2*1000 {
		t.Fatalf("compared %d records", n)
	}
}

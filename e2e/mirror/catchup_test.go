package mirror

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestCatchUpSmallBatches mirrors live traffic of small batches (one or two
// records each, idempotent producers, 6 per partition) into a
// running mirror for 8 s, then measures how long the mirror takes to catch
// up once the writers stop: within 60 s, every record identical.
func TestCatchUpSmallBatches(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions, writersPerPartition, perWriter = "catchup", "catchup", 6, 6, 4000
	createSourceTopic(t, topic, partitions, nil)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	// Writers of their own (one producer each) write one or two records
	// per produce, so that the source's batches stay that small however
	// long a produce takes.
	var writers []*kgo.Client
	for range partitions * writersPerPartition {
		writers = append(writers, newClient(t, env.Source, testbed.Admin, kgo.RecordPartitioner(kgo.ManualPartitioner())))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	stopAt := start.Add(8 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, len(writers))
	for w, cl := range writers {
		p := int32(w % partitions)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter && time.Now().Before(stopAt); i += 2 {
				rs := []*kgo.Record{{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "record %d of writer %d", i, w)}}
				if i%4 == 0 {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "record %d of writer %d", i+1, w)})
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	produced := time.Since(start)
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	var total, lag int64
	for p, o := range src {
		total += o
		lag += o - dst[p]
	}
	stopped := time.Now()
	waitCaughtUp(t, mirror, topic, 60*time.Second)
	caughtUp := time.Since(stopped)
	merged := sumMetric(t, "sidemirror_coalesced_source_batches_total", mirror)
	into := sumMetric(t, "sidemirror_coalesced_batches_total", mirror)
	t.Logf("%d records written in %s (%.0f records/s); lag when the writers stopped: %d records; caught up %s later; "+
		"%.0f source batches coalesced into %.0f destination batches", total, produced.Round(time.Millisecond),
		float64(total)/produced.Seconds(), lag, caughtUp.Round(time.Millisecond), merged, into)
	if n := compareAll(t, topic, partitions); int64(n) != total {
		t.Fatalf("compared %d records, want %d", n, total)
	}
}

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWorkload runs the workload against kfake for a moment: every kind of
// traffic flows, the idempotent producer's acknowledged records are all
// there once, and aborted transactions stay invisible to read_committed.
func TestWorkload(t *testing.T) {
	topics := Topics{Plain: "plain", Txn: "txn", Compacted: "compacted", Group: "chaos-group"}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics.Plain, topics.Txn, topics.Compacted))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	w, err := StartWorkload(seeds, topics, 5)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		busy := w.acked["idem"] > 200 && w.commits > 3 && w.aborts > 0 && w.overw > 100 && w.groupN > 50
		w.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload did not get going: %+v", w)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(append(seeds, kgo.ConsumeTopics(topics.Plain, topics.Txn),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var lines []string
	txnRecords := 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topics.Txn {
				txnRecords++
				return
			}
			for _, h := range r.Headers {
				lines = append(lines, fmt.Sprintf("%d %s=%s", r.Offset, h.Key, h.Value))
			}
		})
	}
	if dups, gaps := SeqStats([][]string{lines}, st.Acked); dups != 0 || gaps != 0 {
		t.Fatalf("%d duplicates and %d gaps of %d acknowledged records", dups, gaps, st.Acked["idem"])
	}
	if txnRecords == 0 || st.Commits == 0 || st.Aborts == 0 {
		t.Fatalf("read_committed saw %d transactional records; %d commits, %d aborts", txnRecords, st.Commits, st.Aborts)
	}
}

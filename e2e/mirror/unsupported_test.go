package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestTransactionalBatchFailsOnlyItsPartition writes plain records and then
// a committed transaction to partition 0, and plain records to partition 1.
// Transactions are not mirrored yet: partition 0 must go FAILED with a
// reason saying so, holding exactly the records before the transaction,
// while partition 1 mirrors completely.
func TestTransactionalBatchFailsOnlyItsPartition(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "txn", "txn"
	createSourceTopic(t, topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		recs := make([]*kgo.Record, 100)
		for i := range recs {
			recs[i] = &kgo.Record{Partition: p, Value: []byte("plain")}
		}
		if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("e2e-txn"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	var reason string
	waitFor(t, 2*time.Minute, "partition 0 to fail and partition 1 to catch up", func() bool {
		states := map[int32]string{}
		var lag1 int64 = -1
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				states[pd.PartitionIndex] = pd.State
				if pd.PartitionIndex == 0 && pd.LastError != nil {
					reason = *pd.LastError
				}
				if pd.PartitionIndex == 1 {
					lag1 = pd.Lag
				}
			}
		}
		return states[0] == "FAILED" && states[1] == "MIRRORING" && lag1 == 0
	})
	if !strings.Contains(strings.ToLower(reason), "transaction") {
		t.Fatalf("partition 0 FAILED with %q, want a reason naming the transactional batch", reason)
	}
	dst := endOffsets(t, env.Destination, topic)
	if dst[0] != 100 {
		t.Fatalf("destination partition 0 ends at %d, want 100 (the records before the transaction)", dst[0])
	}
	if src := endOffsets(t, env.Source, topic); dst[1] != src[1] {
		t.Fatalf("partition 1: destination ends at %d, source at %d", dst[1], src[1])
	}
	// The table shows the reason under the FAILED row.
	out := mustCLI(t, "--describe", "--mirror", mirror)
	if !strings.Contains(out, "FAILED") || !strings.Contains(out, "error: ") {
		t.Fatalf("describe does not show the failure:\n%s", out)
	}

	// --start on a topic with a FAILED partition restarts it (the manual
	// recovery); on a topic that mirrors fine it is refused.
	out = mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	if want := "Started 1 mirror topic(s) in mirror txn: [txn]\n"; out != want {
		t.Fatalf("restart printed %q, want %q", out, want)
	}
	createSourceTopic(t, "txn-ok", 1, nil)
	mustCLI(t, "--start", "--topics", "txn-ok", "--mirror", mirror)
	r := cli(t, "--start", "--topics", "txn-ok", "--mirror", mirror)
	if r.code == 0 || !strings.Contains(r.stderr, "already active") {
		t.Fatalf("starting a mirroring topic again: exit %d, stderr %q; want a refusal saying it is already active", r.code, r.stderr)
	}
}

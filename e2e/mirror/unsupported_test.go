package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestUnsupportedBatchFailsOnlyItsPartition makes one partition of two
// unmirrorable: a source transaction on partition 0 stays open longer than
// the mirror's destination transaction timeout, so the destination aborts
// the replayed transaction and the source's COMMIT can no longer be placed.
// Partition 0 must go FAILED with a reason saying so, while partition 1
// mirrors completely; --start restarts the FAILED partition.
func TestUnsupportedBatchFailsOnlyItsPartition(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "unsup", "unsup"
	createSourceTopic(t, topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Partition: p, Value: []byte("plain")}
		}
		if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 100)
	produce(1, 100)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.transaction.timeout.ms": "3000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	txn := openSourceTxn(t, "e2e-unsup", topic, 1, 10) // partition 0 only
	wait.For(t, time.Minute, "the open transaction to be replayed", func() bool { return len(openMirrorTxns(t, mirror)) == 1 })
	wait.For(t, time.Minute, "the destination to abort it", func() bool { return len(openMirrorTxns(t, mirror)) == 0 })
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produce(1, 50)
	var reason string
	wait.For(t, 2*time.Minute, "partition 0 to fail and partition 1 to catch up", func() bool {
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
	if !strings.Contains(reason, "aborted or fenced") {
		t.Fatalf("partition 0 FAILED with %q, want a reason naming the destination's abort", reason)
	}
	// The destination's own ABORT sits where the source has its COMMIT.
	if src, dst := markersOf(t, env.Source, topic, 0), markersOf(t, env.Destination, topic, 0); !src[110] || len(dst) != 1 || dst[110] {
		t.Fatalf("markers: source %v, destination %v; want COMMIT and ABORT at offset 110", src, dst)
	}
	if src, dst := endOffsets(t, env.Source, topic), endOffsets(t, env.Destination, topic); dst[1] != src[1] || src[1] != 150 {
		t.Fatalf("partition 1: destination ends at %d, source at %d, want 150", dst[1], src[1])
	}
	// The table shows the reason under the FAILED row.
	r := cli(t, "--describe", "--mirror", mirror)
	if r.Code != 3 || !strings.Contains(r.Stdout, "FAILED") || !strings.Contains(r.Stdout, "error: ") {
		t.Fatalf("describe does not show the failure (exit %d, want 3):\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// --start on a topic with a FAILED partition restarts it (the manual
	// recovery); on a topic that mirrors fine it is refused.
	out := mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	if want := "Started 1 mirror topic(s) in mirror unsup: [unsup]\n"; out != want {
		t.Fatalf("restart printed %q, want %q", out, want)
	}
	createSourceTopic(t, "unsup-ok", 1, nil)
	mustCLI(t, "--start", "--topics", "unsup-ok", "--mirror", mirror)
	r = cli(t, "--start", "--topics", "unsup-ok", "--mirror", mirror)
	if r.Code == 0 || !strings.Contains(r.Stderr, "already active") {
		t.Fatalf("starting a mirroring topic again: exit %d, stderr %q; want a refusal saying it is already active", r.Code, r.Stderr)
	}
}

package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestUnsupportedBatchFailsOnlyItsPartition moves the source log start of
// partition 0 onto a transaction marker, which cannot be mirrored (leading
// fillers copy a live record; a marker is none). Partition 0 must go FAILED
// with a reason saying so, with nothing written, while partition 1 mirrors
// completely; --start restarts the FAILED partition.
func TestUnsupportedBatchFailsOnlyItsPartition(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "unsup", "unsup"
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
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("e2e-unsup"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// Offsets 0..99 plain, 100 the transaction's record, 101 its marker.
	adm := kadm.NewClient(newClient(t, env.Source, testbed.Admin))
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 101})
	if resp, err := adm.DeleteRecords(ctx, off); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, resp.Error())
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
	if !strings.Contains(reason, "transaction marker") || !strings.Contains(reason, "101") {
		t.Fatalf("partition 0 FAILED with %q, want a reason naming the transaction marker at offset 101", reason)
	}
	dst := endOffsets(t, env.Destination, topic)
	if dst[0] != 0 {
		t.Fatalf("destination partition 0 ends at %d, want 0: nothing may be written", dst[0])
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
	if want := "Started 1 mirror topic(s) in mirror unsup: [unsup]\n"; out != want {
		t.Fatalf("restart printed %q, want %q", out, want)
	}
	createSourceTopic(t, "unsup-ok", 1, nil)
	mustCLI(t, "--start", "--topics", "unsup-ok", "--mirror", mirror)
	r := cli(t, "--start", "--topics", "unsup-ok", "--mirror", mirror)
	if r.code == 0 || !strings.Contains(r.stderr, "already active") {
		t.Fatalf("starting a mirroring topic again: exit %d, stderr %q; want a refusal saying it is already active", r.code, r.stderr)
	}
}

package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestSourceTopicRecreated deletes a mirrored topic on the source and
// creates it again with more records than the destination holds: none of
// the new topic's records may be appended after the old topic's, and the
// partitions show FAILED naming the recreation.
func TestSourceTopicRecreated(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "recreated", "recreated"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 200, 51)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"mirror.metadata.refresh.interval.ms": "2000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	before := endOffsets(t, env.Destination, topic)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, env.Source, testbed.Admin))
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil || resp.Err != nil {
		t.Fatalf("delete source topic: %v %v", err, resp.Err)
	}
	wait.For(t, time.Minute, "the source topic to be created again", func() bool {
		resp, err := adm.CreateTopic(ctx, 2, int16(min(2, len(env.Source.Nodes()))), nil, topic)
		return err == nil && resp.Err == nil
	})
	produceVariety(t, env.Source, topic, 600, 52)

	wait.For(t, time.Minute, "every partition to show the recreation", func() bool {
		rows := 0
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				if pd.State != "FAILED" || !strings.Contains(deref(pd.LastError), "recreated") {
					return false
				}
				rows++
			}
		}
		return rows == 2
	})
	// Two more metadata sync rounds (the topic's fault keeps its partitions
	// undriven) give a wrong append its chance.
	waitSyncRounds(t, mirror, "cluster_id", 2)
	if after := endOffsets(t, env.Destination, topic); after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("destination end offsets moved from %v to %v: records of the recreated topic were appended", before, after)
	}
}

package mirror

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSyncSurvivesSourceOutage makes the source unreachable under a mirror
// that is in sync: the mirror keeps its state, describe shows the error on
// its partitions, and when the source is back both mirroring and metadata
// sync resume (a config changed on the source reaches the destination).
func TestSyncSurvivesSourceOutage(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "outage", "outage"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 2000, 31)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", syncedMirrorConfig(t, nil))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range env.Source.Nodes() {
		n.Kill()
	}
	t.Cleanup(func() { _ = env.Source.StartStopped(ctx) })
	wait.For(t, time.Minute, "describe to show the source outage on the partitions", func() bool {
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				if pd.LastError != nil && *pd.LastError != "" {
					return true
				}
			}
		}
		return false
	})
	states, _ := partitionStates(t, mirror, topic)
	for p, s := range states {
		if s != "MIRRORING" && s != "LOG_TRUNCATION" {
			t.Fatalf("partition %d is %s during the outage, want it to keep mirroring state", p, s)
		}
	}
	if list := mustCLI(t, "--list"); !containsLine(list, mirror) {
		t.Fatalf("mirror %s is gone during the outage:\n%s", mirror, list)
	}

	if err := env.Source.StartStopped(ctx); err != nil {
		t.Fatal(err)
	}
	alterSourceTopicConfig(t, topic, "retention.ms", "987654321")
	wait.For(t, time.Minute, "metadata sync to resume (retention.ms on the destination)", func() bool {
		return topicConfig(t, env.Destination, topic, "retention.ms") == "987654321"
	})
	produceVariety(t, env.Source, topic, 1000, 32)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	compareAll(t, topic, 2)
}

// containsLine reports whether a table printed by the CLI has a row that
// starts with name.
func containsLine(table, name string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

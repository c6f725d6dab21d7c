package multihost

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestDeadSidecar kills one sidecar with SIGKILL while its broker, in the
// same host, keeps leading mirror partitions. Only the liveness probes that
// the other hosts' sidecars send to its address can tell: within 60 s the
// partitions its broker led must be led by brokers in other hosts and
// driven by their sidecars, and caught up with identical dumps. After it
// restarts in its host, the original leaders come back and it drives its
// partitions again.
func TestDeadSidecar(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, parts = "dead", "dead", 6
	victim := env.Sidecars.Sidecar(2)
	createSourceTopic(t, topic, parts)
	produce(t, topic, 12_000, 11)
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	before := preferredLeaders(t, topic)
	led := ledBy(before, victim.BrokerID)
	if len(led) == 0 {
		t.Fatalf("broker %d leads no partition of %s: %+v", victim.BrokerID, topic, before)
	}
	t.Cleanup(func() { startSidecar(t, victim) })

	killed := time.Now()
	victim.Kill()
	produce(t, topic, 12_000, 12)
	wait.For(t, time.Until(killed.Add(60*time.Second)), "every partition caught up within 60 s of the kill", func() bool {
		return caughtUpWithout(t, mirror, topic, victim.BrokerID)
	})
	t.Logf("partitions %v of broker %d in host %s: driven from other hosts and caught up %v after the kill",
		led, victim.BrokerID, victim.Host().Name, time.Since(killed).Round(time.Millisecond))
	for p, pd := range destMetadata(t, topic) {
		if pd.Leader == victim.BrokerID {
			t.Fatalf("partition %d is still led by broker %d, whose sidecar is dead", p, victim.BrokerID)
		}
	}
	compareAll(t, topic, parts)
	if alive := metricValue(metrics(t, raftLeader(t)), "sidemirror_sidecars_alive"); alive != 2 {
		t.Fatalf("the raft leader counts %v sidecars alive, want 2", alive)
	}

	restarted := time.Now()
	startSidecar(t, victim)
	wait.For(t, 2*time.Minute, "the original leaders of "+topic, func() bool {
		now := destMetadata(t, topic)
		for p, pd := range before {
			if !slices.Equal(now[p].Replicas, pd.Replicas) || now[p].Leader != pd.Replicas[0] {
				return false
			}
		}
		return true
	})
	t.Logf("original leaders restored %v after the restart", time.Since(restarted).Round(time.Millisecond))
	produce(t, topic, 12_000, 13)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	if n := compareAll(t, topic, parts); n != 36_000 {
		t.Fatalf("compared %d records, want the 36000 written", n)
	}
	rows := partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic)
	for _, p := range led {
		if rows[p].OwnerBrokerId != victim.BrokerID {
			t.Fatalf("partition %d is driven by sidecar %d after the restart, want %d", p, rows[p].OwnerBrokerId, victim.BrokerID)
		}
	}
}

// caughtUpWithout is caughtUp asked of the sidecars other than the dead
// one, with no partition driven by it.
func caughtUpWithout(t *testing.T, mirror, topic string, dead int32) bool {
	t.Helper()
	var alive string
	for _, s := range env.Sidecars.Sidecars() {
		if s.BrokerID != dead {
			if alive != "" {
				alive += ","
			}
			alive += s.AdminAddr
		}
	}
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	rows := partitions(describeAt(t, alive, mirror), topic)
	ok := len(src) > 0 && len(rows) == len(src)
	for p, o := range src {
		pd := rows[p]
		if pd.State == "FAILED" {
			t.Fatalf("%s-%d FAILED: %s", topic, p, deref(pd.LastError))
		}
		ok = ok && dst[p] == o && pd.State == "MIRRORING" && pd.DestinationOffset == o && pd.OwnerBrokerId != dead
	}
	return ok
}

// preferredLeaders waits until every partition of topic is led by its
// first replica and returns the metadata.
func preferredLeaders(t *testing.T, topic string) map[int32]kadm.PartitionDetail {
	t.Helper()
	var md map[int32]kadm.PartitionDetail
	wait.For(t, 30*time.Second, "preferred leaders of "+topic, func() bool {
		md = destMetadata(t, topic)
		for _, pd := range md {
			if len(pd.Replicas) < 2 || pd.Leader != pd.Replicas[0] {
				return false
			}
		}
		return len(md) > 0
	})
	return md
}

// ledBy returns the partitions broker leads, sorted.
func ledBy(md map[int32]kadm.PartitionDetail, broker int32) []int32 {
	var out []int32
	for p, pd := range md {
		if pd.Leader == broker {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// startSidecar starts s in its host unless it runs.
func startSidecar(t *testing.T, s *testbed.Sidecar) {
	t.Helper()
	if s.Running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("restart sidecar %d: %v", s.BrokerID, err)
	}
}

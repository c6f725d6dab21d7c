package multihost

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/sidecar"
)

// TestSidecarCutOff cuts the raft leader's sidecar off from the other two
// sidecars (TCP between their hosts on the admin and raft ports) while a
// producer writes to the source. Its broker stays up, in the destination
// cluster and reachable by the source, and the sidecar keeps running: only
// the other sidecars can tell it is gone. Within sidecar.failover.timeout.ms
// plus 30 s the partitions its broker led must be led by other brokers and
// driven by their sidecars; from then on the cut-off sidecar must append
// nothing (the broker fences it: it no longer leads them) while the others
// append. After the link is back its partitions return to it, the mirror
// catches up and the kcat dumps of source and destination are identical.
func TestSidecarCutOff(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, parts = "cutoff", "cutoff", 6
	createSourceTopic(t, topic, parts)
	produce(t, topic, 6_000, 31)
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	victim := raftLeader(t)
	var others []string
	for _, s := range env.Sidecars.Sidecars() {
		if s != victim {
			others = append(others, s.AdminAddr)
		}
	}
	majority := strings.Join(others, ",")
	timeout := failoverTimeout(t, victim)
	before := preferredLeaders(t, topic)
	led := ledBy(before, victim.BrokerID)
	if len(led) == 0 {
		t.Fatalf("broker %d leads no partition of %s: %+v", victim.BrokerID, topic, before)
	}

	p := startProducer(t, topic, "cutoff", 500, 200, 32)
	t.Cleanup(func() { _ = env.Sidecars.Rejoin(victim) })
	cut := time.Now()
	if err := env.Sidecars.CutOff(victim); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Until(cut.Add(timeout+30*time.Second)),
		fmt.Sprintf("partitions %v of broker %d led by other brokers and driven by their sidecars", led, victim.BrokerID), func() bool {
			md := destMetadata(t, topic)
			rows := partitions(describeAt(t, majority, mirror), topic)
			for _, p := range led {
				if md[p].Leader == victim.BrokerID || md[p].Leader < 0 || rows[p].OwnerBrokerId == victim.BrokerID || rows[p].State != "MIRRORING" {
					return false
				}
			}
			return true
		})
	moved := time.Since(cut)
	t.Logf("partitions %v of broker %d (host %s, the raft leader's) moved to other hosts %v after the cut (failover timeout %v)",
		led, victim.BrokerID, victim.Host().Name, moved.Round(time.Millisecond), timeout)
	if l := raftLeader(t); l == victim {
		t.Fatalf("sidecar %d is still raft leader, cut off from both others", victim.BrokerID)
	}

	// From here on the victim's broker leads none of them: whatever the
	// cut-off sidecar appended would have to get past it. The other
	// sidecars append what the producer writes meanwhile.
	records := sidecarCounter(t, victim, "sidemirror_mirrored_records_total", mirror)
	bytes := sidecarCounter(t, victim, "sidemirror_mirrored_bytes_total", mirror)
	from := endOffsets(t, env.Destination, topic)
	wait.For(t, time.Minute, "the other sidecars to append 200 more records to each moved partition", func() bool {
		dst := endOffsets(t, env.Destination, topic)
		for _, p := range led {
			if dst[p] < from[p]+200 {
				return false
			}
		}
		return true
	})
	if got := sidecarCounter(t, victim, "sidemirror_mirrored_records_total", mirror); got != records {
		t.Fatalf("the cut-off sidecar %d appended %v records after its partitions moved away", victim.BrokerID, got-records)
	}
	if got := sidecarCounter(t, victim, "sidemirror_mirrored_bytes_total", mirror); got != bytes {
		t.Fatalf("the cut-off sidecar %d appended %v bytes after its partitions moved away", victim.BrokerID, got-bytes)
	}
	if alive := metricValue(metrics(t, raftLeader(t)), "sidemirror_sidecars_alive"); alive != 2 {
		t.Fatalf("the raft leader counts %v sidecars alive during the cut, want 2", alive)
	}
	t.Logf("the cut-off sidecar's appends stayed at %.0f records, %.0f bytes while the others appended %d records to the moved partitions",
		records, bytes, movedSince(t, topic, led, from))

	healed := time.Now()
	if err := env.Sidecars.Rejoin(victim); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 2*time.Minute, "the original leaders of "+topic+" after the link is back", func() bool {
		now := destMetadata(t, topic)
		for p, pd := range before {
			if !slices.Equal(now[p].Replicas, pd.Replicas) || now[p].Leader != pd.Replicas[0] {
				return false
			}
		}
		return true
	})
	t.Logf("original leaders restored %v after the link was back", time.Since(healed).Round(time.Millisecond))
	atHeal := p.count()
	wait.For(t, 30*time.Second, "records written after the link is back", func() bool { return p.count() >= atHeal+500 })
	p.stop()
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	rows := partitions(describeAt(t, env.Sidecars.AdminBootstrap(), mirror), topic)
	for _, p := range led {
		if rows[p].OwnerBrokerId != victim.BrokerID {
			t.Fatalf("partition %d is driven by sidecar %d after the link is back, want %d", p, rows[p].OwnerBrokerId, victim.BrokerID)
		}
	}
	if n, want := compareAll(t, topic, parts), 6_000+p.count(); n != want {
		t.Fatalf("compared %d records, want the %d written", n, want)
	}
}

// failoverTimeout returns s's sidecar.failover.timeout.ms, its default if
// the bed does not set it.
func failoverTimeout(t *testing.T, s *testbed.Sidecar) time.Duration {
	t.Helper()
	v, ok := readProps(t, s.ConfigPath())[sidecar.KeyFailoverTimeout]
	if !ok {
		return sidecar.DefaultConfig().FailoverTimeout
	}
	ms, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q in %s", sidecar.KeyFailoverTimeout, v, s.ConfigPath())
	}
	return time.Duration(ms) * time.Millisecond
}

// movedSince returns how many records the destination gained in the
// partitions led since the end offsets from.
func movedSince(t *testing.T, topic string, led []int32, from map[int32]int64) int64 {
	t.Helper()
	dst := endOffsets(t, env.Destination, topic)
	var n int64
	for _, p := range led {
		n += dst[p] - from[p]
	}
	return n
}

package mirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestFollowerFetching mirrors a topic of replication factor 2 with the
// mirror config's client.rack naming the rack of the partition's follower
// (the bed's source nodes have broker.rack rack-<id> and Kafka's
// RackAwareReplicaSelector): the leader names the follower as preferred
// read replica (KIP-392), the fetcher reads from it
// (sidemirror_follower_fetch_bytes_total), describe's lag reaches 0 with
// the leader's high watermark, and kcat dumps of source and destination
// are identical.
func TestFollowerFetching(t *testing.T) {
	dumpLogs(t)
	const topic, mirror, half = "follower-fetch", "follower-fetch", 20_000
	if len(env.Source.Nodes()) < 2 {
		t.Skip("the source has one node: no follower")
	}
	createSourceTopic(t, topic, 1, nil)
	produceVariety(t, env.Source, topic, half, 21)
	leader, replicas := sourceReplicas(t, topic)
	follower := int32(-1)
	for _, r := range replicas {
		if r != leader {
			follower = r
		}
	}
	if follower < 0 {
		t.Fatalf("partition 0 of %s has replicas %v, leader %d: no follower", topic, replicas, leader)
	}
	rack := fmt.Sprintf("rack-%d", follower)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", mirrorConfigFile(t, map[string]string{"client.rack": rack}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	produceVariety(t, env.Source, topic, half, 22)
	waitCaughtUp(t, mirror, topic, 5*time.Minute)
	if n := compareAll(t, topic, 1); n != 2*half {
		t.Fatalf("compared %d records, want %d", n, 2*half)
	}
	fromFollower, redirects := sidecarSum(t, "sidemirror_follower_fetch_bytes_total", mirror), sidecarSum(t, "sidemirror_preferred_replica_redirects_total", mirror)
	mirrored := sidecarSum(t, "sidemirror_mirrored_bytes_total", mirror)
	t.Logf("leader %d, follower %d (%s): %.0f bytes fetched from the follower, %.0f bytes mirrored, %.0f redirects",
		leader, follower, rack, fromFollower, mirrored, redirects)
	// The first fetch goes to the leader, which answers with the
	// follower and no records: every record comes from the follower.
	if redirects < 1 || fromFollower < mirrored/2 {
		t.Fatalf("%.0f bytes fetched from the follower of %.0f mirrored, %.0f redirects: the follower did not serve the fetches", fromFollower, mirrored, redirects)
	}
}

// sourceReplicas returns the leader and replicas of partition 0 of topic on
// the source.
func sourceReplicas(t *testing.T, topic string) (int32, []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics[topic].Partitions[0]
	if !ok {
		t.Fatalf("no metadata for %s-0: %+v", topic, md.Topics[topic])
	}
	return p.Leader, p.Replicas
}

// sidecarSum sums metric's series of mirror over every sidecar.
func sidecarSum(t *testing.T, metric, mirror string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var total float64
	for _, s := range env.Sidecars.Sidecars() {
		page, err := s.Metrics(ctx)
		if err != nil {
			t.Fatalf("metrics of sidecar %d: %v", s.BrokerID, err)
		}
		for line := range strings.Lines(page) {
			if strings.HasPrefix(line, metric+"{") && strings.Contains(line, `mirror="`+mirror+`"`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += v
			}
		}
	}
	return total
}

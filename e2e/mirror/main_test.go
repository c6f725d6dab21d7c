package mirror

import (
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars shared by every test of this package.
var env *testbed.Env

func TestMain(m *testing.M) {
	opts := testbed.DefaultEnvOptions()
	// Two source nodes, so that a source leader election can move a
	// partition's leadership.
	opts.Source.Nodes = 2
	// An authorizer on the source, so that ACLs can be created there and
	// their sync tested. Its clients are PLAINTEXT, hence User:ANONYMOUS, a
	// super user: every client and sidecar keeps full access.
	opts.Source.Authorizer = true
	// Client quotas measured over 2 windows of 1 s instead of 11: the
	// burst a new quota lets through, and its echo when it leaves the
	// windows, last a second, not ten (TestSourceQuota).
	// Racks on the source and Kafka's rack-aware replica selector, for
	// follower fetching (TestFollowerFetching): a client without a rack,
	// every other test's, still fetches from the leaders.
	opts.Source.Racks = map[int32]string{1: "rack-1", 2: "rack-2"}
	opts.Source.BrokerConfig = map[string]string{
		"quota.window.num":          "2",
		"quota.window.size.seconds": "1",
		"replica.selector.class":    "org.apache.kafka.common.replica.RackAwareReplicaSelector",
	}
	opts.Sidecars = true
	// SCRAM-SHA-512 on the destination's client listener besides PLAIN:
	// the sidecars' authorizer probe logs in with a temporary SCRAM user,
	// and TestReadOnlyDefaultConfig's alice with one made by kafka-configs.
	opts.Destination.SCRAM = true
	// The destination brokers set allow.everyone.if.no.acl.found=true,
	// whose value Kafka does not reveal: stated, so that the other tests
	// never depend on the probe. TestReadOnlyDefaultConfig runs without it.
	opts.SidecarConfig = map[string]string{
		"readonly.allow.everyone.if.no.acl.found": "true",
	}
	testbed.Main(m, opts, &env)
}

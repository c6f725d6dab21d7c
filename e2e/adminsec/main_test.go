package adminsec

import (
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of this package.
var env *testbed.Env

func TestMain(m *testing.M) {
	opts := testbed.DefaultEnvOptions()
	// One destination node is enough for the admin endpoint; its client
	// listener takes SCRAM-SHA-512 besides the bed's PLAIN users.
	opts.Destination.Nodes = 1
	opts.Destination.BrokerConfig = map[string]string{
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-512",
		"listener.name.broker.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
	}
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{
		"admin.security.protocol":       "SASL_PLAINTEXT",
		"admin.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
		"admin.super.users":             "User:" + testbed.Admin.Name,
	}
	testbed.Main(m, opts, &env)
}

package adminsec

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of this package. pki signs the
// destination brokers' certificates (their SCRAM listener, SASL_SSL), the
// sidecars' admin endpoint certificates and the admin clients'; peerPKI,
// a CA of its own, the sidecars' peer certificates.
var (
	env     *testbed.Env
	pki     *testbed.PKI
	peerPKI *testbed.PKI
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidemirror-adminsec-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if pki, err = testbed.NewPKI(filepath.Join(dir, "admin")); err == nil {
		peerPKI, err = testbed.NewPKI(filepath.Join(dir, "peer"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := testbed.DefaultEnvOptions()
	// One destination node is enough for the admin endpoint; its client
	// listener takes SCRAM-SHA-512 besides the bed's PLAIN users, and a
	// SASL_SSL listener with SCRAM-SHA-512 (testbed.ListenerSCRAM) is there
	// for the SASL_SSL admin endpoint to relay to.
	opts.Destination.Nodes = 1
	opts.Destination.BrokerConfig = map[string]string{
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-512",
		"listener.name.broker.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
	}
	opts.Destination.Secure = &testbed.SecureListeners{PKI: pki, SCRAM: true}
	// The source gets a SASL_SSL listener with SCRAM-SHA-512 too, for a
	// mirror whose password is a ${file:...} reference
	// (TestSecretNotInSnapshots).
	opts.Source.Secure = &testbed.SecureListeners{PKI: pki, SCRAM: true}
	opts.Sidecars = true
	opts.SidecarConfig = saslPlaintextKeys()
	// A raft snapshot whenever an entry was appended, checked every
	// second: every test's raft state goes through snapshots, and
	// TestSecretNotInSnapshots finds its mirror in one.
	opts.SidecarConfig["raft.snapshot.threshold"] = "1"
	opts.SidecarConfig["raft.snapshot.interval.ms"] = "1000"
	// Peer TLS, as a group with admin security needs (and the internal
	// APIs are then refused on the admin endpoint).
	opts.SidecarConfigFor = func(s *testbed.Sidecar) map[string]string {
		keys, err := peerPKI.PeerTLS(s)
		if err != nil {
			panic(err)
		}
		return keys
	}
	testbed.Main(m, opts, &env)
}

// saslPlaintextKeys are the sidecars' admin keys the package starts with:
// SASL_PLAINTEXT relayed to the destination's client listener.
func saslPlaintextKeys() map[string]string {
	return map[string]string{
		"admin.security.protocol":       "SASL_PLAINTEXT",
		"admin.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
		"admin.super.users":             "User:" + testbed.Admin.Name,
	}
}

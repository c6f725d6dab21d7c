package mirror

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestBootstrapBroker runs the commands of KIP-1279 section 8.2 with
// --bootstrap-server set to a destination broker as the KIP writes it
// (":port", like its ":9094"), with the destination's SASL settings in
// --command-config as Kafka's tools take them: the CLI finds a sidecar in
// the sidecar registry, and prints the KIP's outputs, the same as the same
// command against the sidecars. A source broker, a cluster without
// sidecars, gives the one-line error.
func TestBootstrapBroker(t *testing.T) {
	dumpLogs(t)
	const mirror = "bs-mirror"
	cc := filepath.Join(t.TempDir(), "client.properties")
	if err := env.Destination.WriteClientProperties(cc, testbed.Admin); err != nil {
		t.Fatal(err)
	}
	nodes := env.Destination.Nodes()
	_, port, err := net.SplitHostPort(nodes[len(nodes)-1].BrokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	broker := ":" + port
	atBroker := func(args ...string) cliResult {
		t.Helper()
		return cliAt(t, broker, append([]string{"--command-config", cc}, args...)...)
	}
	mustBroker := func(want string, args ...string) {
		t.Helper()
		r := atBroker(args...)
		if r.Code != 0 || r.Stdout != want || r.Stderr != "" {
			t.Fatalf("--bootstrap-server %s %v: exit %d\nstdout: %q\nstderr: %q\nwant stdout %q", broker, args, r.Code, r.Stdout, r.Stderr, want)
		}
	}
	// The same command against a sidecar and against the broker.
	sameAsSidecar := func(args ...string) string {
		t.Helper()
		var last string
		t.Cleanup(func() {
			if t.Failed() && last != "" {
				t.Logf("last outputs of %v:\n%s", args, last)
			}
		})
		wait.For(t, time.Minute, "the same output against a broker and a sidecar for "+strings.Join(args, " "), func() bool {
			side := cli(t, args...)
			r := atBroker(args...)
			last = "sidecar: " + side.Stdout + side.Stderr + "\nbroker: " + r.Stdout + r.Stderr
			return side.Code == 0 && r.Code == 0 && r.Stderr == "" && r.Stdout == side.Stdout && r.Stdout != ""
		})
		return cli(t, args...).Stdout
	}

	for _, topic := range []string{"bs-orders-us", "bs-orders-eu", "bs-orders-internal"} {
		createSourceTopic(t, topic, 2, nil)
		produceVariety(t, env.Source, topic, 200, 31)
	}
	mustBroker("Created mirror "+mirror+"\n", "--create", "--mirror", mirror, "--mirror-config", mirrorConfigFile(t, nil))
	mustBroker("Started 2 mirror topic(s) in mirror "+mirror+": [bs-orders-eu, bs-orders-us]\n",
		"--start", "--topics", "bs-orders-.*", "--exclude", "bs-orders-internal", "--mirror", mirror)
	waitCaughtUp(t, mirror, "bs-orders-us", 2*time.Minute)
	waitCaughtUp(t, mirror, "bs-orders-eu", 2*time.Minute)

	if list := sameAsSidecar("--list"); !strings.Contains(list, "\n"+mirror+" ") || !strings.HasPrefix(list, "MIRROR ") {
		t.Fatalf("--list printed %q, want the KIP's table with %s", list, mirror)
	}
	desc := sameAsSidecar("--describe", "--mirror", mirror)
	if n := strings.Count(desc, "MIRRORING"); n != 4 {
		t.Fatalf("--describe printed %d MIRRORING rows, want 4:\n%s", n, desc)
	}

	mustBroker("Paused mirroring for 1 topic(s) in mirror "+mirror+": [bs-orders-us]\n", "--pause", "--topics", "bs-orders-us", "--mirror", mirror)
	if states, _ := partitionStates(t, mirror, "bs-orders-us"); !allIn(states, "PAUSED") {
		t.Fatalf("after --pause through the broker bs-orders-us is %v, want PAUSED", states)
	}
	mustBroker("Resumed mirroring for 1 topic(s) in mirror "+mirror+": [bs-orders-us]\n", "--resume", "--topics", "bs-orders-us", "--mirror", mirror)
	mustBroker("Stopped mirroring for 2 topic(s) in mirror "+mirror+": [bs-orders-eu, bs-orders-us]\n", "--stop", "--topics", "bs-orders-.*", "--mirror", mirror)
	wait.For(t, time.Minute, "the stopped mirror to be deleted through the broker", func() bool {
		r := atBroker("--delete", "--mirror", mirror)
		return r.Code == 0 && r.Stdout == "Deleted mirror "+mirror+"\n"
	})

	src := env.Source.Nodes()[0].BrokerAddr
	r := cliAt(t, src, "--list")
	want := "Error: --bootstrap-server " + src + " is a Kafka broker with no sidecars registered on this cluster; point --bootstrap-server at a sidecar's admin.listener\n"
	if r.Code != 1 || r.Stdout != "" || r.Stderr != want {
		t.Fatalf("--list against a source broker: exit %d, stdout %q, stderr %q; want %q", r.Code, r.Stdout, r.Stderr, want)
	}
}

package mirror

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// TestStartWait starts a topic with --wait, spelling the options by
// unambiguous prefixes as Kafka's tools allow: the CLI returns only once
// every partition is MIRRORING with lag 0, so the destination holds every
// source record when it does; --describe filtered by --topics and --state
// then shows the partitions and exits 0.
func TestStartWait(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "waiting", "waiting"
	createSourceTopic(t, topic, 3, nil)
	produceVariety(t, env.Source, topic, 3000, 7)
	src := endOffsets(t, env.Source, topic)
	out := mustCLI(t, "--cre", "--mirror", mirror, "--mirror-c", mirrorConfigFile(t, nil))
	if want := "Created mirror " + mirror + "\n"; out != want {
		t.Fatalf("create printed %q, want %q", out, want)
	}
	r := cliAt(t, env.Sidecars.AdminBootstrap(), "--star", "--topics", topic, "--mirror", mirror, "--wait", "--timeout", "3m", "--interval", "500ms")
	dst := endOffsets(t, env.Destination, topic)
	want := fmt.Sprintf("Started 1 mirror topic(s) in mirror %s: [%s]\nCaught up: 3 partition(s) of 1 topic(s) in mirror %s are MIRRORING with lag 0 (after ", mirror, topic, mirror)
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, want) {
		t.Fatalf("--start --wait: exit %d\nstdout: %s\nstderr: %s\nwant stdout starting %q", r.Code, r.Stdout, r.Stderr, want)
	}
	t.Logf("--start --wait: %s%s", r.Stdout, r.Stderr)
	if !maps.Equal(src, dst) {
		t.Fatalf("when --wait returned the destination ended at %v, the source at %v", dst, src)
	}

	r = cli(t, "--desc", "--topics", "wait.*", "--state", "mirroring", "--mirror", mirror)
	if r.Code != 0 || strings.Count(r.Stdout, " MIRRORING\n") != 3 {
		t.Fatalf("--describe --topics --state: exit %d, want 0 and 3 MIRRORING rows:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := cli(t, "--describe", "--st", "FAILED", "--mirror", mirror); r.Code != 1 || !strings.Contains(r.Stderr, "ambiguous") {
		t.Fatalf("an ambiguous prefix: exit %d, stderr %q; want 1 naming the candidates", r.Code, r.Stderr)
	}
}

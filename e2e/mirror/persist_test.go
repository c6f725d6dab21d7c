package mirror

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// stateRecord is one line of `sidemirror state dump`.
type stateRecord struct {
	Partition int32 `json:"partition"`
	Key       struct {
		Type      int8   `json:"type"`
		Mirror    string `json:"mirror"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	} `json:"key"`
	Value *struct {
		State string `json:"state"`
	} `json:"value"`
}

// stateDump runs `sidemirror state dump` with the configuration of the
// first sidecar whose broker runs and returns the latest state of every
// partition of mirror, and the __mirror_state partition that holds them.
func stateDump(t *testing.T, mirror string) (map[string]string, int32) {
	t.Helper()
	config := ""
	for _, s := range env.Sidecars.Sidecars() {
		if env.Destination.Node(s.BrokerID).Running() {
			config = s.ConfigPath()
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Bin.Sidemirror, "state", "dump", "--config", config)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sidemirror state dump: %v\n%s", err, stderr.String())
	}
	latest := map[string]string{}
	part := int32(-1)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r stateRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("state dump printed a line that is not JSON: %q: %v", sc.Text(), err)
		}
		if r.Key.Mirror != mirror || r.Key.Type != 2 {
			continue
		}
		part = r.Partition
		k := r.Key.Topic + "-" + itoa(r.Key.Partition)
		if r.Value == nil {
			delete(latest, k)
		} else {
			latest[k] = r.Value.State
		}
	}
	return latest, part
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// TestStatesSurviveRestarts pauses one of two mirrored topics, restarts
// every sidecar and checks describe and __mirror_state; then kills the
// broker whose sidecar coordinates the mirror's state and checks that
// another one takes over: state reads and writes go on.
func TestStatesSurviveRestarts(t *testing.T) {
	dumpLogs(t)
	const mirror = "persist"
	for _, topic := range []string{"persist-a", "persist-b"} {
		createSourceTopic(t, topic, 2, nil)
		produceVariety(t, env.Source, topic, 1000, 21)
	}
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", "persist-.*", "--mirror", mirror)
	waitCaughtUp(t, mirror, "persist-a", 2*time.Minute)
	waitCaughtUp(t, mirror, "persist-b", 2*time.Minute)
	mustCLI(t, "--pause", "--topics", "persist-b", "--mirror", mirror)

	want := map[string]string{"persist-a-0": "MIRRORING", "persist-a-1": "MIRRORING", "persist-b-0": "PAUSED", "persist-b-1": "PAUSED"}
	wait.For(t, 30*time.Second, "__mirror_state to hold the states", func() bool {
		got, _ := stateDump(t, mirror)
		return equalStates(got, want)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, s := range env.Sidecars.Sidecars() {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("sidecar %d did not stop cleanly: %v", s.BrokerID, err)
		}
	}
	for _, s := range env.Sidecars.Sidecars() {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produceVariety(t, env.Source, "persist-a", 500, 22)
	produceVariety(t, env.Source, "persist-b", 500, 22)
	waitCaughtUp(t, mirror, "persist-a", 2*time.Minute)
	states, _ := partitionStates(t, mirror, "persist-b")
	if !allIn(states, "PAUSED") {
		t.Fatalf("after restarting every sidecar persist-b is %v, want PAUSED", states)
	}
	if dst := sumValues(endOffsets(t, env.Destination, "persist-b")); dst != 1000 {
		t.Fatalf("paused persist-b holds %d records on the destination after the restart, want 1000", dst)
	}

	// Kill the broker that leads the mirror's __mirror_state partition.
	_, part := stateDump(t, mirror)
	if part < 0 {
		t.Fatal("no __mirror_state record of the mirror")
	}
	leader, _ := leaderOf(t, env.Destination, "__mirror_state", part)
	node := env.Destination.Node(leader)
	node.Kill()
	t.Cleanup(func() { _ = env.Destination.StartStopped(ctx) })
	out := mustCLI(t, "--resume", "--topics", "persist-b", "--mirror", mirror)
	if out != "Resumed mirroring for 1 topic(s) in mirror persist: [persist-b]\n" {
		t.Fatalf("resume printed %q", out)
	}
	want["persist-b-0"], want["persist-b-1"] = "MIRRORING", "MIRRORING"
	var got map[string]string
	wait.For(t, 2*time.Minute, "the new coordinator to record the resumed states", func() bool {
		got, _ = stateDump(t, mirror)
		if !equalStates(got, want) {
			t.Logf("__mirror_state holds %v, want %v", got, want)
			return false
		}
		return true
	})
	if err := env.Destination.StartStopped(ctx); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, mirror, "persist-b", 2*time.Minute)
	compareAll(t, "persist-b", 2)
}

func equalStates(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

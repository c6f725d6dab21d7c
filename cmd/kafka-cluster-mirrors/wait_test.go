package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/protocol"
)

// sequenceHandler answers DescribeClusterMirrors with describes in turn
// (the last one again once they run out), and every other request as the
// fakeHandler does. onDescribe, if set, sees the count of describes.
type sequenceHandler struct {
	fakeHandler
	mu         sync.Mutex
	describes  []*protocol.DescribeClusterMirrorsResponse
	n          int
	onDescribe func(n int)
}

func (h *sequenceHandler) Handle(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	if req.Key() != protocol.KeyDescribeClusterMirrors {
		return h.fakeHandler.Handle(ctx, c, req)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	resp := h.describes[min(h.n, len(h.describes)-1)]
	h.n++
	if h.onDescribe != nil {
		h.onDescribe(h.n)
	}
	return resp
}

func (h *sequenceHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// oneTopic is a describe of mirror m with topic t's partitions.
func oneTopic(parts ...protocol.PartitionDetail) *protocol.DescribeClusterMirrorsResponse {
	return &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{{MirrorName: "m",
		Topics: []protocol.DescribedTopic{{TopicName: "t", Partitions: parts}, {TopicName: "other", Partitions: []protocol.PartitionDetail{
			partition(0, 100, 1, 99, "LOG_TRUNCATION"), // not waited for
		}}}}}}
}

func TestWait(t *testing.T) {
	resumed := &protocol.ResumeMirrorTopicsResponse{MirrorName: "m", Topics: []protocol.MirrorTopicResult{{Name: "t"}}}
	started := &protocol.StartMirrorTopicsResponse{MirrorName: "m", Topics: []protocol.MirrorTopicResult{{Name: "t"}}}
	failed := partition(1, 9, 4, 5, "FAILED")
	failed.LastError = strp("boom")
	for _, c := range []struct {
		name             string
		args             []string
		resp             protocol.Response
		describes        []*protocol.DescribeClusterMirrorsResponse
		wantOut, wantErr string
		wantCode         int
		minDescribes     int
	}{
		{
			name: "resume --wait returns once every partition mirrors with lag 0",
			args: []string{"--resume", "--topics", "t", "--mirror", "m", "--wait", "--interval", "5ms"},
			resp: resumed,
			describes: []*protocol.DescribeClusterMirrorsResponse{
				oneTopic(partition(0, 10, 5, 5, "MIRRORING"), partition(1, 3, 3, 0, "MIRRORING")),
				oneTopic(partition(0, 10, 10, 0, "LOG_TRUNCATION"), partition(1, 3, 3, 0, "MIRRORING")),
				oneTopic(partition(0, 10, 10, 0, "MIRRORING"), partition(1, -1, -1, -1, "MIRRORING")),
				oneTopic(partition(0, 10, 10, 0, "MIRRORING"), partition(1, 3, 3, 0, "MIRRORING")),
			},
			wantOut:      "Resumed mirroring for 1 topic(s) in mirror m: [t]\nCaught up: 2 partition(s) of 1 topic(s) in mirror m are MIRRORING with lag 0 (after 0s)\n",
			minDescribes: 4,
		},
		{
			name:         "a topic describe does not show yet is waited for",
			args:         []string{"--start", "--topics", "t", "--mirror", "m", "--wait", "--interval", "5ms"},
			resp:         started,
			describes:    []*protocol.DescribeClusterMirrorsResponse{{Mirrors: []protocol.DescribedMirror{{MirrorName: "m"}}}, oneTopic(partition(0, 0, 0, 0, "MIRRORING"))},
			wantOut:      "Started 1 mirror topic(s) in mirror m: [t]\nCaught up: 1 partition(s) of 1 topic(s) in mirror m are MIRRORING with lag 0 (after 0s)\n",
			minDescribes: 2,
		},
		{
			name:      "a FAILED partition ends the wait with exit 3",
			args:      []string{"--start", "--topics", "t", "--mirror", "m", "--wait", "--interval", "5ms"},
			resp:      started,
			describes: []*protocol.DescribeClusterMirrorsResponse{oneTopic(partition(0, 9, 9, 0, "MIRRORING"), failed)},
			wantOut:   "Started 1 mirror topic(s) in mirror m: [t]\n",
			wantErr:   "Error: partition t-1 is FAILED: boom\n",
			wantCode:  3,
		},
		{
			name:      "--timeout gives up with exit 4",
			args:      []string{"--resume", "--topics", "t", "--mirror", "m", "--wait", "--interval", "5ms", "--timeout", "60"},
			resp:      resumed,
			describes: []*protocol.DescribeClusterMirrorsResponse{oneTopic(partition(0, 10, 5, 5, "MIRRORING"))},
			wantOut:   "Resumed mirroring for 1 topic(s) in mirror m: [t]\n",
			wantErr:   "Error: --wait timed out after 60ms: mirror m: lag 5 record(s), 1 of 1 partition(s) not caught up\n",
			wantCode:  4,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &sequenceHandler{fakeHandler: fakeHandler{resp: map[int16]protocol.Response{c.resp.Key(): c.resp}}, describes: c.describes}
			out, errOut, code := runCLI(t, append([]string{"--bootstrap-server", startFake(t, h)}, c.args...)...)
			if out != c.wantOut || errOut != c.wantErr || code != c.wantCode {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut, c.wantCode, c.wantOut, c.wantErr)
			}
			if h.count() < c.minDescribes {
				t.Fatalf("%d describes, want at least %d", h.count(), c.minDescribes)
			}
		})
	}

	runCases(t, []cliCase{
		{name: "--wait with --stop", args: []string{"--stop", "--topics", "t", "--mirror", "m", "--wait"},
			wantErr: "Error: --wait is only valid with --start or --resume\n", wantCode: 1},
		{name: "--timeout without --wait", args: []string{"--start", "--topics", "t", "--mirror", "m", "--timeout", "10s"},
			wantErr: "Error: --timeout is only valid with --wait\n", wantCode: 1},
		{name: "bad --timeout", args: []string{"--start", "--topics", "t", "--mirror", "m", "--wait", "--timeout", "soon"},
			wantErr: "Error: --timeout \"soon\" is not a positive duration (milliseconds, or with a unit: 90s, 10m)\n", wantCode: 1},
		{name: "--watch with --list", args: []string{"--list", "--watch"},
			wantErr: "Error: --watch is only valid with --describe\n", wantCode: 1},
		{name: "--watch with --json", args: []string{"--describe", "--watch", "--json"},
			wantErr: "Error: --watch is a table; --json is not valid with it\n", wantCode: 1},
	})
}

// TestWatch runs --describe --watch until interrupted: the table again at
// every refresh, with each mirror's lag, rates and ETA.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	owned := func(p protocol.PartitionDetail, bytes int64) protocol.PartitionDetail {
		p.OwnerBrokerId, p.MirroredBytes = 2, bytes
		return p
	}
	h := &sequenceHandler{describes: []*protocol.DescribeClusterMirrorsResponse{
		oneTopic(owned(partition(0, 1000, 600, 400, "MIRRORING"), 60<<20)),
		oneTopic(owned(partition(0, 1000, 800, 200, "MIRRORING"), 80<<20)),
		oneTopic(owned(partition(0, 1000, 1000, 0, "MIRRORING"), 100<<20)),
	}, onDescribe: func(n int) {
		if n == 3 {
			cancel() // Ctrl-C after the third refresh
		}
	}}
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"kafka-cluster-mirrors", "--bootstrap-server", startFake(t, h), "--describe", "--watch", "--interval", "50ms", "--topics", "t"}, &out, &errOut)
	if code != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	s := out.String()
	if n := strings.Count(s, "Every 50ms: "); n < 2 {
		t.Fatalf("%d refreshes:\n%s", n, s)
	}
	if strings.Contains(s, "other") {
		t.Fatalf("--topics t shows other:\n%s", s)
	}
	for _, want := range []string{
		"Mirror m: lag 400 record(s)\n",
		"Mirror m: lag 200 record(s), mirroring ",
		" MB/s, ",
		" records/s, lag draining ",
		" records/s, ETA ",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("output has no %q:\n%s", want, s)
		}
	}
}

func TestWatchLine(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	prev := watchSample{at: t0, lag: 400, dst: 600, bytes: map[watchKey]int64{{"t", 0, 1}: 1 << 20, {"t", 1, 1}: 1 << 20, {"t", 2, 2}: 7 << 20}}
	for _, c := range []struct {
		cur  watchSample
		want string
	}{
		{watchSample{at: t0.Add(2 * time.Second), lag: 200, dst: 800}, "Mirror m: lag 200 record(s), mirroring 100 records/s, lag draining 100 records/s, ETA 2s"},
		// Bytes: 3 MiB in 2 s over the counters both samples have; a
		// partition whose owner changed (or new) counts from the next one.
		{watchSample{at: t0.Add(2 * time.Second), lag: 200, dst: 800, bytes: map[watchKey]int64{
			{"t", 0, 1}: 1<<20 + 2<<20, {"t", 1, 1}: 1<<20 + 1<<20, {"t", 2, 3}: 50 << 20}},
			"Mirror m: lag 200 record(s), mirroring 1.50 MB/s, 100 records/s, lag draining 100 records/s, ETA 2s"},
		// A counter that went back (a restarted sidecar) adds nothing.
		{watchSample{at: t0.Add(2 * time.Second), lag: 0, dst: 1000, bytes: map[watchKey]int64{{"t", 0, 1}: 0}},
			"Mirror m: lag 0 record(s), mirroring 0.00 MB/s, 200 records/s, caught up"},
		{watchSample{at: t0.Add(2 * time.Second), lag: 0, dst: 1000}, "Mirror m: lag 0 record(s), mirroring 200 records/s, caught up"},
		{watchSample{at: t0.Add(2 * time.Second), lag: 500, dst: 700}, "Mirror m: lag 500 record(s), mirroring 50 records/s, lag not draining"},
		// A partition whose source is unreachable has LAG -: not caught up.
		{watchSample{at: t0.Add(2 * time.Second), lag: 0, dst: 600, unreachable: 2},
			"Mirror m: lag 0 record(s) (and unknown for 2 partition(s) whose source is unreachable), mirroring 0 records/s, no ETA while the source is unreachable"},
	} {
		if got := watchLine("m", prev, c.cur); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	if got := watchLine("m", watchSample{}, prev); got != "Mirror m: lag 400 record(s)" {
		t.Errorf("first sample: %q", got)
	}
}

// TestSampleOf sums a described mirror up for --watch: lag and destination
// offsets over the partitions whose values are known, the byte counters of
// partitions with an owner that counts, the unreachable partitions.
func TestSampleOf(t *testing.T) {
	at := time.Unix(2_000_000, 0)
	counted := partition(0, 100, 90, 10, "MIRRORING")
	counted.OwnerBrokerId, counted.MirroredBytes = 1, 4096
	unreachable := partition(1, 50, 40, -1, "MIRRORING")
	unreachable.OwnerBrokerId, unreachable.MirroredBytes, unreachable.SourceUnreachableSinceMs = 2, 0, 1_999_000_000
	oldSidecar := partition(2, 10, 5, 5, "MIRRORING") // MirroredBytes -1: not counted
	oldSidecar.OwnerBrokerId = 3
	paused := partition(3, -1, -1, -1, "PAUSED")
	paused.MirroredBytes = 0 // no owner: not counted
	m := protocol.DescribedMirror{MirrorName: "m", Topics: []protocol.DescribedTopic{{TopicName: "t",
		Partitions: []protocol.PartitionDetail{counted, unreachable, oldSidecar, paused}}}}
	got := sampleOf(m, at)
	want := watchSample{at: at, lag: 15, dst: 135, unreachable: 1, bytes: map[watchKey]int64{{"t", 0, 1}: 4096, {"t", 1, 2}: 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sampleOf = %+v, want %+v", got, want)
	}
}

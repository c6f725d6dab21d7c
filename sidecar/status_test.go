package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/protocol"
)

// fakeCluster answers the describe requests of the status page from a
// lag per partition that the test changes between samples.
type fakeCluster struct {
	mu   sync.Mutex
	lags []int64 // of partitions 0, 1 of topic orders
}

func (f *fakeCluster) setLags(lags ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lags = lags
}

func (f *fakeCluster) Handle(_ context.Context, _ *protocol.ConnInfo, req protocol.Request) protocol.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req.(type) {
	case *protocol.DescribeClusterMirrorsRequest:
		var parts []protocol.PartitionDetail
		for i, lag := range f.lags {
			d := protocol.PartitionDetail{PartitionIndex: int32(i), SourceOffset: 1000, DestinationOffset: 1000 - lag, Lag: lag,
				State: "MIRRORING", LastMirrorEpoch: -1, OwnerBrokerId: int32(i + 1)}
			parts = append(parts, d)
		}
		bad := "no route to <script>alert(1)</script>"
		parts = append(parts, protocol.PartitionDetail{PartitionIndex: int32(len(f.lags)), SourceOffset: -1, DestinationOffset: 7, Lag: -1,
			State: "FAILED", OwnerBrokerId: -1, LastError: &bad})
		return &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{{
			MirrorName: "east<b>", SourceBootstrap: "src:9092", SourceClusterId: "abc",
			Topics: []protocol.DescribedTopic{{TopicName: "orders", Partitions: parts}},
		}}}
	case *protocol.DescribeSidecarsRequest:
		admin := "10.0.0.2:9191"
		return &protocol.DescribeSidecarsResponse{LeaderId: 2, Sidecars: []protocol.DescribedSidecar{
			{BrokerId: 1, RaftAddress: "10.0.0.1:9192", Voter: true, Version: "v1"},
			{BrokerId: 2, RaftAddress: "10.0.0.2:9192", AdminAddress: &admin, Voter: true, Version: "v1"},
		}}
	}
	return req.ResponseKind()
}

// TestStatusPage samples a fake cluster three times while the lag of
// partition 0 drains and checks the page: mirror, partitions with state,
// offsets and lag, sparklines that fall, sidecars and the leader, the
// refresh, and that text from the cluster is escaped.
func TestStatusPage(t *testing.T) {
	p := newStatusPage(1, zaptest.NewLogger(t))
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	f := &fakeCluster{}

	srv := httptest.NewServer(p)
	defer srv.Close()
	code, body := get(t, srv.URL)
	if code != http.StatusOK || !strings.Contains(body, "no answer from the raft group yet") {
		t.Fatalf("before the first sample: %d %s", code, body)
	}

	for _, lags := range [][]int64{{600, 0}, {300, 0}, {0, 0}} {
		f.setLags(lags...)
		p.sample(context.Background(), f)
		clock = clock.Add(10 * time.Second)
	}
	code, body = get(t, srv.URL)
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="2">`,
		"sidecar of broker 1",
		"<title>lag since 10:00:00 UTC, peak 600</title>",
		"raft leader: broker 2",
		"east&lt;b&gt;", "source src:9092 (cluster abc)", "3 partitions",
		`lag <b class="lag">0</b> records`,
		`<td>orders</td><td class="n">0</td><td class="state">MIRRORING</td><td class="n">1000</td><td class="n">1000</td><td class="n">0</td>`,
		`<tr class="bad"><td>orders</td><td class="n">2</td><td class="state">FAILED</td><td class="n">?</td><td class="n">7</td><td class="n">?</td>`,
		"no route to &lt;script&gt;alert(1)&lt;/script&gt;",
		"<td>broker 1</td>",
		`<td class="n">2</td><td>raft leader</td><td>10.0.0.2:9192</td><td>10.0.0.2:9191</td>`,
		`<td class="n">1</td><td>voter (this sidecar)</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "east<b>") {
		t.Error("the page holds unescaped text from the cluster")
	}

	// Sparklines: one of the mirror and one per partition; partition 0's
	// three samples fall from the top (y 1) to the bottom (y 23), from the
	// left edge to the right, ten seconds apart.
	lines := regexp.MustCompile(`<polyline points="([^"]*)"/>`).FindAllStringSubmatch(body, -1)
	if len(lines) != 3 { // the mirror, partitions 0 and 1; the FAILED one has no known lag
		t.Fatalf("%d sparklines, want 3:\n%s", len(lines), body)
	}
	for _, l := range lines[:2] { // the mirror's total and partition 0 drain alike
		pts := strings.Fields(l[1])
		if len(pts) != 3 {
			t.Fatalf("sparkline %q has %d points, want 3", l[1], len(pts))
		}
		var xs, ys []float64
		for _, pt := range pts {
			x, y, _ := strings.Cut(pt, ",")
			xf, _ := strconv.ParseFloat(x, 64)
			yf, _ := strconv.ParseFloat(y, 64)
			xs, ys = append(xs, xf), append(ys, yf)
		}
		if ys[0] != 1 || ys[1] != 12 || ys[2] != 23 {
			t.Errorf("sparkline %q: y %v, want 1, 12, 23 (lag 600, 300, 0 of peak 600)", l[1], ys)
		}
		if xs[0] != 0 || xs[1] != sparkWidth/2 || xs[2] != sparkWidth {
			t.Errorf("sparkline %q: x %v, want 0, %d, %d", l[1], xs, sparkWidth/2, sparkWidth)
		}
	}

	// Samples older than the window are dropped.
	clock = clock.Add(statusWindow)
	f.setLags(5, 0)
	p.sample(context.Background(), f)
	_, body = get(t, srv.URL)
	lines = regexp.MustCompile(`<polyline points="([^"]*)"/>`).FindAllStringSubmatch(body, -1)
	if len(lines) != 3 || len(strings.Fields(lines[1][1])) != 1 {
		t.Fatalf("after the window: sparklines %v, want partition 0's with its last sample only", lines)
	}
}

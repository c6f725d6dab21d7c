package coordinator

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestComparePartition checks the failback prefix check on two clusters
// written record by record (one batch each) with identical content.
func TestComparePartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write := func(t *testing.T, cl *kgo.Client, topic string, values ...string) {
		t.Helper()
		for i, v := range values {
			r := &kgo.Record{Topic: topic, Value: []byte(v), Timestamp: time.UnixMilli(int64(1_700_000_000_000 + i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	seq := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strconv.Itoa(i)
		}
		return out
	}
	common := seq("v", 5)
	for _, tc := range []struct {
		name      string
		dst, src  []string
		wantAt    int64
		wantExtra int64
		prefix    bool
	}{
		{name: "equal", dst: common, src: common, prefix: true},
		{name: "prefix", dst: common, src: append(append([]string{}, common...), "s5", "s6"), prefix: true},
		{name: "longer", dst: append(append([]string{}, common...), "v5", "v6"), src: common, wantAt: 5, wantExtra: 2},
		{name: "diverged", dst: append(append([]string{}, common...), "d5", "d6"), src: append(append([]string{}, common...), "s5", "s6", "s7"), wantAt: 5, wantExtra: 2},
		{name: "from the start", dst: seq("d", 3), src: seq("s", 4), wantAt: 0, wantExtra: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dcl, scl := kfakeClient(t, 1), kfakeClient(t, 1)
			write(t, dcl, "t", tc.dst...)
			write(t, scl, "t", tc.src...)
			dl, err := openLog(ctx, dcl, "t")
			if err != nil {
				t.Fatal(err)
			}
			sl, err := openLog(ctx, scl, "t")
			if err != nil {
				t.Fatal(err)
			}
			d, err := comparePartition(ctx, dl, sl, 0)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.prefix && d != nil:
				t.Fatalf("want a prefix, got %s", d)
			case !tc.prefix && d == nil:
				t.Fatal("want a divergence, got a prefix")
			case !tc.prefix && (d.Offset != tc.wantAt || d.Extra != tc.wantExtra || !d.Exact):
				t.Fatalf("got %s (exact %v), want offset %d and %d records", d, d.Exact, tc.wantAt, tc.wantExtra)
			}
		})
	}
}

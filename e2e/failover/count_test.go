package failover

import (
	"strings"
	"testing"
	"time"
)

func TestCount(t *testing.T) {
	d := func(seq int64, p int32, off int64) Delivery { return Delivery{Seq: seq, Partition: p, Offset: off} }
	acked := []int64{1, 2, 3, 4, 5, 6}
	onSource := []Delivery{d(1, 0, 0), d(2, 1, 0), d(3, 0, 1)}
	// The destination holds 1..5 (6 never arrived), 4 twice; the group
	// re-reads 3, reads 4 twice and never reads 5.
	destTopic := []int64{1, 3, 4, 2, 4, 5}
	onDest := []Delivery{d(3, 0, 1), d(4, 0, 2), d(4, 1, 2)}
	o := Count("x", acked, onSource, onDest, destTopic)
	want := Outcome{Tool: "x", OnDestination: 5, Lost: 1, ReRead: 2, Skipped: 1, Bound: -1}
	if o != want {
		t.Fatalf("Count = %+v, want %+v", o, want)
	}
	if o := Count("y", acked, onSource, nil, acked); o.ReRead != 0 || o.Skipped != 3 || o.Lost != 0 {
		t.Fatalf("a group that never resumes: %+v, want 0 re-read, 3 skipped, 0 lost", o)
	}
}

func TestUnsynced(t *testing.T) {
	onSource := []Delivery{{1, 0, 0}, {2, 0, 1}, {3, 1, 0}, {4, 1, 1}, {5, 2, 0}}
	// Partition 0 synced at 1, partition 1 at 2 (all synced), partition 2
	// never synced.
	if got := Unsynced(onSource, map[int32]int64{0: 1, 1: 2}); got != 2 {
		t.Fatalf("Unsynced = %d, want 2", got)
	}
}

func TestTable(t *testing.T) {
	out := Table("planned failover", []Outcome{
		{Tool: "sidemirror", OnDestination: 10, Bound: 0, Time: 1500 * time.Millisecond},
		{Tool: "mm2", OnDestination: 10, ReRead: 7, Bound: -1, Time: 3 * time.Second},
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "planned failover" || !strings.HasPrefix(lines[1], "TOOL") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[3]); len(f) != 7 || f[0] != "mm2" || f[3] != "7" || f[5] != "-" || f[6] != "3.0s" {
		t.Fatalf("mm2 row %q", lines[3])
	}
}

func TestSeqValue(t *testing.T) {
	v := encodeSeq(4711)
	if len(v) != valueWidth {
		t.Fatalf("value of %d bytes, want %d", len(v), valueWidth)
	}
	if n, err := decodeSeq(v); err != nil || n != 4711 {
		t.Fatalf("decodeSeq = %d, %v", n, err)
	}
	if _, err := decodeSeq([]byte("hello")); err == nil {
		t.Fatal("a value without a number decoded")
	}
}

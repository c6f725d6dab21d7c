package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	a := []string{"0 1 1 1 k v chaos-seq=p:0", "1 2 1 1 k w chaos-seq=p:1"}
	tests := []struct {
		name     string
		src, dst []string
		want     string
	}{
		{"equal", a, a, ""},
		{"differs", a, []string{a[0], "1 2 1 1 k x chaos-seq=p:1"}, "record 1 differs"},
		{"shorter", a, a[:1], "lacks 1 records"},
		{"longer", a[:1], a, "1 records more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.src, tc.dst)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Compare = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSeqStats(t *testing.T) {
	dumps := [][]string{
		{"0 1 1 1 k v chaos-seq=p:0", "1 1 1 1 k v other=1,chaos-seq=p:1", "2 1 1 1 k v chaos-seq=p:1"},
		{"0 1 1 1 k v chaos-seq=q:0", "1 1 -1 -1   "},
	}
	dups, gaps := SeqStats(dumps, map[string]int{"p": 3, "q": 1})
	if dups != 1 || gaps != 1 {
		t.Fatalf("dups %d gaps %d, want 1 and 1 (p:1 twice, p:2 missing)", dups, gaps)
	}
}

func TestReport(t *testing.T) {
	r := Report{Seed: 9, Duration: 4 * time.Minute, Faults: map[Kind]int{KillSidecar: 2}, Records: 10, Converged: 3 * time.Second}
	if !r.OK() || !strings.Contains(r.String(), "CHAOS_SEED=9") || !strings.Contains(r.String(), "kill-sidecar") {
		t.Fatalf("report:\n%s", r)
	}
	r.Converged = 61 * time.Second
	if r.OK() {
		t.Fatal("a run that converged after 61 s passed")
	}
}

func TestTable(t *testing.T) {
	src := Table([]string{"0 1 5 3 key-1 one ", "1 1 5 3 key-2 two ", "2 1 5 -1 key-1  ", "3 1 5 5 key-2 three "})
	if len(src) != 1 || src["key-2"] != "three" {
		t.Fatalf("table %v, want key-2=three alone", src)
	}
	// The destination holds a filler copy and compacted another way: the
	// same table.
	dst := Table([]string{"1 1 5 5 key-2 three ", "2 1 5 5 key-2 three ", "3 1 5 5 key-2 three "})
	if d := CompareTables(src, dst); d != "" {
		t.Fatal(d)
	}
	if d := CompareTables(src, map[string]string{"key-2": "two"}); !strings.Contains(d, "key-2") {
		t.Fatalf("CompareTables = %q", d)
	}
}

// TestReportLagging: a run whose destination never caught up fails, even
// when the wait ended within the bar, and the report names the partition.
func TestReportLagging(t *testing.T) {
	r := Report{Seed: 3, Duration: 4 * time.Minute, Converged: 30 * time.Second,
		Lagging:  []string{"chaos-plain-2 source end 900 destination end 870"},
		Workload: Stats{Acked: map[string]int{"idem": 900}, Commits: 4, Aborts: 1}}
	s := r.String()
	if r.OK() || !strings.Contains(s, "NOT converged") || !strings.Contains(s, "chaos-plain-2 source end 900") ||
		!strings.Contains(s, "900 idempotent records acknowledged, 4 transactions committed, 1 aborted") {
		t.Fatalf("OK %v, report:\n%s", r.OK(), s)
	}
}

// TestReportRepeatedMarker: a partition a destination coordinator's
// repeated marker stopped still fails the run, and the report says that it
// was the only thing wrong; any other failure beside it gives a plain FAIL.
func TestReportRepeatedMarker(t *testing.T) {
	reason := "fetcher: exactness invariant violated: the destination holds two transaction markers of producer ID 2002, epoch 0, " +
		"at offsets 11 and 12, where the source has one marker and then a record: the destination's transaction coordinator wrote the marker again"
	waited := "fetcher: exactness invariant violated: the destination log end offset of chaos/chaos-txn/0 is 620 after the transaction marker " +
		"at offset 618 of sidemirror:chaos:chaos-txn:0:1001 (producer ID 1002, epoch 4): the destination wrote a control batch the source " +
		"does not have (a transaction coordinator sends a marker again when it moved or timed out between writing the markers and completing the transaction)"
	if !RepeatedMarker(reason) || !RepeatedMarker(waited) || RepeatedMarker("fetcher: the destination aborted or fenced a replayed transaction") {
		t.Fatal("RepeatedMarker does not tell the repeated marker from another permanent failure")
	}
	r := Report{Seed: 140, Duration: 4 * time.Minute, Converged: 20 * time.Second,
		Failed: []string{"chaos-txn-0"}, RepeatedMarker: []string{"chaos-txn-0: " + reason}}
	if s := r.String(); r.OK() || !strings.Contains(s, "only by markers a destination coordinator wrote twice") || !strings.Contains(s, "chaos-txn-0: fetcher") {
		t.Fatalf("OK %v, report:\n%s", r.OK(), s)
	}
	r.Failed = append(r.Failed, "chaos-txn-1")
	if s := r.String(); strings.Contains(s, "only by markers") || !strings.Contains(s, "result: FAIL\n") {
		t.Fatalf("a second FAILED partition, not a repeated marker's, left the report:\n%s", s)
	}
}

// TestStoppedPrefix: the source's records up to the destination's last
// one are what a partition stopped by repeated markers must hold; a source
// record right after it means the destination wrote a control batch where
// the source has data.
func TestStoppedPrefix(t *testing.T) {
	src := []string{"9 1 1 1 k a ", "10 1 1 1 k b ", "12 1 1 1 k c ", "13 1 1 1 k d "} // a marker at 11
	prefix, problem := StoppedPrefix(src, []string{"9 1 1 1 k a ", "10 1 1 1 k b "})
	if problem != "" || len(prefix) != 2 || prefix[1] != src[1] {
		t.Fatalf("StoppedPrefix = %q, %q; want offsets 9 and 10 and no problem", prefix, problem)
	}
	if _, problem := StoppedPrefix(src, src[:1]); !strings.Contains(problem, "record at offset 10") {
		t.Fatalf("StoppedPrefix with the destination ending after offset 9: problem %q, want the record at 10 named", problem)
	}
	if prefix, problem := StoppedPrefix(src[:1], nil); len(prefix) != 0 || problem != "" {
		t.Fatalf("StoppedPrefix of an empty destination = %q, %q", prefix, problem)
	}
}

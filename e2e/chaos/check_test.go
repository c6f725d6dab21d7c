package chaos

import (
	"maps"
	"slices"
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

// shiftedPartition is a transactional partition on the source (records at
// 0 and 1, a COMMIT at 2, a record at 3, a COMMIT at 4, end 5) and its
// destination after the coordinator wrote the first COMMIT twice (2 and 3):
// everything from source offset 3 on is one offset later.
func shiftedPartition() (src, dst Dumps, srcControls, dstControls map[int64]ControlBatch) {
	src = Dumps{
		Uncommitted: []string{"0 1 1 1 k a ", "1 1 1 1 k b ", "3 1 1 1 k c "},
		Committed:   []string{"0 1 1 1 k a ", "1 1 1 1 k b ", "3 1 1 1 k c "},
	}
	dst = Dumps{
		Uncommitted: []string{"0 1 1 1 k a ", "1 1 1 1 k b ", "4 1 1 1 k c "},
		Committed:   []string{"0 1 1 1 k a ", "1 1 1 1 k b ", "4 1 1 1 k c "},
	}
	srcControls = map[int64]ControlBatch{2: {7, 0, "COMMIT"}, 4: {7, 0, "COMMIT"}}
	dstControls = map[int64]ControlBatch{2: {1002, 4, "COMMIT"}, 3: {1002, 4, "COMMIT"}, 5: {1002, 4, "COMMIT"}}
	return src, dst, srcControls, dstControls
}

// TestAlignUnshifted: identical dumps and ends pass without a shift, as
// Compare's equal dumps did; any difference fails.
func TestAlignUnshifted(t *testing.T) {
	src, _, _, _ := shiftedPartition()
	a, problem := Align(src, src, 5, 5)
	if problem != "" || a.Shift != 0 || len(a.Steps) != 0 {
		t.Fatalf("Align of identical dumps = %+v, %q", a, problem)
	}
	differs := Dumps{Uncommitted: src.Uncommitted, Committed: []string{src.Committed[0], "1 1 1 1 k x ", src.Committed[2]}}
	longer := Dumps{Uncommitted: append(slices.Clone(src.Uncommitted), "4 1 1 1 k d "), Committed: src.Committed}
	for _, tc := range []struct {
		name           string
		src, dst       Dumps
		srcEnd, dstEnd int64
		want           string
	}{
		{"a committed record differs", src, differs, 5, 5, "read_committed record 1 differs"},
		{"a record missing", src, Dumps{Uncommitted: src.Uncommitted[:2], Committed: src.Committed}, 5, 5, "lacks 1 records"},
		{"the destination behind", src, src, 5, 4, "end offsets: source 5, destination 4"},
		{"an extra offset after a last record with no gap", longer, longer, 5, 6, "no gap"},
	} {
		if _, problem := Align(tc.src, tc.dst, tc.srcEnd, tc.dstEnd); !strings.Contains(problem, tc.want) {
			t.Errorf("%s: problem %q, want %q", tc.name, problem, tc.want)
		}
	}
}

// TestAlignRepeatedMarker: a shift of 1 across the gap of a marker the
// destination holds twice passes, is confirmed by the control batches, and
// is reported without counting as a duplicate, a gap or a failure.
func TestAlignRepeatedMarker(t *testing.T) {
	src, dst, sc, dc := shiftedPartition()
	a, problem := Align(src, dst, 5, 6)
	if problem != "" || a.Shift != 1 || len(a.Steps) != 1 {
		t.Fatalf("Align = %+v, %q; want a shift of 1", a, problem)
	}
	if st := a.Steps[0]; st.SrcFrom != 2 || st.SrcTo != 3 || st.DstFrom != 2 || st.DstTo != 4 || st.By != 1 {
		t.Fatalf("step %+v, want the source's gap 2..2 and the destination's 2..3", st)
	}
	if problem := a.Confirm(sc, dc); problem != "" {
		t.Fatal(problem)
	}
	line := a.Describe("chaos-txn-1")
	if line != "chaos-txn-1 +1 from destination offset 4 (marker repeated at 3)" {
		t.Fatalf("Describe = %q", line)
	}
	r := Report{Seed: 1, Duration: 4 * time.Minute, Converged: 5 * time.Second, Shifted: []string{line}}
	if s := r.String(); !r.OK() || !strings.Contains(s, "shifted by repeated destination markers: "+line) ||
		!strings.Contains(s, "duplicates 0, gaps 0") || !strings.Contains(s, "result: PASS") {
		t.Fatalf("OK %v, report:\n%s", r.OK(), s)
	}

	// A repeat after the last record shows in the end offsets only.
	tail := Dumps{Uncommitted: src.Uncommitted, Committed: src.Committed}
	a, problem = Align(tail, tail, 5, 6)
	dcTail := map[int64]ControlBatch{2: {1002, 4, "COMMIT"}, 4: {1002, 4, "COMMIT"}, 5: {1002, 4, "COMMIT"}}
	if problem != "" || a.Shift != 1 || a.Confirm(sc, dcTail) != "" || a.Describe("p") != "p +1 from destination offset 6 (marker repeated at 5)" {
		t.Fatalf("a repeat after the last record: %+v, %q", a, problem)
	}

	// Three copies of one marker, then a second repeat further on.
	src3 := Dumps{Uncommitted: []string{"0 1 1 1 k a ", "2 1 1 1 k b ", "4 1 1 1 k c "}}
	src3.Committed = src3.Uncommitted
	dst3 := Dumps{Uncommitted: []string{"0 1 1 1 k a ", "4 1 1 1 k b ", "7 1 1 1 k c "}}
	dst3.Committed = dst3.Uncommitted
	a, problem = Align(src3, dst3, 5, 8)
	sc3 := map[int64]ControlBatch{1: {7, 0, "COMMIT"}, 3: {7, 0, "ABORT"}}
	dc3 := map[int64]ControlBatch{1: {9, 0, "COMMIT"}, 2: {9, 0, "COMMIT"}, 3: {9, 0, "COMMIT"}, 5: {9, 0, "ABORT"}, 6: {9, 0, "ABORT"}}
	if problem != "" || a.Shift != 3 || a.Confirm(sc3, dc3) != "" {
		t.Fatalf("two steps: %+v, %q", a, problem)
	}
	if got := a.Describe("chaos-txn-0"); got != "chaos-txn-0 +3: +2 from destination offset 4 (marker repeated at 2 and 3), +1 from destination offset 7 (marker repeated at 6)" {
		t.Fatalf("Describe = %q", got)
	}
}

// TestAlignShiftFails: a shift without a gap on the source, a shift that
// falls, a record that differs after the shift, read_committed records
// placed elsewhere than the read_uncommitted alignment says, and extra
// offsets that are not repeated markers all fail.
func TestAlignShiftFails(t *testing.T) {
	src, dst, sc, dc := shiftedPartition()
	noGap := Dumps{Uncommitted: []string{"0 1 1 1 k a ", "2 1 1 1 k b ", "4 1 1 1 k c "}}
	noGap.Committed = noGap.Uncommitted
	if _, problem := Align(src, noGap, 5, 6); !strings.Contains(problem, "the shift grows from 0 to 1 where the source has no gap") {
		t.Errorf("a shift without a gap: problem %q", problem)
	}
	back := Dumps{Uncommitted: []string{"0 1 1 1 k a ", "1 1 1 1 k b ", "2 1 1 1 k c "}}
	back.Committed = back.Uncommitted
	if _, problem := Align(src, back, 5, 5); !strings.Contains(problem, "the shift falls from 0 to -1") {
		t.Errorf("a falling shift: problem %q", problem)
	}
	after := Dumps{Uncommitted: []string{dst.Uncommitted[0], dst.Uncommitted[1], "4 1 1 1 k x "}, Committed: dst.Committed}
	if _, problem := Align(src, after, 5, 6); !strings.Contains(problem, "read_uncommitted record 2 differs") {
		t.Errorf("a record differing after the shift: problem %q", problem)
	}
	afterCommitted := Dumps{Uncommitted: dst.Uncommitted, Committed: []string{dst.Committed[0], dst.Committed[1], "4 1 1 1 k x "}}
	if _, problem := Align(src, afterCommitted, 5, 6); !strings.Contains(problem, "read_committed record 2 differs") {
		t.Errorf("a committed record differing after the shift: problem %q", problem)
	}
	elsewhere := Dumps{Uncommitted: dst.Uncommitted, Committed: []string{dst.Committed[0], dst.Committed[1], "3 1 1 1 k c "}}
	if _, problem := Align(src, elsewhere, 5, 6); !strings.Contains(problem, "read_committed record 2 is at destination offset 3") {
		t.Errorf("read_committed apart from read_uncommitted: problem %q", problem)
	}
	if _, problem := Align(src, dst, 5, 5); !strings.Contains(problem, "the shift falls from 1 to 0") {
		t.Errorf("the destination's end not shifted: problem %q", problem)
	}

	a, _ := Align(src, dst, 5, 6)
	for name, controls := range map[string]map[int64]ControlBatch{
		"another producer": {2: {1002, 4, "COMMIT"}, 3: {1003, 4, "COMMIT"}},
		"another epoch":    {2: {1002, 4, "COMMIT"}, 3: {1002, 5, "COMMIT"}},
		"another type":     {2: {1002, 4, "COMMIT"}, 3: {1002, 4, "ABORT"}},
		"no control batch": {2: {1002, 4, "COMMIT"}},
		"the marker lost":  {3: {1002, 4, "COMMIT"}},
	} {
		b := Alignment{Steps: slices.Clone(a.Steps), Shift: a.Shift}
		if problem := b.Confirm(sc, controls); !strings.Contains(problem, "not the source's control batches and 1 repeated markers") {
			t.Errorf("%s at destination offset 3: problem %q", name, problem)
		}
	}
	if problem := a.Confirm(map[int64]ControlBatch{4: {7, 0, "COMMIT"}}, dc); problem == "" {
		t.Error("a source gap without its control batch confirmed")
	}
}

// TestParseLogDump reads DumpLogSegments --deep-iteration (Kafka 4.1.1) of
// a segment with a transaction, its COMMIT written twice, an aborted
// transaction and a plain record.
func TestParseLogDump(t *testing.T) {
	out := `Dumping chaos-txn-1/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 1002 producerEpoch: 4 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 79 magic: 2 compresscodec: none crc: 3119408947 isvalid: true
| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []
| offset: 1 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: 1 headerKeys: []
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1002 producerEpoch: 4 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 79 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 1647743395 isvalid: true
| offset: 2 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3
baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1002 producerEpoch: 4 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 157 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 1647743395 isvalid: true
| offset: 3 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3
baseOffset: 4 lastOffset: 4 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1003 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 235 CreateTime: 1700000000000 size: 70 magic: 2 compresscodec: none crc: 2745013302 isvalid: true
| offset: 4 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []
baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1003 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 305 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 2192039139 isvalid: true
| offset: 5 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 3
baseOffset: 6 lastOffset: 6 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 383 CreateTime: 1700000000000 size: 70 magic: 2 compresscodec: none crc: 2899362152 isvalid: true
| offset: 6 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []
`
	controls, end, err := ParseLogDump(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]ControlBatch{2: {1002, 4, "COMMIT"}, 3: {1002, 4, "COMMIT"}, 5: {1003, 0, "ABORT"}}
	if end != 7 || !maps.Equal(controls, want) {
		t.Fatalf("ParseLogDump = %v, end %d; want %v, end 7", controls, end, want)
	}
	if _, repeats := gapBatches(controls, 2, 4); !slices.Equal(repeats, []int64{3}) {
		t.Fatalf("repeats %v, want [3]", repeats)
	}
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// SeqHeader is the header every record of the plain topic's workload
// carries: "<producer>:<n>", n counting from 0 per producer.
const SeqHeader = "chaos-seq"

// Kcat dumps partition p of topic on c with kcat (testbed.DumpFormat),
// reading with isolation ("read_committed" or "read_uncommitted"). It is
// the checker's only way to read a cluster: an independent client, not
// this repository's code.
func Kcat(ctx context.Context, c *testbed.Cluster, topic string, p int32, isolation string) ([]string, error) {
	out, err := c.DumpPartition(ctx, testbed.Admin, topic, p, testbed.DumpFormat, "-X", "isolation.level="+isolation)
	if err != nil {
		return nil, fmt.Errorf("%s-%d (%s): %w", topic, p, isolation, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		lines = nil
	}
	return lines, nil
}

// Compare compares a source and a destination dump record for record and
// describes the first difference ("" when they are equal).
func Compare(src, dst []string) string {
	for i := range min(len(src), len(dst)) {
		if src[i] != dst[i] {
			return fmt.Sprintf("record %d differs:\nsource:      %.300q\ndestination: %.300q", i, src[i], dst[i])
		}
	}
	switch {
	case len(src) > len(dst):
		return fmt.Sprintf("the destination lacks %d records from %.300q on", len(src)-len(dst), src[len(dst)])
	case len(dst) > len(src):
		return fmt.Sprintf("the destination has %d records more, from %.300q on", len(dst)-len(src), dst[len(src)])
	}
	return ""
}

// offsetOf is the offset of a dump's line (its first field), -1 if none.
func offsetOf(line string) int64 {
	f, _, _ := strings.Cut(line, " ")
	o, err := strconv.ParseInt(f, 10, 64)
	if err != nil {
		return -1
	}
	return o
}

// StoppedPrefix is what the source's dump src must match of a partition
// that stopped behind transaction markers of its own, a destination
// coordinator's repeats (RepeatedMarker): the source's records up to the
// destination's last record. Past it the destination holds only control
// batches, which a dump does not show, and the first of them is the
// source's marker: problem is set when the source has a record at that
// offset instead (a control batch the destination wrote where the source
// has data, right after the last record it holds).
func StoppedPrefix(src, dst []string) (prefix []string, problem string) {
	end := int64(0)
	if len(dst) > 0 {
		end = offsetOf(dst[len(dst)-1]) + 1
	}
	for _, l := range src {
		switch o := offsetOf(l); {
		case o >= 0 && o < end:
			prefix = append(prefix, l)
		case o == end:
			problem = fmt.Sprintf("the source has a record at offset %d, where the destination holds a control batch after its last record: %.300q", end, l)
		}
	}
	return prefix, problem
}

// RepeatedMarker tells a partition FAILED for good because a destination
// transaction coordinator wrote a transaction marker twice: Kafka's own
// recovery after a broker failure between the marker and the transaction's
// completion, which a stock broker cannot be kept from doing
// (docs/chaos-testing.md). reason is the partition's describe error.
func RepeatedMarker(reason string) bool {
	// The start's resume check and the wait after a resumed marker name the
	// coordinator; the wait after a replayed marker names the extra batch.
	return strings.Contains(reason, "coordinator wrote the marker") ||
		strings.Contains(reason, "wrote a control batch the source does not have (a transaction coordinator sends a marker again")
}

// SeqStats counts, in dumps of the plain topic, records whose SeqHeader
// value appears more than once (duplicates) and sequence numbers that
// acked (producer -> how many records the source acknowledged) promises but
// that no record carries (gaps).
func SeqStats(dumps [][]string, acked map[string]int) (dups, gaps int) {
	seen := make(map[string]map[int]int)
	for _, lines := range dumps {
		for _, l := range lines {
			prod, n, ok := seqOf(l)
			if !ok {
				continue
			}
			if seen[prod] == nil {
				seen[prod] = make(map[int]int)
			}
			seen[prod][n]++
		}
	}
	for _, byN := range seen {
		for _, c := range byN {
			dups += c - 1
		}
	}
	for prod, n := range acked {
		for i := range n {
			if seen[prod][i] == 0 {
				gaps++
			}
		}
	}
	return dups, gaps
}

// seqOf finds "chaos-seq=<producer>:<n>" in a dump line's headers.
func seqOf(line string) (string, int, bool) {
	i := strings.LastIndex(line, SeqHeader+"=")
	if i < 0 {
		return "", 0, false
	}
	v := line[i+len(SeqHeader)+1:]
	if j := strings.IndexAny(v, ", "); j >= 0 {
		v = v[:j]
	}
	prod, num, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return "", 0, false
	}
	return prod, n, true
}

// Report is what a run prints at the end.
type Report struct {
	Seed       uint64
	Duration   time.Duration
	Faults     map[Kind]int  // faults injected (and undone) by kind
	Workload   Stats         // what the workload wrote on the source
	Records    int           // records compared, both isolation levels
	Duplicates int           // see SeqStats
	Gaps       int           // see SeqStats
	Converged  time.Duration // from the end of the last fault, or the workload's end if later, until the end offsets matched
	// SinceLastFault is when the end offsets matched, from the end of the
	// last fault.
	SinceLastFault time.Duration
	Lagging        []string // partitions whose end offsets still differed when the wait for convergence ended
	Failed         []string // partitions FAILED in describe
	// RepeatedMarker are the partitions of Failed that a destination
	// coordinator's repeated marker stopped (see RepeatedMarker), each
	// checked identical to the source up to its last record
	// (StoppedPrefix): the one failure that faults to the destination can
	// force on an exact-offset mirror of stock Kafka. They are left out of
	// the convergence wait and of the comparison beyond that record, and
	// still fail the run.
	RepeatedMarker []string
	// Shifted are the partitions whose destination offsets run ahead of the
	// source's by the markers a destination coordinator wrote twice, which
	// the fetcher recorded and mirrored past: each aligned by the checker
	// (Align, Confirm) and described by Alignment.Describe. They pass: the
	// extra offsets are control batches, not records, so they are neither
	// duplicates nor gaps.
	Shifted  []string
	Problems []string // every difference found
}

// MaxConvergence is issue 14's bar: the destination's end offsets equal
// the source's at most this long after the last fault was undone (or after
// the workload's last record, when the source took that one later).
const MaxConvergence = 60 * time.Second

// OK reports whether the run met issue 14's bar.
func (r Report) OK() bool {
	return r.Duplicates == 0 && r.Gaps == 0 && len(r.Lagging) == 0 && len(r.Failed) == 0 && len(r.Problems) == 0 &&
		r.Converged <= MaxConvergence
}

// onlyRepeatedMarkers reports whether the run met the bar but for the
// partitions in RepeatedMarker.
func (r Report) onlyRepeatedMarkers() bool {
	return len(r.RepeatedMarker) > 0 && len(r.RepeatedMarker) == len(r.Failed) &&
		r.Duplicates == 0 && r.Gaps == 0 && len(r.Lagging) == 0 && len(r.Problems) == 0 && r.Converged <= MaxConvergence
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: CHAOS_SEED=%d CHAOS_DURATION=%s\n", r.Seed, r.Duration)
	total := 0
	for _, k := range Kinds() {
		if n := r.Faults[k]; n > 0 {
			fmt.Fprintf(&b, "  faults %-24s %d\n", k, n)
			total += n
		}
	}
	acked := 0
	for _, n := range r.Workload.Acked {
		acked += n
	}
	fmt.Fprintf(&b, "  workload: %d idempotent records acknowledged, %d transactions committed, %d aborted, %d compacted-topic writes, %d records consumed by the group\n",
		acked, r.Workload.Commits, r.Workload.Aborts, r.Workload.Overwrites, r.Workload.GroupRecords)
	converged := fmt.Sprintf("converged %s after the last fault and the workload's end (%s after the last fault)",
		r.Converged.Round(time.Millisecond), r.SinceLastFault.Round(time.Millisecond))
	if len(r.Lagging) > 0 {
		converged = fmt.Sprintf("NOT converged %s after the last fault and the workload's end", r.Converged.Round(time.Second))
	}
	fmt.Fprintf(&b, "  faults total %d, records checked %d, duplicates %d, gaps %d, %s (at most %s)\n",
		total, r.Records, r.Duplicates, r.Gaps, converged, MaxConvergence)
	for _, l := range r.Lagging {
		fmt.Fprintf(&b, "  lagging: %s\n", l)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(&b, "  FAILED partition: %s\n", f)
	}
	for _, f := range r.RepeatedMarker {
		fmt.Fprintf(&b, "  FAILED by a repeated destination marker, checked up to its last record: %s\n", f)
	}
	for _, sh := range r.Shifted {
		fmt.Fprintf(&b, "  shifted by repeated destination markers: %s\n", sh)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	switch {
	case r.OK():
		b.WriteString("  result: PASS\n")
	case r.onlyRepeatedMarkers():
		b.WriteString("  result: FAIL, only by markers a destination coordinator wrote twice (everything else passed)\n")
	default:
		b.WriteString("  result: FAIL\n")
	}
	return b.String()
}

// Table is what a compacted topic's dump says each key holds: the value of
// its last record, keys whose last record is a tombstone left out. Two
// clusters compact on their own schedules (and the destination holds
// fillers where the source has holes), so compacted topics are compared by
// their tables, not record for record. Keys and values must hold no
// spaces (the workload's do not).
func Table(lines []string) map[string]string {
	t := make(map[string]string)
	for _, l := range lines {
		f := strings.Fields(l) // offset, timestamp, key length, value length, key, value, headers
		if len(f) < 5 {
			continue
		}
		if f[3] == "-1" {
			delete(t, f[4])
			continue
		}
		v := ""
		if len(f) > 5 {
			v = f[5]
		}
		t[f[4]] = v
	}
	return t
}

// CompareTables describes the first key whose value differs ("" if none).
func CompareTables(src, dst map[string]string) string {
	keys := make([]string, 0, len(src)+len(dst))
	for k := range src {
		keys = append(keys, k)
	}
	for k := range dst {
		if _, ok := src[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		s, inSrc := src[k]
		d, inDst := dst[k]
		if s != d || inSrc != inDst {
			return fmt.Sprintf("key %q: source %q (present %v), destination %q (present %v)", k, s, inSrc, d, inDst)
		}
	}
	return ""
}

// Dumps are one side's kcat dumps (DumpFormat) of a partition at both
// isolation levels.
type Dumps struct {
	Uncommitted, Committed []string
}

// Step is one place where a partition's destination offsets move further
// ahead of the source's: a gap in both logs (offsets no record holds in
// their read_uncommitted dumps: control batches, or compaction holes) that
// is By offsets wider on the destination. The offset ranges are half-open;
// To is the offset of the first record after the gap, or the end offset
// for a gap after the last record.
type Step struct {
	SrcFrom, SrcTo int64
	DstFrom, DstTo int64
	By             int64
	// Repeats are the destination's extra control batches in the gap, each
	// right behind a control batch of the same producer ID, epoch and type
	// (Confirm); empty until confirmed.
	Repeats []int64
}

// Alignment is how a partition's destination lines up with its source:
// destination offset = source offset + the By of every Step before it.
type Alignment struct {
	Steps []Step
	Shift int64 // at the end: the destination's end offset is the source's plus Shift
}

// shiftAt is the shift of a source record at offset s.
func (a Alignment) shiftAt(s int64) int64 {
	k := int64(0)
	for _, st := range a.Steps {
		if st.SrcTo <= s {
			k += st.By
		}
	}
	return k
}

// splitLine is a dump line's offset (-1 if it has none) and the rest of it
// (timestamp, key, value, headers).
func splitLine(line string) (int64, string) {
	f, rest, _ := strings.Cut(line, " ")
	o, err := strconv.ParseInt(f, 10, 64)
	if err != nil || o < 0 {
		return -1, line
	}
	return o, rest
}

// Align checks a partition's destination against its source, from the
// dumps alone: the same records (timestamp, key, value, headers) in the
// same order at both isolation levels, each at the source's offset plus a
// shift k that starts at 0 and grows only where a destination coordinator
// wrote a marker twice (the fetcher then records the extra offset and
// mirrors on). srcEnd and dstEnd are the end offsets (high watermarks) the
// dumps reach.
//
// A consumer's dump shows records only, not control batches, so what Align
// can check is the shape: k grows only across a gap in the destination's
// offsets that comes where the source has a gap too (an offset no record
// holds: in these topics a control batch), by exactly how much wider the
// destination's gap is; it never falls, and the read_committed records sit
// where the read_uncommitted alignment puts them. Whether each extra offset
// is a repeated marker is for Confirm, which reads the control batches with
// Kafka's DumpLogSegments. A partition without a shift passes exactly when
// its dumps are identical and its end offsets equal.
func Align(src, dst Dumps, srcEnd, dstEnd int64) (a Alignment, problem string) {
	ps, pd := int64(-1), int64(-1) // the last records' offsets
	su, du := src.Uncommitted, dst.Uncommitted
	for i := range min(len(su), len(du)) {
		s, srest := splitLine(su[i])
		d, drest := splitLine(du[i])
		if s < 0 || d < 0 {
			return a, fmt.Sprintf("read_uncommitted record %d has no offset:\nsource:      %.300q\ndestination: %.300q", i, su[i], du[i])
		}
		if srest != drest {
			return a, fmt.Sprintf("read_uncommitted record %d differs:\nsource:      %.300q\ndestination: %.300q", i, su[i], du[i])
		}
		if p := a.step(ps, s, pd, d); p != "" {
			return a, fmt.Sprintf("read_uncommitted record %d: %s:\nsource:      %.300q\ndestination: %.300q", i, p, su[i], du[i])
		}
		ps, pd = s, d
	}
	switch {
	case len(su) > len(du):
		return a, fmt.Sprintf("read_uncommitted: the destination lacks %d records from %.300q on", len(su)-len(du), su[len(du)])
	case len(du) > len(su):
		return a, fmt.Sprintf("read_uncommitted: the destination has %d records more, from %.300q on", len(du)-len(su), du[len(su)])
	}
	if p := a.step(ps, srcEnd, pd, dstEnd); p != "" {
		return a, fmt.Sprintf("end offsets: source %d, destination %d: %s", srcEnd, dstEnd, p)
	}
	sc, dc := src.Committed, dst.Committed
	for i := range min(len(sc), len(dc)) {
		s, srest := splitLine(sc[i])
		d, drest := splitLine(dc[i])
		if srest != drest || s < 0 {
			return a, fmt.Sprintf("read_committed record %d differs:\nsource:      %.300q\ndestination: %.300q", i, sc[i], dc[i])
		}
		if want := s + a.shiftAt(s); d != want {
			return a, fmt.Sprintf("read_committed record %d is at destination offset %d, where the read_uncommitted records put source offset %d at %d:\nsource:      %.300q\ndestination: %.300q",
				i, d, s, want, sc[i], dc[i])
		}
	}
	switch {
	case len(sc) > len(dc):
		return a, fmt.Sprintf("read_committed: the destination lacks %d records from %.300q on", len(sc)-len(dc), sc[len(dc)])
	case len(dc) > len(sc):
		return a, fmt.Sprintf("read_committed: the destination has %d records more, from %.300q on", len(dc)-len(sc), dc[len(sc)])
	}
	return a, ""
}

// step checks the offsets from the previous records (ps on the source, pd
// on the destination, -1 before the first) to the next ones (s and d, or
// the end offsets), and records a Step where the destination's gap is the
// wider one.
func (a *Alignment) step(ps, s, pd, d int64) string {
	gs, gd := s-ps-1, d-pd-1
	switch {
	case gs < 0 || gd < 0:
		return fmt.Sprintf("offsets not increasing (source %d after %d, destination %d after %d)", s, ps, d, pd)
	case gd == gs:
		return ""
	case gd < gs:
		return fmt.Sprintf("source offset %d at destination offset %d: the shift falls from %d to %d", s, d, a.Shift, d-s)
	case gs == 0:
		return fmt.Sprintf("source offset %d at destination offset %d: the shift grows from %d to %d where the source has no gap (its previous record is at %d, the destination's at %d)",
			s, d, a.Shift, d-s, ps, pd)
	}
	a.Steps = append(a.Steps, Step{SrcFrom: ps + 1, SrcTo: s, DstFrom: pd + 1, DstTo: d, By: gd - gs})
	a.Shift += gd - gs
	return ""
}

// ControlBatch is a control batch as Kafka's DumpLogSegments prints it.
type ControlBatch struct {
	ProducerID int64
	Epoch      int16
	Type       string // the marker: COMMIT or ABORT
}

// sameMarker reports whether c repeats b: same producer ID, epoch and type.
func (c ControlBatch) sameMarker(b ControlBatch) bool {
	return c.ProducerID == b.ProducerID && c.Epoch == b.Epoch && c.Type == b.Type
}

// ParseLogDump reads the output of Kafka's DumpLogSegments --deep-iteration
// over a partition's segments: its control batches by offset, and the
// offset after the last batch (what the dumped log holds is below it).
func ParseLogDump(out string) (controls map[int64]ControlBatch, end int64, err error) {
	controls = map[int64]ControlBatch{}
	fields := func(line string) map[string]string {
		m := map[string]string{}
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if k, ok := strings.CutSuffix(f[i], ":"); ok {
				m[k] = f[i+1]
			}
		}
		return m
	}
	inControl := false
	for line := range strings.Lines(out) {
		switch {
		case strings.HasPrefix(line, "baseOffset:"):
			m := fields(line)
			base, err1 := strconv.ParseInt(m["baseOffset"], 10, 64)
			last, err2 := strconv.ParseInt(m["lastOffset"], 10, 64)
			pid, err3 := strconv.ParseInt(m["producerId"], 10, 64)
			epoch, err4 := strconv.ParseInt(m["producerEpoch"], 10, 16)
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				return nil, 0, fmt.Errorf("DumpLogSegments batch %q: %w", strings.TrimSpace(line), err)
			}
			end = max(end, last+1)
			inControl = m["isControl"] == "true"
			if inControl {
				for o := base; o <= last; o++ {
					controls[o] = ControlBatch{ProducerID: pid, Epoch: int16(epoch)}
				}
			}
		case inControl && strings.HasPrefix(line, "| offset:"):
			m := fields(line)
			o, err := strconv.ParseInt(m["offset"], 10, 64)
			if c, ok := controls[o]; err == nil && ok {
				c.Type = m["endTxnMarker"]
				controls[o] = c
			}
		}
	}
	return controls, end, nil
}

// Confirm checks every Step of a against the control batches of both logs
// (ParseLogDump): in each gap, the destination holds the source's control
// batches, in the same order and of the same types, and besides them
// exactly By repeats, each right behind a control batch of the same
// producer ID, epoch and type (what a coordinator that wrote a marker
// twice leaves); it fills in each Step's Repeats.
func (a *Alignment) Confirm(src, dst map[int64]ControlBatch) string {
	for i := range a.Steps {
		st := &a.Steps[i]
		srcSeq, srcRep := gapBatches(src, st.SrcFrom, st.SrcTo)
		dstSeq, dstRep := gapBatches(dst, st.DstFrom, st.DstTo)
		if !slices.Equal(srcSeq, dstSeq) || int64(len(dstRep)-len(srcRep)) != st.By {
			return fmt.Sprintf("the destination's offsets %d..%d (%d more than the source's %d..%d) are not the source's control batches and %d repeated markers: source %s, destination %s",
				st.DstFrom, st.DstTo-1, st.By, st.SrcFrom, st.SrcTo-1, st.By, describeGap(src, st.SrcFrom, st.SrcTo), describeGap(dst, st.DstFrom, st.DstTo))
		}
		st.Repeats = dstRep[len(srcRep):]
	}
	return ""
}

// gapBatches is what a gap [from, to) of a log holds: the types of its
// control batches ("none" at an offset without one), leaving out the
// repeats, whose offsets it returns apart.
func gapBatches(controls map[int64]ControlBatch, from, to int64) (seq []string, repeats []int64) {
	for o := from; o < to; o++ {
		c, ok := controls[o]
		if !ok {
			seq = append(seq, "none")
			continue
		}
		if prev, ok := controls[o-1]; ok && c.sameMarker(prev) {
			repeats = append(repeats, o)
			continue
		}
		seq = append(seq, c.Type)
	}
	return seq, repeats
}

func describeGap(controls map[int64]ControlBatch, from, to int64) string {
	var parts []string
	for o := from; o < to; o++ {
		if c, ok := controls[o]; ok {
			parts = append(parts, fmt.Sprintf("%d %s of producer %d epoch %d", o, c.Type, c.ProducerID, c.Epoch))
		} else {
			parts = append(parts, fmt.Sprintf("%d no control batch", o))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Describe is the report's line for a shifted partition name, e.g.
// "chaos-txn-1 +1 from destination offset 1178 (marker repeated at 1177)".
func (a Alignment) Describe(name string) string {
	var parts []string
	for _, st := range a.Steps {
		if len(st.Repeats) == 0 {
			parts = append(parts, fmt.Sprintf("+%d in destination offsets %d..%d", st.By, st.DstFrom, st.DstTo-1))
			continue
		}
		at := make([]string, len(st.Repeats))
		for i, r := range st.Repeats {
			at[i] = strconv.FormatInt(r, 10)
		}
		parts = append(parts, fmt.Sprintf("+%d from destination offset %d (marker repeated at %s)", st.By, st.Repeats[len(st.Repeats)-1]+1, strings.Join(at, " and ")))
	}
	if len(parts) == 1 {
		return name + " " + parts[0]
	}
	return fmt.Sprintf("%s +%d: %s", name, a.Shift, strings.Join(parts, ", "))
}

package chaos

import (
	"context"
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
	Problems       []string // every difference found
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

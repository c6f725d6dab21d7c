package failover

import (
	"fmt"
	"strings"
	"time"
)

// Delivery is one record a consumer of the group was handed: its sequence
// number (the record id in its value) and where it was read.
type Delivery struct {
	Seq       int64
	Partition int32
	Offset    int64
}

// Outcome is what one tool's failover did to the group.
type Outcome struct {
	Tool string
	// OnDestination counts the distinct record ids the destination topic
	// holds after the failover.
	OnDestination int
	// Lost counts records the source acknowledged that never reached the
	// destination (the replication lag at an unplanned failover).
	Lost int
	// ReRead counts deliveries on the destination of records the group had
	// already been handed (on the source, or earlier on the destination).
	ReRead int
	// Skipped counts records the destination holds that the group was never
	// handed, on either cluster.
	Skipped int
	// Bound is the most re-reads the goal allows, -1 when there is none:
	// the deliveries on the source at or after the group offsets the
	// destination held at the failover (what the source had not synced).
	Bound int
	// Time runs from the start of the failover until the group has read the
	// destination topic to its end.
	Time time.Duration
}

// Count computes an Outcome from the records the source acknowledged, the
// group's deliveries on the source and then on the destination, and the
// record ids the destination topic holds (a duplicate in the topic is
// listed twice).
func Count(tool string, acked []int64, onSource, onDest []Delivery, destTopic []int64) Outcome {
	o := Outcome{Tool: tool, Bound: -1}
	seen := map[int64]bool{}
	for _, d := range onSource {
		seen[d.Seq] = true
	}
	for _, d := range onDest {
		if seen[d.Seq] {
			o.ReRead++
		}
		seen[d.Seq] = true
	}
	held := map[int64]bool{}
	for _, s := range destTopic {
		held[s] = true
	}
	o.OnDestination = len(held)
	for s := range held {
		if !seen[s] {
			o.Skipped++
		}
	}
	for _, s := range acked {
		if !held[s] {
			o.Lost++
		}
	}
	return o
}

// Unsynced counts the deliveries on the source at or after the group's
// offsets that the destination held at the failover (a partition the
// destination had no offset for counts from 0): the records the group
// re-reads at most if the destination's offsets are the source's.
func Unsynced(onSource []Delivery, synced map[int32]int64) int {
	n := 0
	for _, d := range onSource {
		if d.Offset >= synced[d.Partition] {
			n++
		}
	}
	return n
}

// Table renders one scenario's outcomes.
func Table(title string, rows []Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", title)
	fmt.Fprintf(&b, "%-12s %14s %10s %10s %10s %12s %8s\n", "TOOL", "ON-DESTINATION", "LOST", "RE-READ", "SKIPPED", "REREAD-BOUND", "TIME")
	for _, r := range rows {
		bound := "-"
		if r.Bound >= 0 {
			bound = fmt.Sprint(r.Bound)
		}
		fmt.Fprintf(&b, "%-12s %14d %10d %10d %10d %12s %7.1fs\n", r.Tool, r.OnDestination, r.Lost, r.ReRead, r.Skipped, bound, r.Time.Seconds())
	}
	return b.String()
}

package fetcher

import (
	"fmt"
	"time"

	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Partition names one mirrored partition: the mirror it belongs to and the
// topic and partition, which are the same on source and destination.
type Partition struct {
	Mirror    string
	Topic     string
	Partition int32
}

// String returns mirror/topic/partition.
func (p Partition) String() string {
	return fmt.Sprintf("%s/%s/%d", p.Mirror, p.Topic, p.Partition)
}

// State is the mirroring state of a partition: the codes of the one
// partition state machine (internal/partstate) that the coordinator, the
// state store and describe share. They are stable: they are stored in
// __mirror_state and sent in internal RPCs (DESIGN.md D16).
type State = partstate.State

// The states of DESIGN.md D12 and D16. The fetcher itself uses UNKNOWN,
// LOG_TRUNCATION, MIRRORING, STOPPING (its driver is being removed), STOPPED
// (removed) and FAILED, moving between them as partstate's table says;
// PAUSING and PAUSED belong to the coordinator.
const (
	StateUnknown       = partstate.Unknown
	StateLogTruncation = partstate.LogTruncation
	StateMirroring     = partstate.Mirroring
	StatePausing       = partstate.Pausing
	StatePaused        = partstate.Paused
	StateStopping      = partstate.Stopping
	StateStopped       = partstate.Stopped
	StateFailed        = partstate.Failed
)

// PartitionStatus is a snapshot of one partition, as Status returns it and as
// OnStateChange receives it.
type PartitionStatus struct {
	Partition
	State State

	// SourceHighWatermark and SourceLogStartOffset come from the last fetch
	// response of the leader (while fetched from a follower: the high
	// watermark from the leader's ListOffsets, every second, and the log
	// start offset of the last leader answer); DestinationLogEndOffset from the last ListOffsets or produce
	// response of the local broker. -1 when unknown.
	SourceHighWatermark, SourceLogStartOffset, DestinationLogEndOffset int64

	// Lag is SourceHighWatermark - DestinationLogEndOffset, -1 when unknown.
	// While the source is unreachable it is the lag at the last known
	// source high watermark.
	Lag int64

	// LagTime is the lag in time: how long ago the destination last held
	// every record the source had, as of the moment a fetch was sent whose
	// high watermark the destination has reached since (the age of the
	// oldest source record not yet on the destination is never more). It
	// is the time since the driver started while the partition has never
	// caught up, and it keeps growing while the source cannot be fetched
	// from: a caught-up partition shows about one fetch round trip (up to
	// the fetch wait when idle).
	LagTime time.Duration

	// FromFollower is set while the partition is fetched from a source
	// follower, Follower: a KIP-392 preferred read replica that its leader
	// named for the mirror's client.rack. SourceHighWatermark stays the
	// leader's (ListOffsets), not the follower's, which trails it.
	FromFollower bool
	Follower     int32

	// LastFetch is when a fetch of the partition from the source last
	// succeeded; zero if none has since the driver started.
	LastFetch time.Time

	// SourceUnreachableSince is set while the source cannot be reached for
	// the partition: no fetch succeeded for SourceUnreachableAfter and
	// fetches or source look-ups failed since (or a fetch hangs). It is the
	// time of the last successful fetch, or the driver's start if there was
	// none. Zero: reachable (or FAILED, which says why on its own).
	SourceUnreachableSince time.Time

	// LastError is the reason when FAILED, or the last retriable error
	// until appends succeed again.
	LastError string

	// Permanent is set on a FAILED partition that a restart would resume
	// past something it cannot repair (a replayed transaction the
	// destination aborted, another writer's records): only an operator
	// should restart it.
	Permanent bool

	// RecordsMirrored and BytesMirrored count source records and batch
	// bytes appended by this Manager (rebuilt batches count their live
	// records and all their bytes); FillerRecords counts filler records
	// written to close gaps and compaction holes, copies inside rebuilt
	// batches included (DESIGN.md D2).
	RecordsMirrored, BytesMirrored, FillerRecords int64
}

// String shows every field, e.g. for logs: the embedded Partition's String
// would otherwise stand for the whole status.
func (s PartitionStatus) String() string {
	unreachable := "-"
	if !s.SourceUnreachableSince.IsZero() {
		unreachable = s.SourceUnreachableSince.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s %s source-hw=%d source-log-start=%d destination-leo=%d lag=%d lag-time=%s unreachable-since=%s records=%d bytes=%d fillers=%d last-error=%q",
		s.Partition, s.State, s.SourceHighWatermark, s.SourceLogStartOffset, s.DestinationLogEndOffset, s.Lag,
		s.LagTime.Round(time.Millisecond), unreachable, s.RecordsMirrored, s.BytesMirrored, s.FillerRecords, s.LastError)
}

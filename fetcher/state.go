package fetcher

import "fmt"

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

// State is the mirroring state of a partition. The codes are stable: they are
// stored in __mirror_state and sent in internal RPCs (DESIGN.md D16).
type State int8

// The states of DESIGN.md D12 and D16. The fetcher itself uses UNKNOWN,
// LOG_TRUNCATION, MIRRORING, STOPPING, STOPPED and FAILED; PAUSING and PAUSED
// belong to the coordinator.
const (
	StateUnknown       State = 0
	StateLogTruncation State = 1
	StateMirroring     State = 2
	StatePausing       State = 3
	StatePaused        State = 4
	StateStopping      State = 5
	StateStopped       State = 6
	StateFailed        State = 7
)

var stateNames = [...]string{
	StateUnknown:       "UNKNOWN",
	StateLogTruncation: "LOG_TRUNCATION",
	StateMirroring:     "MIRRORING",
	StatePausing:       "PAUSING",
	StatePaused:        "PAUSED",
	StateStopping:      "STOPPING",
	StateStopped:       "STOPPED",
	StateFailed:        "FAILED",
}

// String returns the state's name as describe shows it, e.g. "MIRRORING".
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// PartitionStatus is a snapshot of one partition, as Status returns it and as
// OnStateChange receives it.
type PartitionStatus struct {
	Partition
	State State

	// SourceHighWatermark and SourceLogStartOffset come from the last fetch
	// response; DestinationLogEndOffset from the last ListOffsets or produce
	// response of the local broker. -1 when unknown.
	SourceHighWatermark, SourceLogStartOffset, DestinationLogEndOffset int64

	// Lag is SourceHighWatermark - DestinationLogEndOffset, -1 when unknown.
	Lag int64

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
	return fmt.Sprintf("%s %s source-hw=%d source-log-start=%d destination-leo=%d lag=%d records=%d bytes=%d fillers=%d last-error=%q",
		s.Partition, s.State, s.SourceHighWatermark, s.SourceLogStartOffset, s.DestinationLogEndOffset, s.Lag,
		s.RecordsMirrored, s.BytesMirrored, s.FillerRecords, s.LastError)
}

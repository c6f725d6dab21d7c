package statestore

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/sidemirror/sidemirror/internal/partstate"
)

// Partition state codes (DESIGN.md D16), as stored: the int8 codes of the
// one partition state machine (internal/partstate).
const (
	StateUnknown       = int8(partstate.Unknown)
	StateLogTruncation = int8(partstate.LogTruncation)
	StateMirroring     = int8(partstate.Mirroring)
	StatePausing       = int8(partstate.Pausing)
	StatePaused        = int8(partstate.Paused)
	StateStopping      = int8(partstate.Stopping)
	StateStopped       = int8(partstate.Stopped)
	StateFailed        = int8(partstate.Failed)
	// StateNotRecorded is PreviousState when no previous state was recorded
	// (the KIP's default of 16).
	StateNotRecorded = int8(partstate.NotRecorded)
)

// StateName returns the name of a state code, such as "MIRRORING", or
// "STATE_<code>" for a code this build does not know (a newer writer's).
func StateName(code int8) string { return partstate.State(code).String() }

// ParseState returns the code of a state name, case-insensitively. It
// accepts the names StateName returns for known codes.
func ParseState(name string) (int8, bool) {
	s, ok := partstate.Parse(name)
	return int8(s), ok
}

// PartitionStateVersion is the value version this build writes.
const PartitionStateVersion int16 = 0

// Tags of the tagged fields of a PartitionState value.
const tagOffsetMap = 0

// PartitionState is the value of a TypePartitionState record (and of
// TypeLastMirrorEpochs records): the persisted state of one mirror partition.
//
// Encoding, version 0 (big-endian; compact strings and arrays and tagged
// fields as in Kafka's flexible versions):
//
//	Version           int16  0
//	State             int8
//	PreviousState     int8
//	RetryAttempt      int16
//	Reason            compact string
//	LastSourceOffset  int64
//	SourceEpochs      compact array of {Epoch int32, StartOffset int64, tagged fields}
//	WriterLeaderEpoch int32
//	WriterBrokerID    int32
//	UpdatedMs         int64
//	tagged fields:
//	  tag 0 OffsetMap compact array of {SourceOffset int64, DestinationOffset int64, tagged fields}
//
// Compatibility rule: later versions keep this layout and add fields only
// as tagged fields, so every decoder reads every version, skipping the tags
// it does not know (and, for versions above 0, any bytes after the tagged
// fields). A version below 0 is malformed.
type PartitionState struct {
	// State is the partition's state code (StateMirroring, ...).
	State int8
	// PreviousState is the state before the last transition, or
	// StateNotRecorded.
	PreviousState int8
	// RetryAttempt counts the automatic retries while FAILED.
	RetryAttempt int16
	// Reason says why the partition FAILED; empty otherwise.
	Reason string
	// LastSourceOffset is the next source offset to mirror, the destination
	// log end offset when the record was written; -1 if unknown.
	LastSourceOffset int64
	// SourceEpochs is the source leader epoch chain of the mirrored log, in
	// order of StartOffset, for divergence checks.
	SourceEpochs []EpochStart
	// WriterLeaderEpoch is the destination leader epoch of the partition
	// when its owner wrote the record; the coordinator fences writers whose
	// epoch is older.
	WriterLeaderEpoch int32
	// WriterBrokerID is the broker beside which the writer runs.
	WriterBrokerID int32
	// UpdatedMs is the writer's wall clock in Unix milliseconds.
	UpdatedMs int64
	// OffsetMap holds the offset shifts of a translate-mode topic
	// (mirror.offsets=translate): one entry per shift. Tagged field 0.
	OffsetMap []OffsetShift
}

// EpochStart is one entry of a leader epoch chain: the first offset written
// in a leader epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// OffsetShift maps a source offset to the destination offset where a
// translate-mode topic wrote it; later offsets shift by the same amount up to
// the next entry.
type OffsetShift struct {
	SourceOffset      int64
	DestinationOffset int64
}

// Element sizes without their tagged fields (whose empty form is one byte).
const (
	epochStartSize  = 4 + 8 + 1
	offsetShiftSize = 8 + 8 + 1
)

// AppendTo appends the encoded value, version PartitionStateVersion, to dst.
func (p *PartitionState) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, PartitionStateVersion)
	dst = kbin.AppendInt8(dst, p.State)
	dst = kbin.AppendInt8(dst, p.PreviousState)
	dst = kbin.AppendInt16(dst, p.RetryAttempt)
	dst = kbin.AppendCompactString(dst, p.Reason)
	dst = kbin.AppendInt64(dst, p.LastSourceOffset)
	dst = kbin.AppendCompactArrayLen(dst, len(p.SourceEpochs))
	for _, e := range p.SourceEpochs {
		dst = kbin.AppendInt32(dst, e.Epoch)
		dst = kbin.AppendInt64(dst, e.StartOffset)
		dst = kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	dst = kbin.AppendInt32(dst, p.WriterLeaderEpoch)
	dst = kbin.AppendInt32(dst, p.WriterBrokerID)
	dst = kbin.AppendInt64(dst, p.UpdatedMs)
	if len(p.OffsetMap) == 0 {
		return kbin.AppendUvarint(dst, 0)
	}
	var m []byte
	m = kbin.AppendCompactArrayLen(m, len(p.OffsetMap))
	for _, s := range p.OffsetMap {
		m = kbin.AppendInt64(m, s.SourceOffset)
		m = kbin.AppendInt64(m, s.DestinationOffset)
		m = kbin.AppendUvarint(m, 0)
	}
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendUvarint(dst, tagOffsetMap)
	dst = kbin.AppendUvarint(dst, uint32(len(m)))
	return append(dst, m...)
}

// ReadPartitionState decodes a value written by any version (see
// PartitionState). Errors wrap ErrMalformed. Empty arrays decode as nil.
func ReadPartitionState(b []byte) (PartitionState, error) {
	r := kbin.Reader{Src: b}
	version := r.Int16()
	if !r.Ok() {
		return PartitionState{}, malformed("value of %d bytes is too short", len(b))
	}
	if version < 0 {
		return PartitionState{}, malformed("value version %d", version)
	}
	p := PartitionState{
		State:            r.Int8(),
		PreviousState:    r.Int8(),
		RetryAttempt:     r.Int16(),
		Reason:           r.CompactString(),
		LastSourceOffset: r.Int64(),
	}
	n, err := arrayLen(&r, epochStartSize, "SourceEpochs")
	if err != nil {
		return PartitionState{}, err
	}
	if n > 0 {
		p.SourceEpochs = make([]EpochStart, n)
		for i := range p.SourceEpochs {
			p.SourceEpochs[i] = EpochStart{Epoch: r.Int32(), StartOffset: r.Int64()}
			if err := skipTags(&r); err != nil {
				return PartitionState{}, err
			}
		}
	}
	p.WriterLeaderEpoch = r.Int32()
	p.WriterBrokerID = r.Int32()
	p.UpdatedMs = r.Int64()
	if !r.Ok() {
		return PartitionState{}, malformed("value is truncated")
	}
	err = readTags(&r, func(tag uint32, data []byte) error {
		if tag != tagOffsetMap {
			return nil // a later version's field
		}
		m := kbin.Reader{Src: data}
		n, err := arrayLen(&m, offsetShiftSize, "OffsetMap")
		if err != nil {
			return err
		}
		if n > 0 {
			p.OffsetMap = make([]OffsetShift, n)
			for i := range p.OffsetMap {
				p.OffsetMap[i] = OffsetShift{SourceOffset: m.Int64(), DestinationOffset: m.Int64()}
				if err := skipTags(&m); err != nil {
					return err
				}
			}
		}
		if !m.Ok() || len(m.Src) > 0 {
			return malformed("tagged field OffsetMap does not fill its %d bytes", len(data))
		}
		return nil
	})
	if err != nil {
		return PartitionState{}, err
	}
	if version == 0 && len(r.Src) > 0 {
		return PartitionState{}, malformed("%d bytes after a version 0 value", len(r.Src))
	}
	return p, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// arrayLen reads a compact array length (null reads as 0) and checks that
// the remaining bytes can hold that many elements of at least minSize bytes.
func arrayLen(r *kbin.Reader, minSize int, field string) (int, error) {
	u := r.Uvarint()
	if !r.Ok() {
		return 0, malformed("%s length is truncated", field)
	}
	if u == 0 {
		return 0, nil
	}
	n := int(u) - 1
	if n > len(r.Src)/minSize {
		return 0, malformed("%s claims %d elements in %d bytes", field, n, len(r.Src))
	}
	return n, nil
}

// readTags reads a tagged-field section, calling fn for every field. Tags
// must be strictly ascending, as Kafka requires.
func readTags(r *kbin.Reader, fn func(tag uint32, data []byte) error) error {
	n := r.Uvarint()
	var last int64 = -1
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag, size := r.Uvarint(), r.Uvarint()
		data := r.Span(int(size))
		if !r.Ok() {
			break
		}
		if int64(tag) <= last {
			return malformed("tag %d after tag %d", tag, last)
		}
		last = int64(tag)
		if err := fn(tag, data); err != nil {
			return err
		}
	}
	if !r.Ok() {
		return malformed("tagged fields are truncated")
	}
	return nil
}

func skipTags(r *kbin.Reader) error {
	return readTags(r, func(uint32, []byte) error { return nil })
}

// isZero reports whether p holds nothing; TypeMirror records carry no state.
func (p *PartitionState) isZero() bool {
	return p.State == 0 && p.PreviousState == 0 && p.RetryAttempt == 0 && p.Reason == "" &&
		p.LastSourceOffset == 0 && len(p.SourceEpochs) == 0 && p.WriterLeaderEpoch == 0 &&
		p.WriterBrokerID == 0 && p.UpdatedMs == 0 && len(p.OffsetMap) == 0
}

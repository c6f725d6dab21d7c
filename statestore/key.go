package statestore

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// TopicName is the compacted topic on the destination cluster that holds the
// coordinators' state.
const TopicName = "__mirror_state"

// KeyVersion is the layout version of every key this build writes.
const KeyVersion int16 = 0

// Record types, the second field of a key. The numbers of the KIP's two
// record types are kept (its apiKeys 1 and 2); 3 is sidemirror's own.
const (
	// TypeLastMirrorEpochs is reserved for the stop boundary of a partition
	// (destination LEO and the source epochs at STOPPING); its value uses the
	// PartitionState encoding.
	TypeLastMirrorEpochs int8 = 1
	// TypePartitionState is the KIP's MirrorPartitionState: the state of one
	// mirror partition, written on every transition.
	TypePartitionState int8 = 2
	// TypeMirror is the per-mirror record (Topic "" and Partition -1, see
	// MirrorKey). Its value is empty in this version; deleting the mirror
	// tombstones it with the mirror's other records.
	TypeMirror int8 = 3
)

// Key is the key of a __mirror_state record. Unlike the KIP's key (the
// mirror name alone), it names the partition too, so compaction keeps the
// latest record of every partition (DESIGN.md D6).
//
// Encoding (big-endian, Kafka's coordinator-key style, not flexible):
//
//	KeyVersion int16          0
//	Type       int8           TypeLastMirrorEpochs, TypePartitionState, TypeMirror, TypeSidecar
//	Mirror     compact string uvarint(len+1), bytes
//	Topic      compact string uvarint(len+1), bytes
//	Partition  int32
//
// The bytes are the compaction identity of a record, so ReadKey accepts only
// the canonical encoding, the one AppendTo produces.
type Key struct {
	Type      int8
	Mirror    string
	Topic     string
	Partition int32
}

// PartitionStateKey returns the key of the state record of one mirror
// partition.
func PartitionStateKey(mirror, topic string, partition int32) Key {
	return Key{Type: TypePartitionState, Mirror: mirror, Topic: topic, Partition: partition}
}

// MirrorKey returns the key of a mirror's own record.
func MirrorKey(mirror string) Key {
	return Key{Type: TypeMirror, Mirror: mirror, Partition: -1}
}

// AppendTo appends the encoded key to dst.
func (k Key) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, KeyVersion)
	dst = kbin.AppendInt8(dst, k.Type)
	dst = kbin.AppendCompactString(dst, k.Mirror)
	dst = kbin.AppendCompactString(dst, k.Topic)
	return kbin.AppendInt32(dst, k.Partition)
}

// String renders the key for logs and errors.
func (k Key) String() string {
	return fmt.Sprintf("%s %q %q/%d", typeName(k.Type), k.Mirror, k.Topic, k.Partition)
}

// ReadKey decodes a key. It returns an error wrapping ErrUnknownKeyVersion
// for a key version other than KeyVersion, and one wrapping ErrMalformed for
// anything else that is not the canonical encoding of a Key. The record type
// is not checked: the layout does not depend on it.
func ReadKey(b []byte) (Key, error) {
	r := kbin.Reader{Src: b}
	v := r.Int16()
	if !r.Ok() {
		return Key{}, fmt.Errorf("%w: key of %d bytes is too short", ErrMalformed, len(b))
	}
	if v != KeyVersion {
		return Key{}, fmt.Errorf("%w: %d (this build reads %d)", ErrUnknownKeyVersion, v, KeyVersion)
	}
	k := Key{Type: r.Int8(), Mirror: r.CompactString(), Topic: r.CompactString(), Partition: r.Int32()}
	if !r.Ok() {
		return Key{}, fmt.Errorf("%w: key is truncated", ErrMalformed)
	}
	if len(r.Src) > 0 {
		return Key{}, fmt.Errorf("%w: %d bytes after the key", ErrMalformed, len(r.Src))
	}
	if !bytes.Equal(k.AppendTo(make([]byte, 0, len(b))), b) {
		return Key{}, fmt.Errorf("%w: key is not canonically encoded", ErrMalformed)
	}
	return k, nil
}

func typeName(t int8) string {
	switch t {
	case TypeLastMirrorEpochs:
		return "LastMirrorEpochs"
	case TypePartitionState:
		return "PartitionState"
	case TypeMirror:
		return "Mirror"
	case TypeSidecar:
		return "Sidecar"
	default:
		return fmt.Sprintf("type(%d)", t)
	}
}

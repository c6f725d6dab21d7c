package statestore

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzReadKey checks ReadKey on arbitrary bytes. Invariant: it never panics,
// and what it accepts is exactly the canonical encoding: AppendTo of the
// decoded key gives the input bytes back, so equal keys are equal bytes (the
// compaction identity).
func FuzzReadKey(f *testing.F) {
	f.Add(PartitionStateKey("my-mirror", "orders", 3).AppendTo(nil))
	f.Add(MirrorKey("m").AppendTo(nil))
	f.Add(Key{Type: TypeLastMirrorEpochs, Mirror: "ü", Topic: "镜像", Partition: -1}.AppendTo(nil))
	f.Add([]byte{0, 0, 2, 0x82, 0, 'm', 1, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ReadKey(b)
		if err != nil {
			return
		}
		if again := k.AppendTo(nil); !bytes.Equal(again, b) {
			t.Fatalf("ReadKey(%x) = %+v, which encodes to %x", b, k, again)
		}
	})
}

// FuzzReadPartitionState checks ReadPartitionState on arbitrary bytes.
// Invariant: it never panics, and what it accepts re-encodes (as the current
// version) to bytes that decode to an identical PartitionState and that are
// themselves canonical (encoding the second decode gives the same bytes).
func FuzzReadPartitionState(f *testing.F) {
	full := fullState()
	f.Add(full.AppendTo(nil))
	f.Add((&PartitionState{State: StateMirroring, PreviousState: StateNotRecorded}).AppendTo(nil))
	f.Add(laterVersion(full, 3, []byte{9, 9}))
	f.Add(laterVersion(PartitionState{}, 0, nil))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ReadPartitionState(b)
		if err != nil {
			return
		}
		enc := v.AppendTo(nil)
		v2, err := ReadPartitionState(enc)
		if err != nil {
			t.Fatalf("ReadPartitionState(%x) = %+v, whose encoding %x does not decode: %v", b, v, enc, err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("ReadPartitionState(%x) = %+v, but its encoding decodes to %+v", b, v, v2)
		}
		if enc2 := v2.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %x then %x", enc, enc2)
		}
	})
}

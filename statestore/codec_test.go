package statestore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeyEncoding(t *testing.T) {
	tests := []struct {
		name string
		key  Key
		hex  string
	}{
		{"partition state", PartitionStateKey("m", "t", 7), "0000 02 026d 0274 00000007"},
		{"mirror record", MirrorKey("my-mirror"), "0000 03 0a6d792d6d6972726f72 01 ffffffff"},
		{"stop boundary", Key{Type: TypeLastMirrorEpochs, Mirror: "m", Topic: "ü", Partition: 1 << 20}, "0000 01 026d 03c3bc 00100000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := mustHex(t, tc.hex)
			got := tc.key.AppendTo(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendTo = %x, want %x", got, want)
			}
			back, err := ReadKey(got)
			if err != nil {
				t.Fatalf("ReadKey: %v", err)
			}
			if back != tc.key {
				t.Errorf("ReadKey = %+v, want %+v", back, tc.key)
			}
		})
	}
}

func TestReadKeyErrors(t *testing.T) {
	good := PartitionStateKey("m", "t", 0).AppendTo(nil)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"one byte", []byte{0}, ErrMalformed},
		{"newer key version", append([]byte{0, 1}, good[2:]...), ErrUnknownKeyVersion},
		{"negative key version", append([]byte{0xff, 0xff}, good[2:]...), ErrUnknownKeyVersion},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"trailing byte", append(append([]byte{}, good...), 0), ErrMalformed},
		{"null mirror", mustHex(t, "0000 02 00 0274 00000000"), ErrMalformed},
		{"overlong varint length", mustHex(t, "0000 02 8200 6d 0274 00000000"), ErrMalformed},
		{"string longer than the key", mustHex(t, "0000 02 7f 6d"), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ReadKey(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ReadKey(%x) = %+v, %v; want an error wrapping %v", tc.in, k, err, tc.want)
			}
		})
	}
}

// fullState sets every field, the tagged one included.
func fullState() PartitionState {
	return PartitionState{
		State:             StateFailed,
		PreviousState:     StateMirroring,
		RetryAttempt:      3,
		Reason:            "source topic ID changed from A to B",
		LastSourceOffset:  1 << 40,
		SourceEpochs:      []EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 4, StartOffset: 1000}},
		WriterLeaderEpoch: 12,
		WriterBrokerID:    3,
		UpdatedMs:         1771239071191,
		OffsetMap:         []OffsetShift{{SourceOffset: 10, DestinationOffset: 7}, {SourceOffset: 90, DestinationOffset: 20}},
	}
}

func TestPartitionStateEncoding(t *testing.T) {
	// The version 0 layout, pinned: a change here breaks every stored value.
	v := PartitionState{State: StateMirroring, PreviousState: StateLogTruncation, LastSourceOffset: 42,
		SourceEpochs: []EpochStart{{Epoch: 3, StartOffset: 10}}, WriterLeaderEpoch: 5, WriterBrokerID: 1, UpdatedMs: 1000}
	want := mustHex(t, "0000 02 01 0000 01 000000000000002a 02 00000003 000000000000000a 00 00000005 00000001 00000000000003e8 00")
	if got := v.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendTo = %x\nwant       %x", got, want)
	}

	tests := []struct {
		name  string
		state PartitionState
	}{
		{"zero", PartitionState{}},
		{"not recorded", PartitionState{State: StateLogTruncation, PreviousState: StateNotRecorded, LastSourceOffset: -1}},
		{"every field", fullState()},
		{"unknown state code", PartitionState{State: 42, PreviousState: -1}},
		{"non-ASCII reason", PartitionState{State: StateFailed, Reason: "Fehler: Größe überschritten"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.state.AppendTo(nil)
			got, err := ReadPartitionState(b)
			if err != nil {
				t.Fatalf("ReadPartitionState: %v", err)
			}
			if !reflect.DeepEqual(got, tc.state) {
				t.Errorf("round trip = %+v, want %+v", got, tc.state)
			}
		})
	}
}

// laterVersion encodes s as a hypothetical later version would: the version
// 0 layout with another version number, an unknown tagged field beside the
// known one and, optionally, bytes after the tagged fields.
func laterVersion(s PartitionState, version int16, trailing []byte) []byte {
	noMap := s
	noMap.OffsetMap = nil
	prefix := noMap.AppendTo(nil)
	prefix = prefix[:len(prefix)-1] // without the tag count
	full := s.AppendTo(nil)
	known := full[len(prefix)+1:] // tag 0, or nothing
	b := append([]byte{}, prefix...)
	b[0], b[1] = byte(version>>8), byte(version)
	n := 1
	if len(known) > 0 {
		n = 2
	}
	b = kbin.AppendUvarint(b, uint32(n))
	b = append(b, known...)
	b = append(b, 7, 3, 0xaa, 0xbb, 0xcc) // tag 7, 3 bytes
	return append(b, trailing...)
}

func TestReadPartitionStateLaterVersions(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    PartitionState
		wantErr error
	}{
		{"version 1 with an unknown tag", laterVersion(fullState(), 1, nil), fullState(), nil},
		{"version 5 with trailing bytes", laterVersion(fullState(), 5, []byte{1, 2, 3}), fullState(), nil},
		{"version 0 with an unknown tag", laterVersion(PartitionState{State: StatePaused}, 0, nil), PartitionState{State: StatePaused}, nil},
		{"version 0 with trailing bytes", laterVersion(PartitionState{State: StatePaused}, 0, []byte{1}), PartitionState{}, ErrMalformed},
		{"negative version", negativeVersion(), PartitionState{}, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPartitionState(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ReadPartitionState = %+v, %v; want an error wrapping %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadPartitionState: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReadPartitionState = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadPartitionStateErrors(t *testing.T) {
	full := fullState()
	good := full.AppendTo(nil)
	zero := (&PartitionState{}).AppendTo(nil)
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"version only", []byte{0, 0}},
		{"truncated", good[:len(good)-1]},
		{"truncated in the tagged field", good[:len(good)-3]},
		{"array longer than the value", append(append([]byte{}, zero[:15]...), 0x7f, 0, 0)},
		{"tags out of order", append(append([]byte{}, zero[:len(zero)-1]...), 2, 5, 0, 3, 0)},
		{"duplicate tags", append(append([]byte{}, zero[:len(zero)-1]...), 2, 5, 0, 5, 0)},
		{"short tagged OffsetMap", append(append([]byte{}, zero[:len(zero)-1]...), 1, 0, 2, 2, 0)},
		{"long tagged OffsetMap", append(append([]byte{}, zero[:len(zero)-1]...), 1, 0, 2, 1, 0xff)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPartitionState(tc.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ReadPartitionState(%x) = %+v, %v; want an error wrapping ErrMalformed", tc.in, got, err)
			}
		})
	}
}

func TestStateNames(t *testing.T) {
	tests := []struct {
		code int8
		name string
	}{
		{0, "UNKNOWN"}, {1, "LOG_TRUNCATION"}, {2, "MIRRORING"}, {3, "PAUSING"}, {4, "PAUSED"},
		{5, "STOPPING"}, {6, "STOPPED"}, {7, "FAILED"}, {16, "NOT_RECORDED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := StateName(tc.code); got != tc.name {
				t.Errorf("StateName(%d) = %q, want %q", tc.code, got, tc.name)
			}
			for _, in := range []string{tc.name, strings.ToLower(tc.name)} {
				if got, ok := ParseState(in); !ok || got != tc.code {
					t.Errorf("ParseState(%q) = %d, %v; want %d, true", in, got, ok, tc.code)
				}
			}
		})
	}
	if got := StateName(9); got != "STATE_9" {
		t.Errorf("StateName(9) = %q, want STATE_9", got)
	}
	for _, in := range []string{"", "EPOCH_FENCING", "STATE_9", "MIRRORING "} {
		if c, ok := ParseState(in); ok {
			t.Errorf("ParseState(%q) = %d, true; want false", in, c)
		}
	}
}

func negativeVersion() []byte {
	s := fullState()
	b := s.AppendTo(nil)
	b[0], b[1] = 0xff, 0xff
	return b
}

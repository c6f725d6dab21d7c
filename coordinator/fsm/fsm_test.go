package fsm_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

// fixtureFSM returns an FSM that applied the fixture commands at indexes
// 1..n through raft.Log, as raft would.
func fixtureFSM(t *testing.T) *fsm.FSM {
	t.Helper()
	f := fsm.New(nil)
	for i, c := range fsmtest.Commands() {
		res := f.Apply(uint64(i+1), fsmtest.MustEncode(t, c))
		if res.ErrorCode != 0 || res.Index != uint64(i+1) {
			t.Fatalf("apply %T: %+v", c, res)
		}
	}
	return f
}

func snapshotBytes(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := f.Snapshot().WriteTo(&buf); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return buf.Bytes()
}

func readState(f *fsm.FSM) *fsm.State {
	var s *fsm.State
	f.Read(func(st *fsm.State) { s = st.Clone() })
	return s
}

func TestFSMApplyResult(t *testing.T) {
	f := fixtureFSM(t)
	res := f.Apply(42, fsmtest.MustEncode(t, fsm.CreateMirror{Name: "m1", Config: fsmtest.BootstrapConfig()}))
	if res.ErrorCode != kerr.InvalidRequest.Code || res.Index != 42 || f.Index() != 42 {
		t.Fatalf("result %+v, FSM index %d; want InvalidRequest at index 42", res, f.Index())
	}
	res = f.Apply(43, []byte{0xFF})
	if res.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("garbage: %+v", res)
	}
}

func TestFSMWatch(t *testing.T) {
	f := fsm.New(nil)
	ch := f.Watch()
	select {
	case <-ch:
		t.Fatal("watch channel closed before any apply")
	default:
	}
	f.Apply(1, fsmtest.MustEncode(t, fsm.RegisterSidecar{ID: 1, RaftAddr: "x:1"}))
	select {
	case <-ch:
	default:
		t.Fatal("watch channel not closed by apply")
	}
	ch = f.Watch()
	if _, err := f.Restore(bytes.NewReader(snapshotBytes(t, fixtureFSM(t)))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("watch channel not closed by restore")
	}
}

func TestSnapshotRestore(t *testing.T) {
	src := fixtureFSM(t)
	data := snapshotBytes(t, src)

	dst := fsm.New(nil)
	dst.Apply(1, fsmtest.MustEncode(t, fsm.CreateMirror{Name: "other", Config: fsmtest.BootstrapConfig()}))
	if _, err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := readState(dst), readState(src); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	if dst.Index() != src.Index() {
		t.Fatalf("index = %d, want %d", dst.Index(), src.Index())
	}
	// The snapshot is a copy: applying to the source does not change it.
	src.Apply(100, fsmtest.MustEncode(t, fsm.DeleteMirror{Name: "m2"}))
	again := fsm.New(nil)
	if _, err := again.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if readState(again).Mirrors["m2"] == nil {
		t.Fatal("snapshot shares memory with the live state")
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	valid := string(snapshotBytes(t, fixtureFSM(t)))
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "not a complete sidemirror snapshot"},
		{"not JSON", "\x00\x01garbage", "not a complete sidemirror snapshot"},
		{"future version", `{"version":2,"state":{}}`, "version 2"},
		{"no version", `{"state":{}}`, "version 0"},
		{"no state", `{"version":1}`, "state is nil"},
		{"unknown field", `{"version":1,"extra":1,"state":{"mirrors":{},"topics":{},"sidecars":{}}}`, "unknown field"},
		{"trailing data", valid + "{}", "after top-level value"},
		{"topic of unknown mirror", `{"version":1,"state":{"mirrors":{},"topics":{"t":{"name":"t","mirror":"x","partitions":1,"status":1}},"sidecars":{}}}`, "unknown mirror"},
		{"key mismatch", `{"version":1,"state":{"mirrors":{"a":{"name":"b","config":{"bootstrap.servers":"h:1"}}},"topics":{},"sidecars":{}}}`, "stored under the key"},
		{"nil mirror", `{"version":1,"state":{"mirrors":{"a":null},"topics":{},"sidecars":{}}}`, "has no entry"},
		{"truncated", valid[:len(valid)/2], "unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fixtureFSM(t)
			before, index := readState(f), f.Index()
			_, err := f.Restore(strings.NewReader(tc.in))
			if !errors.Is(err, fsm.ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, want ErrInvalidSnapshot containing %q", err, tc.want)
			}
			if !reflect.DeepEqual(readState(f), before) || f.Index() != index {
				t.Fatal("state changed by a failed restore")
			}
		})
	}
}

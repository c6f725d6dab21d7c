package coordinator

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.canceled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

// fixtureFSM returns an FSM that applied the fixture commands at indexes
// 1..n through raft.Log, as raft would.
func fixtureFSM(t *testing.T) *FSM {
	t.Helper()
	f := NewFSM(nil)
	for i, c := range fixtureCommands() {
		res, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: mustEncode(t, c)}).(Result)
		if !ok || res.Err() != nil || res.Index != uint64(i+1) {
			t.Fatalf("apply %T: %+v", c, res)
		}
	}
	return f
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.canceled {
		t.Fatalf("sink closed=%v canceled=%v", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

func readState(f *FSM) *State {
	var s *State
	f.Read(func(st *State) { s = st.Clone() })
	return s
}

func TestFSMApplyResult(t *testing.T) {
	f := fixtureFSM(t)
	res := f.Apply(&raft.Log{Index: 42, Data: mustEncode(t, CreateMirror{Name: "m1", Config: bootstrapConfig()})}).(Result)
	if res.ErrorCode != kerr.InvalidRequest.Code || res.Index != 42 || f.Index() != 42 {
		t.Fatalf("result %+v, FSM index %d; want InvalidRequest at index 42", res, f.Index())
	}
	res = f.Apply(&raft.Log{Index: 43, Data: []byte{0xFF}}).(Result)
	if res.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("garbage: %+v", res)
	}
}

func TestFSMWatch(t *testing.T) {
	f := NewFSM(nil)
	ch := f.Watch()
	select {
	case <-ch:
		t.Fatal("watch channel closed before any apply")
	default:
	}
	f.Apply(&raft.Log{Index: 1, Data: mustEncode(t, RegisterSidecar{ID: 1, RaftAddr: "x:1"})})
	select {
	case <-ch:
	default:
		t.Fatal("watch channel not closed by apply")
	}
	ch = f.Watch()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, fixtureFSM(t))))); err != nil {
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

	dst := NewFSM(nil)
	dst.Apply(&raft.Log{Index: 1, Data: mustEncode(t, CreateMirror{Name: "other", Config: bootstrapConfig()})})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := readState(dst), readState(src); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	if dst.Index() != src.Index() {
		t.Fatalf("index = %d, want %d", dst.Index(), src.Index())
	}
	// The snapshot is a copy: applying to the source does not change it.
	src.Apply(&raft.Log{Index: 100, Data: mustEncode(t, DeleteMirror{Name: "m2"})})
	again := NewFSM(nil)
	if err := again.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
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
			err := f.Restore(io.NopCloser(strings.NewReader(tc.in)))
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, want ErrInvalidSnapshot containing %q", err, tc.want)
			}
			if !reflect.DeepEqual(readState(f), before) || f.Index() != index {
				t.Fatal("state changed by a failed restore")
			}
		})
	}
}

package raftnode

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.canceled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

// TestRaftFSM checks the adapter raft sees: Apply answers an fsm.Result at
// the log's index, Persist closes (not cancels) the sink with a snapshot
// that Restore takes back.
func TestRaftFSM(t *testing.T) {
	src := newRaftFSM(zap.NewNop())
	for i, c := range fsmtest.Commands() {
		res, ok := src.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: fsmtest.MustEncode(t, c)}).(fsm.Result)
		if !ok || ResultErr(res) != nil || res.Index != uint64(i+1) {
			t.Fatalf("apply %T: %+v", c, res)
		}
	}
	snap, err := src.Snapshot()
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
	dst := newRaftFSM(zap.NewNop())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	var a, b *fsm.State
	src.fsm.Read(func(s *fsm.State) { a = s.Clone() })
	dst.fsm.Read(func(s *fsm.State) { b = s.Clone() })
	if !reflect.DeepEqual(a, b) || dst.fsm.Index() != src.fsm.Index() {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", b, a)
	}
}

func TestResultErr(t *testing.T) {
	if err := ResultErr(fsm.Result{}); err != nil {
		t.Fatalf("success Err() = %v", err)
	}
	err := ResultErr(fsm.Result{ErrorCode: kerr.ResourceNotFound.Code, ErrorMessage: "mirror x does not exist"})
	if !errors.Is(err, kerr.ResourceNotFound) {
		t.Fatalf("Err() = %v, want kerr.ResourceNotFound", err)
	}
}

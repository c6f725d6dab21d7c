package raftnode

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// raftFSM adapts the controller's state machine (coordinator/fsm, which
// knows no raft) to raft.FSM, and logs what it does.
type raftFSM struct {
	fsm *fsm.FSM
	log *zap.Logger
}

var _ raft.FSM = (*raftFSM)(nil)

func newRaftFSM(log *zap.Logger) *raftFSM {
	return &raftFSM{log: log, fsm: fsm.New(func(cmd []byte, p any, stack []byte) {
		log.Error("BUG: applying a command panicked; the command was rejected",
			append(commandFields(cmd, fsm.Result{}), zap.Any("panic", p), zap.ByteString("stack", stack))...)
	})}
}

// Apply implements raft.FSM: it returns an fsm.Result.
func (r *raftFSM) Apply(l *raft.Log) any {
	res := r.fsm.Apply(l.Index, l.Data)
	if ce := r.log.Check(zap.DebugLevel, "applied command"); ce != nil {
		ce.Write(commandFields(l.Data, res)...)
	}
	return res
}

func commandFields(b []byte, res fsm.Result) []zap.Field {
	fs := make([]zap.Field, 0, 4)
	if len(b) >= 2 {
		fs = append(fs, zap.Stringer("command", fsm.CommandType(b[0])), zap.Uint8("command-version", b[1]))
	}
	fs = append(fs, zap.Uint64("index", res.Index), zap.Int16("error-code", res.ErrorCode))
	if res.ErrorMessage != "" {
		fs = append(fs, zap.String("error-message", res.ErrorMessage))
	}
	return fs
}

// Snapshot implements raft.FSM: the state is copied at once; Persist writes
// the copy while Apply goes on.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{snap: r.fsm.Snapshot()}, nil
}

// Restore implements raft.FSM. On error the state is unchanged.
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	index, err := r.fsm.Restore(rc)
	if err != nil {
		return err
	}
	var mirrors, topics int
	r.fsm.Read(func(s *fsm.State) { mirrors, topics = len(s.Mirrors), len(s.Topics) })
	r.log.Info("restored state from snapshot", zap.Uint64("index", index), zap.Int("mirrors", mirrors), zap.Int("topics", topics))
	return nil
}

type fsmSnapshot struct{ snap *fsm.Snapshot }

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.snap.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("coordinator: writing snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

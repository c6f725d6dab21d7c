package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// snapshotVersion is the version of the snapshot format written by
// Snapshot. Restore reads every version listed in restoreSnapshot.
const snapshotVersion = 1

// recentResults is how many results of applied commands the FSM keeps, by
// raft index, for a proposer whose leadership was lost while it waited for
// one (Node.resolveLost).
const recentResults = 256

// maxSnapshotBytes bounds what Restore reads, so that a corrupt snapshot
// cannot exhaust memory.
const maxSnapshotBytes = 1 << 30

// FSM is the raft state machine of the controller: it applies commands to
// a State. raft calls Apply, Snapshot and Restore from its FSM goroutine;
// readers call Read and Watch from any goroutine.
type FSM struct {
	log *zap.Logger

	mu    sync.RWMutex
	state *State
	index uint64        // raft index of the last applied command or restored snapshot
	watch chan struct{} // closed and replaced on every apply and restore
	// recent holds the result of the command at index i in
	// recent[i%recentResults].
	recent [recentResults]indexedResult
}

type indexedResult struct {
	index uint64
	res   Result
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM with an empty state. A nil log discards logs.
func NewFSM(log *zap.Logger) *FSM {
	if log == nil {
		log = zap.NewNop()
	}
	return &FSM{log: log, state: NewState(), watch: make(chan struct{})}
}

// Apply implements raft.FSM. It returns a Result: an error result, never a
// panic, for a command that cannot be decoded or is not valid for the
// current state.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	res := f.applyLocked(l.Data)
	res.Index = l.Index
	f.index = l.Index
	f.recent[l.Index%recentResults] = indexedResult{l.Index, res}
	f.notifyLocked()
	f.mu.Unlock()

	if ce := f.log.Check(zap.DebugLevel, "applied command"); ce != nil {
		ce.Write(commandFields(l.Data, res)...)
	}
	return res
}

// applyLocked applies b. The recover is a last line of defence: applyCommand
// validates before it mutates and is fuzzed never to panic, so reaching it
// is a bug. Every sidecar runs the same code on the same log, so they all
// reach the same state even then.
func (f *FSM) applyLocked(b []byte) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			f.log.Error("BUG: applying a command panicked; the command was rejected",
				append(commandFields(b, Result{}), zap.Any("panic", p), zap.Stack("stack"))...)
			res = fail(kerr.UnknownServerError, "the command could not be applied because of an internal error (see the leader's log); please report it")
		}
	}()
	return applyCommand(f.state, b)
}

func commandFields(b []byte, res Result) []zap.Field {
	fs := make([]zap.Field, 0, 4)
	if len(b) >= 2 {
		fs = append(fs, zap.Stringer("command", CommandType(b[0])), zap.Uint8("command-version", b[1]))
	}
	fs = append(fs, zap.Uint64("index", res.Index), zap.Int16("error-code", res.ErrorCode))
	if res.ErrorMessage != "" {
		fs = append(fs, zap.String("error-message", res.ErrorMessage))
	}
	return fs
}

// notifyLocked wakes every watcher. Call with mu held for writing.
func (f *FSM) notifyLocked() {
	close(f.watch)
	f.watch = make(chan struct{})
}

// Read calls fn with the current state under the read lock. fn must not
// modify the state, block, or keep references to it after returning; use
// State.Clone to keep a copy.
func (f *FSM) Read(fn func(*State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Watch returns a channel that is closed at the next apply or restore.
// To wait for a change, take the channel first, then Read, then wait on it:
// a change between the two closes the channel, so none is missed.
func (f *FSM) Watch() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.watch
}

// Index returns the raft index of the last command applied, or of the
// snapshot restored, whichever is later; 0 before either.
func (f *FSM) Index() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// resultAt returns the result of the command applied at index, if it is
// among the last recentResults.
func (f *FSM) resultAt(index uint64) (Result, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r := f.recent[index%recentResults]
	if r.index != index || index == 0 {
		return Result{}, false
	}
	r.res.Topics = slices.Clone(r.res.Topics)
	return r.res, true
}

// snapshotFile is the snapshot format.
type snapshotFile struct {
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
	State   *State `json:"state"`
}

// Snapshot implements raft.FSM: it copies the state under the read lock;
// the copy is serialized by Persist while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{file: snapshotFile{Version: snapshotVersion, Index: f.index, State: f.state.Clone()}}, nil
}

// Restore implements raft.FSM: it decodes and validates the snapshot aside
// and swaps it in under the lock. On error the state is unchanged.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	file, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = file.State
	f.index = file.Index
	f.notifyLocked()
	f.mu.Unlock()
	f.log.Info("restored state from snapshot", zap.Uint64("index", file.Index),
		zap.Int("mirrors", len(file.State.Mirrors)), zap.Int("topics", len(file.State.Topics)))
	return nil
}

func decodeSnapshot(r io.Reader) (snapshotFile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSnapshotBytes+1))
	if err != nil {
		return snapshotFile{}, fmt.Errorf("%w: reading: %w", ErrInvalidSnapshot, err)
	}
	if len(data) > maxSnapshotBytes {
		return snapshotFile{}, fmt.Errorf("%w: larger than %d bytes", ErrInvalidSnapshot, maxSnapshotBytes)
	}
	// json.Unmarshal also rejects data after the object.
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return snapshotFile{}, fmt.Errorf("%w: not a complete sidemirror snapshot: %w", ErrInvalidSnapshot, err)
	}
	if head.Version != snapshotVersion {
		return snapshotFile{}, fmt.Errorf("%w: version %d, this sidecar reads version %d; run the same sidemirror version on every sidecar",
			ErrInvalidSnapshot, head.Version, snapshotVersion)
	}
	var file snapshotFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return snapshotFile{}, fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if err := file.State.Validate(); err != nil {
		return snapshotFile{}, fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	return file, nil
}

type fsmSnapshot struct{ file snapshotFile }

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(&s.file); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("coordinator: writing snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

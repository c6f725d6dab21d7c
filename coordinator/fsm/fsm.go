package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
)

// snapshotVersion is the version of the snapshot format written by
// Snapshot. Restore reads every version listed in restoreSnapshot.
const snapshotVersion = 1

// recentResults is how many results of applied commands the FSM keeps, by
// raft index, for a proposer whose leadership was lost while it waited for
// one (raftnode's resolveLost).
const recentResults = 256

// maxSnapshotBytes bounds what Restore reads, so that a corrupt snapshot
// cannot exhaust memory.
const maxSnapshotBytes = 1 << 30

// FSM is the state machine of the controller: it applies commands to a
// State. raftnode adapts it to raft.FSM: raft calls Apply, Snapshot and
// Restore from its FSM goroutine; readers call Read and Watch from any
// goroutine. It knows no raft, no network and no clock.
type FSM struct {
	onPanic func(cmd []byte, recovered any, stack []byte)

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

// New returns an FSM with an empty state. onPanic, if not nil, is told of a
// command whose application panicked (a bug: see applyLocked), with the
// recovered value and the stack; raftnode logs it.
func New(onPanic func(cmd []byte, recovered any, stack []byte)) *FSM {
	return &FSM{onPanic: onPanic, state: NewState(), watch: make(chan struct{})}
}

// Apply applies the encoded command cmd, found at raft log index, and
// returns its Result: an error result, never a panic, for a command that
// cannot be decoded or is not valid for the current state.
func (f *FSM) Apply(index uint64, cmd []byte) Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.applyLocked(cmd)
	res.Index = index
	f.index = index
	f.recent[index%recentResults] = indexedResult{index, res}
	f.notifyLocked()
	return res
}

// applyLocked applies b. The recover is a last line of defence: applyCommand
// validates before it mutates and is fuzzed never to panic, so reaching it
// is a bug. Every sidecar runs the same code on the same log, so they all
// reach the same state even then.
func (f *FSM) applyLocked(b []byte) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			if f.onPanic != nil {
				f.onPanic(b, p, debug.Stack())
			}
			res = fail(codeUnknownServerError, "the command could not be applied because of an internal error (see the leader's log); please report it")
		}
	}()
	return applyCommand(f.state, b)
}

// ApplyTo decodes cmd and applies it to s, outside any FSM: for tests and
// tools that build a state by hand. It is the code FSM.Apply runs.
func ApplyTo(s *State, cmd []byte) Result { return applyCommand(s, cmd) }

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

// ResultAt returns the result of the command applied at index, if it is
// among the last recentResults.
func (f *FSM) ResultAt(index uint64) (Result, bool) {
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

// Snapshot is a copy of the state at an index, taken by FSM.Snapshot.
type Snapshot struct{ file snapshotFile }

// Index returns the raft index the snapshot was taken at.
func (s *Snapshot) Index() uint64 { return s.file.Index }

// WriteTo writes the snapshot in the format Restore reads (JSON with a
// version field).
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	b, err := json.Marshal(&s.file)
	if err != nil {
		return 0, fmt.Errorf("coordinator: encoding snapshot: %w", err)
	}
	n, err := w.Write(append(b, '\n'))
	if err != nil {
		return int64(n), fmt.Errorf("coordinator: writing snapshot: %w", err)
	}
	return int64(n), nil
}

// Snapshot copies the state under the read lock; the copy is written by
// Snapshot.WriteTo while Apply goes on.
func (f *FSM) Snapshot() *Snapshot {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &Snapshot{file: snapshotFile{Version: snapshotVersion, Index: f.index, State: f.state.Clone()}}
}

// Restore decodes and validates a snapshot aside and swaps it in under the
// lock (consul's fsm.go), so a bad snapshot leaves the state untouched and
// readers never see a half-restored state. It returns the restored index.
func (f *FSM) Restore(r io.Reader) (uint64, error) {
	file, err := decodeSnapshot(r)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.state = file.State
	f.index = file.Index
	f.notifyLocked()
	f.mu.Unlock()
	return file.Index, nil
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

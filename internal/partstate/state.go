package partstate

import (
	"fmt"
	"strings"
)

// State is the mirroring state of one mirror partition (DESIGN D12, D16).
// The codes are stable: they are stored in __mirror_state and sent in
// internal RPCs.
type State int8

// The states. NotRecorded is no state a partition is in: it is the
// PreviousState of a record that has none (the KIP's default of 16).
const (
	Unknown       State = 0
	LogTruncation State = 1
	Mirroring     State = 2
	Pausing       State = 3
	Paused        State = 4
	Stopping      State = 5
	Stopped       State = 6
	Failed        State = 7
	NotRecorded   State = 16
)

// States lists the states a partition can be in, in code order.
var States = []State{Unknown, LogTruncation, Mirroring, Pausing, Paused, Stopping, Stopped, Failed}

// stateInfo is what the operations guide says of a state.
type stateInfo struct {
	name     string
	meaning  string // what the partition is doing
	describe string // what describe shows beside the state
}

var stateInfos = map[State]stateInfo{
	Unknown: {"UNKNOWN", "assigned, not driven yet (no sidecar has picked it up), or no state recorded", "`UNKNOWN`, or the state last recorded"},
	LogTruncation: {"LOG_TRUNCATION", "aligning: reading the destination log end offset, filling a leading gap below the source's log start offset",
		"offsets and lag"},
	Mirroring: {"MIRRORING", "copying batches at identical offsets", "offsets and lag"},
	Pausing: {"PAUSING", "pause requested: the sidecar that drives the partition removes its driver while the in-flight appends finish",
		"offsets and lag"},
	Paused: {"PAUSED", "not copying, still read-only", "`-`"},
	Stopping: {"STOPPING", "stop requested: the driver is removed, open replayed transactions are aborted and the stop boundary is recorded",
		"offsets and lag while driven"},
	Stopped: {"STOPPED", "detached from the source, writable", "`-`"},
	Failed: {"FAILED", "stopped on an error it cannot pass; the reason is shown; retried automatically (see Describe), recovered by `--recover`, and `--stop` accepts it",
		"reason on the next line; `--describe --failed` shows retries and reason as columns"},
	NotRecorded: {"NOT_RECORDED", "", ""},
}

// String returns the state's name as describe shows it, e.g. "MIRRORING",
// or "STATE_<code>" for a code this build does not know (a newer
// writer's).
func (s State) String() string {
	if in, ok := stateInfos[s]; ok {
		return in.name
	}
	return fmt.Sprintf("STATE_%d", int8(s))
}

// Valid reports whether s is a state a partition can be in.
func (s State) Valid() bool { return s >= Unknown && s <= Failed }

// Parse returns the state of a name as String returns it for a known code,
// case-insensitively; NOT_RECORDED included.
func Parse(name string) (State, bool) {
	name = strings.ToUpper(name)
	for s, in := range stateInfos {
		if in.name == name {
			return s, true
		}
	}
	return 0, false
}

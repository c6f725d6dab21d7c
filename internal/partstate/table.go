package partstate

import "fmt"

// Event is what happens to a partition. Each comes from one place: the
// operator (through the admin endpoint and raft, applied to the topic's
// status), the sidecar that drives the partition (the owner, beside the
// destination leader), its driver in the data plane, or the controller.
type Event int8

// The events.
const (
	// Start is the operator's --start (or topic discovery): the topic is
	// assigned to the mirror, or assigned again after a stop.
	Start Event = iota
	// Restart is --start of an active topic with FAILED partitions: they
	// are restarted with new automatic retries (D16).
	Restart
	// Pause is --pause: mirror.name gets the .paused suffix.
	Pause
	// Resume is --resume: the .paused suffix is removed.
	Resume
	// Stop is --stop (failover): mirror.name gets the .stopped suffix.
	Stop
	// Lead: the sidecar beside the partition's destination leader picks
	// up an active partition it does not drive yet.
	Lead
	// Align: the driver reads the destination log end offset and aligns
	// the partition with the source (a leading gap is filled).
	Align
	// Aligned: the driver streams batches at their source offsets.
	Aligned
	// Fail: the driver met an error it cannot pass.
	Fail
	// Retry: the owner retries a FAILED partition after its backoff.
	Retry
	// Remove: the data plane is asked to remove the partition's driver.
	Remove
	// Removed: the driver ended, its appends finished.
	Removed
	// Release: the owner let go of the partition, its driver removed
	// (paused, stopped, leadership moved, sidecar shutting down).
	Release
	// Finish: the controller's pause or stop sequence recorded the
	// boundary (destination log end offset) of every partition.
	Finish
)

// Events lists every event, in code order.
var Events = []Event{Start, Restart, Pause, Resume, Stop, Lead, Align, Aligned, Fail, Retry, Remove, Removed, Release, Finish}

type eventInfo struct{ name, source string }

var eventInfos = [...]eventInfo{
	Start:   {"start", "operator"},
	Restart: {"restart", "operator"},
	Pause:   {"pause", "operator"},
	Resume:  {"resume", "operator"},
	Stop:    {"stop", "operator"},
	Lead:    {"lead", "owner"},
	Align:   {"align", "driver"},
	Aligned: {"aligned", "driver"},
	Fail:    {"fail", "driver"},
	Retry:   {"retry", "owner"},
	Remove:  {"remove", "data plane"},
	Removed: {"removed", "data plane"},
	Release: {"release", "owner"},
	Finish:  {"finish", "controller"},
}

// String returns the event's name, e.g. "pause".
func (e Event) String() string {
	if e >= 0 && int(e) < len(eventInfos) {
		return eventInfos[e].name
	}
	return fmt.Sprintf("Event(%d)", int8(e))
}

// Source names who raises the event: "operator", "owner", "driver",
// "data plane" or "controller".
func (e Event) Source() string {
	if e >= 0 && int(e) < len(eventInfos) {
		return eventInfos[e].source
	}
	return ""
}

// Operator reports whether the event is an admin operation, which is
// refused with a Kafka error when the state does not allow it.
func (e Event) Operator() bool { return e.Source() == "operator" }

// Action is what the owner or the controller does on a transition.
type Action int8

// The actions.
const (
	// None: nothing beyond the state change.
	None Action = iota
	// Drive: the sidecar beside the destination leader starts a driver
	// (which aligns from the destination log end offset).
	Drive
	// RemoveDriver: the driver is removed; its in-flight appends finish.
	RemoveDriver
	// Forget: the owner forgets the partition; its persisted state (with
	// the last destination log end offset) stays for the next owner.
	Forget
	// StopSequence: open replayed transactions are aborted, the stop
	// boundary is recorded, one last group offset sync runs and the
	// read-only ACLs are removed (D9).
	StopSequence
	// Writable: the stop sequence is over; the topic is writable.
	Writable
)

var actionNames = [...]string{
	None:         "",
	Drive:        "start a driver",
	RemoveDriver: "remove the driver, in-flight appends finish",
	Forget:       "forget it; the persisted state stays for the next owner",
	StopSequence: "abort open transactions, record the boundary, remove the read-only ACLs",
	Writable:     "the topic is writable",
}

// String describes the action for the operations guide.
func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int8(a))
}

// CodeInvalidRequest is the Kafka error code (INVALID_REQUEST) of a refused
// operation.
const CodeInvalidRequest int16 = 42

// Transition is one cell of the table: what event On does to a partition
// in state From. An allowed transition leads To a state (To == From for
// one that changes nothing) with an Action. A refused one (operator events
// only) carries the Kafka error code and the operator-facing reason,
// a format with the topic as %[1]s and the mirror as %[2]s; an event that
// does not apply to the state (a late report of a removed driver) is
// ignored: allowed, To == From, no action.
type Transition struct {
	From   State
	On     Event
	To     State
	Action Action
	Code   int16
	Reason string
}

// Allowed reports whether the event is taken (possibly changing nothing).
func (t Transition) Allowed() bool { return t.Code == 0 }

// Changes reports whether the event moves the partition to another state.
func (t Transition) Changes() bool { return t.Allowed() && t.To != t.From }

// Refusal returns the operator-facing reason of a refused transition for
// a topic of a mirror, "" for an allowed one.
func (t Transition) Refusal(topic, mirror string) string {
	if t.Allowed() {
		return ""
	}
	return fmt.Sprintf(t.Reason, topic, mirror)
}

// Next returns the cell of the table for state s and event e. A state
// outside the table (a code of a newer sidecar) ignores every event.
func Next(s State, e Event) Transition {
	if row, ok := table[s]; ok {
		if t, ok := row[e]; ok {
			t.From, t.On = s, e
			if t.Allowed() && t.To == keep {
				t.To = s
			}
			return t
		}
	}
	return Transition{From: s, On: e, To: s}
}

// keep marks an allowed cell that stays in its state.
const keep State = -1

// The refusals of operator events (INVALID_REQUEST, DESIGN D16).
const (
	alreadyMirrored = "topic %[1]s is already mirrored by mirror %[2]s; nothing to start"
	pausedNoStart   = "topic %[1]s is paused in mirror %[2]s; resume it with kafka-cluster-mirrors --resume instead of starting it"
	notPaused       = "topic %[1]s is not paused (it is active); only paused topics can be resumed"
	alreadyPaused   = "topic %[1]s is already paused; resume it with --resume"
	alreadyStopped  = "topic %[1]s is already stopped; nothing to do"
	stoppedNoPause  = "topic %[1]s is stopped and cannot be paused; start it again with --start"
	stoppedNoResume = "topic %[1]s is stopped and cannot be resumed; start it again with --start"
	pausedRestart   = "topic %[1]s is paused, not active: only active topics can be restarted"
	stoppedRestart  = "topic %[1]s is stopped, not active: only active topics can be restarted"
)

func to(s State, a Action) Transition { return Transition{To: s, Action: a} }
func refuse(reason string) Transition { return Transition{Code: CodeInvalidRequest, Reason: reason} }

var stay = to(keep, None)

// table is the partition state machine: state x event -> transition. A
// missing cell is an ignored event. Every operator event has a cell in
// every state.
var table = map[State]map[Event]Transition{
	Unknown: {
		Start: to(keep, None), Restart: stay, Pause: to(Paused, None), Resume: refuse(notPaused), Stop: to(Stopping, StopSequence),
		Lead: to(keep, Drive), Align: to(LogTruncation, None), Aligned: to(Mirroring, None), Fail: to(Failed, None),
		Remove: to(Stopping, None), Removed: to(Stopped, None), Release: to(keep, Forget),
	},
	LogTruncation: {
		Start: refuse(alreadyMirrored), Restart: stay, Pause: to(Pausing, RemoveDriver), Resume: refuse(notPaused), Stop: to(Stopping, RemoveDriver),
		Aligned: to(Mirroring, None), Fail: to(Failed, None),
		Remove: to(Stopping, None), Removed: to(Stopped, None), Release: to(keep, Forget),
	},
	Mirroring: {
		Start: refuse(alreadyMirrored), Restart: stay, Pause: to(Pausing, RemoveDriver), Resume: refuse(notPaused), Stop: to(Stopping, RemoveDriver),
		Align: to(LogTruncation, None), Fail: to(Failed, None),
		Remove: to(Stopping, None), Removed: to(Stopped, None), Release: to(keep, Forget),
	},
	Pausing: {
		Start: refuse(pausedNoStart), Restart: refuse(pausedRestart), Pause: refuse(alreadyPaused), Resume: to(Unknown, None), Stop: to(Stopping, RemoveDriver),
		Release: to(Paused, None), Finish: to(Paused, None),
	},
	Paused: {
		Start: refuse(pausedNoStart), Restart: refuse(pausedRestart), Pause: refuse(alreadyPaused), Resume: to(Unknown, None), Stop: to(Stopping, StopSequence),
	},
	Stopping: {
		Start: to(Unknown, None), Restart: refuse(stoppedRestart), Pause: refuse(stoppedNoPause), Resume: refuse(stoppedNoResume), Stop: refuse(alreadyStopped),
		Fail: to(Failed, None), Removed: to(Stopped, None), Release: to(keep, StopSequence), Finish: to(Stopped, Writable),
	},
	Stopped: {
		Start: to(Unknown, None), Restart: refuse(stoppedRestart), Pause: refuse(stoppedNoPause), Resume: refuse(stoppedNoResume), Stop: refuse(alreadyStopped),
	},
	Failed: {
		Start: to(Unknown, Drive), Restart: to(Unknown, Drive), Pause: to(Paused, RemoveDriver), Resume: refuse(notPaused), Stop: to(Stopping, RemoveDriver),
		Retry: to(Unknown, Drive), Removed: to(Stopped, None), Release: to(keep, Forget),
	},
}

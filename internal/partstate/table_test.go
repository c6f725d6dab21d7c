package partstate

import (
	"slices"
	"strings"
	"testing"
)

// TestTableWalk visits every state with every event and checks the cell
// against the rules of DESIGN D12 and D16 and the KIP's transitions: each
// operator event is allowed or refused with INVALID_REQUEST and a reason
// that names the topic; every other event is taken or ignored, never
// refused; the cells the rules name lead where they say.
func TestTableWalk(t *testing.T) {
	// The states each operator event is accepted in (D16; Start on an
	// active topic with FAILED partitions is a restart).
	accepts := map[Event][]State{
		Start:   {Unknown, Stopping, Stopped, Failed},
		Restart: {Unknown, LogTruncation, Mirroring, Failed},
		Pause:   {Unknown, LogTruncation, Mirroring, Failed},
		Resume:  {Pausing, Paused},
		Stop:    {Unknown, LogTruncation, Mirroring, Pausing, Paused, Failed},
	}
	// Where a cell leads, for the cells the rules pin down.
	leads := map[[2]int8]State{
		{int8(Unknown), int8(Align)}:         LogTruncation, // KIP #1
		{int8(Stopped), int8(Start)}:         Unknown,       // KIP #2, then aligned by a new driver
		{int8(LogTruncation), int8(Aligned)}: Mirroring,     // KIP #3
		{int8(LogTruncation), int8(Fail)}:    Failed,        // KIP #4
		{int8(Mirroring), int8(Pause)}:       Pausing,       // KIP #7
		{int8(Pausing), int8(Release)}:       Paused,        // KIP #8
		{int8(Paused), int8(Resume)}:         Unknown,       // KIP #9, driven again from the LEO
		{int8(Mirroring), int8(Stop)}:        Stopping,      // KIP #10
		{int8(LogTruncation), int8(Stop)}:    Stopping,      // KIP #10
		{int8(Stopping), int8(Finish)}:       Stopped,       // KIP #11
		{int8(Mirroring), int8(Fail)}:        Failed,        // KIP #12
		{int8(Stopping), int8(Fail)}:         Failed,        // KIP #12
		{int8(Failed), int8(Retry)}:          Unknown,       // KIP #13, automatic
		{int8(Failed), int8(Restart)}:        Unknown,       // KIP #13, manual (D16)
		{int8(Paused), int8(Stop)}:           Stopping,      // D16: failover is never blocked
		{int8(Failed), int8(Stop)}:           Stopping,      // D16
		{int8(Mirroring), int8(Release)}:     Mirroring,     // KIP #14: in memory only; the record stays
		{int8(Mirroring), int8(Remove)}:      Stopping,      // a driver being removed shows STOPPING
		{int8(Failed), int8(Removed)}:        Stopped,       // FAILED yields only to STOPPED
	}
	for _, s := range States {
		for _, e := range Events {
			tr := Next(s, e)
			if tr.From != s || tr.On != e {
				t.Fatalf("Next(%s, %s) names the cell %s/%s", s, e, tr.From, tr.On)
			}
			if e.Operator() {
				if _, ok := table[s][e]; !ok {
					t.Errorf("%s has no cell for the operator event %s: it must be allowed or refused explicitly", s, e)
				}
				want := slices.Contains(accepts[e], s)
				if tr.Allowed() != want {
					t.Errorf("%s in %s: allowed %v, D16 says %v", e, s, tr.Allowed(), want)
				}
				if !tr.Allowed() {
					msg := tr.Refusal("orders", "dr")
					if tr.Code != CodeInvalidRequest || !strings.Contains(msg, "topic orders") || strings.Contains(msg, "%!") {
						t.Errorf("%s in %s refused with code %d and reason %q; want INVALID_REQUEST naming the topic", e, s, tr.Code, msg)
					}
				}
			} else if !tr.Allowed() {
				t.Errorf("%s in %s refused: only operator events are refused", e, s)
			}
			if tr.Allowed() && !tr.To.Valid() {
				t.Errorf("%s in %s leads to %s, not a state", e, s, tr.To)
			}
			if want, ok := leads[[2]int8{int8(s), int8(e)}]; ok && tr.To != want {
				t.Errorf("%s in %s leads to %s, want %s", e, s, tr.To, want)
			}
			// STOPPED is final for a driver: only an operator moves it.
			if s == Stopped && !e.Operator() && tr.Changes() {
				t.Errorf("%s moves a STOPPED partition to %s", e, tr.To)
			}
			// FAILED is sticky: only the operator, a retry and the end of
			// its driver move it.
			if s == Failed && tr.Changes() && !e.Operator() && e != Retry && e != Removed {
				t.Errorf("%s moves a FAILED partition to %s", e, tr.To)
			}
			// PAUSING and STOPPING are left by what the pause or stop
			// waits for, or by the operator.
			if (s == Pausing || s == Stopping) && tr.Changes() && !e.Operator() &&
				!slices.Contains([]Event{Release, Finish, Removed, Fail}, e) {
				t.Errorf("%s moves a %s partition to %s", e, s, tr.To)
			}
		}
	}
	// Every state is entered, and every state but STOPPED (final for a
	// driver; the operator starts it again) is left, by some event.
	entered, left := map[State]bool{}, map[State]bool{}
	for _, s := range States {
		for _, e := range Events {
			if tr := Next(s, e); tr.Changes() {
				entered[tr.To], left[s] = true, true
			}
		}
	}
	for _, s := range States {
		if !entered[s] && s != Unknown {
			t.Errorf("no event enters %s", s)
		}
		if !left[s] {
			t.Errorf("no event leaves %s", s)
		}
	}
}

// TestStateCodes pins the codes of D16: they are on disk and on the wire.
func TestStateCodes(t *testing.T) {
	want := []string{"UNKNOWN", "LOG_TRUNCATION", "MIRRORING", "PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED"}
	for code, name := range want {
		s := State(code)
		if s.String() != name || !s.Valid() {
			t.Errorf("state %d is %s (valid %v), want %s", code, s, s.Valid(), name)
		}
		if p, ok := Parse(strings.ToLower(name)); !ok || p != s {
			t.Errorf("Parse(%q) = %d, %v", name, p, ok)
		}
	}
	if NotRecorded != 16 || NotRecorded.String() != "NOT_RECORDED" || NotRecorded.Valid() {
		t.Errorf("NOT_RECORDED is %d %s, valid %v", NotRecorded, NotRecorded, NotRecorded.Valid())
	}
	if got := State(9).String(); got != "STATE_9" {
		t.Errorf("State(9) = %s", got)
	}
	if _, ok := Parse("EPOCH_FENCING"); ok {
		t.Error("EPOCH_FENCING parsed: it has no counterpart on stock brokers")
	}
}

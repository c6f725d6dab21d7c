package coordinator

import (
	"slices"
	"testing"
	"time"
)

// fakeRounds drives a liveness tracker with a fake clock: each round
// happens step after the previous one.
type fakeRounds struct {
	t   *testing.T
	l   *liveness
	now time.Time
}

func newFakeRounds(t *testing.T) *fakeRounds {
	return &fakeRounds{t: t, l: newLiveness(1, 15*time.Second, 3*time.Second, time.Second), now: time.Unix(1000, 0)}
}

// round advances the clock by step and records the answers of brokers 2
// and 3.
func (r *fakeRounds) round(step time.Duration, two, three bool) (died, revived []int32) {
	r.now = r.now.Add(step)
	return r.l.observe(r.now, map[int32]bool{2: two, 3: three})
}

func TestLivenessDeadAfterTimeout(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true) // first contact: alive even without an answer
	if r.l.dead(2) || r.l.answering(2) || !r.l.answering(3) {
		t.Fatal("first contact: 2 must be alive but not answering, 3 answering")
	}
	for i := 1; i < 15; i++ {
		if died, _ := r.round(time.Second, false, true); len(died) > 0 {
			t.Fatalf("declared %v dead after %ds of silence, timeout 15s", died, i)
		}
	}
	died, _ := r.round(time.Second, false, true)
	if !slices.Equal(died, []int32{2}) || !r.l.dead(2) || r.l.dead(3) {
		t.Fatalf("after 15s of silence: died %v, dead(2)=%v dead(3)=%v", died, r.l.dead(2), r.l.dead(3))
	}
	if died, _ := r.round(time.Second, false, true); len(died) > 0 {
		t.Fatalf("a dead sidecar died again: %v", died)
	}
	if got := r.l.aliveCount(); got != 2 {
		t.Fatalf("alive = %d, want 2 (itself and 3)", got)
	}
	if !slices.Equal(r.l.deadIDs(), []int32{2}) {
		t.Fatalf("dead IDs %v", r.l.deadIDs())
	}
}

func TestLivenessAnswerResetsTheClock(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true)
	for range 10 {
		r.round(time.Second, false, true)
	}
	r.round(time.Second, true, true) // one answer: silence starts over
	for i := 1; i < 15; i++ {
		if died, _ := r.round(time.Second, false, true); len(died) > 0 {
			t.Fatalf("dead after %ds of silence following an answer", i)
		}
	}
	if died, _ := r.round(time.Second, false, true); !slices.Equal(died, []int32{2}) {
		t.Fatalf("died %v, want [2]", died)
	}
}

func TestLivenessAliveAgainAfterTwoAnswers(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true)
	for range 15 {
		r.round(time.Second, false, true)
	}
	if !r.l.dead(2) {
		t.Fatal("2 not dead")
	}
	if _, revived := r.round(time.Second, true, true); len(revived) > 0 || !r.l.dead(2) || r.l.answering(2) {
		t.Fatalf("one answer revived %v (dead=%v)", revived, r.l.dead(2))
	}
	r.round(time.Second, false, true) // the streak breaks
	if _, revived := r.round(time.Second, true, true); len(revived) > 0 {
		t.Fatalf("an interrupted streak revived %v", revived)
	}
	_, revived := r.round(time.Second, true, true)
	if !slices.Equal(revived, []int32{2}) || r.l.dead(2) || !r.l.answering(2) || !r.l.back(2) {
		t.Fatalf("two answers in a row: revived %v, dead %v, back %v", revived, r.l.dead(2), r.l.back(2))
	}
}

// Two answers in rounds that follow each other closely (after a slow
// round) are not yet steady.
func TestLivenessReviveNeedsTime(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true)
	for range 15 {
		r.round(time.Second, false, true)
	}
	r.round(2*time.Second, true, true)
	if _, revived := r.round(10*time.Millisecond, true, true); len(revived) > 0 || r.l.back(2) {
		t.Fatalf("two answers 10ms apart revived %v", revived)
	}
	if _, revived := r.round(time.Second, true, true); !slices.Equal(revived, []int32{2}) || !r.l.back(2) {
		t.Fatalf("a third answer a second later: revived %v", revived)
	}
}

func TestLivenessBackNeedsTwoAnswers(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, true, false)
	if !r.l.answering(2) || r.l.back(2) {
		t.Fatal("one answer: want answering, not back")
	}
	r.round(time.Second, true, false)
	if !r.l.back(2) || r.l.back(3) || r.l.answering(3) {
		t.Fatal("two answers: want 2 back, 3 neither")
	}
	if !r.l.back(1) || !r.l.answering(1) || r.l.dead(1) {
		t.Fatal("the local sidecar is always alive")
	}
	if r.l.back(7) || r.l.answering(7) || r.l.dead(7) {
		t.Fatal("an unknown sidecar is neither back, answering nor dead")
	}
}

func TestLivenessLeaderChangeResets(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true)
	for range 15 {
		r.round(time.Second, false, true)
	}
	if !r.l.dead(2) {
		t.Fatal("2 not dead")
	}
	r.l.reset() // leadership lost, then won again: clocks start fresh
	r.round(time.Second, false, true)
	if r.l.dead(2) {
		t.Fatal("after reset, 2 is dead at first contact")
	}
	for i := 1; i < 15; i++ {
		if died, _ := r.round(time.Second, false, true); len(died) > 0 {
			t.Fatalf("after reset, dead after %ds", i)
		}
	}
	if died, _ := r.round(time.Second, false, true); !slices.Equal(died, []int32{2}) {
		t.Fatalf("after reset and a full timeout: died %v", died)
	}
}

// A leader that was itself paused (SIGSTOP, GC) must not count its own
// pause as the silence of the others.
func TestLivenessOwnPauseDoesNotCount(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, false)
	r.round(time.Second, false, false)
	if died, _ := r.round(time.Minute, false, false); len(died) > 0 {
		t.Fatalf("a one-minute pause of the leader killed %v", died)
	}
	// Slow rounds (probes time out after 2s) still count in full.
	var died []int32
	for i := 0; i < 6 && len(died) == 0; i++ {
		died, _ = r.round(2*time.Second, false, true)
	}
	if !slices.Equal(died, []int32{2}) {
		t.Fatalf("slow rounds: died %v, want [2] (silence 1s + 3s + 2s rounds)", died)
	}
}

func TestLivenessForgetsDeregistered(t *testing.T) {
	r := newFakeRounds(t)
	r.round(0, false, true)
	for range 15 {
		r.round(time.Second, false, true)
	}
	r.now = r.now.Add(time.Second)
	r.l.observe(r.now, map[int32]bool{3: true, 1: false}) // 2 gone; the local one is ignored
	if r.l.dead(2) || r.l.dead(1) || r.l.aliveCount() != 2 {
		t.Fatalf("dead(2)=%v dead(1)=%v alive=%d", r.l.dead(2), r.l.dead(1), r.l.aliveCount())
	}
}

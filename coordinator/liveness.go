package coordinator

import (
	"maps"
	"slices"
	"time"
)

// reviveAnswers is how many consecutive answers bring a dead sidecar back.
const reviveAnswers = 2

// liveness judges which sidecars are alive from the probes the raft leader
// sends them (DESIGN D7). The failover loop owns it; it is not safe for
// concurrent use and reads no clock: every round brings its time.
//
// A sidecar is dead once it has failed every probe for timeout, counted
// only while the rounds run: a round credits at most maxStep of silence, so
// a leader that was itself paused (SIGSTOP, a long GC, a slow round) does
// not take its own pause for a peer's. It is alive again after
// reviveAnswers consecutive answers spanning at least reviveSpan (rounds
// can follow each other closely after a slow one), and only such a steady
// sidecar gets leadership back. A sidecar first seen, also after reset,
// starts alive with a fresh clock. The local sidecar is always alive and
// never probed.
type liveness struct {
	self       int32
	timeout    time.Duration
	maxStep    time.Duration
	reviveSpan time.Duration
	peers      map[int32]*peerLiveness
	last       time.Time // time of the previous round; zero before the first
}

type peerLiveness struct {
	silent  time.Duration // failing since the last answer, as credited
	answers int           // consecutive answers
	since   time.Time     // time of the first of them
	steady  bool          // answers and since qualify for leadership
	dead    bool
}

func newLiveness(self int32, timeout, maxStep, reviveSpan time.Duration) *liveness {
	return &liveness{self: self, timeout: timeout, maxStep: maxStep, reviveSpan: reviveSpan, peers: map[int32]*peerLiveness{}}
}

// reset forgets every observation: a new raft leader starts its clocks
// fresh.
func (l *liveness) reset() {
	clear(l.peers)
	l.last = time.Time{}
}

// observe records one round of probes taken at now: answered has an entry
// for every registered sidecar but the local one, true when it answered.
// Sidecars without an entry are forgotten. It returns the sidecars judged
// dead and those judged alive again in this round, sorted.
func (l *liveness) observe(now time.Time, answered map[int32]bool) (died, revived []int32) {
	var step time.Duration
	if !l.last.IsZero() {
		step = min(max(now.Sub(l.last), 0), l.maxStep)
	}
	l.last = now
	for id := range l.peers {
		if _, ok := answered[id]; !ok || id == l.self {
			delete(l.peers, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(answered)) {
		if id == l.self {
			continue
		}
		p := l.peers[id]
		if p == nil {
			p = &peerLiveness{} // first contact: alive, clock starts now
			l.peers[id] = p
		} else if !answered[id] {
			p.silent += step
		}
		if answered[id] {
			if p.answers == 0 {
				p.since = now
			}
			p.silent, p.answers = 0, p.answers+1
			p.steady = p.answers >= reviveAnswers && now.Sub(p.since) >= l.reviveSpan
			if p.dead && p.steady {
				p.dead = false
				revived = append(revived, id)
			}
			continue
		}
		p.answers, p.steady = 0, false
		if !p.dead && p.silent >= l.timeout {
			p.dead = true
			died = append(died, id)
		}
	}
	return died, revived
}

// dead reports whether the sidecar of broker id is judged dead.
func (l *liveness) dead(id int32) bool {
	p := l.peers[id]
	return id != l.self && p != nil && p.dead
}

// answering reports whether the sidecar of broker id is alive and answered
// the last probe: a target leadership may move to.
func (l *liveness) answering(id int32) bool {
	if id == l.self {
		return true
	}
	p := l.peers[id]
	return p != nil && !p.dead && p.answers >= 1
}

// back reports whether the sidecar of broker id is alive and answers
// steadily (reviveAnswers answers in a row over reviveSpan): leadership may
// return to it.
func (l *liveness) back(id int32) bool {
	if id == l.self {
		return true
	}
	p := l.peers[id]
	return p != nil && !p.dead && p.steady
}

// deadIDs returns the sidecars judged dead, sorted.
func (l *liveness) deadIDs() []int32 {
	var ids []int32
	for id, p := range l.peers {
		if p.dead {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// aliveCount returns the number of sidecars not judged dead, the local one
// included.
func (l *liveness) aliveCount() int {
	n := 1
	for _, p := range l.peers {
		if !p.dead {
			n++
		}
	}
	return n
}

package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
)

// Kind is one kind of fault the schedule injects.
type Kind int

// The fault kinds of issue 14, each with its undoing.
const (
	KillSidecar        Kind = iota // kill -9 a sidecar, start it again after Hold
	KillRaftLeader                 // the same for the sidecar that leads the raft group
	KillDestBroker                 // kill -9 a destination broker, start it again after Hold
	KillSourceBroker               // kill -9 a source broker, start it again after Hold
	FreezeSidecar                  // SIGSTOP a sidecar for Hold (longer than the failover timeout), then SIGCONT
	FreezeBroker                   // SIGSTOP a broker (Target < source nodes: a source one) for Hold, then SIGCONT
	IsolateHost                    // take a destination host's link down for Hold (multi-host bed)
	CutSource                      // make the source unreachable from the destination for Hold
	RestartAllSidecars             // kill -9 every sidecar at once, start them all again after Hold
	FillDisk                       // fill a destination broker's log directory (a small tmpfs) for Hold, then free it
	numKinds
)

var kindNames = [numKinds]string{
	"kill-sidecar", "kill-raft-leader", "kill-destination-broker", "kill-source-broker",
	"freeze-sidecar", "freeze-broker", "isolate-host", "cut-source", "restart-all-sidecars", "fill-disk",
}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Kinds returns every fault kind.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// Topology is what the schedule draws targets from.
type Topology struct {
	SourceNodes      int
	DestinationNodes int // one sidecar beside each
	// FailoverTimeout is the sidecars' sidecar.failover.timeout.ms: a
	// frozen sidecar or broker stays frozen longer than this.
	FailoverTimeout time.Duration
	// Kinds the bed can inject; nil: all. The loopback bed has no hosts to
	// isolate and no tmpfs log directories.
	Kinds []Kind
}

// Fault is one entry of a schedule.
type Fault struct {
	At     time.Duration // from the start of the run
	Kind   Kind
	Target int           // node index (0-based) for kinds aimed at one node
	Hold   time.Duration // until the fault is undone
}

func (f Fault) String() string {
	return fmt.Sprintf("%8s %-24s target %d for %s", f.At.Round(time.Millisecond), f.Kind, f.Target, f.Hold.Round(time.Millisecond))
}

// Schedule draws the faults of a run of length d from seed: one fault at a
// time, each undone after its hold, then a quiet gap of 2 to 8 s before the
// next one. The same seed, duration and topology give the same schedule, so
// CHAOS_SEED replays a run. The last fault is undone before d.
func Schedule(seed uint64, d time.Duration, topo Topology) []Fault {
	kinds := topo.Kinds
	if kinds == nil {
		kinds = Kinds()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []Fault
	at := between(2*time.Second, 8*time.Second)
	for {
		f := Fault{At: at, Kind: kinds[rng.IntN(len(kinds))]}
		switch f.Kind {
		case KillSidecar, KillDestBroker, FreezeSidecar, IsolateHost, FillDisk:
			f.Target = rng.IntN(topo.DestinationNodes)
		case KillSourceBroker:
			f.Target = rng.IntN(topo.SourceNodes)
		case FreezeBroker:
			f.Target = rng.IntN(topo.SourceNodes + topo.DestinationNodes)
		}
		switch f.Kind {
		case KillSidecar, KillRaftLeader, KillDestBroker, KillSourceBroker, RestartAllSidecars:
			f.Hold = between(time.Second, 5*time.Second)
		case FreezeSidecar, FreezeBroker:
			f.Hold = topo.FailoverTimeout + between(time.Second, 10*time.Second)
		case IsolateHost, FillDisk:
			f.Hold = between(5*time.Second, 20*time.Second)
		case CutSource:
			f.Hold = between(5*time.Second, 30*time.Second)
		}
		if f.At+f.Hold > d {
			return out
		}
		out = append(out, f)
		at = f.At + f.Hold + between(2*time.Second, 8*time.Second)
	}
}

// Defaults of a run (issue 14): 20 minutes, 4 in CI.
const (
	DefaultDuration   = 20 * time.Minute
	DefaultCIDuration = 4 * time.Minute
)

// Params are a run's seed and duration, from CHAOS_SEED and CHAOS_DURATION.
type Params struct {
	Seed     uint64
	Duration time.Duration
}

// ParamsFromEnv reads CHAOS_SEED (a decimal uint64; unset: drawn at random,
// and printed by the run so that it can be replayed) and CHAOS_DURATION (a
// Go duration such as 20m; unset: DefaultDuration, or DefaultCIDuration when
// CI=true).
func ParamsFromEnv(getenv func(string) string) (Params, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := Params{Seed: rand.Uint64(), Duration: DefaultDuration}
	if getenv("CI") == "true" {
		p.Duration = DefaultCIDuration
	}
	var errs []error
	if s := strings.TrimSpace(getenv("CHAOS_SEED")); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("CHAOS_SEED=%q is not a decimal seed (expected e.g. CHAOS_SEED=42, as a run prints it)", s))
		}
		p.Seed = v
	}
	if s := strings.TrimSpace(getenv("CHAOS_DURATION")); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < time.Minute {
			errs = append(errs, fmt.Errorf("CHAOS_DURATION=%q is not a duration of at least 1m (expected e.g. CHAOS_DURATION=20m)", s))
		}
		p.Duration = v
	}
	return p, errors.Join(errs...)
}

// Summary counts a schedule's faults by kind.
func Summary(faults []Fault) map[Kind]int {
	out := make(map[Kind]int)
	for _, f := range faults {
		out[f.Kind]++
	}
	return out
}

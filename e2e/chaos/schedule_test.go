package chaos

import (
	"slices"
	"testing"
	"time"
)

var topo = Topology{SourceNodes: 2, DestinationNodes: 3, FailoverTimeout: 10 * time.Second}

// TestScheduleReplays: a seed gives the same schedule every time, another
// seed another one.
func TestScheduleReplays(t *testing.T) {
	a, b := Schedule(42, DefaultDuration, topo), Schedule(42, DefaultDuration, topo)
	if !slices.Equal(a, b) {
		t.Fatal("seed 42 gave two different schedules")
	}
	if slices.Equal(a, Schedule(43, DefaultDuration, topo)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
}

// TestScheduleShape: one fault at a time, a few seconds apart, frozen
// processes frozen beyond the failover timeout, targets in range, all over
// by the end, and a default-length run meets every kind.
func TestScheduleShape(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 1 << 63} {
		faults := Schedule(seed, DefaultDuration, topo)
		var end time.Duration
		for i, f := range faults {
			if gap := f.At - end; gap < 2*time.Second || gap > 8*time.Second {
				t.Fatalf("seed %d fault %d (%v): %s after the previous one ended, want 2s..8s", seed, i, f, gap)
			}
			end = f.At + f.Hold
			if (f.Kind == FreezeSidecar || f.Kind == FreezeBroker) && f.Hold <= topo.FailoverTimeout {
				t.Fatalf("seed %d: %v is not longer than the failover timeout %s", seed, f, topo.FailoverTimeout)
			}
			limit := map[Kind]int{KillSourceBroker: topo.SourceNodes, FreezeBroker: topo.SourceNodes + topo.DestinationNodes}[f.Kind]
			if limit == 0 {
				limit = topo.DestinationNodes
			}
			if f.Target < 0 || f.Target >= limit {
				t.Fatalf("seed %d: %v targets node %d of %d", seed, f, f.Target, limit)
			}
		}
		if end > DefaultDuration {
			t.Fatalf("seed %d: the last fault ends at %s, after the run", seed, end)
		}
		sum := Summary(faults)
		for _, k := range Kinds() {
			if sum[k] == 0 {
				t.Errorf("seed %d: no %s fault in %s (%d faults)", seed, k, DefaultDuration, len(faults))
			}
		}
	}
}

// TestScheduleKinds: a bed that lacks some kinds gets only those it has.
func TestScheduleKinds(t *testing.T) {
	loop := topo
	loop.Kinds = []Kind{KillSidecar, KillDestBroker, CutSource}
	for _, f := range Schedule(7, DefaultCIDuration, loop) {
		if !slices.Contains(loop.Kinds, f.Kind) {
			t.Fatalf("%v on a bed without %s", f, f.Kind)
		}
	}
}

func TestParamsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	p, err := ParamsFromEnv(env("CHAOS_SEED", "12345", "CHAOS_DURATION", "7m"))
	if err != nil || p.Seed != 12345 || p.Duration != 7*time.Minute {
		t.Fatalf("got %+v, %v", p, err)
	}
	if p, err := ParamsFromEnv(env()); err != nil || p.Duration != DefaultDuration {
		t.Fatalf("defaults: got %+v, %v", p, err)
	}
	if p, err := ParamsFromEnv(env("CI", "true")); err != nil || p.Duration != DefaultCIDuration {
		t.Fatalf("CI: got %+v, %v", p, err)
	}
	if _, err := ParamsFromEnv(env("CHAOS_SEED", "x1", "CHAOS_DURATION", "5s")); err == nil {
		t.Fatal("a bad seed and a 5s duration were accepted")
	}
}

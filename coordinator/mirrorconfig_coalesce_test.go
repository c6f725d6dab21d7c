package coordinator

import (
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// TestCoalesceBatchesKey checks that mirror.coalesce.batches reaches the
// data plane as KeepBatchBoundaries (coalescing on by default) and that
// other values are refused with the key named.
func TestCoalesceBatchesKey(t *testing.T) {
	for _, tc := range []struct {
		config map[string]string
		keep   bool
	}{
		{map[string]string{}, false},
		{map[string]string{CoalesceBatchesKey: "true"}, false},
		{map[string]string{CoalesceBatchesKey: "false"}, true},
	} {
		if err := checkMirrorKeys(tc.config); err != nil {
			t.Fatalf("%v: %v", tc.config, err)
		}
		got := dataPlaneSettings(&fsm.State{}, &fsm.Mirror{Name: "m", Config: tc.config})
		if got.KeepBatchBoundaries != tc.keep {
			t.Errorf("%v: KeepBatchBoundaries %v, want %v", tc.config, got.KeepBatchBoundaries, tc.keep)
		}
	}
	err := checkMirrorKeys(map[string]string{CoalesceBatchesKey: "yes"})
	if err == nil || !strings.Contains(err.Error(), CoalesceBatchesKey) || !strings.Contains(err.Error(), `"yes"`) {
		t.Fatalf("mirror.coalesce.batches=yes: %v", err)
	}
}

package main

import (
	"strings"
	"testing"
)

// TestCheckScaleLimits: a partition count past any machine's limits names
// both limits and how to raise them; a handful passes.
func TestCheckScaleLimits(t *testing.T) {
	if err := checkScaleLimits(10); err != nil {
		t.Fatalf("10 partitions: %v", err)
	}
	err := checkScaleLimits(1 << 40)
	if err == nil {
		t.Fatal("2^40 partitions passed the check")
	}
	for _, want := range []string{"open files", "ulimit -Hn", "vm.max_map_count", "sysctl -w"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

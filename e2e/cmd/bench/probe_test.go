package main

import "testing"

func TestProbeCapacity(t *testing.T) {
	m := &measurement{RecordsPerSecond: 160_000}
	for _, tc := range []struct {
		name  string
		limit *measurement
		want  float64
	}{
		{"no limit measured", nil, 160_000},
		{"limit lower", &measurement{RecordsPerSecond: 90_000}, 90_000},
		{"limit higher", &measurement{RecordsPerSecond: 200_000}, 160_000},
		{"limit failed", &measurement{}, 160_000},
	} {
		if got := probeCapacity(m, tc.limit); got != tc.want {
			t.Errorf("%s: probeCapacity = %v, want %v", tc.name, got, tc.want)
		}
	}
}

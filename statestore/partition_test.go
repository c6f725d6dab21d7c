package statestore

import (
	"math"
	"strconv"
	"testing"
)

func TestPartitionFor(t *testing.T) {
	// Java values from jshell: s.hashCode(), and
	// (h == Integer.MIN_VALUE ? 0 : Math.abs(h)) % n for n = 16, 50, 7.
	tests := []struct {
		name         string
		hash         int32
		p16, p50, p7 int32
	}{
		{"", 0, 0, 0, 0},
		{"a", 97, 1, 47, 6},
		{"my-mirror", 1191661312, 0, 12, 2},
		{"dr-east", 1864442332, 12, 32, 4},
		{"us-west-2-to-us-east-1", -1279697016, 8, 16, 3},
		{"mirror-ü", -1236173202, 2, 2, 5},
		{"été", 227742, 14, 42, 4},
		{"镜像", 1206003, 3, 3, 1},
		{"😀mirror", 635675362, 2, 12, 0},               // a surrogate pair in UTF-16
		{"polygenelubricants", math.MinInt32, 0, 0, 0}, // Utils.abs(MinInt32) = 0
		{"GydZG_", math.MinInt32, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.name), func(t *testing.T) {
			if got := javaHashCode(tc.name); got != tc.hash {
				t.Fatalf("javaHashCode(%q) = %d, want %d", tc.name, got, tc.hash)
			}
			for _, c := range []struct{ n, want int32 }{{16, tc.p16}, {50, tc.p50}, {7, tc.p7}, {1, 0}} {
				if got := PartitionFor(tc.name, c.n); got != c.want {
					t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.name, c.n, got, c.want)
				}
			}
		})
	}
}

func TestJavaAbs(t *testing.T) {
	tests := []struct{ in, want int32 }{
		{0, 0}, {5, 5}, {-5, 5}, {math.MaxInt32, math.MaxInt32}, {-math.MaxInt32, math.MaxInt32}, {math.MinInt32, 0},
	}
	for _, tc := range tests {
		if got := javaAbs(tc.in); got != tc.want {
			t.Errorf("javaAbs(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPartitionForPanicsOnZeroPartitions(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("PartitionFor(_, 0) did not panic")
		}
	}()
	PartitionFor("m", 0)
}

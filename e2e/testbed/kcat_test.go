package testbed

import (
	"strings"
	"testing"
)

func TestCompareLines(t *testing.T) {
	for _, tc := range []struct {
		name, src, dst string
		n              int
		err            string // "" when equal
	}{
		{name: "equal", src: "0 a\n1 b\n", dst: "0 a\n1 b\n", n: 2},
		{name: "both empty", n: 0},
		{name: "a record differs", src: "0 a\n1 b\n2 c\n", dst: "0 a\n1 x\n2 c\n", n: 1, err: "record 1 differs"},
		{name: "destination shorter", src: "0 a\n1 b\n", dst: "0 a\n", n: 1, err: `destination: ""`},
		{name: "destination longer", src: "0 a\n", dst: "0 a\n1 b\n", n: 1, err: `source:      ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := compareLines(strings.NewReader(tc.src), strings.NewReader(tc.dst))
			if n != tc.n {
				t.Errorf("compared %d lines, want %d", n, tc.n)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

package fsm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

func TestValidateMirrorName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string // substring; "" = valid
	}{
		{"simple", "my-mirror", ""},
		{"all legal characters", "aZ09._-", ""},
		{"249 characters", strings.Repeat("m", 249), ""},
		{"contains stopped not at the end", "a.stopped.b", ""},
		{"empty", "", "empty"},
		{"250 characters", strings.Repeat("m", 250), "250 characters long; the limit is 249"},
		{"space", "my mirror", "illegal character ' ' at byte 2"},
		{"slash", "a/b", "illegal character '/'"},
		{"non-ASCII", "mirrör", "illegal character 'ö'"},
		{"dot", ".", "not allowed"},
		{"dot dot", "..", "not allowed"},
		{"ends with .stopped", "dr.stopped", `ends with ".stopped"`},
		{"ends with .paused", "dr.paused", `ends with ".paused"`},
		{"is .paused", ".paused", `ends with ".paused"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fsm.ValidateMirrorName(tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateMirrorName(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if !errors.Is(err, fsm.ErrInvalidName) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateMirrorName(%q) = %v, want ErrInvalidName containing %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{"orders", true},
		{"orders.paused", true}, // the suffix rule is for mirror names only
		{"", false},
		{"..", false},
		{"a*b", false},
		{strings.Repeat("t", 250), false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if err := fsm.ValidateTopicName(tc.in); (err == nil) != tc.valid {
				t.Fatalf("ValidateTopicName(%q) = %v, want valid=%v", tc.in, err, tc.valid)
			}
		})
	}
}

func TestValidatePattern(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{"orders-.*", true},
		{"^payments$", true},
		{"", false},
		{"  ", false},
		{"(unclosed", false},
		{"(?=lookahead)", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			err := fsm.ValidatePattern(tc.in)
			if (err == nil) != tc.valid {
				t.Fatalf("ValidatePattern(%q) = %v, want valid=%v", tc.in, err, tc.valid)
			}
			if err != nil && !errors.Is(err, fsm.ErrInvalidPattern) {
				t.Fatalf("ValidatePattern(%q) = %v, want ErrInvalidPattern", tc.in, err)
			}
		})
	}
}

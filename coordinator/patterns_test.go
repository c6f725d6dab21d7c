package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// TestPatternValidatedOnItsOwn: a pattern that is not a regular expression
// by itself, but becomes one that matches every name once wrapped in
// ^(?:p)$, is refused, as are patterns over the length and size limits.
func TestPatternValidatedOnItsOwn(t *testing.T) {
	for name, p := range map[string]string{
		"the )|( wrapping escape":  `orders)|(.*`,
		"the )|( wrapping, closed": `x)|(y`,
		"longer than the limit":    strings.Repeat("a", fsm.MaxPatternLength+1),
		"large repeat counts":      strings.Repeat("[a-z]{1000}", 20),
		"empty":                    " ",
	} {
		_, err := compilePatterns([]string{"orders", p})
		if !errors.Is(err, fsm.ErrInvalidPattern) {
			t.Errorf("%s: %q... compiled (err %v)", name, p[:min(len(p), 20)], err)
		}
		if err := fsm.ValidatePattern(p); err == nil {
			t.Errorf("%s: ValidatePattern accepted it", name)
		}
	}
	// Stop goes through the same compile: the pattern stops nothing.
	st := &fsm.State{}
	if _, err := expandMirrorTopics(st, "m", []string{`orders)|(.*`}); !errors.Is(err, fsm.ErrInvalidPattern) {
		t.Errorf("expandMirrorTopics took the pattern: %v", err)
	}
	// Within the limits, patterns work.
	if _, err := compilePatterns([]string{strings.Repeat("a", fsm.MaxPatternLength), "orders-[0-9]{3}", `(?i)Payments.*`}); err != nil {
		t.Errorf("patterns within the limits: %v", err)
	}
}

// TestPatternsMatchWholeNames covers the three kinds of patterns: names,
// names with dots (any character, as in a regexp) and escaped names as the
// exclude list keeps them, and regular expressions.
func TestPatternsMatchWholeNames(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		match         bool
	}{
		{"orders", "orders", true},
		{"orders", "orders2", false},
		{"orders", "xorders", false},
		{"orders.v1", "orders.v1", true},
		{"orders.v1", "ordersXv1", true}, // as ^(?:orders.v1)$ would
		{"orders.v1", "orders.v12", false},
		{"orders.v1", "orders\nv1", false},
		{`orders\.v1`, "orders.v1", true},
		{`orders\.v1`, "ordersXv1", false},
		{"orders-.*", "orders-eu", true},
		{"orders-.*", "payments", false},
		{"a|b", "a", true},
		{"a|b", "ab", false},
		{"(?i)ORDERS", "orders", true},
	} {
		res, err := compilePatterns([]string{c.pattern})
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := res[0].MatchString(c.name); got != c.match {
			t.Errorf("%q matching %q: %v, want %v", c.pattern, c.name, got, c.match)
		}
	}
}

// TestPatternCache: a pattern is compiled once and then served from the
// cache; names are not regexps at all; the cache is bounded.
func TestPatternCache(t *testing.T) {
	first, err := compilePatterns([]string{"cache-test-[0-9]+", "cache-test-name"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := compilePatterns([]string{"cache-test-[0-9]+", "cache-test-name"})
	if err != nil {
		t.Fatal(err)
	}
	if first[0] != again[0] || first[0].re == nil {
		t.Error("the regexp was compiled again")
	}
	if first[1] != again[1] || first[1].re != nil {
		t.Error("the name was not cached, or became a regexp")
	}
	for i := range maxCachedPatterns + 10 {
		if _, err := compilePatterns([]string{"fill-" + strings.Repeat("x", i%50) + "-[0-9]" + string(rune('a'+i%26)) + strings.Repeat("y", i/50)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := cachedPatterns(); n > maxCachedPatterns || n == 0 {
		t.Errorf("the cache holds %d patterns, the bound is %d", n, maxCachedPatterns)
	}
	// Many regexps at once are bounded together; many names are not.
	var regexps, names []string
	for i := range 300 {
		regexps = append(regexps, strings.Repeat("[a-z]", 100)+"-"+string(rune('a'+i%26))+strings.Repeat("z", i/26)+".*")
		names = append(names, "topic-"+strings.Repeat("n", i))
	}
	if _, err := compilePatterns(regexps); !errors.Is(err, fsm.ErrInvalidPattern) {
		t.Errorf("300 large regexps at once compiled: %v", err)
	}
	if _, err := compilePatterns(names); err != nil {
		t.Errorf("300 names: %v", err)
	}
}

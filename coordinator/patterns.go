package coordinator

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
	"unicode/utf8"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// This file compiles the topic and group patterns of requests and mirror
// configs (names or regular expressions, each matched against whole names)
// and caches them: the metadata sync, discovery and the group sync match
// the same patterns on every pass, and compiling them again each time cost
// more than the matching. Names, plain (orders) or escaped as the exclude
// list keeps stopped topics (orders\.v1), are compared without a regular
// expression; so are names with dots (orders.v1), whose dots match any
// character as they would in a regular expression.

const (
	// maxCachedPatterns bounds the cache; when full, it starts over.
	maxCachedPatterns = 4096
	// maxRegexpCost bounds the compiled size (regexpCost) of the regular
	// expressions of one compilePatterns call, so that no request or
	// mirror config makes a sidecar hold more than a few MiB of them.
	maxRegexpCost = 50_000
)

// topicPattern matches whole names.
type topicPattern struct {
	exact  string         // a name
	dotted string         // a name whose dots match any character
	re     *regexp.Regexp // else: ^(?:p)$
	cost   int
}

// MatchString reports whether name matches the pattern.
func (p *topicPattern) MatchString(name string) bool {
	switch {
	case p.re != nil:
		return p.re.MatchString(name)
	case p.dotted != "":
		return matchDotted(p.dotted, name)
	}
	return p.exact == name
}

// matchDotted matches name against a literal pattern whose dots match any
// character but a newline, as they do in ^(?:pattern)$.
func matchDotted(pattern, name string) bool {
	for _, pr := range pattern {
		if name == "" {
			return false
		}
		r, size := utf8.DecodeRuneInString(name)
		if pr == '.' && r == '\n' || pr != '.' && pr != r {
			return false
		}
		name = name[size:]
	}
	return name == ""
}

var patternCache = struct {
	sync.Mutex
	m map[string]*topicPattern
}{m: map[string]*topicPattern{}}

// compilePatterns compiles patterns. Each is checked on its own first
// (fsm.ValidatePattern: not empty, at most fsm.MaxPatternLength bytes and
// fsm.MaxPatternCost, a regular expression by itself) and only then, if
// it is not a name, wrapped in ^(?:p)$; the regular expressions of one
// call cost at most maxRegexpCost together.
func compilePatterns(patterns []string) ([]*topicPattern, error) {
	out := make([]*topicPattern, 0, len(patterns))
	cost := 0
	for _, p := range patterns {
		tp, err := compilePattern(p)
		if err != nil {
			return nil, err
		}
		if cost += tp.cost; cost > maxRegexpCost {
			return nil, fmt.Errorf("%w: the regular expressions of %d patterns are too large together (limit %d; see docs/security.md); name the topics, or use fewer or simpler expressions",
				fsm.ErrInvalidPattern, len(patterns), maxRegexpCost)
		}
		out = append(out, tp)
	}
	return out, nil
}

func compilePattern(p string) (*topicPattern, error) {
	patternCache.Lock()
	tp, ok := patternCache.m[p]
	patternCache.Unlock()
	if ok {
		return tp, nil
	}
	if err := fsm.ValidatePattern(p); err != nil {
		return nil, err
	}
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err != nil { // not reached: ValidatePattern parsed it
		return nil, fmt.Errorf("%w: invalid topic pattern %q: %v", fsm.ErrInvalidPattern, p, err)
	}
	switch {
	case parsed.Op == syntax.OpLiteral && parsed.Flags&syntax.FoldCase == 0:
		tp = &topicPattern{exact: string(parsed.Rune)}
	case isLiteral(p):
		tp = &topicPattern{dotted: p}
	default:
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil { // not reached for a pattern that compiles on its own
			return nil, fmt.Errorf("%w: invalid topic pattern %q: %v", fsm.ErrInvalidPattern, p, err)
		}
		tp = &topicPattern{re: re, cost: fsm.PatternCost(parsed)}
	}
	patternCache.Lock()
	if len(patternCache.m) >= maxCachedPatterns {
		clear(patternCache.m)
	}
	patternCache.m[p] = tp
	patternCache.Unlock()
	return tp, nil
}

// cachedPatterns returns how many compiled patterns the cache holds.
func cachedPatterns() int {
	patternCache.Lock()
	defer patternCache.Unlock()
	return len(patternCache.m)
}

package fsm

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// MaxNameLength is the longest legal topic or mirror name, as in Kafka.
const MaxNameLength = 249

// MaxPatternLength bounds a topic or group pattern (a name or a regular
// expression), in bytes.
const MaxPatternLength = 1024

// MaxPatternCost bounds the compiled size of a pattern's regular
// expression (PatternCost): a short pattern with large repeat counts,
// ([a-z]{1000}){90}, compiles to megabytes.
const MaxPatternCost = 10_000

// Suffixes of the mirror.name topic config for paused and stopped topics
// (KIP-1279 §1.2); a mirror name must not end with them.
const (
	PausedSuffix  = ".paused"
	StoppedSuffix = ".stopped"
)

// ValidateMirrorName checks a mirror name against KIP-1279's rules: the
// rules of Kafka topic names (not empty, at most 249 characters, only ASCII
// letters, digits, '.', '_' and '-', not "." or "..") and no ".stopped" or
// ".paused" suffix. The error matches ErrInvalidName and names the broken
// rule.
func ValidateMirrorName(name string) error {
	if p := mirrorNameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, p)
	}
	return nil
}

// ValidateTopicName checks a topic name against Kafka's rules: not empty,
// at most 249 characters, only ASCII letters, digits, '.', '_' and '-', not
// "." or "..". The error matches ErrInvalidName and names the broken rule.
func ValidateTopicName(name string) error {
	if p := nameProblem("topic", name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, p)
	}
	return nil
}

// mirrorNameProblem returns what is wrong with a mirror name, "" if
// nothing.
func mirrorNameProblem(name string) string {
	if p := nameProblem("mirror", name); p != "" {
		return p
	}
	for _, suffix := range []string{StoppedSuffix, PausedSuffix} {
		if strings.HasSuffix(name, suffix) {
			return fmt.Sprintf("mirror name %q ends with %q, which is reserved for the mirror.name config of %s topics; choose a name without it",
				name, suffix, strings.TrimPrefix(suffix, "."))
		}
	}
	return ""
}

// nameProblem returns what is wrong with a topic-like name, "" if nothing.
func nameProblem(kind, name string) string {
	switch {
	case name == "":
		return fmt.Sprintf("%s name is empty; give a name of 1 to %d characters", kind, MaxNameLength)
	case len(name) > MaxNameLength:
		return fmt.Sprintf("%s name %q... is %d characters long; the limit is %d", kind, name[:32], len(name), MaxNameLength)
	case name == "." || name == "..":
		return fmt.Sprintf("%s name %q is not allowed; choose another name", kind, name)
	}
	for i := 0; i < len(name); i++ {
		if !legalNameByte(name[i]) {
			r, _ := utf8.DecodeRuneInString(name[i:])
			return fmt.Sprintf("%s name %q contains the illegal character %q at byte %d; use only ASCII letters, digits, '.', '_' and '-'",
				kind, name, r, i)
		}
	}
	return ""
}

func legalNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidatePattern checks that an include or exclude pattern compiles as a
// Go regular expression, the dialect the sidecars match topic names with.
// Call it where a request arrives, before proposing a command: the FSM
// itself only checks that patterns are non-empty, because Apply must give
// the same answer on every sidecar, and which expressions compile may
// change between Go releases.
//
// The pattern is compiled on its own, before anyone wraps it in
// ^(?:pattern)$ to match whole names, so that a pattern that is not a
// regular expression by itself (orders)|(.*) cannot turn into one that
// matches every name once wrapped; and it is bounded by MaxPatternLength,
// checked before compiling, so that no pattern costs more than a moment to
// compile.
func ValidatePattern(p string) error {
	if strings.TrimSpace(p) == "" {
		return fmt.Errorf("%w: the topic pattern is empty; give a topic name or a regular expression", ErrInvalidPattern)
	}
	if len(p) > MaxPatternLength {
		return fmt.Errorf("%w: topic pattern %q... is %d bytes long; the limit is %d", ErrInvalidPattern, p[:32], len(p), MaxPatternLength)
	}
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err == nil {
		if cost := PatternCost(parsed); cost > MaxPatternCost {
			return fmt.Errorf("%w: topic pattern %q is too large a regular expression once its repetitions are expanded (cost %d, the limit is %d); use smaller repeat counts",
				ErrInvalidPattern, p, cost, MaxPatternCost)
		}
		_, err = regexp.Compile(p)
	}
	if err != nil {
		return fmt.Errorf("%w: topic pattern %q is not a valid regular expression (%v); note that lookarounds and backreferences are not supported",
			ErrInvalidPattern, p, err)
	}
	return nil
}

// PatternCost estimates the size of a parsed regular expression once
// compiled, in program instructions: repetitions count as many times as
// they repeat.
func PatternCost(re *syntax.Regexp) int {
	sum := func() int {
		n := 1
		for _, sub := range re.Sub {
			n += PatternCost(sub)
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass:
		return 1 + len(re.Rune)/2
	case syntax.OpRepeat:
		times := max(re.Min, re.Max, 1)
		return min(times*sum(), MaxPatternCost*1000)
	}
	return min(sum(), MaxPatternCost*1000)
}

package coordinator

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Exclude patterns that shadow a start's include patterns.
//
// A stop moves its patterns from mirror.topics.include to
// mirror.topics.exclude (DESIGN D16), so that discovery does not bring the
// stopped topics back: after runbook 2's `--stop --topics '.*'` the exclude
// list holds `.*`. Exclude patterns win over include patterns, so a later
// `--start --topics 'new-.*'` would add an include pattern that discovery
// can never act on: every topic it names is excluded. The start therefore
// narrows every exclude pattern of the mirror that shadows one of its
// include patterns, that is, that excludes a source topic the include
// pattern names, or an example name the include pattern stands for (so
// that `.*` shadows `new-.*` before any new-* topic exists):
//
//   - the shadowing pattern is removed from the exclude list;
//   - in its place go the anchored literal names of the source topics it
//     excluded that the start's patterns do not name, the mirror does not
//     know, and another include pattern names: what the pattern kept out of
//     discovery today stays out, by name.
//
// A regular expression cannot express "this pattern but not that one" (RE2
// has no negative lookahead), so a topic created later that the removed
// pattern would have excluded is discovered when another include pattern
// names it: the start's answer names every removed pattern, and so does the
// sidecar's log. Topics the mirror knows, stopped ones included, are never
// restarted by discovery whatever the patterns say (discovery.go); only a
// start restarts them.

// shadowFix is how a start changes a mirror's exclude patterns.
type shadowFix struct {
	remove []string // shadowing exclude patterns
	add    []string // anchored literals that keep today's excluded topics out
	note   string   // for the start's answer and the log; "" when nothing changes
}

// fixShadowing returns how the exclude patterns of m change when a start
// adds include (its include patterns) and exclude (its own exclude
// patterns, never removed). topics are the source's topics, st the state.
func fixShadowing(st *fsm.State, m *fsm.Mirror, topics []SourceTopic, include, exclude []string) (shadowFix, error) {
	var out shadowFix
	if len(include) == 0 {
		return out, nil
	}
	inc, err := compilePatterns(include)
	if err != nil {
		return out, err
	}
	examples := map[string][]string{} // include pattern -> example names
	for _, p := range include {
		examples[p] = patternExamples(p)
	}
	var others []string // include patterns of the mirror that the start does not add
	for _, p := range m.Include {
		if !slices.Contains(include, p) {
			others = append(others, p)
		}
	}
	oth, err := compilePatterns(others)
	if err != nil {
		return out, err
	}
	var lines []string
	for _, e := range m.Exclude {
		if slices.Contains(exclude, e) {
			continue
		}
		re, err := compilePatterns([]string{e})
		if err != nil {
			return out, err
		}
		var shadowed []string
		for i, p := range include {
			if slices.ContainsFunc(examples[p], re[0].MatchString) ||
				slices.ContainsFunc(topics, func(t SourceTopic) bool { return inc[i].MatchString(t.Name) && re[0].MatchString(t.Name) }) {
				shadowed = append(shadowed, p)
			}
		}
		if len(shadowed) == 0 {
			continue
		}
		var keep []string
		for _, t := range topics {
			if _, known := st.Topics[t.Name]; known || !re[0].MatchString(t.Name) || matchAny(inc, t.Name) || !matchAny(oth, t.Name) {
				continue
			}
			keep = append(keep, regexp.QuoteMeta(t.Name))
		}
		if slices.Equal(keep, []string{e}) {
			continue
		}
		out.remove = append(out.remove, e)
		line := fmt.Sprintf("exclude pattern %q shadowed include pattern(s) %s (discovery would never start a topic they name): removed it from %s",
			e, quoteAll(shadowed), fsm.ExcludeKey)
		if len(keep) > 0 {
			line += fmt.Sprintf(", keeping the %d source topic(s) it excluded that other include patterns name excluded by name (%s)", len(keep), listSome(keep, 5))
			for _, k := range keep {
				if !slices.Contains(out.add, k) && !slices.Contains(m.Exclude, k) {
					out.add = append(out.add, k)
				}
			}
		}
		lines = append(lines, line)
	}
	out.add = slices.DeleteFunc(out.add, func(k string) bool { return slices.Contains(out.remove, k) })
	out.note = strings.Join(lines, "; ")
	return out, nil
}

// shadowedIncludes returns the include patterns of m that can start
// nothing: every example name they stand for is excluded, and so is every
// source topic they name. Discovery warns about them.
func shadowedIncludes(m *fsm.Mirror, topics []SourceTopic) []string {
	exc, err := compilePatterns(m.Exclude)
	if err != nil || len(exc) == 0 {
		return nil
	}
	var out []string
	for _, p := range m.Include {
		re, err := compilePatterns([]string{p})
		if err != nil {
			continue
		}
		examples := patternExamples(p)
		dead := len(examples) > 0 && !slices.ContainsFunc(examples, func(e string) bool { return !matchAny(exc, e) }) &&
			!slices.ContainsFunc(topics, func(t SourceTopic) bool { return re[0].MatchString(t.Name) && !matchAny(exc, t.Name) })
		if dead {
			out = append(out, p)
		}
	}
	return out
}

func quoteAll(ps []string) string {
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, ", ")
}

func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// maxExamples bounds the example names patternExamples makes of one
// pattern.
const maxExamples = 16

// patternExamples returns a few names that pattern (a full-match topic
// pattern) matches: the shortest of each alternative, with a repeated part
// taken both not at all and once. A pattern it cannot parse, or one that
// matches only names with characters a topic name cannot hold, gives
// fewer or none; the caller also tries the real source topics.
func patternExamples(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	full, err := compilePatterns([]string{pattern})
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range examples(re.Simplify()) {
		if full[0].MatchString(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// topicChars are characters a topic name may hold, in the order an example
// picks them from a character class.
const topicChars = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ._-"

func examples(re *syntax.Regexp) []string {
	cross := func(a, b []string) []string {
		var out []string
		for _, x := range a {
			for _, y := range b {
				if len(out) == maxExamples {
					return out
				}
				out = append(out, x+y)
			}
		}
		return out
	}
	switch re.Op {
	case syntax.OpLiteral:
		return []string{string(re.Rune)}
	case syntax.OpCharClass:
		for _, c := range topicChars {
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if c >= re.Rune[i] && c <= re.Rune[i+1] {
					return []string{string(c)}
				}
			}
		}
		if len(re.Rune) > 0 {
			return []string{string(re.Rune[0])}
		}
		return nil
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return []string{"a"}
	case syntax.OpCapture:
		return examples(re.Sub[0])
	case syntax.OpStar:
		return append([]string{""}, examples(re.Sub[0])...)
	case syntax.OpQuest:
		return append([]string{""}, examples(re.Sub[0])...)
	case syntax.OpPlus:
		return examples(re.Sub[0])
	case syntax.OpRepeat:
		sub := examples(re.Sub[0])
		out := []string{""}
		for range re.Min {
			out = cross(out, sub)
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			out = cross(out, examples(s))
		}
		return out
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			out = append(out, examples(s)...)
		}
		if len(out) > maxExamples {
			out = out[:maxExamples]
		}
		return out
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}
	}
	return nil
}

// Package properties reads Java-style .properties files, the format of
// Kafka's client and broker configs, for the sidecar's configuration and the
// CLI's --command-config, --mirror-config and --add-config-file, and
// resolves the ${env:NAME} and ${file:path:key} references values may hold
// (Resolver). Errors name the line or key but never a value, because values
// may be secrets.
//
// Files: properties.go (Parse, ReadFile), resolve.go (Resolver), secret.go
// (IsSecret, Hidden).
package properties

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf16"
)

// ErrSyntax is matched by a *SyntaxError from Parse.
var ErrSyntax = errors.New("properties: syntax error")

// Property is one key/value pair of a .properties file. Line is the 1-based
// line on which the entry starts (0 for properties not read from a file).
type Property struct {
	Key   string
	Value string
	Line  int
}

// SyntaxError reports a malformed line of a .properties file.
type SyntaxError struct {
	Line int    // 1-based line of the offending entry
	Msg  string // what is wrong; never contains a value
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Unwrap makes a SyntaxError match ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// ReadFile parses the .properties file at path (see Parse); a syntax error
// names the file.
func ReadFile(path string) ([]Property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// Parse reads a Java-style .properties file (as java.util.Properties
// does, but UTF-8) and returns its entries in file order:
//
//   - lines whose first non-blank character is '#' or '!' are comments;
//   - an entry is `key=value`, `key: value` or `key value`; blanks around the
//     separator and leading blanks of a line are dropped, trailing blanks of a
//     value are kept;
//   - a line ending in an odd number of backslashes continues on the next line,
//     whose leading blanks are dropped;
//   - escapes \t \n \r \f \uXXXX are decoded, and a backslash before any other
//     character (\\ \= \: \# \! \ ) stands for that character.
//
// Unlike java.util.Properties, a key that appears twice is an error naming
// both lines, because a silently overridden setting is an operator's trap.
func Parse(r io.Reader) ([]Property, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	lines := splitLines(string(data))

	var props []Property
	seen := make(map[string]int) // key -> line
	for i := 0; i < len(lines); {
		start := i + 1
		line := trimLeftBlank(lines[i])
		i++
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		var logical strings.Builder
		for {
			if !continues(line) {
				logical.WriteString(line)
				break
			}
			logical.WriteString(line[:len(line)-1])
			if i >= len(lines) {
				break
			}
			line = trimLeftBlank(lines[i])
			i++
		}
		key, value, err := splitEntry(logical.String())
		if err != nil {
			return nil, &SyntaxError{Line: start, Msg: err.Error()}
		}
		if key == "" {
			return nil, &SyntaxError{Line: start, Msg: "empty key"}
		}
		if first, dup := seen[key]; dup {
			return nil, &SyntaxError{Line: start, Msg: fmt.Sprintf("duplicate key %q (first set on line %d)", key, first)}
		}
		seen[key] = start
		props = append(props, Property{Key: key, Value: value, Line: start})
	}
	return props, nil
}

// splitLines splits on \n, \r\n and \r, the line terminators Java accepts.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftBlank(s string) string {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	return s
}

// continues reports whether a natural line ends in an odd number of
// backslashes, that is, in a line continuation rather than an escaped
// backslash.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line into its unescaped key and value.
func splitEntry(s string) (key, value string, err error) {
	j := 0
	for j < len(s) {
		c := s[j]
		if c == '\\' {
			j += 2
			continue
		}
		if c == '=' || c == ':' || isBlank(c) {
			break
		}
		j++
	}
	if j > len(s) {
		j = len(s)
	}
	rawKey := s[:j]
	rest := trimLeftBlank(s[j:])
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = trimLeftBlank(rest[1:])
	}
	if key, err = unescape(rawKey); err != nil {
		return "", "", fmt.Errorf("in key: %w", err)
	}
	if value, err = unescape(rest); err != nil {
		return "", "", fmt.Errorf("in the value of %q: %w", key, err)
	}
	return key, value, nil
}

// unescape decodes the escapes of a properties key or value.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone backslash at the end of the file
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r1, ok := hex4(s, i+1)
			if !ok {
				return "", fmt.Errorf(`malformed \uXXXX escape (expected 4 hex digits)`)
			}
			i += 4
			r := rune(r1)
			if utf16.IsSurrogate(r) && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2, ok := hex4(s, i+3); ok {
					if pair := utf16.DecodeRune(r, rune(r2)); pair != '\uFFFD' {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4(s string, i int) (uint16, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var v uint16
	for _, c := range []byte(s[i : i+4]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(d)
	}
	return v, true
}

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// property is one entry of a .properties file.
type property struct {
	key   string
	value string
	line  int // 1-based line on which the entry starts
}

// readProperties reads a Java .properties file (UTF-8). Its errors name the
// file and line but never a value, because values may be secrets.
func readProperties(path string) ([]property, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	props, err := parseProperties(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// parseProperties parses the text of a .properties file the way
// java.util.Properties.load does:
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//   - an entry is key=value, key:value or key value, with blanks around the
//     separator ignored;
//   - a line that ends in an odd number of backslashes continues on the
//     next line, whose leading blanks are dropped;
//   - \t, \n, \r, \f and \uXXXX are escapes, and a backslash before any other
//     character stands for that character.
//
// A key given twice is an error: a silently overridden setting surprises.
func parseProperties(text string) ([]property, error) {
	text = strings.TrimPrefix(text, "\uFEFF")
	lines := splitLines(text)
	var props []property
	first := map[string]int{}
	for i := 0; i < len(lines); {
		start := i + 1
		logical := strings.TrimLeft(lines[i], " \t\f")
		i++
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) && i < len(lines) {
			logical = logical[:len(logical)-1] + strings.TrimLeft(lines[i], " \t\f")
			i++
		}
		if continues(logical) { // a continuation at the end of the file
			logical = logical[:len(logical)-1]
		}
		rawKey, rawValue := splitEntry(logical)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: key: %w", start, err)
		}
		value, err := unescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %s: %w", start, key, err)
		}
		if prev, dup := first[key]; dup {
			return nil, fmt.Errorf("line %d: %s is already set on line %d", start, key, prev)
		}
		first[key] = start
		props = append(props, property{key: key, value: value, line: start})
	}
	return props, nil
}

// splitLines splits on \n, \r\n and \r.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line into its raw (still escaped) key and
// value.
func splitEntry(line string) (key, value string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the escaped character is part of the key
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

var errBadEscape = errors.New(`malformed \uXXXX escape`)

// unescape decodes the escapes of a key or value.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i == len(s)-1 {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return "", errBadEscape
			}
			i += 4
			// A UTF-16 surrogate pair is two escapes, as Java writes it.
			if utf16.IsSurrogate(r) && strings.HasPrefix(s[i+1:], `\u`) {
				if r2, ok := hex4(s, i+3); ok {
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	code, err := strconv.ParseUint(s[i:i+4], 16, 16)
	if err != nil {
		return 0, false
	}
	return rune(code), true
}

// isSecretKey reports whether a config key holds a secret that must never
// be printed.
func isSecretKey(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "password") || strings.Contains(k, "jaas.config") || strings.Contains(k, "keystore.key")
}

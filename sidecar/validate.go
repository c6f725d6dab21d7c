package sidecar

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// configErr builds the one-line error "config: <key>: <problem>".
func configErr(key, format string, args ...any) *ConfigError {
	return &ConfigError{Key: key, msg: "config: " + key + ": " + fmt.Sprintf(format, args...)}
}

// unknownKeyError names an unknown key and suggests the nearest known one.
func unknownKeyError(key string, known []string, clientPrefix string) *ConfigError {
	msg := fmt.Sprintf("config: unknown key %q", key)
	if s := suggest(key, known, clientPrefix); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else {
		msg += " (see docs/configuration.md for the valid keys)"
	}
	return &ConfigError{Key: key, msg: msg}
}

// suggest returns the known key nearest to key by edit distance, or "" when
// none is near. A client key given without its prefix suggests the prefixed
// key.
func suggest(key string, known []string, clientPrefix string) string {
	if clientPrefix != "" && slices.Contains(known, clientPrefix+key) {
		return clientPrefix + key
	}
	best, bestDist := "", min(3, max(1, len(key)/4))+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkHostPort validates a host:port address and returns what is wrong
// with it ("" if nothing). Listeners may leave the host empty (all
// interfaces) and use port 0 (any free port).
func checkHostPort(addr string, emptyHostOK, zeroPortOK bool) string {
	const want = "(expected host:port, e.g. 127.0.0.1:9092)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return "is not a host:port address: " + ae.Err + " " + want
		}
		return "is not a host:port address " + want
	}
	if host == "" && !emptyHostOK {
		return "has no host " + want
	}
	if host != "" && !validHost(host) {
		return fmt.Sprintf("has an invalid host %q %s", host, want)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Sprintf("has an invalid port %q (expected a number from 1 to 65535)", port)
	}
	if n == 0 && !zeroPortOK {
		return "has port 0 (expected a number from 1 to 65535)"
	}
	return ""
}

// validHost accepts IP addresses and DNS-style host names.
func validHost(h string) bool {
	if strings.Contains(h, ":") {
		h, _, _ = strings.Cut(h, "%") // IPv6 zone
		return net.ParseIP(h) != nil
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

// orList formats ["a","b","c"] as "a, b or c".
func orList(list []string) string {
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}

// referenceError turns a *properties.ReferenceError into a ConfigError
// naming the key.
func referenceError(err error) error {
	var re *properties.ReferenceError
	if !errors.As(err, &re) {
		return err
	}
	return &ConfigError{Key: re.Key, msg: "config: " + re.Error(), Cause: re.Cause}
}

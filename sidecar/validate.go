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

// validateAdvertised checks the addresses the other sidecars dial: the
// admin address (admin.advertised.listener, default admin.listener) and the
// raft address (raft.advertised.listener, default this sidecar's raft.peers
// entry). A wildcard address is never one to dial. A loopback address is
// refused once the group spans hosts, that is once raft.peers lists another
// sidecar at an address that is not loopback: from there, loopback is the
// other host itself. A group whose members are all on loopback runs on one
// host and may use it.
func (c Config) validateAdvertised() error {
	multi := len(c.RaftPeers) > 1 // validateRaftPeers: unique IDs, this sidecar among them
	remote, spans := c.remotePeer()
	_, adminPort, _ := net.SplitHostPort(c.AdminListener)
	_, raftPort, _ := net.SplitHostPort(c.RaftListener)

	if a := c.AdminAdvertised; a != "" {
		if problem := checkHostPort(a, false, false); problem != "" {
			return configErr(KeyAdminAdvertised, "%q %s", a, problem)
		}
		host, port, _ := net.SplitHostPort(a)
		if isWildcardHost(host) {
			return configErr(KeyAdminAdvertised, "%q is a wildcard address, which no sidecar can dial (set it to an address of this host that the other sidecars reach, e.g. %s)",
				a, c.exampleAddr(port))
		}
		if spans && isLoopbackHost(host) {
			return configErr(KeyAdminAdvertised, "%q is a loopback address, which the other sidecars in raft.peers (such as %s) cannot reach (set it to an address of this host that they reach, e.g. %s)",
				a, remote, c.exampleAddr(port))
		}
	} else if multi && isWildcardHost(hostOf(c.AdminListener)) {
		return configErr(KeyAdminAdvertised, "is not set, and admin.listener %q listens on every interface, which is no address to dial (set admin.advertised.listener to an address of this host that the other sidecars reach, e.g. %s)",
			c.AdminListener, c.exampleAddr(adminPort))
	}
	if spans && isLoopbackHost(hostOf(c.AdminListener)) {
		return configErr(KeyAdminListener, "%q is a loopback address, which the other sidecars in raft.peers (such as %s) cannot reach (set admin.listener=:%s to listen on every interface, and admin.advertised.listener=%s)",
			c.AdminListener, remote, adminPort, c.exampleAddr(adminPort))
	}

	self, inPeers := c.selfPeer()
	if a := c.RaftAdvertised; a != "" {
		if problem := checkHostPort(a, false, false); problem != "" {
			return configErr(KeyRaftAdvertised, "%q %s", a, problem)
		}
		host, port, _ := net.SplitHostPort(a)
		if isWildcardHost(host) {
			return configErr(KeyRaftAdvertised, "%q is a wildcard address, which no sidecar can dial (set it to an address of this host that the other sidecars reach, e.g. %s)",
				a, c.exampleAddr(port))
		}
		if inPeers && a != self.Address {
			return configErr(KeyRaftAdvertised, "%q differs from this sidecar's entry %q in raft.peers (expected the same address, where the other sidecars dial this one; or leave raft.advertised.listener unset)",
				a, self.String())
		}
	}
	if inPeers && spans && isLoopbackHost(hostOf(self.Address)) {
		_, port, _ := net.SplitHostPort(self.Address)
		return configErr(KeyRaftPeers, "this sidecar's entry %q is a loopback address, which the other sidecars (such as %s) cannot reach (expected %d@<an address of this host that they reach>:%s)",
			self.String(), remote, self.ID, port)
	}
	if spans && isLoopbackHost(hostOf(c.RaftListener)) {
		return configErr(KeyRaftListener, "%q is a loopback address, which the other sidecars in raft.peers (such as %s) cannot reach at %s (set raft.listener=:%s to listen on every interface)",
			c.RaftListener, remote, c.RaftAdvertisedAddr(), raftPort)
	}
	return nil
}

// remotePeer returns the first other member of raft.peers at an address
// that is not loopback: the group spans hosts exactly when there is one.
func (c Config) remotePeer() (RaftPeer, bool) {
	for _, p := range c.RaftPeers {
		if p.ID != c.LocalBrokerID && !isLoopbackHost(hostOf(p.Address)) {
			return p, true
		}
	}
	return RaftPeer{}, false
}

// exampleAddr suggests, in error messages, an address of this host with
// port: the host of this sidecar's raft.peers entry when the other hosts
// can dial it.
func (c Config) exampleAddr(port string) string {
	if self, ok := c.selfPeer(); ok {
		if h := hostOf(self.Address); !isLoopbackHost(h) && !isWildcardHost(h) {
			return net.JoinHostPort(h, port)
		}
	}
	return "<an address of this host>:" + port
}

// hostOf returns the host of host:port ("" when addr is not host:port).
func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// isWildcardHost reports whether a listener host means every interface:
// empty, 0.0.0.0 or ::.
func isWildcardHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(stripZone(host))
	return ip != nil && ip.IsUnspecified()
}

// isLoopbackHost reports whether host is this machine only: localhost, a
// name under .localhost, 127.0.0.0/8 or ::1.
func isLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(stripZone(host))
	return ip != nil && ip.IsLoopback()
}

// dialableHost turns a wildcard listener host into the loopback address of
// its family, which this host can dial; other hosts are returned as given.
func dialableHost(host string) string {
	if !isWildcardHost(host) {
		return host
	}
	if strings.Contains(host, ":") {
		return "::1"
	}
	return "127.0.0.1"
}

// portOf returns the port of host:port ("" when addr is not host:port).
func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func stripZone(host string) string {
	h, _, _ := strings.Cut(host, "%")
	return h
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
	return &ConfigError{Key: re.Key, msg: "config: " + re.Error(), Cause: re}
}

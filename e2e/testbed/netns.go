package testbed

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A multi-host bed is one Network: a Linux bridge in the root network
// namespace holding the first address of a /24, and hosts, each a network
// namespace with its own address on that bridge through a veth pair. The
// test process stays in the root namespace: it reaches every host's
// address, and the proxies it runs (Proxy) listen on the bridge's address.
//
// Every name a Network creates (namespaces, links) starts with its prefix,
// "sm<pid><letter>-", so that runs never collide and the objects of a run
// whose process is gone can be recognised and removed (removeStale). Three
// paths remove them: Network.Close when the tests end, CloseNetworks from
// the interrupt handler of Main, and the reaper, a child process that
// outlives a crashed or SIGKILLed test process just long enough to remove
// its network (see startReaper).

// Well-known ports of a host: each host has an address of its own, so every
// node and sidecar uses the standard ports of the deployment examples.
const (
	hostBrokerPort     = 9092 // Kafka client listener (BROKER)
	hostControllerPort = 9093 // KRaft controller listener
	hostRemotePort     = 9094 // the listener a node's Proxy forwards to (REMOTE)
	hostAdminPort      = 9191 // sidecar admin.listener
	hostRaftPort       = 9192 // sidecar raft.listener
	hostHTTPPort       = 9193 // sidecar http.listener
)

// namePattern matches the names of every Network's objects; its group is
// the PID of the process that made them.
var namePattern = regexp.MustCompile(`^sm([0-9]+)[a-z]-`)

// hostNamePattern is what a host's name may be: the namespace's and the
// link's name is the prefix and the host's name, and a link's name has at
// most 15 bytes.
var hostNamePattern = regexp.MustCompile(`^[a-z0-9]{1,4}$`)

var (
	networks   sync.Map // *Network -> struct{}, the open ones, for CloseNetworks
	networkSeq struct {
		sync.Mutex
		n int
	}
)

// Network is a bridge and the hosts on it. Its methods are safe for
// concurrent use.
type Network struct {
	prefix  string // every object's name starts with it
	bridge  string // the bridge's link name
	subnet  net.IP // the /24's network address
	gateway string // the bridge's address, the root namespace's on the bridge

	reaper   *exec.Cmd
	reaperIn io.WriteCloser // closing it (or dying) tells the reaper to act

	mu      sync.Mutex
	closed  bool
	hosts   []*Host
	proxies []*Proxy
	cuts    map[[2]*Host]bool // pairs cut apart by Partition
	// portCuts holds the pairs cut apart by PartitionPorts, with the ports.
	portCuts map[[2]*Host][]int
}

// Host is one network namespace of a Network: a machine of the bed with its
// own address.
type Host struct {
	Name string // short name given to AddHost ("d1")
	IP   string // its address on the bridge

	net  *Network
	ns   string // the namespace's name
	veth string // the root namespace's end of its link, on the bridge

	mu       sync.Mutex
	isolated bool
	limit    int64 // bandwidth limit in bits per second, 0: none
}

// NewNetwork removes what dead runs left behind, then creates a bridge with
// a free /24 and a reaper for it. It needs root and iproute2.
func NewNetwork() (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("testbed: the multi-host bed needs root (network namespaces, veth links): run the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("testbed: the multi-host bed needs iproute2's ip and tc: apt-get install iproute2")
	}
	removeStale()
	networkSeq.Lock()
	seq := networkSeq.n
	networkSeq.n++
	networkSeq.Unlock()
	if seq >= 26 {
		return nil, errors.New("testbed: at most 26 networks per process")
	}
	n := &Network{prefix: fmt.Sprintf("sm%d%c-", os.Getpid(), 'a'+seq), cuts: map[[2]*Host]bool{}, portCuts: map[[2]*Host][]int{}}
	n.bridge = n.prefix + "br"
	// The reaper starts first, so that whatever follows is removed even if
	// this process dies in the middle of it.
	if err := n.startReaper(); err != nil {
		return nil, err
	}
	networks.Store(n, struct{}{})
	if err := n.createBridge(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// createBridge picks a /24 that nothing in the root namespace uses yet and
// gives the bridge its first address. A file lock makes concurrent test
// processes pick one after another.
func (n *Network) createBridge() error {
	lock, err := os.OpenFile(os.TempDir()+"/sidemirror-testbed-net.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("testbed: lock %s: %w", lock.Name(), err)
	}
	used, err := usedPrefixes()
	if err != nil {
		return err
	}
	const candidates = 150 * 256 // 10.100.0.0/24 to 10.249.255.0/24
	start := os.Getpid() * 7
	for i := range candidates {
		k := (start + i) % candidates
		subnet := net.IPv4(10, byte(100+k/256), byte(k%256), 0).To4()
		if overlaps(subnet, used) {
			continue
		}
		n.subnet = subnet
		n.gateway = hostIP(subnet, 1)
		return runAll(
			[]string{"ip", "link", "add", n.bridge, "type", "bridge", "forward_delay", "0"},
			[]string{"ip", "addr", "add", n.gateway + "/24", "dev", n.bridge},
			[]string{"ip", "link", "set", n.bridge, "up"},
		)
	}
	return errors.New("testbed: no free /24 in 10.100.0.0-10.249.255.0 for the multi-host bed")
}

// Prefix returns the prefix of every name the network creates.
func (n *Network) Prefix() string { return n.prefix }

// Gateway returns the root namespace's address on the bridge, where proxies
// listen and through which the test process reaches the hosts.
func (n *Network) Gateway() string { return n.gateway }

// AddHost creates a host: a namespace with loopback up and a veth link to
// the bridge carrying the next free address of the subnet.
func (n *Network) AddHost(name string) (*Host, error) {
	if !hostNamePattern.MatchString(name) {
		return nil, fmt.Errorf("testbed: host name %q: want 1 to 4 lower-case letters or digits", name)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("testbed: network closed")
	}
	for _, h := range n.hosts {
		if h.Name == name {
			n.mu.Unlock()
			return nil, fmt.Errorf("testbed: host %q exists", name)
		}
	}
	h := &Host{Name: name, IP: hostIP(n.subnet, 2+len(n.hosts)), net: n, ns: n.prefix + name, veth: n.prefix + name}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	return h, runAll(
		[]string{"ip", "netns", "add", h.ns},
		[]string{"ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns},
		[]string{"ip", "link", "set", h.veth, "master", n.bridge, "up"},
		[]string{"ip", "-n", h.ns, "addr", "add", h.IP + "/24", "dev", "eth0"},
		[]string{"ip", "-n", h.ns, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", h.ns, "link", "set", "lo", "up"},
	)
}

// describeHosts lists the hosts as name=address.
func (n *Network) describeHosts() string {
	var b []string
	for _, h := range n.Hosts() {
		b = append(b, h.Name+"="+h.IP)
	}
	return strings.Join(b, " ")
}

// Hosts returns the network's hosts in the order they were added.
func (n *Network) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Host returns the host of that name, or nil.
func (n *Network) Host(name string) *Host {
	for _, h := range n.Hosts() {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Close closes the network's proxies, kills what still runs in its hosts,
// removes hosts and bridge, and lets the reaper go. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	proxies := n.proxies
	n.mu.Unlock()
	for _, p := range proxies {
		p.Close()
	}
	err := removeObjects(n.prefix)
	networks.Delete(n)
	if n.reaperIn != nil {
		n.reaperIn.Close()
		done := make(chan struct{})
		go func() { _ = n.reaper.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = n.reaper.Process.Kill()
		}
	}
	return err
}

// CloseNetworks closes every open Network of this process. Main calls it
// when the tests are interrupted.
func CloseNetworks() {
	networks.Range(func(k, _ any) bool {
		_ = k.(*Network).Close()
		return true
	})
}

// Namespace returns the name of the host's network namespace (for
// `ip netns exec`).
func (h *Host) Namespace() string { return h.ns }

// Link returns the name of the root namespace's end of the host's link.
func (h *Host) Link() string { return h.veth }

// Addr returns the host's address with port.
func (h *Host) Addr(port int) string { return net.JoinHostPort(h.IP, strconv.Itoa(port)) }

// Command returns a command that runs name in the host's network namespace
// (`ip netns exec`, which execs name in place: the process keeps the PID,
// the process group and the parent-death signal it was started with).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// hostCommand runs name in h, or in the root namespace when h is nil (the
// loopback bed).
func hostCommand(h *Host, name string, args ...string) *exec.Cmd {
	if h == nil {
		return exec.Command(name, args...)
	}
	return h.Command(name, args...)
}

// hostIP returns the i-th address of a /24.
func hostIP(subnet net.IP, i int) string {
	ip := append(net.IP(nil), subnet.To4()...)
	ip[3] = byte(i)
	return ip.String()
}

// usedPrefixes lists the IPv4 networks of the root namespace's addresses
// and routes.
func usedPrefixes() ([]*net.IPNet, error) {
	var used []*net.IPNet
	for _, args := range [][]string{{"-4", "-o", "addr", "show"}, {"-4", "route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("testbed: ip %s: %w", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(string(out)) {
			if !strings.Contains(f, ".") {
				continue
			}
			if !strings.Contains(f, "/") {
				f += "/32"
			}
			if _, ipn, err := net.ParseCIDR(f); err == nil {
				used = append(used, ipn)
			}
		}
	}
	return used, nil
}

// overlaps reports whether the /24 at subnet overlaps any of used.
func overlaps(subnet net.IP, used []*net.IPNet) bool {
	mine := &net.IPNet{IP: subnet, Mask: net.CIDRMask(24, 32)}
	for _, u := range used {
		if u.Contains(mine.IP) || mine.Contains(u.IP) {
			return true
		}
	}
	return false
}

// run runs one command and returns its output in the error when it fails.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testbed: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runAll runs commands in order and stops at the first error.
func runAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// netObjects lists the namespaces and the root namespace's links whose names
// match namePattern.
func netObjects() (namespaces, links []string) {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if f := strings.Fields(line); len(f) > 0 && namePattern.MatchString(f[0]) {
				namespaces = append(namespaces, f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			// "12: sm123a-d1@if2: <BROADCAST,..."
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if namePattern.MatchString(name) {
				links = append(links, name)
			}
		}
	}
	return namespaces, links
}

// removeObjects kills every process left in the namespaces whose names start
// with prefix, unmounts the tmpfs log directories named with it (disk.go),
// then removes the namespaces and the links starting with prefix (the
// bridge last: the veths are its ports). Qdiscs go with their links.
func removeObjects(prefix string) error {
	namespaces, links := netObjects()
	var errs []error
	for _, ns := range namespaces {
		if !strings.HasPrefix(ns, prefix) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	errs = append(errs, unmountAll(prefix))
	var bridges []string
	for _, l := range links {
		switch {
		case !strings.HasPrefix(l, prefix):
		case strings.HasSuffix(l, "-br"):
			bridges = append(bridges, l)
		default:
			errs = append(errs, run("ip", "link", "del", l))
		}
	}
	for _, ns := range namespaces {
		if strings.HasPrefix(ns, prefix) {
			errs = append(errs, run("ip", "netns", "del", ns))
		}
	}
	for _, b := range bridges {
		errs = append(errs, run("ip", "link", "del", b))
	}
	return errors.Join(errs...)
}

// removeStale removes the namespaces, links and tmpfs mounts of runs whose
// process no longer exists (a run killed with SIGKILL whose reaper was killed too).
func removeStale() {
	namespaces, links := netObjects()
	names := append(namespaces, links...)
	for _, m := range mounts() {
		if namePattern.MatchString(m[0]) {
			names = append(names, m[0])
		}
	}
	dead := map[string]bool{}
	for _, name := range names {
		m := namePattern.FindStringSubmatch(name)
		pid, _ := strconv.Atoi(m[1])
		if pid != os.Getpid() && !alive(pid) {
			dead[m[0]] = true
		}
	}
	for prefix := range dead {
		if err := removeObjects(prefix); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: removing what a dead run left (%s*): %v\n", prefix, err)
		}
	}
}

// alive reports whether pid is a running process (zombies count as dead).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

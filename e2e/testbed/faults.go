package testbed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Faults of the multi-host bed. Each one has its undoing, and undoing a
// fault that is not in force is a no-op, so a test can always clean up
// with t.Cleanup. Process faults (Kill, Freeze and Thaw of a Node or a
// Sidecar, Stop and Start) work the same on both beds.
//
//	host.Isolate / host.Reconnect          its link down: it reaches nothing and nothing reaches it
//	net.Partition(a, b) / net.Heal(a, b)   a and b cannot reach each other; both reach everyone else
//	net.PartitionPorts(a, b, ports) / HealPorts   the same for TCP to and from those ports only
//	sidecars.CutOff(s) / Rejoin(s)         s cannot reach the other sidecars, nor they it; brokers unaffected
//	host.LimitBandwidth(bits) / Unlimit    a token bucket (tc tbf) on both directions of its link
//	proxy.SetLatency / Cut / Blackhole / Restore   the link from the destination to one source node
//	env.SetSourceLatency / CutSource / BlackholeSource / RestoreSource   the same, every source node
//	node.FillLogDir / FreeLogDir           its tmpfs log directory full to the last byte (disk.go)
//	sidecars.KillAll / StartStopped        every sidecar killed at once, all started again

// Isolate takes the host's link down (the bridge's end of it): the host
// keeps its own address, so its processes still reach each other, but no
// packet leaves or enters it. Connections stall as in a network partition;
// new ones time out.
func (h *Host) Isolate() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := run("ip", "link", "set", h.veth, "down"); err != nil {
		return err
	}
	h.isolated = true
	return nil
}

// Reconnect brings an isolated host's link up again.
func (h *Host) Reconnect() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isolated {
		return nil
	}
	if err := run("ip", "link", "set", h.veth, "up"); err != nil {
		return err
	}
	h.isolated = false
	return nil
}

// Isolated reports whether the host is isolated.
func (h *Host) Isolated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isolated
}

// Partition cuts a and b apart with a blackhole route to each other in each
// one's namespace: packets between them go nowhere, in both directions,
// while both keep reaching every other host and the root namespace. A new
// connection between them fails at once (EINVAL, as behind a firewall that
// rejects); an open one stalls and resumes after Heal if neither side gave
// up on it.
func (n *Network) Partition(a, b *Host) error {
	if a == b || a.net != n || b.net != n {
		return fmt.Errorf("testbed: cannot partition %s from %s", a.Name, b.Name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := runAll(
		[]string{"ip", "-n", a.ns, "route", "replace", "blackhole", b.IP + "/32"},
		[]string{"ip", "-n", b.ns, "route", "replace", "blackhole", a.IP + "/32"},
	); err != nil {
		return err
	}
	n.cuts[pairKey(a, b)] = true
	return nil
}

// Heal undoes Partition(a, b).
func (n *Network) Heal(a, b *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cuts[pairKey(a, b)] {
		return nil
	}
	err := errors.Join(
		run("ip", "-n", a.ns, "route", "del", "blackhole", b.IP+"/32"),
		run("ip", "-n", b.ns, "route", "del", "blackhole", a.IP+"/32"),
	)
	if err == nil {
		delete(n.cuts, pairKey(a, b))
	}
	return err
}

// HealAll undoes every Partition and PartitionPorts in force.
func (n *Network) HealAll() error {
	n.mu.Lock()
	var pairs, portPairs [][2]*Host
	for k := range n.cuts {
		pairs = append(pairs, k)
	}
	for k := range n.portCuts {
		portPairs = append(portPairs, k)
	}
	n.mu.Unlock()
	var errs []error
	for _, p := range pairs {
		errs = append(errs, n.Heal(p[0], p[1]))
	}
	for _, p := range portPairs {
		errs = append(errs, n.HealPorts(p[0], p[1]))
	}
	return errors.Join(errs...)
}

// PartitionPorts cuts a and b apart for the TCP traffic of the given ports
// only: connections from either host to one of these ports of the other,
// in both directions, with policy routing rules (ip rule ... ipproto tcp
// dport/sport ... blackhole) in each one's namespace. Everything else
// between them still flows. As with Partition, a new connection from one
// to the other fails at once (EINVAL), and open ones stall, since the
// rules also catch the packets of connections opened before them (the
// rules flush the cached routes, and each host's own replies go through
// them). HealPorts undoes it; calling it again for the same pair replaces
// the ports.
func (n *Network) PartitionPorts(a, b *Host, ports ...int) error {
	if a == b || a.net != n || b.net != n || len(ports) == 0 {
		return fmt.Errorf("testbed: cannot partition %s from %s on ports %v", a.Name, b.Name, ports)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	key := pairKey(a, b)
	if old := n.portCuts[key]; old != nil {
		if err := errors.Join(portRules("del", a, b, old)...); err != nil {
			return err
		}
		delete(n.portCuts, key)
	}
	if err := errors.Join(portRules("add", a, b, ports)...); err != nil {
		_ = portRules("del", a, b, ports)
		return err
	}
	n.portCuts[key] = append([]int(nil), ports...)
	return nil
}

// HealPorts undoes PartitionPorts(a, b, ...).
func (n *Network) HealPorts(a, b *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := pairKey(a, b)
	ports := n.portCuts[key]
	if ports == nil {
		return nil
	}
	err := errors.Join(portRules("del", a, b, ports)...)
	if err == nil {
		delete(n.portCuts, key)
	}
	return err
}

// portRules adds or deletes (op) the rules of PartitionPorts in both
// hosts' namespaces. In each host x with peer y, for every port: packets
// to y's port and from y's port (x is the client), and packets to y from
// x's port and from y to x's port (x is the server). The routing of
// received packets catches new connections; that of sent packets, open
// ones too.
func portRules(op string, a, b *Host, ports []int) []error {
	var errs []error
	for _, pair := range [][2]*Host{{a, b}, {b, a}} {
		x, y := pair[0], pair[1]
		for _, port := range ports {
			p := strconv.Itoa(port)
			for _, sel := range [][]string{
				{"to", y.IP, "ipproto", "tcp", "dport", p},
				{"to", y.IP, "ipproto", "tcp", "sport", p},
				{"from", y.IP, "ipproto", "tcp", "dport", p},
				{"from", y.IP, "ipproto", "tcp", "sport", p},
			} {
				args := append([]string{"ip", "-n", x.ns, "rule", op}, sel...)
				errs = append(errs, run(append(args, "blackhole")...))
			}
		}
	}
	return errs
}

// CutOff cuts s apart from the group's other sidecars, in both directions:
// TCP between its host and theirs on the sidecars' admin and raft ports
// (PartitionPorts). Its broker, the other brokers and the source still
// reach each other and it, and the test process still reaches every
// sidecar, so a cut-off sidecar keeps running and appending to its broker
// until the broker fences it. It needs the multi-host bed.
func (g *SidecarGroup) CutOff(s *Sidecar) error {
	return g.eachPeer(s, func(n *Network, a, b *Host, ports []int) error { return n.PartitionPorts(a, b, ports...) })
}

// Rejoin undoes CutOff(s).
func (g *SidecarGroup) Rejoin(s *Sidecar) error {
	return g.eachPeer(s, func(n *Network, a, b *Host, _ []int) error { return n.HealPorts(a, b) })
}

// eachPeer applies f to s's host and each other sidecar's host, with the
// admin and raft ports of both.
func (g *SidecarGroup) eachPeer(s *Sidecar, f func(n *Network, a, b *Host, ports []int) error) error {
	if s.host == nil {
		return errors.New("testbed: cutting a sidecar off needs the multi-host bed")
	}
	var errs []error
	for _, o := range g.sidecars {
		if o == s {
			continue
		}
		if o.host == nil || o.host == s.host {
			return fmt.Errorf("testbed: sidecars %d and %d do not run in hosts of their own", s.BrokerID, o.BrokerID)
		}
		var ports []int
		for _, addr := range []string{s.AdminAddr, s.RaftAddr, o.AdminAddr, o.RaftAddr} {
			_, p, err := net.SplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("testbed: sidecar address %q: %w", addr, err)
			}
			port, err := strconv.Atoi(p)
			if err != nil {
				return fmt.Errorf("testbed: sidecar address %q: %w", addr, err)
			}
			if !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
		errs = append(errs, f(s.host.net, s.host, o.host, ports))
	}
	return errors.Join(errs...)
}

// pairKey orders a pair of hosts by address.
func pairKey(a, b *Host) [2]*Host {
	if a.IP > b.IP {
		a, b = b, a
	}
	return [2]*Host{a, b}
}

// LimitBandwidth limits each direction of the host's link to bitsPerSecond
// with a token bucket filter (tc tbf) on both ends of its veth: what leaves
// the host and what enters it. Packets above the rate queue for up to
// 100 ms, then drop, as on a real bottleneck link. Calling it again
// replaces the limit. (This kernel has no netem: latency is the Proxy's.)
func (h *Host) LimitBandwidth(bitsPerSecond int64) error {
	if bitsPerSecond <= 0 {
		return fmt.Errorf("testbed: bandwidth limit %d bit/s: want a positive rate", bitsPerSecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The bucket holds 10 ms of traffic, at least 64 KiB (a GSO packet):
	// enough for the kernel's timer granularity at any rate.
	burst := max(bitsPerSecond/8/100, 64<<10)
	tbf := []string{"root", "tbf", "rate", strconv.FormatInt(bitsPerSecond, 10) + "bit",
		"burst", strconv.FormatInt(burst, 10), "latency", "100ms"}
	if err := runAll(
		append([]string{"tc", "qdisc", "replace", "dev", h.veth}, tbf...),
		append([]string{"tc", "-n", h.ns, "qdisc", "replace", "dev", "eth0"}, tbf...),
	); err != nil {
		return err
	}
	h.limit = bitsPerSecond
	return nil
}

// Unlimit removes the bandwidth limit.
func (h *Host) Unlimit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.limit == 0 {
		return nil
	}
	err := errors.Join(
		run("tc", "qdisc", "del", "dev", h.veth, "root"),
		run("tc", "-n", h.ns, "qdisc", "del", "dev", "eth0", "root"),
	)
	if err == nil {
		h.limit = 0
	}
	return err
}

// BandwidthLimit returns the limit in force in bits per second, 0 for none.
func (h *Host) BandwidthLimit() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit
}

// LinkTraffic returns the bytes that crossed the host's link since it was
// created, as counted by the kernel: ToUpstream is what the host sent,
// ToClients what it received (the Traffic of a proxy that the host is the
// client of).
func (h *Host) LinkTraffic() (Traffic, error) {
	read := func(name string) (int64, error) {
		b, err := os.ReadFile("/sys/class/net/" + h.veth + "/statistics/" + name)
		if err != nil {
			return 0, fmt.Errorf("testbed: traffic of host %s: %w", h.Name, err)
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	// The bridge's end receives what the host sends.
	sent, err := read("rx_bytes")
	if err != nil {
		return Traffic{}, err
	}
	received, err := read("tx_bytes")
	if err != nil {
		return Traffic{}, err
	}
	return Traffic{ToUpstream: sent, ToClients: received}, nil
}

// Freeze stops the node's JVM with SIGSTOP, as a long GC pause or a hung
// machine would; Thaw resumes it.
func (n *Node) Freeze() {
	if p := n.current(); p != nil {
		p.signal(syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen node with SIGCONT.
func (n *Node) Thaw() {
	if p := n.current(); p != nil {
		p.signal(syscall.SIGCONT)
	}
}

// sourceProxies returns the proxies in front of the source's nodes; it
// fails on a bed without them.
func (e *Env) sourceProxies() ([]*Proxy, error) {
	var ps []*Proxy
	for _, n := range e.Source.Nodes() {
		if n.proxy == nil {
			return nil, errors.New("testbed: the source has no proxies: source faults need EnvOptions.MultiHost or Source.Proxied")
		}
		ps = append(ps, n.proxy)
	}
	return ps, nil
}

// eachSourceProxy applies f to every source proxy.
func (e *Env) eachSourceProxy(f func(*Proxy)) error {
	ps, err := e.sourceProxies()
	for _, p := range ps {
		f(p)
	}
	return err
}

// SetSourceLatency adds d of latency in each direction between the
// destination's hosts and every source node (Proxy.SetLatency).
func (e *Env) SetSourceLatency(d time.Duration) error {
	return e.eachSourceProxy(func(p *Proxy) { p.SetLatency(d) })
}

// CutSource closes every connection to the source from the destination's
// hosts and refuses new ones (Proxy.Cut), until RestoreSource. The test
// process still reaches the source directly (Source.Bootstrap).
func (e *Env) CutSource() error { return e.eachSourceProxy((*Proxy).Cut) }

// BlackholeSource makes the source unreachable from the destination's hosts
// without closing connections (Proxy.Blackhole), until RestoreSource.
func (e *Env) BlackholeSource() error { return e.eachSourceProxy((*Proxy).Blackhole) }

// RestoreSource ends CutSource and BlackholeSource.
func (e *Env) RestoreSource() error { return e.eachSourceProxy((*Proxy).Restore) }

// SourceTraffic returns the bytes every source proxy has delivered.
func (e *Env) SourceTraffic() (Traffic, error) {
	var t Traffic
	err := e.eachSourceProxy(func(p *Proxy) {
		pt := p.Traffic()
		t.ToUpstream += pt.ToUpstream
		t.ToClients += pt.ToClients
	})
	return t, err
}

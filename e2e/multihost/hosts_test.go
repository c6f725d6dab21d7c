package multihost

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// netnsInode returns the inode of a network namespace file: two processes
// share a namespace exactly when their /proc/<pid>/ns/net inodes are equal,
// and a named namespace's is that of /run/netns/<name>.
func netnsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// TestPlacement checks the bed itself: every broker and sidecar runs in
// the network namespace of its own host, the hosts' addresses differ, and
// the raft group registered each sidecar at its host's address, not
// loopback, as --list-sidecars shows.
func TestPlacement(t *testing.T) {
	root := netnsInode(t, "/proc/self/ns/net")
	seen := map[uint64]string{root: "the root namespace"}
	for _, c := range env.Clusters() {
		for _, n := range c.Nodes() {
			h := n.Host()
			want := netnsInode(t, "/run/netns/"+h.Namespace())
			if got := netnsInode(t, fmt.Sprintf("/proc/%d/ns/net", n.PID())); got != want {
				t.Fatalf("%s node %d (pid %d) is not in the namespace of host %s", c.Name(), n.ID, n.PID(), h.Name)
			}
			if other, dup := seen[want]; dup {
				t.Fatalf("host %s of %s node %d shares its namespace with %s", h.Name, c.Name(), n.ID, other)
			}
			seen[want] = fmt.Sprintf("%s node %d", c.Name(), n.ID)
			if host, _, _ := net.SplitHostPort(n.BrokerAddr); host != h.IP {
				t.Fatalf("%s node %d listens on %s, not on its host's address %s", c.Name(), n.ID, n.BrokerAddr, h.IP)
			}
		}
	}
	for _, s := range env.Sidecars.Sidecars() {
		n := env.Destination.Node(s.BrokerID)
		if s.Host() != n.Host() {
			t.Fatalf("sidecar %d runs in host %s, its broker in %s", s.BrokerID, s.Host().Name, n.Host().Name)
		}
		want := netnsInode(t, "/run/netns/"+s.Host().Namespace())
		if got := netnsInode(t, fmt.Sprintf("/proc/%d/ns/net", s.PID())); got != want {
			t.Fatalf("sidecar %d (pid %d) is not in the namespace of host %s", s.BrokerID, s.PID(), s.Host().Name)
		}
	}

	rows := listSidecars(t, env.Sidecars.AdminBootstrap())
	if len(rows) != len(env.Sidecars.Sidecars()) {
		t.Fatalf("--list-sidecars shows %d sidecars, want %d: %v", len(rows), len(env.Sidecars.Sidecars()), rows)
	}
	for _, s := range env.Sidecars.Sidecars() {
		r := rows[s.BrokerID]
		for _, addr := range []string{r.raft, r.admin} {
			host, _, err := net.SplitHostPort(addr)
			if err != nil || host != s.Host().IP {
				t.Fatalf("sidecar %d registered %s, want an address of its host %s (%s)", s.BrokerID, addr, s.Host().Name, s.Host().IP)
			}
			if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
				t.Fatalf("sidecar %d registered the unroutable %s", s.BrokerID, addr)
			}
		}
		if r.admin != s.AdminAddr || r.raft != s.RaftAddr {
			t.Fatalf("sidecar %d registered admin %s raft %s, want %s %s", s.BrokerID, r.admin, r.raft, s.AdminAddr, s.RaftAddr)
		}
	}
	for _, n := range env.Source.Nodes() {
		if n.Proxy() == nil || n.RemoteAddr != n.Proxy().Addr() || n.RemoteAddr == n.BrokerAddr {
			t.Fatalf("source node %d: remote address %s, broker address %s: want its proxy's address apart from its own", n.ID, n.RemoteAddr, n.BrokerAddr)
		}
	}
}

// sidecarRow is one row of --list-sidecars.
type sidecarRow struct{ raft, admin, role string }

// listSidecars parses --list-sidecars asked of bootstrap, by broker ID.
func listSidecars(t *testing.T, bootstrap string) map[int32]sidecarRow {
	t.Helper()
	out := mustCLIAt(t, bootstrap, "--list-sidecars")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "ID RAFT-ADDRESS ADMIN-ADDRESS ROLE" {
		t.Fatalf("--list-sidecars printed no header:\n%s", out)
	}
	rows := map[int32]sidecarRow{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		id, err := strconv.Atoi(f[0])
		if len(f) != 4 || err != nil {
			t.Fatalf("--list-sidecars row %q", l)
		}
		rows[int32(id)] = sidecarRow{raft: f[1], admin: f[2], role: f[3]}
	}
	return rows
}

// TestMirrorAcrossHosts mirrors a topic whose source lives in other hosts,
// reached through the proxies: the records arrive identical, and the bytes
// the sidecars fetched crossed the proxies.
func TestMirrorAcrossHosts(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "across", "across", 6
	createSourceTopic(t, topic, partitions)
	produce(t, topic, 20_000, 1)
	before, err := env.SourceTraffic()
	if err != nil {
		t.Fatal(err)
	}
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	if n := compareAll(t, topic, partitions); n != 20_000 {
		t.Fatalf("compared %d records, want the 20000 written", n)
	}
	after, err := env.SourceTraffic()
	if err != nil {
		t.Fatal(err)
	}
	var mirrored float64
	for _, s := range env.Sidecars.Sidecars() {
		for line := range strings.Lines(metrics(t, s)) {
			if strings.HasPrefix(line, "sidemirror_mirrored_bytes_total{") && strings.Contains(line, `mirror="`+mirror+`"`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				mirrored += v
			}
		}
	}
	fetched := after.Sub(before).ToClients
	t.Logf("mirrored %.0f bytes of batches; %d bytes came through the source proxies", mirrored, fetched)
	if mirrored <= 0 || float64(fetched) < mirrored {
		t.Fatalf("the proxies carried %d bytes to the destination's hosts for %.0f bytes mirrored: the data did not cross them", fetched, mirrored)
	}
}

// TestForwardedWrite sends every write of a mirror's life to one follower
// sidecar only: it must forward them to the raft leader in another host.
// The leader's applied index advances, and the third sidecar, asked alone,
// sees the result.
func TestForwardedWrite(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "forwarded", "forwarded"
	leader := raftLeader(t)
	var follower, third *testbed.Sidecar
	for _, s := range env.Sidecars.Sidecars() {
		switch {
		case s == leader:
		case follower == nil:
			follower = s
		default:
			third = s
		}
	}
	if follower.Host() == leader.Host() {
		t.Fatalf("follower %d shares host %s with the leader", follower.BrokerID, leader.Host().Name)
	}
	if r := listSidecars(t, follower.AdminAddr)[follower.BrokerID]; r.role == "LEADER" {
		t.Fatalf("sidecar %d, taken as follower, lists itself as leader", follower.BrokerID)
	}
	applied := metricValue(metrics(t, leader), "sidemirror_raft_applied_index")

	createSourceTopic(t, topic, 3)
	produce(t, topic, 3_000, 2)
	createMirror(t, follower.AdminAddr, mirror)
	mustCLIAt(t, follower.AdminAddr, "--start", "--topics", topic, "--mirror", mirror)
	if now := metricValue(metrics(t, leader), "sidemirror_raft_applied_index"); now <= applied {
		t.Fatalf("the leader's applied index went from %v to %v over the follower's writes", applied, now)
	}
	if raftLeader(t) != leader {
		t.Fatalf("leadership moved during the test: forwarding was not tested")
	}
	wait.For(t, 2*time.Minute, "the third sidecar to see the mirror caught up", func() bool {
		rows := partitions(describeAt(t, third.AdminAddr, mirror), topic)
		dst := endOffsets(t, env.Destination, topic)
		src := endOffsets(t, env.Source, topic)
		ok := len(rows) == 3
		for p, o := range src {
			ok = ok && rows[p].State == "MIRRORING" && rows[p].DestinationOffset == o && dst[p] == o
		}
		return ok
	})
	compareAll(t, topic, 3)
	if out := mustCLIAt(t, follower.AdminAddr, "--list"); !slices.Contains(strings.Fields(out), mirror) {
		t.Fatalf("--list at the follower does not show %s:\n%s", mirror, out)
	}
}

// TestDescribeFanOut asks each sidecar alone to describe a mirror whose
// partitions are driven by all three: each answer has every partition with
// the offsets the destination and the source report, those driven in other
// hosts included, which only their sidecars know.
func TestDescribeFanOut(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, parts = "fanout", "fanout", 6
	createSourceTopic(t, topic, parts)
	produce(t, topic, 6_000, 3)
	createMirror(t, env.Sidecars.AdminBootstrap(), mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	src := endOffsets(t, env.Source, topic)
	dst := endOffsets(t, env.Destination, topic)
	for _, s := range env.Sidecars.Sidecars() {
		rows := partitions(describeAt(t, s.AdminAddr, mirror), topic)
		owners := map[int32]bool{}
		for p := range int32(parts) {
			pd, ok := rows[p]
			if !ok {
				t.Fatalf("describe at sidecar %d has no row for %s-%d", s.BrokerID, topic, p)
			}
			if pd.SourceOffset != src[p] || pd.DestinationOffset != dst[p] || pd.Lag != 0 || pd.State != "MIRRORING" {
				t.Fatalf("describe at sidecar %d: %s-%d %+v, want source %d destination %d lag 0 MIRRORING", s.BrokerID, topic, p, pd, src[p], dst[p])
			}
			owners[pd.OwnerBrokerId] = true
		}
		if len(owners) != len(env.Sidecars.Sidecars()) {
			t.Fatalf("describe at sidecar %d shows owners %v: want every sidecar driving some partition", s.BrokerID, owners)
		}
	}
	compareAll(t, topic, parts)
}

package testbed

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// requireMultiHost skips the test where the multi-host bed cannot run.
func requireMultiHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the multi-host bed needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the multi-host bed needs iproute2")
	}
}

// netObjectsWith lists the namespaces and links named with prefix.
func netObjectsWith(prefix string) (namespaces, links []string) {
	ns, ls := netObjects()
	for _, n := range ns {
		if strings.HasPrefix(n, prefix) {
			namespaces = append(namespaces, n)
		}
	}
	for _, l := range ls {
		if strings.HasPrefix(l, prefix) {
			links = append(links, l)
		}
	}
	return namespaces, links
}

// echoServer serves TCP echo on addr until killed: the helper process that
// the network tests start in a host. It first checks that it kept, through
// `ip netns exec`, what the bed starts every process with: its own process
// group and SIGKILL as its parent-death signal.
func echoServer(addr string) {
	var sig int
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0); errno != 0 || sig != int(syscall.SIGKILL) {
		fmt.Fprintf(os.Stderr, "parent-death signal %d (%v), want SIGKILL\n", sig, errno)
		os.Exit(3)
	}
	if pgid, _ := syscall.Getpgid(0); pgid != os.Getpid() {
		fmt.Fprintf(os.Stderr, "process group %d, want its own (%d)\n", pgid, os.Getpid())
		os.Exit(3)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() { _, _ = io.Copy(c, c); c.Close() }()
	}
}

// dialOnce connects to addr with a 2 s timeout, sends a line, expects it
// echoed and prints "ok" or the error: the client that the network tests
// run in a host.
func dialOnce(addr string) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		err = echoes(c, []byte("ping\n"), 2*time.Second)
		c.Close()
	}
	if err != nil {
		fmt.Println("error:", err)
	} else {
		fmt.Println("ok")
	}
	os.Exit(0)
}

// echoes writes msg to c and reads it back within d.
func echoes(c net.Conn, msg []byte, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{}) //nolint:errcheck // best effort
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echoed %q, want %q", got, msg)
	}
	return nil
}

// startEcho starts an echo server in h on port 7000 the way the bed starts
// its daemons (startProcess: own process group, parent-death signal) and
// waits until the root namespace reaches it.
func startEcho(t *testing.T, h *Host) string {
	t.Helper()
	return startEchoAt(t, h, 7000)
}

// startEchoAt is startEcho on another port.
func startEchoAt(t *testing.T, h *Host, port int) string {
	t.Helper()
	addr := h.Addr(port)
	cmd := h.Command(os.Args[0])
	cmd.Env = append(os.Environ(), echoAddrVar+"="+addr)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	p, err := startProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.signal(syscall.SIGKILL); <-p.exited })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case <-p.exited:
			t.Fatalf("echo server in host %s exited: %v: %s", h.Name, p.err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo server in host %s: %v", h.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialFrom runs dialOnce in host h and returns what it printed.
func dialFrom(t *testing.T, h *Host, addr string) string {
	t.Helper()
	cmd := h.Command(os.Args[0])
	cmd.Env = append(os.Environ(), dialAddrVar+"="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dial from host %s: %v: %s", h.Name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestNetworkFaults checks every network fault of the multi-host bed on
// real namespaces: each one cuts exactly what it says, and its undoing
// brings back what was cut, open connections included.
func TestNetworkFaults(t *testing.T) {
	requireMultiHost(t)
	n, err := NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if ns, links := netObjectsWith(n.Prefix()); len(ns)+len(links) > 0 {
			t.Errorf("Close left namespaces %v and links %v", ns, links)
		}
	})
	var hosts []*Host
	for _, name := range []string{"a", "b", "c"} {
		h, err := n.AddHost(name)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	a, b, c := hosts[0], hosts[1], hosts[2]
	if a.IP == b.IP || n.Gateway() == a.IP {
		t.Fatalf("addresses not distinct: gateway %s, a %s, b %s", n.Gateway(), a.IP, b.IP)
	}
	atB, atC := startEcho(t, b), startEcho(t, c)
	if got := dialFrom(t, a, atB); got != "ok" {
		t.Fatalf("a to b: %s", got)
	}
	open, err := net.Dial("tcp", atB)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	t.Run("partition", func(t *testing.T) {
		if err := n.Partition(a, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Heal(a, b) })
		if got := dialFrom(t, a, atB); got == "ok" {
			t.Fatal("a reaches b across the partition")
		}
		if got := dialFrom(t, b, a.Addr(7000)); !strings.Contains(got, "invalid argument") {
			t.Fatalf("b to a across the partition: %q, want the blackhole's invalid argument", got)
		}
		if got := dialFrom(t, a, atC); got != "ok" {
			t.Fatalf("a to c during the a-b partition: %s", got)
		}
		if err := echoes(open, []byte("root to b\n"), 2*time.Second); err != nil {
			t.Fatalf("root to b during the a-b partition: %v", err)
		}
		if err := n.Heal(a, b); err != nil {
			t.Fatal(err)
		}
		if got := dialFrom(t, a, atB); got != "ok" {
			t.Fatalf("a to b after Heal: %s", got)
		}
	})

	t.Run("partition ports", func(t *testing.T) {
		atB2, atA := startEchoAt(t, b, 7001), startEcho(t, a)
		peer, err := net.Dial("tcp", atB)
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		if err := n.PartitionPorts(a, b, 7000); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.HealPorts(a, b) })
		if got := dialFrom(t, a, atB); got == "ok" {
			t.Fatal("a reaches b's port 7000 across the port partition")
		}
		if got := dialFrom(t, b, atA); got == "ok" {
			t.Fatal("b reaches a's port 7000 across the port partition")
		}
		if got := dialFrom(t, a, atB2); got != "ok" {
			t.Fatalf("a to b's port 7001 during the port partition: %s", got)
		}
		if got := dialFrom(t, a, atC); got != "ok" {
			t.Fatalf("a to c during the a-b port partition: %s", got)
		}
		if err := echoes(peer, []byte("root to b's port 7000\n"), 2*time.Second); err != nil {
			t.Fatalf("root to b during the a-b port partition: %v", err)
		}
		if err := n.HealAll(); err != nil {
			t.Fatal(err)
		}
		if got := dialFrom(t, a, atB); got != "ok" {
			t.Fatalf("a to b after HealAll: %s", got)
		}
		if got := dialFrom(t, b, atA); got != "ok" {
			t.Fatalf("b to a after HealAll: %s", got)
		}
	})

	t.Run("isolate", func(t *testing.T) {
		if err := b.Isolate(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Reconnect() })
		if got := dialFrom(t, a, atB); got == "ok" {
			t.Fatal("a reaches the isolated b")
		}
		if _, err := net.DialTimeout("tcp", atB, time.Second); err == nil {
			t.Fatal("the root namespace reaches the isolated b")
		}
		// An open connection stalls...
		msg := []byte("sent while isolated\n")
		if _, err := open.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = open.SetReadDeadline(time.Now().Add(time.Second))
		if k, err := open.Read(make([]byte, 64)); err == nil {
			t.Fatalf("read %d bytes from the isolated b", k)
		}
		if got := dialFrom(t, a, atC); got != "ok" {
			t.Fatalf("a to c while b is isolated: %s", got)
		}
		if err := b.Reconnect(); err != nil {
			t.Fatal(err)
		}
		// ...and resumes intact: TCP retransmits what was sent.
		_ = open.SetReadDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(open, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("after Reconnect the open connection read %q, %v; want %q", got, err, msg)
		}
		_ = open.SetReadDeadline(time.Time{})
		if got := dialFrom(t, a, atB); got != "ok" {
			t.Fatalf("a to b after Reconnect: %s", got)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		const limit = 20_000_000 // bit/s
		const size = 4 << 20
		echoRate := func() float64 {
			t.Helper()
			c, err := net.Dial("tcp", atB)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			errc := make(chan error, 1)
			go func() { _, err := c.Write(make([]byte, size)); errc <- err }()
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.ReadFull(c, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			return float64(size*8) / time.Since(start).Seconds()
		}
		before, err := b.LinkTraffic()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.LimitBandwidth(limit); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Unlimit() })
		limited := echoRate()
		after, err := b.LinkTraffic()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Unlimit(); err != nil {
			t.Fatal(err)
		}
		free := echoRate()
		t.Logf("echo through b's link: %.1f Mbit/s limited to %.0f Mbit/s, %.1f Mbit/s unlimited", limited/1e6, limit/1e6, free/1e6)
		// Each direction carries the whole stream, so the echo's rate is the
		// rate of each direction: bounded by the limit, plus the bucket's
		// burst on a 1.6 s transfer.
		if limited > 1.2*limit || limited < 0.5*limit {
			t.Fatalf("echo at %.1f Mbit/s through a link limited to %.0f Mbit/s", limited/1e6, limit/1e6)
		}
		if free < 3*limited {
			t.Fatalf("echo at %.1f Mbit/s without the limit, %.1f Mbit/s with it: Unlimit left a limit", free/1e6, limited/1e6)
		}
		d := after.Sub(before)
		if d.ToUpstream < size || d.ToClients < size {
			t.Fatalf("link traffic %+v for a %d-byte echo", d, size)
		}
	})
}

// TestStaleNetworkRemoved leaves namespaces and links named for a process
// that is gone, as a run killed with its reaper would, and checks that the
// next NewNetwork removes them and nothing else.
func TestStaleNetworkRemoved(t *testing.T) {
	requireMultiHost(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("sm%dz-", gone.Process.Pid)
	if err := runAll(
		[]string{"ip", "netns", "add", stale + "h1"},
		[]string{"ip", "link", "add", stale + "br", "type", "bridge"},
		[]string{"ip", "link", "add", stale + "h1", "type", "veth", "peer", "name", "eth0", "netns", stale + "h1"},
	); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeObjects(stale) })
	n, err := NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.AddHost("x"); err != nil {
		t.Fatal(err)
	}
	if ns, links := netObjectsWith(stale); len(ns)+len(links) > 0 {
		t.Fatalf("NewNetwork left the dead run's namespaces %v and links %v", ns, links)
	}
	if ns, links := netObjectsWith(n.Prefix()); len(ns) != 1 || len(links) != 2 {
		t.Fatalf("the new network has namespaces %v and links %v, want its host and its bridge", ns, links)
	}
}

package testbed

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv is the Env of the child process that TestNoJVMLeftBehind runs.
var helperEnv *Env

const (
	helperModeVar = "TESTBED_HELPER_MODE" // how the child ends
	helperBedVar  = "TESTBED_HELPER_BED"  // "multihost" or the loopback bed
	echoAddrVar   = "TESTBED_ECHO_ADDR"   // serve echo on this address (see echoServer)
	dialAddrVar   = "TESTBED_DIAL_ADDR"   // dial this address once (see dialOnce)
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(echoAddrVar); addr != "" {
		echoServer(addr)
	}
	if addr := os.Getenv(dialAddrVar); addr != "" {
		dialOnce(addr)
	}
	if os.Getenv(helperModeVar) != "" {
		opts := EnvOptions{
			Source:      ClusterOptions{Name: "source", Nodes: 1, HeapMB: 256},
			Destination: ClusterOptions{Name: "destination", Nodes: 1, HeapMB: 256, SASL: true, Authorizer: true},
		}
		if os.Getenv(helperBedVar) == "multihost" {
			opts.MultiHost = true
			opts.Sidecars = true
		}
		Main(m, opts, &helperEnv)
	}
	os.Exit(m.Run())
}

// TestHelperProcess is the child of TestNoJVMLeftBehind: with both clusters
// (and on the multi-host bed the sidecar) up it prints their PIDs and the
// network's prefix, waits until the parent has checked them (a line on its
// standard input), then ends the way its mode says.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperModeVar)
	if mode == "" {
		t.Skip("runs only as the child process of TestNoJVMLeftBehind")
	}
	var pids []string
	for _, c := range helperEnv.Clusters() {
		for _, n := range c.Nodes() {
			pids = append(pids, strconv.Itoa(n.PID()))
		}
	}
	if helperEnv.Sidecars != nil {
		for _, s := range helperEnv.Sidecars.Sidecars() {
			pids = append(pids, strconv.Itoa(s.PID()))
		}
	}
	prefix := "none"
	if helperEnv.Net != nil {
		prefix = helperEnv.Net.Prefix()
	}
	fmt.Printf("helper-ready net=%s pids=%s\n", prefix, strings.Join(pids, ","))
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("reading the parent's go-ahead: %v", err)
	}
	switch mode {
	case "fail":
		t.Fatal("failing on purpose")
	case "panic":
		panic("panicking on purpose")
	default: // wait for the parent's signal
		time.Sleep(2 * time.Minute)
		t.Fatal("no signal arrived")
	}
}

// TestNoJVMLeftBehind runs a test process that starts real clusters and
// then fails, panics, is interrupted or is killed, and checks that every
// Kafka JVM and sidecar it started is gone afterwards, on the loopback bed
// and on the multi-host bed, whose namespaces and links must be gone too.
func TestNoJVMLeftBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Kafka")
	}
	for _, bed := range []string{"loopback", "multihost"} {
		t.Run(bed, func(t *testing.T) {
			if bed == "multihost" {
				requireMultiHost(t)
			}
			for _, mode := range []string{"fail", "panic", "sigint", "sigkill"} {
				t.Run(mode, func(t *testing.T) { leaveNothingBehind(t, bed, mode) })
			}
		})
	}
}

// leaveNothingBehind runs one child of TestNoJVMLeftBehind.
func leaveNothingBehind(t *testing.T, bed, mode string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperModeVar+"="+mode, helperBedVar+"="+bed)
	// The child's own output (its deliberate failure among it) is shown
	// only when this test fails.
	var childOut lockedBuffer
	cmd.Stderr = &childOut
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child output:\n%s", childOut.String())
		}
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	goAhead, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var pids []int
	prefix := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		childOut.Write([]byte(sc.Text() + "\n"))
		if rest, ok := strings.CutPrefix(sc.Text(), "helper-ready net="); ok {
			var list string
			prefix, list, _ = strings.Cut(rest, " pids=")
			for _, s := range strings.Split(list, ",") {
				pid, err := strconv.Atoi(s)
				if err != nil || pid <= 0 {
					t.Fatalf("bad pid %q in %q", s, sc.Text())
				}
				pids = append(pids, pid)
			}
			break
		}
	}
	want := 2
	if bed == "multihost" {
		want = 3 // and the sidecar
		if !namePattern.MatchString(prefix) {
			t.Fatalf("child printed network prefix %q", prefix)
		}
		if ns, links := netObjectsWith(prefix); len(ns) != 2 || len(links) != 3 {
			t.Fatalf("the child's network has namespaces %v and links %v, want 2 and 3 (2 hosts and the bridge)", ns, links)
		}
	}
	if len(pids) != want {
		t.Fatalf("child printed %d pids, want %d (scan error %v)", len(pids), want, sc.Err())
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d is not running while the child runs", pid)
		}
	}
	switch mode {
	case "sigint":
		_ = cmd.Process.Signal(syscall.SIGINT)
	case "sigkill":
		_ = cmd.Process.Signal(syscall.SIGKILL)
	default:
		if _, err := io.WriteString(goAhead, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(&childOut, out) }()
	<-drained
	if err := cmd.Wait(); err == nil {
		t.Fatalf("child exited 0 in mode %s", mode)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running after the test process ended (%s)", pid, mode)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if bed == "multihost" {
		for {
			ns, links := netObjectsWith(prefix)
			if len(ns)+len(links) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespaces %v and links %v still there after the test process ended (%s)", ns, links, mode)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

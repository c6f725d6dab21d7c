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

const helperModeVar = "TESTBED_HELPER_MODE"

func TestMain(m *testing.M) {
	if os.Getenv(helperModeVar) != "" {
		opts := EnvOptions{
			Source:      ClusterOptions{Name: "source", Nodes: 1, HeapMB: 256},
			Destination: ClusterOptions{Name: "destination", Nodes: 1, HeapMB: 256, SASL: true, Authorizer: true},
		}
		Main(m, opts, &helperEnv)
	}
	os.Exit(m.Run())
}

// TestHelperProcess is the child of TestNoJVMLeftBehind: with both clusters
// up it prints their PIDs, then ends the way its mode says.
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
	fmt.Printf("helper-ready pids=%s\n", strings.Join(pids, ","))
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
// Kafka JVM it started is gone afterwards.
func TestNoJVMLeftBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Kafka")
	}
	for _, mode := range []string{"fail", "panic", "sigint", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperModeVar+"="+mode)
			// The child's own output (its deliberate failure among it) is
			// shown only when this test fails.
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
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			var pids []int
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				childOut.Write([]byte(sc.Text() + "\n"))
				if rest, ok := strings.CutPrefix(sc.Text(), "helper-ready pids="); ok {
					for _, s := range strings.Split(rest, ",") {
						pid, err := strconv.Atoi(s)
						if err != nil || pid <= 0 {
							t.Fatalf("bad pid %q in %q", s, sc.Text())
						}
						pids = append(pids, pid)
					}
					break
				}
			}
			if len(pids) != 2 {
				t.Fatalf("child printed no pids (scan error %v)", sc.Err())
			}
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("JVM %d is not running while the child runs", pid)
				}
			}
			switch mode {
			case "sigint":
				_ = cmd.Process.Signal(syscall.SIGINT)
			case "sigkill":
				_ = cmd.Process.Signal(syscall.SIGKILL)
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
						t.Fatalf("JVM %d still running after the test process ended (%s)", pid, mode)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
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

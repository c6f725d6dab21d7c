package testbed

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// reaperVar, set in a process's environment, makes it the reaper of the
// network whose prefix it holds (see init).
const reaperVar = "SIDEMIRROR_TESTBED_REAPER"

// A test process that panics or is killed with SIGKILL runs no deferred
// code, so the namespaces and links of its Network would stay. Its JVMs and
// sidecars die with it (parent-death signal), but the network needs a
// process that outlives it: the reaper, the same executable started again
// with reaperVar set, in a session of its own (a Ctrl-C to the terminal's
// process group does not reach it). It reads its standard input, a pipe
// whose only writer is the test process, until end of file, which comes
// when the test process closes the network or dies in any way; it then
// removes every object of the network and exits.
//
// The reaper is started before anything else of the network exists, by
// whatever binary imports this package (a test binary, the demo): init runs
// before main, so the reaper never starts that program's own work.
func init() {
	if prefix := os.Getenv(reaperVar); prefix != "" {
		reap(prefix)
	}
}

// reap waits for the end of standard input or SIGTERM, removes the network
// objects named with prefix and exits.
func reap(prefix string) {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-eof:
	case <-term:
	}
	if err := removeObjects(prefix); err != nil {
		fmt.Fprintf(os.Stderr, "testbed reaper: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startReaper starts the network's reaper.
func (n *Network) startReaper() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("testbed: cannot start the network's reaper: %w", err)
	}
	r, w, err := os.Pipe() // both ends close-on-exec: no other child holds w
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperVar+"="+n.prefix)
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("testbed: start the network's reaper %s: %w", exe, err)
	}
	r.Close()
	n.reaper, n.reaperIn = cmd, w
	return nil
}

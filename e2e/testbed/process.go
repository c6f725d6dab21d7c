package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// running holds the process group of every JVM the test bed started and
// that has not exited yet, so KillAll can end them from a signal handler.
var running sync.Map // pid -> struct{}

// process is one started JVM.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, valid after exited is closed
}

// startProcess starts cmd in its own process group with SIGKILL as its
// parent-death signal. The kernel sends that signal when the thread that
// forked the child exits, so the fork and the wait happen on one goroutine
// locked to its thread: the thread then lives exactly as long as the child,
// or until the whole test process dies, which is when the child must die too.
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *process) run(started chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	if err := p.cmd.Start(); err != nil {
		started <- fmt.Errorf("testbed: start %s: %w", p.cmd.Path, err)
		return
	}
	pid := p.cmd.Process.Pid
	running.Store(pid, struct{}{})
	started <- nil
	p.err = p.cmd.Wait()
	running.Delete(pid)
	close(p.exited)
}

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// KillAll sends SIGKILL to every JVM the test bed started that is still
// running. It is safe to call from a signal handler goroutine.
func KillAll() {
	running.Range(func(k, _ any) bool {
		_ = syscall.Kill(-k.(int), syscall.SIGKILL)
		return true
	})
}

// javaPath returns the java binary: $JAVA_HOME/bin/java or java on PATH.
func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := home + "/bin/java"
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("testbed: java not found: install Java 17 or newer (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
	}
	return p, nil
}

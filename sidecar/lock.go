package sidecar

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the lock file inside data.dir. It holds the PID of the
// process that holds the lock. The file is never removed: removing it would
// let a second process lock a new file while the first still holds the old.
const lockFileName = "sidemirror.lock"

// dirLock is an exclusive flock(2) on <data.dir>/sidemirror.lock. The kernel
// drops it when the process dies, so a crash leaves no stale lock.
type dirLock struct {
	f *os.File
}

// lockDataDir creates dir (0750) if absent and locks it. If another process
// (or another Sidecar in this process) holds the lock, the error matches
// ErrDataDirLocked and names the directory and the holder's PID.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("sidecar: data.dir %s: cannot create it: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("sidecar: data.dir %s: cannot open lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "PID " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: data.dir %s is in use by %s (lock file %s); stop that sidecar or give this one its own data.dir",
				ErrDataDirLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("sidecar: data.dir %s: cannot lock %s: %w", dir, path, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("sidecar: data.dir %s: cannot write lock file %s: %w", dir, path, err)
	}
	return &dirLock{f: f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return err
	}
	return f.Sync()
}

// release empties the PID and drops the lock.
func (l *dirLock) release() error {
	_ = l.f.Truncate(0)
	return l.f.Close() // closing the last descriptor drops the flock
}

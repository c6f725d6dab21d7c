package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A full disk, on the multi-host bed: with ClusterOptions.LogDirTmpfsMB a
// node's log directory lives on a small tmpfs of its own, mounted at
// <node dir>/disk before the node is formatted, with log.dirs (and so the
// KRaft metadata log) in <node dir>/disk/data. FillLogDir writes a file
// beside the data until the tmpfs has no byte left, as when a disk fills;
// FreeLogDir removes it. A broker whose only log directory fails stops
// (Kafka halts when all its log directories are offline): start it again
// after FreeLogDir.
//
// The tmpfs's source is named with the Network's prefix ("sm<pid><letter>-
// tmpfs"), so that whatever removes the Network's objects (Network.Close,
// CloseNetworks, the reaper, removeStale) unmounts it too. Processes run in
// a host through `ip netns exec`, which gives them a copy of the mount
// table taken when they start: the tmpfs is mounted before any of them,
// and what the test process writes into it is what they see.

// diskFile is the name of the file FillLogDir writes, beside the data.
const diskFile = "fill"

// diskDir returns the node's tmpfs mount point, "" when it has none.
func (n *Node) diskDir() string {
	if n.cluster.opts.LogDirTmpfsMB <= 0 {
		return ""
	}
	return filepath.Join(n.dir, "disk")
}

// dataDir returns the node's log.dirs.
func (n *Node) dataDir() string {
	if d := n.diskDir(); d != "" {
		return filepath.Join(d, "data")
	}
	return filepath.Join(n.dir, "data")
}

// DataDir returns the node's log.dirs (on its tmpfs when it has one).
func (n *Node) DataDir() string { return n.dataDir() }

// mountDisk mounts the node's tmpfs if it has one and it is not mounted.
func (n *Node) mountDisk() error {
	dir := n.diskDir()
	if dir == "" {
		return nil
	}
	if n.host == nil {
		return fmt.Errorf("testbed: %s node %d: a tmpfs log directory needs the multi-host bed", n.cluster.opts.Name, n.ID)
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	size := "size=" + strconv.Itoa(n.cluster.opts.LogDirTmpfsMB) + "m"
	return run("mount", "-t", "tmpfs", "-o", size+",mode=0755", n.host.net.prefix+"tmpfs", dir)
}

// LogDirUsage returns the bytes used and the bytes free on the node's
// tmpfs log directory.
func (n *Node) LogDirUsage() (used, free int64, err error) {
	dir := n.diskDir()
	if dir == "" {
		return 0, 0, fmt.Errorf("testbed: %s node %d has no tmpfs log directory (ClusterOptions.LogDirTmpfsMB)", n.cluster.opts.Name, n.ID)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("testbed: statfs %s: %w", dir, err)
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Bavail) * bs, nil
}

// FillLogDir fills the node's tmpfs log directory to the last byte with a
// file beside the data and returns how many bytes it wrote. The broker's
// next write fails with "No space left on device".
func (n *Node) FillLogDir() (int64, error) {
	_, free, err := n.LogDirUsage()
	if err != nil {
		return 0, err
	}
	path := filepath.Join(n.diskDir(), diskFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("testbed: %w", err)
	}
	defer f.Close()
	// Most of it at once, then the rest (what the broker wrote meanwhile
	// and the tmpfs's rounding) a page at a time until the tmpfs refuses.
	var written int64
	if free > 1<<20 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, free-1<<20); err == nil {
			written = free - 1<<20
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return written, fmt.Errorf("testbed: %w", err)
	}
	page := make([]byte, 4096)
	for {
		k, err := f.Write(page)
		written += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return written, nil
		}
		if err != nil {
			return written, fmt.Errorf("testbed: filling %s: %w", path, err)
		}
	}
}

// FreeLogDir removes what FillLogDir wrote; it is a no-op when the log
// directory is not filled.
func (n *Node) FreeLogDir() error {
	dir := n.diskDir()
	if dir == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(dir, diskFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testbed: %w", err)
	}
	return nil
}

// mounts lists the root mount namespace's mounts as (source, target).
func mounts() [][2]string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out [][2]string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 {
			out = append(out, [2]string{f[0], f[1]})
		}
	}
	return out
}

// isMountPoint reports whether dir is the target of a mount.
func isMountPoint(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("testbed: %w", err)
	}
	for _, m := range mounts() {
		if m[1] == abs {
			return true, nil
		}
	}
	return false, nil
}

// unmountAll detaches every mount whose source starts with prefix (lazily:
// a process still using it keeps it until it exits).
func unmountAll(prefix string) error {
	var errs []error
	for _, m := range mounts() {
		if strings.HasPrefix(m[0], prefix) {
			errs = append(errs, run("umount", "-l", m[1]))
		}
	}
	return errors.Join(errs...)
}

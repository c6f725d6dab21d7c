package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogDirTmpfs: a node's tmpfs log directory is what a process in its
// host writes to; FillLogDir leaves that process no byte (its write fails
// with "No space left on device"), FreeLogDir gives the space back, and
// closing the network unmounts the tmpfs.
func TestLogDirTmpfs(t *testing.T) {
	requireMultiHost(t)
	n, err := NewNetwork()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h, err := n.AddHost("d1")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: ClusterOptions{Name: "destination", LogDirTmpfsMB: 8}}
	node := &Node{ID: 1, cluster: c, host: h, dir: t.TempDir()}
	if err := node.mountDisk(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(node.dataDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(node.diskDir()); err != nil || !mounted {
		t.Fatalf("%s mounted: %v, %v", node.diskDir(), mounted, err)
	}
	// A process of the host starts after the mount, as a broker does.
	segments := 0
	write := func() (string, error) {
		segments++
		seg := filepath.Join(node.dataDir(), fmt.Sprintf("segment-%d", segments))
		out, err := h.Command("sh", "-c", "head -c 65536 /dev/zero > "+seg).CombinedOutput()
		return string(out), err
	}
	if out, err := write(); err != nil {
		t.Fatalf("writing into the empty log directory from the host: %v: %s", err, out)
	}
	written, err := node.FillLogDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, free, err := node.LogDirUsage(); err != nil || free != 0 || written < 7<<20 {
		t.Fatalf("after FillLogDir: %d bytes written, %d free (%v); want about 8 MiB written, 0 free", written, free, err)
	}
	if out, err := write(); err == nil || !strings.Contains(out, "No space left") {
		t.Fatalf("a write into the full log directory from the host: %v: %q, want No space left on device", err, out)
	}
	if err := node.FreeLogDir(); err != nil {
		t.Fatal(err)
	}
	if out, err := write(); err != nil {
		t.Fatalf("writing after FreeLogDir: %v: %s", err, out)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := isMountPoint(node.diskDir()); mounted {
		t.Fatalf("%s is still mounted after the network closed", node.diskDir())
	}
}

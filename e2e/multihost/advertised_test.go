package multihost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnreachableAddressRefused starts, in the host of sidecar 3 and
// beside it, a second sidecar from sidecar 3's own configuration with the
// addresses changed in the ways an operator gets them wrong: the
// example's loopback listeners kept, a loopback address advertised, every
// interface bound with no address advertised (which registered [::]:9191),
// another host's address advertised (where another sidecar answers: it
// passes the configuration's checks and is refused once the sidecar has
// dialed it at start and the connection did not arrive at its own
// listener). Each must exit with code 2 and the line that names the key,
// the value and what to set, computed from the hosts' addresses.
func TestUnreachableAddressRefused(t *testing.T) {
	dumpLogs(t)
	sidecars := env.Sidecars.Sidecars()
	first, s := sidecars[0], sidecars[len(sidecars)-1]
	peer := fmt.Sprintf("%d@%s", first.BrokerID, first.RaftAddr) // raft.peers lists the sidecars in this order
	const admin = ":9191"
	example := map[string]string{"admin.listener": "", "admin.advertised.listener": "", "raft.listener": ""}
	cases := []struct {
		name  string
		edits map[string]string // "" deletes the key
		want  string
		// started: the address passes the configuration's checks, so the
		// sidecar starts (logging to stderr) and refuses it once it has
		// dialed it: want is stderr's last line.
		started bool
	}{
		{
			name:  "the example's listeners",
			edits: example,
			want: `sidemirror: config: admin.listener: "127.0.0.1:9191" is a loopback address, which the other sidecars in raft.peers (such as ` +
				peer + `) cannot reach (set admin.listener=:9191 to listen on every interface, and admin.advertised.listener=` + s.AdminAddr + `)`,
		},
		{
			name:  "loopback advertised",
			edits: map[string]string{"admin.advertised.listener": "127.0.0.1:9191"},
			want: `sidemirror: config: admin.advertised.listener: "127.0.0.1:9191" is a loopback address, which the other sidecars in raft.peers (such as ` +
				peer + `) cannot reach (set it to an address of this host that they reach, e.g. ` + s.AdminAddr + `)`,
		},
		{
			name:  "every interface, nothing advertised",
			edits: map[string]string{"admin.advertised.listener": ""},
			want: `sidemirror: config: admin.advertised.listener: is not set, and admin.listener "` + admin + `" listens on every interface, which is no address to dial ` +
				`(set admin.advertised.listener to an address of this host that the other sidecars reach, e.g. ` + s.AdminAddr + `)`,
		},
		{
			name:  "the example's raft.listener",
			edits: map[string]string{"raft.listener": ""},
			want: `sidemirror: config: raft.listener: "127.0.0.1:9192" is a loopback address, which the other sidecars in raft.peers (such as ` +
				peer + `) cannot reach at ` + s.RaftAddr + ` (set raft.listener=:9192 to listen on every interface)`,
		},
		{
			// Another host's address, where sidecar 1 answers: routable, so
			// only dialing it shows that it is not this sidecar. The
			// listeners move off the ports that sidecar 3 holds.
			name: "another host's address advertised",
			edits: map[string]string{"admin.listener": ":19191", "raft.listener": ":19192", "http.listener": ":19193",
				"admin.advertised.listener": first.AdminAddr},
			want: `sidemirror: config: admin.advertised.listener: "` + first.AdminAddr + `" reaches another process, not this sidecar: ` +
				`a connection to it was accepted, but it did not arrive at admin.listener ":19191" within 3s ` +
				`(set it to an address of this host where admin.listener listens, e.g. ` + net.JoinHostPort(s.Host().IP, "19191") + `)`,
			started: true,
		},
	}
	base := readProps(t, s.ConfigPath())
	if base["admin.listener"] != admin || base["admin.advertised.listener"] != s.AdminAddr {
		t.Fatalf("sidecar %d runs with admin.listener=%s admin.advertised.listener=%s, want %s and %s as docs/installation.md says",
			s.BrokerID, base["admin.listener"], base["admin.advertised.listener"], admin, s.AdminAddr)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := maps.Clone(base)
			props["data.dir"] = filepath.Join(t.TempDir(), "data") // never the running sidecar's
			for k, v := range tc.edits {
				if v == "" {
					delete(props, k)
				} else {
					props[k] = v
				}
			}
			path := filepath.Join(t.TempDir(), "sidecar.properties")
			var b strings.Builder
			for _, k := range slices.Sorted(maps.Keys(props)) {
				b.WriteString(k + "=" + props[k] + "\n")
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := s.Host().Command(env.Bin.Sidemirror, "run", "--config", path)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := runCtx(ctx, cmd)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("sidemirror run in host %s: %v, want exit code 2; stderr:\n%s", s.Host().Name, err, stderr.String())
			}
			if got := stderr.String(); tc.started {
				lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
				if last := lines[len(lines)-1]; last != tc.want {
					t.Fatalf("stderr's last line\n%s\nwant\n%s\nstderr:\n%s", last, tc.want, got)
				}
			} else if got != tc.want+"\n" {
				t.Fatalf("stderr\n%s\nwant the one line\n%s", got, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout is not empty: %q", stdout.String())
			}
		})
	}
	if !s.Running() {
		t.Fatalf("sidecar %d stopped while the refused ones ran beside it", s.BrokerID)
	}
}

// runCtx runs cmd, killed when ctx ends.
func runCtx(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}

// readProps reads a properties file as the bed writes it: key=value lines.
func readProps(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), "="); ok {
			props[k] = v
		}
	}
	return props
}

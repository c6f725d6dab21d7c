package mirror

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// configsOf returns a mirror's configs from describe --json, by key.
func configsOf(t *testing.T, mirror string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range describe(t, mirror).Configs {
		v := "<null>"
		if c.Value != nil {
			v = *c.Value
		}
		out[c.Name] = v
	}
	return out
}

// TestAlterMirrorConfig alters a mirror through IncrementalAlterConfigs:
// a mirror.* key and a source property (which reconnects the data plane,
// and mirroring goes on), a refused key that changes nothing, and a secret
// that no output ever shows.
func TestAlterMirrorConfig(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "alter", "alter-t"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 2000, 21)
	createMirror(t, mirror)
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	out := mustCLI(t, "--alter", "--mirror", mirror,
		"--add-config", "mirror.metadata.refresh.interval.ms=5000,security.protocol=PLAINTEXT")
	if want := "Completed updating config for mirror alter.\n"; out != want {
		t.Fatalf("alter printed %q, want %q", out, want)
	}
	cfg := configsOf(t, mirror)
	if cfg["mirror.metadata.refresh.interval.ms"] != "5000" || cfg["security.protocol"] != "PLAINTEXT" {
		t.Fatalf("describe shows the configs %v after the alter", cfg)
	}

	// The source settings changed: every sidecar driving a partition
	// replaced its source client, and mirroring goes on.
	wait.For(t, 30*time.Second, "a sidecar to replace the mirror's source client", func() bool {
		for _, s := range env.Sidecars.Sidecars() {
			b, _ := os.ReadFile(s.LogPath())
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "replacing mirror source client") && strings.Contains(line, `"mirror": "alter"`) {
					return true
				}
			}
		}
		return false
	})
	produceVariety(t, env.Source, topic, 2000, 22)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	// A key that does not exist: one clear error, nothing changed. A key
	// the sidecar does not support is a setting refused at validation
	// (exit 2); deleting a key the mirror does not have is not (exit 1).
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--add-config", "mirror.metadata.refresh.interval.ms=7000,no.such.key=1"}, 2, `no.such.key`},
		{[]string{"--delete-config", "no.such.key"}, 1, "Error: INVALID_CONFIG: mirror alter has no config key no.such.key\n"},
	} {
		r := cli(t, append([]string{"--alter", "--mirror", mirror}, tc.args...)...)
		if r.Code != tc.code || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 ||
			!strings.HasPrefix(r.Stderr, "Error: INVALID_CONFIG: ") || !strings.Contains(r.Stderr, tc.want) {
			t.Fatalf("alter %v: exit %d\nstdout: %q\nstderr: %q\nwant exit %d and one INVALID_CONFIG line naming %q", tc.args, r.Code, r.Stdout, r.Stderr, tc.code, tc.want)
		}
	}
	if got := configsOf(t, mirror); got["mirror.metadata.refresh.interval.ms"] != "5000" || got["no.such.key"] != "" {
		t.Fatalf("a refused alter changed the configs: %v", got)
	}

	// A secret is never shown: not by create, alter, list, describe, or
	// an error.
	const secret = "hunter2-e2e"
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" password="` + secret + `";`
	const secretMirror = "alter-secret"
	var outputs []string
	keep := func(r cliResult) cliResult { outputs = append(outputs, r.Stdout, r.Stderr); return r }
	r := keep(cli(t, "--create", "--mirror", secretMirror, "--mirror-config",
		mirrorConfigFile(t, map[string]string{"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})))
	if r.Code != 0 {
		t.Fatalf("create with a secret: exit %d: %s", r.Code, r.Stderr)
	}
	t.Cleanup(func() { cli(t, "--delete", "--mirror", secretMirror) })
	r = keep(cli(t, "--alter", "--mirror", secretMirror, "--add-config", "sasl.jaas.config="+strings.Replace(jaas, secret, secret+"2", 1)))
	if r.Code != 0 || r.Stdout != "Completed updating config for mirror alter-secret.\n" {
		t.Fatalf("alter of the secret: exit %d\nstdout: %q\nstderr: %q", r.Code, r.Stdout, r.Stderr)
	}
	// Refused: a SASL source that speaks PLAINTEXT (it cannot be reached:
	// exit 1), and a malformed JAAS (refused at validation: exit 2).
	for _, tc := range []struct {
		add  string
		code int
	}{
		{"security.protocol=SASL_PLAINTEXT", 1},
		{"sasl.jaas.config=" + strings.TrimSuffix(jaas, `";`) + ",security.protocol=SASL_PLAINTEXT", 2},
	} {
		if r := keep(cli(t, "--alter", "--mirror", secretMirror, "--add-config", tc.add)); r.Code != tc.code || !strings.HasPrefix(r.Stderr, "Error: ") {
			t.Fatalf("alter %q: exit %d, want %d\nstdout: %q\nstderr: %q", tc.add, r.Code, tc.code, r.Stdout, r.Stderr)
		}
	}
	keep(cli(t, "--list"))
	keep(cli(t, "--list", "--json"))
	keep(cli(t, "--describe"))
	keep(cli(t, "--describe", "--json"))
	keep(cli(t, "--describe", "--mirror", secretMirror, "--json"))
	for _, o := range outputs {
		if strings.Contains(o, secret) {
			t.Fatalf("an output shows the secret:\n%s", o)
		}
	}
	if got := configsOf(t, secretMirror)["sasl.jaas.config"]; got != "[hidden]" {
		t.Fatalf("describe shows sasl.jaas.config as %q, want [hidden]", got)
	}
	for _, s := range env.Sidecars.Sidecars() {
		if b, _ := os.ReadFile(s.LogPath()); strings.Contains(string(b), secret) {
			t.Fatalf("the log of sidecar %d shows the secret", s.BrokerID)
		}
	}
}

// sidecarRows parses --list-sidecars: ID -> role, and the rows' raft and
// admin addresses.
func sidecarRows(t *testing.T, out string) map[string][3]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "ID RAFT-ADDRESS ADMIN-ADDRESS ROLE" {
		t.Fatalf("--list-sidecars printed no header:\n%s", out)
	}
	rows := map[string][3]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("--list-sidecars row %q has %d columns", l, len(f))
		}
		rows[f[0]] = [3]string{f[1], f[2], f[3]}
	}
	return rows
}

// leaders counts the LEADER rows.
func leaders(rows map[string][3]string) int {
	n := 0
	for _, r := range rows {
		if r[2] == "LEADER" {
			n++
		}
	}
	return n
}

// TestSidecarMembership removes sidecar 3 from the raft group through the
// other sidecars and adds it back; afterwards it follows the group again.
func TestSidecarMembership(t *testing.T) {
	dumpLogs(t)
	s3 := env.Sidecars.Sidecar(3)
	var others []string
	for _, s := range env.Sidecars.Sidecars() {
		if s.BrokerID != 3 {
			others = append(others, s.AdminAddr)
		}
	}
	atOthers := strings.Join(others, ",")
	mustAt := func(args ...string) string {
		t.Helper()
		r := cliAt(t, atOthers, args...)
		if r.Code != 0 {
			t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}

	rows := sidecarRows(t, mustCLI(t, "--list-sidecars"))
	if len(rows) != 3 || leaders(rows) != 1 {
		t.Fatalf("--list-sidecars shows %v, want 3 sidecars and one LEADER", rows)
	}
	for _, s := range env.Sidecars.Sidecars() {
		if r := rows[strconv.Itoa(int(s.BrokerID))]; r[0] != s.RaftAddr || r[1] != s.AdminAddr {
			t.Fatalf("--list-sidecars shows sidecar %d as %v, want %s %s", s.BrokerID, r, s.RaftAddr, s.AdminAddr)
		}
	}

	// Whatever happens, leave the group whole for the other tests.
	t.Cleanup(func() {
		if rows := sidecarRows(t, cliAt(t, atOthers, "--list-sidecars").Stdout); len(rows) != 3 {
			cliAt(t, atOthers, "--add-sidecar", "--broker-id", "3", "--raft-address", s3.RaftAddr, "--admin-address", s3.AdminAddr)
		}
	})

	if out := mustAt("--remove-sidecar", "--broker-id", "3"); out != "Removed sidecar 3 from the raft group\n" {
		t.Fatalf("remove printed %q", out)
	}
	wait.For(t, 30*time.Second, "two sidecars with a leader", func() bool {
		rows := sidecarRows(t, mustAt("--list-sidecars"))
		_, has3 := rows["3"]
		return len(rows) == 2 && !has3 && leaders(rows) == 1
	})
	if r := cliAt(t, atOthers, "--remove-sidecar", "--broker-id", "3"); r.Code != 1 ||
		!strings.Contains(r.Stderr, "broker 3 is not in the raft group") {
		t.Fatalf("removing sidecar 3 twice: exit %d, stderr %q", r.Code, r.Stderr)
	}

	out := mustAt("--add-sidecar", "--broker-id", "3", "--raft-address", s3.RaftAddr, "--admin-address", s3.AdminAddr)
	if out != "Added sidecar 3 to the raft group\n" {
		t.Fatalf("add printed %q", out)
	}
	wait.For(t, 30*time.Second, "three sidecars with a leader", func() bool {
		rows := sidecarRows(t, mustCLI(t, "--list-sidecars"))
		return len(rows) == 3 && leaders(rows) == 1 && rows["3"][1] == s3.AdminAddr
	})

	// Sidecar 3 follows the group again: it sees a mirror created now.
	const mirror = "after-rejoin"
	createMirror(t, mirror)
	t.Cleanup(func() { cli(t, "--delete", "--mirror", mirror) })
	wait.For(t, 30*time.Second, "sidecar 3 to list the new mirror", func() bool {
		r := cliAt(t, s3.AdminAddr, "--list")
		return r.Code == 0 && strings.Contains(r.Stdout, mirror+" ")
	})
	if r := cliAt(t, s3.AdminAddr, "--describe", "--mirror", mirror); r.Code != 0 {
		t.Fatalf("describe at sidecar 3: exit %d: %s", r.Code, r.Stderr)
	}
}

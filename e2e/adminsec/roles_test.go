package adminsec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

var wait = testwait.Every(250 * time.Millisecond)

// cliResult is what one kafka-cluster-mirrors run printed.
type cliResult = testbed.CLIResult

// cli runs kafka-cluster-mirrors against the sidecars with commandConfig
// ("" for none).
func cli(t *testing.T, commandConfig string, args ...string) cliResult {
	t.Helper()
	full := []string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}
	if commandConfig != "" {
		full = append(full, "--command-config", commandConfig)
	}
	return testbed.RunCLI(t, env.Bin.CLI, append(full, args...)...)
}

func mustCLI(t *testing.T, commandConfig string, args ...string) string {
	t.Helper()
	r := cli(t, commandConfig, args...)
	if r.Code != 0 {
		t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// denied checks that a run failed with CLUSTER_AUTHORIZATION_FAILED.
func denied(t *testing.T, what string, r cliResult) {
	t.Helper()
	if r.Code != 1 || !strings.Contains(r.Stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q; want CLUSTER_AUTHORIZATION_FAILED", what, r.Code, r.Stdout, r.Stderr)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func jaas(module, user, pass string) string {
	return fmt.Sprintf("sasl.jaas.config=org.apache.kafka.common.security.%s required username=%q password=%q;\n", module, user, pass)
}

// kafkaConfigs runs Kafka's kafka-configs.sh (kafka.admin.ConfigCommand)
// against the destination.
func kafkaConfigs(t *testing.T, commandConfig string, args ...string) {
	t.Helper()
	kafkaConfigsOn(t, env.Destination, commandConfig, args...)
}

// kafkaConfigsOn runs kafka-configs.sh against cluster c, with
// commandConfig ("" for none).
func kafkaConfigsOn(t *testing.T, c *testbed.Cluster, commandConfig string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"-cp", env.Dist.Classpath(), "kafka.admin.ConfigCommand", "--bootstrap-server", c.Bootstrap()}
	if commandConfig != "" {
		base = append(base, "--command-config", commandConfig)
	}
	cmd := exec.CommandContext(ctx, "java", append(base, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kafka-configs %v: %v\n%s", args, err, out)
	}
}

// listed returns the mirror names --list --json shows the caller.
func listed(t *testing.T, commandConfig string) []string {
	t.Helper()
	var resp protocol.ListClusterMirrorsResponse
	if err := json.Unmarshal([]byte(mustCLI(t, commandConfig, "--list", "--json")), &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range resp.Mirrors {
		names = append(names, m.MirrorName)
	}
	return names
}

// TestKIPRoles runs KIP-1279 section 8.4 on real Kafka: the destination's
// SCRAM users, created with kafka-configs, log in to the sidecars; the
// super user grants the mirror-admin and monitor roles with the CLI, whose
// output is the KIP's; each role can do what its ACLs allow and nothing
// else, and what it may not do changes nothing.
func TestKIPRoles(t *testing.T) {
	dir := t.TempDir()
	plainBase := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
	scramBase := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
	root := writeFile(t, dir, "root.properties", plainBase+jaas("plain.PlainLoginModule", testbed.Admin.Name, testbed.Admin.Password))
	alice := writeFile(t, dir, "alice.properties", plainBase+jaas("plain.PlainLoginModule", testbed.Alice.Name, testbed.Alice.Password))
	admin := writeFile(t, dir, "mirror-admin.properties", scramBase+jaas("scram.ScramLoginModule", "mirror-admin", "mirror-admin-secret"))
	monitor := writeFile(t, dir, "monitor.properties", scramBase+jaas("scram.ScramLoginModule", "monitor", "monitor-secret"))
	wrong := writeFile(t, dir, "wrong.properties", scramBase+jaas("scram.ScramLoginModule", "monitor", "hunter2"))

	// The SCRAM users, made with Kafka's own tool, as the admin.
	for _, u := range []struct{ name, pass string }{{"mirror-admin", "mirror-admin-secret"}, {"monitor", "monitor-secret"}} {
		kafkaConfigs(t, root, "--alter", "--entity-type", "users", "--entity-name", u.name,
			"--add-config", "SCRAM-SHA-512=[iterations=4096,password="+u.pass+"]")
	}
	// SCRAM credentials reach the broker through its metadata log: wait
	// until the login works.
	wait.For(t, 30*time.Second, "the SCRAM users to log in", func() bool {
		return cli(t, monitor, "--list").Code == 0 && cli(t, admin, "--list").Code == 0
	})

	// Unauthenticated, or a wrong password: refused.
	if r := cli(t, "", "--list"); r.Code != 1 || !strings.Contains(r.Stderr, "ListClusterMirrors request failed") {
		t.Fatalf("--list without credentials: exit %d, %q", r.Code, r.Stderr)
	}
	if r := cli(t, wrong, "--list"); r.Code != 1 || !strings.Contains(r.Stderr, "SASL_AUTHENTICATION_FAILED") || strings.Contains(r.Stderr, "hunter2") {
		t.Fatalf("--list with a wrong password: exit %d, %q", r.Code, r.Stderr)
	}

	// The source: a topic with records.
	src, err := env.Source.NewClient(testbed.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(src).CreateTopic(ctx, 2, 1, nil, "roles-t"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := src.ProduceSync(ctx, &kgo.Record{Topic: "roles-t", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	mirrorCfg := writeFile(t, dir, "mirror.properties", "bootstrap.servers="+env.Source.Bootstrap()+"\n")

	// alice has no ACL: CREATE is refused and nothing is created.
	denied(t, "alice creates", cli(t, alice, "--create", "--mirror", "my-mirror", "--mirror-config", mirrorCfg))
	if got := listed(t, root); len(got) != 0 {
		t.Fatalf("a refused create left mirrors %v", got)
	}

	// The roles, granted by the super user; the output is the KIP's.
	out := mustCLI(t, root, "--add-acl", "--cluster-mirror", "my-mirror",
		"--operation", "Create", "--operation", "Alter", "--operation", "Describe", "--operation", "Delete",
		"--operation", "AlterConfigs", "--operation", "DescribeConfigs", "--allow-principal", "User:mirror-admin")
	wantAdmin := "      (principal=User:mirror-admin, host=*, operation=CREATE, permissionType=ALLOW)\n" +
		"      (principal=User:mirror-admin, host=*, operation=ALTER, permissionType=ALLOW)\n" +
		"      (principal=User:mirror-admin, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
		"      (principal=User:mirror-admin, host=*, operation=DELETE, permissionType=ALLOW)\n" +
		"      (principal=User:mirror-admin, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW)\n" +
		"      (principal=User:mirror-admin, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)\n"
	if want := "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" + wantAdmin + "\n"; out != want {
		t.Fatalf("--add-acl printed\n%s\nwant\n%s", out, want)
	}
	out = mustCLI(t, root, "--add-acl", "--cluster-mirror", "*", "--operation", "Describe", "--operation", "DescribeConfigs",
		"--allow-principal", "User:monitor")
	if want := "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=*, patternType=LITERAL)`:\n" +
		"      (principal=User:monitor, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
		"      (principal=User:monitor, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)\n\n"; out != want {
		t.Fatalf("--add-acl printed\n%s\nwant\n%s", out, want)
	}
	out = mustCLI(t, root, "--list-acls", "--cluster-mirror", "my-mirror")
	if want := "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" + wantAdmin + "\n"; out != want {
		t.Fatalf("--list-acls printed\n%s\nwant\n%s", out, want)
	}
	denied(t, "the monitor adds an ACL", cli(t, monitor, "--add-acl", "--cluster-mirror", "*", "--operation", "All", "--allow-principal", "User:monitor"))

	// The mirror admin creates and runs its mirror; the super user another.
	mustCLI(t, admin, "--create", "--mirror", "my-mirror", "--mirror-config", mirrorCfg)
	mustCLI(t, admin, "--start", "--topics", "roles-t", "--mirror", "my-mirror")
	mustCLI(t, root, "--create", "--mirror", "other", "--mirror-config", mirrorCfg)
	denied(t, "the mirror admin creates another mirror", cli(t, admin, "--create", "--mirror", "not-mine", "--mirror-config", mirrorCfg))

	// The monitor watches the mirror catch up.
	wait.For(t, 2*time.Minute, "my-mirror to catch up, as the monitor describes it", func() bool {
		r := cli(t, monitor, "--describe", "--mirror", "my-mirror", "--json")
		var resp protocol.DescribeClusterMirrorsResponse
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &resp) != nil || len(resp.Mirrors) != 1 || len(resp.Mirrors[0].Topics) != 1 {
			return false
		}
		var lag int64
		parts := resp.Mirrors[0].Topics[0].Partitions
		for _, p := range parts {
			if p.State != "MIRRORING" {
				return false
			}
			lag += p.Lag
		}
		return len(parts) == 2 && lag == 0
	})

	// --list shows each caller what it may describe.
	for _, tc := range []struct {
		who, cfg string
		want     string
	}{{"root", root, "my-mirror,other"}, {"monitor", monitor, "my-mirror,other"}, {"mirror-admin", admin, "my-mirror"}, {"alice", alice, ""}} {
		if got := strings.Join(listed(t, tc.cfg), ","); got != tc.want {
			t.Errorf("%s lists %q, want %q", tc.who, got, tc.want)
		}
	}

	// What the monitor may not do changes nothing.
	denied(t, "the monitor stops", cli(t, monitor, "--stop", "--topics", ".*", "--mirror", "my-mirror"))
	denied(t, "the monitor deletes", cli(t, monitor, "--delete", "--mirror", "my-mirror"))
	denied(t, "the monitor alters", cli(t, monitor, "--alter", "--mirror", "my-mirror", "--add-config", "mirror.metadata.refresh.interval.ms=5000"))
	denied(t, "the mirror admin alters another mirror", cli(t, admin, "--alter", "--mirror", "other", "--add-config", "mirror.metadata.refresh.interval.ms=5000"))
	denied(t, "alice removes a sidecar", cli(t, alice, "--remove-sidecar", "--broker-id", "1"))
	if got := strings.Join(listed(t, root), ","); got != "my-mirror,other" {
		t.Fatalf("after the refused requests root lists %q", got)
	}
	r := cli(t, monitor, "--describe", "--mirror", "my-mirror", "--json")
	if r.Code != 0 || !strings.Contains(r.Stdout, `"state":"MIRRORING"`) && !strings.Contains(r.Stdout, `"state": "MIRRORING"`) {
		t.Fatalf("after the refused stop the monitor describes: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	mustCLI(t, admin, "--alter", "--mirror", "my-mirror", "--add-config", "mirror.metadata.refresh.interval.ms=5000")

	// Removing the monitor's ACLs takes its view away.
	mustCLI(t, root, "--remove-acl", "--cluster-mirror", "*", "--allow-principal", "User:monitor")
	if got := listed(t, monitor); len(got) != 0 {
		t.Fatalf("the monitor lists %v after its ACLs were removed", got)
	}

	// The PLAIN passwords crossed the relay in the clear: none is in a
	// sidecar's log or data.dir.
	for _, s := range env.Sidecars.Sidecars() {
		logs, err := os.ReadFile(s.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		dataDir := filepath.Join(filepath.Dir(s.LogPath()), fmt.Sprintf("sidecar-%d", s.BrokerID))
		blobs := [][]byte{logs}
		_ = filepath.WalkDir(dataDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil {
					blobs = append(blobs, b)
				}
			}
			return nil
		})
		if len(blobs) < 2 {
			t.Fatalf("no files of sidecar %d under %s", s.BrokerID, dataDir)
		}
		for _, b := range blobs {
			for _, secret := range []string{testbed.Admin.Password, testbed.Alice.Password, "mirror-admin-secret", "monitor-secret", "hunter2"} {
				if bytes.Contains(b, []byte(secret)) {
					t.Fatalf("sidecar %d's files hold the password %q", s.BrokerID, secret)
				}
			}
		}
	}
}

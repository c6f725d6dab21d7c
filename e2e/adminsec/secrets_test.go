package adminsec

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestSecretNotInSnapshots mirrors from the source's SASL_SSL listener as
// a SCRAM user, created with kafka-configs, whose password the mirror
// config takes from a file (${file:path:key}); the sidecars write raft
// snapshots (raft.snapshot.threshold=1) and one of them holds the mirror,
// with the reference as written. Then the password's bytes are in no file
// of any sidecar's data.dir (raft.db, snapshots), in no sidecar log and in
// no CLI output. The same search finds the password in the secret file and
// the reference in a snapshot, so it cannot pass for want of looking.
func TestSecretNotInSnapshots(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	password := "smSnap" + hex.EncodeToString(rnd[:])
	const user, mirror = "mirror-secret", "snap-secret"
	// The source has no authorizer: kafka-configs reaches it without
	// credentials on its PLAINTEXT listener.
	kafkaConfigsOn(t, env.Source, "", "--alter", "--entity-type", "users", "--entity-name", user,
		"--add-config", "SCRAM-SHA-512=[iterations=4096,password="+password+"]")

	dir := t.TempDir()
	secretDir := filepath.Join(dir, "secrets")
	if err := os.Mkdir(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secretFile := writeFile(t, secretDir, "source.properties", "password="+password+"\n")
	ref := "${file:" + secretFile + ":password}"
	cfg := writeFile(t, dir, "mirror.properties", "bootstrap.servers="+env.Source.ListenerBootstrap(testbed.ListenerSCRAM)+"\n"+
		"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\nssl.truststore.location="+pki.CAFile+"\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+user+`" password="`+ref+"\";\n")
	root := writeFile(t, dir, "root.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		jaas("plain.PlainLoginModule", testbed.Admin.Name, testbed.Admin.Password))

	var outputs []string
	run := func(args ...string) string {
		t.Helper()
		r := cli(t, root, args...)
		outputs = append(outputs, r.Stdout, r.Stderr)
		if r.Code != 0 {
			t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	const topic = mirror + "-t"
	createSourceTopic(t, topic)
	// The SCRAM credential reaches the source's listener through its
	// metadata log: create once the login works.
	wait.For(t, 30*time.Second, "the mirror to be created with the SCRAM user", func() bool {
		r := cli(t, root, "--create", "--mirror", mirror, "--mirror-config", cfg)
		outputs = append(outputs, r.Stdout, r.Stderr)
		return r.Code == 0
	})
	t.Cleanup(func() {
		cli(t, root, "--stop", "--topics", ".*", "--mirror", mirror)
		wait.For(t, time.Minute, mirror+" to be deleted", func() bool { return cli(t, root, "--delete", "--mirror", mirror).Code == 0 })
	})
	run("--start", "--topics", topic, "--mirror", mirror)
	wait.For(t, 2*time.Minute, topic+" to be mirrored from the SCRAM listener", func() bool {
		m, ok := described(t, root, mirror)
		if !ok || len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 2 {
			return false
		}
		// createSourceTopic's 50 records may all be in one partition.
		var copied int64
		for _, p := range m.Topics[0].Partitions {
			if p.State != "MIRRORING" || p.Lag != 0 {
				return false
			}
			copied += p.DestinationOffset
		}
		return copied == 50
	})
	run("--describe", "--mirror", mirror)
	run("--describe", "--mirror", mirror, "--json")
	run("--list")

	// A snapshot taken since holds the mirror's config with the reference.
	var snapshots []string
	wait.For(t, time.Minute, "a raft snapshot that holds "+mirror, func() bool {
		snapshots = nil
		for _, s := range env.Sidecars.Sidecars() {
			for _, f := range grepFiles(t, dataDir(s), ref) {
				if filepath.Base(f) == "state.bin" && strings.Contains(f, string(filepath.Separator)+"snapshots"+string(filepath.Separator)) {
					snapshots = append(snapshots, f)
				}
			}
		}
		return len(snapshots) > 0
	})

	if hits := grepFiles(t, secretDir, password); len(hits) != 1 {
		t.Fatalf("the search finds the password in %v, want the secret file %s", hits, secretFile)
	}
	files := 0
	for _, s := range env.Sidecars.Sidecars() {
		if hits := grepFiles(t, dataDir(s), password); len(hits) > 0 {
			t.Fatalf("sidecar %d's data.dir holds the password in %v", s.BrokerID, hits)
		}
		files += len(grepFiles(t, dataDir(s), ""))
		b, err := os.ReadFile(s.LogPath())
		if err != nil || len(b) == 0 || bytes.Contains(b, []byte(password)) {
			t.Fatalf("sidecar %d's log (%d bytes, %v) shows the password", s.BrokerID, len(b), err)
		}
	}
	for _, o := range outputs {
		if strings.Contains(o, password) {
			t.Fatalf("a CLI output shows the password:\n%s", o)
		}
	}
	t.Logf("the reference is in the snapshots %v; the password in none of %d files of the sidecars' data.dirs, their logs or %d CLI outputs",
		snapshots, files, len(outputs))
}

// dataDir returns a sidecar's data.dir, as the testbed configures it.
func dataDir(s *testbed.Sidecar) string { return filepath.Join(filepath.Dir(s.ConfigPath()), "data") }

// grepFiles returns the files under dir whose bytes contain s.
func grepFiles(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil // a snapshot raft replaced meanwhile
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a snapshot raft replaced meanwhile
			}
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

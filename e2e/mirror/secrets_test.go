package mirror

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestSecretFileReference mirrors a SASL/SCRAM source whose password the
// mirror config takes from a file, ${file:path:key}, as
// docs/configuration.md shows: the mirror works, and the password's bytes
// are nowhere in any sidecar's data.dir (raft log, stable store,
// snapshots), in the sidecars' logs (at debug level) or in any CLI output,
// before and after a sidecar restart, which makes that sidecar resolve the
// reference again from its raft state. The same search finds the password
// in the secret file and the reference in the raft log, so it cannot pass
// for want of looking.
func TestSecretFileReference(t *testing.T) {
	dumpLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	password := "smScram" + hex.EncodeToString(rnd[:]) // distinctive, and a valid --add-scram value
	user := testbed.User{Name: "mirror-scram", Password: password}
	src, err := testbed.StartCluster(ctx, env.Dist, t.TempDir(), testbed.ClusterOptions{
		Name: "scram-source", Nodes: 1, HeapMB: 384, SASL: true, SCRAMUsers: []testbed.User{user}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(src.LogTails(60))
		}
	})

	secretDir := t.TempDir()
	secretFile := filepath.Join(secretDir, "secret.properties")
	writeFile(t, secretFile, "password="+password+"\n")
	ref := "${file:" + secretFile + ":password}"
	cfgPath := filepath.Join(t.TempDir(), "mirror.properties")
	writeFile(t, cfgPath, fmt.Sprintf("bootstrap.servers=%s\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";\n",
		src.Bootstrap(), user.Name, ref))

	const mirror, topic, partitions = "secret-ref", "secret-ref-orders", 2
	admin := kadm.NewClient(newClient(t, src, testbed.Admin))
	if resp, err := admin.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s on the SCRAM source: %v %v", topic, err, resp.Err)
	}
	produce := func(from, n int) {
		t.Helper()
		cl := newClient(t, src, testbed.Admin)
		for i := from; i < from+n; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("order-%06d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(0, 400)

	var outputs []string
	run := func(args ...string) string {
		t.Helper()
		r := cli(t, args...)
		outputs = append(outputs, r.Stdout, r.Stderr)
		if r.Code != 0 {
			t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	run("--create", "--mirror", mirror, "--mirror-config", cfgPath)
	t.Cleanup(func() { cli(t, "--delete", "--mirror", mirror) })
	run("--start", "--topics", topic, "--mirror", mirror)

	// caughtUp waits for lag 0 and compares kcat dumps; a FAILED partition
	// fails the test unless it may still be so (a pass has to see the
	// secret file back).
	caughtUp := func(what string, failedOK bool) {
		t.Helper()
		wait.For(t, 3*time.Minute, topic+" mirrored with lag 0 "+what, func() bool {
			want := endOffsets(t, src, topic)
			got := endOffsets(t, env.Destination, topic)
			if len(want) != partitions || len(got) != partitions {
				return false
			}
			for p, o := range want {
				if got[p] != o {
					return false
				}
			}
			m := describe(t, mirror)
			rows := 0
			for _, tp := range m.Topics {
				for _, pd := range tp.Partitions {
					if pd.State == "FAILED" && !failedOK {
						t.Fatalf("%s-%d FAILED: %s", topic, pd.PartitionIndex, deref(pd.LastError))
					}
					if pd.State != "MIRRORING" || pd.Lag != 0 || pd.DestinationOffset != want[pd.PartitionIndex] {
						return false
					}
					rows++
				}
			}
			return rows == partitions
		})
		for p := range int32(partitions) {
			a, b := kcatDump(t, src, topic, p), kcatDump(t, env.Destination, topic, p)
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Fatalf("%s-%d %s: kcat dumps differ (%d and %d bytes)", topic, p, what, len(a), len(b))
			}
		}
	}
	caughtUp("from the SCRAM source", false)
	run("--describe", "--mirror", mirror)
	run("--describe", "--mirror", mirror, "--json")
	run("--list")

	// Restart the sidecar that drives partition 0: it reads the mirror
	// from its raft state and resolves the reference again.
	owner := int32(-1)
	for _, tp := range describe(t, mirror).Topics {
		for _, pd := range tp.Partitions {
			if pd.PartitionIndex == 0 {
				owner = pd.OwnerBrokerId
			}
		}
	}
	sc := env.Sidecars.Sidecar(owner)
	if sc == nil {
		t.Fatalf("no sidecar %d drives %s-0", owner, topic)
	}
	if err := sc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	produce(400, 200)
	caughtUp("after sidecar "+strconv.Itoa(int(owner))+" restarted", false)
	run("--describe", "--mirror", mirror, "--json")

	// Without the secret file, the restarted sidecar cannot build its
	// source client: the partition it leads is FAILED, naming the key and
	// the reference, and mirrors again once the file is back.
	away := secretFile + ".away"
	if err := os.Rename(secretFile, away); err != nil {
		t.Fatal(err)
	}
	if err := sc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	var reason string
	wait.For(t, time.Minute, topic+"-0 FAILED on sidecar "+strconv.Itoa(int(owner))+" without the secret file", func() bool {
		r := cli(t, "--describe", "--mirror", mirror)
		outputs = append(outputs, r.Stdout, r.Stderr)
		for _, tp := range describe(t, mirror).Topics {
			for _, pd := range tp.Partitions {
				if pd.PartitionIndex == 0 && pd.State == "FAILED" && pd.OwnerBrokerId == owner {
					reason = deref(pd.LastError)
					return true
				}
			}
		}
		return false
	})
	if !strings.Contains(reason, "sasl.jaas.config") || !strings.Contains(reason, ref) || strings.Contains(reason, password) || strings.Contains(reason, user.Name) {
		t.Fatalf("the FAILED reason %q does not name the key and the reference, or shows the value", reason)
	}
	page, err := sc.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failedGauge := metricValue(page, `sidemirror_source_config_failed_partitions{mirror="`+mirror+`"}`)
	if failedGauge < 1 {
		t.Fatalf("sidemirror_source_config_failed_partitions of %s on sidecar %d is %v, want >= 1:\n%s", mirror, owner, failedGauge,
			grepMetrics(page, "sidemirror_source_config_failed_partitions"))
	}
	t.Logf("without the secret file: %s-0 FAILED (%v partition(s) in sidemirror_source_config_failed_partitions): %s", topic, failedGauge, reason)
	produce(600, 100)
	if err := os.Rename(away, secretFile); err != nil {
		t.Fatal(err)
	}
	caughtUp("once the secret file is back", true)

	// The search must work: it finds the password in the secret file and
	// the reference in some sidecar's raft log.
	if hits := grepFiles(t, secretDir, password); len(hits) != 1 {
		t.Fatalf("the search finds the password in %v, want the secret file %s", hits, secretFile)
	}
	var refFiles []string
	files, logBytes := 0, 0
	for _, s := range env.Sidecars.Sidecars() {
		dataDir := filepath.Join(filepath.Dir(s.ConfigPath()), "data")
		if hits := grepFiles(t, dataDir, password); len(hits) > 0 {
			t.Fatalf("sidecar %d's data.dir holds the password in %v", s.BrokerID, hits)
		}
		refFiles = append(refFiles, grepFiles(t, dataDir, ref)...)
		files += len(grepFiles(t, dataDir, ""))
		b, err := os.ReadFile(s.LogPath())
		if err != nil || bytes.Contains(b, []byte(password)) || len(b) == 0 {
			t.Fatalf("sidecar %d's log (%d bytes, %v) shows the password", s.BrokerID, len(b), err)
		}
		logBytes += len(b)
	}
	if len(refFiles) == 0 {
		t.Fatal("no sidecar's data.dir holds the reference: the raft log was not searched")
	}
	outBytes := 0
	for _, o := range outputs {
		if strings.Contains(o, password) {
			t.Fatalf("a CLI output shows the password:\n%s", o)
		}
		outBytes += len(o)
	}
	t.Logf("700 records mirrored with identical kcat dumps; password absent from %d files of the sidecars' data.dirs "+
		"(the reference is in %v), %d bytes of sidecar logs and %d bytes of CLI output", files, refFiles, logBytes, outBytes)
}

// grepFiles returns the files under dir whose bytes contain s.
func grepFiles(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("searching %s: %v", dir, err)
	}
	return hits
}

// kcatDump returns kcat's dump of one partition of topic on c: offsets,
// timestamps, keys, values and headers.
func kcatDump(t *testing.T, c *testbed.Cluster, topic string, p int32) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.DumpPartition(ctx, testbed.Admin, topic, p, testbed.DumpFormat)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// TestSmokeProduceAndReadWithKcat writes 10,000 records with franz-go to a
// topic on each cluster and reads them back with kcat, an independent
// client: every record must be at the partition and offset the broker
// acknowledged, with its key, value and headers intact.
func TestSmokeProduceAndReadWithKcat(t *testing.T) {
	for _, c := range env.Clusters() {
		t.Run(c.Name(), func(t *testing.T) {
			testbed.DumpLogsOnFailure(t, c)
			const topic, n = "smoke", 10000
			createTopic(t, c, topic, 3, int16(min(3, len(c.Nodes()))), nil)

			produced := produceNumbered(t, c, testbed.Sidemirror, topic, n)

			// %p partition, %o offset, %k key, %s value, %h headers.
			out := kcat(t, c, testbed.Admin, "-C", "-t", topic, "-e", "-q",
				"-f", `%p|%o|%k|%s|%h\n`)
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
				f := strings.SplitN(line, "|", 3)
				if len(f) != 3 {
					t.Fatalf("kcat printed an unexpected line %q", line)
				}
				got[f[0]+"|"+f[1]] = f[2]
			}
			if len(got) != n {
				t.Fatalf("kcat read %d records, produced %d", len(got), n)
			}
			for _, r := range produced {
				pos := fmt.Sprintf("%d|%d", r.Partition, r.Offset)
				want := fmt.Sprintf("%s|%s|%s=%s", r.Key, r.Value, r.Headers[0].Key, r.Headers[0].Value)
				if got[pos] != want {
					t.Fatalf("partition|offset %s: kcat read %q, produced %q", pos, got[pos], want)
				}
			}
		})
	}
}

// produceNumbered synchronously produces n records numbered 0..n-1 (key
// k-i, value v-i, header seq=i) and returns them with their offsets.
func produceNumbered(t *testing.T, c *testbed.Cluster, u testbed.User, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, c, u, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Key:     []byte("k-" + strconv.Itoa(i)),
			Value:   []byte("v-" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}},
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s on %s: %v", topic, c.Name(), err)
	}
	return recs
}

// TestSmokeDenyWriteACL shows the destination's authorizer at work: once a
// DENY WRITE ACL for User:* exists on a topic, alice gets
// TOPIC_AUTHORIZATION_FAILED while the sidemirror super user still writes.
func TestSmokeDenyWriteACL(t *testing.T) {
	c := env.Destination
	testbed.DumpLogsOnFailure(t, c)
	const topic = "smoke-acl"
	createTopic(t, c, topic, 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	produce := func(u testbed.User, value string) error {
		cl := newClient(t, c, u, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1),
			kgo.RecordDeliveryTimeout(10*time.Second))
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr()
	}
	if err := produce(testbed.Alice, "before"); err != nil {
		t.Fatalf("alice could not write before any ACL existed: %v", err)
	}

	acl := kadm.NewACLs().Topics(topic).Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := newAdmin(t, c).CreateACLs(ctx, acl)
	if err != nil {
		t.Fatalf("create ACL: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL: %v", r.Err)
		}
	}

	// ACLs reach every broker through the metadata log; poll until alice is refused.
	var aliceErr error
	wait.For(t, 30*time.Second, "alice's write to be denied", func() bool {
		aliceErr = produce(testbed.Alice, "after")
		return aliceErr != nil
	})
	if !errors.Is(aliceErr, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's write failed with %v, want TOPIC_AUTHORIZATION_FAILED", aliceErr)
	}
	if err := produce(testbed.Sidemirror, "super"); err != nil {
		t.Fatalf("the sidemirror super user could not write under DENY WRITE: %v", err)
	}

	// Independent check: kcat sees exactly the two accepted records.
	out := kcat(t, c, testbed.Admin, "-C", "-t", topic, "-e", "-q", "-f", `%s\n`)
	if !bytes.Equal(out, []byte("before\nsuper\n")) {
		t.Fatalf("topic holds %q, want the records of alice (before the ACL) and sidemirror", out)
	}
}

// TestFailOnPurpose fails midway when SIDEMIRROR_E2E_FAIL_ON_PURPOSE is set,
// to show that a failing test run leaves no Kafka JVM behind
// (`make e2e-fail-check`).
func TestFailOnPurpose(t *testing.T) {
	mode := os.Getenv("SIDEMIRROR_E2E_FAIL_ON_PURPOSE")
	if mode == "" {
		t.Skip("set SIDEMIRROR_E2E_FAIL_ON_PURPOSE=fail|panic to fail on purpose")
	}
	produceNumbered(t, env.Source, testbed.Admin, mustTopic(t, "fail-on-purpose"), 10)
	if mode == "panic" {
		panic("failing on purpose: SIDEMIRROR_E2E_FAIL_ON_PURPOSE=panic")
	}
	t.Fatal("failing on purpose: SIDEMIRROR_E2E_FAIL_ON_PURPOSE is set")
}

// mustTopic creates a 1-partition topic on the source and returns its name.
func mustTopic(t *testing.T, name string) string {
	t.Helper()
	createTopic(t, env.Source, name, 1, 1, nil)
	return name
}

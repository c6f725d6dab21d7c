package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// wait polls the tests' conditions, which ask real Kafka clusters, a few
// times a second.
var wait = testwait.Every(200 * time.Millisecond)

// newClient returns a franz-go client for c as u, closed at test end.
func newClient(t *testing.T, c *testbed.Cluster, u testbed.User, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(u, extra...)
	if err != nil {
		t.Fatalf("client for %s: %v", c.Name(), err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns an admin client for c as the admin user.
func newAdmin(t *testing.T, c *testbed.Cluster) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, c, testbed.Admin))
}

// createTopic creates a topic and fails the test on error.
func createTopic(t *testing.T, c *testbed.Cluster, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := newAdmin(t, c).CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s on %s: %v", name, c.Name(), err)
	}
}

// kcat runs kcat against c as u and returns its standard output.
func kcat(t *testing.T, c *testbed.Cluster, u testbed.User, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Kcat(ctx, u, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

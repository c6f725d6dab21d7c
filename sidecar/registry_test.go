package sidecar

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/statestore"
)

// TestSidecarRegisters: a sidecar started against a destination cluster
// writes its admin address to the sidecar registry in __mirror_state, keyed
// by its broker ID, with no mirror created.
func TestSidecarRegisters(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := l.Addr().String()
	_ = l.Close()

	cfg := testConfig(t, t.TempDir())
	cfg.LocalBootstrapServers = c.ListenAddrs()
	cfg.Destination.BootstrapServers = c.ListenAddrs()
	cfg.AdminListener = admin
	r := startSidecar(t, cfg)
	r.waitReady(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var got map[int32]statestore.Sidecar
	testwait.For(t, 30*time.Second, "the sidecar's registry record", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, _ = statestore.ReadSidecars(ctx, cl)
		return len(got) > 0
	})
	if sc, ok := got[1]; len(got) != 1 || !ok || sc.AdminAddress != admin || sc.AdminProtocol != "PLAINTEXT" {
		t.Fatalf("registry %+v, want broker 1 at %s, PLAINTEXT", got, admin)
	}
}

package fetcher

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/kafkaproxy"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// fetchClientIDs puts a proxy in front of the source and records the client
// IDs of the Fetch requests that pass it.
func fetchClientIDs(t *testing.T, e *testEnv) (addr string, seen func() []string) {
	t.Helper()
	px, err := kafkaproxy.Start("127.0.0.1:0", e.src.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	var (
		mu  sync.Mutex
		ids []string
	)
	px.HoldNext(func(r kafkaproxy.Request) bool {
		if r.Key == int16(kmsg.Fetch) {
			mu.Lock()
			if !slices.Contains(ids, r.ClientID) {
				ids = append(ids, r.ClientID)
			}
			mu.Unlock()
		}
		return false // observe only, never hold
	})
	return px.Addr(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ids)
	}
}

// TestFetcherClientID checks the client ID the source broker sees on the
// fetcher's Fetch requests: KIP-1279's broker-<id>-fetcher-0-mirror-<mirror>
// by default (what a consumer_byte_rate quota names), or the one the mirror's
// source options set.
func TestFetcherClientID(t *testing.T) {
	// The KIP's quota example.
	if id := FetcherClientID(4, "my-mirror"); id != "broker-4-fetcher-0-mirror-my-mirror" {
		t.Fatalf("FetcherClientID(4, my-mirror) = %q", id)
	}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want string
	}{
		{"default", nil, "broker-0-fetcher-0-mirror-" + testMirror},
		{"configured", []kgo.Opt{kgo.ClientID("dr-fetcher")}, "dr-fetcher"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "ids"
			e := newTestEnv(t, 1, map[string]int32{topic: 1})
			addr, seen := fetchClientIDs(t, e)
			m := e.newManager()
			if err := m.SetMirror(testMirror, append([]kgo.Opt{kgo.SeedBrokers(addr)}, tc.opts...), MirrorSettings{}); err != nil {
				t.Fatal(err)
			}
			e.produce(e.producer(kgo.NoCompression()), topic, []int32{0}, 0, 50, 10)
			startAll(t, m, topic, []int32{0})
			testwait.For(t, waitTimeout, "a fetch through the proxy", func() bool { return len(seen()) > 0 })
			if got := seen(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("fetch client IDs %q, want only %q", got, tc.want)
			}
		})
	}
}

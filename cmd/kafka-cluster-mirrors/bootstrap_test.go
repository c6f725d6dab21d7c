package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// brokerCluster starts a kfake cluster of n brokers and returns it with a
// state store over it and the address of every broker by node ID.
func brokerCluster(t *testing.T, n int) (*statestore.Store, map[int32]string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	store, err := statestore.New(cl, statestore.NumPartitions(4), statestore.ReplicationFactor(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[int32]string{}
	for _, b := range md.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if len(addrs) != n {
		t.Fatalf("kfake reports brokers %v, want %d", addrs, n)
	}
	return store, addrs
}

func register(t *testing.T, store *statestore.Store, id int32, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.RegisterSidecar(ctx, statestore.Sidecar{BrokerID: id, AdminAddress: addr, AdminProtocol: "PLAINTEXT"}); err != nil {
		t.Fatal(err)
	}
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func listingSidecar(t *testing.T) (*fakeHandler, string) {
	h := &fakeHandler{resp: map[int16]protocol.Response{
		protocol.KeyListClusterMirrors: &protocol.ListClusterMirrorsResponse{Mirrors: []protocol.ListedMirror{
			{MirrorName: "my-mirror", TopicCount: 2, SourceClusterId: "lBq12jYZRp-9wF3M9MPopg", SourceBootstrap: "localhost:9091"},
		}},
	}}
	return h, startFake(t, h)
}

// TestBootstrapBroker points --bootstrap-server at brokers of a kfake
// cluster whose __mirror_state holds the sidecar registry: the command
// reaches the sidecar beside the given broker, else the next live one, and
// prints what the same command against a sidecar prints.
func TestBootstrapBroker(t *testing.T) {
	store, brokers := brokerCluster(t, 3)
	h0, side0 := listingSidecar(t)
	h1, side1 := listingSidecar(t)
	register(t, store, 0, side0)
	register(t, store, 1, side1)
	register(t, store, 2, deadAddr(t))

	wantOut, wantErr, wantCode := runCLI(t, "--bootstrap-server", side1, "--list")
	if wantCode != 0 || wantErr != "" || wantOut == "" {
		t.Fatalf("--list against a sidecar: %d %q %q", wantCode, wantOut, wantErr)
	}
	if n := len(h1.requests()); n != 1 {
		t.Fatalf("the sidecar got %d requests, want 1", n)
	}

	check := func(broker int32, wantBeside *fakeHandler, wantCount map[*fakeHandler]int) {
		t.Helper()
		out, errOut, code := runCLI(t, "--bootstrap-server", brokers[broker], "--list")
		if out != wantOut || errOut != wantErr || code != wantCode {
			t.Fatalf("--list against broker %d: %d %q %q, want %d %q %q", broker, code, out, errOut, wantCode, wantOut, wantErr)
		}
		for h, n := range wantCount {
			if got := len(h.requests()); got != n {
				t.Errorf("after --list against broker %d a sidecar holds %d requests, want %d", broker, got, n)
			}
		}
		last := wantBeside.requests()
		if _, ok := last[len(last)-1].(*protocol.ListClusterMirrorsRequest); !ok {
			t.Errorf("the chosen sidecar's last request is %T", last[len(last)-1])
		}
	}
	// Beside broker 1: sidecar 1, not the lower ID 0.
	check(1, h1, map[*fakeHandler]int{h0: 0, h1: 2})
	// Broker 2's sidecar is down: the others by ID, so sidecar 0.
	check(2, h0, map[*fakeHandler]int{h0: 1, h1: 2})
	check(0, h0, map[*fakeHandler]int{h0: 2, h1: 2})
	// ":port", as the KIP's examples write a local broker: still beside it.
	_, port, _ := net.SplitHostPort(brokers[1])
	brokers[-1] = ":" + port
	check(-1, h1, map[*fakeHandler]int{h0: 2, h1: 3})

	// Sidecar 1 moves to a dead address (the latest record wins): broker 1
	// leads to sidecar 0.
	register(t, store, 1, deadAddr(t))
	check(1, h0, map[*fakeHandler]int{h0: 3, h1: 3})

	// The command config's client.id reaches the sidecar.
	cc := writeFile(t, "client.properties", "client.id=ops-laptop\n")
	if _, errOut, code := runCLI(t, "--bootstrap-server", brokers[0], "--command-config", cc, "--list"); code != 0 {
		t.Fatalf("with --command-config: %d %q", code, errOut)
	}
	h0.mu.Lock()
	clientID := h0.infos[len(h0.infos)-1].ClientID
	h0.mu.Unlock()
	if clientID != "ops-laptop" {
		t.Errorf("client ID %q, want the command-config's client.id", clientID)
	}

	// Every registered sidecar down: one line naming them.
	register(t, store, 0, deadAddr(t))
	_, errOut, code := runCLI(t, "--bootstrap-server", brokers[0], "--list")
	want := "Error: --bootstrap-server " + brokers[0] + " is a Kafka broker, and none of the sidecars registered on its cluster answers: sidecar 0 at "
	if code != 1 || len(errOut) < len(want) || errOut[:len(want)] != want {
		t.Errorf("no live sidecar: %d %q, want prefix %q", code, errOut, want)
	}
}

// TestBootstrapBrokerNoRegistry: a broker of a cluster without sidecar
// records, with and without __mirror_state, gives one line saying so.
func TestBootstrapBrokerNoRegistry(t *testing.T) {
	store, brokers := brokerCluster(t, 1)
	want := "Error: --bootstrap-server " + brokers[0] + " is a Kafka broker with no sidecars registered on this cluster; " +
		"point --bootstrap-server at a sidecar's admin.listener\n"
	for _, step := range []string{"no __mirror_state", "__mirror_state without registry records"} {
		if step != "no __mirror_state" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := store.EnsureTopic(ctx)
			if err == nil {
				err = store.Write(ctx, statestore.SidecarPartition, []statestore.Record{{Key: statestore.MirrorKey("m"), Value: &statestore.PartitionState{}}})
			}
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		out, errOut, code := runCLI(t, "--bootstrap-server", brokers[0], "--list")
		if code != 1 || out != "" || errOut != want {
			t.Errorf("%s: %d %q %q, want %q", step, code, out, errOut, want)
		}
	}
}

// TestBootstrapBrokerSASL: the broker needs SASL/PLAIN; --command-config's
// security settings reach it, and the command reaches the sidecar.
func TestBootstrapBrokerSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "admin-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	store, err := statestore.New(cl, statestore.NumPartitions(1), statestore.ReplicationFactor(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	h, side := listingSidecar(t)
	register(t, store, 1, side)
	// Sidecar 0, beside the broker, records a SASL admin endpoint: it is
	// dialed with the SASL settings, which this plain fake refuses, so the
	// command goes to sidecar 1, whose PLAINTEXT endpoint is dialed plain.
	hSASL, sideSASL := listingSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.RegisterSidecar(ctx, statestore.Sidecar{BrokerID: 0, AdminAddress: sideSASL, AdminProtocol: "SASL_PLAINTEXT"}); err != nil {
		t.Fatal(err)
	}

	cc := writeFile(t, "client.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";`+"\n")
	want, _, _ := runCLI(t, "--bootstrap-server", side, "--list")
	out, errOut, code := runCLI(t, "--bootstrap-server", c.ListenAddrs()[0], "--command-config", cc, "--list")
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("--list against a SASL broker: %d %q %q, want %q", code, out, errOut, want)
	}
	if n, nSASL := len(h.requests()), len(hSASL.requests()); n != 2 || nSASL != 0 {
		t.Errorf("the PLAINTEXT sidecar got %d requests, want 2; the SASL one %d, want 0", n, nSASL)
	}

	// Without the SASL settings the registry cannot be read; the error
	// says where they go.
	short := writeFile(t, "short.properties", "request.timeout.ms=2000\n")
	_, errOut, code = runCLI(t, "--bootstrap-server", c.ListenAddrs()[0], "--command-config", short, "--list")
	wantErr := "Error: --bootstrap-server " + c.ListenAddrs()[0] + " is a Kafka broker, and reading the sidecar registry in __mirror_state failed " +
		"(if its listener needs SASL or TLS, give security.protocol and its settings in --command-config): "
	if code != 1 || !strings.HasPrefix(errOut, wantErr) {
		t.Errorf("SASL broker without the settings: %d %q, want prefix %q", code, errOut, wantErr)
	}
}

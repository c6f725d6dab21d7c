package kafkaproxy

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func start(t *testing.T) (*kfake.Cluster, *Proxy, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p, err := Start("127.0.0.1:0", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, p, cl
}

// TestMetadataPointsAtProxy: a client bootstrapped on the proxy learns the
// proxy's address for the broker, so it never bypasses it.
func TestMetadataPointsAtProxy(t *testing.T) {
	_, p, cl := start(t)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("%d brokers", len(resp.Brokers))
	}
	if b := resp.Brokers[0]; b.Host != p.host || b.Port != p.port {
		t.Fatalf("metadata names %s:%d, want the proxy %s", b.Host, b.Port, p.Addr())
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestLatency: frames wait for the set latency in each direction.
func TestLatency(t *testing.T) {
	_, p, cl := start(t)
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(100 * time.Millisecond)
	begin := time.Now()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 200*time.Millisecond {
		t.Fatalf("a round trip took %s with 100ms latency each way", d)
	}
}

// TestHoldNext: the held request's connection is cut; the client (an
// idempotent producer) sends the batch again on a new connection, the broker
// gets the held request right before it, appends it and answers the repeat
// as a duplicate: the record is there once.
func TestHoldNext(t *testing.T) {
	c, p, cl := start(t)
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.HoldNext(ProduceTo("t"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("held")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if h, r := p.Holds(); h != 1 || r != 1 {
		t.Fatalf("holds %d released %d, want 1 and 1", h, r)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The broker appended the held record before the one that released it.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < 3 {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cons.PollFetches(fctx)
		timedOut := fctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("read %q, want 3 records", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "first" || got[1] != "held" || got[2] != "after" {
		t.Fatalf("records %q, want first, held, after", got)
	}
	if end := endOffset(t, cons); end != 3 {
		t.Fatalf("end offset %d, want 3: the repeat of the held batch was appended", end)
	}
}

func endOffset(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestStartCluster: whichever broker answers Metadata, a client of a
// cluster behind StartCluster's proxies learns only proxy addresses.
func TestStartCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := StartCluster("127.0.0.1:0", c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range ps {
			_ = p.Close()
		}
	}()
	proxies := map[string]bool{}
	for _, p := range ps {
		proxies[p.Addr()] = true
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ps[0].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for id := range int32(3) {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(int(id)))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range resp.Brokers {
			if addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); !proxies[addr] {
				t.Fatalf("broker %d's Metadata names broker %d at %s, not a proxy", id, b.NodeID, addr)
			}
		}
	}
}

package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListedTopicConfigsWaitsForMetadata checks that the configs of a topic
// the source just listed are asked again while the answering broker does not
// know the topic yet, and that a topic that stays unknown is an error.
func TestListedTopicConfigsWaitsForMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = "t"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("3600000")
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	if _, err := alter.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}

	// The first answers say the topic is unknown, as a broker that has
	// not caught up with the controller would.
	var unknownLeft atomic.Int32
	unknownLeft.Store(3)
	var asked atomic.Int32
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		if unknownLeft.Add(-1) < 0 {
			return nil, nil, false
		}
		dr := req.(*kmsg.DescribeConfigsRequest)
		resp := dr.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range dr.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	overrides, _, err := listedTopicConfigs(ctx, cl, "t")
	if err != nil {
		t.Fatalf("listedTopicConfigs after 3 unknown answers: %v", err)
	}
	if got := overrides["retention.ms"]; got != "3600000" || asked.Load() != 4 {
		t.Fatalf("overrides = %v after %d requests, want retention.ms=3600000 after 4", overrides, asked.Load())
	}

	unknownLeft.Store(1000)
	asked.Store(0)
	if _, _, err := listedTopicConfigs(ctx, cl, "t"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("listedTopicConfigs of a topic that stays unknown = %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if n := asked.Load(); n != 10 {
		t.Fatalf("a topic that stays unknown was asked about %d times, want 10", n)
	}
}

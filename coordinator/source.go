package coordinator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SourceDialer turns a mirror's configuration (bootstrap.servers and the
// source security settings, Kafka's property names) into franz-go client
// options. The sidecar provides it: it owns Kafka client configuration.
type SourceDialer func(config map[string]string) ([]kgo.Opt, error)

// SourceTopic is a topic of a source cluster.
type SourceTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// sourceClusterID asks the source cluster for its ID.
func sourceClusterID(ctx context.Context, cl *kgo.Client) (string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	if resp.ClusterID == nil {
		return "", nil
	}
	return *resp.ClusterID, nil
}

// sourceTopics lists the source's topics, internal ones (Kafka's, and any
// whose name starts with "__") left out: they are never mirrored.
func sourceTopics(ctx context.Context, cl *kgo.Client) ([]SourceTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []SourceTopic
	for _, t := range resp.Topics {
		if t.Topic == nil || t.IsInternal || strings.HasPrefix(*t.Topic, "__") {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("source topic %s: %w", *t.Topic, err)
		}
		out = append(out, SourceTopic{Name: *t.Topic, ID: t.TopicID, Partitions: int32(len(t.Partitions))})
	}
	slices.SortFunc(out, func(a, b SourceTopic) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sourceTopicConfigs returns a source topic's topic-level overrides and its
// effective max.message.bytes.
func sourceTopicConfigs(ctx context.Context, cl *kgo.Client, topic string) (map[string]string, int64, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = topic
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, 0, err
	}
	overrides := map[string]string{}
	var maxMessageBytes int64
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return nil, 0, fmt.Errorf("configs of source topic %s: %w", topic, err)
		}
		for _, c := range res.Configs {
			if c.Value == nil {
				continue
			}
			if c.Name == "max.message.bytes" {
				maxMessageBytes, _ = strconv.ParseInt(*c.Value, 10, 64)
			}
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.IsSensitive {
				overrides[c.Name] = *c.Value
			}
		}
	}
	return overrides, maxMessageBytes, nil
}

// askAgain calls ask until it reports done, at most 10 times 300 ms apart
// (and while ctx lasts): for what a source broker may not know yet, a topic
// created a moment ago or a broker that just restarted.
func askAgain(ctx context.Context, ask func() (done bool)) {
	for attempt := 1; !ask() && attempt < 10 && sleepCtx(ctx, 300*time.Millisecond); attempt++ {
	}
}

// listedTopicConfigs is sourceTopicConfigs for a topic the source's
// Metadata just listed. DescribeConfigs may go to another broker, one that
// has not seen the topic yet, so UNKNOWN_TOPIC_OR_PARTITION is asked again
// (askAgain).
func listedTopicConfigs(ctx context.Context, cl *kgo.Client, topic string) (overrides map[string]string, maxBytes int64, err error) {
	askAgain(ctx, func() bool {
		overrides, maxBytes, err = sourceTopicConfigs(ctx, cl, topic)
		return !errors.Is(err, kerr.UnknownTopicOrPartition)
	})
	return overrides, maxBytes, err
}

// matchAny reports whether name matches one of res.
func matchAny(res []*topicPattern, name string) bool {
	for _, re := range res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// isLiteral reports whether a pattern is a plain topic name (no regular
// expression syntax beyond the dots that topic names may hold).
func isLiteral(p string) bool {
	return regexp.QuoteMeta(strings.ReplaceAll(p, ".", "")) == strings.ReplaceAll(p, ".", "")
}

// expandTopics returns the topics that match an include pattern and no
// exclude pattern, and the literal include names that match no topic.
func expandTopics(topics []SourceTopic, include, exclude []string) (matched []SourceTopic, missing []string, err error) {
	inc, err := compilePatterns(include)
	if err != nil {
		return nil, nil, err
	}
	exc, err := compilePatterns(exclude)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range topics {
		if matchAny(inc, t.Name) && !matchAny(exc, t.Name) {
			matched = append(matched, t)
		}
	}
	for i, p := range include {
		if !isLiteral(p) {
			continue
		}
		found := false
		for _, t := range topics {
			if inc[i].MatchString(t.Name) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, p)
		}
	}
	return matched, missing, nil
}

// sleepCtx waits for d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// newSourceClient connects to a mirror's source cluster for admin work
// (metadata, configs, group offsets): the one way the coordinator does.
func newSourceClient(dial SourceDialer, config map[string]string) (*kgo.Client, error) {
	opts, err := dial(config)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ClientID("sidemirror-admin"), kgo.RequestRetries(2), kgo.RetryTimeout(10*time.Second),
		kgo.DialTimeout(5*time.Second))
	return kgo.NewClient(opts...)
}

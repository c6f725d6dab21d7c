package coordinator

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file serves the destination-side throttle configs of KIP-1279
// §4.12 through Kafka's config APIs, as kafka-configs.sh --entity-type
// brokers and topics set them: mirror.replication.throttled.rate on a
// BROKER resource (named by the broker ID) and
// mirror.replication.throttled.replicas on a TOPIC resource. The raft state
// keeps them (fsm.AlterBrokerConfig, fsm.AlterTopicConfig); each sidecar's
// reconciler hands its own broker's share to the data plane
// (throttleFor), which applies it without a restart.

// alterBrokerOrTopic applies one BROKER or TOPIC resource of an
// IncrementalAlterConfigs request.
func (a *admin) alterBrokerOrTopic(ctx context.Context, res protocol.AlterConfigsResource, validateOnly bool) *configError {
	set := map[string]string{}
	var del []string
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return configErr(kerr.InvalidRequest, "config key %s is listed twice; list it once", c.Name)
		}
		seen[c.Name] = true
		switch c.ConfigOperation {
		case protocol.ConfigOpSet:
			if c.Value == nil {
				return configErr(kerr.InvalidConfig, "SET of config key %s has no value", c.Name)
			}
			set[c.Name] = *c.Value
		case protocol.ConfigOpDelete:
			del = append(del, c.Name)
		default:
			return configErr(kerr.InvalidRequest, "config operation %d for key %s is not supported; use 0 SET or 1 DELETE", c.ConfigOperation, c.Name)
		}
	}
	if len(set) == 0 {
		set = nil
	}
	st := a.ctl.State()
	var cmd fsm.Command
	switch res.ResourceType {
	case protocol.ResourceTypeBroker:
		id, err := brokerResourceID(res.ResourceName)
		if err != nil {
			return err
		}
		if _, ok := st.Sidecars[id]; !ok && len(set) > 0 {
			return configErr(kerr.InvalidRequest, "broker %d has no sidecar in the raft group (sidecars: %s); name the broker whose sidecar should throttle",
				id, sidecarIDs(st))
		}
		cmd = fsm.AlterBrokerConfig{Broker: id, Set: set, Delete: del}
	default:
		cmd = fsm.AlterTopicConfig{Topic: res.ResourceName, Set: set, Delete: del}
	}
	if validateOnly {
		b, err := fsm.EncodeCommand(cmd)
		if err != nil {
			return configErr(kerr.UnknownServerError, "%v", err)
		}
		if r := fsm.ApplyTo(st.Clone(), b); r.ErrorCode != 0 {
			return &configError{code: r.ErrorCode, msg: r.ErrorMessage}
		}
		return nil
	}
	r, err := a.ctl.Apply(ctx, cmd)
	if err != nil {
		return configErr(kerr.UnknownServerError, "%v", err)
	}
	if r.ErrorCode != 0 {
		return &configError{code: r.ErrorCode, msg: r.ErrorMessage}
	}
	// Neither key is a secret: the values are logged.
	a.log.Info("altered throttle config", zap.String("resource", resourceKind(res.ResourceType)+" "+res.ResourceName),
		zap.Any("set", set), zap.Strings("deleted", del))
	a.local.Kick()
	return nil
}

// brokerResourceID reads the name of a BROKER resource.
func brokerResourceID(name string) (int32, *configError) {
	if name == "" {
		return 0, configErr(kerr.InvalidRequest, "the cluster-wide default of broker configs (--entity-default) is not kept by the sidecars; name a broker (--entity-name <broker ID>)")
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return 0, configErr(kerr.InvalidRequest, "broker %q is not a broker ID (0 or more)", name)
	}
	return int32(id), nil
}

func sidecarIDs(st *fsm.State) string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(st.Sidecars)) {
		ids = append(ids, strconv.Itoa(int(id)))
	}
	if len(ids) == 0 {
		return "none registered"
	}
	return strings.Join(ids, ", ")
}

func resourceKind(t int8) string {
	if t == protocol.ResourceTypeBroker {
		return "broker"
	}
	return "topic"
}

// describeBrokerOrTopic answers DescribeConfigs for a BROKER or TOPIC
// resource: the throttle configs set on it, as dynamic configs
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG). A key that is not set is
// not listed: a broker's static mirror.replication.throttled.rate is in its
// sidecar's properties, which other sidecars do not know.
func describeBrokerOrTopic(st *fsm.State, res protocol.DescribeConfigsResource, synonyms, docs bool) protocol.DescribeConfigsResult {
	out := protocol.DescribeConfigsResult{ResourceType: res.ResourceType, ResourceName: res.ResourceName}
	var cfg map[string]string
	source, typ, doc := protocol.ConfigSourceDynamicResource, protocol.ConfigTypeList, throttledReplicasDoc
	if res.ResourceType == protocol.ResourceTypeBroker {
		id, err := brokerResourceID(res.ResourceName)
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, strPtr(err.msg)
			return out
		}
		cfg = st.BrokerConfigs[id]
		source, typ, doc = protocol.ConfigSourceDynamicBroker, protocol.ConfigTypeLong, throttledRateDoc
	} else {
		if p := fsm.ValidateTopicName(res.ResourceName); p != nil {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidTopicException.Code, strPtr(p.Error())
			return out
		}
		cfg = st.TopicConfigs[res.ResourceName]
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if res.ConfigurationKeys != nil && !slices.Contains(res.ConfigurationKeys, k) {
			continue
		}
		e := protocol.NewDescribeConfigsEntry()
		e.Name, e.Value, e.ConfigSource, e.ConfigType = k, strPtr(cfg[k]), source, typ
		if synonyms {
			e.Synonyms = []protocol.DescribeConfigsSynonym{{Name: k, Value: e.Value, Source: source}}
		}
		if docs {
			e.Documentation = strPtr(doc)
		}
		out.Configs = append(out.Configs, e)
	}
	return out
}

const (
	throttledRateDoc = "The bytes per second this broker's sidecar appends of throttled mirror traffic (KIP-1279 destination-side throttling); 0 is no limit. " +
		"Set here, it replaces the sidecar's mirror.replication.throttled.rate property; deleted, the property applies again."
	throttledReplicasDoc = "Which replicas of this topic are throttled by mirror.replication.throttled.rate: partition:broker pairs (0:4,1:5) or * for all. " +
		"A topic without it is throttled in every partition."
)

// throttleFor returns the throttle of broker's sidecar in st: the broker's
// dynamic rate, if set, and by topic the partitions of that broker that
// mirror.replication.throttled.replicas selects.
func throttleFor(st *fsm.State, broker int32) fetcher.ReplicationThrottle {
	var rt fetcher.ReplicationThrottle
	rt.Rate, rt.RateSet = st.ThrottledRate(broker)
	for topic, cfg := range st.TopicConfigs {
		v, ok := cfg[fsm.ThrottledReplicasKey]
		if !ok {
			continue
		}
		all, replicas, err := fsm.ParseThrottledReplicas(v)
		if err != nil {
			continue // the FSM refuses such values
		}
		tr := fetcher.ThrottledReplicas{All: all}
		for _, r := range replicas {
			if r.Broker == broker {
				tr.Partitions = append(tr.Partitions, r.Partition)
			}
		}
		if rt.Replicas == nil {
			rt.Replicas = map[string]fetcher.ThrottledReplicas{}
		}
		rt.Replicas[topic] = tr
	}
	return rt
}

// describeThrottle says which throttle a sidecar applies, for logs.
func describeThrottle(rt fetcher.ReplicationThrottle) string {
	rate := "the sidecar's property"
	if rt.RateSet {
		rate = fmt.Sprintf("%d bytes/s (dynamic)", rt.Rate)
	}
	return fmt.Sprintf("rate %s, %d topic(s) with throttled replicas", rate, len(rt.Replicas))
}

// syncThrottle hands the data plane this sidecar's throttle when it
// changed.
func (r *reconciler) syncThrottle(st *fsm.State) {
	rt := throttleFor(st, r.brokerID)
	if r.throttle != nil && reflect.DeepEqual(*r.throttle, rt) {
		return
	}
	r.dp.SetReplicationThrottle(rt)
	r.throttle = &rt
	r.log.Info("replication throttle set", zap.String("throttle", describeThrottle(rt)))
}

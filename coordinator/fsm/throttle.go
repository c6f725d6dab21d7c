package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The destination-side throttle configs of KIP-1279 §4.12, which Kafka
// keeps as a dynamic broker config and a topic config. The sidecars keep
// them in the raft state (State.BrokerConfigs, State.TopicConfigs), set
// through IncrementalAlterConfigs on BROKER and TOPIC resources of the
// admin endpoint, and each sidecar applies its own broker's rate and the
// replicas on its broker at runtime.
const (
	// ThrottledRateKey is the broker config: the bytes per second the
	// broker's sidecar appends of throttled mirror traffic; 0 is no limit.
	ThrottledRateKey = "mirror.replication.throttled.rate"
	// ThrottledReplicasKey is the topic config: which of the topic's
	// replicas are throttled, as partition:broker pairs
	// ("0:4,1:5"; the KIP writes "[0:4]") or "*" for all of them.
	ThrottledReplicasKey = "mirror.replication.throttled.replicas"
)

// Replica is one partition:broker pair of ThrottledReplicasKey.
type Replica struct {
	Partition int32
	Broker    int32
}

// ParseThrottledRate reads a ThrottledRateKey value: a non-negative
// integer of bytes per second.
func ParseThrottledRate(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a rate: expected bytes per second, a whole number of 0 or more (0 is no limit)", ThrottledRateKey, v)
	}
	return n, nil
}

// ParseThrottledReplicas reads a ThrottledReplicasKey value: "*" (all is
// true), or comma-separated partition:broker pairs, optionally in square
// brackets as the KIP writes them ("[0:4,1:4]"). Duplicates are dropped;
// the pairs come back sorted.
func ParseThrottledReplicas(v string) (all bool, replicas []Replica, err error) {
	s := strings.TrimSpace(v)
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); !ok {
			return false, nil, fmt.Errorf("%s=%q has an unclosed '['", ThrottledReplicasKey, v)
		}
		s = strings.TrimSpace(inner)
	}
	if s == "*" {
		return true, nil, nil
	}
	bad := func(entry string) error {
		return fmt.Errorf("%s=%q: entry %q is not partition:broker; expected pairs such as 0:4,1:5 or * for every replica", ThrottledReplicasKey, v, entry)
	}
	if s == "" {
		return false, nil, bad("")
	}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		ps, bs, ok := strings.Cut(e, ":")
		if !ok {
			return false, nil, bad(e)
		}
		p, perr := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		b, berr := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
		if perr != nil || berr != nil || p < 0 || b < 0 {
			return false, nil, bad(e)
		}
		r := Replica{Partition: int32(p), Broker: int32(b)}
		if !slices.Contains(replicas, r) {
			replicas = append(replicas, r)
		}
	}
	slices.SortFunc(replicas, func(a, b Replica) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Broker - b.Broker)
	})
	return false, replicas, nil
}

// AlterBrokerConfig sets and deletes dynamic configs of one destination
// broker (kafka-configs.sh --entity-type brokers --entity-name <id>). The
// only key is ThrottledRateKey. Deleting a key that is not set is no
// error, as in Kafka.
type AlterBrokerConfig struct {
	Broker int32             `json:"broker"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// Type implements Command.
func (AlterBrokerConfig) Type() CommandType { return CmdAlterBrokerConfig }

// AlterTopicConfig sets and deletes the sidecars' configs of one
// destination topic (kafka-configs.sh --entity-type topics --entity-name
// <topic>). The only key is ThrottledReplicasKey. The topic need not be a
// mirror topic yet: the config may be set before the topic is started,
// and it stays until deleted. Deleting a key that is not set is no error.
type AlterTopicConfig struct {
	Topic  string            `json:"topic"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// Type implements Command.
func (AlterTopicConfig) Type() CommandType { return CmdAlterTopicConfig }

// brokerConfigProblem describes what is wrong with a broker config entry,
// or returns "".
func brokerConfigProblem(k, v string) string {
	if k != ThrottledRateKey {
		return fmt.Sprintf("broker config %s is not kept by the sidecars; they keep only %s (set other broker configs on the brokers)", k, ThrottledRateKey)
	}
	if _, err := ParseThrottledRate(v); err != nil {
		return err.Error()
	}
	return ""
}

// topicConfigProblem describes what is wrong with a topic config entry,
// or returns "".
func topicConfigProblem(k, v string) string {
	if k != ThrottledReplicasKey {
		return fmt.Sprintf("topic config %s is not kept by the sidecars; they keep only %s (set other topic configs on the brokers)", k, ThrottledReplicasKey)
	}
	if _, _, err := ParseThrottledReplicas(v); err != nil {
		return err.Error()
	}
	return ""
}

// alterConfigs applies set and del to a copy of cur after checking every
// entry set with problem and that every key deleted is key (the only key
// of the resource); nil when nothing is left.
func alterConfigs(cur map[string]string, set map[string]string, del []string, key string, problem func(k, v string) string) (map[string]string, string) {
	if len(set) == 0 && len(del) == 0 {
		return nil, "the command sets and deletes no config key"
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if p := problem(k, set[k]); p != "" {
			return nil, p
		}
		if slices.Contains(del, k) {
			return nil, fmt.Sprintf("config key %s is both set and deleted in one request; do one or the other", k)
		}
	}
	for _, k := range del {
		if k != key {
			return nil, problem(k, "")
		}
	}
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range set {
		out[k] = strings.TrimSpace(v)
	}
	for _, k := range del {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil, ""
	}
	return out, ""
}

func (c AlterBrokerConfig) apply(s *State) Result {
	if c.Broker < 0 {
		return fail(codeInvalidRequest, "broker ID %d is negative", c.Broker)
	}
	cfg, p := alterConfigs(s.BrokerConfigs[c.Broker], c.Set, c.Delete, ThrottledRateKey, brokerConfigProblem)
	if p != "" {
		return fail(codeInvalidConfig, "broker %d: %s", c.Broker, p)
	}
	if cfg == nil {
		delete(s.BrokerConfigs, c.Broker)
		if len(s.BrokerConfigs) == 0 {
			s.BrokerConfigs = nil
		}
		return Result{}
	}
	if s.BrokerConfigs == nil {
		s.BrokerConfigs = map[int32]map[string]string{}
	}
	s.BrokerConfigs[c.Broker] = cfg
	return Result{}
}

func (c AlterTopicConfig) apply(s *State) Result {
	if p := nameProblem("topic", c.Topic); p != "" {
		return fail(codeInvalidTopic, "%s", p)
	}
	cfg, p := alterConfigs(s.TopicConfigs[c.Topic], c.Set, c.Delete, ThrottledReplicasKey, topicConfigProblem)
	if p != "" {
		return fail(codeInvalidConfig, "topic %s: %s", c.Topic, p)
	}
	if cfg == nil {
		delete(s.TopicConfigs, c.Topic)
		if len(s.TopicConfigs) == 0 {
			s.TopicConfigs = nil
		}
		return Result{}
	}
	if s.TopicConfigs == nil {
		s.TopicConfigs = map[string]map[string]string{}
	}
	s.TopicConfigs[c.Topic] = cfg
	return Result{}
}

// ThrottledRate returns the dynamic ThrottledRateKey of a broker, and
// whether it is set.
func (s *State) ThrottledRate(broker int32) (int64, bool) {
	v, ok := s.BrokerConfigs[broker][ThrottledRateKey]
	if !ok {
		return 0, false
	}
	n, err := ParseThrottledRate(v)
	return n, err == nil
}

// validateConfigs checks the broker and topic configs of a state.
func (s *State) validateConfigs() error {
	for _, b := range slices.Sorted(maps.Keys(s.BrokerConfigs)) {
		cfg := s.BrokerConfigs[b]
		if b < 0 || len(cfg) == 0 {
			return fmt.Errorf("%w: broker configs of broker %d: negative ID or empty entry", ErrInvalidState, b)
		}
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			if p := brokerConfigProblem(k, cfg[k]); p != "" {
				return fmt.Errorf("%w: broker %d: %s", ErrInvalidState, b, p)
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(s.TopicConfigs)) {
		cfg := s.TopicConfigs[t]
		if p := nameProblem("topic", t); p != "" || len(cfg) == 0 {
			return fmt.Errorf("%w: topic configs of %q: bad name or empty entry", ErrInvalidState, t)
		}
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			if p := topicConfigProblem(k, cfg[k]); p != "" {
				return fmt.Errorf("%w: topic %s: %s", ErrInvalidState, t, p)
			}
		}
	}
	return nil
}

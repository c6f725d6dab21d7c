package coordinator

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
)

// Keys of a mirror's own settings; every other key of a mirror config is a
// Kafka client property for the source cluster, checked by the SourceDialer.
const (
	// ReadOnlyEnforcementKey is mirror.readonly.enforcement: "acl" (the
	// default: DENY WRITE ACLs, DESIGN D4) or "none" (no protection).
	ReadOnlyEnforcementKey = "mirror.readonly.enforcement"
	// ReplicationFactorKey is mirror.topic.replication.factor: the
	// replication factor of created mirror topics; -1 (the default) takes the
	// destination's default.replication.factor.
	ReplicationFactorKey = "mirror.topic.replication.factor"
	// RefreshIntervalKey is mirror.metadata.refresh.interval.ms: how often
	// metadata is synchronised and new topics discovered (default 30000).
	RefreshIntervalKey = "mirror.metadata.refresh.interval.ms"
	// TransactionTimeoutKey is mirror.transaction.timeout.ms: the timeout
	// of the destination transactions that replay source transactions
	// (default 900000, Kafka's default transaction.max.timeout.ms). The
	// destination brokers' transaction.max.timeout.ms must allow it.
	TransactionTimeoutKey = "mirror.transaction.timeout.ms"
	// CoalesceBatchesKey is mirror.coalesce.batches: true (the default)
	// appends runs of small source batches as one destination batch (same
	// records and offsets, other batch boundaries); false keeps the source's
	// batches byte for byte (fetcher.MirrorSettings.KeepBatchBoundaries).
	CoalesceBatchesKey = "mirror.coalesce.batches"
)

// mirrorKeys describes the mirror.* keys: default and a check of the value.
var mirrorKeys = map[string]struct {
	def   string
	check func(string) error
}{
	ReadOnlyEnforcementKey: {"acl", func(v string) error {
		if v != "acl" && v != "none" {
			return fmt.Errorf("%q is not supported (expected acl or none)", v)
		}
		return nil
	}},
	ReplicationFactorKey: {"-1", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || n < -1 || n > 32767 {
			return fmt.Errorf("%q is not a replication factor (expected -1 for the destination's default, or 1 to 32767)", v)
		}
		return nil
	}},
	RefreshIntervalKey: {"30000", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1000 {
			return fmt.Errorf("%q is not an interval in milliseconds >= 1000", v)
		}
		return nil
	}},
	fsm.OffsetsKey: {fsm.DefaultOffsets, func(v string) error {
		if v != "exact" && v != "translate" {
			return fmt.Errorf("%q is not supported (expected exact or translate)", v)
		}
		return nil
	}},
	TransactionTimeoutKey: {"900000", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1000 {
			return fmt.Errorf("%q is not a timeout in milliseconds from 1000 to 2147483647", v)
		}
		return nil
	}},
	CoalesceBatchesKey: {"true", func(v string) error {
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not supported (expected true or false)", v)
		}
		return nil
	}},
	RetryBackoffKey: {"100", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 3_600_000 {
			return fmt.Errorf("%q is not a backoff in milliseconds from 1 to 3600000", v)
		}
		return nil
	}},
	RetryBackoffMaxKey: {"300000", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 86_400_000 {
			return fmt.Errorf("%q is not a backoff in milliseconds from 1 to 86400000", v)
		}
		return nil
	}},
	RetryMaxAttemptsKey: {"20", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 32767 {
			return fmt.Errorf("%q is not a number of retries from 0 to 32767", v)
		}
		return nil
	}},
	ConfigSyncExcludeKey: {"", func(string) error { return nil }},
	GroupsIncludeKey:     {".*", func(v string) error { _, err := compilePatterns(SplitPatterns(v)); return err }},
	GroupsExcludeKey:     {"", func(v string) error { _, err := compilePatterns(SplitPatterns(v)); return err }},
	fsm.IncludeKey:       {"", func(v string) error { _, err := compilePatterns(SplitPatterns(v)); return err }},
	fsm.ExcludeKey:       {"", func(v string) error { _, err := compilePatterns(SplitPatterns(v)); return err }},
}

// fetchKeys are the Kafka consumer properties of a mirror config that set
// the mirror fetcher's Fetch requests (fetcher.MirrorSettings); they are not
// passed to the SourceDialer. The defaults are the fetcher's.
var fetchKeys = map[string]struct {
	def      string
	min, max int64
}{
	"fetch.max.bytes":           {"52428800", 1, math.MaxInt32},
	"fetch.min.bytes":           {"1", 1, math.MaxInt32},
	"fetch.max.wait.ms":         {"500", 1, 60_000},
	"max.partition.fetch.bytes": {"1048576", 1, math.MaxInt32},
}

// RackKey is the consumer property client.rack: the rack (availability
// zone) the mirror fetcher sends in its Fetch requests, so that source
// brokers with a rack-aware replica selector let it fetch from a follower
// in that rack (KIP-392, fetcher.MirrorSettings.ClientRack). It sets the
// data plane, not the SourceDialer.
const RackKey = "client.rack"

// consumerOnlyKeys are Kafka consumer properties that have no meaning for
// the mirror fetcher, which reads every record (read_uncommitted) at
// offsets it tracks itself, in no consumer group. They
// are refused by name with this reason rather than as unknown keys.
var consumerOnlyKeys = map[string]string{
	"group.id":                      "the mirror fetcher is in no consumer group (consumer group offsets are synced by the metadata sync: mirror.groups.include)",
	"group.instance.id":             "the mirror fetcher is in no consumer group",
	"group.protocol":                "the mirror fetcher is in no consumer group",
	"group.remote.assignor":         "the mirror fetcher is in no consumer group",
	"partition.assignment.strategy": "the mirror fetcher is in no consumer group: the sidecars assign partitions by destination leadership",
	"session.timeout.ms":            "the mirror fetcher is in no consumer group",
	"heartbeat.interval.ms":         "the mirror fetcher is in no consumer group",
	"max.poll.interval.ms":          "the mirror fetcher is in no consumer group",
	"max.poll.records":              "the mirror fetcher appends whole batches, not polled records",
	"enable.auto.commit":            "the mirror fetcher commits no offsets: it resumes from the destination's log end offset",
	"auto.commit.interval.ms":       "the mirror fetcher commits no offsets: it resumes from the destination's log end offset",
	"auto.offset.reset":             "the mirror fetcher always starts at the source's log start offset and resumes from the destination's log end offset",
	"isolation.level":               "the mirror fetcher reads read_uncommitted so that the destination gets the source's transactions and markers at the same offsets",
	"key.deserializer":              "the mirror fetcher copies record batches as they are, without deserializing",
	"value.deserializer":            "the mirror fetcher copies record batches as they are, without deserializing",
	"interceptor.classes":           "the mirror fetcher runs no Java plugins",
	"metric.reporters":              "the sidecar exports its metrics on http.listener (/metrics)",
	"check.crcs":                    "the mirror fetcher always checks batch CRCs",
	"exclude.internal.topics":       "internal topics are never mirrored",
	"allow.auto.create.topics":      "the mirror fetcher never creates source topics",
}

// checkConsumerKeys checks the fetch keys of a mirror config and refuses
// the consumer properties that make no sense for a mirror, by name.
func checkConsumerKeys(config map[string]string) error {
	for _, k := range sortedKeys(config) {
		if why, ok := consumerOnlyKeys[k]; ok {
			return fmt.Errorf("mirror config %s is not supported: %s; remove it", k, why)
		}
		spec, ok := fetchKeys[k]
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(config[k]), 10, 64); err != nil || n < spec.min || n > spec.max {
			return fmt.Errorf("mirror config %s: %q is not an integer from %d to %d", k, config[k], spec.min, spec.max)
		}
	}
	return nil
}

// checkMirrorKeys validates the mirror.* keys of a mirror config and refuses
// unknown ones, and checks the consumer properties (checkConsumerKeys).
func checkMirrorKeys(config map[string]string) error {
	if err := checkConsumerKeys(config); err != nil {
		return err
	}
	for _, k := range sortedKeys(config) {
		if !strings.HasPrefix(k, "mirror.") {
			continue
		}
		spec, ok := mirrorKeys[k]
		if !ok {
			return fmt.Errorf("unknown mirror config key %q (known: %s)", k, strings.Join(sortedKeys(mirrorKeys), ", "))
		}
		if err := spec.check(config[k]); err != nil {
			return fmt.Errorf("mirror config %s: %v", k, err)
		}
	}
	return checkRetryKeys(config)
}

// mirrorSetting returns a mirror.* setting or its default.
func mirrorSetting(m *fsm.Mirror, key string) string {
	if v, ok := m.Config[key]; ok {
		return v
	}
	return mirrorKeys[key].def
}

// SplitPatterns splits a comma-separated pattern list, dropping blanks.
func SplitPatterns(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// dataPlaneSettings returns the mirror's settings of the data plane; st
// gives the source topic IDs of its topics.
func dataPlaneSettings(st *fsm.State, m *fsm.Mirror) fetcher.MirrorSettings {
	ms, _ := strconv.ParseInt(mirrorSetting(m, TransactionTimeoutKey), 10, 64)
	out := fetcher.MirrorSettings{TransactionTimeout: time.Duration(ms) * time.Millisecond, SourceClusterID: m.SourceClusterID,
		TranslateOffsets:    mirrorSetting(m, fsm.OffsetsKey) == "translate",
		KeepBatchBoundaries: mirrorSetting(m, CoalesceBatchesKey) == "false"}
	fetchSize := func(k string) int32 {
		n, err := strconv.ParseInt(strings.TrimSpace(m.Config[k]), 10, 32)
		if err != nil || n < 0 {
			return 0 // unset (or refused by checkConsumerKeys): the fetcher's
		}
		return int32(n)
	}
	out.FetchMaxBytes, out.FetchMinBytes = fetchSize("fetch.max.bytes"), fetchSize("fetch.min.bytes")
	out.FetchMaxWait = time.Duration(fetchSize("fetch.max.wait.ms")) * time.Millisecond
	out.PartitionMaxBytes = fetchSize("max.partition.fetch.bytes")
	out.ClientRack = strings.TrimSpace(m.Config[RackKey])
	// A preferred read replica is kept for at most metadata.max.age.ms, as
	// Kafka's consumer does (the SourceDialer checks the value).
	if ms, err := strconv.ParseInt(strings.TrimSpace(m.Config["metadata.max.age.ms"]), 10, 64); err == nil && ms > 0 {
		out.PreferredReplicaMaxAge = time.Duration(ms) * time.Millisecond
	}
	for _, t := range st.TopicsOf(m.Name) {
		if t.SourceTopicID != ([16]byte{}) && t.Status != fsm.TopicStopped {
			if out.TopicIDs == nil {
				out.TopicIDs = map[string][16]byte{}
			}
			out.TopicIDs[t.Name] = t.SourceTopicID
		}
	}
	return out
}

// sourceConfig returns the part of a mirror config that the SourceDialer
// gets: everything but the mirror.* keys, the fetch sizes (fetchKeys) and
// client.rack (RackKey).
func sourceConfig(config map[string]string) map[string]string {
	out := make(map[string]string, len(config))
	for k, v := range config {
		if _, fetch := fetchKeys[k]; !strings.HasPrefix(k, "mirror.") && !fetch && k != RackKey {
			out[k] = v
		}
	}
	return out
}

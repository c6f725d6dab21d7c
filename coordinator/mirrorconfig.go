package coordinator

import (
	"fmt"
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

// checkMirrorKeys validates the mirror.* keys of a mirror config and refuses
// unknown ones.
func checkMirrorKeys(config map[string]string) error {
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
		TranslateOffsets: mirrorSetting(m, fsm.OffsetsKey) == "translate"}
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
// gets: everything but the mirror.* keys.
func sourceConfig(config map[string]string) map[string]string {
	out := make(map[string]string, len(config))
	for k, v := range config {
		if !strings.HasPrefix(k, "mirror.") {
			out[k] = v
		}
	}
	return out
}

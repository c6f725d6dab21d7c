package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/internal/partstate"
)

// State is the replicated controller state: what the FSM holds. Readers get
// it through FSM.Read and must not modify it or keep references to it past
// the callback; Clone gives a copy to keep.
type State struct {
	Mirrors  map[string]*Mirror      `json:"mirrors"`  // by mirror name
	Topics   map[string]*MirrorTopic `json:"topics"`   // by destination topic name (= source topic name)
	Sidecars map[int32]*SidecarInfo  `json:"sidecars"` // the raft members' addresses, by broker ID
	// MovedPartitions holds the original replica order of every destination
	// partition whose leadership the raft leader moved away from a broker
	// with a dead sidecar (DESIGN D7), by topic and partition, so that it
	// can be restored when the sidecar is back. Entries outlive their
	// mirror topic (a topic stopped or deleted meanwhile is still restored).
	// nil when empty; omitted from snapshots then.
	MovedPartitions map[string]map[int32][]int32 `json:"movedPartitions,omitempty"`
	// AdminACLs are the ACLs of the admin endpoint (DESIGN D15): bindings
	// on KIP-1279's CLUSTER_MIRROR resources and on the CLUSTER (raft
	// membership), in the order they were created, without duplicates. nil
	// when empty; omitted from snapshots then.
	AdminACLs []acl.Binding `json:"adminAcls,omitempty"`
	// BrokerConfigs are the dynamic broker configs the sidecars keep
	// (mirror.replication.throttled.rate, throttle.go), by broker ID, and
	// TopicConfigs their topic configs
	// (mirror.replication.throttled.replicas), by topic name. nil when
	// empty; omitted from snapshots then.
	BrokerConfigs map[int32]map[string]string  `json:"brokerConfigs,omitempty"`
	TopicConfigs  map[string]map[string]string `json:"topicConfigs,omitempty"`
}

// Mirror is one cluster mirror (KIP-1279 §1.1).
type Mirror struct {
	Name string `json:"name"`
	// Config holds the source connection settings (bootstrap.servers,
	// security.protocol, sasl.*, ssl.*) and mirror.* keys. Values may be
	// secrets: redact them in every output.
	Config map[string]string `json:"config"`
	// SourceClusterID is "" until the first metadata sync resolves it.
	SourceClusterID string `json:"sourceClusterId"`
	// Include and Exclude are the mirror.topics.include/exclude patterns.
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
	// CreatedMs and UpdatedMs are the proposers' clocks at creation and at
	// the last config change; UpdatedMs tells watchers to reconnect.
	CreatedMs int64 `json:"createdMs"`
	UpdatedMs int64 `json:"updatedMs"`
	// SyncFault is set while the source reports another cluster ID than
	// SourceClusterID (DESIGN D10): fetching and metadata sync halt for the
	// mirror until the ID returns.
	SyncFault string `json:"syncFault,omitempty"`
	// SyncedACLs are the destination ACLs the metadata sync created (copies
	// of source ACLs), so it removes only those.
	SyncedACLs []ACL `json:"syncedAcls,omitempty"`
}

// TopicStatus is the state a mirror topic is assigned by the operator, as
// carried by the mirror.name topic config (KIP-1279 §1.2). The partition
// states of D12 (LOG_TRUNCATION, MIRRORING, FAILED...) live in
// __mirror_state, not here.
type TopicStatus int8

// Topic statuses. The zero value is not a valid status.
const (
	TopicActive  TopicStatus = 1 // mirror.name=<mirror>: mirrored, read-only
	TopicPaused  TopicStatus = 2 // mirror.name=<mirror>.paused: no fetching, still read-only
	TopicStopped TopicStatus = 3 // mirror.name=<mirror>.stopped: detached (failed over), writable
)

// String returns "active", "paused" or "stopped": the suffix of mirror.name
// without its dot ("active" has no suffix).
func (s TopicStatus) String() string {
	switch s {
	case TopicActive:
		return "active"
	case TopicPaused:
		return "paused"
	case TopicStopped:
		return "stopped"
	default:
		return fmt.Sprintf("TopicStatus(%d)", int8(s))
	}
}

// Valid reports whether s is one of the defined statuses.
func (s TopicStatus) Valid() bool { return s >= TopicActive && s <= TopicStopped }

// Suffix returns the suffix s appends to the mirror name in the mirror.name
// topic config: "", ".paused" or ".stopped".
func (s TopicStatus) Suffix() string {
	switch s {
	case TopicPaused:
		return PausedSuffix
	case TopicStopped:
		return StoppedSuffix
	default:
		return ""
	}
}

// Resting returns the partition state (partstate) that the partitions of a
// topic in status s rest in: MIRRORING for an active topic, PAUSED,
// STOPPED. The operator events are checked against it.
func (s TopicStatus) Resting() partstate.State {
	switch s {
	case TopicPaused:
		return partstate.Paused
	case TopicStopped:
		return partstate.Stopped
	default:
		return partstate.Mirroring
	}
}

// Event returns the operator event that sets status s: resume, pause or
// stop.
func (s TopicStatus) Event() partstate.Event {
	switch s {
	case TopicPaused:
		return partstate.Pause
	case TopicStopped:
		return partstate.Stop
	default:
		return partstate.Resume
	}
}

// MirrorNameValue returns the value of the mirror.name topic config for a
// topic of mirror in status s, e.g. "my-mirror.paused".
func (s TopicStatus) MirrorNameValue(mirror string) string { return mirror + s.Suffix() }

// ParseMirrorNameValue splits a mirror.name topic config value into the
// mirror name and the status its suffix encodes.
func ParseMirrorNameValue(v string) (mirror string, status TopicStatus) {
	if m, ok := strings.CutSuffix(v, StoppedSuffix); ok {
		return m, TopicStopped
	}
	if m, ok := strings.CutSuffix(v, PausedSuffix); ok {
		return m, TopicPaused
	}
	return v, TopicActive
}

// MirrorTopic is a topic assigned to a mirror.
type MirrorTopic struct {
	Name          string      `json:"name"`
	Mirror        string      `json:"mirror"`
	Partitions    int32       `json:"partitions"`
	SourceTopicID [16]byte    `json:"sourceTopicId"`
	Status        TopicStatus `json:"status"`
	StartedMs     int64       `json:"startedMs"` // last start (or restart)
	UpdatedMs     int64       `json:"updatedMs"` // last status change
	// OwnedACLs are the ACLs the sidecars created for read-only enforcement
	// (DESIGN D4), so they are never confused with a user's.
	OwnedACLs []ACL `json:"ownedAcls"`
	// Unprotected is set when the topic is mirrored without read-only
	// enforcement (mirror.readonly.enforcement=none).
	Unprotected bool `json:"unprotected"`
	// RestartGen counts operator restarts (--start) of the active topic;
	// sidecars restart its FAILED partitions when it grows.
	RestartGen int64 `json:"restartGen,omitempty"`
	// SyncFault is set when the metadata sync found the source topic
	// recreated (another topic ID): its partitions are no longer driven.
	SyncFault string `json:"syncFault,omitempty"`
	// Diverged lists the partitions whose destination log holds records
	// the source does not have (failback, DESIGN D9). While it is set no
	// partition of the topic is driven (stock Kafka cannot truncate a log;
	// re-seeding re-creates the whole topic) and describe shows them FAILED.
	Diverged []Divergence `json:"diverged,omitempty"`
}

// Divergence is where a destination partition parts from the source's: the
// destination holds Extra records from Offset on that the source does not
// have. Exact is false when the check stopped walking back early: the logs
// part at or before Offset.
type Divergence struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	Extra     int64 `json:"extra"`
	Exact     bool  `json:"exact"`
}

func (d Divergence) String() string {
	at := "at"
	if !d.Exact {
		at = "at or before"
	}
	return fmt.Sprintf("partition %d diverged %s offset %d: this cluster has %d records from there on that the source does not have",
		d.Partition, at, d.Offset, d.Extra)
}

// ACL is one Kafka ACL binding, with the int8 codes of the Kafka protocol.
type ACL struct {
	ResourceType int8   `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  int8   `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

// SidecarInfo is what a sidecar registers about itself.
type SidecarInfo struct {
	ID        int32  `json:"id"`
	RaftAddr  string `json:"raftAddr"`
	AdminAddr string `json:"adminAddr"`
	Version   string `json:"version"`
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		Mirrors:  map[string]*Mirror{},
		Topics:   map[string]*MirrorTopic{},
		Sidecars: map[int32]*SidecarInfo{},
	}
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	c := &State{
		Mirrors:  make(map[string]*Mirror, len(s.Mirrors)),
		Topics:   make(map[string]*MirrorTopic, len(s.Topics)),
		Sidecars: make(map[int32]*SidecarInfo, len(s.Sidecars)),
	}
	for k, m := range s.Mirrors {
		c.Mirrors[k] = m.Clone()
	}
	for k, t := range s.Topics {
		c.Topics[k] = t.Clone()
	}
	for k, sc := range s.Sidecars {
		if sc != nil {
			cp := *sc
			sc = &cp
		}
		c.Sidecars[k] = sc
	}
	if s.MovedPartitions != nil {
		c.MovedPartitions = make(map[string]map[int32][]int32, len(s.MovedPartitions))
		for topic, parts := range s.MovedPartitions {
			cp := make(map[int32][]int32, len(parts))
			for p, replicas := range parts {
				cp[p] = slices.Clone(replicas)
			}
			c.MovedPartitions[topic] = cp
		}
	}
	c.AdminACLs = slices.Clone(s.AdminACLs)
	if s.BrokerConfigs != nil {
		c.BrokerConfigs = make(map[int32]map[string]string, len(s.BrokerConfigs))
		for b, cfg := range s.BrokerConfigs {
			c.BrokerConfigs[b] = maps.Clone(cfg)
		}
	}
	if s.TopicConfigs != nil {
		c.TopicConfigs = make(map[string]map[string]string, len(s.TopicConfigs))
		for t, cfg := range s.TopicConfigs {
			c.TopicConfigs[t] = maps.Clone(cfg)
		}
	}
	return c
}

// MovedReplicas returns the original replica order recorded for a moved
// partition, and whether there is one. The slice belongs to the state.
func (s *State) MovedReplicas(topic string, partition int32) ([]int32, bool) {
	r, ok := s.MovedPartitions[topic][partition]
	return r, ok
}

// offsets returns the mirror's mirror.offsets setting, DefaultOffsets when
// it is not set.
func (m *Mirror) offsets() string {
	if v, ok := m.Config[OffsetsKey]; ok {
		return v
	}
	return DefaultOffsets
}

// Clone returns a deep copy of m (nil for nil).
func (m *Mirror) Clone() *Mirror {
	if m == nil {
		return nil
	}
	c := *m
	c.Config = maps.Clone(m.Config)
	c.Include = slices.Clone(m.Include)
	c.Exclude = slices.Clone(m.Exclude)
	c.SyncedACLs = slices.Clone(m.SyncedACLs)
	return &c
}

// Clone returns a deep copy of t (nil for nil).
func (t *MirrorTopic) Clone() *MirrorTopic {
	if t == nil {
		return nil
	}
	c := *t
	c.OwnedACLs = slices.Clone(t.OwnedACLs)
	c.Diverged = slices.Clone(t.Diverged)
	return &c
}

// TopicsOf returns the topics of a mirror, sorted by name.
func (s *State) TopicsOf(mirror string) []*MirrorTopic {
	var ts []*MirrorTopic
	for _, t := range s.Topics {
		if t.Mirror == mirror {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *MirrorTopic) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// MirrorNames returns the names of all mirrors, sorted.
func (s *State) MirrorNames() []string {
	return slices.Sorted(maps.Keys(s.Mirrors))
}

// Validate checks the invariants every state reached by applying commands
// keeps: no nil entries, keys equal to names and IDs, legal mirror names,
// bootstrap.servers set, every topic assigned to an existing mirror with a
// valid status and at least one partition. The error matches
// ErrInvalidState and names the first broken invariant (in sorted key
// order).
func (s *State) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: state is nil", ErrInvalidState)
	}
	if s.Mirrors == nil || s.Topics == nil || s.Sidecars == nil {
		return fmt.Errorf("%w: a map of mirrors, topics or sidecars is missing", ErrInvalidState)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Mirrors)) {
		m := s.Mirrors[name]
		switch {
		case m == nil:
			return fmt.Errorf("%w: mirror %q has no entry", ErrInvalidState, name)
		case m.Name != name:
			return fmt.Errorf("%w: mirror %q is stored under the key %q", ErrInvalidState, m.Name, name)
		case strings.TrimSpace(m.Config[BootstrapServersKey]) == "":
			return fmt.Errorf("%w: mirror %q has no %s", ErrInvalidState, name, BootstrapServersKey)
		}
		if err := ValidateMirrorName(name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidState, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Topics)) {
		t := s.Topics[name]
		switch {
		case t == nil:
			return fmt.Errorf("%w: topic %q has no entry", ErrInvalidState, name)
		case t.Name != name:
			return fmt.Errorf("%w: topic %q is stored under the key %q", ErrInvalidState, t.Name, name)
		case s.Mirrors[t.Mirror] == nil:
			return fmt.Errorf("%w: topic %q belongs to the unknown mirror %q", ErrInvalidState, name, t.Mirror)
		case !t.Status.Valid():
			return fmt.Errorf("%w: topic %q has the invalid status %d", ErrInvalidState, name, t.Status)
		case t.Partitions < 1:
			return fmt.Errorf("%w: topic %q has %d partitions", ErrInvalidState, name, t.Partitions)
		}
		if err := ValidateTopicName(name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidState, err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Sidecars)) {
		sc := s.Sidecars[id]
		switch {
		case sc == nil:
			return fmt.Errorf("%w: sidecar %d has no entry", ErrInvalidState, id)
		case sc.ID != id:
			return fmt.Errorf("%w: sidecar %d is stored under the key %d", ErrInvalidState, sc.ID, id)
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(s.MovedPartitions)) {
		parts := s.MovedPartitions[topic]
		if len(parts) == 0 {
			return fmt.Errorf("%w: moved partitions of topic %q: empty entry", ErrInvalidState, topic)
		}
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			if problem := replicaOrderProblem(topic, p, parts[p]); problem != "" {
				return fmt.Errorf("%w: %s", ErrInvalidState, problem)
			}
		}
	}
	return s.validateConfigs()
}

// replicaOrderProblem describes what is wrong with a recorded replica
// order, or returns "".
func replicaOrderProblem(topic string, partition int32, replicas []int32) string {
	if p := nameProblem("topic", topic); p != "" {
		return p
	}
	if partition < 0 {
		return fmt.Sprintf("partition %d of topic %s is negative", partition, topic)
	}
	if len(replicas) == 0 {
		return fmt.Sprintf("the replica order of %s-%d is empty", topic, partition)
	}
	for i, r := range replicas {
		if r < 0 {
			return fmt.Sprintf("the replica order %v of %s-%d holds the negative broker ID %d", replicas, topic, partition, r)
		}
		if slices.Contains(replicas[:i], r) {
			return fmt.Sprintf("the replica order %v of %s-%d holds broker %d twice", replicas, topic, partition, r)
		}
	}
	return ""
}

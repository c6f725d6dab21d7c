package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sidemirror/sidemirror/internal/acl"
)

// CommandType is the first byte of an encoded command. Values are stable:
// they are in raft logs on disk. Never reuse or renumber one.
type CommandType uint8

// Command types.
const (
	CmdCreateMirror        CommandType = 1
	CmdDeleteMirror        CommandType = 2
	CmdAlterMirrorConfig   CommandType = 3
	CmdSetSourceClusterID  CommandType = 4
	CmdStartTopics         CommandType = 5
	CmdSetTopicStatus      CommandType = 6
	CmdRecordACLs          CommandType = 7
	CmdSetUnprotected      CommandType = 8
	CmdRegisterSidecar     CommandType = 9
	CmdRecordReplicaOrder  CommandType = 10
	CmdClearReplicaOrder   CommandType = 11
	CmdRemoveSidecar       CommandType = 12
	CmdAlterMirrorPatterns CommandType = 13
	CmdRestartTopics       CommandType = 14
	CmdSetTopicPartitions  CommandType = 15
	CmdSetSyncFault        CommandType = 16
	CmdRecordSyncedACLs    CommandType = 17
	CmdReadBarrier         CommandType = 18
	CmdSetDiverged         CommandType = 19
	CmdCreateAdminACLs     CommandType = 20
	CmdDeleteAdminACLs     CommandType = 21
	CmdAlterBrokerConfig   CommandType = 22
	CmdAlterTopicConfig    CommandType = 23
)

func (t CommandType) String() string {
	if c, ok := codecs[t]; ok {
		return c.name
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// Command is a state change of the FSM. Encode it with EncodeCommand and
// propose it with Node.Apply; the FSM decodes and applies it on every
// sidecar. A command carries everything Apply needs, the proposer's clock
// (NowMs) included, so that every sidecar reaches the same state.
type Command interface {
	// Type returns the command's type byte.
	Type() CommandType
	// apply validates the command against s and, if valid, applies it.
	// It must be deterministic and must not change s when it returns a
	// top-level error.
	apply(s *State) Result
}

// codec describes how one command type is encoded: the version
// EncodeCommand writes and a decoder for every version DecodeCommand reads.
// A change of a command's JSON body adds a version here; older versions
// stay decodable (converting to the newest struct) for as long as they can
// be in a raft log.
type codec struct {
	name    string
	current uint8
	decode  map[uint8]func(body []byte) (Command, error)
}

var codecs = map[CommandType]codec{
	CmdCreateMirror:        {"CreateMirror", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[CreateMirror]}},
	CmdDeleteMirror:        {"DeleteMirror", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[DeleteMirror]}},
	CmdAlterMirrorConfig:   {"AlterMirrorConfig", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[AlterMirrorConfig]}},
	CmdSetSourceClusterID:  {"SetSourceClusterID", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetSourceClusterID]}},
	CmdStartTopics:         {"StartTopics", 2, map[uint8]func([]byte) (Command, error){1: decodeBody[StartTopics], 2: decodeBody[StartTopics]}}, // v2 added StartTopic.Diverged; a v1 body is a v2 body without it
	CmdSetTopicStatus:      {"SetTopicStatus", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetTopicStatus]}},
	CmdRecordACLs:          {"RecordACLs", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RecordACLs]}},
	CmdSetUnprotected:      {"SetUnprotected", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetUnprotected]}},
	CmdRegisterSidecar:     {"RegisterSidecar", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RegisterSidecar]}},
	CmdRecordReplicaOrder:  {"RecordReplicaOrder", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RecordReplicaOrder]}},
	CmdClearReplicaOrder:   {"ClearReplicaOrder", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[ClearReplicaOrder]}},
	CmdRemoveSidecar:       {"RemoveSidecar", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RemoveSidecar]}},
	CmdAlterMirrorPatterns: {"AlterMirrorPatterns", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[AlterMirrorPatterns]}},
	CmdRestartTopics:       {"RestartTopics", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RestartTopics]}},
	CmdSetTopicPartitions:  {"SetTopicPartitions", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetTopicPartitions]}},
	CmdSetSyncFault:        {"SetSyncFault", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetSyncFault]}},
	CmdRecordSyncedACLs:    {"RecordSyncedACLs", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[RecordSyncedACLs]}},
	CmdReadBarrier:         {"ReadBarrier", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[ReadBarrier]}},
	CmdSetDiverged:         {"SetDiverged", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[SetDiverged]}},
	CmdCreateAdminACLs:     {"CreateAdminACLs", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[CreateAdminACLs]}},
	CmdDeleteAdminACLs:     {"DeleteAdminACLs", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[DeleteAdminACLs]}},
	CmdAlterBrokerConfig:   {"AlterBrokerConfig", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[AlterBrokerConfig]}},
	CmdAlterTopicConfig:    {"AlterTopicConfig", 1, map[uint8]func([]byte) (Command, error){1: decodeBody[AlterTopicConfig]}},
}

// EncodeCommand encodes c: byte 0 is the command type, byte 1 the command
// version, then the JSON body.
func EncodeCommand(c Command) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil command", ErrMalformedCommand)
	}
	cd, ok := codecs[c.Type()]
	if !ok {
		return nil, fmt.Errorf("%w: command type %d", ErrUnknownCommand, c.Type())
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s: %w", ErrMalformedCommand, cd.name, err)
	}
	return append([]byte{byte(c.Type()), cd.current}, body...), nil
}

// DecodeCommand decodes a command encoded by EncodeCommand, of any version
// this sidecar knows. The body must be a single JSON object with no unknown
// fields: a field added to a command is a new version. Errors match
// ErrMalformedCommand or ErrUnknownCommand.
func DecodeCommand(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, a command has at least a type and a version byte", ErrMalformedCommand, len(b))
	}
	t, v := CommandType(b[0]), b[1]
	cd, ok := codecs[t]
	if !ok {
		return nil, fmt.Errorf("%w: command type %d; a newer sidecar may have proposed it, run the same sidemirror version on every sidecar",
			ErrUnknownCommand, b[0])
	}
	decode, ok := cd.decode[v]
	if !ok {
		return nil, fmt.Errorf("%w: version %d of %s (this sidecar knows up to version %d); run the same sidemirror version on every sidecar",
			ErrUnknownCommand, v, cd.name, cd.current)
	}
	c, err := decode(b[2:])
	if err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %w", ErrMalformedCommand, cd.name, v, err)
	}
	return c, nil
}

func decodeBody[T Command](body []byte) (Command, error) {
	var c T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON body")
	}
	return c, nil
}

// Result is the outcome of one command: a top-level Kafka error code (0 for
// success) with an operator-facing message and, for commands on several
// topics, one result per topic in request order. A command with a
// top-level error changed nothing; per-topic errors leave those topics
// unchanged while the others are applied.
type Result struct {
	ErrorCode    int16         `json:"errorCode"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
	Topics       []TopicResult `json:"topics,omitempty"`
	// Index is the raft log index the command was applied at, 0 if it was
	// not applied through raft. A follower that forwarded the command waits
	// until its own FSM reached Index, so that it reads its own writes.
	Index uint64 `json:"index,omitempty"`
	// DeletedACLs holds, for DeleteAdminACLs, the bindings each filter
	// deleted, in filter order.
	DeletedACLs [][]acl.Binding `json:"deletedAcls,omitempty"`
}

// TopicResult is the outcome of a command for one topic.
type TopicResult struct {
	Name         string `json:"name"`
	ErrorCode    int16  `json:"errorCode"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

func fail(code int16, format string, args ...any) Result {
	return Result{ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...)}
}

func topicFail(name string, code int16, format string, args ...any) TopicResult {
	return TopicResult{Name: name, ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...)}
}

// Mirror config keys with a meaning to the FSM.
const (
	BootstrapServersKey = "bootstrap.servers"
	// IncludeKey and ExcludeKey are the KIP's names of the pattern lists,
	// kept in Mirror.Include and Mirror.Exclude, never in Mirror.Config.
	IncludeKey = "mirror.topics.include"
	ExcludeKey = "mirror.topics.exclude"
	// OffsetsKey is mirror.offsets: "exact" (DefaultOffsets: destination
	// offsets are the source's, compaction holes get fillers) or
	// "translate" (no fillers; an offset map translates group offsets),
	// DESIGN D2. It cannot change once the mirror has topics.
	OffsetsKey     = "mirror.offsets"
	DefaultOffsets = "exact"
)

// CreateMirror creates a mirror (KIP-1279 §5.3).
type CreateMirror struct {
	Name            string            `json:"name"`
	Config          map[string]string `json:"config"`
	SourceClusterID string            `json:"sourceClusterId"`
	Include         []string          `json:"include"`
	Exclude         []string          `json:"exclude"`
	NowMs           int64             `json:"nowMs"`
}

// DeleteMirror deletes a mirror that has no topics or only stopped ones,
// and its stopped topics (KIP-1279 §5.8).
type DeleteMirror struct {
	Name string `json:"name"`
}

// AlterMirrorConfig sets and deletes config keys of a mirror.
type AlterMirrorConfig struct {
	Name   string            `json:"name"`
	Set    map[string]string `json:"set"`
	Delete []string          `json:"delete"`
	NowMs  int64             `json:"nowMs"`
}

// SetSourceClusterID records the cluster ID the source reported. Once set,
// it cannot change (DESIGN D10).
type SetSourceClusterID struct {
	Name      string `json:"name"`
	ClusterID string `json:"clusterId"`
}

// StartTopics assigns topics to a mirror as active (KIP-1279 §5.4) and adds
// include and exclude patterns. The proposer resolved the source metadata.
type StartTopics struct {
	Mirror     string       `json:"mirror"`
	Topics     []StartTopic `json:"topics"`
	AddInclude []string     `json:"addInclude"`
	AddExclude []string     `json:"addExclude"`
	NowMs      int64        `json:"nowMs"`
}

// StartTopic is one topic of StartTopics.
type StartTopic struct {
	Name          string   `json:"name"`
	Partitions    int32    `json:"partitions"`
	SourceTopicID [16]byte `json:"sourceTopicId"`
	Unprotected   bool     `json:"unprotected"`
	// Diverged (v2) starts the topic with these diverged partitions: it is
	// assigned to the mirror but not driven until re-seeded (DESIGN D9).
	Diverged []Divergence `json:"diverged,omitempty"`
}

// SetTopicStatus stops (TopicStopped), pauses (TopicPaused) or resumes
// (TopicActive) topics of a mirror (KIP-1279 §5.5-5.7, DESIGN D16) and
// updates the mirror's patterns: RemoveInclude removes entries equal to the
// given strings from the include list, AddExclude appends to the exclude
// list.
type SetTopicStatus struct {
	Mirror        string      `json:"mirror"`
	Topics        []string    `json:"topics"`
	Status        TopicStatus `json:"status"`
	NowMs         int64       `json:"nowMs"`
	AddExclude    []string    `json:"addExclude"`
	RemoveInclude []string    `json:"removeInclude"`
}

// RecordACLs replaces the ACLs the sidecars own for a topic.
type RecordACLs struct {
	Topic string `json:"topic"`
	ACLs  []ACL  `json:"acls"`
}

// SetUnprotected records whether a topic is mirrored without read-only
// enforcement.
type SetUnprotected struct {
	Topic       string `json:"topic"`
	Unprotected bool   `json:"unprotected"`
}

// RegisterSidecar records (or updates) a sidecar's addresses and version.
type RegisterSidecar struct {
	ID        int32  `json:"id"`
	RaftAddr  string `json:"raftAddr"`
	AdminAddr string `json:"adminAddr"`
	Version   string `json:"version"`
}

// RecordReplicaOrder records the original replica order of destination
// partitions before the raft leader reorders them to move leadership away
// from a broker whose sidecar is dead (DESIGN D7). A partition that has a
// record keeps it: the first order recorded is the one to restore, and
// recording the same order again is a no-op (a retried command).
type RecordReplicaOrder struct {
	Partitions []ReplicaOrder `json:"partitions"`
}

// ReplicaOrder is the replica list of one destination partition, in order.
type ReplicaOrder struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// ClearReplicaOrder forgets the recorded replica order of partitions whose
// order was restored (or no longer needs to be). Clearing a partition
// without a record is a no-op.
type ClearReplicaOrder struct {
	Partitions []TopicPartition `json:"partitions"`
}

// TopicPartition names one destination partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Type implements Command.
func (CreateMirror) Type() CommandType { return CmdCreateMirror }

// Type implements Command.
func (DeleteMirror) Type() CommandType { return CmdDeleteMirror }

// Type implements Command.
func (AlterMirrorConfig) Type() CommandType { return CmdAlterMirrorConfig }

// Type implements Command.
func (SetSourceClusterID) Type() CommandType { return CmdSetSourceClusterID }

// Type implements Command.
func (StartTopics) Type() CommandType { return CmdStartTopics }

// Type implements Command.
func (SetTopicStatus) Type() CommandType { return CmdSetTopicStatus }

// Type implements Command.
func (RecordACLs) Type() CommandType { return CmdRecordACLs }

// Type implements Command.
func (SetUnprotected) Type() CommandType { return CmdSetUnprotected }

// Type implements Command.
func (RegisterSidecar) Type() CommandType { return CmdRegisterSidecar }

// Type implements Command.
func (RecordReplicaOrder) Type() CommandType { return CmdRecordReplicaOrder }

// Type implements Command.
func (ClearReplicaOrder) Type() CommandType { return CmdClearReplicaOrder }

// RemoveSidecar forgets a sidecar's registration after it left the raft
// group. Removing a sidecar that is not registered changes nothing.
type RemoveSidecar struct {
	ID int32 `json:"id"`
}

// AlterMirrorPatterns changes a mirror's include and exclude patterns
// (mirror.topics.include and mirror.topics.exclude): the Remove lists are
// taken out, then the Add lists appended. It carries changes rather than
// the new lists, so that patterns a concurrent Start or Stop adds are kept.
type AlterMirrorPatterns struct {
	Name          string   `json:"name"`
	AddInclude    []string `json:"addInclude"`
	RemoveInclude []string `json:"removeInclude"`
	AddExclude    []string `json:"addExclude"`
	RemoveExclude []string `json:"removeExclude"`
	NowMs         int64    `json:"nowMs"`
}

// Type implements Command.
func (RemoveSidecar) Type() CommandType { return CmdRemoveSidecar }

// Type implements Command.
func (AlterMirrorPatterns) Type() CommandType { return CmdAlterMirrorPatterns }

// SetTopicPartitions records a mirror topic's new partition count after the
// metadata sync added partitions on the destination to match the source
// (DESIGN D10). The count only grows: Kafka cannot remove partitions.
type SetTopicPartitions struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
}

// SetSyncFault records a fault the metadata sync found (DESIGN D10), or
// clears it when Fault is empty. Without Topic it is the mirror's (the
// source reports another cluster ID: fetching and sync halt for the whole
// mirror); with Topic it is that topic's (the source topic was recreated:
// its partitions are no longer driven).
type SetSyncFault struct {
	Mirror string `json:"mirror"`
	Topic  string `json:"topic,omitempty"`
	Fault  string `json:"fault"`
}

// RecordSyncedACLs replaces the list of destination ACLs the metadata sync
// created for a mirror, so that it removes only its own ACLs when they are
// removed on the source.
type RecordSyncedACLs struct {
	Mirror string `json:"mirror"`
	ACLs   []ACL  `json:"acls"`
}

// Type implements Command.
func (SetTopicPartitions) Type() CommandType { return CmdSetTopicPartitions }

// Type implements Command.
func (SetSyncFault) Type() CommandType { return CmdSetSyncFault }

// ReadBarrier changes nothing. A follower that just started sends it to
// the leader and waits until its own FSM applied it: from then on its state
// holds every command committed before, so it can answer reads.
type ReadBarrier struct{}

// Type implements Command.
func (RecordSyncedACLs) Type() CommandType { return CmdRecordSyncedACLs }

// Type implements Command.
func (ReadBarrier) Type() CommandType { return CmdReadBarrier }

// SetDiverged records the diverged partitions of an active mirror topic
// (DESIGN D9), or clears them when Diverged is empty: the topic was
// re-seeded or its destination log is a prefix of the source's again, so
// its partitions are driven from now on (StartedMs becomes NowMs).
type SetDiverged struct {
	Mirror   string       `json:"mirror"`
	Topic    string       `json:"topic"`
	Diverged []Divergence `json:"diverged"`
	NowMs    int64        `json:"nowMs"`
}

// Type implements Command.
func (SetDiverged) Type() CommandType { return CmdSetDiverged }

// RestartTopics is an operator's --start of topics that are already active
// in the mirror: every sidecar restarts the topics' FAILED partitions that
// it drives and grants them new automatic retries (DESIGN D12, D16: start
// accepts FAILED). It bumps each topic's RestartGen, which the sidecars
// watch.
type RestartTopics struct {
	Mirror string   `json:"mirror"`
	Topics []string `json:"topics"`
	NowMs  int64    `json:"nowMs"`
}

// Type implements Command.
func (RestartTopics) Type() CommandType { return CmdRestartTopics }

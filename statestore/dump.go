package statestore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Dump writes every record of every partition of __mirror_state to w, one
// JSON object a line, partition by partition in offset order:
//
//	{"partition":3,"offset":17,"key":{"type":2,"mirror":"m","topic":"t","partition":0},"value":{"state":"MIRRORING",...}}
//
// A tombstone's value is null; a mirror record's value is {}. A key or value
// that does not decode prints {"error":"..."} in its place, and the dump
// goes on. Records are read as Load reads them (read_committed, up to the
// end offset of each partition when its turn comes).
func Dump(ctx context.Context, cl *kgo.Client, w io.Writer) error {
	rd := reader{cl: cl, log: zap.NewNop()}
	t, err := rd.topic(ctx)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for p := range int32(len(t.Partitions)) {
		_, err := rd.read(ctx, p, func(rec *kgo.Record) error {
			return enc.Encode(dumpRecord(rec))
		})
		if err != nil {
			bw.Flush() //nolint:errcheck // the read error matters more
			return err
		}
	}
	return bw.Flush()
}

// dumpLine is one line of Dump.
type dumpLine struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	Key       any   `json:"key"`
	Value     any   `json:"value"`
}

type jsonKey struct {
	Type      int8   `json:"type"`
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type jsonSidecar struct {
	AdminAddress  string `json:"adminAddress"`
	AdminProtocol string `json:"adminSecurityProtocol"`
	UpdatedMs     int64  `json:"updatedMs"`
}

type jsonError struct {
	Error string `json:"error"`
}

type jsonState struct {
	State             string      `json:"state"`
	PreviousState     string      `json:"previousState"`
	RetryAttempt      int16       `json:"retryAttempt"`
	Reason            string      `json:"reason,omitempty"`
	LastSourceOffset  int64       `json:"lastSourceOffset"`
	SourceEpochs      []jsonEpoch `json:"sourceEpochs"`
	WriterLeaderEpoch int32       `json:"writerLeaderEpoch"`
	WriterBrokerID    int32       `json:"writerBrokerId"`
	UpdatedMs         int64       `json:"updatedMs"`
	OffsetMap         []jsonShift `json:"offsetMap,omitempty"`
}

type jsonEpoch struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

type jsonShift struct {
	SourceOffset      int64 `json:"sourceOffset"`
	DestinationOffset int64 `json:"destinationOffset"`
}

func dumpRecord(rec *kgo.Record) dumpLine {
	line := dumpLine{Partition: rec.Partition, Offset: rec.Offset}
	k, err := ReadKey(rec.Key)
	if err != nil {
		line.Key = jsonError{err.Error()}
		if rec.Value != nil {
			line.Value = jsonError{"not decoded: the key does not decode"}
		}
		return line
	}
	line.Key = jsonKey(k)
	if rec.Value == nil {
		return line // a tombstone: "value":null
	}
	if k.Type == TypeSidecar {
		sc, err := readSidecarValue(k, rec.Value)
		if err != nil {
			line.Value = jsonError{err.Error()}
		} else {
			line.Value = jsonSidecar{AdminAddress: sc.AdminAddress, AdminProtocol: sc.AdminProtocol, UpdatedMs: sc.UpdatedMs}
		}
		return line
	}
	v, known, err := decodeValue(k.Type, rec.Value)
	switch {
	case !known:
		line.Value = jsonError{fmt.Sprintf("record type %d is unknown to this build (%d value bytes)", k.Type, len(rec.Value))}
	case err != nil:
		line.Value = jsonError{err.Error()}
	case k.Type == TypeMirror:
		line.Value = struct{}{}
	default:
		line.Value = stateJSON(&v)
	}
	return line
}

func stateJSON(v *PartitionState) jsonState {
	j := jsonState{
		State:             StateName(v.State),
		PreviousState:     StateName(v.PreviousState),
		RetryAttempt:      v.RetryAttempt,
		Reason:            v.Reason,
		LastSourceOffset:  v.LastSourceOffset,
		SourceEpochs:      make([]jsonEpoch, len(v.SourceEpochs)),
		WriterLeaderEpoch: v.WriterLeaderEpoch,
		WriterBrokerID:    v.WriterBrokerID,
		UpdatedMs:         v.UpdatedMs,
	}
	for i, e := range v.SourceEpochs {
		j.SourceEpochs[i] = jsonEpoch(e)
	}
	for _, s := range v.OffsetMap {
		j.OffsetMap = append(j.OffsetMap, jsonShift(s))
	}
	return j
}

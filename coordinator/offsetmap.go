package coordinator

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// The offset maps of translate-mode partitions (mirror.offsets=translate,
// DESIGN D2) live in their partition-state records of __mirror_state,
// written through the mirror's coordinator like the states, fenced by the
// destination leader epoch. The state writer is the data plane's OffsetMaps.
// An exact-mode partition may have an offset map too: the shifts of
// markers a destination transaction coordinator wrote twice (each repeat
// makes later destination offsets one higher than the source's). The group
// offset sync translates with both (offsetMapsOf).

// LoadOffsetMap implements fetcher.OffsetMaps.
func (w *stateWriter) LoadOffsetMap(ctx context.Context, p fetcher.Partition) ([]fetcher.OffsetShift, error) {
	req := &protocol.ReadMirrorStatesRequest{MirrorName: p.Mirror, Topics: []protocol.ReadMirrorStatesRequestTopic{
		{Name: p.Topic, Partitions: []protocol.ReadMirrorStatesRequestPartition{{PartitionIndex: p.Partition}}},
	}}
	states, err := w.readStatesOf(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reading the offset map of %s: %w", p, err)
	}
	return offsetMapOf(states, p), nil
}

// AppendOffsetShifts implements fetcher.OffsetMaps.
func (w *stateWriter) AppendOffsetShifts(ctx context.Context, p fetcher.Partition, shifts []fetcher.OffsetShift) error {
	epoch, ok := w.epoch(p)
	var pd protocol.WriteMirrorStatesRequestPartition
	pd.Default()
	pd.PartitionIndex, pd.State = p.Partition, protocol.StateUnchanged
	if ok {
		pd.DestinationLeaderEpoch = epoch
	}
	for _, e := range shifts {
		pd.OffsetMap = append(pd.OffsetMap, protocol.OffsetShift{SourceOffset: e.Source, DestinationOffset: e.Destination})
	}
	resp, err := w.writeStatesResp(ctx, &protocol.WriteMirrorStatesRequest{MirrorName: p.Mirror, Topics: []protocol.WriteMirrorStatesRequestTopic{
		{Name: p.Topic, Partitions: []protocol.WriteMirrorStatesRequestPartition{pd}},
	}})
	if err != nil {
		return fmt.Errorf("writing the offset map of %s: %w", p, err)
	}
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("writing the offset map of %s: %w", p, err)
			}
		}
	}
	return nil
}

// offsetMapOf returns the offset map of p from persisted partition states.
func offsetMapOf(states map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition, p fetcher.Partition) []fetcher.OffsetShift {
	var out []fetcher.OffsetShift
	for _, e := range states[p].OffsetMap {
		out = append(out, fetcher.OffsetShift{Source: e.SourceOffset, Destination: e.DestinationOffset})
	}
	return out
}

package coordinator

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Failback (DESIGN D9, D16): starting a topic onto an existing, non-empty
// destination topic with the source's partition count is accepted when, on
// every partition, the destination's log is a prefix of the source's. The
// fetcher then resumes from the destination's log end offset by itself.
// Otherwise stock Kafka cannot truncate the log in place: the topic is
// started with its diverged partitions recorded (MirrorTopic.Diverged), no
// partition of it is driven, describe shows them FAILED with the partition,
// offset and record counts of the divergence, and --start --reseed re-seeds
// it (reseed.go).

// maxDivergenceSteps bounds the batches walked back from the end of a
// diverged destination log to find where it parts from the source's.
const maxDivergenceSteps = 1000

// batchView is the part of a stored v2 record batch that mirroring keeps.
type batchView struct {
	base, last int64
	content    []byte // attributes .. max timestamp (21..43), record count and records (57..)
}

// sameContent reports whether two batches agree in everything but the
// fields a destination broker rewrites (partition leader epoch, CRC,
// producer ID, producer epoch and base sequence).
func (b *batchView) sameContent(o *batchView) bool {
	return b.base == o.base && b.last == o.last && bytes.Equal(b.content, o.content)
}

// partitionLog is what the failback check needs to read from one cluster's
// partition: its leader, the topic ID and the log's bounds.
type partitionLog struct {
	cl      *kgo.Client
	topic   string
	id      [16]byte
	leaders map[int32]int32
	starts  map[int32]int64
	ends    map[int32]int64
}

// openLog reads the metadata, log start and end offsets of a topic.
func openLog(ctx context.Context, cl *kgo.Client, topic string) (*partitionLog, error) {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	mt, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata of topic %s: not in the response", topic)
	}
	if mt.Err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, mt.Err)
	}
	l := &partitionLog{cl: cl, topic: topic, id: mt.ID, leaders: map[int32]int32{}, starts: map[int32]int64{}, ends: map[int32]int64{}}
	for p, pd := range mt.Partitions {
		if pd.Err != nil {
			return nil, fmt.Errorf("partition %s-%d: %w", topic, p, pd.Err)
		}
		l.leaders[p] = pd.Leader
	}
	for name, list := range map[string]func(context.Context, ...string) (kadm.ListedOffsets, error){
		"start": adm.ListStartOffsets, "end": adm.ListEndOffsets,
	} {
		offs, err := list(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("%s offsets of topic %s: %w", name, topic, err)
		}
		var first error
		offs.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				first = cmpErr(first, fmt.Errorf("%s offset of %s-%d: %w", name, topic, o.Partition, o.Err))
				return
			}
			if name == "start" {
				l.starts[o.Partition] = o.Offset
			} else {
				l.ends[o.Partition] = o.Offset
			}
		})
		if first != nil {
			return nil, first
		}
	}
	return l, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// errNoBatch means no batch holds the offset asked for (below the log start
// offset, or beyond the end).
var errNoBatch = errors.New("coordinator: no batch at that offset")

// batchAt fetches, with a raw Fetch request to the partition's leader, the
// record batch that holds offset.
func (l *partitionLog) batchAt(ctx context.Context, partition int32, offset int64) (*batchView, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = l.topic
	rt.TopicID = l.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20 // the first batch comes whole even when larger
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, l.cl.Broker(int(l.leaders[partition])))
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch of %s-%d: unexpected response shape", l.topic, partition)
	}
	pr := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return nil, errNoBatch
		}
		return nil, err
	}
	data := pr.RecordBatches
	for len(data) >= 61 {
		length := int(binary.BigEndian.Uint32(data[8:12]))
		if 12+length > len(data) || length < 49 {
			break
		}
		b := data[:12+length]
		data = data[12+length:]
		if b[16] != 2 {
			return nil, fmt.Errorf("%s-%d: batch at offset %d has message format v%d, only v2 is compared", l.topic, partition, offset, b[16])
		}
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		last := base + int64(binary.BigEndian.Uint32(b[23:27]))
		if last < offset {
			continue
		}
		if base > offset {
			return nil, errNoBatch
		}
		content := append(append([]byte{}, b[21:43]...), b[57:]...)
		return &batchView{base: base, last: last, content: content}, nil
	}
	return nil, errNoBatch
}

// divergenceMessage is the per-topic start error of a topic that diverged
// (DESIGN D9): the first diverged partition with the offset and counts,
// what happened to the topic and what the operator can do.
func divergenceMessage(topic string, found []fsm.Divergence, started bool) string {
	msg := fmt.Sprintf("destination topic %s holds records the source does not have: %s", topic, found[0])
	if len(found) > 1 {
		msg += fmt.Sprintf(" (and %d more partitions)", len(found)-1)
	}
	msg += "; stock Kafka cannot truncate a log"
	if started {
		msg += ", so the topic's partitions are FAILED and none of its records was changed"
	}
	return msg + fmt.Sprintf(": --start --reseed copies those records to %s.diverged-<timestamp> and re-mirrors the topic from the source; "+
		"--stop leaves this cluster's log as it is", topic)
}

// findDivergences compares every partition of an existing, non-empty
// destination topic with the source topic. It returns the diverged
// partitions (none when every destination log is a prefix of the
// source's) and the destination log it read.
func (a *admin) findDivergences(ctx context.Context, src *kgo.Client, topic string, partitions int32) ([]fsm.Divergence, *partitionLog, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dl, err := openLog(ctx, a.dest.cl, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("destination topic %s: %w", topic, err)
	}
	sl, err := openLog(ctx, src, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("source topic %s: %w", topic, err)
	}
	var found []fsm.Divergence
	for p := range partitions {
		d, err := comparePartition(ctx, dl, sl, p)
		if err != nil {
			return nil, nil, fmt.Errorf("comparing %s-%d with the source: %w", topic, p, err)
		}
		if d != nil {
			found = append(found, *d)
		}
	}
	return found, dl, nil
}

// comparePartition returns nil when the destination's log of partition p is
// a prefix of the source's, or where it diverges.
func comparePartition(ctx context.Context, dl, sl *partitionLog, p int32) (*fsm.Divergence, error) {
	end := dl.ends[p]
	if end <= dl.starts[p] {
		return nil, nil // nothing on this cluster to disagree with
	}
	// Walk back from the destination's last batch to the newest batch that
	// the source holds with the same content: everything after it diverges.
	// The first step decides the common case (a prefix) with one batch each.
	limit := min(end, sl.ends[p])
	off := end - 1
	for step := 0; ; step++ {
		if off < dl.starts[p] || off < sl.starts[p] {
			// Nothing older to compare: diverged from the first offset both hold.
			at := max(dl.starts[p], sl.starts[p])
			return &fsm.Divergence{Partition: p, Offset: at, Extra: end - at, Exact: off < dl.starts[p]}, nil
		}
		if step >= maxDivergenceSteps {
			return &fsm.Divergence{Partition: p, Offset: off + 1, Extra: end - off - 1}, nil
		}
		db, err := dl.batchAt(ctx, p, off)
		if errors.Is(err, errNoBatch) {
			// A hole (compaction) on this cluster: nothing older to compare.
			return &fsm.Divergence{Partition: p, Offset: off + 1, Extra: end - off - 1}, nil
		}
		if err != nil {
			return nil, err
		}
		if db.last < limit {
			sb, err := sl.batchAt(ctx, p, db.base)
			if err != nil && !errors.Is(err, errNoBatch) {
				return nil, err
			}
			if err == nil && db.sameContent(sb) {
				if db.last == end-1 {
					return nil, nil // the whole log is a prefix of the source's
				}
				return &fsm.Divergence{Partition: p, Offset: db.last + 1, Extra: end - db.last - 1, Exact: true}, nil
			}
		}
		off = db.base - 1
	}
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
)

// Re-seeding (DESIGN D9): a destination topic whose log diverged from the
// source's cannot be truncated in place on stock Kafka, and the only way to
// hold the source's records at the source's offsets again is an empty
// topic. --start --reseed therefore
//
//  1. copies the divergent records of every diverged partition (from the
//     offset where the logs part to the log end offset) to a new topic
//     <topic>.diverged-<timestamp>, same partition number, with their keys,
//     values, headers and timestamps (their offsets there start at 0);
//  2. verifies the copy: the records read, the records acknowledged and the
//     copy's end offsets agree, and the destination topic did not change
//     meanwhile;
//  3. only then deletes the destination topic and re-creates it empty with
//     the source's partition count and the mirror topic configs, so that it
//     is mirrored from the source's log start like a new mirror topic.
//
// Nothing is deleted when any step before 3 fails. The other partitions of
// the topic hold a prefix of the source's log, so re-mirroring them loses
// nothing. ACLs are not tied to a topic in Kafka, so the read-only ACLs stay;
// Kafka drops the committed group offsets of a deleted topic, and the
// metadata sync copies the source's again.

// divergedSuffix joins a topic's name and the time of its re-seed.
const divergedSuffix = ".diverged-"

// maxTopicNameLength is Kafka's limit on topic names.
const maxTopicNameLength = 249

// ReseedTimeout bounds a StartMirrorTopics request with Reseed: the copies,
// deletions and re-creations of its topics. Clients wait this long for its
// answer.
const ReseedTimeout = 15 * time.Minute

// reseedStopGrace bounds what a start with --reseed still does once the
// admin endpoint closed (SIGTERM: the sidecar shuts down): re-creating a
// topic deleted a moment before and recording the start through raft. The
// copy itself ends at once, and nothing is deleted after the endpoint
// closed, so the sidecar stops within seconds instead of waiting for the
// re-seed (ReseedTimeout) and being killed by systemd's TimeoutStopSec.
const reseedStopGrace = 3 * time.Second

// endpointKey is the context key of the admin endpoint's context
// (withEndpoint).
type endpointKey struct{}

// withEndpoint records in ctx the context of the admin endpoint a request
// arrived on, which ends when the endpoint closes (protocol.Server.Close),
// before ctx gets the request's own timeout.
func withEndpoint(ctx context.Context) context.Context {
	return context.WithValue(ctx, endpointKey{}, ctx)
}

// endpointOf returns the admin endpoint's context recorded in ctx by
// withEndpoint, or one that never ends for operations called without an
// endpoint.
func endpointOf(ctx context.Context) context.Context {
	if e, ok := ctx.Value(endpointKey{}).(context.Context); ok {
		return e
	}
	return context.Background()
}

// reseedContext returns the context of a start with --reseed: copying the
// diverged records can take longer than an admin request, so it outlives
// the request's timeout, up to ReseedTimeout, and a deletion is not cut
// short before the re-creation. When the admin endpoint closes it ends
// reseedStopGrace later.
func reseedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReseedTimeout)
	stop := context.AfterFunc(endpointOf(ctx), func() {
		t := time.NewTimer(reseedStopGrace)
		defer t.Stop()
		select {
		case <-rctx.Done():
		case <-t.C:
		}
		cancel()
	})
	return rctx, func() { stop(); cancel() }
}

// copyTimeout bounds the copy of the divergent records of one topic.
const copyTimeout = 10 * time.Minute

// recreateTimeout bounds the wait for the deleted topic to be re-created.
const recreateTimeout = time.Minute

// divergedTopicName returns <topic>.diverged-<UTC time, ISO 8601 basic>.
func divergedTopicName(topic string, now time.Time) (string, error) {
	name := topic + divergedSuffix + now.UTC().Format("20060102T150405Z")
	if len(name) > maxTopicNameLength {
		return "", topicErr(kerr.InvalidTopicException, "cannot re-seed topic %s: the copy's name %s would be longer than Kafka's %d characters",
			topic, name, maxTopicNameLength)
	}
	return name, nil
}

// reseed copies the divergent records of topic t (found diverged on the
// partitions in found, in the destination log dl), verifies the copy, then
// deletes and re-creates the destination topic. It returns what it copied,
// also when a later step failed.
func (a *admin) reseed(ctx context.Context, src *kgo.Client, t SourceTopic, rf int16, found []fsm.Divergence, dl *partitionLog) (*protocol.ReseededTopic, error) {
	copyName, err := divergedTopicName(t.Name, a.now())
	if err != nil {
		return nil, err
	}
	// Everything that could fail before the deletion is done first.
	overrides, maxBytes, err := listedTopicConfigs(ctx, src, t.Name)
	if err != nil {
		return nil, fmt.Errorf("re-seeding topic %s: configs of the source topic: %w; nothing was copied or deleted", t.Name, err)
	}
	// The copy ends at once when the admin endpoint closes: nothing was
	// deleted yet.
	endpoint := endpointOf(ctx)
	cctx, cancelCopy := context.WithCancel(ctx)
	defer cancelCopy()
	defer context.AfterFunc(endpoint, cancelCopy)()
	copied, err := a.copyDiverged(cctx, t.Name, copyName, found, dl)
	if err == nil && endpoint.Err() != nil {
		return copied, topicErr(kerr.UnknownServerError, "re-seeding topic %s: the sidecar is shutting down, so topic %s was not deleted "+
			"(its diverged records were copied to %s): run --start --reseed again", t.Name, t.Name, copyName)
	}
	if err != nil {
		if endpoint.Err() != nil {
			return nil, topicErr(kerr.UnknownServerError, "re-seeding topic %s: the sidecar is shutting down, so copying the diverged records to %s "+
				"stopped and topic %s was not deleted: run --start --reseed again", t.Name, copyName, t.Name)
		}
		return nil, topicErr(kerr.UnknownServerError, "re-seeding topic %s: copying the diverged records to %s failed, so topic %s was not deleted: %v",
			t.Name, copyName, t.Name, err)
	}
	a.log.Info("copied the diverged records of a mirror topic", zap.String("topic", t.Name), zap.String("copy", copyName),
		zap.Any("partitions", copied.Partitions))
	ends, err := a.dest.EndOffsets(ctx, t.Name)
	if err != nil {
		return copied, fmt.Errorf("re-seeding topic %s: end offsets after the copy: %w; topic %s was not deleted", t.Name, err, t.Name)
	}
	for _, p := range slices.Sorted(maps.Keys(dl.ends)) {
		if ends[p] != dl.ends[p] {
			return copied, topicErr(kerr.InvalidRequest, "re-seeding topic %s: partition %d grew from %d to %d records while its diverged records were copied to %s, "+
				"so topic %s was not deleted: keep producers off it and run --start --reseed again", t.Name, p, dl.ends[p], ends[p], copyName, t.Name)
		}
	}
	a.log.Warn("deleting a diverged mirror topic to re-seed it from the source", zap.String("topic", t.Name), zap.String("copy", copyName))
	if err := a.dest.DeleteTopic(ctx, t.Name); err != nil {
		return copied, fmt.Errorf("re-seeding topic %s: %w (its diverged records are in %s)", t.Name, err, copyName)
	}
	cctx, cancel := context.WithTimeout(ctx, recreateTimeout)
	defer cancel()
	for {
		err = a.dest.CreateTopic(cctx, t.Name, t.Partitions, rf, MirrorTopicConfigs(overrides, maxBytes))
		if err == nil || !errors.Is(err, kerr.TopicAlreadyExists) || cctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // the deletion is still going on
	}
	if err != nil {
		return copied, fmt.Errorf("re-seeding topic %s: it was deleted (its diverged records are in %s) but re-creating it failed: %w; "+
			"run --start again without --reseed to create and mirror it", t.Name, copyName, err)
	}
	return copied, nil
}

// copyDiverged copies the records of every diverged partition from where
// the logs part to the log end offset in dl into a new topic copyName,
// partition for partition, and verifies the copy by its counts.
func (a *admin) copyDiverged(ctx context.Context, topic, copyName string, found []fsm.Divergence, dl *partitionLog) (*protocol.ReseededTopic, error) {
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	_, maxBytes, err := sourceTopicConfigs(ctx, a.destCl, topic)
	if err != nil {
		return nil, fmt.Errorf("configs of topic %s: %w", topic, err)
	}
	configs := MirrorTopicConfigs(nil, maxBytes)
	for k, v := range map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"} {
		configs[k] = &v // the copy keeps every record, whatever its timestamp
	}
	if err := a.dest.CreateTopic(ctx, copyName, int32(len(dl.ends)), -1, configs); err != nil {
		return nil, err
	}
	out := &protocol.ReseededTopic{Name: topic, CopyTopic: copyName}
	from := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	for _, d := range found {
		first := d.Offset
		if !d.Exact {
			first = dl.starts[d.Partition] // the logs part somewhere before d.Offset: copy it all
		}
		from[d.Partition] = kgo.NewOffset().At(first)
		ends[d.Partition] = dl.ends[d.Partition]
		out.Partitions = append(out.Partitions, protocol.ReseededPartition{Partition: d.Partition, FirstOffset: first, EndOffset: dl.ends[d.Partition]})
	}
	batchBytes := int32(1 << 20)
	if maxBytes > int64(batchBytes) && maxBytes < 1<<30 {
		batchBytes = int32(maxBytes)
	}
	cons, err := kgo.NewClient(append(a.destCl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(append(a.destCl.Opts(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(batchBytes), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()

	var mu sync.Mutex
	var produceErr error
	read, acked := map[int32]int64{}, map[int32]int64{}
	remaining := maps.Clone(ends)
	for len(remaining) > 0 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading the diverged records of %s: %w (partitions %v not finished)", topic, err, slices.Sorted(maps.Keys(remaining)))
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			fetchErr = cmpErr(fetchErr, fmt.Errorf("reading %s-%d: %w", t, p, err))
		})
		if fetchErr != nil {
			return nil, fetchErr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset >= end-1 {
				delete(remaining, r.Partition)
			}
			if r.Attrs.IsControl() {
				return // a transaction marker: not a record of the log's content
			}
			read[r.Partition]++
			c := &kgo.Record{Topic: copyName, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: slices.Clone(r.Headers), Timestamp: r.Timestamp}
			prod.Produce(ctx, c, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceErr = cmpErr(produceErr, fmt.Errorf("writing to %s-%d: %w", copyName, r.Partition, err))
					return
				}
				acked[r.Partition]++
			})
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return nil, fmt.Errorf("writing to %s: %w", copyName, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if produceErr != nil {
		return nil, produceErr
	}
	copyEnds, err := a.dest.EndOffsets(ctx, copyName)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", copyName, err)
	}
	for i := range out.Partitions {
		p := &out.Partitions[i]
		n := read[p.Partition]
		if acked[p.Partition] != n || copyEnds[p.Partition] != n {
			return nil, fmt.Errorf("verifying %s: partition %d: read %d records from %s, %d acknowledged, the copy's end offset is %d",
				copyName, p.Partition, n, topic, acked[p.Partition], copyEnds[p.Partition])
		}
		p.Records = n
	}
	return out, nil
}

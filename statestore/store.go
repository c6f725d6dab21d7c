package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Topic settings that EnsureTopic applies on creation.
const (
	DefaultNumPartitions int32 = 16
	segmentBytes               = 64 << 20
)

// config is what the options set; New checks it.
type config struct {
	numPartitions int32
	rf            int16
	log           *zap.Logger
}

// Opt configures a Store.
type Opt struct{ apply func(*config) }

// NumPartitions sets the partition count of __mirror_state, used when
// EnsureTopic creates it and checked against an existing topic. Default 16.
// It must be the same on every sidecar of a cluster.
func NumPartitions(n int32) Opt { return Opt{func(c *config) { c.numPartitions = n }} }

// ReplicationFactor sets the replication factor EnsureTopic creates
// __mirror_state with. Default -1: min(3, number of brokers).
func ReplicationFactor(rf int16) Opt { return Opt{func(c *config) { c.rf = rf }} }

// Logger sets the logger; the store logs as "statestore". Default: none.
func Logger(l *zap.Logger) Opt { return Opt{func(c *config) { c.log = l }} }

// Record is one record to write: Value nil is a tombstone. For a TypeMirror
// key a non-nil Value must be the zero PartitionState (the record's value is
// empty in this version).
type Record struct {
	Key   Key
	Value *PartitionState
}

// Store reads and writes __mirror_state on the destination cluster. Reads
// (Load, NumPartitions) use the client given to New. Write uses a producer
// client of the store's own, cloned from it, that is idempotent, waits for
// all in-sync replicas, does not linger and sends every record to the
// partition the caller names; WriteVia, a mirror coordinator's fenced
// write, sends one request to one broker with the given client. A Store is
// safe for concurrent use. Close it when done; the given client stays the
// caller's.
type Store struct {
	cfg    config
	log    *zap.Logger
	cl     *kgo.Client
	adm    *kadm.Client
	prod   *kgo.Client
	rd     reader
	closed atomic.Bool
}

// New returns a Store over cl, a client of the destination cluster. cl must
// not consume, be transactional or have idempotent writes disabled: the
// store's producer is cloned from its options.
func New(cl *kgo.Client, opts ...Opt) (*Store, error) {
	cfg := config{numPartitions: DefaultNumPartitions, rf: -1}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&cfg)
		}
	}
	var problems []string
	if cl == nil {
		problems = append(problems, "the client is nil")
	}
	if cfg.numPartitions < 1 {
		problems = append(problems, fmt.Sprintf("NumPartitions %d is not positive", cfg.numPartitions))
	}
	if cfg.rf == 0 || cfg.rf < -1 {
		problems = append(problems, fmt.Sprintf("ReplicationFactor %d is neither positive nor -1 (min(3, brokers))", cfg.rf))
	}
	if cl != nil {
		problems = append(problems, cloneProblems(cl)...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalidOption, strings.Join(problems, "; "))
	}
	if cfg.log == nil {
		cfg.log = zap.NewNop()
	}
	log := cfg.log.Named("statestore")
	// Options appended last override the client's own.
	prod, err := kgo.NewClient(append(cl.Opts(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("%w: the producer client: %v", ErrInvalidOption, err)
	}
	return &Store{
		cfg:  cfg,
		log:  log,
		cl:   cl,
		adm:  kadm.NewClient(cl),
		prod: prod,
		rd:   reader{cl: cl, log: log},
	}, nil
}

// cloneProblems lists the options of cl that its producer clone must not
// inherit and cannot undo.
func cloneProblems(cl *kgo.Client) []string {
	var p []string
	if v, _ := cl.OptValue(kgo.ConsumeTopics).([]string); len(v) > 0 {
		p = append(p, "the client consumes topics")
	}
	if v, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset); len(v) > 0 {
		p = append(p, "the client consumes partitions")
	}
	if v, _ := cl.OptValue(kgo.ConsumerGroup).(string); v != "" {
		p = append(p, "the client is in consumer group "+strconv.Quote(v))
	}
	if v, _ := cl.OptValue(kgo.TransactionalID).(string); v != "" {
		p = append(p, "the client is transactional")
	}
	if v, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); v {
		p = append(p, "the client disables idempotent writes")
	}
	if v, _ := cl.OptValue(kgo.AllowAutoTopicCreation).(bool); v {
		p = append(p, "the client allows auto topic creation (a write could create "+TopicName+" without compaction)")
	}
	return p
}

// Close closes the store's producer client; the client given to New stays
// open. Writes after Close fail with ErrClosed.
func (s *Store) Close() {
	if s.closed.CompareAndSwap(false, true) {
		s.prod.Close()
	}
}

// topicConfigs returns the configs __mirror_state is created with.
func topicConfigs(rf int16) map[string]*string {
	v := func(s string) *string { return &s }
	return map[string]*string{
		"cleanup.policy":      v("compact"),
		"min.insync.replicas": v(strconv.Itoa(int(min(2, rf)))),
		"segment.bytes":       v(strconv.Itoa(segmentBytes)),
		"compression.type":    v("producer"),
	}
}

// EnsureTopic creates __mirror_state when it is absent, compacted, with the
// configured partition count and replication factor. An existing topic is
// left as it is, but a partition count other than the configured one is an
// error wrapping ErrPartitionCount: changing it would move mirrors to other
// coordinator partitions. Safe to call from every sidecar at once.
func (s *Store) EnsureTopic(ctx context.Context) error {
	want := s.cfg.numPartitions
	rf := s.cfg.rf
	if rf < 0 {
		md, err := s.adm.BrokerMetadata(ctx)
		if err != nil {
			return fmt.Errorf("statestore: listing brokers for the replication factor of %s: %w", TopicName, err)
		}
		rf = int16(min(3, len(md.Brokers)))
		if rf < 1 {
			return fmt.Errorf("statestore: the destination cluster reports no brokers; cannot create %s", TopicName)
		}
	}
	_, err := s.adm.CreateTopic(ctx, want, rf, topicConfigs(rf), TopicName)
	switch {
	case err == nil:
		s.log.Info("created the state topic", zap.String("topic", TopicName),
			zap.Int32("partitions", want), zap.Int16("replication-factor", rf))
		return nil
	case !errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("statestore: creating %s with %d partitions and replication factor %d: %w", TopicName, want, rf, err)
	}
	// Created before, perhaps by another sidecar just now: the metadata of
	// a new topic reaches every broker after a moment.
	var have int32
	err = retry(ctx, s.log, "partition count", func() error {
		var err error
		have, err = s.NumPartitions(ctx)
		if errors.Is(err, ErrTopicNotFound) {
			return &transientError{err}
		}
		return err
	})
	if err != nil {
		return err
	}
	if have != want {
		return fmt.Errorf("%w: %s exists with %d partitions but this sidecar is configured with %d; configure %d, "+
			"as changing the count would move mirrors to other coordinators", ErrPartitionCount, TopicName, have, want, have)
	}
	s.checkExisting(ctx)
	return nil
}

// checkExisting warns when an existing __mirror_state is not compacted: its
// retention would delete the state of mirrors that do not change.
func (s *Store) checkExisting(ctx context.Context) {
	rcs, err := s.adm.DescribeTopicConfigs(ctx, TopicName)
	if err != nil {
		s.log.Debug("cannot describe the state topic's configs", zap.Error(err))
		return
	}
	rc, err := rcs.On(TopicName, nil)
	if err != nil || rc.Err != nil {
		return
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && !strings.Contains(c.MaybeValue(), "compact") {
			s.log.Warn("the state topic is not compacted: retention will delete mirror states; set cleanup.policy=compact",
				zap.String("topic", TopicName), zap.String("cleanup-policy", c.MaybeValue()))
		}
	}
}

// NumPartitions returns the partition count of __mirror_state from the
// cluster's metadata, the truth once the topic exists, or an error wrapping
// ErrTopicNotFound.
func (s *Store) NumPartitions(ctx context.Context) (int32, error) {
	t, err := s.rd.topic(ctx)
	if err != nil {
		return 0, err
	}
	return int32(len(t.Partitions)), nil
}

// Load reads a partition of __mirror_state from its log start offset to its
// end (the high watermark, or the last stable offset while a transaction is
// open; read_committed) and returns the last value of every key, without the
// keys whose last record is a tombstone, and the offset after the last record
// read. Records with a key version or record type this build does not know
// (a newer sidecar's) are skipped and counted in a warning. A malformed
// record of a known type stops the load with an error wrapping ErrMalformed:
// the state would be wrong. TypeMirror keys map to a zero PartitionState;
// the sidecar registry's records (TypeSidecar) are left out.
func (s *Store) Load(ctx context.Context, partition int32) (map[Key]PartitionState, int64, error) {
	began := time.Now()
	states := make(map[Key]PartitionState)
	var skipped, records int
	next, err := s.rd.read(ctx, partition, func(rec *kgo.Record) error {
		records++
		k, err := ReadKey(rec.Key)
		if errors.Is(err, ErrUnknownKeyVersion) {
			skipped++
			return nil
		}
		if err != nil {
			return fmt.Errorf("statestore: %s-%d offset %d: %w", TopicName, partition, rec.Offset, err)
		}
		if k.Type == TypeSidecar {
			return nil // the sidecar registry (sidecar.go), no mirror's state
		}
		if rec.Value == nil {
			delete(states, k)
			return nil
		}
		v, known, err := decodeValue(k.Type, rec.Value)
		switch {
		case !known:
			skipped++
		case err != nil:
			return fmt.Errorf("statestore: %s-%d offset %d, key %s: %w", TopicName, partition, rec.Offset, k, err)
		default:
			states[k] = v
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if skipped > 0 {
		s.log.Warn("skipped records of unknown key versions or record types (written by a newer sidemirror?)",
			zap.Int32("partition", partition), zap.Int("skipped", skipped))
	}
	s.log.Debug("loaded partition", zap.Int32("partition", partition), zap.Int("records", records),
		zap.Int("keys", len(states)), zap.Int64("next-offset", next), zap.Duration("elapsed", time.Since(began)))
	return states, next, nil
}

// decodeValue decodes the value of a record of type t; known is false for a
// record type this build does not know.
func decodeValue(t int8, b []byte) (v PartitionState, known bool, err error) {
	switch t {
	case TypePartitionState, TypeLastMirrorEpochs:
		v, err = ReadPartitionState(b)
		return v, true, err
	case TypeMirror:
		return PartitionState{}, true, nil // no fields yet; a newer writer's are ignored
	default:
		return PartitionState{}, false, nil
	}
}

// encodeValue encodes the value of r; nil for a tombstone.
func encodeValue(r Record) ([]byte, error) {
	if r.Key.Mirror == "" {
		return nil, fmt.Errorf("%w: key %s has no mirror name", ErrInvalidRecord, r.Key)
	}
	switch r.Key.Type {
	case TypePartitionState, TypeLastMirrorEpochs:
		if r.Value == nil {
			return nil, nil
		}
		return r.Value.AppendTo(nil), nil
	case TypeMirror:
		switch {
		case r.Value == nil:
			return nil, nil
		case !r.Value.isZero():
			return nil, fmt.Errorf("%w: key %s: a mirror record carries no state", ErrInvalidRecord, r.Key)
		default:
			return []byte{}, nil // empty, not null: null is a tombstone
		}
	default:
		return nil, fmt.Errorf("%w: key %s has an unknown record type", ErrInvalidRecord, r.Key)
	}
}

// checkWrite returns why nothing can be written to partition, if so.
func (s *Store) checkWrite(partition int32) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if partition < 0 {
		return fmt.Errorf("%w: %s-%d", ErrNoSuchPartition, TopicName, partition)
	}
	return nil
}

// Write appends recs, in order, to one partition of __mirror_state (the
// coordinator partition of their mirrors, see PartitionFor) and returns once
// all in-sync replicas have them. It is not atomic: after an error some of
// the records may be written, so the caller writes them again (a key's last
// record wins).
func (s *Store) Write(ctx context.Context, partition int32, recs []Record) error {
	if err := s.checkWrite(partition); err != nil || len(recs) == 0 {
		return err
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		v, err := encodeValue(r)
		if err != nil {
			return err
		}
		krs[i] = &kgo.Record{Topic: TopicName, Partition: partition, Key: r.Key.AppendTo(nil), Value: v}
	}
	if err := s.prod.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		if errors.Is(err, kgo.ErrClientClosed) {
			err = ErrClosed
		}
		return fmt.Errorf("statestore: writing %d records to %s-%d: %w", len(recs), TopicName, partition, err)
	}
	return nil
}

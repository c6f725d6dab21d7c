package statestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newCluster starts a kfake cluster and returns it with a client of it.
func newCluster(t *testing.T, brokers int) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, newClient(t, c)
}

func newClient(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newStore(t *testing.T, cl *kgo.Client, opts ...Opt) *Store {
	t.Helper()
	s, err := New(cl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newTopicStore returns a store whose topic exists, with n partitions.
func newTopicStore(t *testing.T, cl *kgo.Client, n int32) *Store {
	t.Helper()
	s := newStore(t, cl, NumPartitions(n))
	if err := s.EnsureTopic(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, s *Store, partition int32, recs ...Record) {
	t.Helper()
	if err := s.Write(testContext(t), partition, recs); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func state(code int8, offset int64) *PartitionState {
	return &PartitionState{State: code, PreviousState: StateNotRecorded, LastSourceOffset: offset,
		SourceEpochs: []EpochStart{{Epoch: 1, StartOffset: 0}}, WriterLeaderEpoch: 2, WriterBrokerID: 1, UpdatedMs: 1}
}

// produceRaw writes records with arbitrary bytes, bypassing the encoders.
func produceRaw(t *testing.T, cl *kgo.Client, partition int32, kvs ...[2][]byte) {
	t.Helper()
	for _, kv := range kvs {
		r := &kgo.Record{Topic: TopicName, Partition: partition, Key: kv[0], Value: kv[1]}
		if err := cl.ProduceSync(testContext(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func endOffset(t *testing.T, cl *kgo.Client, partition int32) int64 {
	t.Helper()
	offs, err := kadm.NewClient(cl).ListEndOffsets(testContext(t), TopicName)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(TopicName, partition)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of partition %d: %v", partition, o.Err)
	}
	return o.Offset
}

func TestNewRefuses(t *testing.T) {
	c, cl := newCluster(t, 1)
	tests := []struct {
		name string
		cl   *kgo.Client
		opts []Opt
		want string
	}{
		{"nil client", nil, nil, "nil"},
		{"zero partitions", cl, []Opt{NumPartitions(0)}, "NumPartitions 0"},
		{"zero replication factor", cl, []Opt{ReplicationFactor(0)}, "ReplicationFactor 0"},
		{"replication factor -2", cl, []Opt{ReplicationFactor(-2)}, "ReplicationFactor -2"},
		{"consumer group", newClient(t, c, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("x")), nil, "consumer group"},
		{"transactional", newClient(t, c, kgo.TransactionalID("tx")), nil, "transactional"},
		{"no idempotence", newClient(t, c, kgo.DisableIdempotentWrite()), nil, "idempotent"},
		{"auto topic creation", newClient(t, c, kgo.AllowAutoTopicCreation()), nil, "auto topic creation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cl, tc.opts...)
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want ErrInvalidOption naming %q", s, err, tc.want)
			}
		})
	}
}

func TestEnsureTopic(t *testing.T) {
	tests := []struct {
		name       string
		brokers    int
		opts       []Opt
		partitions int32
		rf         int
		minISR     string
	}{
		{"defaults on three brokers", 3, nil, 16, 3, "2"},
		{"defaults on one broker", 1, nil, 16, 1, "1"},
		{"defaults on two brokers", 2, []Opt{NumPartitions(5)}, 5, 2, "2"},
		{"explicit replication factor", 3, []Opt{NumPartitions(4), ReplicationFactor(1)}, 4, 1, "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, cl := newCluster(t, tc.brokers)
			s := newStore(t, cl, tc.opts...)
			ctx := testContext(t)
			for i := range 2 { // the second call finds the topic
				if err := s.EnsureTopic(ctx); err != nil {
					t.Fatalf("EnsureTopic #%d: %v", i+1, err)
				}
			}
			adm := kadm.NewClient(cl)
			td, err := adm.ListTopics(ctx, TopicName)
			if err != nil {
				t.Fatal(err)
			}
			d := td[TopicName]
			if d.Err != nil {
				t.Fatalf("topic metadata: %v", d.Err)
			}
			if got := int32(len(d.Partitions)); got != tc.partitions {
				t.Errorf("partitions = %d, want %d", got, tc.partitions)
			}
			if got := d.Partitions.NumReplicas(); got != tc.rf {
				t.Errorf("replication factor = %d, want %d", got, tc.rf)
			}
			if n, err := s.NumPartitions(ctx); err != nil || n != tc.partitions {
				t.Errorf("NumPartitions = %d, %v; want %d", n, err, tc.partitions)
			}
			rcs, err := adm.DescribeTopicConfigs(ctx, TopicName)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rcs.On(TopicName, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := make(map[string]string)
			for _, c := range rc.Configs {
				got[c.Key] = c.MaybeValue()
			}
			for k, want := range map[string]string{
				"cleanup.policy":      "compact",
				"min.insync.replicas": tc.minISR,
				"segment.bytes":       strconv.Itoa(64 << 20),
				"compression.type":    "producer",
			} {
				if got[k] != want {
					t.Errorf("config %s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

func TestEnsureTopicRefusesOtherPartitionCount(t *testing.T) {
	tests := []struct {
		name   string
		create func(t *testing.T, cl *kgo.Client)
		have   int32
	}{
		{"created by another sidecar", func(t *testing.T, cl *kgo.Client) { newTopicStore(t, cl, 8) }, 8},
		{"created by hand", func(t *testing.T, cl *kgo.Client) {
			if _, err := kadm.NewClient(cl).CreateTopic(testContext(t), 3, 1, nil, TopicName); err != nil {
				t.Fatal(err)
			}
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, cl := newCluster(t, 1)
			tc.create(t, cl)
			s := newStore(t, cl) // 16 partitions
			err := s.EnsureTopic(testContext(t))
			if !errors.Is(err, ErrPartitionCount) {
				t.Fatalf("EnsureTopic = %v, want ErrPartitionCount", err)
			}
			for _, n := range []string{strconv.Itoa(int(tc.have)), "16"} {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name the count %s", err, n)
				}
			}
			if n, err := s.NumPartitions(testContext(t)); err != nil || n != tc.have {
				t.Errorf("NumPartitions = %d, %v; want %d (unchanged)", n, err, tc.have)
			}
		})
	}
}

func TestWriteLoad(t *testing.T) {
	a0 := PartitionStateKey("m", "a", 0)
	a1 := PartitionStateKey("m", "a", 1)
	b0 := PartitionStateKey("m", "b", 0)
	boundary := Key{Type: TypeLastMirrorEpochs, Mirror: "m", Topic: "a", Partition: 0}
	mk := MirrorKey("m")
	other := PartitionStateKey("other", "a", 0)
	tests := []struct {
		name   string
		writes [][]Record // one Write call each
		want   map[Key]PartitionState
	}{
		{
			name:   "last state per key wins",
			writes: [][]Record{{{a0, state(StateLogTruncation, 0)}, {a1, state(StateLogTruncation, 0)}}, {{a0, state(StateMirroring, 5)}}, {{a0, state(StatePausing, 9)}, {a0, state(StatePaused, 9)}}},
			want:   map[Key]PartitionState{a0: *state(StatePaused, 9), a1: *state(StateLogTruncation, 0)},
		},
		{
			name:   "a tombstone removes the key",
			writes: [][]Record{{{a0, state(StateMirroring, 1)}, {b0, state(StateMirroring, 2)}}, {{a0, nil}}},
			want:   map[Key]PartitionState{b0: *state(StateMirroring, 2)},
		},
		{
			name:   "a write after a tombstone",
			writes: [][]Record{{{a0, state(StateMirroring, 1)}}, {{a0, nil}}, {{a0, state(StateLogTruncation, 0)}}},
			want:   map[Key]PartitionState{a0: *state(StateLogTruncation, 0)},
		},
		{
			name: "record types are separate keys",
			writes: [][]Record{{
				{mk, &PartitionState{}},
				{a0, state(StateStopped, 7)},
				{boundary, &PartitionState{LastSourceOffset: 7, SourceEpochs: []EpochStart{{Epoch: 3, StartOffset: 2}}}},
			}},
			want: map[Key]PartitionState{
				mk:       {},
				a0:       *state(StateStopped, 7),
				boundary: {LastSourceOffset: 7, SourceEpochs: []EpochStart{{Epoch: 3, StartOffset: 2}}},
			},
		},
		{
			name: "deleting a mirror tombstones its keys",
			writes: [][]Record{
				{{mk, &PartitionState{}}, {a0, state(StateMirroring, 1)}, {other, state(StateMirroring, 1)}},
				{{a0, nil}, {mk, nil}},
			},
			want: map[Key]PartitionState{other: *state(StateMirroring, 1)},
		},
		{
			name:   "offset map and reason",
			writes: [][]Record{{{a0, &PartitionState{State: StateFailed, PreviousState: StateMirroring, RetryAttempt: 2, Reason: "boom", OffsetMap: []OffsetShift{{SourceOffset: 4, DestinationOffset: 1}}}}}},
			want:   map[Key]PartitionState{a0: {State: StateFailed, PreviousState: StateMirroring, RetryAttempt: 2, Reason: "boom", OffsetMap: []OffsetShift{{SourceOffset: 4, DestinationOffset: 1}}}},
		},
	}
	for _, tc := range tests {
		for _, via := range []bool{false, true} {
			name := tc.name
			if via {
				name += " (WriteVia)"
			}
			t.Run(name, func(t *testing.T) { testWriteLoad(t, tc.writes, tc.want, via) })
		}
	}
}

// testWriteLoad writes with Write, or with WriteVia through the partition's
// leader, and checks what Load finds.
func testWriteLoad(t *testing.T, writes [][]Record, want map[Key]PartitionState, via bool) {
	_, cl := newCluster(t, 3)
	s := newTopicStore(t, cl, 4)
	const p = 2
	leader := leaderOf(t, cl, p)
	for _, recs := range writes {
		if !via {
			write(t, s, p, recs...)
		} else if err := s.WriteVia(testContext(t), leader, p, recs); err != nil {
			t.Fatalf("WriteVia: %v", err)
		}
	}
	end := endOffset(t, cl, p)
	// The writer's own store, and a new coordinator's.
	for _, loader := range []*Store{s, newStore(t, cl, NumPartitions(4))} {
		got, next, err := loader.Load(testContext(t), p)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Load = %+v\nwant   %+v", got, want)
		}
		if next != end {
			t.Errorf("Load next offset = %d, want the end offset %d", next, end)
		}
	}
	for q := range int32(4) { // nothing went to another partition
		if q == p {
			continue
		}
		if got, _, err := s.Load(testContext(t), q); err != nil || len(got) != 0 {
			t.Errorf("Load(%d) = %v, %v; want empty", q, got, err)
		}
	}
}

// leaderOf returns the broker that leads partition p of the state topic.
func leaderOf(t *testing.T, cl *kgo.Client, p int32) int32 {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(testContext(t), TopicName)
	if err != nil {
		t.Fatal(err)
	}
	pd, ok := md.Topics[TopicName].Partitions[p]
	if !ok {
		t.Fatalf("no metadata of %s-%d", TopicName, p)
	}
	return pd.Leader
}

// TestWriteViaOnlyThroughTheLeader checks that WriteVia through a broker
// that does not lead the partition fails with NOT_LEADER_OR_FOLLOWER and
// writes nothing, also not through another broker.
func TestWriteViaOnlyThroughTheLeader(t *testing.T) {
	_, cl := newCluster(t, 3)
	s := newTopicStore(t, cl, 4)
	const p = 1
	leader := leaderOf(t, cl, p)
	other := (leader + 1) % 3
	err := s.WriteVia(testContext(t), other, p, []Record{{PartitionStateKey("m", "a", 0), state(StateMirroring, 1)}})
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("WriteVia through broker %d, not the leader %d: %v; want NOT_LEADER_OR_FOLLOWER", other, leader, err)
	}
	if end := endOffset(t, cl, p); end != 0 {
		t.Fatalf("end offset %d after a refused WriteVia, want 0", end)
	}
	if err := s.WriteVia(testContext(t), leader, p, nil); err != nil {
		t.Fatalf("WriteVia of nothing: %v", err)
	}
	if err := s.WriteVia(testContext(t), leader, p, []Record{{Key: Key{Type: TypePartitionState, Topic: "a"}}}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("WriteVia of a key without a mirror: %v, want ErrInvalidRecord", err)
	}
	s.Close()
	if err := s.WriteVia(testContext(t), leader, p, []Record{{PartitionStateKey("m", "a", 0), nil}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteVia after Close: %v, want ErrClosed", err)
	}
}

// countRequests counts the requests of one key the cluster receives.
func countRequests(c *kfake.Cluster, key int16) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

func TestLoadEmptyPartitionSendsNoFetch(t *testing.T) {
	c, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 2)
	write(t, s, 1, Record{PartitionStateKey("m", "t", 0), state(StateMirroring, 1)})
	fetches := countRequests(c, int16(kmsg.Fetch))
	got, next, err := s.Load(testContext(t), 0)
	if err != nil || len(got) != 0 || next != 0 {
		t.Fatalf("Load(empty) = %v, %d, %v; want empty, 0, nil", got, next, err)
	}
	if n := fetches.Load(); n != 0 {
		t.Errorf("Load of an empty partition sent %d Fetch requests, want 0", n)
	}
}

func TestLoadAfterCompaction(t *testing.T) {
	c, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 1)
	want := make(map[Key]PartitionState)
	var written int
	for round := range 20 {
		for p := range int32(5) {
			k := PartitionStateKey("m", "t", p)
			v := state(StateMirroring, int64(round))
			write(t, s, 0, Record{k, v}) // one batch per write
			want[k] = *v
			written++
		}
	}
	gone := PartitionStateKey("m", "t", 3)
	write(t, s, 0, Record{gone, nil})
	delete(want, gone)
	write(t, s, 0, Record{PartitionStateKey("m", "t", 0), state(StateStopped, 99)}) // the active "segment"
	want[PartitionStateKey("m", "t", 0)] = *state(StateStopped, 99)
	written += 2
	c.Compact()

	var dump bytes.Buffer
	if err := Dump(testContext(t), cl, &dump); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(dump.String(), "\n"); lines >= written {
		t.Fatalf("compaction left %d of %d records; the test needs holes", lines, written)
	}
	got, next, err := newStore(t, cl, NumPartitions(1)).Load(testContext(t), 0)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v\nwant   %+v", got, want)
	}
	if end := endOffset(t, cl, 0); next != end {
		t.Errorf("next offset = %d, want %d", next, end)
	}
}

func TestLoadSkipsAbortedTransactionsAndMarkers(t *testing.T) {
	c, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 1)
	k := PartitionStateKey("m", "t", 0)
	write(t, s, 0, Record{k, state(StateLogTruncation, 0)})

	tx := newClient(t, c, kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testContext(t)
	for _, tc := range []struct {
		code int8
		end  kgo.TransactionEndTry
	}{{StateMirroring, kgo.TryCommit}, {StateFailed, kgo.TryAbort}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := state(tc.code, 1)
		r := &kgo.Record{Topic: TopicName, Partition: 0, Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
		if err := tx.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, tc.end); err != nil {
			t.Fatal(err)
		}
	}
	// The log: a record, a committed one, its marker, an aborted one, its
	// marker; the last offset is a control record.
	got, next, err := s.Load(ctx, 0)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := map[Key]PartitionState{k: *state(StateMirroring, 1)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v, want %+v", got, want)
	}
	if end := endOffset(t, cl, 0); next != end || end != 5 {
		t.Errorf("next offset = %d, end offset = %d; want both 5", next, end)
	}
}

// fetchResponse answers a Fetch request with an error code for every
// partition, or with no records at all for code 0.
func fetchResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.(*kmsg.FetchRequest).Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			sp.HighWatermark, sp.LastStableOffset = 1, 1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func TestLoadFetchFaults(t *testing.T) {
	tests := []struct {
		name     string
		times    int64 // how many Fetch requests the fault takes; -1 for all
		code     int16
		dropConn bool
		wantErr  string // "" for a successful load
	}{
		{name: "NOT_LEADER once", times: 1, code: kerr.NotLeaderForPartition.Code},
		{name: "UNKNOWN_TOPIC_OR_PARTITION twice", times: 2, code: kerr.UnknownTopicOrPartition.Code},
		{name: "connection closed once", times: 1, dropConn: true},
		{name: "empty response twice", times: 2},
		{name: "empty responses forever", times: -1, wantErr: "returned nothing below the end offset 1"},
		{name: "authorization failure", times: -1, code: kerr.TopicAuthorizationFailed.Code, wantErr: kerr.TopicAuthorizationFailed.Message},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, cl := newCluster(t, 3)
			s := newTopicStore(t, cl, 1)
			k := PartitionStateKey("m", "t", 0)
			write(t, s, 0, Record{k, state(StateMirroring, 3)})

			var faults atomic.Int64
			c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				n := faults.Add(1)
				if tc.times >= 0 && n > tc.times {
					c.DropControl()
					return nil, nil, false
				}
				c.KeepControl()
				if tc.dropConn {
					return nil, errors.New("injected"), true
				}
				return fetchResponse(req, tc.code), nil, true
			})
			got, next, err := s.Load(testContext(t), 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if n := faults.Load(); n <= tc.times {
				t.Fatalf("%d Fetch requests, the fault was not injected %d times", n, tc.times)
			}
			if want := map[Key]PartitionState{k: *state(StateMirroring, 3)}; !reflect.DeepEqual(got, want) || next != 1 {
				t.Errorf("Load = %+v, %d; want %+v, 1", got, next, want)
			}
		})
	}
}

func TestLoadRecordsOfOtherVersions(t *testing.T) {
	k := PartitionStateKey("m", "t", 0)
	good := state(StateMirroring, 1)
	newerKey := k.AppendTo(nil)
	newerKey[1] = 1 // key version 1
	unknownType := Key{Type: 9, Mirror: "m"}.AppendTo(nil)
	newerValue := laterVersion(*good, 2, []byte{1})
	tests := []struct {
		name    string
		raw     [][2][]byte
		want    map[Key]PartitionState
		wantErr error
		skipped int64
	}{
		{"newer key version skipped", [][2][]byte{{newerKey, good.AppendTo(nil)}}, map[Key]PartitionState{}, nil, 1},
		{"unknown record type skipped", [][2][]byte{{unknownType, []byte("whatever")}, {unknownType, nil}}, map[Key]PartitionState{}, nil, 1},
		{"newer value version read", [][2][]byte{{k.AppendTo(nil), newerValue}}, map[Key]PartitionState{k: *good}, nil, 0},
		{"mirror record with a newer value", [][2][]byte{{MirrorKey("m").AppendTo(nil), []byte{0, 1, 0}}}, map[Key]PartitionState{MirrorKey("m"): {}}, nil, 0},
		{"malformed value", [][2][]byte{{k.AppendTo(nil), []byte{0, 0, 1}}}, nil, ErrMalformed, 0},
		{"malformed key", [][2][]byte{{[]byte{0, 0, 2}, good.AppendTo(nil)}}, nil, ErrMalformed, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, cl := newCluster(t, 1)
			core, logs := observer.New(zap.WarnLevel)
			s := newStore(t, cl, NumPartitions(1), Logger(zap.New(core)))
			if err := s.EnsureTopic(testContext(t)); err != nil {
				t.Fatal(err)
			}
			produceRaw(t, newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())), 0, tc.raw...)
			got, _, err := s.Load(testContext(t), 0)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "offset 0") {
					t.Fatalf("Load = %v, %v; want an error wrapping %v naming offset 0", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Load = %+v, want %+v", got, tc.want)
			}
			var skipped int64
			for _, e := range logs.FilterMessageSnippet("skipped").All() {
				skipped += e.ContextMap()["skipped"].(int64)
			}
			if skipped != tc.skipped {
				t.Errorf("warned of %d skipped records, want %d", skipped, tc.skipped)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	_, cl := newCluster(t, 1)
	s := newStore(t, cl, NumPartitions(2))
	if _, _, err := s.Load(testContext(t), 0); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("Load without the topic = %v, want ErrTopicNotFound", err)
	}
	if _, err := s.NumPartitions(testContext(t)); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("NumPartitions without the topic = %v, want ErrTopicNotFound", err)
	}
	if err := s.EnsureTopic(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{-1, 2} {
		if _, _, err := s.Load(testContext(t), p); !errors.Is(err, ErrNoSuchPartition) {
			t.Errorf("Load(%d) = %v, want ErrNoSuchPartition", p, err)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	_, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 2)
	good := Record{PartitionStateKey("m", "t", 0), state(StateMirroring, 0)}
	tests := []struct {
		name      string
		partition int32
		recs      []Record
		want      error
	}{
		{"negative partition", -1, []Record{good}, ErrNoSuchPartition},
		{"unknown record type", 0, []Record{good, {Key{Type: 9, Mirror: "m"}, &PartitionState{}}}, ErrInvalidRecord},
		{"no mirror name", 0, []Record{{PartitionStateKey("", "t", 0), nil}}, ErrInvalidRecord},
		{"state in a mirror record", 0, []Record{{MirrorKey("m"), state(StateMirroring, 0)}}, ErrInvalidRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Write(testContext(t), tc.partition, tc.recs); !errors.Is(err, tc.want) {
				t.Fatalf("Write = %v, want %v", err, tc.want)
			}
		})
	}
	// Nothing was written by the refused calls.
	if got, next, err := s.Load(testContext(t), 0); err != nil || len(got) != 0 || next != 0 {
		t.Errorf("Load after refused writes = %v, %d, %v; want nothing", got, next, err)
	}
	s.Close()
	if err := s.Write(testContext(t), 0, []Record{good}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

// TestWriteProducesIdempotentAcksAll inspects the Produce requests: acks=all
// and a producer ID (idempotence), one partition.
func TestWriteProducesIdempotentAcksAll(t *testing.T) {
	c, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 3)
	var (
		mu   sync.Mutex
		seen []string
	)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil {
					seen = append(seen, "unreadable batch: "+err.Error())
					continue
				}
				seen = append(seen, "acks="+strconv.Itoa(int(pr.Acks))+" partition="+strconv.Itoa(int(rp.Partition))+
					" idempotent="+strconv.FormatBool(b.ProducerID >= 0 && b.FirstSequence >= 0))
			}
		}
		return nil, nil, false
	})
	write(t, s, 1, Record{PartitionStateKey("m", "t", 0), state(StateMirroring, 0)}, Record{MirrorKey("m"), &PartitionState{}})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no Produce request seen")
	}
	for _, s := range seen {
		if s != "acks=-1 partition=1 idempotent=true" {
			t.Errorf("produced %s, want acks=-1 partition=1 idempotent=true", s)
		}
	}
}

func TestDump(t *testing.T) {
	c, cl := newCluster(t, 1)
	s := newTopicStore(t, cl, 2)
	k := PartitionStateKey("m", "orders", 4)
	p := PartitionFor("m", 2)
	write(t, s, p,
		Record{MirrorKey("m"), &PartitionState{}},
		Record{k, &PartitionState{State: StateLogTruncation, PreviousState: StateNotRecorded, LastSourceOffset: -1}},
		Record{k, &PartitionState{State: StateMirroring, PreviousState: StateLogTruncation, LastSourceOffset: 12,
			SourceEpochs: []EpochStart{{Epoch: 0, StartOffset: 0}}, WriterLeaderEpoch: 3, WriterBrokerID: 2, UpdatedMs: 99}},
		Record{k, nil},
	)
	raw := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceRaw(t, raw, 1-p, [2][]byte{k.AppendTo(nil), []byte{0, 0, 2}}, [2][]byte{[]byte("junk"), []byte("x")})

	var out bytes.Buffer
	if err := Dump(testContext(t), cl, &out); err != nil {
		t.Fatalf("Dump: %v", err)
	}
	type line struct {
		Partition int32           `json:"partition"`
		Offset    int64           `json:"offset"`
		Key       json.RawMessage `json:"key"`
		Value     json.RawMessage `json:"value"`
	}
	var lines []line
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 6 {
		t.Fatalf("Dump printed %d lines, want 6:\n%s", len(lines), out.String())
	}
	wantKey := `{"type":2,"mirror":"m","topic":"orders","partition":4}`
	byPartition := map[int32][]line{}
	for _, l := range lines {
		byPartition[l.Partition] = append(byPartition[l.Partition], l)
	}
	good, bad := byPartition[p], byPartition[1-p]
	checks := []struct {
		name      string
		got, want string
	}{
		{"mirror key", string(good[0].Key), `{"type":3,"mirror":"m","topic":"","partition":-1}`},
		{"mirror value", string(good[0].Value), `{}`},
		{"first state key", string(good[1].Key), wantKey},
		{"first state", string(good[1].Value), `{"state":"LOG_TRUNCATION","previousState":"NOT_RECORDED","retryAttempt":0,"lastSourceOffset":-1,"sourceEpochs":[],"writerLeaderEpoch":0,"writerBrokerId":0,"updatedMs":0}`},
		{"second state", string(good[2].Value), `{"state":"MIRRORING","previousState":"LOG_TRUNCATION","retryAttempt":0,"lastSourceOffset":12,"sourceEpochs":[{"epoch":0,"startOffset":0}],"writerLeaderEpoch":3,"writerBrokerId":2,"updatedMs":99}`},
		{"tombstone", string(good[3].Value), `null`},
		{"offsets", strconv.Itoa(int(good[3].Offset)), "3"},
		{"undecodable value key", string(bad[0].Key), wantKey},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
	for i, l := range bad {
		var v struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(l.Value, &v); err != nil || v.Error == "" {
			t.Errorf("bad record %d: value %s is not an error object", i, l.Value)
		}
	}
	if !strings.Contains(string(bad[1].Key), `"error"`) {
		t.Errorf("undecodable key printed as %s, want an error object", bad[1].Key)
	}
}

func TestDumpWithoutTopic(t *testing.T) {
	_, cl := newCluster(t, 1)
	if err := Dump(testContext(t), cl, &bytes.Buffer{}); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("Dump = %v, want ErrTopicNotFound", err)
	}
}

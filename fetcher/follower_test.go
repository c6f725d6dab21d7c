package fetcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// followerBed makes a two-broker kfake source act as Kafka does with
// replica.selector.class=RackAwareReplicaSelector and the follower in the
// client's rack (kfake ignores the rack): the leader answers a Fetch that
// names the rack with the follower as preferred read replica and no
// records; the follower serves what the leader would (kfake's follower
// cannot, so the fetch is passed on to the leader) with a high watermark of
// 1, far behind the leader's. The first failFollower fetches of the
// follower fail: OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, then a
// closed connection, in turn.
type followerBed struct {
	leader, follower int32
	redirects        atomic.Int64 // leader fetches answered with the preferred replica
	served           atomic.Int64 // follower fetches answered with records
	fetches          atomic.Int64 // follower fetches answered
	failed           atomic.Int64 // follower fetches answered with an error
	failFollower     int64
	startLists       atomic.Int64 // ListOffsets for the log start offset (-2)
	mu               sync.Mutex
	racks            map[string]int // rack of the fetcher's Fetch requests -> count
}

const (
	testRack     = "az-b"
	followerHWAt = 1 // the high watermark the follower answers
)

func newFollowerBed(t *testing.T, e *testEnv, topic string, failFollower int64) *followerBed {
	t.Helper()
	b := &followerBed{leader: e.src.LeaderFor(topic, 0), failFollower: failFollower, racks: map[string]int{}}
	b.follower = 1 - b.leader
	direct := e.client(e.src)
	e.src.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		for _, rt := range kreq.(*kmsg.ListOffsetsRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Timestamp == -2 {
					b.startLists.Add(1)
				}
			}
		}
		return nil, nil, false
	})
	e.src.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if req.ReplicaID != -1 || len(req.Topics) == 0 {
			return nil, nil, false
		}
		b.mu.Lock()
		b.racks[req.Rack]++
		b.mu.Unlock()
		if req.Rack == "" {
			return nil, nil, false // the leader serves: passed-on and one-off fetches
		}
		node := e.src.CurrentNode()
		if node == b.follower && b.failed.Load() < b.failFollower {
			switch b.failed.Add(1) % 3 {
			case 1:
				return answerAll(req, func(rp *kmsg.FetchResponseTopicPartition) { rp.ErrorCode = kerr.OffsetOutOfRange.Code }), nil, true
			case 2:
				return answerAll(req, func(rp *kmsg.FetchResponseTopicPartition) { rp.ErrorCode = kerr.NotLeaderForPartition.Code }), nil, true
			default:
				return nil, errors.New("follower connection closed"), true
			}
		}
		// Pass the fetch on to the leader without the rack, while kfake
		// goes on with other requests.
		fwd := *req
		fwd.Rack = ""
		fwd.MaxWaitMillis = min(fwd.MaxWaitMillis, 20)
		var kresp kmsg.Response
		var err error
		e.src.SleepControl(func() {
			kresp, err = direct.Broker(int(b.leader)).Request(context.Background(), &fetchRequest{&fwd})
		})
		if err != nil {
			return nil, err, true
		}
		resp := kresp.(*kmsg.FetchResponse)
		resp.SetVersion(req.GetVersion())
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				rp := &resp.Topics[i].Partitions[j]
				if node == b.follower {
					b.fetches.Add(1)
					if len(rp.RecordBatches) > 0 {
						b.served.Add(1)
					}
					rp.HighWatermark = followerHWAt
					rp.PreferredReadReplica = -1
					continue
				}
				b.redirects.Add(1)
				rp.RecordBatches, rp.PreferredReadReplica = nil, b.follower
			}
		}
		return resp, nil, true
	})
	return b
}

// answerAll answers every partition of req, set by fn.
func answerAll(req *kmsg.FetchRequest, fn func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			fn(&p)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// TestFollowerFetching checks KIP-392 follower fetching: with client.rack
// (MirrorSettings.ClientRack) the fetch sessions send the rack, a
// partition whose leader names a preferred read replica is fetched from
// that follower, every record arrives at its offset, the lag and catch-up
// go by the leader's high watermark rather than the follower's trailing
// one, errors of the follower (OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER,
// a closed connection) send the partition back to the leader without a
// realignment (no fillers, no LOG_TRUNCATION) and never fail it, and
// after PreferredReplicaMaxAge the leader is asked again. Without a rack
// no request carries one and everything comes from the leader.
func TestFollowerFetching(t *testing.T) {
	const topic = "ff"
	e := newTestEnv(t, 2, map[string]int32{topic: 1})
	bed := newFollowerBed(t, e, topic, 3)
	prod := e.producer(kgo.NoCompression())
	e.produce(prod, topic, []int32{0}, 0, 200, 10)

	m := e.newManager()
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{ClientRack: testRack, PreferredReplicaMaxAge: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	p := Partition{Mirror: testMirror, Topic: topic, Partition: 0}
	if err := m.Start(p); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(m, topic, []int32{0})
	// More while the partition is on the follower: its high watermark (1)
	// must not make the partition look caught up.
	e.produce(prod, topic, []int32{0}, 200, 100, 10)
	e.waitCaughtUp(m, topic, []int32{0})
	var st PartitionStatus
	testwait.For(t, waitTimeout, "the leader's high watermark 300 and lag 0", func() bool {
		st = waitState(t, m, p, StateMirroring)
		if st.SourceHighWatermark < 200 {
			t.Fatalf("status %+v: the source high watermark is the follower's", st)
		}
		return st.SourceHighWatermark == 300 && st.Lag == 0
	})
	// Fetches from the follower go on (each answers its high watermark
	// 1): the status keeps the leader's.
	fetches := bed.fetches.Load()
	testwait.For(t, waitTimeout, "five more fetches from the follower", func() bool {
		if st := waitState(t, m, p, StateMirroring); st.SourceHighWatermark != 300 {
			t.Fatalf("status %+v while fetched from the follower: want the leader's high watermark 300", st)
		}
		return bed.fetches.Load() >= fetches+5
	})
	if got := e.compareTopic(topic); got != 300 {
		t.Fatalf("compared %d records, want 300", got)
	}
	if st.FillerRecords != 0 {
		t.Fatalf("%d filler records: an error of the follower was taken for a gap", st.FillerRecords)
	}
	mirroring := false
	for _, s := range e.events.statesOf(p) {
		mirroring = mirroring || s == StateMirroring
		if mirroring && s == StateLogTruncation {
			t.Fatalf("states %v: realigned after an error of the follower", e.events.statesOf(p))
		}
	}
	if bed.failed.Load() != 3 || bed.served.Load() == 0 {
		t.Fatalf("follower fetches: %d failed, %d served records; want 3 failed and some served", bed.failed.Load(), bed.served.Load())
	}
	// Three errors and the redirect before each: at least four redirects.
	if n := bed.redirects.Load(); n < 4 {
		t.Fatalf("%d redirects to the follower, want at least 4 (the first, and one after each follower error)", n)
	}
	if v := metricValue(t, m.met.followerBytes.WithLabelValues(testMirror)); v <= 0 {
		t.Fatalf("sidemirror_follower_fetch_bytes_total %v, want > 0", v)
	}
	testwait.For(t, waitTimeout, "the partition fetched from the follower", func() bool {
		st := m.Status()[0]
		return st.FromFollower && st.Follower == bed.follower
	})
	// The preferred replica expires: the leader is asked again and names
	// it again, without any error.
	before := bed.redirects.Load()
	testwait.For(t, waitTimeout, "a redirect after the preferred replica expired", func() bool {
		return bed.redirects.Load() > before
	})
	if bed.failed.Load() != 3 {
		t.Fatalf("%d follower errors, want 3", bed.failed.Load())
	}
	bed.mu.Lock()
	racks := bed.racks[testRack]
	bed.mu.Unlock()
	if racks == 0 {
		t.Fatalf("no Fetch request carried rack %q: %v", testRack, bed.racks)
	}
}

// TestFollowerFetchingWithoutRack checks that a mirror without client.rack
// sends no rack and is never redirected.
func TestFollowerFetchingWithoutRack(t *testing.T) {
	const topic = "fn"
	e := newTestEnv(t, 2, map[string]int32{topic: 1})
	bed := newFollowerBed(t, e, topic, 0)
	e.produce(e.producer(kgo.NoCompression()), topic, []int32{0}, 0, 50, 10)
	m := e.newManager()
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	if got := e.compareTopic(topic); got != 50 {
		t.Fatalf("compared %d records, want 50", got)
	}
	bed.mu.Lock()
	defer bed.mu.Unlock()
	if len(bed.racks) != 1 || bed.racks[""] == 0 || bed.redirects.Load() != 0 || m.Status()[0].FromFollower {
		t.Fatalf("racks of Fetch requests %v, %d redirects: want only the empty rack and none", bed.racks, bed.redirects.Load())
	}
}

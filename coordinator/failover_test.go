package coordinator

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

func TestReorderReplicas(t *testing.T) {
	all := func(int32) bool { return true }
	except := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return !slices.Contains(ids, id) }
	}
	for _, tc := range []struct {
		name     string
		replicas []int32
		isr      []int32
		usable   func(int32) bool
		load     map[int32]int
		want     []int32 // nil: no replica qualifies
	}{
		{name: "next live in-sync replica first", replicas: []int32{2, 1, 3}, isr: []int32{2, 1, 3}, usable: all, want: []int32{1, 2, 3}},
		{name: "from not first", replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, usable: except(1), want: []int32{3, 1, 2}},
		{name: "out of sync replica skipped", replicas: []int32{2, 1, 3}, isr: []int32{2, 3}, usable: all, want: []int32{3, 2, 1}},
		{name: "dead sidecar skipped", replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}, usable: except(1), want: []int32{3, 2, 1}},
		{name: "least loaded", replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}, usable: all, load: map[int32]int{1: 5, 3: 2}, want: []int32{3, 2, 1}},
		{name: "tie keeps replica order", replicas: []int32{2, 3, 1}, isr: []int32{1, 2, 3}, usable: all, load: map[int32]int{1: 2, 3: 2}, want: []int32{3, 2, 1}},
		{name: "five replicas", replicas: []int32{5, 4, 3, 2, 1}, isr: []int32{1, 2, 3, 4, 5}, usable: except(4), load: map[int32]int{5: 3, 3: 1}, want: []int32{1, 5, 4, 3, 2}},
		{name: "only from in sync", replicas: []int32{2, 1, 3}, isr: []int32{2}, usable: all},
		{name: "no live sidecar", replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}, usable: except(1, 3)},
		{name: "single replica", replicas: []int32{2}, isr: []int32{2}, usable: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.replicas)
			got, ok := reorderReplicas(tc.replicas, tc.isr, 2, tc.usable, tc.load)
			if !slices.Equal(tc.replicas, in) {
				t.Fatalf("the input was modified: %v", tc.replicas)
			}
			if tc.want == nil {
				if ok {
					t.Fatalf("got %v, want no candidate", got)
				}
				return
			}
			if !ok || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v (%v), want %v", got, ok, tc.want)
			}
			if !sameSet(got, tc.replicas) || len(got) != len(tc.replicas) {
				t.Fatalf("replica set changed: %v -> %v", tc.replicas, got)
			}
		})
	}
}

// moveState is a state with active topic a (3 partitions), paused topic p
// and stopped topic s, as the fixture has them.
func moveState(t *testing.T, cmds ...fsm.Command) *fsm.State {
	t.Helper()
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, cmds...)
	return s
}

func TestPlanAway(t *testing.T) {
	md := map[string]map[int32]partitionInfo{
		"a": {
			0: {leader: 2, replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}},
			1: {leader: 1, replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}},
			2: {leader: 2, replicas: []int32{2, 3, 1}, isr: []int32{2}}, // nobody else in sync
		},
		"b": {
			0: {leader: 2, replicas: []int32{3, 2, 1}, isr: []int32{1, 2, 3}}, // 3 preferred, 2 leads
			1: {leader: 2, replicas: []int32{2, 3, 1}, isr: []int32{1, 2, 3}},
			2: {leader: 2, replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}},
		},
		"p": {0: {leader: 2, replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}}},
	}
	md["b"][3] = partitionInfo{leader: 2, replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}} // 1 and 3 drive it (stale)
	md["b"][4] = partitionInfo{leader: 2, replicas: []int32{2, 1, 3}, isr: []int32{1, 2, 3}} // 1 drives it, 3 cannot be asked
	// b-1 was moved before.
	st := moveState(t, fsmtest.RecordOrder("b", 1, 2, 1, 3))
	back := []leaderMove{{tp: fsm.TopicPartition{Topic: "b", Partition: 2}, back: true}}
	drives := func(broker int32, tp fsm.TopicPartition) (bool, error) {
		switch {
		case tp == fsm.TopicPartition{Topic: "b", Partition: 3}:
			return true, nil
		case tp == fsm.TopicPartition{Topic: "b", Partition: 4} && broker == 3:
			return false, errors.New("timeout")
		}
		return tp == fsm.TopicPartition{Topic: "b", Partition: 4}, nil
	}
	moves, skips := planAway(st, md, []int32{2}, func(id int32) bool { return id != 2 }, drives, back)
	want := []leaderMove{
		{tp: fsm.TopicPartition{Topic: "a", Partition: 0}, from: 2, to: 3, replicas: []int32{3, 2, 1}, original: []int32{2, 1, 3}}, // 3 leads less than 1
		{tp: fsm.TopicPartition{Topic: "b", Partition: 0}, from: 2, to: 3},                                                         // preferred already: elect only
		{tp: fsm.TopicPartition{Topic: "b", Partition: 1}, from: 2, to: 1, replicas: []int32{1, 2, 3}},                             // recorded before: keep that record
	}
	if !reflect.DeepEqual(moves, want) {
		t.Fatalf("moves\n got %+v\nwant %+v", moves, want)
	}
	var skipped []string
	for _, sk := range skips {
		skipped = append(skipped, tpKey(sk.tp))
	}
	if want := []string{"a-2", "b-3", "b-4"}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped %v, want %v", skipped, want)
	}
	if moves, skips := planAway(st, md, nil, func(int32) bool { return true }, drives, nil); moves != nil || skips != nil {
		t.Fatalf("nobody dead: moves %v skips %v", moves, skips)
	}
}

func TestPlanBack(t *testing.T) {
	st := moveState(t, fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{
		{Topic: "a", Partition: 0, Replicas: []int32{2, 1, 3}}, // back: restore and elect
		{Topic: "a", Partition: 1, Replicas: []int32{2, 1, 3}}, // its sidecar still drives it
		{Topic: "a", Partition: 2, Replicas: []int32{3, 1, 2}}, // its sidecar is not back
		{Topic: "b", Partition: 0, Replicas: []int32{2, 3, 1}}, // home leads already: reorder only, no fence
		{Topic: "b", Partition: 1, Replicas: []int32{2, 3, 1}}, // restored already: clear
		{Topic: "b", Partition: 2, Replicas: []int32{2, 3, 1}}, // home out of sync
		{Topic: "b", Partition: 3, Replicas: []int32{2, 3, 1}}, // replica set changed: clear
		{Topic: "b", Partition: 4, Replicas: []int32{4, 3, 1}}, // cannot ask its sidecar
		{Topic: "p", Partition: 0, Replicas: []int32{2, 1, 3}}, // topic gone: clear
		{Topic: "s", Partition: 0, Replicas: []int32{2, 1}},    // stopped topic: restored like any other
	}})
	md := map[string]map[int32]partitionInfo{
		"a": {
			0: {leader: 1, replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}},
			1: {leader: 1, replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}},
			2: {leader: 1, replicas: []int32{1, 3, 2}, isr: []int32{1, 2, 3}},
		},
		"b": {
			0: {leader: 2, replicas: []int32{3, 2, 1}, isr: []int32{1, 2, 3}},
			1: {leader: 2, replicas: []int32{2, 3, 1}, isr: []int32{1, 2, 3}},
			2: {leader: 3, replicas: []int32{3, 2, 1}, isr: []int32{1, 3}},
			3: {leader: 3, replicas: []int32{3, 2, 4}, isr: []int32{2, 3, 4}},
			4: {leader: 3, replicas: []int32{3, 4, 1}, isr: []int32{1, 3, 4}},
		},
		"s": {0: {leader: 1, replicas: []int32{1, 2}, isr: []int32{1, 2}}},
	}
	backIDs := []int32{1, 2, 4}
	var asked []string
	drives := func(broker int32, tp fsm.TopicPartition) (bool, error) {
		asked = append(asked, tpKey(tp))
		if broker == 4 {
			return false, errors.New("connection refused")
		}
		return tp == fsm.TopicPartition{Topic: "a", Partition: 1}, nil
	}
	moves, clears, skips := planBack(st, md, func(id int32) bool { return slices.Contains(backIDs, id) }, drives)
	want := []leaderMove{
		{tp: fsm.TopicPartition{Topic: "a", Partition: 0}, from: 1, to: 2, replicas: []int32{2, 1, 3}, back: true},
		{tp: fsm.TopicPartition{Topic: "b", Partition: 0}, from: 2, to: 2, replicas: []int32{2, 3, 1}, back: true},
		{tp: fsm.TopicPartition{Topic: "s", Partition: 0}, from: 1, to: 2, replicas: []int32{2, 1}, back: true},
	}
	if !reflect.DeepEqual(moves, want) {
		t.Fatalf("moves\n got %+v\nwant %+v", moves, want)
	}
	if want := []fsm.TopicPartition{{Topic: "b", Partition: 1}, {Topic: "b", Partition: 3}, {Topic: "p", Partition: 0}}; !reflect.DeepEqual(clears, want) {
		t.Fatalf("clears %v, want %v", clears, want)
	}
	var skipped []string
	for _, sk := range skips {
		skipped = append(skipped, tpKey(sk.tp))
	}
	if want := []string{"a-1", "b-2", "b-3", "b-4"}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped %v, want %v", skipped, want)
	}
	if want := []string{"a-0", "a-1", "b-4", "s-0"}; !slices.Equal(asked, want) {
		t.Fatalf("asked what the sidecars drive for %v, want %v (never for a partition home leads)", asked, want)
	}
}

func TestGroupByTopic(t *testing.T) {
	got := groupByTopic([]fsm.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}, {Topic: "a", Partition: 1}})
	if want := map[string][]int32{"a": {2, 1}, "b": {0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// probeSidecars asks every registered sidecar but itself, bounds each check
// by failoverProbeTimeout, and feeds a liveness tracker.
func TestProbeSidecars(t *testing.T) {
	st := fsm.NewState()
	for id, addr := range map[int32]string{1: "self:9191", 2: "dead:9191", 3: "live:9191", 4: "frozen:9191", 5: ""} {
		st.Sidecars[id] = &fsm.SidecarInfo{ID: id, RaftAddr: "r", AdminAddr: addr}
	}
	f := newFailover(failover{brokerID: 1, timeout: 15 * time.Second, now: time.Now, log: zap.NewNop()})
	var mu sync.Mutex
	var asked []string
	f.probe = func(ctx context.Context, addr string) error {
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		switch addr {
		case "live:9191":
			return nil
		case "frozen:9191":
			<-ctx.Done()
			return ctx.Err()
		}
		return errors.New("connection refused")
	}
	start := time.Now()
	got := f.probeSidecars(context.Background(), st)
	if d := time.Since(start); d > failoverProbeTimeout+time.Second {
		t.Fatalf("a round took %v, want about %v at most", d, failoverProbeTimeout)
	}
	if want := map[int32]bool{2: false, 3: true, 4: false, 5: false}; !reflect.DeepEqual(got, want) {
		t.Fatalf("answered %v, want %v", got, want)
	}
	slices.Sort(asked)
	if want := []string{"dead:9191", "frozen:9191", "live:9191"}; !slices.Equal(asked, want) {
		t.Fatalf("probed %v, want %v (never itself, never an empty address)", asked, want)
	}

	// Fed to the tracker round after round, the silent ones die after the
	// timeout and the live one stays.
	now := time.Unix(0, 0)
	var died []int32
	for i := range 16 {
		d, _ := f.live.observe(now, got)
		if i < 15 && len(d) > 0 {
			t.Fatalf("%v died after %ds", d, i)
		}
		died = append(died, d...)
		now = now.Add(time.Second)
	}
	if want := []int32{2, 4, 5}; !slices.Equal(died, want) || f.live.aliveCount() != 2 {
		t.Fatalf("died %v (alive %d), want %v and 2 alive", died, f.live.aliveCount(), want)
	}
}

package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
)

// applyingController is a controller over an in-memory fsm.State, applying
// commands as raft would.
type applyingController struct{ st *fsm.State }

func (c *applyingController) State() *fsm.State { return c.st.Clone() }
func (c *applyingController) IsLeader() bool    { return true }
func (c *applyingController) Apply(_ context.Context, cmd fsm.Command) (fsm.Result, error) {
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	return fsm.ApplyTo(c.st, b), nil
}

// fixedRows is a localPartitions with the rows the test sets.
type fixedRows struct {
	rows  []protocol.DescribedMirror
	kicks int
}

func (f *fixedRows) LocalRows([]string) []protocol.DescribedMirror { return f.rows }
func (f *fixedRows) Kick()                                         { f.kicks++ }

// TestRecoverTopics checks --recover (RecoverMirrorTopics): the topics with
// a FAILED partition get a new restart generation (which their owners act
// on), a regex leaves healthy topics alone, a healthy topic named literally
// and a diverged topic get errors that say why, and an unknown mirror is
// refused.
func TestRecoverTopics(t *testing.T) {
	st := fsm.NewState()
	st.Mirrors["m"] = &fsm.Mirror{Name: "m", Config: map[string]string{fsm.BootstrapServersKey: "src:9092"}}
	for _, name := range []string{"orders-eu", "orders-us", "payments", "ledger"} {
		st.Topics[name] = &fsm.MirrorTopic{Name: name, Mirror: "m", Partitions: 2, Status: fsm.TopicActive}
	}
	st.Topics["ledger"].Diverged = []fsm.Divergence{{Partition: 1, Offset: 7}}
	row := func(p int32, state string) protocol.PartitionDetail {
		d := protocol.PartitionDetail{}
		d.Default()
		d.PartitionIndex, d.State = p, state
		return d
	}
	local := &fixedRows{rows: []protocol.DescribedMirror{{MirrorName: "m", Topics: []protocol.DescribedTopic{
		{TopicName: "orders-eu", Partitions: []protocol.PartitionDetail{row(0, "MIRRORING"), row(1, "FAILED")}},
		{TopicName: "orders-us", Partitions: []protocol.PartitionDetail{row(0, "MIRRORING"), row(1, "MIRRORING")}},
		{TopicName: "payments", Partitions: []protocol.PartitionDetail{row(0, "MIRRORING"), row(1, "MIRRORING")}},
	}}}}
	ctl := &applyingController{st: st}
	a := &admin{ctl: ctl, local: local, now: time.Now, log: zaptest.NewLogger(t)}

	resp := a.recoverTopics(context.Background(), &protocol.RecoverMirrorTopicsRequest{MirrorName: "m",
		TopicPatterns: []string{"orders-.*", "payments", "ledger"}}).(*protocol.RecoverMirrorTopicsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level error %d %s", resp.ErrorCode, deref(resp.ErrorMessage))
	}
	got := map[string]protocol.MirrorTopicResult{}
	for _, r := range resp.Topics {
		got[r.Name] = r
	}
	if len(got) != 3 {
		t.Fatalf("results %+v: want orders-eu, payments and ledger only", resp.Topics)
	}
	if r := got["orders-eu"]; r.ErrorCode != 0 {
		t.Fatalf("orders-eu: %d %s", r.ErrorCode, deref(r.ErrorMessage))
	}
	if r := got["payments"]; r.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(deref(r.ErrorMessage), "has no FAILED partition") {
		t.Fatalf("payments (named, healthy): %d %s", r.ErrorCode, deref(r.ErrorMessage))
	}
	if r := got["ledger"]; r.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(deref(r.ErrorMessage), "--start --reseed") {
		t.Fatalf("ledger (diverged): %d %s", r.ErrorCode, deref(r.ErrorMessage))
	}
	if gen := ctl.st.Topics["orders-eu"].RestartGen; gen != 1 {
		t.Fatalf("orders-eu restart generation %d, want 1", gen)
	}
	for _, name := range []string{"orders-us", "payments", "ledger"} {
		if gen := ctl.st.Topics[name].RestartGen; gen != 0 {
			t.Fatalf("%s restarted (generation %d)", name, gen)
		}
	}
	if local.kicks == 0 {
		t.Fatal("the owners were not kicked")
	}

	resp = a.recoverTopics(context.Background(), &protocol.RecoverMirrorTopicsRequest{MirrorName: "nope",
		TopicPatterns: []string{".*"}}).(*protocol.RecoverMirrorTopicsResponse)
	if resp.ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("unknown mirror: error %d", resp.ErrorCode)
	}
}

package statestore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestSidecarRegistry registers sidecars (creating the topic), re-registers
// one at a new address and tombstones another: ReadSidecars returns the
// latest of each, Load of the registry's partition leaves the records out
// without a warning about unknown types, and Dump renders them.
func TestSidecarRegistry(t *testing.T) {
	c, cl := newCluster(t, 1)
	ctx := testContext(t)
	if _, err := ReadSidecars(ctx, cl); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("ReadSidecars without the topic: %v, want ErrTopicNotFound", err)
	}
	core, logs := observer.New(zap.DebugLevel)
	s := newStore(t, cl, NumPartitions(3), Logger(zap.New(core)))
	for _, r := range []struct {
		id   int32
		addr string
	}{{1, "10.0.0.1:9191"}, {2, "10.0.0.2:9191"}, {3, "10.0.0.3:9191"}, {2, "10.0.0.20:9191"}} {
		if err := s.RegisterSidecar(ctx, Sidecar{BrokerID: r.id, AdminAddress: r.addr, AdminProtocol: "PLAINTEXT"}); err != nil {
			t.Fatalf("RegisterSidecar(%d, %s): %v", r.id, r.addr, err)
		}
	}
	write(t, s, SidecarPartition, Record{Key: MirrorKey("m"), Value: &PartitionState{}},
		Record{Key: PartitionStateKey("m", "t", 0), Value: state(StateMirroring, 7)})
	manual := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceRaw(t, manual, SidecarPartition, [2][]byte{SidecarKey(3).AppendTo(nil), nil})

	got, err := ReadSidecars(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].AdminAddress != "10.0.0.1:9191" || got[2].AdminAddress != "10.0.0.20:9191" ||
		got[1].BrokerID != 1 || got[2].BrokerID != 2 || got[2].UpdatedMs <= 0 || got[2].AdminProtocol != "PLAINTEXT" {
		t.Fatalf("ReadSidecars = %+v, want sidecars 1 at 10.0.0.1:9191 and 2 at 10.0.0.20:9191", got)
	}

	states, _, err := s.Load(ctx, SidecarPartition)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Errorf("Load = %v, want the mirror's two records alone", states)
	}
	if n := logs.FilterMessageSnippet("skipped records").Len(); n != 0 {
		t.Errorf("Load warned about %d unknown records", n)
	}

	var dump bytes.Buffer
	if err := Dump(ctx, cl, &dump); err != nil {
		t.Fatal(err)
	}
	if want := `"key":{"type":4,"mirror":"","topic":"","partition":2},"value":{"adminAddress":"10.0.0.20:9191","adminSecurityProtocol":"PLAINTEXT","updatedMs":`; !strings.Contains(dump.String(), want) {
		t.Errorf("Dump has no %s:\n%s", want, dump.String())
	}

	if err := s.RegisterSidecar(ctx, Sidecar{BrokerID: -1, AdminAddress: "10.0.0.1:9191"}); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("RegisterSidecar(-1): %v, want ErrInvalidRecord", err)
	}
}

func TestSidecarValue(t *testing.T) {
	in := Sidecar{BrokerID: 4, AdminAddress: "h:1", AdminProtocol: "SASL_SSL", UpdatedMs: 99}
	b := appendSidecarValue(nil, in)
	if out, err := readSidecarValue(SidecarKey(4), b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	// A later version's extra fields are ignored.
	if out, err := readSidecarValue(SidecarKey(4), append(b, 1, 2, 3)); err != nil || out != in {
		t.Fatalf("with trailing fields: %+v, %v", out, err)
	}
	if _, err := readSidecarValue(SidecarKey(4), b[:len(b)-1]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v, want ErrMalformed", err)
	}
}

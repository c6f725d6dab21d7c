package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
)

// TestConsumerKeys checks the Kafka consumer properties of a mirror config:
// the fetch sizes reach the data plane's settings and not the SourceDialer,
// bad values are refused by name, and the consumer properties that make no
// sense for a mirror are refused with the reason.
func TestConsumerKeys(t *testing.T) {
	cfg := map[string]string{
		fsm.BootstrapServersKey: "src:9092", "client.id": "mirror-a",
		"fetch.max.bytes": "10485760", "fetch.min.bytes": "1024", "fetch.max.wait.ms": "250", "max.partition.fetch.bytes": "2097152",
		RackKey: " eu-west-1b ", "metadata.max.age.ms": "60000",
	}
	if err := checkMirrorKeys(cfg); err != nil {
		t.Fatal(err)
	}
	got := dataPlaneSettings(fsm.NewState(), &fsm.Mirror{Name: "m", Config: cfg})
	want := fetcher.MirrorSettings{FetchMaxBytes: 10 << 20, FetchMinBytes: 1024, FetchMaxWait: 250 * time.Millisecond, PartitionMaxBytes: 2 << 20,
		ClientRack: "eu-west-1b", PreferredReplicaMaxAge: time.Minute}
	if got.FetchMaxBytes != want.FetchMaxBytes || got.FetchMinBytes != want.FetchMinBytes || got.FetchMaxWait != want.FetchMaxWait ||
		got.PartitionMaxBytes != want.PartitionMaxBytes || got.ClientRack != want.ClientRack || got.PreferredReplicaMaxAge != want.PreferredReplicaMaxAge {
		t.Fatalf("data plane settings %+v, want the fetch sizes %+v", got, want)
	}
	if d := dataPlaneSettings(fsm.NewState(), &fsm.Mirror{Name: "m", Config: map[string]string{}}); d.FetchMaxBytes != 0 || d.FetchMaxWait != 0 ||
		d.ClientRack != "" || d.PreferredReplicaMaxAge != 0 {
		t.Fatalf("a mirror without fetch sizes gets %+v, want zeros (the fetcher's)", d)
	}
	src := sourceConfig(cfg)
	if _, ok := src[RackKey]; ok {
		t.Errorf("%s reaches the SourceDialer", RackKey)
	}
	if src["metadata.max.age.ms"] != "60000" {
		t.Errorf("metadata.max.age.ms does not reach the SourceDialer: %v", src)
	}
	for k := range fetchKeys {
		if _, ok := src[k]; ok {
			t.Errorf("%s reaches the SourceDialer", k)
		}
	}
	if src["client.id"] != "mirror-a" || src[fsm.BootstrapServersKey] != "src:9092" {
		t.Errorf("source config %v lost client.id or bootstrap.servers", src)
	}

	for k, v := range map[string]string{
		"fetch.max.bytes": "0", "fetch.min.bytes": "lots", "fetch.max.wait.ms": "600000", "max.partition.fetch.bytes": "-1",
	} {
		err := checkMirrorKeys(map[string]string{k: v})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want one naming the key", k, v, err)
		}
	}
	for k, why := range map[string]string{
		"group.id": "no consumer group", "auto.offset.reset": "log start offset", "isolation.level": "read_uncommitted",
		"enable.auto.commit": "commits no offsets",
	} {
		err := checkMirrorKeys(map[string]string{k: "x"})
		if err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: error %v, want one naming the key and %q", k, err, why)
		}
	}
}

// optsPlane is a DataPlane that records the source options of each mirror.
type optsPlane struct {
	scriptedPlane
	opts map[string][]kgo.Opt
}

func (d *optsPlane) SetMirror(name string, opts []kgo.Opt, _ fetcher.MirrorSettings) error {
	d.opts[name] = opts
	return nil
}

// TestFetcherClientID checks that the source options the data plane gets
// for a mirror set no client ID unless the mirror config has client.id:
// the data plane names the client as the KIP does (fetcher.FetcherClientID,
// which source quotas use) unless the options name it, so a client ID set
// here would hide the KIP's.
func TestFetcherClientID(t *testing.T) {
	plane := &optsPlane{scriptedPlane: scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}, opts: map[string][]kgo.Opt{}}
	dial := func(cfg map[string]string) ([]kgo.Opt, error) { // as sidecar.SourceKgoOpts maps client.id
		opts := []kgo.Opt{kgo.SeedBrokers(cfg[fsm.BootstrapServersKey])}
		if id := cfg["client.id"]; id != "" {
			opts = append(opts, kgo.ClientID(id))
		}
		return opts, nil
	}
	r := newReconciler(&reconciler{brokerID: 4, dp: plane, dial: dial, log: zaptest.NewLogger(t)})
	st := fsm.NewState()
	st.Mirrors["my-mirror"] = &fsm.Mirror{Name: "my-mirror", Config: map[string]string{fsm.BootstrapServersKey: "src:9092"}}
	st.Mirrors["named"] = &fsm.Mirror{Name: "named", Config: map[string]string{fsm.BootstrapServersKey: "src:9092", "client.id": "dr-fetcher"}}
	r.syncSources(st)
	// The data plane's default goes first (fetcher.Manager.SetMirror); the
	// options may override it.
	for mirror, want := range map[string]string{"my-mirror": "broker-4-fetcher-0-mirror-my-mirror", "named": "dr-fetcher"} {
		opts, ok := plane.opts[mirror]
		if !ok {
			t.Fatalf("mirror %s: no source options given to the data plane", mirror)
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ClientID(fetcher.FetcherClientID(4, mirror))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		got := cl.OptValue(kgo.ClientID)
		cl.Close()
		if got != want {
			t.Errorf("mirror %s: client ID %v, want %s", mirror, got, want)
		}
	}
}

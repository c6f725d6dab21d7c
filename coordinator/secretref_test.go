package coordinator

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/protocol"
)

// fixedController is a controller whose state the test sets; it is always
// caught up.
type fixedController struct{ st *fsm.State }

func (c *fixedController) State() *fsm.State { return c.st.Clone() }
func (c *fixedController) Apply(context.Context, fsm.Command) (fsm.Result, error) {
	return fsm.Result{}, nil
}
func (c *fixedController) IsLeader() bool                     { return true }
func (c *fixedController) Changed() <-chan struct{}           { return make(chan struct{}) }
func (c *fixedController) WaitCaughtUp(context.Context) error { return nil }

// resolvingDialer stands in for the sidecar's SourceKgoOpts: it resolves
// the references of the config, as SourceKgoOpts does, then dials as
// testSourceDialer.
func resolvingDialer(cfg map[string]string) ([]kgo.Opt, error) {
	resolved, err := properties.NewResolver().ResolveAll(cfg)
	if err != nil {
		return nil, err
	}
	return testSourceDialer(resolved)
}

// TestUnresolvableSourceReference checks a mirror whose source config holds
// a reference this sidecar cannot resolve (a missing file, an unset
// environment variable): the partitions it leads are FAILED with the key
// and the reference named, never the value around the reference nor the
// secret, the log says so once and shows no secret either, and once the
// file or variable is there the next pass starts the partitions.
func TestUnresolvableSourceReference(t *testing.T) {
	const secret = "s3cr3t-Pa55-unit"
	dest, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	destCl, err := kgo.NewClient(kgo.SeedBrokers(dest.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer destCl.Close()
	const brokerID = int32(0) // kfake's only broker

	secretFile := filepath.Join(t.TempDir(), "secret.properties")
	const envName = "SIDEMIRROR_TEST_SOURCE_PASSWORD"
	for _, tc := range []struct {
		name, ref string
		provide   func()
	}{
		{"missing file", "${file:" + secretFile + ":password}", func() {
			if err := os.WriteFile(secretFile, []byte("password="+secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"unset variable", "${env:" + envName + "}", func() { t.Setenv(envName, secret) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror-user" password="` + tc.ref + `";`
			st := fsm.NewState()
			st.Mirrors["m"] = &fsm.Mirror{Name: "m", Config: map[string]string{
				fsm.BootstrapServersKey: "127.0.0.1:1", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}}
			st.Topics["t"] = &fsm.MirrorTopic{Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive}
			core, logs := observer.New(zapcore.DebugLevel)
			plane := &scriptedPlane{states: map[fetcher.Partition]fetcher.PartitionStatus{}}
			r := newReconciler(&reconciler{brokerID: brokerID, ctl: &fixedController{st: st}, dp: plane, dial: resolvingDialer, destCl: destCl,
				writer: newStateWriter(&stateWriter{}), interval: time.Second, now: time.Now, log: zap.New(core)})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			for range 2 { // a second pass retries, and logs nothing new
				if err := r.reconcile(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := plane.takeStarted(); len(got) != 0 {
				t.Fatalf("partitions %v started without a source client", got)
			}
			rows := r.LocalRows(nil)
			if len(rows) != 1 || len(rows[0].Topics) != 1 || len(rows[0].Topics[0].Partitions) != 2 {
				t.Fatalf("local rows = %+v, want the 2 partitions of t", rows)
			}
			for _, d := range rows[0].Topics[0].Partitions {
				msg := deref(d.LastError)
				if d.State != fetcher.StateFailed.String() || d.OwnerBrokerId != brokerID {
					t.Fatalf("partition %d: state %s owner %d, want FAILED owned by %d", d.PartitionIndex, d.State, d.OwnerBrokerId, brokerID)
				}
				if !strings.Contains(msg, "sasl.jaas.config") || !strings.Contains(msg, tc.ref) {
					t.Fatalf("partition %d: error %q does not name the key and the reference %s", d.PartitionIndex, msg, tc.ref)
				}
				if strings.Contains(msg, "mirror-user") || strings.Contains(msg, "PlainLoginModule") {
					t.Fatalf("partition %d: error %q shows the value around the reference", d.PartitionIndex, msg)
				}
			}
			if got := blockedGauge(t, r); len(got) != 1 || got["m"] != 2 {
				t.Fatalf("sidemirror_source_config_failed_partitions = %v, want 2 for mirror m", got)
			}
			if n := logs.FilterMessageSnippet("cannot configure the source client").Len(); n != 1 {
				t.Fatalf("%d log lines about the source config over two passes, want 1", n)
			}

			tc.provide()
			if err := r.reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if got := plane.takeStarted(); len(got) != 2 {
				t.Fatalf("after the secret appeared, started %v, want both partitions of t", got)
			}
			if got := blockedGauge(t, r); len(got) != 0 {
				t.Fatalf("after the secret appeared, sidemirror_source_config_failed_partitions = %v, want no series", got)
			}
			if rows := r.LocalRows(nil); len(rows) != 0 {
				t.Fatalf("after the secret appeared, local rows = %+v, want none (the scripted data plane reports nothing)", rows)
			}
			for _, e := range logs.All() {
				line := e.Message
				for _, f := range e.Context {
					line += " " + f.String + " " + errString(f)
				}
				if strings.Contains(line, secret) || strings.Contains(line, "mirror-user") {
					t.Fatalf("a log line shows the secret or the value around it: %s", line)
				}
			}
		})
	}
}

// blockedGauge gathers sidemirror_source_config_failed_partitions: value by
// mirror.
func blockedGauge(t *testing.T, r *reconciler) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(r.blockedParts); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// errString returns the message of an error field, else "".
func errString(f zapcore.Field) string {
	if err, ok := f.Interface.(error); ok {
		return err.Error()
	}
	return ""
}

// TestSecretReferenceNeverStoredOrShown creates a mirror whose sasl.jaas.config
// holds a ${file:...} reference through a sidecar whose dialer resolves it
// (the secret is read, as when the sidecar connects) and checks every place
// that keeps or prints the config: the controller state and its raft
// snapshot keep the reference and not the secret, and the create, describe
// and DescribeConfigs responses and a refused create or alter show neither the
// secret nor the value around the reference.
func TestSecretReferenceNeverStoredOrShown(t *testing.T) {
	const secret = "Vb7-unit-stored-secret-Qw2"
	file := filepath.Join(t.TempDir(), "secret.properties")
	if err := os.WriteFile(file, []byte("password="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var resolved atomic.Int32
	dial := func(cfg map[string]string) ([]kgo.Opt, error) {
		opts, err := resolvingDialer(cfg)
		if err == nil && strings.Contains(cfg["sasl.jaas.config"], "${file:") {
			resolved.Add(1)
		}
		return opts, err
	}
	c := &sidecarCluster{Cluster: raftnodetest.New(t, 1), t: t, dest: []string{"127.0.0.1:1"},
		admin: map[int32]string{}, svcs: map[int32]*Service{}, planes: map[int32]*fakeDataPlane{}, dial: dial}
	c.startSidecar(1)
	c.waitLeader()
	src := newSource(t, "src-cluster")
	ref := "${file:" + file + ":password}"
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror-user" password="` + ref + `";`
	cfgs := func(jaas string) []protocol.ClusterMirrorConfig {
		return []protocol.ClusterMirrorConfig{{Name: fsm.BootstrapServersKey, Value: &src}, {Name: "sasl.jaas.config", Value: &jaas}}
	}
	var printed []string
	show := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		printed = append(printed, string(b))
	}

	create := c.do(1, &protocol.CreateClusterMirrorRequest{MirrorName: "m", Config: cfgs(jaas)}).(*protocol.CreateClusterMirrorResponse)
	show(create)
	if create.ErrorCode != 0 {
		t.Fatalf("create: %d %s", create.ErrorCode, deref(create.ErrorMessage))
	}
	if resolved.Load() == 0 {
		t.Fatal("the dialer never resolved the reference: the test proves nothing")
	}
	bad := `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror-user" password="${file:` + file + `:nokey}";`
	refused := c.do(1, &protocol.CreateClusterMirrorRequest{MirrorName: "m2", Config: cfgs(bad)}).(*protocol.CreateClusterMirrorResponse)
	show(refused)
	wantCode(t, "a create whose reference names a missing key", refused.ErrorCode, refused.ErrorMessage, 40, "sasl.jaas.config", `has no key "nokey"`)

	// An alter to a reference that does not resolve is refused the same
	// way, and the stored config stays as it was.
	altered := alterOne(t, c, 1, "m", false, set("sasl.jaas.config", bad))
	show(altered)
	wantCode(t, "an alter whose reference names a missing key", altered.ErrorCode, altered.ErrorMessage, 40, "sasl.jaas.config", `has no key "nokey"`)

	describe := c.do(1, &protocol.DescribeClusterMirrorsRequest{}).(*protocol.DescribeClusterMirrorsResponse)
	show(describe)
	dcReq := &protocol.DescribeConfigsRequest{IncludeSynonyms: true, IncludeDocumentation: true,
		Resources: []protocol.DescribeConfigsResource{{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"}}}
	dcReq.SetVersion(4)
	show(c.do(1, dcReq))
	list := c.do(1, &protocol.ListClusterMirrorsRequest{})
	show(list)
	for _, out := range printed {
		if strings.Contains(out, secret) || strings.Contains(out, "mirror-user") {
			t.Fatalf("a response shows the secret or the value around the reference: %s", out)
		}
	}

	st := c.Running()[1].FSM()
	var stored string
	st.Read(func(s *fsm.State) { stored = s.Mirrors["m"].Config["sasl.jaas.config"] })
	if stored != jaas {
		t.Fatalf("the controller state holds sasl.jaas.config %q, want the reference as written", stored)
	}
	var snap strings.Builder
	if _, err := st.Snapshot().WriteTo(&snap); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.String(), ref) {
		t.Fatal("the raft snapshot does not hold the reference: the check below proves nothing")
	}
	if strings.Contains(snap.String(), secret) {
		t.Fatal("the raft snapshot holds the secret")
	}
}

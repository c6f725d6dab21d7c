package coordinator

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/protocol"
)

// newSource starts an in-process Kafka cluster with the given cluster ID
// and returns its bootstrap servers.
func newSource(t *testing.T, clusterID string) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID(clusterID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

const secretJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";`

// alterOne sends an IncrementalAlterConfigs request for one mirror and
// returns its outcome.
func alterOne(t *testing.T, c *sidecarCluster, at int32, mirror string, validateOnly bool, cfgs ...protocol.AlterableConfig) protocol.AlterConfigsResourceResponse {
	t.Helper()
	req := &protocol.IncrementalAlterConfigsRequest{ValidateOnly: validateOnly, Resources: []protocol.AlterConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: mirror, Configs: cfgs},
	}}
	req.SetVersion(1)
	resp := c.do(at, req).(*protocol.IncrementalAlterConfigsResponse)
	if len(resp.Responses) != 1 {
		t.Fatalf("%d outcomes for one resource", len(resp.Responses))
	}
	return resp.Responses[0]
}

func set(k, v string) protocol.AlterableConfig {
	return protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpSet, Value: &v}
}

func del(k string) protocol.AlterableConfig {
	return protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpDelete}
}

func op(o int8, k, v string) protocol.AlterableConfig {
	return protocol.AlterableConfig{Name: k, ConfigOperation: o, Value: &v}
}

// TestAlterMirrorConfig alters mirrors through a follower's admin endpoint
// (the commands reach the leader through raft forwarding) and checks every
// rule: what is refused leaves the mirror unchanged.
func TestAlterMirrorConfig(t *testing.T) {
	srcA, srcA2, srcB := newSource(t, "cluster-A"), newSource(t, "cluster-A"), newSource(t, "cluster-B")
	c := newSidecarCluster(t, 1, 2)
	leader := c.waitLeader()
	fid, _ := raftnodetest.Follower(t, c.Running(), leader)
	mirrorConfig := func() map[string]string {
		return map[string]string{fsm.BootstrapServersKey: srcA, "security.protocol": "PLAINTEXT", "sasl.jaas.config": secretJAAS}
	}

	for _, tc := range []struct {
		name         string
		cfgs         []protocol.AlterableConfig
		validateOnly bool
		wantCode     int16
		wantMsg      string
		refused      bool                // a key or value refused at validation (protocol.IsRefusedSettings)
		want         func(m *fsm.Mirror) // edits the mirror as created into what it must be; nil: unchanged
	}{
		{
			name: "set a mirror key and a source key",
			cfgs: []protocol.AlterableConfig{set(RefreshIntervalKey, "5000"), set("client.id", "mirror-x")},
			want: func(m *fsm.Mirror) { m.Config[RefreshIntervalKey] = "5000"; m.Config["client.id"] = "mirror-x" },
		},
		{
			name: "delete a key",
			cfgs: []protocol.AlterableConfig{del("sasl.jaas.config")},
			want: func(m *fsm.Mirror) { delete(m.Config, "sasl.jaas.config") },
		},
		{
			name: "patterns: append, subtract and set",
			cfgs: []protocol.AlterableConfig{
				op(protocol.ConfigOpAppend, fsm.IncludeKey, "b.*, c.*"), op(protocol.ConfigOpSubtract, fsm.ExcludeKey, "^x$"),
			},
			want: func(m *fsm.Mirror) { m.Include = []string{"a.*", "b.*", "c.*"}; m.Exclude = []string{"^y$"} },
		},
		{
			name: "set the include list, delete the exclude list",
			cfgs: []protocol.AlterableConfig{set(fsm.IncludeKey, "z.*,z.*"), del(fsm.ExcludeKey)},
			want: func(m *fsm.Mirror) { m.Include = []string{"z.*"}; m.Exclude = []string{} },
		},
		{
			name: "another broker of the same source cluster",
			cfgs: []protocol.AlterableConfig{set(fsm.BootstrapServersKey, srcA2)},
			want: func(m *fsm.Mirror) { m.Config[fsm.BootstrapServersKey] = srcA2 },
		},
		{
			name:         "validate only",
			cfgs:         []protocol.AlterableConfig{set(RefreshIntervalKey, "5000")},
			validateOnly: true,
		},
		{
			name:     "a key the mirror does not have",
			cfgs:     []protocol.AlterableConfig{set(RefreshIntervalKey, "5000"), del("no.such.key")},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "mirror %s has no config key no.such.key",
		},
		{
			name:     "a default mirror key is not the mirror's",
			cfgs:     []protocol.AlterableConfig{del(ReplicationFactorKey)},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "has no config key mirror.topic.replication.factor",
		},
		{
			name:     "bootstrap.servers cannot be deleted",
			cfgs:     []protocol.AlterableConfig{del(fsm.BootstrapServersKey)},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "bootstrap.servers of mirror %s cannot be deleted",
		},
		{
			name:     "an unknown source key",
			cfgs:     []protocol.AlterableConfig{set("sasl.jaas.confg", secretJAAS)},
			wantCode: kerr.InvalidConfig.Code, wantMsg: `unknown key "sasl.jaas.confg"`,
			refused: true,
		},
		{
			name:     "an unknown mirror key",
			cfgs:     []protocol.AlterableConfig{set("mirror.refresh", "1")},
			wantCode: kerr.InvalidConfig.Code, wantMsg: `unknown mirror config key "mirror.refresh"`,
			refused: true,
		},
		{
			name:     "a bad mirror value",
			cfgs:     []protocol.AlterableConfig{set(RefreshIntervalKey, "10")},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "mirror.metadata.refresh.interval.ms",
			refused: true,
		},
		{
			name:     "a bad pattern",
			cfgs:     []protocol.AlterableConfig{op(protocol.ConfigOpAppend, fsm.IncludeKey, "(")},
			wantCode: kerr.InvalidConfig.Code, wantMsg: fsm.IncludeKey,
			refused: true,
		},
		{
			name:     "APPEND to a key that is not a list",
			cfgs:     []protocol.AlterableConfig{op(protocol.ConfigOpAppend, "security.protocol", "SSL")},
			wantCode: kerr.InvalidRequest.Code, wantMsg: "APPEND is only supported for the pattern lists",
		},
		{
			name:     "an unknown operation",
			cfgs:     []protocol.AlterableConfig{op(7, "security.protocol", "SSL")},
			wantCode: kerr.InvalidRequest.Code, wantMsg: "config operation 7",
		},
		{
			name:     "SET without a value",
			cfgs:     []protocol.AlterableConfig{{Name: "client.id", ConfigOperation: protocol.ConfigOpSet}},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "SET of config key client.id has no value",
		},
		{
			name:     "a key listed twice",
			cfgs:     []protocol.AlterableConfig{set("client.id", "a"), del("client.id")},
			wantCode: kerr.InvalidRequest.Code, wantMsg: "config key client.id is listed twice",
		},
		{
			name:     "another source cluster",
			cfgs:     []protocol.AlterableConfig{set(fsm.BootstrapServersKey, srcB)},
			wantCode: kerr.InconsistentClusterID.Code,
			wantMsg:  "the source at " + srcB + " is cluster cluster-B, but mirror %s mirrors cluster cluster-A",
		},
		{
			name:     "an unreachable source",
			cfgs:     []protocol.AlterableConfig{set(fsm.BootstrapServersKey, "127.0.0.1:1")},
			wantCode: kerr.InvalidConfig.Code, wantMsg: "cannot reach the source cluster at 127.0.0.1:1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.NewReplacer(" ", "-", ",", "", ":", "", ".", "", "'", "").Replace(tc.name)
			create := fsm.CreateMirror{Name: name, Config: mirrorConfig(), SourceClusterID: "cluster-A",
				Include: []string{"a.*"}, Exclude: []string{"^x$", "^y$"}}
			raftnodetest.ApplyOK(t, c.Running()[leader], create)
			c.WaitAll("mirror "+name, raftnodetest.HasMirror(name))
			var before *fsm.Mirror
			c.Running()[fid].FSM().Read(func(s *fsm.State) { before = s.Mirrors[name].Clone() })

			out := alterOne(t, c, fid, name, tc.validateOnly, tc.cfgs...)
			var want []string
			if tc.wantMsg != "" {
				want = append(want, strings.ReplaceAll(tc.wantMsg, "%s", name))
			}
			wantCode(t, tc.name, out.ErrorCode, out.ErrorMessage, tc.wantCode, want...)
			if got := protocol.IsRefusedSettings(protocol.ErrorFor(out.ErrorCode, out.ErrorMessage)); got != tc.refused {
				t.Fatalf("refused settings: %v (message %q), want %v", got, deref(out.ErrorMessage), tc.refused)
			}
			if out.ResourceName != name || out.ResourceType != protocol.ResourceTypeClusterMirror {
				t.Fatalf("outcome names %d/%s", out.ResourceType, out.ResourceName)
			}
			if out.ErrorMessage != nil && strings.Contains(*out.ErrorMessage, "hunter2") {
				t.Fatalf("the error shows a secret: %s", *out.ErrorMessage)
			}
			after := before.Clone()
			if tc.want != nil {
				tc.want(after)
			}
			var got *fsm.Mirror
			c.Running()[fid].FSM().Read(func(s *fsm.State) { got = s.Mirrors[name].Clone() })
			got.UpdatedMs, after.UpdatedMs = 0, 0
			if !reflect.DeepEqual(got, after) {
				t.Fatalf("mirror after the request:\n got %+v\nwant %+v", got, after)
			}
		})
	}
}

func TestAlterConfigsResources(t *testing.T) {
	c := newSidecarCluster(t, 1)
	c.waitLeader()
	raftnodetest.ApplyOK(t, c.Running()[1], fsm.CreateMirror{Name: "m", Config: fsmtest.BootstrapConfig()})
	req := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{
		{ResourceType: 8, ResourceName: "1", Configs: []protocol.AlterableConfig{set("kafka.server", "DEBUG")}}, // BROKER_LOGGER
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "nope", Configs: []protocol.AlterableConfig{set(RefreshIntervalKey, "5000")}},
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m", Configs: []protocol.AlterableConfig{set(RefreshIntervalKey, "5000")}},
	}}
	resp := c.do(1, req).(*protocol.IncrementalAlterConfigsResponse)
	if len(resp.Responses) != 3 {
		t.Fatalf("outcomes %+v", resp.Responses)
	}
	wantCode(t, "a broker logger", resp.Responses[0].ErrorCode, resp.Responses[0].ErrorMessage, kerr.InvalidRequest.Code,
		"the sidecar admin endpoint serves only CLUSTER_MIRROR (64) resources, and the throttle configs of BROKER (4) and TOPIC (2) resources; resource type 8")
	wantCode(t, "an unknown mirror", resp.Responses[1].ErrorCode, resp.Responses[1].ErrorMessage, kerr.ResourceNotFound.Code, "mirror nope does not exist")
	wantCode(t, "a mirror", resp.Responses[2].ErrorCode, resp.Responses[2].ErrorMessage, 0)
}

// TestAlterReconnects checks that the reconcile loop gives the data plane a
// new source client when the source settings change, and only then.
func TestAlterReconnects(t *testing.T) {
	src := newSource(t, "cluster-A")
	c := newSidecarCluster(t, 1)
	c.waitLeader()
	svc, plane := c.service(1), c.planes[1]
	raftnodetest.ApplyOK(t, c.Running()[1], fsm.CreateMirror{Name: "m", Config: map[string]string{fsm.BootstrapServersKey: src}, SourceClusterID: "cluster-A"})
	svc.rec.syncSources(svc.admin.ctl.State())
	if n := plane.setMirrorCalls("m"); n != 1 {
		t.Fatalf("%d source clients after creation, want 1", n)
	}
	if out := alterOne(t, c, 1, "m", false, set(RefreshIntervalKey, "5000")); out.ErrorCode != 0 {
		t.Fatal(deref(out.ErrorMessage))
	}
	svc.rec.syncSources(svc.admin.ctl.State())
	if n := plane.setMirrorCalls("m"); n != 1 {
		t.Fatalf("%d source clients after a mirror.* change, want still 1", n)
	}
	if out := alterOne(t, c, 1, "m", false, set("security.protocol", "PLAINTEXT")); out.ErrorCode != 0 {
		t.Fatal(deref(out.ErrorMessage))
	}
	svc.rec.syncSources(svc.admin.ctl.State())
	if n := plane.setMirrorCalls("m"); n != 2 {
		t.Fatalf("%d source clients after a source change, want 2", n)
	}
}

func TestDescribeMirrorConfigs(t *testing.T) {
	c := newSidecarCluster(t, 1)
	c.waitLeader()
	raftnodetest.ApplyOK(t, c.Running()[1], fsm.CreateMirror{Name: "m", Config: map[string]string{
		fsm.BootstrapServersKey: "src:9092", "sasl.jaas.config": secretJAAS, RefreshIntervalKey: "5000",
	}, Include: []string{"a.*", "b"}})
	req := &protocol.DescribeConfigsRequest{IncludeSynonyms: true, IncludeDocumentation: true, Resources: []protocol.DescribeConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"},
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m", ConfigurationKeys: []string{"sasl.jaas.config", ReplicationFactorKey, "x"}},
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "nope"},
		{ResourceType: 8, ResourceName: "1"}, // BROKER_LOGGER
	}}
	req.SetVersion(4)
	resp := c.do(1, req).(*protocol.DescribeConfigsResponse)
	if len(resp.Results) != 4 {
		t.Fatalf("results %+v", resp.Results)
	}
	type row struct {
		name, value string
		source      int8
		sensitive   bool
	}
	rows := func(es []protocol.DescribeConfigsEntry) []row {
		var out []row
		for _, e := range es {
			v := "<null>"
			if e.Value != nil {
				v = *e.Value
			}
			out = append(out, row{e.Name, v, e.ConfigSource, e.IsSensitive})
		}
		return out
	}
	dyn, def := protocol.ConfigSourceDynamicResource, protocol.ConfigSourceDefault
	want := []row{
		{fsm.BootstrapServersKey, "src:9092", dyn, false},
		{RefreshIntervalKey, "5000", dyn, false},
		{ReadOnlyEnforcementKey, "acl", def, false},
		{ReplicationFactorKey, "-1", def, false},
		{fsm.ExcludeKey, "", def, false},
		{fsm.IncludeKey, "a.*,b", dyn, false},
		{ConfigSyncExcludeKey, "", def, false},
		{GroupsIncludeKey, ".*", def, false},
		{GroupsExcludeKey, "", def, false},
		{TransactionTimeoutKey, "900000", def, false},
		{CoalesceBatchesKey, "true", def, false},
		{fsm.OffsetsKey, "exact", def, false},
		{RetryBackoffKey, "100", def, false},
		{RetryBackoffMaxKey, "300000", def, false},
		{RetryMaxAttemptsKey, "20", def, false},
		{"sasl.jaas.config", "<null>", dyn, true},
	}
	slices.SortFunc(want, func(a, b row) int { return strings.Compare(a.name, b.name) })
	if got := rows(resp.Results[0].Configs); !reflect.DeepEqual(got, want) {
		t.Fatalf("configs:\n got %+v\nwant %+v", got, want)
	}
	if got := rows(resp.Results[1].Configs); !reflect.DeepEqual(got, []row{{ReplicationFactorKey, "-1", def, false}, {"sasl.jaas.config", "<null>", dyn, true}}) {
		t.Fatalf("configs of the listed keys: %+v", got)
	}
	for _, e := range resp.Results[0].Configs {
		for _, s := range e.Synonyms {
			if s.Value != nil && strings.Contains(*s.Value, "hunter2") {
				t.Fatalf("synonym of %s shows the secret", e.Name)
			}
		}
		if e.Name == RefreshIntervalKey && (len(e.Synonyms) != 2 || deref(e.Synonyms[1].Value) != "30000" || e.ConfigType != protocol.ConfigTypeLong || e.Documentation == nil) {
			t.Fatalf("%s: %+v", e.Name, e)
		}
		if e.Name == "sasl.jaas.config" && e.ConfigType != protocol.ConfigTypePassword {
			t.Fatalf("%s has type %d", e.Name, e.ConfigType)
		}
	}
	wantCode(t, "an unknown mirror", resp.Results[2].ErrorCode, resp.Results[2].ErrorMessage, kerr.ResourceNotFound.Code, "mirror nope does not exist")
	wantCode(t, "a broker logger", resp.Results[3].ErrorCode, resp.Results[3].ErrorMessage, kerr.InvalidRequest.Code, "serves only CLUSTER_MIRROR (64)")
}

func TestAlterMirrorPatternsCommand(t *testing.T) {
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsm.AlterMirrorPatterns{Name: "m1", AddInclude: []string{"b.*", "a.*"}, AddExclude: []string{"^x$"}, NowMs: 9})
	m := s.Mirrors["m1"]
	if !slices.Equal(m.Include, []string{"a.*", "b.*"}) || !slices.Equal(m.Exclude, []string{"^x$"}) || m.UpdatedMs != 9 {
		t.Fatalf("mirror %+v", m)
	}
	fsmtest.MustApply(t, s, fsm.AlterMirrorPatterns{Name: "m1", RemoveInclude: []string{"a.*", "zzz"}, RemoveExclude: []string{"^x$"}})
	if !slices.Equal(m.Include, []string{"b.*"}) || len(m.Exclude) != 0 {
		t.Fatalf("mirror %+v", m)
	}
	for _, tc := range []struct {
		cmd  fsm.AlterMirrorPatterns
		code int16
	}{
		{fsm.AlterMirrorPatterns{Name: "nope"}, kerr.ResourceNotFound.Code},
		{fsm.AlterMirrorPatterns{Name: "m1", AddInclude: []string{" "}}, kerr.InvalidRequest.Code},
		{fsm.AlterMirrorPatterns{Name: "m1", AddExclude: []string{"a"}, RemoveExclude: []string{"a"}}, kerr.InvalidRequest.Code},
	} {
		before := s.Clone()
		if res := fsm.ApplyTo(s, fsmtest.MustEncode(t, tc.cmd)); res.ErrorCode != tc.code || !reflect.DeepEqual(s, before) {
			t.Fatalf("%+v = %+v, want code %d and no change", tc.cmd, res, tc.code)
		}
	}
}

// TestCreateRefusedSettings checks which refusals of CreateClusterMirror
// start with protocol.RefusedSettingsPrefix, on which kafka-cluster-mirrors
// exits 2: the keys and values refused at validation (by the mirror keys'
// checks, or by the SourceDialer before it connects), not a source that
// cannot be reached or a missing bootstrap.servers. None creates a mirror.
func TestCreateRefusedSettings(t *testing.T) {
	src := newSource(t, "cluster-A")
	c := newSidecarCluster(t, 1)
	c.waitLeader()
	for _, tc := range []struct {
		name    string
		config  map[string]string
		refused bool
		want    string
	}{
		{"a security protocol the dialer does not support", map[string]string{fsm.BootstrapServersKey: src, "security.protocol": "SASL_SSL"}, true, "security.protocol"},
		{"an unknown source key", map[string]string{fsm.BootstrapServersKey: src, "ssl.keystore.locaton": "/x"}, true, "ssl.keystore.locaton"},
		{"a consumer group key", map[string]string{fsm.BootstrapServersKey: src, "group.id": "g"}, true, "group.id"},
		{"an unknown mirror key", map[string]string{fsm.BootstrapServersKey: src, "mirror.refresh": "1"}, true, "mirror.refresh"},
		{"a bad mirror value", map[string]string{fsm.BootstrapServersKey: src, RefreshIntervalKey: "10"}, true, RefreshIntervalKey},
		{"an unreachable source", map[string]string{fsm.BootstrapServersKey: "127.0.0.1:1"}, false, "cannot reach the source cluster"},
		{"no bootstrap.servers", map[string]string{"client.id": "x"}, false, "has no bootstrap.servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &protocol.CreateClusterMirrorRequest{MirrorName: "refused"}
			for _, k := range sortedKeys(tc.config) {
				req.Config = append(req.Config, protocol.ClusterMirrorConfig{Name: k, Value: strPtr(tc.config[k])})
			}
			resp := c.do(1, req).(*protocol.CreateClusterMirrorResponse)
			wantCode(t, tc.name, resp.ErrorCode, resp.ErrorMessage, kerr.InvalidConfig.Code, tc.want)
			if got := protocol.IsRefusedSettings(protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage)); got != tc.refused {
				t.Fatalf("refused settings: %v (message %q), want %v", got, deref(resp.ErrorMessage), tc.refused)
			}
			c.Running()[1].FSM().Read(func(s *fsm.State) {
				if len(s.Mirrors) != 0 {
					t.Fatalf("a refused create left mirrors %v", s.Mirrors)
				}
			})
		})
	}
}

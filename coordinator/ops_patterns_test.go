package coordinator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

func TestPatternExamples(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    []string // among the examples
	}{
		{"new-.*", []string{"new-"}},
		{"new-x", []string{"new-x"}},
		{"(orders|payments)-[0-9]+", []string{"orders-0", "payments-0"}},
		{"a{2,3}b?", []string{"aa"}},
		{"[^a]x", []string{"bx"}},
		{".*", []string{""}},
	} {
		got := patternExamples(tc.pattern)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("patternExamples(%q) = %q, want %q among them", tc.pattern, got, w)
			}
		}
	}
	if got := patternExamples("(("); got != nil {
		t.Errorf("patternExamples of a bad pattern = %q", got)
	}
}

func TestFixShadowing(t *testing.T) {
	st := fsm.NewState()
	st.Topics["old-a"] = &fsm.MirrorTopic{Name: "old-a", Mirror: "m", Status: fsm.TopicStopped}
	st.Topics["new-old"] = &fsm.MirrorTopic{Name: "new-old", Mirror: "m", Status: fsm.TopicStopped}
	topics := []SourceTopic{{Name: "old-a"}, {Name: "new-old"}, {Name: "orders-1"}, {Name: "misc"}}
	for _, tc := range []struct {
		name             string
		include, exclude []string // the mirror's
		start, startExc  []string // the start's
		remove, add      []string
		note             []string
	}{
		{name: "runbook 2: .* shadows new-.* before any new-* topic exists", exclude: []string{".*"}, start: []string{"new-.*"},
			remove: []string{".*"}, note: []string{`exclude pattern ".*" shadowed include pattern(s) "new-.*"`, "mirror.topics.exclude"}},
		{name: "unknown topics another include names stay excluded by name", include: []string{"orders-.*", "mi.*"}, exclude: []string{".*"},
			start: []string{"new-.*"}, remove: []string{".*"}, add: []string{"orders-1", "misc"}, note: []string{"excluded by name (orders-1, misc)"}},
		{name: "a literal exclude of a topic the start names", exclude: []string{"new-old", "old-a"}, start: []string{"new-.*"},
			remove: []string{"new-old"}},
		{name: "an exclude that shadows nothing stays", exclude: []string{"old-.*"}, start: []string{"new-.*"}},
		{name: "the start's own exclude stays", exclude: []string{"new-secret"}, start: []string{"new-.*"}, startExc: []string{"new-secret"}},
		{name: "no include pattern: nothing", exclude: []string{".*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fsm.Mirror{Name: "m", Include: tc.include, Exclude: tc.exclude}
			fix, err := fixShadowing(st, m, topics, tc.start, tc.startExc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fix.remove, tc.remove) || !slices.Equal(fix.add, tc.add) {
				t.Fatalf("fixShadowing removes %q and adds %q; want %q and %q", fix.remove, fix.add, tc.remove, tc.add)
			}
			if (fix.note == "") != (len(tc.remove) == 0) {
				t.Fatalf("note %q for removing %q", fix.note, fix.remove)
			}
			for _, s := range tc.note {
				if !strings.Contains(fix.note, s) {
					t.Errorf("note %q lacks %q", fix.note, s)
				}
			}
		})
	}
}

// TestStartUnshadowsDiscovery runs runbook 2's stop and a later start on a
// sidecar with kfake source and destination: after `--stop --topics '.*'`
// the exclude list holds `.*`; `--start --topics 'new-.*'`, before any
// new-* topic exists, is answered with a note naming the removed pattern,
// leaves the include pattern discovery needs and no shadowing exclude, and
// discovery then starts new-x once it appears on the source, while the
// stopped topic stays stopped.
func TestStartUnshadowsDiscovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	newKfake := func(topics ...string) *kfake.Cluster {
		opts := []kfake.Opt{kfake.NumBrokers(1)}
		if len(topics) > 0 {
			opts = append(opts, kfake.SeedTopics(1, topics...))
		}
		c, err := kfake.NewCluster(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	src, dst := newKfake("old-a"), newKfake()
	c := newSidecarClusterOn(t, dst.ListenAddrs(), 1)
	leader := c.waitLeader()
	raftnodetest.ApplyOK(t, c.Running()[leader], fsm.CreateMirror{Name: "m",
		Config: map[string]string{fsm.BootstrapServersKey: strings.Join(src.ListenAddrs(), ",")}, SourceClusterID: "kfake"})
	state := func() *fsm.State { return c.service(leader).sync.ctl.State() }
	startReq := func(p string) *protocol.StartMirrorTopicsResponse {
		return c.do(leader, &protocol.StartMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{p}, IncludePatterns: []string{p}}).(*protocol.StartMirrorTopicsResponse)
	}

	if r := startReq(".*"); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("start .*: %+v", r)
	}
	stop := c.do(leader, &protocol.StopMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{".*"}, Patterns: []string{".*"}}).(*protocol.StopMirrorTopicsResponse)
	if stop.ErrorCode != 0 {
		t.Fatalf("stop .*: %+v", stop)
	}
	if m := state().Mirrors["m"]; len(m.Include) != 0 || !slices.Equal(m.Exclude, []string{".*"}) {
		t.Fatalf("after the stop: include %q, exclude %q; want none and .*", m.Include, m.Exclude)
	}

	r := startReq("new-.*")
	if r.ErrorCode != 0 || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, `exclude pattern ".*" shadowed include pattern(s) "new-.*"`) ||
		!strings.Contains(*r.ErrorMessage, "no source topic matches new-.* yet") {
		t.Fatalf("start new-.*: code %d, message %q", r.ErrorCode, strOrNil(r.ErrorMessage))
	}
	if m := state().Mirrors["m"]; !slices.Equal(m.Include, []string{"new-.*"}) || len(m.Exclude) != 0 {
		t.Fatalf("after the start: include %q, exclude %q; want new-.* and none", m.Include, m.Exclude)
	}

	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, 1, nil, "new-x"); err != nil {
		t.Fatal(err)
	}
	ms := c.service(leader).sync
	last := map[string]time.Time{}
	testwait.For(t, 30*time.Second, "discovery to start new-x", func() bool {
		clear(last)
		ms.discover(ctx, last)
		nt := state().Topics["new-x"]
		return nt != nil && nt.Status == fsm.TopicActive && nt.Partitions == 2
	})
	if ot := state().Topics["old-a"]; ot == nil || ot.Status != fsm.TopicStopped {
		t.Fatalf("the stopped topic old-a: %+v, want it stopped", ot)
	}
}

// TestStartRefusedWhenAllowEveryoneHidden starts topics on a kfake
// destination whose brokers answer as Kafka does when server.properties
// sets allow.everyone.if.no.acl.found: listed, value hidden. With the
// default "auto" a topic without ACLs is refused per topic with
// INVALID_CONFIG naming the sidecar key, and nothing is created on the
// destination; a topic with an ACL of its own starts with the DENY WRITE
// alone.
func TestStartRefusedWhenAllowEveryoneHidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "open", "owned"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	dst.ControlKey(int16(kmsg.DescribeConfigs), func(r kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := r.(*kmsg.DescribeConfigsRequest)
		if len(req.Resources) != 1 || req.Resources[0].ResourceType != kmsg.ConfigResourceTypeBroker {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, req.Resources[0].ResourceName
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Source, c.IsSensitive = allowEveryoneKey, kmsg.ConfigSourceStaticBrokerConfig, true
		res.Configs = append(res.Configs, c)
		resp.Resources = append(resp.Resources, res)
		return resp, nil, true
	})
	c := newSidecarClusterOn(t, dst.ListenAddrs(), 1)
	leader := c.waitLeader()
	raftnodetest.ApplyOK(t, c.Running()[leader], fsm.CreateMirror{Name: "m",
		Config: map[string]string{fsm.BootstrapServersKey: strings.Join(src.ListenAddrs(), ",")}, SourceClusterID: "kfake"})
	dcl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer dcl.Close()
	d := NewDestination(dcl, "true")
	alice := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "owned", PatternType: aclPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: aclPermAllow}
	if err := d.createACLs(ctx, []fsm.ACL{alice}); err != nil {
		t.Fatal(err)
	}

	r := c.do(leader, &protocol.StartMirrorTopicsRequest{MirrorName: "m", Topics: []protocol.StartMirrorTopicData{{TopicName: "open"}, {TopicName: "owned"}}}).(*protocol.StartMirrorTopicsResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 2 {
		t.Fatalf("start: %+v", r)
	}
	byName := map[string]protocol.MirrorTopicResult{}
	for _, tr := range r.Topics {
		byName[tr.Name] = tr
	}
	if o := byName["open"]; o.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(strOrNil(o.ErrorMessage), "readonly.allow.everyone.if.no.acl.found=true or =false") {
		t.Fatalf("open: code %d, %s; want INVALID_CONFIG naming the key", o.ErrorCode, strOrNil(o.ErrorMessage))
	}
	if o := byName["owned"]; o.ErrorCode != 0 {
		t.Fatalf("owned: code %d, %s", o.ErrorCode, strOrNil(o.ErrorMessage))
	}
	if ex, err := d.DescribeTopic(ctx, "open"); err != nil || ex != nil {
		t.Fatalf("the refused topic on the destination: %+v, %v; want none", ex, err)
	}
	if acls, err := d.topicACLs(ctx, "open"); err != nil || len(acls) != 0 {
		t.Fatalf("ACLs of the refused topic: %v, %v", acls, err)
	}
	deny, _ := readOnlyACLs("owned")
	if acls, err := d.topicACLs(ctx, "owned"); err != nil || len(acls) != 2 || !slices.Contains(acls, deny) || !slices.Contains(acls, alice) {
		t.Fatalf("ACLs of owned: %v, %v; want alice's and the DENY WRITE", acls, err)
	}
	st := c.service(leader).sync.ctl.State()
	if st.Topics["open"] != nil || st.Topics["owned"] == nil {
		t.Fatalf("state topics: open %+v, owned %+v", st.Topics["open"], st.Topics["owned"])
	}
}

func TestShadowedIncludes(t *testing.T) {
	topics := []SourceTopic{{Name: "orders-1"}, {Name: "new-a"}}
	for _, tc := range []struct {
		include, exclude, want []string
	}{
		{include: []string{"new-.*", "orders-.*"}, exclude: []string{".*"}, want: []string{"new-.*", "orders-.*"}},
		{include: []string{"new-.*"}, exclude: []string{"new-a"}}, // new-b and more still come
		{include: []string{"new-a"}, exclude: []string{"new-a"}, want: []string{"new-a"}},
		{include: []string{"orders-.*"}, exclude: []string{"orders-1"}}, // orders-2 would come
		{include: []string{"orders-.*"}},
	} {
		got := shadowedIncludes(&fsm.Mirror{Include: tc.include, Exclude: tc.exclude}, topics)
		if !slices.Equal(got, tc.want) {
			t.Errorf("include %q, exclude %q: shadowed %q, want %q", tc.include, tc.exclude, got, tc.want)
		}
	}
}

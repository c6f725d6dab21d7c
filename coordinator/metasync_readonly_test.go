package coordinator

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
)

func TestDecideAllowAll(t *testing.T) {
	deny, allow := readOnlyACLs("t")
	alice := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "t", PatternType: aclPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: aclPermAllow}
	prefixed := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "t", PatternType: aclPatternPrefixed, Principal: "User:bob", Host: "*", Operation: 3, Permission: aclPermAllow}
	wildcard := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "*", PatternType: aclPatternLiteral, Principal: "User:carol", Host: "*", Operation: 3, Permission: aclPermissionDeny}
	// Someone else's ALLOW ALL on another topic name and the DENY WRITE
	// of another principal are other ACLs too.
	denyAlice := deny
	denyAlice.Principal = "User:alice"
	yes := func() (bool, error) { return true, nil }
	no := func() (bool, error) { return false, nil }
	broken := func() (bool, error) { return false, errors.New("hidden") }
	for _, tc := range []struct {
		name            string
		owned, existing []fsm.ACL
		everyone        func() (bool, error)
		want            allowAllChange
		reason, err     string
	}{
		{name: "nothing else: keep", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow}, everyone: yes},
		{name: "literal ACL appears: drop", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow, alice}, everyone: broken, want: allowAllDrop, reason: "User:alice"},
		{name: "prefixed ACL: drop", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow, prefixed}, everyone: yes, want: allowAllDrop, reason: "PREFIXED"},
		{name: "wildcard ACL: drop", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow, wildcard}, everyone: yes, want: allowAllDrop, reason: "LITERAL *"},
		{name: "another principal's DENY WRITE: drop", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow, denyAlice}, everyone: yes, want: allowAllDrop},
		{name: "owned ALLOW ALL already gone, other ACL: drop from the record", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, alice}, everyone: yes, want: allowAllDrop},
		{name: "other ACL, no ALLOW ALL owned: keep", owned: []fsm.ACL{deny}, existing: []fsm.ACL{deny, alice}, everyone: broken},
		{name: "other ACL gone: add back", owned: []fsm.ACL{deny}, existing: []fsm.ACL{deny}, everyone: yes, want: allowAllAdd, reason: "no other ACL"},
		{name: "owned ALLOW ALL missing: create again", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny}, everyone: yes, want: allowAllAdd, reason: "missing"},
		{name: "someone else's ALLOW ALL: keep", owned: []fsm.ACL{deny}, existing: []fsm.ACL{deny, allow}, everyone: yes},
		{name: "cluster does not allow everyone: nothing to add", owned: []fsm.ACL{deny}, existing: []fsm.ACL{deny}, everyone: no},
		{name: "cluster does not allow everyone: drop", owned: []fsm.ACL{deny, allow}, existing: []fsm.ACL{deny, allow}, everyone: no, want: allowAllDrop, reason: "does not allow everyone"},
		{name: "setting unreadable: error", owned: []fsm.ACL{deny}, existing: []fsm.ACL{deny}, everyone: broken, err: "hidden"},
		{name: "DENY WRITE not owned: keep", owned: nil, existing: []fsm.ACL{deny, allow, alice}, everyone: broken},
		{name: "only the ALLOW ALL owned: keep", owned: []fsm.ACL{allow}, existing: []fsm.ACL{allow, alice}, everyone: broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := decideAllowAll("t", tc.owned, tc.existing, tc.everyone)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !strings.Contains(reason, tc.reason) || (got != allowAllKeep) != (reason != "") {
				t.Fatalf("decideAllowAll = %v, %q; want %v with a reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// readOnlyFixture is a kfake destination with topics a (active), p
// (paused), s (stopped, its record kept as if its stop had failed) and u
// (unprotected), all of mirror m, and the controller state for them.
type readOnlyFixture struct {
	t     *testing.T
	ctx   context.Context
	cl    *kgo.Client
	dest  *Destination
	st    *fsm.State
	hook  func(fsm.Command) // called before a command is applied
	owned map[string][]fsm.ACL
}

func newReadOnlyFixture(t *testing.T) *readOnlyFixture {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "p", "s", "u"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f := &readOnlyFixture{t: t, ctx: ctx, cl: cl, dest: NewDestination(cl, "true"), st: fsm.NewState(), owned: map[string][]fsm.ACL{}}
	fsmtest.MustApply(t, f.st,
		fsm.CreateMirror{Name: "m", Config: fsmtest.BootstrapConfig(), NowMs: 1},
		fsm.StartTopics{Mirror: "m", Topics: []fsm.StartTopic{{Name: "a", Partitions: 1}, {Name: "p", Partitions: 1},
			{Name: "s", Partitions: 1}, {Name: "u", Partitions: 1, Unprotected: true}}, NowMs: 2},
		fsm.SetTopicStatus{Mirror: "m", Topics: []string{"p"}, Status: fsm.TopicPaused, NowMs: 3},
		fsm.SetTopicStatus{Mirror: "m", Topics: []string{"s"}, Status: fsm.TopicStopped, NowMs: 4})
	for _, topic := range []string{"a", "p", "s"} {
		acls, err := f.dest.Protect(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(acls) != 2 {
			t.Fatalf("Protect(%s) = %+v, want DENY WRITE and ALLOW ALL", topic, acls)
		}
		fsmtest.MustApply(t, f.st, fsm.RecordACLs{Topic: topic, ACLs: acls})
		f.owned[topic] = acls
	}
	// The unprotected topic has an ALLOW ALL for User:* that someone
	// created, and another ACL.
	_, allowU := readOnlyACLs("u")
	f.create(allowU, f.userACL("u", "User:alice"))
	return f
}

func (f *readOnlyFixture) check() readOnlyCheck {
	return readOnlyCheck{dest: f.dest, log: zaptest.NewLogger(f.t), state: func() *fsm.State { return f.st.Clone() },
		apply: func(_ context.Context, c fsm.Command) error {
			if f.hook != nil {
				f.hook(c)
			}
			return raftnode.ResultErr(fsm.ApplyTo(f.st, fsmtest.MustEncode(f.t, c)))
		}}
}

// round runs one re-check of mirror m and wants n changes.
func (f *readOnlyFixture) round(n int) {
	f.t.Helper()
	got, err := f.check().run(f.ctx, "m")
	if err != nil {
		f.t.Fatalf("re-check: %v", err)
	}
	if got != n {
		f.t.Fatalf("re-check made %d changes, want %d", got, n)
	}
}

func (f *readOnlyFixture) userACL(name, principal string) fsm.ACL {
	return fsm.ACL{ResourceType: aclResourceTopic, ResourceName: name, PatternType: aclPatternLiteral, Principal: principal, Host: "*", Operation: 3, Permission: aclPermAllow}
}

func (f *readOnlyFixture) create(acls ...fsm.ACL) {
	f.t.Helper()
	if err := f.dest.createACLs(f.ctx, acls); err != nil {
		f.t.Fatal(err)
	}
}

func (f *readOnlyFixture) remove(acls ...fsm.ACL) {
	f.t.Helper()
	if err := f.dest.Unprotect(f.ctx, acls); err != nil {
		f.t.Fatal(err)
	}
}

// want checks whether topic's ALLOW ALL exists on the destination and is
// owned in the state, and that its DENY WRITE is both.
func (f *readOnlyFixture) want(topic string, allowAll bool) {
	f.t.Helper()
	deny, allow := readOnlyACLs(topic)
	have, err := f.dest.topicACLs(f.ctx, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	owned := f.st.Topics[topic].OwnedACLs
	if !slices.Contains(have, deny) || !slices.Contains(owned, deny) {
		f.t.Fatalf("%s: DENY WRITE on the destination %v, owned %v; want both", topic, slices.Contains(have, deny), slices.Contains(owned, deny))
	}
	if slices.Contains(have, allow) != allowAll || slices.Contains(owned, allow) != allowAll {
		f.t.Fatalf("%s: ALLOW ALL on the destination %v, owned %v; want %v", topic, slices.Contains(have, allow), slices.Contains(owned, allow), allowAll)
	}
}

// untouched checks that the stopped and the unprotected topic kept their
// ACLs and records.
func (f *readOnlyFixture) untouched() {
	f.t.Helper()
	_, allowU := readOnlyACLs("u")
	for topic, want := range map[string][]fsm.ACL{"s": f.owned["s"], "u": {allowU, f.userACL("u", "User:alice")}} {
		have, err := f.dest.topicACLs(f.ctx, topic)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, a := range want {
			if !slices.Contains(have, a) {
				f.t.Fatalf("%s lost %s: has %v", topic, aclString(a), have)
			}
		}
	}
	if !slices.Equal(f.st.Topics["s"].OwnedACLs, f.owned["s"]) || len(f.st.Topics["u"].OwnedACLs) != 0 {
		f.t.Fatalf("records changed: s %v, u %v", f.st.Topics["s"].OwnedACLs, f.st.Topics["u"].OwnedACLs)
	}
}

// TestReadOnlyRecheck runs the re-check against kfake: another ACL on an
// active or paused topic drops the sidecars' ALLOW ALL, its removal brings
// it back, a missing one is created again, so is a missing DENY WRITE, a
// cluster that does not allow everyone loses it, and stopped and
// unprotected topics are never touched.
func TestReadOnlyRecheck(t *testing.T) {
	f := newReadOnlyFixture(t)
	f.round(0)
	f.want("a", true)
	f.want("p", true)

	aliceA := f.userACL("a", "User:alice")
	f.create(aliceA, f.userACL("s", "User:alice"))
	f.round(1)
	f.want("a", false)
	f.want("p", true)
	f.untouched()

	// A prefixed ACL on the paused topic (kfake's MATCH filter matches
	// only prefixed ACLs named exactly as the topic; Kafka matches every
	// prefix, see TestDecideAllowAll and the e2e test).
	prefixedP := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "p", PatternType: aclPatternPrefixed, Principal: "User:bob", Host: "*", Operation: 3, Permission: aclPermAllow}
	f.create(prefixedP)
	f.round(1)
	f.want("a", false)
	f.want("p", false)
	f.round(0)

	f.remove(aliceA, prefixedP)
	f.round(2)
	f.want("a", true)
	f.want("p", true)
	f.round(0)
	f.untouched()

	// Deleted by hand: created again while nothing else applies.
	_, allowA := readOnlyACLs("a")
	f.remove(allowA)
	f.round(1)
	f.want("a", true)

	// A DENY WRITE deleted by hand is created again on an active and a
	// paused topic, not on a stopped one.
	denyA, _ := readOnlyACLs("a")
	denyP, _ := readOnlyACLs("p")
	denyS, _ := readOnlyACLs("s")
	f.remove(denyA, denyP, denyS)
	f.round(2)
	f.want("a", true)
	f.want("p", true)
	if have, err := f.dest.topicACLs(f.ctx, "s"); err != nil || slices.Contains(have, denyS) {
		t.Fatalf("stopped topic s: ACLs %v, %v; want its DENY WRITE left deleted", have, err)
	}
	f.create(denyS)
	f.round(0)

	// The operator states that the brokers do not allow everyone.
	f.dest = NewDestination(f.cl, "false")
	f.round(2)
	f.want("a", false)
	f.want("p", false)
	f.untouched()
}

// TestReadOnlyRecheckStoppedMeanwhile stops the topic while the re-check
// adds its ALLOW ALL back: the ALLOW ALL goes again and is not recorded.
func TestReadOnlyRecheckStoppedMeanwhile(t *testing.T) {
	f := newReadOnlyFixture(t)
	aliceA := f.userACL("a", "User:alice")
	f.create(aliceA)
	f.round(1)
	f.remove(aliceA)
	deny, allow := readOnlyACLs("a")
	f.hook = func(c fsm.Command) {
		if r, ok := c.(fsm.RecordACLs); ok && r.Topic == "a" && slices.Contains(r.ACLs, allow) {
			// The stop runs now: status first, then its ACLs.
			fsmtest.MustApply(t, f.st, fsm.SetTopicStatus{Mirror: "m", Topics: []string{"a"}, Status: fsm.TopicStopped, NowMs: 9})
			f.remove(deny)
			fsmtest.MustApply(t, f.st, fsm.RecordACLs{Topic: "a"})
		}
	}
	f.round(1)
	have, err := f.dest.topicACLs(f.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != 0 {
		t.Fatalf("the stopped topic has ACLs %v, want none", have)
	}
	if owned := f.st.Topics["a"].OwnedACLs; slices.Contains(owned, allow) {
		t.Fatalf("the stopped topic owns %v", owned)
	}
}

// TestDecideAllowEveryone combines what the brokers tell of
// allow.everyone.if.no.acl.found: an answer only when every broker that
// answered either does not set it or shows its value and all agree; a
// hidden value or a disagreement is an error naming the sidecar key.
func TestDecideAllowEveryone(t *testing.T) {
	v := func(s string) *string { return &s }
	unset := func(id int32) brokerAllowEveryone { return brokerAllowEveryone{broker: id} }
	hidden := func(id int32) brokerAllowEveryone {
		return brokerAllowEveryone{broker: id, set: true, source: kmsg.ConfigSourceStaticBrokerConfig}
	}
	shown := func(id int32, val string) brokerAllowEveryone {
		return brokerAllowEveryone{broker: id, set: true, source: kmsg.ConfigSourceStaticBrokerConfig, value: v(val)}
	}
	probed := func(id int32, allow bool) brokerAllowEveryone {
		s := shown(id, strconv.FormatBool(allow))
		s.probed = true
		return s
	}
	for _, tc := range []struct {
		name         string
		settings     []brokerAllowEveryone
		probeFailure string
		want         bool
		err          []string
	}{
		{name: "no broker sets it", settings: []brokerAllowEveryone{unset(1), unset(2), unset(3)}},
		{name: "all show true", settings: []brokerAllowEveryone{shown(1, "true"), shown(2, " TRUE")}, want: true},
		{name: "all show false", settings: []brokerAllowEveryone{shown(1, "false"), unset(2)}},
		{name: "hidden everywhere", settings: []brokerAllowEveryone{hidden(1), hidden(2), hidden(3)},
			err: []string{"cannot tell", "broker(s) 1, 2, 3 set allow.everyone.if.no.acl.found", "readonly.allow.everyone.if.no.acl.found=true or =false"}},
		{name: "hidden on one, unset on the others", settings: []brokerAllowEveryone{unset(1), hidden(2), unset(3)},
			err: []string{"broker(s) 2 set", "broker(s) 1, 3 do not set it", "readonly.allow.everyone.if.no.acl.found"}},
		{name: "hidden, the probe failed", settings: []brokerAllowEveryone{hidden(1)}, probeFailure: "broker 1: no SCRAM",
			err: []string{"does not reveal its value", "probing their authorizer failed: broker 1: no SCRAM", "readonly.allow.everyone.if.no.acl.found=true or =false"}},
		{name: "probed true everywhere", settings: []brokerAllowEveryone{probed(1, true), probed(2, true)}, want: true},
		{name: "probed false beside unset", settings: []brokerAllowEveryone{probed(1, false), unset(2)}},
		{name: "probed answers disagree", settings: []brokerAllowEveryone{probed(1, true), probed(2, false)},
			err: []string{"disagree", "broker(s) 1 allow everyone", "broker(s) 2 do not"}},
		{name: "shown values disagree", settings: []brokerAllowEveryone{shown(1, "true"), unset(2)},
			err: []string{"disagree", "broker(s) 1 allow everyone", "broker(s) 2 do not", "readonly.allow.everyone.if.no.acl.found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideAllowEveryone(tc.settings, tc.probeFailure)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("decideAllowEveryone = %v, want an error", got)
				}
				for _, s := range tc.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				if r := topicError("t", err); r.ErrorCode != kerr.InvalidConfig.Code {
					t.Errorf("per-topic error code %d, want INVALID_CONFIG", r.ErrorCode)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("decideAllowEveryone = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestReadAllowEveryone reads one broker's DescribeConfigs answer as a
// Kafka broker gives it: the key absent when server.properties does not set
// it, listed with its source and a hidden value when it does.
func TestReadAllowEveryone(t *testing.T) {
	resp := func(configs ...kmsg.DescribeConfigsResponseResourceConfig) *kmsg.DescribeConfigsResponse {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, "2", configs
		return &kmsg.DescribeConfigsResponse{Resources: []kmsg.DescribeConfigsResponseResource{r}}
	}
	entry := func(source kmsg.ConfigSource, value *string, sensitive bool) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Source, c.Value, c.IsSensitive = allowEveryoneKey, source, value, sensitive
		return c
	}
	yes := "true"
	for _, tc := range []struct {
		name      string
		resp      *kmsg.DescribeConfigsResponse
		set, seen bool
	}{
		{name: "absent", resp: resp()},
		{name: "default source", resp: resp(entry(kmsg.ConfigSourceDefaultConfig, &yes, false))},
		{name: "static, hidden", resp: resp(entry(kmsg.ConfigSourceStaticBrokerConfig, nil, true)), set: true},
		{name: "static, sensitive with a value", resp: resp(entry(kmsg.ConfigSourceStaticBrokerConfig, &yes, true)), set: true},
		{name: "dynamic, shown", resp: resp(entry(kmsg.ConfigSourceDynamicBrokerConfig, &yes, false)), set: true, seen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAllowEveryone(2, tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			if got.broker != 2 || got.set != tc.set || (got.value != nil) != tc.seen {
				t.Fatalf("readAllowEveryone = %+v, want set %v, value shown %v", got, tc.set, tc.seen)
			}
		})
	}
	failed := resp()
	failed.Resources[0].ErrorCode = kerr.ClusterAuthorizationFailed.Code
	if _, err := readAllowEveryone(2, failed); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("error = %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// TestAllowsEveryoneAuto asks a three-broker kfake cluster, whose brokers
// do not set allow.everyone.if.no.acl.found, with the default "auto": every
// broker is asked for itself, the answer is false, and Protect adds only
// the DENY WRITE. A stated value is used without asking.
func TestAllowsEveryoneAuto(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	asked := map[string]bool{}
	var mu sync.Mutex
	c.ControlKey(int16(kmsg.DescribeConfigs), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, res := range r.(*kmsg.DescribeConfigsRequest).Resources {
			if res.ResourceType == kmsg.ConfigResourceTypeBroker {
				asked[res.ResourceName] = true
			}
		}
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	d := NewDestination(cl, "")
	got, err := d.allowsEveryone(ctx)
	if err != nil || got {
		t.Fatalf("allowsEveryone = %v, %v; want false", got, err)
	}
	mu.Lock()
	if len(asked) != 3 || asked[""] {
		t.Fatalf("asked brokers %v, want each of the three by its ID", asked)
	}
	mu.Unlock()
	acls, err := d.Protect(ctx, "t")
	deny, _ := readOnlyACLs("t")
	if err != nil || !slices.Equal(acls, []fsm.ACL{deny}) {
		t.Fatalf("Protect = %v, %v; want the DENY WRITE alone", acls, err)
	}
	if got, err := NewDestination(cl, "true").allowsEveryone(ctx); err != nil || !got {
		t.Fatalf("stated true: %v, %v", got, err)
	}
}

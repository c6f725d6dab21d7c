package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// probeFixture is a kfake cluster with SASL, its super-user admin client
// and a record of the SCRAM users the probe created and deleted.
type probeFixture struct {
	t     *testing.T
	ctx   context.Context
	c     *kfake.Cluster
	admin *kgo.Client

	mu       sync.Mutex
	upserted []string // users whose credentials were created
	deleted  []string
	metadata []string // the topics users other than the admin asked Metadata for
}

func newProbeFixture(t *testing.T, adminUser string, opts ...kfake.Opt) *probeFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "admin-secret")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &probeFixture{t: t, ctx: ctx, c: c}
	c.ControlKey(int16(kmsg.AlterUserSCRAMCredentials), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, u := range req.Upsertions {
			f.upserted = append(f.upserted, u.Name)
		}
		for _, d := range req.Deletions {
			f.deleted = append(f.deleted, d.Name)
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, tp := range r.(*kmsg.MetadataRequest).Topics {
			if tp.Topic != nil && strings.HasPrefix(*tp.Topic, probeUserPrefix) {
				f.metadata = append(f.metadata, *tp.Topic)
			}
		}
		return nil, nil, false
	})
	pass := "admin-secret"
	if adminUser != "admin" {
		pass = adminUser + "-secret"
	}
	f.admin, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(plain.Auth{User: adminUser, Pass: pass}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.admin.Close)
	return f
}

// scramDialer logs in with the probe's user and password, as the sidecar's
// dialer does.
func scramDialer(mechanism, user, password string) ([]kgo.Opt, error) {
	a := scram.Auth{User: user, Pass: password}
	if mechanism == "SCRAM-SHA-256" {
		return []kgo.Opt{kgo.SASL(a.AsSha256Mechanism())}, nil
	}
	return []kgo.Opt{kgo.SASL(a.AsSha512Mechanism())}, nil
}

func (f *probeFixture) probe(dial ProbeDialer) *authzProbe {
	p := newAuthzProbe(f.admin, dial, 0, zaptest.NewLogger(f.t))
	p.loginTimeout = time.Second
	return p
}

func (f *probeFixture) brokers() []kmsg.MetadataResponseBroker {
	f.t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(f.ctx, f.admin)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Brokers
}

// checkUserGone fails unless every user the probe created was deleted and
// the cluster knows no probe user.
func (f *probeFixture) checkUserGone() {
	f.t.Helper()
	f.mu.Lock()
	upserted, deleted := slices.Clone(f.upserted), slices.Clone(f.deleted)
	f.mu.Unlock()
	for _, u := range upserted {
		if !strings.HasPrefix(u, probeUserPrefix+"0-") {
			f.t.Errorf("probe user %q, want the prefix %s0-", u, probeUserPrefix)
		}
		if !slices.Contains(deleted, u) {
			f.t.Errorf("probe user %s was never deleted (deleted %v)", u, deleted)
		}
	}
	described, err := kadm.NewClient(f.admin).DescribeUserSCRAMs(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for u := range described {
		if strings.HasPrefix(u, probeUserPrefix) {
			f.t.Errorf("the cluster still has the probe user %s", u)
		}
	}
}

// TestAuthzProbe probes a kfake broker as a fresh SCRAM user: with ACLs
// enforced and none for the user, the Metadata request for an unknown
// topic is refused (allow everyone false); without enforcement it is
// answered with UNKNOWN_TOPIC_OR_PARTITION (true). The user exists while
// it asks and is deleted afterwards.
func TestAuthzProbe(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		want bool
	}{
		{name: "ACLs enforced", opts: []kfake.Opt{kfake.EnableACLs()}, want: false},
		{name: "everyone allowed", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProbeFixture(t, "admin", tc.opts...)
			p := f.probe(scramDialer)
			brokers := f.brokers()
			got := p.probeBrokers(f.ctx, brokers)[brokers[0].NodeID]
			if got.err != nil || got.allow != tc.want {
				t.Fatalf("probe = %v, %v; want %v", got.allow, got.err, tc.want)
			}
			f.mu.Lock()
			asked, upserted := len(f.metadata), len(f.upserted)
			f.mu.Unlock()
			if asked == 0 || upserted != 2 {
				t.Fatalf("the probe asked Metadata %d times and created %d credentials, want some and two (SCRAM-SHA-512, SCRAM-SHA-256)", asked, upserted)
			}
			f.checkUserGone()

			// Cached: asked again, it creates no user; once the answer
			// is old, it probes again.
			again := p.probeBrokers(f.ctx, brokers)[brokers[0].NodeID]
			f.mu.Lock()
			upserted = len(f.upserted)
			f.mu.Unlock()
			if again.allow != tc.want || again.err != nil || upserted != 2 {
				t.Fatalf("second probe = %v, %v with %d credentials created; want the cached %v and none new", again.allow, again.err, upserted, tc.want)
			}
			p.now = func() time.Time { return time.Now().Add(probeAnswerTTL + time.Second) }
			p.probeBrokers(f.ctx, brokers)
			f.mu.Lock()
			upserted = len(f.upserted)
			f.mu.Unlock()
			if upserted != 4 {
				t.Fatalf("after the answer expired: %d credentials created, want 4", upserted)
			}
			f.checkUserGone()
		})
	}
}

// TestAuthzProbeFails covers the probes that cannot tell: each fails with
// the reason, and leaves no user behind.
func TestAuthzProbeFails(t *testing.T) {
	noSASL := func(string, string, string) ([]kgo.Opt, error) {
		return nil, errors.New("destination.security.protocol is PLAINTEXT")
	}
	wrongPassword := func(mechanism, user, _ string) ([]kgo.Opt, error) { return scramDialer(mechanism, user, "wrong") }
	for _, tc := range []struct {
		name   string
		admin  string
		opts   []kfake.Opt
		dial   ProbeDialer
		reason []string
		// wildcardACL answers every DescribeACLs with an ACL for topic *.
		wildcardACL bool
		// noUser: the probe fails before it creates a user.
		noUser bool
	}{
		{name: "no SASL to the broker", admin: "admin", dial: noSASL, reason: []string{"PLAINTEXT"}, noUser: true},
		{name: "login never succeeds", admin: "admin", dial: wrongPassword,
			reason: []string{"log in to broker", "temporary SCRAM user " + probeUserPrefix + "0-"}},
		{name: "no permission to alter users", admin: "bob", dial: scramDialer,
			opts: []kfake.Opt{kfake.EnableACLs(), kfake.User("PLAIN", "bob", "bob-secret",
				kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral,
					Operation: kmsg.ACLOperationDescribe, Allow: true})},
			reason: []string{"create the temporary SCRAM user", "CLUSTER_AUTHORIZATION_FAILED", "ALTER on the CLUSTER"}},
		// kfake's MATCH filter matches literal names only: a wildcard ACL
		// is answered by hand.
		{name: "ACLs match every probe topic", admin: "admin", dial: scramDialer, wildcardACL: true, noUser: true,
			reason: []string{"ACLs (prefixed or wildcard) match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProbeFixture(t, tc.admin, tc.opts...)
			if tc.wildcardACL {
				f.c.ControlKey(int16(kmsg.DescribeACLs), func(r kmsg.Request) (kmsg.Response, error, bool) {
					f.c.KeepControl()
					resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
					res := kmsg.NewDescribeACLsResponseResource()
					res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceTypeTopic, "*", kmsg.ACLResourcePatternTypeLiteral
					a := kmsg.NewDescribeACLsResponseResourceACL()
					a.Principal, a.Host, a.Operation, a.PermissionType = "User:carol", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
					res.ACLs = append(res.ACLs, a)
					resp.Resources = append(resp.Resources, res)
					return resp, nil, true
				})
			}
			var dials atomic.Int32
			p := f.probe(func(mechanism, user, password string) ([]kgo.Opt, error) {
				dials.Add(1)
				return tc.dial(mechanism, user, password)
			})
			brokers := f.brokers()
			got := p.probeBrokers(f.ctx, brokers)[brokers[0].NodeID]
			if got.err == nil {
				t.Fatalf("probe = %v, want an error", got.allow)
			}
			for _, s := range tc.reason {
				if !strings.Contains(got.err.Error(), s) {
					t.Errorf("error %q lacks %q", got.err, s)
				}
			}
			if tc.admin == "admin" {
				f.checkUserGone()
			}
			f.mu.Lock()
			created := len(f.upserted)
			f.mu.Unlock()
			if tc.noUser && created != 0 {
				t.Fatalf("the probe created %d credentials, want none", created)
			}
			// A failure is cached for a short time only.
			before := dials.Load()
			p.probeBrokers(f.ctx, brokers)
			if dials.Load() != before {
				t.Fatalf("a failed probe was tried again at once")
			}
			p.now = func() time.Time { return time.Now().Add(probeFailureTTL + time.Second) }
			p.probeBrokers(f.ctx, brokers)
			if dials.Load() == before {
				t.Fatalf("a failed probe was not tried again after %v", probeFailureTTL)
			}
		})
	}
}

// TestAllowsEveryoneProbed runs "auto" against brokers that list
// allow.everyone.if.no.acl.found without its value, as Kafka does when
// server.properties sets it: the probe answers, Protect adds the ALLOW ALL
// beside the DENY WRITE where the broker lets everyone in, and the DENY
// WRITE alone where it does not. Without a probe the start is refused, as
// before, naming the sidecar key.
func TestAllowsEveryoneProbed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []kfake.Opt
		allow bool
	}{
		{name: "allows everyone", allow: true},
		{name: "denies", opts: []kfake.Opt{kfake.EnableACLs()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProbeFixture(t, "admin", append(tc.opts, kfake.SeedTopics(1, "t"))...)
			f.c.ControlKey(int16(kmsg.DescribeConfigs), func(r kmsg.Request) (kmsg.Response, error, bool) {
				f.c.KeepControl()
				req := r.(*kmsg.DescribeConfigsRequest)
				resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
				for _, res := range req.Resources {
					rr := kmsg.NewDescribeConfigsResponseResource()
					rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
					c := kmsg.NewDescribeConfigsResponseResourceConfig()
					c.Name, c.Source, c.IsSensitive = allowEveryoneKey, kmsg.ConfigSourceStaticBrokerConfig, true
					rr.Configs = append(rr.Configs, c)
					resp.Resources = append(resp.Resources, rr)
				}
				return resp, nil, true
			})
			if _, err := NewDestination(f.admin, "auto").allowsEveryone(f.ctx); err == nil ||
				!strings.Contains(err.Error(), "readonly.allow.everyone.if.no.acl.found=true or =false") {
				t.Fatalf("without a probe: %v, want the refusal naming the key", err)
			}
			d := NewDestination(f.admin, "auto").WithAuthorizerProbe(scramDialer, 0, zaptest.NewLogger(t))
			d.probe.loginTimeout = time.Second
			acls, err := d.Protect(f.ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			deny, allow := readOnlyACLs("t")
			want := []fsm.ACL{deny}
			if tc.allow {
				want = append(want, allow)
			}
			if !slices.Equal(acls, want) {
				t.Fatalf("Protect = %v, want %v", acls, want)
			}
			f.checkUserGone()
		})
	}
}

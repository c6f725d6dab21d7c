package coordinator

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/protocol"
)

// securedCluster is one sidecar whose admin endpoint is SASL_PLAINTEXT with
// authorization on, relaying SASL to a kfake "local broker" that knows the
// users: root (a super user of the admin endpoint), alice (no ACLs),
// monitor and mirror-admin (the roles of KIP-1279 section 8.4).
type securedCluster struct {
	*sidecarCluster
	source string
}

var (
	rootUser    = scram.Auth{User: "root", Pass: "root-pw"}.AsSha512Mechanism()
	aliceUser   = plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()
	monitorUser = scram.Auth{User: "monitor", Pass: "monitor-pw"}.AsSha256Mechanism()
	adminUser   = scram.Auth{User: "mirror-admin", Pass: "admin-pw"}.AsSha512Mechanism()
)

func newSecuredCluster(t *testing.T) *securedCluster {
	t.Helper()
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "root", "root-pw"),
		kfake.User("PLAIN", "alice", "alice-pw"),
		kfake.User("SCRAM-SHA-256", "monitor", "monitor-pw"),
		kfake.User("SCRAM-SHA-512", "mirror-admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	relay := protocol.NewSASLRelay(broker.ListenAddrs(), nil, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
	c := newSecureSidecarCluster(t, Authorization{Enabled: true, SuperUsers: []string{"User:root"}},
		[]protocol.ServerOpt{protocol.SASL(relay)}, 1)
	c.waitLeader()
	return &securedCluster{sidecarCluster: c, source: newSource(t, "cluster-A")}
}

// as sends req authenticated with m.
func (c *securedCluster) as(m sasl.Mechanism, req protocol.Request) protocol.Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
	defer cancel()
	cl, err := protocol.Dial(ctx, c.adminOf(1), protocol.SASLMechanism(m))
	if err != nil {
		c.t.Fatalf("%s: %v", m.Name(), err)
	}
	defer cl.Close()
	resp, err := cl.Do(ctx, req)
	if err != nil {
		c.t.Fatalf("%s as %s: %v", protocol.KeyName(req.Key()), m.Name(), err)
	}
	return resp
}

func (c *securedCluster) state() *fsm.State { return c.service(1).admin.ctl.State() }

func (c *securedCluster) create(m sasl.Mechanism, name string) *protocol.CreateClusterMirrorResponse {
	c.t.Helper()
	src := c.source
	return c.as(m, &protocol.CreateClusterMirrorRequest{MirrorName: name,
		Config: []protocol.ClusterMirrorConfig{{Name: fsm.BootstrapServersKey, Value: &src}}}).(*protocol.CreateClusterMirrorResponse)
}

func (c *securedCluster) listed(m sasl.Mechanism) []string {
	c.t.Helper()
	var names []string
	for _, lm := range c.as(m, &protocol.ListClusterMirrorsRequest{}).(*protocol.ListClusterMirrorsResponse).Mirrors {
		names = append(names, lm.MirrorName)
	}
	return names
}

func createAcls(ops []acl.Operation, name, principal string) *protocol.CreateAclsRequest {
	req := &protocol.CreateAclsRequest{}
	req.SetVersion(3)
	for _, op := range ops {
		req.Creations = append(req.Creations, kmsg.CreateACLsRequestCreation{ResourceType: kmsg.ACLResourceType(acl.ResourceClusterMirror),
			ResourceName: name, ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: principal, Host: "*",
			Operation: kmsg.ACLOperation(op), PermissionType: kmsg.ACLPermissionTypeAllow})
	}
	return req
}

const authzFailed = 31 // CLUSTER_AUTHORIZATION_FAILED

func TestAdminAuthentication(t *testing.T) {
	c := newSecuredCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
	defer cancel()

	// No SASL: the first request other than ApiVersions closes the
	// connection, and nothing is created.
	cl, err := protocol.Dial(ctx, c.adminOf(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Do(ctx, &protocol.ApiVersionsRequest{}); err != nil {
		t.Fatalf("ApiVersions before authenticating: %v", err)
	}
	src := c.source
	if resp, err := cl.Do(ctx, &protocol.CreateClusterMirrorRequest{MirrorName: "sneaky",
		Config: []protocol.ClusterMirrorConfig{{Name: fsm.BootstrapServersKey, Value: &src}}}); err == nil {
		t.Fatalf("an unauthenticated CreateClusterMirror was answered: %+v", resp)
	}
	cl.Close()
	if len(c.state().Mirrors) != 0 {
		t.Fatalf("an unauthenticated request created %v", c.state().MirrorNames())
	}

	// A wrong password fails at the broker, for PLAIN and SCRAM alike.
	for _, m := range []sasl.Mechanism{plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		scram.Auth{User: "root", Pass: "nope"}.AsSha512Mechanism()} {
		_, err := protocol.Dial(ctx, c.adminOf(1), protocol.SASLMechanism(m))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", m.Name(), err)
		}
	}
	// A user the broker does not know.
	_, err = protocol.Dial(ctx, c.adminOf(1), protocol.SASLMechanism(scram.Auth{User: "mallory", Pass: "y"}.AsSha256Mechanism()))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("an unknown user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	// A mechanism the endpoint does not enable.
	_, err = protocol.Dial(ctx, c.adminOf(1), protocol.SASLMechanism(oauth.Auth{Token: "t"}.AsMechanism()))
	if !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("OAUTHBEARER: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
	// The right password authenticates (and the principal is the user's:
	// root is a super user).
	if names := c.listed(rootUser); len(names) != 0 {
		t.Fatalf("root lists %v on an empty group", names)
	}
}

func TestAdminAuthorization(t *testing.T) {
	c := newSecuredCluster(t)

	// alice authenticates but has no ACL: CREATE is denied, nothing changes.
	resp := c.create(aliceUser, "my-mirror")
	wantCode(t, "alice creates", resp.ErrorCode, resp.ErrorMessage, authzFailed, "User:alice", "CREATE", "my-mirror")
	if len(c.state().Mirrors) != 0 {
		t.Fatalf("a denied create created %v", c.state().MirrorNames())
	}
	// Nor may she grant herself ACLs (ALTER on the CLUSTER).
	ar := c.as(aliceUser, createAcls([]acl.Operation{acl.OpAll}, "*", "User:alice")).(*protocol.CreateAclsResponse)
	if len(ar.Results) != 1 || ar.Results[0].ErrorCode != authzFailed || len(c.state().AdminACLs) != 0 {
		t.Fatalf("alice's CreateAcls = %+v, ACLs %+v", ar.Results, c.state().AdminACLs)
	}

	// The super user grants the KIP's roles (section 8.4).
	six := []acl.Operation{acl.OpCreate, acl.OpAlter, acl.OpDescribe, acl.OpDelete, acl.OpAlterConfigs, acl.OpDescribeConfigs}
	for _, req := range []*protocol.CreateAclsRequest{createAcls(six, "my-mirror", "User:mirror-admin"),
		createAcls([]acl.Operation{acl.OpDescribe, acl.OpDescribeConfigs}, "*", "User:monitor")} {
		for _, r := range c.as(rootUser, req).(*protocol.CreateAclsResponse).Results {
			wantCode(t, "root creates ACLs", r.ErrorCode, r.ErrorMessage, 0)
		}
	}
	if n := len(c.state().AdminACLs); n != 8 {
		t.Fatalf("%d ACLs stored, want 8", n)
	}

	// mirror-admin creates its mirror, root another.
	if resp := c.create(adminUser, "my-mirror"); resp.ErrorCode != 0 {
		t.Fatalf("mirror-admin creates my-mirror: %v", protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage))
	}
	if resp := c.create(rootUser, "other"); resp.ErrorCode != 0 {
		t.Fatalf("root creates other: %v", protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage))
	}
	resp = c.create(adminUser, "not-mine")
	wantCode(t, "mirror-admin creates not-mine", resp.ErrorCode, resp.ErrorMessage, authzFailed)

	// --list shows each caller the mirrors it may describe.
	for _, tc := range []struct {
		m    sasl.Mechanism
		want []string
	}{{rootUser, []string{"my-mirror", "other"}}, {monitorUser, []string{"my-mirror", "other"}},
		{adminUser, []string{"my-mirror"}}, {aliceUser, nil}} {
		if got := c.listed(tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists %v, want %v", tc.m.Name(), got, tc.want)
		}
	}
	// Describe: a named mirror the caller may not see is an error, "all"
	// leaves it out.
	dr := c.as(adminUser, &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror", "other"}}).(*protocol.DescribeClusterMirrorsResponse)
	if len(dr.Mirrors) != 2 || dr.Mirrors[0].ErrorCode != 0 || dr.Mirrors[1].ErrorCode != authzFailed || dr.Mirrors[1].SourceBootstrap != "" {
		t.Fatalf("mirror-admin describes my-mirror and other: %+v", dr.Mirrors)
	}
	dr = c.as(adminUser, &protocol.DescribeClusterMirrorsRequest{}).(*protocol.DescribeClusterMirrorsResponse)
	if len(dr.Mirrors) != 1 || dr.Mirrors[0].MirrorName != "my-mirror" {
		t.Fatalf("mirror-admin describes all: %+v", dr.Mirrors)
	}

	// IncludeAuthorizedOperations: a bit per operation (Kafka's codes).
	for _, tc := range []struct {
		m    sasl.Mechanism
		want int32
	}{{monitorUser, 1<<8 | 1<<10}, {adminUser, 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11}} {
		dr := c.as(tc.m, &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror"}, IncludeAuthorizedOperations: true}).(*protocol.DescribeClusterMirrorsResponse)
		if len(dr.Mirrors) != 1 || dr.Mirrors[0].AuthorizedOperations != tc.want {
			t.Fatalf("%s: authorized operations %+v, want %b", tc.m.Name(), dr.Mirrors, tc.want)
		}
	}

	// The monitor reads configs but may not change them or delete.
	dc := c.as(monitorUser, &protocol.DescribeConfigsRequest{Resources: []protocol.DescribeConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "my-mirror"}}}).(*protocol.DescribeConfigsResponse)
	if len(dc.Results) != 1 || dc.Results[0].ErrorCode != 0 || len(dc.Results[0].Configs) == 0 {
		t.Fatalf("monitor describes configs: %+v", dc.Results)
	}
	v := "5000"
	alter := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "other", Configs: []protocol.AlterableConfig{{Name: RefreshIntervalKey, ConfigOperation: protocol.ConfigOpSet, Value: &v}}},
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "my-mirror", Configs: []protocol.AlterableConfig{{Name: RefreshIntervalKey, ConfigOperation: protocol.ConfigOpSet, Value: &v}}},
	}}
	for _, tc := range []struct {
		m    sasl.Mechanism
		want []int16
	}{{monitorUser, []int16{authzFailed, authzFailed}}, {adminUser, []int16{authzFailed, 0}}} {
		before := c.state().Mirrors["other"].Config[RefreshIntervalKey]
		out := c.as(tc.m, alter).(*protocol.IncrementalAlterConfigsResponse)
		var codes []int16
		for _, r := range out.Responses {
			codes = append(codes, r.ErrorCode)
		}
		if !slices.Equal(codes, tc.want) || c.state().Mirrors["other"].Config[RefreshIntervalKey] != before {
			t.Fatalf("%s alters other and my-mirror: codes %v, want %v; other's config %v", tc.m.Name(), codes, tc.want, c.state().Mirrors["other"].Config)
		}
	}
	if c.state().Mirrors["my-mirror"].Config[RefreshIntervalKey] != v {
		t.Fatalf("mirror-admin's allowed alter did not apply: %v", c.state().Mirrors["my-mirror"].Config)
	}
	del := c.as(monitorUser, &protocol.DeleteClusterMirrorRequest{MirrorName: "my-mirror"}).(*protocol.DeleteClusterMirrorResponse)
	wantCode(t, "monitor deletes", del.ErrorCode, del.ErrorMessage, authzFailed, "DELETE")
	st := c.as(monitorUser, &protocol.StopMirrorTopicsRequest{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicData{{TopicName: ".*"}}}).(*protocol.StopMirrorTopicsResponse)
	wantCode(t, "monitor stops", st.ErrorCode, st.ErrorMessage, authzFailed, "ALTER")
	// Every topic action needs ALTER, --recover too.
	for _, req := range []protocol.Request{
		&protocol.StartMirrorTopicsRequest{MirrorName: "my-mirror", Topics: []protocol.StartMirrorTopicData{{TopicName: "t"}}},
		&protocol.PauseMirrorTopicsRequest{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicData{{TopicName: "t"}}},
		&protocol.ResumeMirrorTopicsRequest{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicData{{TopicName: "t"}}},
		&protocol.RecoverMirrorTopicsRequest{MirrorName: "my-mirror", TopicPatterns: []string{".*"}},
	} {
		var code int16
		var msg *string
		switch r := c.as(monitorUser, req).(type) {
		case *protocol.StartMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *protocol.PauseMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *protocol.ResumeMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *protocol.RecoverMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		}
		wantCode(t, "the monitor's "+protocol.KeyName(req.Key()), code, msg, authzFailed, "ALTER")
	}
	if _, ok := c.state().Mirrors["my-mirror"]; !ok {
		t.Fatal("a denied delete removed my-mirror")
	}

	// Membership needs ALTER on the CLUSTER: alice is denied, the group
	// unchanged.
	add := c.as(aliceUser, &protocol.AddSidecarRequest{BrokerId: 99, RaftAddress: "127.0.0.1:1", AdminAddress: "127.0.0.1:2"}).(*protocol.AddSidecarResponse)
	wantCode(t, "alice adds a sidecar", add.ErrorCode, add.ErrorMessage, authzFailed, "CLUSTER")
	if hasMember(t, c.Running()[1], 99) {
		t.Fatal("a denied AddSidecar added sidecar 99")
	}

	// DescribeAcls and DeleteAcls (root); the monitor loses its view.
	desc := &protocol.DescribeAclsRequest{}
	desc.SetVersion(3)
	desc.ResourceType, desc.ResourcePatternType, desc.Operation, desc.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	principal := "User:monitor"
	desc.Principal = &principal
	da := c.as(rootUser, desc).(*protocol.DescribeAclsResponse)
	if len(da.Resources) != 1 || da.Resources[0].ResourceName != "*" || len(da.Resources[0].ACLs) != 2 {
		t.Fatalf("DescribeAcls for the monitor: %+v", da.Resources)
	}
	if da := c.as(monitorUser, desc).(*protocol.DescribeAclsResponse); da.ErrorCode != authzFailed {
		t.Fatalf("the monitor's DescribeAcls: error %d, want %d", da.ErrorCode, authzFailed)
	}
	delReq := &protocol.DeleteAclsRequest{}
	delReq.SetVersion(3)
	delReq.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Principal: &principal, Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	dd := c.as(rootUser, delReq).(*protocol.DeleteAclsResponse)
	if len(dd.Results) != 1 || dd.Results[0].ErrorCode != 0 || len(dd.Results[0].MatchingACLs) != 2 {
		t.Fatalf("DeleteAcls: %+v", dd.Results)
	}
	if got := c.listed(monitorUser); len(got) != 0 {
		t.Fatalf("the monitor still lists %v after its ACLs were deleted", got)
	}
}

// TestEveryAPIAuthorized sends every admin API of the registry, but the
// internal ones and those spoken before authentication (ApiVersions,
// SaslHandshake, SaslAuthenticate), as alice, who authenticates but holds no
// ACL: each is refused with CLUSTER_AUTHORIZATION_FAILED (ListClusterMirrors
// shows her nothing) and none changes the mirrors, ACLs or members. An API
// added to the registry fails here until it is given a request below, so
// that none is served unauthorized by default.
func TestEveryAPIAuthorized(t *testing.T) {
	c := newSecuredCluster(t)
	if resp := c.create(rootUser, "m"); resp.ErrorCode != 0 {
		t.Fatalf("root creates m: %v", protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage))
	}
	v := "5000"
	requests := map[int16]protocol.Request{
		protocol.KeyDescribeConfigs: &protocol.DescribeConfigsRequest{Resources: []protocol.DescribeConfigsResource{
			{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"}}},
		protocol.KeyIncrementalAlterConfigs: &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{
			{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m",
				Configs: []protocol.AlterableConfig{{Name: RefreshIntervalKey, ConfigOperation: protocol.ConfigOpSet, Value: &v}}}}},
		protocol.KeyCreateClusterMirror: &protocol.CreateClusterMirrorRequest{MirrorName: "n",
			Config: []protocol.ClusterMirrorConfig{{Name: fsm.BootstrapServersKey, Value: &c.source}}},
		protocol.KeyDeleteClusterMirror:    &protocol.DeleteClusterMirrorRequest{MirrorName: "m"},
		protocol.KeyListClusterMirrors:     &protocol.ListClusterMirrorsRequest{},
		protocol.KeyDescribeClusterMirrors: &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"m"}},
		protocol.KeyStartMirrorTopics:      &protocol.StartMirrorTopicsRequest{MirrorName: "m", Topics: []protocol.StartMirrorTopicData{{TopicName: "t"}}},
		protocol.KeyStopMirrorTopics:       &protocol.StopMirrorTopicsRequest{MirrorName: "m", Topics: []protocol.MirrorTopicData{{TopicName: "t"}}},
		protocol.KeyPauseMirrorTopics:      &protocol.PauseMirrorTopicsRequest{MirrorName: "m", Topics: []protocol.MirrorTopicData{{TopicName: "t"}}},
		protocol.KeyResumeMirrorTopics:     &protocol.ResumeMirrorTopicsRequest{MirrorName: "m", Topics: []protocol.MirrorTopicData{{TopicName: "t"}}},
		protocol.KeyRecoverMirrorTopics:    &protocol.RecoverMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{".*"}},
		protocol.KeyAddSidecar:             &protocol.AddSidecarRequest{BrokerId: 99, RaftAddress: "127.0.0.1:1", AdminAddress: "127.0.0.1:2"},
		protocol.KeyRemoveSidecar:          &protocol.RemoveSidecarRequest{BrokerId: 1},
		protocol.KeyDescribeSidecars:       &protocol.DescribeSidecarsRequest{},
		protocol.KeyCreateAcls:             createAcls([]acl.Operation{acl.OpAll}, "*", "User:alice"),
		protocol.KeyDescribeAcls:           describeAllAcls(),
		protocol.KeyDeleteAcls:             deleteAllAcls(),
	}
	before := c.state().Clone()
	for _, api := range protocol.APIs() {
		switch {
		case api.Internal: // peers only (peer TLS; see TestAdminAuthentication)
			continue
		case api.Key == protocol.KeyApiVersions, api.Key == protocol.KeySaslHandshake, api.Key == protocol.KeySaslAuthenticate:
			continue // before authentication
		}
		t.Run(api.Name, func(t *testing.T) {
			req, ok := requests[api.Key]
			if !ok {
				t.Fatalf("no request for %s: add one, with the ACL it needs in authorize", api.Name)
			}
			resp := c.as(aliceUser, req)
			if l, ok := resp.(*protocol.ListClusterMirrorsResponse); ok {
				if l.ErrorCode != 0 || len(l.Mirrors) != 0 {
					t.Fatalf("alice lists %+v", l)
				}
				return
			}
			if codes := errorCodes(reflect.ValueOf(resp).Elem()); !slices.Contains(codes, authzFailed) || slices.ContainsFunc(codes, func(c int16) bool { return c != 0 && c != authzFailed }) {
				t.Fatalf("alice's %s: error codes %v, want CLUSTER_AUTHORIZATION_FAILED (%d)", api.Name, codes, authzFailed)
			}
		})
	}
	after := c.state()
	if !slices.Equal(after.MirrorNames(), before.MirrorNames()) || len(after.AdminACLs) != len(before.AdminACLs) ||
		len(after.Sidecars) != len(before.Sidecars) || after.Mirrors["m"].Config[RefreshIntervalKey] != before.Mirrors["m"].Config[RefreshIntervalKey] {
		t.Fatalf("alice's refused requests changed the state: mirrors %v, %d ACLs, %d sidecars", after.MirrorNames(), len(after.AdminACLs), len(after.Sidecars))
	}
	if hasMember(t, c.Running()[1], 99) {
		t.Fatal("a refused AddSidecar added sidecar 99")
	}
}

// errorCodes returns the ErrorCode fields of a response struct v, of its
// embedded structs and of the structs in its slices (one level down).
func errorCodes(v reflect.Value) []int16 {
	var codes []int16
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case sf.Name == "ErrorCode" && f.Kind() == reflect.Int16:
			codes = append(codes, int16(f.Int()))
		case sf.Anonymous && f.Kind() == reflect.Struct:
			codes = append(codes, errorCodes(f)...)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			for j := range f.Len() {
				if e := f.Index(j).FieldByName("ErrorCode"); e.IsValid() && e.Kind() == reflect.Int16 {
					codes = append(codes, int16(e.Int()))
				}
			}
		}
	}
	return codes
}

func describeAllAcls() *protocol.DescribeAclsRequest {
	req := &protocol.DescribeAclsRequest{}
	req.SetVersion(3)
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req
}

func deleteAllAcls() *protocol.DeleteAclsRequest {
	req := &protocol.DeleteAclsRequest{}
	req.SetVersion(3)
	req.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	return req
}

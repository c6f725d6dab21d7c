package coordinator

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// alterResource sends IncrementalAlterConfigs for one resource.
func alterResource(t *testing.T, c *sidecarCluster, at int32, typ int8, name string, validateOnly bool, cfgs ...protocol.AlterableConfig) protocol.AlterConfigsResourceResponse {
	t.Helper()
	req := &protocol.IncrementalAlterConfigsRequest{ValidateOnly: validateOnly, Resources: []protocol.AlterConfigsResource{
		{ResourceType: typ, ResourceName: name, Configs: cfgs}}}
	req.SetVersion(1)
	resp := c.do(at, req).(*protocol.IncrementalAlterConfigsResponse)
	if len(resp.Responses) != 1 || resp.Responses[0].ResourceType != typ || resp.Responses[0].ResourceName != name {
		t.Fatalf("outcomes %+v for one resource", resp.Responses)
	}
	return resp.Responses[0]
}

func describeResource(t *testing.T, c *sidecarCluster, at int32, typ int8, name string) protocol.DescribeConfigsResult {
	t.Helper()
	req := &protocol.DescribeConfigsRequest{IncludeSynonyms: true, Resources: []protocol.DescribeConfigsResource{{ResourceType: typ, ResourceName: name}}}
	req.SetVersion(4)
	resp := c.do(at, req).(*protocol.DescribeConfigsResponse)
	if len(resp.Results) != 1 {
		t.Fatalf("results %+v for one resource", resp.Results)
	}
	return resp.Results[0]
}

// waitThrottle runs the reconciler's throttle step of sidecar id (the test
// cluster runs no reconcile loop) until its data plane was given want.
func waitThrottle(t *testing.T, c *sidecarCluster, id int32, want fetcher.ReplicationThrottle) {
	t.Helper()
	var got fetcher.ReplicationThrottle
	c.mu.Lock()
	plane := c.planes[id]
	c.mu.Unlock()
	svc := c.service(id)
	testwait.For(t, raftnodetest.Timeout, fmt.Sprintf("the throttle %+v on sidecar %d", want, id), func() bool {
		svc.rec.syncThrottle(svc.admin.ctl.State())
		var ok bool
		got, ok = plane.lastThrottle()
		return ok && reflect.DeepEqual(got, want)
	})
}

// TestThrottleConfigs sets, describes and deletes the throttle configs of
// KIP-1279 §4.12 through a follower's admin endpoint, and checks what each
// sidecar's data plane is given: its own broker's rate, and its own
// replicas of the throttled-replicas list.
func TestThrottleConfigs(t *testing.T) {
	c := newSidecarCluster(t, 1, 2)
	leader := c.waitLeader()
	for _, id := range []int32{1, 2} {
		raftnodetest.ApplyOK(t, c.Running()[leader], fsm.RegisterSidecar{ID: id, RaftAddr: "h:9192", AdminAddr: c.adminOf(id)})
	}
	fid, _ := raftnodetest.Follower(t, c.Running(), leader)
	broker, topic := protocol.ResourceTypeBroker, protocol.ResourceTypeTopic

	// Nothing set: no dynamic rate, every partition throttled.
	waitThrottle(t, c, 1, fetcher.ReplicationThrottle{})

	r := alterResource(t, c, fid, broker, "2", false, set(fsm.ThrottledRateKey, "100000000"))
	wantCode(t, "set the rate of broker 2", r.ErrorCode, r.ErrorMessage, 0)
	waitThrottle(t, c, 2, fetcher.ReplicationThrottle{Rate: 100000000, RateSet: true})
	r = alterResource(t, c, fid, topic, "my-topic", false, set(fsm.ThrottledReplicasKey, "0:2,1:1,2:2"))
	wantCode(t, "set the replicas of my-topic", r.ErrorCode, r.ErrorMessage, 0)
	waitThrottle(t, c, 2, fetcher.ReplicationThrottle{Rate: 100000000, RateSet: true,
		Replicas: map[string]fetcher.ThrottledReplicas{"my-topic": {Partitions: []int32{0, 2}}}})
	waitThrottle(t, c, 1, fetcher.ReplicationThrottle{Replicas: map[string]fetcher.ThrottledReplicas{"my-topic": {Partitions: []int32{1}}}})
	r = alterResource(t, c, fid, topic, "all-topic", false, set(fsm.ThrottledReplicasKey, "*"))
	wantCode(t, "set * on all-topic", r.ErrorCode, r.ErrorMessage, 0)
	waitThrottle(t, c, 1, fetcher.ReplicationThrottle{Replicas: map[string]fetcher.ThrottledReplicas{
		"my-topic": {Partitions: []int32{1}}, "all-topic": {All: true}}})

	// Describe: the dynamic configs, with Kafka's sources.
	d := describeResource(t, c, fid, broker, "2")
	wantCode(t, "describe broker 2", d.ErrorCode, d.ErrorMessage, 0)
	if len(d.Configs) != 1 || d.Configs[0].Name != fsm.ThrottledRateKey || deref(d.Configs[0].Value) != "100000000" ||
		d.Configs[0].ConfigSource != protocol.ConfigSourceDynamicBroker || len(d.Configs[0].Synonyms) != 1 ||
		d.Configs[0].Synonyms[0].Source != protocol.ConfigSourceDynamicBroker {
		t.Fatalf("broker 2 configs %+v", d.Configs)
	}
	if d := describeResource(t, c, fid, broker, "1"); d.ErrorCode != 0 || len(d.Configs) != 0 {
		t.Fatalf("broker 1 (nothing set): %+v", d)
	}
	d = describeResource(t, c, leader, topic, "my-topic")
	if d.ErrorCode != 0 || len(d.Configs) != 1 || deref(d.Configs[0].Value) != "0:2,1:1,2:2" || d.Configs[0].ConfigSource != protocol.ConfigSourceDynamicResource {
		t.Fatalf("my-topic configs %+v", d)
	}
	d = describeResource(t, c, leader, broker, "four")
	wantCode(t, "describe broker four", d.ErrorCode, d.ErrorMessage, kerr.InvalidRequest.Code, `"four" is not a broker ID`)

	// Refusals leave everything as it is.
	for _, tc := range []struct {
		name     string
		typ      int8
		resource string
		cfgs     []protocol.AlterableConfig
		validate bool
		code     int16
		msg      string
	}{
		{"a broker without a sidecar", broker, "9", []protocol.AlterableConfig{set(fsm.ThrottledRateKey, "5")}, false, kerr.InvalidRequest.Code, "broker 9 has no sidecar in the raft group (sidecars: 1, 2)"},
		{"not a broker ID", broker, "x", []protocol.AlterableConfig{set(fsm.ThrottledRateKey, "5")}, false, kerr.InvalidRequest.Code, `"x" is not a broker ID`},
		{"the default broker", broker, "", []protocol.AlterableConfig{set(fsm.ThrottledRateKey, "5")}, false, kerr.InvalidRequest.Code, "--entity-default"},
		{"a negative rate", broker, "2", []protocol.AlterableConfig{set(fsm.ThrottledRateKey, "-5")}, false, kerr.InvalidConfig.Code, "is not a rate"},
		{"another broker key", broker, "2", []protocol.AlterableConfig{set("num.io.threads", "8")}, false, kerr.InvalidConfig.Code, "num.io.threads is not kept by the sidecars"},
		{"append", broker, "2", []protocol.AlterableConfig{op(protocol.ConfigOpAppend, fsm.ThrottledRateKey, "5")}, false, kerr.InvalidRequest.Code, "use 0 SET or 1 DELETE"},
		{"bad replicas", topic, "my-topic", []protocol.AlterableConfig{set(fsm.ThrottledReplicasKey, "0-2")}, false, kerr.InvalidConfig.Code, "is not partition:broker"},
		{"bad replicas, validate only", topic, "my-topic", []protocol.AlterableConfig{set(fsm.ThrottledReplicasKey, "0-2")}, true, kerr.InvalidConfig.Code, "is not partition:broker"},
		{"validate only", broker, "2", []protocol.AlterableConfig{set(fsm.ThrottledRateKey, "7")}, true, 0, ""},
	} {
		before := c.service(fid).admin.ctl.State().Clone()
		r := alterResource(t, c, fid, tc.typ, tc.resource, tc.validate, tc.cfgs...)
		if tc.code == 0 {
			wantCode(t, tc.name, r.ErrorCode, r.ErrorMessage, 0)
		} else {
			wantCode(t, tc.name, r.ErrorCode, r.ErrorMessage, tc.code, tc.msg)
		}
		if after := c.service(fid).admin.ctl.State(); !reflect.DeepEqual(after.BrokerConfigs, before.BrokerConfigs) || !reflect.DeepEqual(after.TopicConfigs, before.TopicConfigs) {
			t.Fatalf("%s changed the configs: %v %v", tc.name, after.BrokerConfigs, after.TopicConfigs)
		}
	}

	// Delete: the sidecar's property applies again; deleting what is not
	// set is no error, as in Kafka.
	r = alterResource(t, c, fid, broker, "2", false, del(fsm.ThrottledRateKey))
	wantCode(t, "delete the rate of broker 2", r.ErrorCode, r.ErrorMessage, 0)
	r = alterResource(t, c, fid, topic, "my-topic", false, del(fsm.ThrottledReplicasKey))
	wantCode(t, "delete the replicas of my-topic", r.ErrorCode, r.ErrorMessage, 0)
	waitThrottle(t, c, 2, fetcher.ReplicationThrottle{Replicas: map[string]fetcher.ThrottledReplicas{"all-topic": {All: true}}})
	r = alterResource(t, c, fid, broker, "1", false, del(fsm.ThrottledRateKey))
	wantCode(t, "delete an unset rate", r.ErrorCode, r.ErrorMessage, 0)
}

// TestThrottleConfigsAuthorization checks that the throttle configs need
// ALTER_CONFIGS and DESCRIBE_CONFIGS on the CLUSTER once admin security is
// on, as Kafka's broker configs do: the KIP's mirror roles do not grant
// them.
func TestThrottleConfigsAuthorization(t *testing.T) {
	c := newSecuredCluster(t)
	raftnodetest.ApplyOK(t, c.Running()[1], fsm.RegisterSidecar{ID: 1, RaftAddr: "h:9192", AdminAddr: c.adminOf(1)})
	for _, req := range []*protocol.CreateAclsRequest{createAcls([]acl.Operation{acl.OpAll}, "*", "User:mirror-admin")} {
		for _, r := range c.as(rootUser, req).(*protocol.CreateAclsResponse).Results {
			wantCode(t, "root creates ACLs", r.ErrorCode, r.ErrorMessage, 0)
		}
	}
	alter := func(typ int8, name string) *protocol.IncrementalAlterConfigsRequest {
		key, v := fsm.ThrottledRateKey, "1000"
		if typ == protocol.ResourceTypeTopic {
			key, v = fsm.ThrottledReplicasKey, "*"
		}
		req := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{{ResourceType: typ, ResourceName: name,
			Configs: []protocol.AlterableConfig{set(key, v)}}}}
		req.SetVersion(1)
		return req
	}
	describeReq := &protocol.DescribeConfigsRequest{Resources: []protocol.DescribeConfigsResource{{ResourceType: protocol.ResourceTypeBroker, ResourceName: "1"}}}
	describeReq.SetVersion(4)
	for _, typ := range []int8{protocol.ResourceTypeBroker, protocol.ResourceTypeTopic} {
		name := map[int8]string{protocol.ResourceTypeBroker: "1", protocol.ResourceTypeTopic: "my-topic"}[typ]
		r := c.as(adminUser, alter(typ, name)).(*protocol.IncrementalAlterConfigsResponse).Responses[0]
		wantCode(t, "mirror-admin alters", r.ErrorCode, r.ErrorMessage, authzFailed, "User:mirror-admin", "ALTER_CONFIGS", "--cluster")
		r = c.as(rootUser, alter(typ, name)).(*protocol.IncrementalAlterConfigsResponse).Responses[0]
		wantCode(t, "root alters", r.ErrorCode, r.ErrorMessage, 0)
	}
	d := c.as(adminUser, describeReq).(*protocol.DescribeConfigsResponse).Results[0]
	wantCode(t, "mirror-admin describes", d.ErrorCode, d.ErrorMessage, authzFailed, "DESCRIBE_CONFIGS")
	if len(d.Configs) != 0 {
		t.Fatalf("a denied describe shows %+v", d.Configs)
	}

	// ALTER_CONFIGS and DESCRIBE_CONFIGS on the CLUSTER grant them.
	grant := createAcls([]acl.Operation{acl.OpAlterConfigs, acl.OpDescribeConfigs}, acl.ClusterName, "User:mirror-admin")
	for i := range grant.Creations {
		grant.Creations[i].ResourceType = kmsg.ACLResourceType(acl.ResourceCluster)
	}
	for _, r := range c.as(rootUser, grant).(*protocol.CreateAclsResponse).Results {
		wantCode(t, "root grants the CLUSTER", r.ErrorCode, r.ErrorMessage, 0)
	}
	r := c.as(adminUser, alter(protocol.ResourceTypeBroker, "1")).(*protocol.IncrementalAlterConfigsResponse).Responses[0]
	wantCode(t, "mirror-admin alters with ALTER_CONFIGS on the CLUSTER", r.ErrorCode, r.ErrorMessage, 0)
	d = c.as(adminUser, describeReq).(*protocol.DescribeConfigsResponse).Results[0]
	if d.ErrorCode != 0 || len(d.Configs) != 1 || deref(d.Configs[0].Value) != "1000" {
		t.Fatalf("mirror-admin describes broker 1: %+v", d)
	}
}

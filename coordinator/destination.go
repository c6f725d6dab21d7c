package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Destination does the admin work mirror operations need on the
// destination cluster: mirror topics with the configs of DESIGN D3, and the
// read-only ACLs of D4. It talks to the cluster with the sidecar's super-user
// client.
type Destination struct {
	cl *kgo.Client
	// allowEveryone is the operator's statement of the brokers'
	// allow.everyone.if.no.acl.found: "auto", "true" or "false".
	allowEveryone string
	// probe, if set, finds out with "auto" what brokers that hide the
	// value do (authzprobe.go).
	probe *authzProbe
}

// NewDestination returns a Destination using cl. allowEveryone is "auto"
// (read the broker configuration), "true" or "false".
func NewDestination(cl *kgo.Client, allowEveryone string) *Destination {
	if allowEveryone == "" {
		allowEveryone = "auto"
	}
	return &Destination{cl: cl, allowEveryone: allowEveryone}
}

// WithAuthorizerProbe lets "auto" probe the authorizer of brokers whose
// allow.everyone.if.no.acl.found Kafka does not reveal (authzprobe.go):
// dial gives the options of a client that logs in as a temporary SCRAM
// user, localBroker is the broker this sidecar runs beside, probed first.
// It returns d.
func (d *Destination) WithAuthorizerProbe(dial ProbeDialer, localBroker int32, log *zap.Logger) *Destination {
	d.probe = newAuthzProbe(d.cl, dial, localBroker, log)
	return d
}

// maxTimestampDiff is Long.MAX_VALUE: mirrored records keep their source
// timestamps however old or new they are.
const maxTimestampDiff = "9223372036854775807"

// topicConfigsNotCopied are source topic configs that never reach the
// destination: replication throttles and placement are the destination's
// own business, and the rest are forced by mirrorTopicConfigs.
var topicConfigsNotCopied = map[string]bool{
	"follower.replication.throttled.replicas": true,
	"leader.replication.throttled.replicas":   true,
	"min.insync.replicas":                     true,
	"unclean.leader.election.enable":          true,
	"confluent.placement.constraints":         true,
	"message.downconversion.enable":           true,
	"remote.storage.enable":                   true,
	"local.retention.ms":                      true,
	"local.retention.bytes":                   true,
}

// MirrorTopicConfigs returns the configs a destination mirror topic is
// created with: the source's topic-level overrides (dynamic topic configs),
// less the ones never copied, plus the forced values of DESIGN D3 that let
// batches be appended untouched: compression.type=producer (any other value
// makes the broker recompress), CreateTime timestamps accepted whatever their
// age, and max.message.bytes at least the source's.
func MirrorTopicConfigs(sourceOverrides map[string]string, sourceMaxMessageBytes int64) map[string]*string {
	out := map[string]*string{}
	for k, v := range sourceOverrides {
		if !topicConfigsNotCopied[k] {
			out[k] = &v
		}
	}
	forced := map[string]string{
		"compression.type":                "producer",
		"message.timestamp.type":          "CreateTime",
		"message.timestamp.before.max.ms": maxTimestampDiff,
		"message.timestamp.after.max.ms":  maxTimestampDiff,
	}
	if sourceMaxMessageBytes > 0 {
		forced["max.message.bytes"] = strconv.FormatInt(sourceMaxMessageBytes, 10)
	}
	for k, v := range forced {
		out[k] = &v
	}
	return out
}

// partitionMeta is a destination partition as Metadata tells: its leader
// and leader epoch, replicas and in-sync replicas, and its error (a
// partition with LEADER_NOT_AVAILABLE still names its replicas).
type partitionMeta struct {
	leader, epoch int32
	replicas, isr []int32
	err           error
}

// topicMeta is a destination topic as Metadata tells: its error
// (UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist) or its
// partitions.
type topicMeta struct {
	err        error
	partitions map[int32]partitionMeta
}

// destinationMetadata is the one way the coordinator asks the destination
// for topics' partitions (Metadata, never creating a topic that does not
// exist). It returns an error only when the request fails; each topic has
// its own error.
func destinationMetadata(ctx context.Context, cl *kgo.Client, topics []string) (map[string]topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // a deleted topic must stay deleted
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicMeta, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := topicMeta{err: kerr.ErrorForCode(t.ErrorCode), partitions: make(map[int32]partitionMeta, len(t.Partitions))}
		for _, p := range t.Partitions {
			tm.partitions[p.Partition] = partitionMeta{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR,
				err: kerr.ErrorForCode(p.ErrorCode)}
		}
		out[*t.Topic] = tm
	}
	return out, nil
}

// ExistingTopic describes a destination topic found where a mirror topic is
// to be created.
type ExistingTopic struct {
	Partitions int32
	Empty      bool // every partition's log end offset is 0
}

// DescribeTopic returns the destination topic's partition count and whether
// it is empty, or nil when it does not exist.
func (d *Destination) DescribeTopic(ctx context.Context, topic string) (*ExistingTopic, error) {
	md, err := destinationMetadata(ctx, d.cl, []string{topic})
	if err != nil {
		return nil, fmt.Errorf("coordinator: metadata of destination topic %s: %w", topic, err)
	}
	if len(md) != 1 {
		return nil, fmt.Errorf("coordinator: metadata of destination topic %s: %d topics in response", topic, len(md))
	}
	mt, ok := md[topic]
	if !ok {
		return nil, fmt.Errorf("coordinator: metadata of destination topic %s: another topic in response", topic)
	}
	if err := mt.err; err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, nil
		}
		return nil, fmt.Errorf("coordinator: metadata of destination topic %s: %w", topic, err)
	}
	ex := &ExistingTopic{Partitions: int32(len(mt.partitions)), Empty: true}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range slices.Sorted(maps.Keys(mt.partitions)) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p
		lp.Timestamp = -1
		lp.CurrentLeaderEpoch = -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	for _, shard := range d.cl.RequestSharded(ctx, lo) {
		if shard.Err != nil {
			return nil, fmt.Errorf("coordinator: end offsets of destination topic %s: %w", topic, shard.Err)
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("coordinator: end offset of destination partition %s-%d: %w", topic, p.Partition, err)
				}
				if p.Offset > 0 {
					ex.Empty = false
				}
			}
		}
	}
	return ex, nil
}

// CreateTopic creates a mirror topic. replicationFactor -1 takes the
// destination's default.
func (d *Destination) CreateTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16, configs map[string]*string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = replicationFactor
	for _, k := range sortedKeys(configs) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = configs[k]
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return fmt.Errorf("coordinator: create destination topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			msg := ""
			if t.ErrorMessage != nil {
				msg = ": " + *t.ErrorMessage
			}
			return fmt.Errorf("coordinator: create destination topic %s: %w%s", topic, err, msg)
		}
	}
	return nil
}

// The Kafka protocol codes of the ACLs the sidecars manage.
const (
	aclResourceTopic   int8 = 2
	aclPatternAny      int8 = 1
	aclPatternMatch    int8 = 2 // describe filters only: literal, prefixed and wildcard ACLs that match a name
	aclPatternLiteral  int8 = 3
	aclPatternPrefixed int8 = 4
	aclOperationAll    int8 = 2
	aclOperationWrite  int8 = 4
	aclOperationAny    int8 = 1
	aclPermissionAny   int8 = 1
	aclPermissionDeny  int8 = 2
	aclPermAllow       int8 = 3
	everyone                = "User:*"
)

// topicACLs returns every ACL that applies to topic: literal, prefixed and
// wildcard ones (pattern type MATCH). ErrNoAuthorizer when there is no
// authorizer.
func (d *Destination) topicACLs(ctx context.Context, topic string) ([]fsm.ACL, error) {
	acls, err := describeACLs(ctx, d.cl, aclResourceTopic, &topic, aclPatternMatch)
	if err != nil && !errors.Is(err, ErrNoAuthorizer) {
		return nil, fmt.Errorf("coordinator: describe ACLs of %s: %w", topic, err)
	}
	return acls, err
}

// describeACLs lists the ACLs of cl's cluster for resources of
// resourceType named name (nil: any) with the given pattern type filter.
// ErrNoAuthorizer when the cluster has no authorizer.
func describeACLs(ctx context.Context, cl *kgo.Client, resourceType int8, name *string, pattern int8) ([]fsm.ACL, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceType(resourceType)
	req.ResourceName = name
	req.ResourcePatternType = kmsg.ACLResourcePatternType(pattern)
	req.Operation = kmsg.ACLOperation(aclOperationAny)
	req.PermissionType = kmsg.ACLPermissionType(aclPermissionAny)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if errors.Is(err, kerr.SecurityDisabled) {
			return nil, ErrNoAuthorizer
		}
		return nil, err
	}
	var out []fsm.ACL
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, fsm.ACL{
				ResourceType: int8(r.ResourceType), ResourceName: r.ResourceName, PatternType: int8(r.ResourcePatternType),
				Principal: a.Principal, Host: a.Host, Operation: int8(a.Operation), Permission: int8(a.PermissionType),
			})
		}
	}
	return out, nil
}

// allowEveryoneKey is the brokers' setting that decides what principals may
// do on a resource without ACLs (StandardAuthorizer's
// allow.everyone.if.no.acl.found, false unless set).
const allowEveryoneKey = "allow.everyone.if.no.acl.found"

// allowsEveryone reports whether the brokers let everyone do everything on
// resources without ACLs (allow.everyone.if.no.acl.found). With "auto" it
// asks every broker for its own configuration (see brokerAllowEveryone and
// decideAllowEveryone): a broker that does not set the key gives a certain
// answer (false, Kafka's default); Kafka hides the value of a key it does
// not know, and the authorizer's keys are such keys, so a broker that sets
// it is probed (authzprobe.go), when the Destination has a probe. When a
// broker's answer stays unknown, or the brokers disagree, it returns an
// error naming readonly.allow.everyone.if.no.acl.found, which the operator
// sets to what the brokers do; the start of a topic that needs the answer
// fails with it.
func (d *Destination) allowsEveryone(ctx context.Context) (bool, error) {
	switch d.allowEveryone {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	mresp, err := meta.RequestWith(ctx, d.cl)
	if err != nil {
		return false, fmt.Errorf("coordinator: list the destination brokers: %w", err)
	}
	var settings []brokerAllowEveryone
	var unreachable []string
	asked := map[int32]kmsg.MetadataResponseBroker{}
	for _, b := range mresp.Brokers {
		asked[b.NodeID] = b
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeBroker
		r.ResourceName = strconv.Itoa(int(b.NodeID)) // a broker answers only for itself
		r.ConfigNames = []string{allowEveryoneKey}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, d.cl.Broker(int(b.NodeID)))
		if err == nil {
			var s brokerAllowEveryone
			if s, err = readAllowEveryone(b.NodeID, resp); err == nil {
				settings = append(settings, s)
				continue
			}
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("coordinator: describe the configuration of broker %d: %w", b.NodeID, err)
		}
		unreachable = append(unreachable, fmt.Sprintf("broker %d: %v", b.NodeID, err))
	}
	if len(settings) == 0 {
		return false, topicErr(kerr.BrokerNotAvailable, "coordinator: cannot read %s from any destination broker (%s); "+
			"state it with %s=true or =false in every sidecar's configuration", allowEveryoneKey, strings.Join(unreachable, "; "), allowEveryoneConfigKey)
	}
	// A broker that does not answer now is judged by the others: brokers
	// of one cluster are configured alike, and a start must not wait for
	// every broker to be up.
	return decideAllowEveryone(d.probeHidden(ctx, settings, asked))
}

// probeHidden fills in the probed answer of each broker of settings that
// sets allow.everyone.if.no.acl.found without revealing it, and returns
// settings with why the probe failed for the brokers it could not tell.
func (d *Destination) probeHidden(ctx context.Context, settings []brokerAllowEveryone, brokers map[int32]kmsg.MetadataResponseBroker) ([]brokerAllowEveryone, string) {
	if d.probe == nil {
		return settings, ""
	}
	var hidden []kmsg.MetadataResponseBroker
	var ids []int32
	for _, s := range settings {
		if s.set && s.value == nil {
			hidden = append(hidden, brokers[s.broker])
			ids = append(ids, s.broker)
		}
	}
	if len(hidden) == 0 {
		return settings, ""
	}
	results := d.probe.probeBrokers(ctx, hidden)
	for i, s := range settings {
		if r, ok := results[s.broker]; ok && s.set && s.value == nil && r.err == nil {
			v := strconv.FormatBool(r.allow)
			settings[i].value, settings[i].probed = &v, true
		}
	}
	return settings, probeFailures(ids, results)
}

// allowEveryoneConfigKey is the sidecar configuration key that states the
// destination brokers' allow.everyone.if.no.acl.found.
const allowEveryoneConfigKey = "readonly.allow.everyone.if.no.acl.found"

// brokerAllowEveryone is what one broker's DescribeConfigs tells of
// allow.everyone.if.no.acl.found.
type brokerAllowEveryone struct {
	broker int32
	set    bool              // the broker's configuration sets the key
	source kmsg.ConfigSource // where it is set, when set
	value  *string           // its value, nil when Kafka hides it (and no probe told)
	probed bool              // value is what the authorizer probe found
}

// readAllowEveryone reads allow.everyone.if.no.acl.found from the answer
// of broker id to a DescribeConfigs for itself. A Kafka broker lists a key
// it does not know only when its configuration sets it (server.properties,
// or a dynamic broker config), and then hides the value, as it hides every
// key it cannot type; an absent key, or one reported with the default
// source, is not set.
func readAllowEveryone(id int32, resp *kmsg.DescribeConfigsResponse) (brokerAllowEveryone, error) {
	out := brokerAllowEveryone{broker: id}
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return out, fmt.Errorf("describe broker configs: %w", err)
		}
		for _, c := range res.Configs {
			if c.Name != allowEveryoneKey || c.Source == kmsg.ConfigSourceDefaultConfig {
				continue
			}
			out.set, out.source, out.value = true, c.Source, c.Value
			if c.IsSensitive {
				out.value = nil
			}
		}
	}
	return out, nil
}

// decideAllowEveryone combines what the brokers told: the answer when
// every broker that answered either does not set the key (false) or shows
// the value it sets, and all agree; otherwise an error that says which
// brokers set what and names the sidecar key to set. Guessing would be
// wrong either way for someone: true on a cluster that denies gives every
// principal access to the mirror topics, false on one that allows locks
// every consumer out. probeFailure, if not empty, says why the authorizer
// probe could not tell for the brokers that hide the value.
func decideAllowEveryone(settings []brokerAllowEveryone, probeFailure string) (bool, error) {
	var hidden, allow, deny []string
	for _, s := range settings {
		id := strconv.Itoa(int(s.broker))
		switch {
		case s.set && s.value == nil:
			hidden = append(hidden, id)
		case s.set && strings.EqualFold(strings.TrimSpace(*s.value), "true"):
			allow = append(allow, id)
		default:
			deny = append(deny, id)
		}
	}
	fix := fmt.Sprintf("set %s=true or =false in every sidecar's configuration, to what the brokers' %s is", allowEveryoneConfigKey, allowEveryoneKey)
	if len(hidden) > 0 {
		msg := fmt.Sprintf("coordinator: cannot tell whether the destination brokers allow everyone on topics without ACLs: "+
			"broker(s) %s set %s and Kafka does not reveal its value", strings.Join(hidden, ", "), allowEveryoneKey)
		if len(deny) > 0 || len(allow) > 0 {
			msg += fmt.Sprintf(" (broker(s) %s do not set it or deny, broker(s) %s allow everyone)", orNone(deny), orNone(allow))
		}
		if probeFailure != "" {
			msg += "; probing their authorizer failed: " + probeFailure
		}
		return false, topicErr(kerr.InvalidConfig, "%s; %s", msg, fix)
	}
	if len(allow) > 0 && len(deny) > 0 {
		return false, topicErr(kerr.InvalidConfig, "coordinator: the destination brokers disagree on %s: broker(s) %s allow everyone on topics without ACLs, "+
			"broker(s) %s do not; configure the brokers alike, or %s", allowEveryoneKey, strings.Join(allow, ", "), strings.Join(deny, ", "), fix)
	}
	return len(allow) > 0, nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// Protect makes topic read-only for everyone but super users: a DENY WRITE
// ACL for User:*, and, when the brokers allow everyone on resources without
// ACLs and no other ACL applies to the topic, an ALLOW ALL for User:* beside
// it, so that consumers keep the access they had (DESIGN D4). It returns the
// ACLs it created, which the controller records as the sidecars' own.
func (d *Destination) Protect(ctx context.Context, topic string) ([]fsm.ACL, error) {
	want, err := d.ProtectionFor(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := d.ApplyProtection(ctx, want); err != nil {
		return nil, err
	}
	return want, nil
}

// ProtectionFor returns the read-only ACLs Protect would create for topic,
// creating nothing: a start asks before it creates the destination topic,
// so that a topic whose protection cannot be decided (the brokers'
// allow.everyone.if.no.acl.found unknown) is refused before anything
// exists on the destination.
func (d *Destination) ProtectionFor(ctx context.Context, topic string) ([]fsm.ACL, error) {
	existing, err := d.topicACLs(ctx, topic)
	if err != nil {
		return nil, err
	}
	deny, allow := readOnlyACLs(topic)
	want := []fsm.ACL{deny}
	if len(otherACLs(topic, existing)) == 0 {
		everyoneAllowed, err := d.allowsEveryone(ctx)
		if err != nil {
			return nil, err
		}
		if everyoneAllowed {
			want = append(want, allow)
		}
	}
	return want, nil
}

// ApplyProtection creates the ACLs ProtectionFor returned.
func (d *Destination) ApplyProtection(ctx context.Context, acls []fsm.ACL) error {
	return d.createACLs(ctx, acls)
}

// readOnlyACLs returns the ACLs of DESIGN D4 for topic: the DENY WRITE for
// User:* on its literal name, and the ALLOW ALL for User:* that goes beside
// it while the brokers allow everyone on resources without ACLs and no
// other ACL applies to the topic.
func readOnlyACLs(topic string) (deny, allow fsm.ACL) {
	deny = fsm.ACL{ResourceType: aclResourceTopic, ResourceName: topic, PatternType: aclPatternLiteral,
		Principal: everyone, Host: "*", Operation: aclOperationWrite, Permission: aclPermissionDeny}
	allow = deny
	allow.Operation, allow.Permission = aclOperationAll, aclPermAllow
	return deny, allow
}

// otherACLs returns the ACLs of existing (the ACLs that apply to topic, as
// topicACLs lists them) other than topic's read-only ACLs: any one of them
// means the brokers no longer apply allow.everyone.if.no.acl.found to the
// topic, so an ALLOW ALL for User:* would override it.
func otherACLs(topic string, existing []fsm.ACL) []fsm.ACL {
	deny, allow := readOnlyACLs(topic)
	var out []fsm.ACL
	for _, a := range existing {
		if a != deny && a != allow {
			out = append(out, a)
		}
	}
	return out
}

// CheckAuthorizer returns ErrNoAuthorizer when the destination has none.
func (d *Destination) CheckAuthorizer(ctx context.Context, topic string) error {
	_, err := d.topicACLs(ctx, topic)
	return err
}

func (d *Destination) createACLs(ctx context.Context, acls []fsm.ACL) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceType(a.ResourceType)
		c.ResourceName = a.ResourceName
		c.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
		c.Principal = a.Principal
		c.Host = a.Host
		c.Operation = kmsg.ACLOperation(a.Operation)
		c.PermissionType = kmsg.ACLPermissionType(a.Permission)
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return fmt.Errorf("coordinator: create ACLs: %w", err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if errors.Is(err, kerr.SecurityDisabled) {
				return ErrNoAuthorizer
			}
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("coordinator: create ACLs: %w%s", err, msg)
		}
	}
	return nil
}

// Unprotect deletes exactly the given ACLs (the ones Protect created).
func (d *Destination) Unprotect(ctx context.Context, acls []fsm.ACL) error {
	if len(acls) == 0 {
		return nil
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, a := range acls {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType = kmsg.ACLResourceType(a.ResourceType)
		f.ResourceName = kmsg.StringPtr(a.ResourceName)
		f.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
		f.Principal = kmsg.StringPtr(a.Principal)
		f.Host = kmsg.StringPtr(a.Host)
		f.Operation = kmsg.ACLOperation(a.Operation)
		f.PermissionType = kmsg.ACLPermissionType(a.Permission)
		req.Filters = append(req.Filters, f)
	}
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return fmt.Errorf("coordinator: delete ACLs: %w", err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("coordinator: delete ACLs: %w", err)
		}
	}
	return nil
}

// sortedKeys returns m's keys in order, so requests are deterministic.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// EndOffsets returns the log end offset of every partition of a destination
// topic.
func (d *Destination) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	offs, err := kadm.NewClient(d.cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var first error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if first == nil {
				first = o.Err
			}
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, first
}

// DeleteTopic deletes a destination topic (re-seeding, DESIGN D9).
func (d *Destination) DeleteTopic(ctx context.Context, topic string) error {
	resp, err := kadm.NewClient(d.cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("coordinator: delete destination topic %s: %w", topic, err)
	}
	return nil
}

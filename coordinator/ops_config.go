package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file serves a mirror's configuration through Kafka's own config
// APIs on the CLUSTER_MIRROR (64) resource (KIP-1279 §4.9):
// IncrementalAlterConfigs changes it, DescribeConfigs shows it with secrets
// as null values. A change of the source settings reconnects the mirror's
// data plane: the reconcile loop replaces the source client when the
// settings' fingerprint changes (syncSources).

// onlyClusterMirrors is the error of every other resource type.
const onlyClusterMirrors = "the sidecar admin endpoint serves only CLUSTER_MIRROR (64) resources, and the throttle configs of BROKER (4) and TOPIC (2) resources"

// configError is the outcome of one resource: a Kafka error code and an
// operator-facing message that never holds a secret value.
type configError struct {
	code int16
	msg  string
}

func configErr(code *kerr.Error, format string, args ...any) *configError {
	return &configError{code: code.Code, msg: fmt.Sprintf(format, args...)}
}

// servedResource reports whether the config APIs serve a resource type.
func servedResource(t int8) bool {
	return t == protocol.ResourceTypeClusterMirror || t == protocol.ResourceTypeBroker || t == protocol.ResourceTypeTopic
}

// incrementalAlterConfigs handles IncrementalAlterConfigs: one outcome per
// resource, each resource altered on its own (BROKER and TOPIC resources
// in throttle.go).
func (a *admin) incrementalAlterConfigs(ctx context.Context, r *protocol.IncrementalAlterConfigsRequest) protocol.Response {
	resp := &protocol.IncrementalAlterConfigsResponse{}
	type resource struct {
		typ  int8
		name string
	}
	listed := map[resource]int{}
	for _, res := range r.Resources {
		listed[resource{res.ResourceType, res.ResourceName}]++
	}
	for _, res := range r.Resources {
		out := protocol.AlterConfigsResourceResponse{ResourceType: res.ResourceType, ResourceName: res.ResourceName}
		var err *configError
		switch n := listed[resource{res.ResourceType, res.ResourceName}]; {
		case !servedResource(res.ResourceType):
			err = configErr(kerr.InvalidRequest, "%s; resource type %d is not one", onlyClusterMirrors, res.ResourceType)
		case n > 1 && res.ResourceType == protocol.ResourceTypeClusterMirror:
			err = configErr(kerr.InvalidRequest, "mirror %s is listed %d times in the request; list it once", res.ResourceName, n)
		case n > 1:
			err = configErr(kerr.InvalidRequest, "%s %s is listed %d times in the request; list it once", resourceKind(res.ResourceType), res.ResourceName, n)
		case res.ResourceType == protocol.ResourceTypeClusterMirror:
			err = a.alterMirror(ctx, res, r.ValidateOnly)
		default:
			err = a.alterBrokerOrTopic(ctx, res, r.ValidateOnly)
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, strPtr(err.msg)
		}
		resp.Responses = append(resp.Responses, out)
	}
	return resp
}

// mirrorEdit is a mirror's configuration being edited: Config and the
// pattern lists, which the state keeps apart from Config.
type mirrorEdit struct {
	config           map[string]string
	include, exclude []string
}

// list returns the pattern list a key names, or nil for other keys.
func (e *mirrorEdit) list(key string) *[]string {
	switch key {
	case fsm.IncludeKey:
		return &e.include
	case fsm.ExcludeKey:
		return &e.exclude
	}
	return nil
}

// all returns every key: Config and the non-empty pattern lists.
func (e *mirrorEdit) all() map[string]string {
	out := maps.Clone(e.config)
	if out == nil {
		out = map[string]string{}
	}
	if len(e.include) > 0 {
		out[fsm.IncludeKey] = strings.Join(e.include, ",")
	}
	if len(e.exclude) > 0 {
		out[fsm.ExcludeKey] = strings.Join(e.exclude, ",")
	}
	return out
}

// alterMirror applies the changes of one resource to a mirror: edit a copy,
// validate the result as creation does, check a changed source, then store
// it through raft (unless validateOnly).
func (a *admin) alterMirror(ctx context.Context, res protocol.AlterConfigsResource, validateOnly bool) *configError {
	name := res.ResourceName
	m := a.ctl.State().Mirrors[name]
	if m == nil {
		return configErr(kerr.ResourceNotFound, "mirror %s does not exist; list the mirrors with kafka-cluster-mirrors --list", name)
	}
	edit := &mirrorEdit{config: maps.Clone(m.Config), include: slices.Clone(m.Include), exclude: slices.Clone(m.Exclude)}
	if edit.config == nil {
		edit.config = map[string]string{}
	}
	seen := map[string]bool{}
	for _, c := range res.Configs {
		if seen[c.Name] {
			return configErr(kerr.InvalidRequest, "config key %s is listed twice for mirror %s; list it once", c.Name, name)
		}
		seen[c.Name] = true
		if err := edit.apply(name, c); err != nil {
			return err
		}
	}

	all := edit.all()
	if strings.TrimSpace(all[fsm.BootstrapServersKey]) == "" {
		return configErr(kerr.InvalidConfig, "mirror %s needs %s: the source cluster's bootstrap servers (host:port,...)", name, fsm.BootstrapServersKey)
	}
	if err := checkMirrorKeys(all); err != nil {
		return configErr(kerr.InvalidConfig, "%s%v", protocol.RefusedSettingsPrefix, err)
	}
	src := sourceConfig(edit.config)
	if _, err := a.dial(src); err != nil {
		return configErr(kerr.InvalidConfig, "%s%v", protocol.RefusedSettingsPrefix, err)
	}
	if fingerprint(src) != fingerprint(sourceConfig(m.Config)) {
		if err := a.checkSource(ctx, m, src); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	return a.storeEdit(ctx, m, edit)
}

// apply applies one operation to the edit.
func (e *mirrorEdit) apply(mirror string, c protocol.AlterableConfig) *configError {
	k := c.Name
	if strings.TrimSpace(k) == "" {
		return configErr(kerr.InvalidConfig, "a config key of mirror %s is empty; remove the entry", mirror)
	}
	list := e.list(k)
	needValue := func(op string) *configError {
		if c.Value == nil {
			return configErr(kerr.InvalidConfig, "%s of config key %s has no value", op, k)
		}
		return nil
	}
	switch c.ConfigOperation {
	case protocol.ConfigOpSet:
		if err := needValue("SET"); err != nil {
			return err
		}
		if list != nil {
			*list = appendUnique(nil, SplitPatterns(*c.Value))
		} else {
			e.config[k] = *c.Value
		}
	case protocol.ConfigOpDelete:
		_, has := e.config[k]
		if list != nil {
			has = len(*list) > 0
		}
		switch {
		case !has:
			return configErr(kerr.InvalidConfig, "mirror %s has no config key %s", mirror, k)
		case k == fsm.BootstrapServersKey:
			return configErr(kerr.InvalidConfig, "%s of mirror %s cannot be deleted; set a new value instead", fsm.BootstrapServersKey, mirror)
		case list != nil:
			*list = nil
		default:
			delete(e.config, k)
		}
	case protocol.ConfigOpAppend, protocol.ConfigOpSubtract:
		op := "APPEND"
		if c.ConfigOperation == protocol.ConfigOpSubtract {
			op = "SUBTRACT"
		}
		if list == nil {
			return configErr(kerr.InvalidRequest, "%s is only supported for the pattern lists %s and %s, not for %s; use SET", op, fsm.IncludeKey, fsm.ExcludeKey, k)
		}
		if err := needValue(op); err != nil {
			return err
		}
		if op == "APPEND" {
			*list = appendUnique(*list, SplitPatterns(*c.Value))
		} else {
			drop := SplitPatterns(*c.Value)
			*list = slices.DeleteFunc(*list, func(p string) bool { return slices.Contains(drop, p) })
		}
	default:
		return configErr(kerr.InvalidRequest, "config operation %d for key %s is unknown (expected 0 SET, 1 DELETE, 2 APPEND or 3 SUBTRACT)", c.ConfigOperation, k)
	}
	return nil
}

// checkSource connects to the source the new settings point at and checks
// that it is the cluster the mirror mirrors.
func (a *admin) checkSource(ctx context.Context, m *fsm.Mirror, src map[string]string) *configError {
	cl, err := newSourceClient(a.dial, src)
	if err != nil {
		return configErr(kerr.InvalidConfig, "%s%v", protocol.RefusedSettingsPrefix, err)
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	id, err := sourceClusterID(sctx, cl)
	if err != nil {
		return configErr(kerr.InvalidConfig, "cannot reach the source cluster at %s: %v (check bootstrap.servers and the security settings; mirror %s is unchanged)",
			src[fsm.BootstrapServersKey], err, m.Name)
	}
	if m.SourceClusterID != "" && id != m.SourceClusterID {
		return configErr(kerr.InconsistentClusterID, "the source at %s is cluster %s, but mirror %s mirrors cluster %s; point %s at cluster %s, or create another mirror for cluster %s",
			src[fsm.BootstrapServersKey], id, m.Name, m.SourceClusterID, fsm.BootstrapServersKey, m.SourceClusterID, id)
	}
	return nil
}

// storeEdit proposes the difference between m and the edit: the config
// keys with AlterMirrorConfig, then the patterns with AlterMirrorPatterns.
// Both were validated here; the FSM checks them again.
func (a *admin) storeEdit(ctx context.Context, m *fsm.Mirror, edit *mirrorEdit) *configError {
	now := a.now().UnixMilli()
	var cmds []fsm.Command
	alter := fsm.AlterMirrorConfig{Name: m.Name, Set: map[string]string{}, NowMs: now}
	for k, v := range edit.config {
		if old, ok := m.Config[k]; !ok || old != v {
			alter.Set[k] = v
		}
	}
	for _, k := range sortedKeys(m.Config) {
		if _, ok := edit.config[k]; !ok {
			alter.Delete = append(alter.Delete, k)
		}
	}
	if len(alter.Set) > 0 || len(alter.Delete) > 0 {
		cmds = append(cmds, alter)
	}
	patterns := fsm.AlterMirrorPatterns{Name: m.Name, NowMs: now,
		AddInclude: missing(edit.include, m.Include), RemoveInclude: missing(m.Include, edit.include),
		AddExclude: missing(edit.exclude, m.Exclude), RemoveExclude: missing(m.Exclude, edit.exclude),
	}
	if len(patterns.AddInclude)+len(patterns.RemoveInclude)+len(patterns.AddExclude)+len(patterns.RemoveExclude) > 0 {
		cmds = append(cmds, patterns)
	}
	for _, c := range cmds {
		res, err := a.ctl.Apply(ctx, c)
		if err != nil {
			return configErr(kerr.UnknownServerError, "%v", err)
		}
		if res.ErrorCode != 0 {
			return &configError{code: res.ErrorCode, msg: res.ErrorMessage}
		}
	}
	changed := append(sortedKeys(alter.Set), alter.Delete...)
	if len(patterns.AddInclude)+len(patterns.RemoveInclude) > 0 {
		changed = append(changed, fsm.IncludeKey)
	}
	if len(patterns.AddExclude)+len(patterns.RemoveExclude) > 0 {
		changed = append(changed, fsm.ExcludeKey)
	}
	// Keys only: values may be secrets.
	a.log.Info("altered mirror config", zap.String("mirror", m.Name), zap.Strings("keys", changed))
	a.local.Kick()
	return nil
}

// appendUnique appends the entries of add that list does not hold yet.
func appendUnique(list []string, add []string) []string {
	out := slices.Clone(list)
	for _, p := range add {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// missing returns the entries of a that b does not hold, in a's order.
func missing(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// Documentation of the mirror's own keys and bootstrap.servers, for
// DescribeConfigs with IncludeDocumentation.
var configDocs = map[string]string{
	fsm.BootstrapServersKey: "The source cluster's bootstrap servers (host:port,...).",
	ReadOnlyEnforcementKey:  "How mirror topics are kept read-only: acl (DENY WRITE ACLs) or none.",
	ReplicationFactorKey:    "The replication factor of created mirror topics; -1 takes the destination's default.replication.factor.",
	RefreshIntervalKey:      "How often, in milliseconds, metadata is synchronised and new source topics are discovered.",
	fsm.IncludeKey:          "Comma-separated topic names or regexes to mirror; new matching source topics are started automatically.",
	fsm.ExcludeKey:          "Comma-separated topic names or regexes never to mirror.",
}

// configType returns the Kafka data type of a mirror config key.
func configType(key string) int8 {
	switch {
	case properties.IsSecret(key):
		return protocol.ConfigTypePassword
	case key == fsm.BootstrapServersKey, key == fsm.IncludeKey, key == fsm.ExcludeKey:
		return protocol.ConfigTypeList
	case key == RefreshIntervalKey:
		return protocol.ConfigTypeLong
	case key == ReplicationFactorKey:
		return protocol.ConfigTypeShort
	}
	return protocol.ConfigTypeString
}

// describeConfigs handles DescribeConfigs: every config key of each mirror,
// secrets as null values marked sensitive, and the defaults of the mirror.*
// keys it does not set.
func (a *admin) describeConfigs(r *protocol.DescribeConfigsRequest) protocol.Response {
	resp := &protocol.DescribeConfigsResponse{}
	st := a.ctl.State()
	for _, res := range r.Resources {
		out := protocol.DescribeConfigsResult{ResourceType: res.ResourceType, ResourceName: res.ResourceName}
		m := st.Mirrors[res.ResourceName]
		switch {
		case res.ResourceType == protocol.ResourceTypeBroker || res.ResourceType == protocol.ResourceTypeTopic:
			out = describeBrokerOrTopic(st, res, r.IncludeSynonyms, r.IncludeDocumentation)
		case res.ResourceType != protocol.ResourceTypeClusterMirror:
			out.ErrorCode = kerr.InvalidRequest.Code
			out.ErrorMessage = strPtr(fmt.Sprintf("%s; resource type %d is not one", onlyClusterMirrors, res.ResourceType))
		case m == nil:
			out.ErrorCode = kerr.ResourceNotFound.Code
			out.ErrorMessage = strPtr(fmt.Sprintf("mirror %s does not exist; list the mirrors with kafka-cluster-mirrors --list", res.ResourceName))
		default:
			out.Configs = mirrorConfigEntries(m, res.ConfigurationKeys, r.IncludeSynonyms, r.IncludeDocumentation)
		}
		resp.Results = append(resp.Results, out)
	}
	return resp
}

// mirrorConfigEntries lists a mirror's config keys (only those of keys,
// unless nil), sorted, with the defaults of the mirror.* keys it does not
// set.
func mirrorConfigEntries(m *fsm.Mirror, keys []string, synonyms, docs bool) []protocol.DescribeConfigsEntry {
	set := (&mirrorEdit{config: m.Config, include: m.Include, exclude: m.Exclude}).all()
	names := map[string]bool{}
	for k := range set {
		names[k] = true
	}
	for k := range mirrorKeys {
		names[k] = true
	}
	var out []protocol.DescribeConfigsEntry
	for _, k := range sortedKeys(names) {
		if keys != nil && !slices.Contains(keys, k) {
			continue
		}
		e := protocol.NewDescribeConfigsEntry()
		e.Name = k
		e.IsSensitive = properties.IsSecret(k)
		e.ConfigType = configType(k)
		v, isSet := set[k]
		e.ConfigSource = protocol.ConfigSourceDynamicResource
		if !isSet {
			v, e.ConfigSource = mirrorKeys[k].def, protocol.ConfigSourceDefault
		}
		if !e.IsSensitive {
			e.Value = strPtr(v)
		}
		if synonyms {
			e.Synonyms = append(e.Synonyms, protocol.DescribeConfigsSynonym{Name: k, Value: e.Value, Source: e.ConfigSource})
			if spec, ok := mirrorKeys[k]; ok && isSet {
				e.Synonyms = append(e.Synonyms, protocol.DescribeConfigsSynonym{Name: k, Value: strPtr(spec.def), Source: protocol.ConfigSourceDefault})
			}
		}
		if doc, ok := configDocs[k]; ok && docs {
			e.Documentation = strPtr(doc)
		}
		out = append(out, e)
	}
	return out
}

package main

import (
	"testing"

	"github.com/sidemirror/sidemirror/protocol"
)

func entityAlter(typ int8, name string, cfgs ...protocol.AlterableConfig) *protocol.IncrementalAlterConfigsRequest {
	r := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{{ResourceType: typ, ResourceName: name, Configs: cfgs}}}
	r.SetVersion(1)
	return r
}

func entityDescribe(typ int8, name string) *protocol.DescribeConfigsRequest {
	r := &protocol.DescribeConfigsRequest{IncludeSynonyms: true, Resources: []protocol.DescribeConfigsResource{{ResourceType: typ, ResourceName: name}}}
	r.SetVersion(4)
	return r
}

// TestEntityConfigs runs KIP-1279 §8.3's destination-side throttle
// commands as the KIP writes them, and their --describe and
// --delete-config, against a fake admin endpoint.
func TestEntityConfigs(t *testing.T) {
	broker, topic := protocol.ResourceTypeBroker, protocol.ResourceTypeTopic
	ok := func(typ int8, name string) protocol.Response {
		return &protocol.IncrementalAlterConfigsResponse{Responses: []protocol.AlterConfigsResourceResponse{{ResourceType: typ, ResourceName: name}}}
	}
	described := func(typ int8, name string, source int8, kv ...string) protocol.Response {
		res := protocol.DescribeConfigsResult{ResourceType: typ, ResourceName: name}
		for i := 0; i+1 < len(kv); i += 2 {
			e := protocol.NewDescribeConfigsEntry()
			e.Name, e.Value, e.ConfigSource = kv[i], strp(kv[i+1]), source
			e.Synonyms = []protocol.DescribeConfigsSynonym{{Name: kv[i], Value: strp(kv[i+1]), Source: source}}
			res.Configs = append(res.Configs, e)
		}
		return &protocol.DescribeConfigsResponse{Results: []protocol.DescribeConfigsResult{res}}
	}
	runCases(t, []cliCase{
		{
			name:    "8.3 broker rate",
			args:    []string{"--entity-type", "brokers", "--entity-name", "4", "--alter", "--add-config", "mirror.replication.throttled.rate=100000000"},
			resp:    []protocol.Response{ok(broker, "4")},
			wantOut: "Completed updating config for broker 4.\n",
			wantReq: entityAlter(broker, "4", setCfg("mirror.replication.throttled.rate", "100000000")),
		},
		{
			name:    "8.3 topic replicas, brackets dropped as kafka-configs.sh does",
			args:    []string{"--entity-type", "topics", "--entity-name", "my-topic", "--alter", "--add-config", "mirror.replication.throttled.replicas=[0:4]"},
			resp:    []protocol.Response{ok(topic, "my-topic")},
			wantOut: "Completed updating config for topic my-topic.\n",
			wantReq: entityAlter(topic, "my-topic", setCfg("mirror.replication.throttled.replicas", "0:4")),
		},
		{
			name:    "several replicas",
			args:    []string{"--entity-type", "topics", "--entity-name", "my-topic", "--alter", "--add-config", "mirror.replication.throttled.replicas=[0:4,1:5]"},
			resp:    []protocol.Response{ok(topic, "my-topic")},
			wantOut: "Completed updating config for topic my-topic.\n",
			wantReq: entityAlter(topic, "my-topic", setCfg("mirror.replication.throttled.replicas", "0:4,1:5")),
		},
		{
			name:    "delete the rate",
			args:    []string{"--entity-type", "brokers", "--entity-name", "4", "--alter", "--delete-config", "mirror.replication.throttled.rate"},
			resp:    []protocol.Response{ok(broker, "4")},
			wantOut: "Completed updating config for broker 4.\n",
			wantReq: entityAlter(broker, "4", delCfg("mirror.replication.throttled.rate")),
		},
		{
			name: "describe a broker",
			args: []string{"--entity-type", "brokers", "--entity-name", "4", "--describe"},
			resp: []protocol.Response{described(broker, "4", protocol.ConfigSourceDynamicBroker, "mirror.replication.throttled.rate", "100000000")},
			wantOut: "Dynamic configs for broker 4 are:\n" +
				"  mirror.replication.throttled.rate=100000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:mirror.replication.throttled.rate=100000000}\n",
			wantReq: entityDescribe(broker, "4"),
		},
		{
			name: "describe a topic",
			args: []string{"--entity-type", "topics", "--entity-name", "my-topic", "--describe"},
			resp: []protocol.Response{described(topic, "my-topic", protocol.ConfigSourceDynamicResource, "mirror.replication.throttled.replicas", "0:4")},
			wantOut: "Dynamic configs for topic my-topic are:\n" +
				"  mirror.replication.throttled.replicas=0:4 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:mirror.replication.throttled.replicas=0:4}\n",
			wantReq: entityDescribe(topic, "my-topic"),
		},
		{
			name:    "describe a broker without configs",
			args:    []string{"--entity-type", "brokers", "--entity-name", "5", "--describe"},
			resp:    []protocol.Response{described(broker, "5", 0)},
			wantOut: "Dynamic configs for broker 5 are:\n",
		},
		{
			name: "refused",
			args: []string{"--entity-type", "brokers", "--entity-name", "9", "--alter", "--add-config", "mirror.replication.throttled.rate=5"},
			resp: []protocol.Response{&protocol.IncrementalAlterConfigsResponse{Responses: []protocol.AlterConfigsResourceResponse{
				{ErrorCode: 42, ErrorMessage: strp("broker 9 has no sidecar in the raft group (sidecars: 1, 2, 3)"), ResourceType: broker, ResourceName: "9"}}}},
			wantErr:  "Error: INVALID_REQUEST: broker 9 has no sidecar in the raft group (sidecars: 1, 2, 3)\n",
			wantCode: 1,
		},
		{
			name:     "a broker that is no ID",
			args:     []string{"--entity-type", "brokers", "--entity-name", "four", "--alter", "--add-config", "mirror.replication.throttled.rate=5"},
			wantErr:  "Error: --entity-name \"four\" is not a broker ID\n",
			wantCode: 1,
		},
		{
			name:     "no entity name",
			args:     []string{"--entity-type", "topics", "--describe"},
			wantErr:  "Error: --entity-type topics requires --entity-name (a topic name)\n",
			wantCode: 1,
		},
		{
			name:     "another action",
			args:     []string{"--entity-type", "topics", "--entity-name", "t", "--delete"},
			wantErr:  "Error: --entity-type topics is only valid with --alter or --describe\n",
			wantCode: 1,
		},
		{
			name:     "with --mirror",
			args:     []string{"--entity-type", "brokers", "--entity-name", "4", "--mirror", "m", "--describe"},
			wantErr:  "Error: --mirror is not valid with --entity-type brokers\n",
			wantCode: 1,
		},
		{
			name:     "--alter without changes",
			args:     []string{"--entity-type", "brokers", "--entity-name", "4", "--alter"},
			wantErr:  "Error: --alter requires --add-config, --add-config-file or --delete-config\n",
			wantCode: 1,
		},
	})
}

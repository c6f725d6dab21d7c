package main

import (
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/protocol"
)

func alterRequest(mirror string, cfgs ...protocol.AlterableConfig) *protocol.IncrementalAlterConfigsRequest {
	r := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: mirror, Configs: cfgs},
	}}
	r.SetVersion(1)
	return r
}

func setCfg(k, v string) protocol.AlterableConfig {
	return protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpSet, Value: &v}
}

func delCfg(k string) protocol.AlterableConfig {
	return protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpDelete}
}

const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret";`

func TestAlter(t *testing.T) {
	secrets := writeFile(t, "secrets.properties", "sasl.jaas.config="+jaas+"\nsecurity.protocol=SASL_PLAINTEXT\n")
	alterOK := func(mirror string) protocol.Response {
		return &protocol.IncrementalAlterConfigsResponse{Responses: []protocol.AlterConfigsResourceResponse{
			{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: mirror},
		}}
	}
	runCases(t, []cliCase{
		{
			name: "add and delete",
			args: []string{"--alter", "--mirror", "my-mirror",
				"--add-config", "mirror.metadata.refresh.interval.ms=5000, mirror.topics.include=[orders-.*,payments]",
				"--delete-config", "client.id,ssl.truststore.location"},
			resp:    []protocol.Response{alterOK("my-mirror")},
			wantOut: "Completed updating config for mirror my-mirror.\n",
			wantReq: alterRequest("my-mirror",
				setCfg("mirror.metadata.refresh.interval.ms", "5000"), setCfg("mirror.topics.include", "orders-.*,payments"),
				delCfg("client.id"), delCfg("ssl.truststore.location")),
		},
		{
			name: "kafka-configs style",
			args: []string{"--alter", "--entity-type", "cluster-mirrors", "--entity-name", "my-mirror",
				"--add-config", "bootstrap.servers=localhost:9092"},
			resp:    []protocol.Response{alterOK("my-mirror")},
			wantOut: "Completed updating config for mirror my-mirror.\n",
			wantReq: alterRequest("my-mirror", setCfg("bootstrap.servers", "localhost:9092")),
		},
		{
			name:    "secrets from a file are sent, never printed",
			args:    []string{"--alter", "--mirror", "m", "--add-config-file", secrets},
			resp:    []protocol.Response{alterOK("m")},
			wantOut: "Completed updating config for mirror m.\n",
			wantReq: alterRequest("m", setCfg("sasl.jaas.config", jaas), setCfg("security.protocol", "SASL_PLAINTEXT")),
		},
		{
			name: "refused",
			args: []string{"--alter", "--mirror", "m", "--delete-config", "x"},
			resp: []protocol.Response{&protocol.IncrementalAlterConfigsResponse{Responses: []protocol.AlterConfigsResourceResponse{
				{ErrorCode: 40, ErrorMessage: strp("mirror m has no config key x"), ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"},
			}}},
			wantErr:  "Error: INVALID_CONFIG: mirror m has no config key x\n",
			wantCode: 1,
		},
		{
			name: "a value the sidecar refuses",
			args: []string{"--alter", "--mirror", "m", "--add-config", "mirror.metadata.refresh.interval.ms=10"},
			resp: []protocol.Response{&protocol.IncrementalAlterConfigsResponse{Responses: []protocol.AlterConfigsResourceResponse{
				{ErrorCode: 40, ErrorMessage: strp(protocol.RefusedSettingsPrefix + "mirror config mirror.metadata.refresh.interval.ms: 10 is below 1000"),
					ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"},
			}}},
			wantErr:  "Error: INVALID_CONFIG: mirror config refused: mirror config mirror.metadata.refresh.interval.ms: 10 is below 1000\n",
			wantCode: 2,
		},
		{
			name:     "an entry without '=' is not echoed",
			args:     []string{"--alter", "--mirror", "m", "--add-config", "client.id=a,s3cret"},
			wantErr:  "Error: --add-config entry 2 has no '=': expected key=value (a value with commas goes in square brackets: key=[a,b])\n",
			wantCode: 1,
		},
		{
			name:     "unbalanced brackets",
			args:     []string{"--alter", "--mirror", "m", "--add-config", "mirror.topics.include=[a,b"},
			wantErr:  "Error: --add-config: the value of mirror.topics.include has unbalanced square brackets: put the whole value in them, key=[a,b]\n",
			wantCode: 1,
		},
		{
			name:     "a key added and deleted",
			args:     []string{"--alter", "--mirror", "m", "--add-config", "client.id=a", "--delete-config", "client.id"},
			wantErr:  "Error: config key client.id is both added and deleted; do one or the other\n",
			wantCode: 1,
		},
		{
			name:     "--alter without changes",
			args:     []string{"--alter", "--mirror", "m"},
			wantErr:  "Error: --alter requires --add-config, --add-config-file or --delete-config\n",
			wantCode: 1,
		},
		{
			name:     "--alter without a mirror",
			args:     []string{"--alter", "--add-config", "a=b"},
			wantErr:  "Error: --alter requires --mirror\n",
			wantCode: 1,
		},
		{
			name:     "--add-config without --alter",
			args:     []string{"--delete", "--mirror", "m", "--add-config", "a=b"},
			wantErr:  "Error: --add-config, --add-config-file and --delete-config are only valid with --alter\n",
			wantCode: 1,
		},
		{
			name:     "another entity type",
			args:     []string{"--alter", "--entity-type", "clients", "--entity-name", "t", "--add-config", "a=b"},
			wantErr:  "Error: --entity-type clients is not served by the sidecars; they serve cluster-mirrors, brokers, topics\n",
			wantCode: 1,
		},
		{
			name:     "--mirror and --entity-name differ",
			args:     []string{"--alter", "--mirror", "a", "--entity-name", "b", "--add-config", "a=b"},
			wantErr:  "Error: --mirror and --entity-name name different mirrors; give one of them\n",
			wantCode: 1,
		},
	})
}

func TestSidecarActions(t *testing.T) {
	runCases(t, []cliCase{
		{
			name:    "add",
			args:    []string{"--add-sidecar", "--broker-id", "3", "--raft-address", "10.0.0.3:9192", "--admin-address", "10.0.0.3:9191"},
			wantOut: "Added sidecar 3 to the raft group\n",
			wantReq: &protocol.AddSidecarRequest{BrokerId: 3, RaftAddress: "10.0.0.3:9192", AdminAddress: "10.0.0.3:9191"},
		},
		{
			name:    "remove",
			args:    []string{"--remove-sidecar", "--broker-id", "3"},
			wantOut: "Removed sidecar 3 from the raft group\n",
			wantReq: &protocol.RemoveSidecarRequest{BrokerId: 3},
		},
		{
			name: "remove refused",
			args: []string{"--remove-sidecar", "--broker-id", "9"},
			resp: []protocol.Response{&protocol.RemoveSidecarResponse{ErrorCode: 102,
				ErrorMessage: strp("broker 9 is not in the raft group (members: 1, 2, 3); list them with kafka-cluster-mirrors --list-sidecars")}},
			wantErr:  "Error: BROKER_ID_NOT_REGISTERED: broker 9 is not in the raft group (members: 1, 2, 3); list them with kafka-cluster-mirrors --list-sidecars\n",
			wantCode: 1,
		},
		{
			name: "list",
			args: []string{"--list-sidecars"},
			resp: []protocol.Response{&protocol.DescribeSidecarsResponse{LeaderId: 2, Sidecars: []protocol.DescribedSidecar{
				{BrokerId: 1, RaftAddress: "10.0.0.1:9192", AdminAddress: strp("10.0.0.1:9191"), Voter: true},
				{BrokerId: 2, RaftAddress: "10.0.0.2:9192", AdminAddress: strp("10.0.0.2:9191"), Voter: true},
				{BrokerId: 3, RaftAddress: "10.0.0.3:9192", Voter: true},
			}}},
			wantOut: "ID     RAFT-ADDRESS                   ADMIN-ADDRESS                  ROLE\n" +
				"1      10.0.0.1:9192                  10.0.0.1:9191                  FOLLOWER\n" +
				"2      10.0.0.2:9192                  10.0.0.2:9191                  LEADER\n" +
				"3      10.0.0.3:9192                  -                              FOLLOWER\n",
			wantReq: &protocol.DescribeSidecarsRequest{},
		},
		{
			name:     "add without addresses",
			args:     []string{"--add-sidecar", "--broker-id", "3", "--raft-address", "h:1"},
			wantErr:  "Error: --add-sidecar requires --raft-address and --admin-address, the sidecar's raft.listener and admin.listener (host:port)\n",
			wantCode: 1,
		},
		{
			name:     "add with a bad address",
			args:     []string{"--add-sidecar", "--broker-id", "3", "--raft-address", "h:1", "--admin-address", "h"},
			wantErr:  "Error: --admin-address \"h\" is not host:port\n",
			wantCode: 1,
		},
		{
			name:     "remove without an ID",
			args:     []string{"--remove-sidecar"},
			wantErr:  "Error: --remove-sidecar requires --broker-id\n",
			wantCode: 1,
		},
		{
			name:     "a negative ID",
			args:     []string{"--remove-sidecar", "--broker-id", "-1"},
			wantErr:  "Error: --broker-id -1 is not a broker ID (0 to 2147483647)\n",
			wantCode: 1,
		},
		{
			name:     "--broker-id with --list-sidecars",
			args:     []string{"--list-sidecars", "--broker-id", "1"},
			wantErr:  "Error: --broker-id is only valid with --add-sidecar or --remove-sidecar\n",
			wantCode: 1,
		},
		{
			name:     "--mirror with --list-sidecars",
			args:     []string{"--list-sidecars", "--mirror", "m"},
			wantErr:  "Error: --mirror is not valid with --list-sidecars\n",
			wantCode: 1,
		},
		{
			name:     "--raft-address with --remove-sidecar",
			args:     []string{"--remove-sidecar", "--broker-id", "1", "--raft-address", "h:1"},
			wantErr:  "Error: --raft-address and --admin-address are only valid with --add-sidecar\n",
			wantCode: 1,
		},
	})
}

// TestFollowsTheLeaderOnce sends a membership change to a follower, which
// names the leader: the CLI asks the leader, once.
func TestFollowsTheLeaderOnce(t *testing.T) {
	leader := &fakeHandler{resp: map[int16]protocol.Response{}}
	leaderAddr := startFake(t, leader)
	follower := &fakeHandler{resp: map[int16]protocol.Response{
		protocol.KeyRemoveSidecar: &protocol.RemoveSidecarResponse{ErrorCode: 41, ErrorMessage: strp("not the raft leader"), LeaderAdminAddress: &leaderAddr},
		protocol.KeyAddSidecar:    &protocol.AddSidecarResponse{ErrorCode: 41, ErrorMessage: strp("not the raft leader"), LeaderAdminAddress: &leaderAddr},
	}}
	followerAddr := startFake(t, follower)

	out, errOut, code := runCLI(t, "--bootstrap-server", followerAddr, "--remove-sidecar", "--broker-id", "3")
	if code != 0 || out != "Removed sidecar 3 from the raft group\n" || errOut != "" {
		t.Fatalf("got %d %q %q", code, out, errOut)
	}
	if got := leader.requests(); len(got) != 1 || got[0].(*protocol.RemoveSidecarRequest).BrokerId != 3 {
		t.Fatalf("the leader saw %+v", got)
	}

	// A leader that is not one either: the CLI gives up after one hop.
	leader.mu.Lock()
	leader.resp[protocol.KeyAddSidecar] = &protocol.AddSidecarResponse{ErrorCode: 41, ErrorMessage: strp("not the raft leader: the leader is broker 1"), LeaderAdminAddress: &followerAddr}
	leader.mu.Unlock()
	_, errOut, code = runCLI(t, "--bootstrap-server", followerAddr, "--add-sidecar", "--broker-id", "3", "--raft-address", "h:1", "--admin-address", "h:2")
	if code != 1 || errOut != "Error: NOT_CONTROLLER: not the raft leader: the leader is broker 1\n" {
		t.Fatalf("got %d %q", code, errOut)
	}
	if n := len(follower.requests()); n != 2 {
		t.Fatalf("the follower saw %d requests, want 2 (one per command)", n)
	}

	// A leader that cannot be reached.
	follower.mu.Lock()
	follower.resp[protocol.KeyRemoveSidecar] = &protocol.RemoveSidecarResponse{ErrorCode: 41, LeaderAdminAddress: strp("127.0.0.1:1")}
	follower.mu.Unlock()
	_, errOut, code = runCLI(t, "--bootstrap-server", followerAddr, "--remove-sidecar", "--broker-id", "3")
	if code != 1 || !strings.HasPrefix(errOut, "Error: the raft leader's admin endpoint is 127.0.0.1:1, but connecting to it failed: ") {
		t.Fatalf("got %d %q", code, errOut)
	}
}

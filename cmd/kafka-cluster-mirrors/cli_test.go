package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sidemirror/sidemirror/protocol"
)

func strp(s string) *string { return &s }

// fakeHandler records requests and answers with canned responses by key
// (an empty response of the request's API otherwise).
type fakeHandler struct {
	mu    sync.Mutex
	reqs  []protocol.Request
	infos []protocol.ConnInfo
	resp  map[int16]protocol.Response
}

func (h *fakeHandler) Handle(_ context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reqs = append(h.reqs, req)
	h.infos = append(h.infos, *c)
	if r, ok := h.resp[req.Key()]; ok {
		return r
	}
	return req.ResponseKind()
}

func (h *fakeHandler) requests() []protocol.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]protocol.Request(nil), h.reqs...)
}

// startFake serves h on a loopback port and returns the address.
func startFake(t *testing.T, h protocol.Handler) string {
	t.Helper()
	s := protocol.NewServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	serve := func() { served <- s.Serve(l) }
	go serve()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// runCLI runs the command line and returns its outputs and exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"kafka-cluster-mirrors"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// writeFile writes a file in the test's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type cliCase struct {
	name       string
	args       []string // after --bootstrap-server <fake>
	resp       []protocol.Response
	wantOut    string
	wantErr    string
	wantCode   int
	wantReq    protocol.Request // the one request the handler must see; nil: don't check
	noBootstrp bool             // don't add --bootstrap-server
}

func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandler{resp: map[int16]protocol.Response{}}
			for _, r := range tc.resp {
				h.resp[r.Key()] = r
			}
			args := tc.args
			if !tc.noBootstrp {
				args = append([]string{"--bootstrap-server", startFake(t, h)}, args...)
			}
			out, errOut, code := runCLI(t, args...)
			if out != tc.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, tc.wantOut)
			}
			if errOut != tc.wantErr {
				t.Errorf("stderr:\n%s\nwant:\n%s", errOut, tc.wantErr)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if tc.wantReq != nil {
				reqs := h.requests()
				if len(reqs) != 1 || !reflect.DeepEqual(reqs[0], tc.wantReq) {
					t.Errorf("requests %+v, want %+v", reqs, tc.wantReq)
				}
			}
		})
	}
}

func TestCreateDelete(t *testing.T) {
	props := writeFile(t, "mirror.properties",
		"# source\nbootstrap.servers=localhost:9092\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password=\"s3cret\";\n")
	noBootstrap := writeFile(t, "nobootstrap.properties", "security.protocol=SSL\n")
	badEscape := writeFile(t, "bad.properties", "bootstrap.servers=x:1\nssl.keystore.password=s3cret\\u12\n")
	cases := []cliCase{
		{
			name:    "create",
			args:    []string{"--create", "--mirror", "my-mirror", "--mirror-config", props},
			wantOut: "Created mirror my-mirror\n",
			wantReq: &protocol.CreateClusterMirrorRequest{MirrorName: "my-mirror", Config: []protocol.ClusterMirrorConfig{
				{Name: "bootstrap.servers", Value: strp("localhost:9092")},
				{Name: "sasl.jaas.config", Value: strp(`org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";`)},
			}},
		},
		{
			name:     "create refused",
			args:     []string{"--create", "--mirror", "my.paused", "--mirror-config", props},
			resp:     []protocol.Response{&protocol.CreateClusterMirrorResponse{ErrorCode: 42, ErrorMessage: strp("mirror name my.paused ends with .paused")}},
			wantErr:  "Error: INVALID_REQUEST: mirror name my.paused ends with .paused\n",
			wantCode: 1,
		},
		{
			// The sidecar refuses a setting at validation: exit 2, as for
			// --command-config.
			name: "create with a setting the sidecar refuses",
			args: []string{"--create", "--mirror", "m", "--mirror-config", props},
			resp: []protocol.Response{&protocol.CreateClusterMirrorResponse{ErrorCode: 40,
				ErrorMessage: strp(protocol.RefusedSettingsPrefix + `config: sasl.mechanism: "GSSAPI" (Kerberos) is not supported`)}},
			wantErr:  "Error: INVALID_CONFIG: mirror config refused: config: sasl.mechanism: \"GSSAPI\" (Kerberos) is not supported\n",
			wantCode: 2,
		},
		{
			name: "create with a source the sidecar cannot reach",
			args: []string{"--create", "--mirror", "m", "--mirror-config", props},
			resp: []protocol.Response{&protocol.CreateClusterMirrorResponse{ErrorCode: 40,
				ErrorMessage: strp("cannot reach the source cluster at localhost:9092: dial refused")}},
			wantErr:  "Error: INVALID_CONFIG: cannot reach the source cluster at localhost:9092: dial refused\n",
			wantCode: 1,
		},
		{
			name:     "create without bootstrap.servers",
			args:     []string{"--create", "--mirror", "m", "--mirror-config", noBootstrap},
			wantErr:  "Error: --mirror-config " + noBootstrap + " has no bootstrap.servers: set it to the source cluster's bootstrap servers\n",
			wantCode: 1,
		},
		{
			name:     "create with a malformed mirror-config never prints the secret",
			args:     []string{"--create", "--mirror", "m", "--mirror-config", badEscape},
			wantErr:  "Error: --mirror-config: " + badEscape + ": line 2: in the value of \"ssl.keystore.password\": malformed \\uXXXX escape (expected 4 hex digits)\n",
			wantCode: 1,
		},
		{
			name:    "delete",
			args:    []string{"--delete", "--mirror", "my-mirror"},
			wantOut: "Deleted mirror my-mirror\n",
			wantReq: &protocol.DeleteClusterMirrorRequest{MirrorName: "my-mirror"},
		},
		{
			name:     "delete refused",
			args:     []string{"--delete", "--mirror", "my-mirror"},
			resp:     []protocol.Response{&protocol.DeleteClusterMirrorResponse{ErrorCode: 42}},
			wantErr:  "Error: INVALID_REQUEST: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
}

func TestTopicActions(t *testing.T) {
	ok := func(name string) protocol.MirrorTopicResult { return protocol.MirrorTopicResult{Name: name} }
	cases := []cliCase{
		{
			name: "start",
			args: []string{"--start", "--topics", "orders-.*", "--exclude", "orders-internal", "--mirror", "my-mirror"},
			resp: []protocol.Response{&protocol.StartMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{
				ok("orders-us"), ok("orders-eu"),
			}}},
			wantOut: "Started 2 mirror topic(s) in mirror my-mirror: [orders-us, orders-eu]\n",
			wantReq: &protocol.StartMirrorTopicsRequest{
				MirrorName: "my-mirror", TopicPatterns: []string{"orders-.*"},
				IncludePatterns: []string{"orders-.*"}, ExcludePatterns: []string{"orders-internal"},
			},
		},
		{
			name: "start with failed topics",
			args: []string{"--start", "--topics", "a, b,c", "--mirror", "m"},
			resp: []protocol.Response{&protocol.StartMirrorTopicsResponse{MirrorName: "m", Topics: []protocol.MirrorTopicResult{
				ok("a"),
				{Name: "b", ErrorCode: 3, ErrorMessage: strp("topic b does not exist on the source")},
				{Name: "c", ErrorCode: 36},
			}}},
			wantOut: "Started 1 mirror topic(s) in mirror m: [a]\n",
			wantErr: "Error for topic b: UNKNOWN_TOPIC_OR_PARTITION: topic b does not exist on the source\n" +
				"Error for topic c: TOPIC_ALREADY_EXISTS: Topic with this name already exists.\n",
			wantCode: 1,
		},
		{
			name: "start where every topic fails",
			args: []string{"--start", "--topics", "b", "--mirror", "m"},
			resp: []protocol.Response{&protocol.StartMirrorTopicsResponse{MirrorName: "m", Topics: []protocol.MirrorTopicResult{
				{Name: "b", ErrorCode: 3, ErrorMessage: strp("no such topic")},
			}}},
			wantErr:  "Error for topic b: UNKNOWN_TOPIC_OR_PARTITION: no such topic\n",
			wantCode: 1,
		},
		{
			name:     "start refused as a whole",
			args:     []string{"--start", "--topics", "b", "--mirror", "nope"},
			resp:     []protocol.Response{&protocol.StartMirrorTopicsResponse{ErrorCode: 91, ErrorMessage: strp("mirror nope does not exist")}},
			wantErr:  "Error: RESOURCE_NOT_FOUND: mirror nope does not exist\n",
			wantCode: 1,
		},
		{
			name: "start with --reseed",
			args: []string{"--start", "--reseed", "--topics", "orders,payments", "--mirror", "m"},
			resp: []protocol.Response{&protocol.StartMirrorTopicsResponse{MirrorName: "m",
				Topics: []protocol.MirrorTopicResult{
					ok("orders"),
					{Name: "payments", ErrorCode: 42, ErrorMessage: strp("destination topic payments is empty: nothing to re-seed; start it without --reseed")},
				},
				Reseeded: []protocol.ReseededTopic{{Name: "orders", CopyTopic: "orders.diverged-20260314T101500Z", Partitions: []protocol.ReseededPartition{
					{Partition: 0, FirstOffset: 1180, EndOffset: 1200, Records: 20},
					{Partition: 2, FirstOffset: 1199, EndOffset: 1204, Records: 4},
				}}},
			}},
			wantOut: "Copied the diverged records of topic orders to topic orders.diverged-20260314T101500Z (offsets there start at 0):\n" +
				"  partition 0: offsets 1180 to 1199, 20 record(s)\n" +
				"  partition 2: offsets 1199 to 1203, 4 record(s)\n" +
				"Started 1 mirror topic(s) in mirror m: [orders]\n",
			wantErr:  "Error for topic payments: INVALID_REQUEST: destination topic payments is empty: nothing to re-seed; start it without --reseed\n",
			wantCode: 1,
			wantReq: &protocol.StartMirrorTopicsRequest{
				MirrorName: "m", TopicPatterns: []string{"orders", "payments"}, IncludePatterns: []string{"orders", "payments"}, Reseed: true,
			},
		},
		{
			name: "start with --reseed whose deletion failed after the copy",
			args: []string{"--start", "--reseed", "--topics", "orders", "--mirror", "m"},
			resp: []protocol.Response{&protocol.StartMirrorTopicsResponse{MirrorName: "m",
				Topics: []protocol.MirrorTopicResult{{Name: "orders", ErrorCode: -1, ErrorMessage: strp("re-seeding topic orders: delete failed")}},
				Reseeded: []protocol.ReseededTopic{{Name: "orders", CopyTopic: "orders.diverged-20260314T101500Z", Partitions: []protocol.ReseededPartition{
					{Partition: 1, FirstOffset: 5, EndOffset: 6, Records: 1},
				}}},
			}},
			wantOut: "Copied the diverged records of topic orders to topic orders.diverged-20260314T101500Z (offsets there start at 0):\n" +
				"  partition 1: offsets 5 to 5, 1 record(s)\n",
			wantErr:  "Error for topic orders: UNKNOWN_SERVER_ERROR: re-seeding topic orders: delete failed\n",
			wantCode: 1,
		},
		{
			name:    "stop",
			args:    []string{"--stop", "--topics", "orders-us", "--mirror", "my-mirror"},
			resp:    []protocol.Response{&protocol.StopMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{ok("orders-us")}}},
			wantOut: "Stopped mirroring for 1 topic(s) in mirror my-mirror: [orders-us]\n",
			wantReq: &protocol.StopMirrorTopicsRequest{MirrorName: "my-mirror", TopicPatterns: []string{"orders-us"}, Patterns: []string{"orders-us"}},
		},
		{
			name:    "stop with the KIP's --topic spelling",
			args:    []string{"--stop", "--topic", ".*", "--mirror", "my-mirror"},
			resp:    []protocol.Response{&protocol.StopMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{ok("a"), ok("b")}}},
			wantOut: "Stopped mirroring for 2 topic(s) in mirror my-mirror: [a, b]\n",
		},
		{
			name:    "pause",
			args:    []string{"--pause", "--topics", "my-topic", "--mirror", "my-mirror"},
			resp:    []protocol.Response{&protocol.PauseMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{ok("my-topic")}}},
			wantOut: "Paused mirroring for 1 topic(s) in mirror my-mirror: [my-topic]\n",
			wantReq: &protocol.PauseMirrorTopicsRequest{MirrorName: "my-mirror", TopicPatterns: []string{"my-topic"}},
		},
		{
			name:    "resume",
			args:    []string{"--resume", "--topics", "my-topic", "--mirror", "my-mirror"},
			resp:    []protocol.Response{&protocol.ResumeMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{ok("my-topic")}}},
			wantOut: "Resumed mirroring for 1 topic(s) in mirror my-mirror: [my-topic]\n",
			wantReq: &protocol.ResumeMirrorTopicsRequest{MirrorName: "my-mirror", TopicPatterns: []string{"my-topic"}},
		},
		{
			name:    "resume that matched nothing",
			args:    []string{"--resume", "--topics", "x-.*", "--mirror", "my-mirror"},
			wantOut: "Resumed mirroring for 0 topic(s) in mirror my-mirror: []\n",
		},
	}
	runCases(t, cases)
}

func TestList(t *testing.T) {
	cases := []cliCase{
		{
			name: "list",
			args: []string{"--list"},
			resp: []protocol.Response{&protocol.ListClusterMirrorsResponse{Mirrors: []protocol.ListedMirror{
				{MirrorName: "new-mirror", TopicCount: 1, SourceClusterId: "lBq12jYZRp-9wF3M9MPopg", SourceBootstrap: "localhost:9091,localhost:9092"},
				{MirrorName: "my-mirror", TopicCount: 2, SourceClusterId: "lBq12jYZRp-9wF3M9MPopg", SourceBootstrap: "localhost:9091,localhost:9092"},
				{MirrorName: "unresolved", TopicCount: 0, SourceBootstrap: "src:9092"},
			}}},
			wantOut: "" +
				"MIRROR                         TOPICS     CLUSTER-ID                 BOOTSTRAP-SERVER\n" +
				"my-mirror                      2          lBq12jYZRp-9wF3M9MPopg     localhost:9091,localhost:9092\n" +
				"new-mirror                     1          lBq12jYZRp-9wF3M9MPopg     localhost:9091,localhost:9092\n" +
				"unresolved                     0          -                          src:9092\n",
			wantReq: &protocol.ListClusterMirrorsRequest{},
		},
		{
			name:    "list empty",
			args:    []string{"--list"},
			wantOut: "MIRROR                         TOPICS     CLUSTER-ID                 BOOTSTRAP-SERVER\n",
		},
		{
			name: "list json",
			args: []string{"--list", "--json"},
			resp: []protocol.Response{&protocol.ListClusterMirrorsResponse{Mirrors: []protocol.ListedMirror{
				{MirrorName: "m", TopicCount: 2, SourceClusterId: "id", SourceBootstrap: "b:1"},
			}}},
			wantOut: `{
  "throttleTimeMs": 0,
  "errorCode": 0,
  "errorMessage": null,
  "mirrors": [
    {
      "mirrorName": "m",
      "sourceBootstrap": "b:1",
      "sourceClusterId": "id",
      "topicCount": 2
    }
  ]
}
`,
		},
		{
			name:    "list json empty",
			args:    []string{"--list", "--json"},
			wantOut: "{\n  \"throttleTimeMs\": 0,\n  \"errorCode\": 0,\n  \"errorMessage\": null,\n  \"mirrors\": []\n}\n",
		},
		{
			name:     "list refused",
			args:     []string{"--list"},
			resp:     []protocol.Response{&protocol.ListClusterMirrorsResponse{ErrorCode: 31, ErrorMessage: strp("not allowed")}},
			wantErr:  "Error: CLUSTER_AUTHORIZATION_FAILED: not allowed\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
}

// partition returns a describe row with the unknowns at -1.
func partition(index int32, src, dst, lag int64, state string) protocol.PartitionDetail {
	var p protocol.PartitionDetail
	p.Default()
	p.PartitionIndex, p.SourceOffset, p.DestinationOffset, p.Lag, p.State = index, src, dst, lag, state
	return p
}

func TestDescribe(t *testing.T) {
	failing := partition(1, 94, 84, 10, "MIRRORING")
	failing.LastError = strp("NOT_LEADER_OR_FOLLOWER from broker 2;\nretrying")
	kipExample := &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{
		{MirrorName: "new-mirror", Topics: []protocol.DescribedTopic{
			{TopicName: "baz", Partitions: []protocol.PartitionDetail{
				partition(1, -1, -1, -1, "PAUSED"), partition(0, -1, -1, -1, "PAUSED"),
			}},
		}},
		{MirrorName: "my-mirror", Topics: []protocol.DescribedTopic{
			{TopicName: "foo", Partitions: []protocol.PartitionDetail{
				partition(2, 94, 90, 4, "MIRRORING"), partition(0, 69, 66, 3, "MIRRORING"), failing,
			}},
			{TopicName: "bar", Partitions: []protocol.PartitionDetail{partition(0, -1, -1, -1, "STOPPED")}},
		}},
	}}
	full := partition(0, 69, 66, 3, "FAILED")
	full.LastMirrorEpoch, full.LastError, full.OwnerBrokerId = 4, strp("source topic ID changed"), 2
	full.SourceUnreachableSinceMs, full.LagTimeMs, full.LastFetchTimestampMs = 1764637323000, 61250, 1764637323000
	full.MirroredBytes = 1 << 20
	unreachable := partition(0, 200, 200, -1, "MIRRORING")
	unreachable.SourceUnreachableSinceMs, unreachable.LagTimeMs = 1764637323000, 61250
	unreachable.LastError = strp("source unreachable since 2026-12-02T01:02:03Z (1m1s ago): source fetch of m/orders/0 from broker 1: connection refused")
	unreachableResp := &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{{
		MirrorName: "my-mirror", Topics: []protocol.DescribedTopic{{TopicName: "orders", Partitions: []protocol.PartitionDetail{unreachable}}},
	}}}
	full.RetryAttempt, full.MaxRetryAttempts = 3, 20
	everyField := &protocol.DescribeClusterMirrorsResponse{ThrottleTimeMs: 1, Mirrors: []protocol.DescribedMirror{{
		MirrorName: "my-mirror", AuthorizedOperations: -2147483648,
		Topics:          []protocol.DescribedTopic{{TopicName: "foo", Partitions: []protocol.PartitionDetail{full}}},
		SourceClusterId: "lBq12jYZRp-9wF3M9MPopg", SourceBootstrap: "localhost:9091",
		Configs: []protocol.ClusterMirrorConfig{
			{Name: "bootstrap.servers", Value: strp("localhost:9091")},
			{Name: "sasl.jaas.config", Value: strp("leaked by a buggy server")},
			{Name: "ssl.truststore.password", Value: nil},
		},
	}}}
	cases := []cliCase{
		{
			name: "describe all",
			args: []string{"--describe"},
			resp: []protocol.Response{kipExample},
			wantOut: "" +
				"MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n" +
				"my-mirror                      bar                                      0          -               -                  -        STOPPED\n" +
				"my-mirror                      foo                                      0          69              66                 3        MIRRORING\n" +
				"my-mirror                      foo                                      1          94              84                 10       MIRRORING\n" +
				"  error: NOT_LEADER_OR_FOLLOWER from broker 2; retrying\n" +
				"my-mirror                      foo                                      2          94              90                 4        MIRRORING\n" +
				"new-mirror                     baz                                      0          -               -                  -        PAUSED\n" +
				"new-mirror                     baz                                      1          -               -                  -        PAUSED\n",
			wantReq: &protocol.DescribeClusterMirrorsRequest{},
		},
		{
			// The lag at a stale source high watermark is not shown as a
			// lag: "-", and the row's error says since when.
			name: "describe an unreachable source",
			args: []string{"--describe"},
			resp: []protocol.Response{unreachableResp},
			wantOut: "" +
				"MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n" +
				"my-mirror                      orders                                   0          200             200                -        MIRRORING\n" +
				"  error: source unreachable since 2026-12-02T01:02:03Z (1m1s ago): source fetch of m/orders/0 from broker 1: connection refused\n",
			wantReq: &protocol.DescribeClusterMirrorsRequest{},
		},
		{
			name:    "describe one mirror",
			args:    []string{"--describe", "--mirror", "my-mirror"},
			wantOut: "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n",
			wantReq: &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror"}},
		},
		{
			name: "describe json has every field and no secret",
			args: []string{"--describe", "--json"},
			resp: []protocol.Response{everyField},
			wantOut: `{
  "throttleTimeMs": 1,
  "errorCode": 0,
  "errorMessage": null,
  "mirrors": [
    {
      "errorCode": 0,
      "mirrorName": "my-mirror",
      "authorizedOperations": -2147483648,
      "topics": [
        {
          "topicName": "foo",
          "partitions": [
            {
              "partitionIndex": 0,
              "sourceOffset": 69,
              "destinationOffset": 66,
              "lag": 3,
              "state": "FAILED",
              "lastMirrorEpoch": 4,
              "lastError": "source topic ID changed",
              "ownerBrokerId": 2,
              "sourceUnreachableSinceMs": 1764637323000,
              "lagTimeMs": 61250,
              "lastFetchTimestampMs": 1764637323000,
              "retryAttempt": 3,
              "maxRetryAttempts": 20,
              "nonRetryable": false,
              "mirroredBytes": 1048576
            }
          ]
        }
      ],
      "sourceClusterId": "lBq12jYZRp-9wF3M9MPopg",
      "sourceBootstrap": "localhost:9091",
      "configs": [
        {
          "name": "bootstrap.servers",
          "value": "localhost:9091"
        },
        {
          "name": "sasl.jaas.config",
          "value": "[hidden]"
        },
        {
          "name": "ssl.truststore.password",
          "value": null
        }
      ],
      "errorMessage": null
    }
  ]
}
`,
			wantCode: 3, // a FAILED partition
		},
		{
			name: "describe json with empty lists",
			args: []string{"--describe", "--json", "--mirror", "empty"},
			resp: []protocol.Response{&protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{{MirrorName: "empty"}}}},
			wantOut: `{
  "throttleTimeMs": 0,
  "errorCode": 0,
  "errorMessage": null,
  "mirrors": [
    {
      "errorCode": 0,
      "mirrorName": "empty",
      "authorizedOperations": 0,
      "topics": [],
      "sourceClusterId": "",
      "sourceBootstrap": "",
      "configs": [],
      "errorMessage": null
    }
  ]
}
`,
		},
		{
			name: "describe a mirror with an error",
			args: []string{"--describe", "--mirror", "nope"},
			resp: []protocol.Response{&protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{
				{MirrorName: "nope", ErrorCode: 91, ErrorMessage: strp("mirror nope does not exist")},
			}}},
			wantOut:  "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n",
			wantErr:  "Error for mirror nope: RESOURCE_NOT_FOUND: mirror nope does not exist\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
}

// TestDescribeJSONCoversEveryField makes sure the JSON golden above names
// every field of the describe response types, so a field added later must
// show up in --json (and in this test).
func TestDescribeJSONCoversEveryField(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[protocol.DescribeClusterMirrorsResponse](),
		reflect.TypeFor[protocol.DescribedMirror](),
		reflect.TypeFor[protocol.DescribedTopic](),
		reflect.TypeFor[protocol.PartitionDetail](),
		reflect.TypeFor[protocol.ClusterMirrorConfig](),
	} {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("json"), ",")[0]
			if tag == "" || tag == "-" {
				t.Errorf("%s.%s has no JSON name", typ.Name(), f.Name)
			}
		}
	}
}

func TestFlagErrors(t *testing.T) {
	props := writeFile(t, "m.properties", "bootstrap.servers=localhost:9092\n")
	cases := []cliCase{
		{
			name:       "missing --bootstrap-server",
			args:       []string{"--list"},
			noBootstrp: true,
			wantErr:    "Error: --bootstrap-server is required: a broker (host:port) of the destination cluster, or a sidecar's admin endpoint\n",
			wantCode:   1,
		},
		{
			name:     "no action",
			args:     []string{"--mirror", "m"},
			wantErr:  "Error: exactly one action is required: --create, --delete, --describe, --list, --start, --stop, --pause, --resume, --recover, --alter, --add-sidecar, --remove-sidecar, --list-sidecars, --add-acl, --list-acls or --remove-acl\n",
			wantCode: 1,
		},
		{
			name:     "two actions",
			args:     []string{"--create", "--delete", "--mirror", "m"},
			wantErr:  "Error: exactly one action is allowed, got --create and --delete; the actions are --create, --delete, --describe, --list, --start, --stop, --pause, --resume, --recover, --alter, --add-sidecar, --remove-sidecar, --list-sidecars, --add-acl, --list-acls and --remove-acl\n",
			wantCode: 1,
		},
		{
			name:     "--exclude without --start",
			args:     []string{"--stop", "--topics", "a", "--exclude", "b", "--mirror", "m"},
			wantErr:  "Error: --exclude is only valid with --start\n",
			wantCode: 1,
		},
		{
			name:     "--reseed without --start",
			args:     []string{"--stop", "--reseed", "--topics", "a", "--mirror", "m"},
			wantErr:  "Error: --reseed is only valid with --start: kafka-cluster-mirrors --start --reseed --topics <diverged topics> --mirror <mirror>\n",
			wantCode: 1,
		},
		{
			name:     "--create without --mirror",
			args:     []string{"--create", "--mirror-config", props},
			wantErr:  "Error: --create requires --mirror\n",
			wantCode: 1,
		},
		{
			name:     "--create without --mirror-config",
			args:     []string{"--create", "--mirror", "m"},
			wantErr:  "Error: --create requires --mirror-config, a property file with the source cluster's bootstrap.servers\n",
			wantCode: 1,
		},
		{
			name:     "--mirror-config without --create",
			args:     []string{"--delete", "--mirror", "m", "--mirror-config", props},
			wantErr:  "Error: --mirror-config is only valid with --create\n",
			wantCode: 1,
		},
		{
			name:     "--start without --topics",
			args:     []string{"--start", "--mirror", "m"},
			wantErr:  "Error: --start requires --topics\n",
			wantCode: 1,
		},
		{
			name:     "--topics with --list",
			args:     []string{"--list", "--topics", "a"},
			wantErr:  "Error: --topics is only valid with --start, --stop, --pause, --resume, --recover or --describe\n",
			wantCode: 1,
		},
		{
			name:     "--mirror with --list",
			args:     []string{"--list", "--mirror", "m"},
			wantErr:  "Error: --mirror is not valid with --list\n",
			wantCode: 1,
		},
		{
			name:     "--json with --delete",
			args:     []string{"--delete", "--mirror", "m", "--json"},
			wantErr:  "Error: --json is only valid with --describe or --list\n",
			wantCode: 1,
		},
		{
			name:     "unknown flag",
			args:     []string{"--list", "--frobnicate"},
			wantErr:  "Error: flag provided but not defined: -frobnicate (see --help)\n",
			wantCode: 1,
		},
		{
			name:     "stray argument",
			args:     []string{"--list", "extra"},
			wantErr:  "Error: unexpected argument \"extra\" (see --help)\n",
			wantCode: 1,
		},
		{
			name:       "bootstrap server without a port",
			args:       []string{"--bootstrap-server", "localhost", "--list"},
			noBootstrp: true,
			wantErr:    "Error: --bootstrap-server entry \"localhost\" is not host:port\n",
			wantCode:   1,
		},
		{
			name:       "missing --mirror-config file",
			args:       []string{"--bootstrap-server", "localhost:1", "--create", "--mirror", "m", "--mirror-config", "/nonexistent/m.properties"},
			noBootstrp: true,
			wantErr:    "Error: --mirror-config: open /nonexistent/m.properties: no such file or directory\n",
			wantCode:   1,
		},
		{
			name:       "version",
			args:       []string{"--version"},
			noBootstrp: true,
			wantOut:    "kafka-cluster-mirrors dev\n",
		},
		{
			name:       "help",
			args:       []string{"--help"},
			noBootstrp: true,
			wantOut:    usage,
		},
	}
	runCases(t, cases)
}

func TestBootstrapServers(t *testing.T) {
	h := &fakeHandler{}
	addr := startFake(t, h)
	// A port nobody listens on: take one and release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()

	cc := writeFile(t, "client.properties", "client.id=ops-laptop\nrequest.timeout.ms=5000\nsecurity.protocol=PLAINTEXT\n")
	out, errOut, code := runCLI(t, "--bootstrap-server", dead+", "+addr, "--command-config", cc, "--delete", "--mirror", "m")
	if code != 0 || out != "Deleted mirror m\n" || errOut != "" {
		t.Fatalf("got %d %q %q", code, out, errOut)
	}
	h.mu.Lock()
	clientID := h.infos[0].ClientID
	h.mu.Unlock()
	if clientID != "ops-laptop" {
		t.Errorf("client ID %q, want the command-config's client.id", clientID)
	}

	_, errOut, code = runCLI(t, "--bootstrap-server", dead, "--list")
	if code != 1 || !strings.HasPrefix(errOut, "Error: could not connect to --bootstrap-server "+dead+": dial tcp "+dead+": ") {
		t.Errorf("all servers down: %d %q", code, errOut)
	}

	// Settings that are refused at validation exit with 2, naming the key,
	// and never connect.
	before := len(h.requests())
	for _, tc := range []struct{ file, want string }{
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.jaas.config=x\n", "config: sasl.mechanism: \"GSSAPI\" (Kerberos) is not supported"},
		{"security.protocol=SSL\nssl.cipher.suites=TLS_AES_128_GCM_SHA256\n", "line 2: ssl.cipher.suites is not a client security setting kafka-cluster-mirrors supports"},
		{"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "config: sasl.jaas.config: is missing"},
		{"security.protocol=TLS\n", "config: security.protocol: \"TLS\" is not supported"},
	} {
		cc := writeFile(t, "refused.properties", tc.file)
		_, errOut, code := runCLI(t, "--bootstrap-server", addr, "--command-config", cc, "--list")
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "hunter2") {
			t.Errorf("--command-config %q: exit %d, %q; want 2 and %q", tc.file, code, errOut, tc.want)
		}
	}
	if n := len(h.requests()); n != before {
		t.Errorf("refused settings still sent %d requests", n-before)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/protocol"
)

// failedExample has a retried, a non-retryable and a healthy partition in
// one mirror and a FAILED partition in another.
func failedExample() *protocol.DescribeClusterMirrorsResponse {
	retried := partition(1, 94, 84, 10, "FAILED")
	retried.RetryAttempt, retried.MaxRetryAttempts = 3, 20
	retried.LastError = strp("fetcher: source unreachable:\n dial tcp 10.0.0.1:9092: connection refused")
	permanent := partition(0, 69, 66, 3, "FAILED")
	permanent.NonRetryable, permanent.MaxRetryAttempts = true, 20
	permanent.LastError = strp("another writer appended to the mirror topic")
	unknown := partition(0, -1, -1, -1, "FAILED") // no retry information (an old sidecar)
	return &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{
		{MirrorName: "my-mirror", Topics: []protocol.DescribedTopic{
			{TopicName: "orders-us", Partitions: []protocol.PartitionDetail{retried, permanent, partition(2, 5, 5, 0, "MIRRORING")}},
			{TopicName: "payments", Partitions: []protocol.PartitionDetail{partition(0, 7, 7, 0, "MIRRORING")}},
		}},
		{MirrorName: "new-mirror", Topics: []protocol.DescribedTopic{
			{TopicName: "baz", Partitions: []protocol.PartitionDetail{unknown, partition(1, -1, -1, -1, "PAUSED")}},
		}},
	}}
}

const (
	describeHeader = "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE\n"
	failedHeader   = "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE           RETRY         ERROR\n"
)

func TestDescribeFailedAndFilters(t *testing.T) {
	healthy := &protocol.DescribeClusterMirrorsResponse{Mirrors: []protocol.DescribedMirror{{MirrorName: "my-mirror",
		Topics: []protocol.DescribedTopic{{TopicName: "payments", Partitions: []protocol.PartitionDetail{partition(0, 7, 7, 0, "MIRRORING")}}}}}}
	cases := []cliCase{
		{
			name: "--failed: RETRY and ERROR columns, exit 3",
			args: []string{"--describe", "--failed"},
			resp: []protocol.Response{failedExample()},
			wantOut: failedHeader +
				"my-mirror                      orders-us                                0          69              66                 3        FAILED          NonRetryable  another writer appended to the mirror topic\n" +
				"my-mirror                      orders-us                                1          94              84                 10       FAILED          3/20          fetcher: source unreachable: dial tcp 10.0.0.1:9092: connection refused\n" +
				"new-mirror                     baz                                      0          -               -                  -        FAILED          -             -\n",
			wantCode: 3,
			wantReq:  &protocol.DescribeClusterMirrorsRequest{},
		},
		{
			name:    "--failed without FAILED partitions: exit 0",
			args:    []string{"--describe", "--failed", "--mirror", "my-mirror"},
			resp:    []protocol.Response{healthy},
			wantOut: failedHeader,
			wantReq: &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror"}},
		},
		{
			name: "plain describe with FAILED partitions: exit 3",
			args: []string{"--describe", "--topics", "orders-.*"},
			resp: []protocol.Response{failedExample()},
			wantOut: describeHeader +
				"my-mirror                      orders-us                                0          69              66                 3        FAILED\n" +
				"  error: another writer appended to the mirror topic\n" +
				"my-mirror                      orders-us                                1          94              84                 10       FAILED\n" +
				"  error: fetcher: source unreachable: dial tcp 10.0.0.1:9092: connection refused\n" +
				"my-mirror                      orders-us                                2          5               5                  0        MIRRORING\n",
			wantCode: 3,
		},
		{
			name: "--topics matches whole names",
			args: []string{"--describe", "--topics", "pay,ba."},
			resp: []protocol.Response{failedExample()},
			wantOut: describeHeader +
				"new-mirror                     baz                                      0          -               -                  -        FAILED\n" +
				"new-mirror                     baz                                      1          -               -                  -        PAUSED\n",
			wantCode: 3,
		},
		{
			name: "--state filters and decides the exit code",
			args: []string{"--describe", "--state", "mirroring,paused"},
			resp: []protocol.Response{failedExample()},
			wantOut: describeHeader +
				"my-mirror                      orders-us                                2          5               5                  0        MIRRORING\n" +
				"my-mirror                      payments                                 0          7               7                  0        MIRRORING\n" +
				"new-mirror                     baz                                      1          -               -                  -        PAUSED\n",
		},
		{
			name: "--state with --topics and --json",
			args: []string{"--describe", "--state", "FAILED", "--topics", "baz", "--json"},
			resp: []protocol.Response{failedExample()},
			wantOut: `{
  "throttleTimeMs": 0,
  "errorCode": 0,
  "errorMessage": null,
  "mirrors": [
    {
      "errorCode": 0,
      "mirrorName": "my-mirror",
      "authorizedOperations": 0,
      "topics": [],
      "sourceClusterId": "",
      "sourceBootstrap": "",
      "configs": [],
      "errorMessage": null
    },
    {
      "errorCode": 0,
      "mirrorName": "new-mirror",
      "authorizedOperations": 0,
      "topics": [
        {
          "topicName": "baz",
          "partitions": [
            {
              "partitionIndex": 0,
              "sourceOffset": -1,
              "destinationOffset": -1,
              "lag": -1,
              "state": "FAILED",
              "lastMirrorEpoch": -1,
              "lastError": null,
              "ownerBrokerId": -1,
              "sourceUnreachableSinceMs": -1,
              "lagTimeMs": -1,
              "lastFetchTimestampMs": -1,
              "retryAttempt": 0,
              "maxRetryAttempts": -1,
              "nonRetryable": false,
              "mirroredBytes": -1
            }
          ]
        }
      ],
      "sourceClusterId": "",
      "sourceBootstrap": "",
      "configs": [],
      "errorMessage": null
    }
  ]
}
`,
			wantCode: 3,
		},
		{
			name:     "unknown --state",
			args:     []string{"--describe", "--state", "BROKEN"},
			wantErr:  "Error: --state BROKEN is not a partition state (expected UNKNOWN, LOG_TRUNCATION, MIRRORING, PAUSING, PAUSED, STOPPING, STOPPED, FAILED)\n",
			wantCode: 1,
		},
		{
			name:     "--failed with --state",
			args:     []string{"--describe", "--failed", "--state", "FAILED"},
			wantErr:  "Error: --failed and --state cannot be combined: --failed shows the FAILED partitions\n",
			wantCode: 1,
		},
		{
			name:     "--failed with --json",
			args:     []string{"--describe", "--failed", "--json"},
			wantErr:  "Error: --failed is a table; with --json use --state FAILED\n",
			wantCode: 1,
		},
		{
			name:     "--failed without --describe",
			args:     []string{"--list", "--failed"},
			wantErr:  "Error: --failed is only valid with --describe\n",
			wantCode: 1,
		},
		{
			name:     "--state without --describe",
			args:     []string{"--list", "--state", "FAILED"},
			wantErr:  "Error: --state is only valid with --describe\n",
			wantCode: 1,
		},
		{
			name:     "bad --topics regex",
			args:     []string{"--describe", "--topics", "orders-(.*"},
			wantErr:  "Error: --topics \"orders-(.*\" is not a valid regex: error parsing regexp: missing closing ): `^(?:orders-(.*)$`\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
}

func TestRecover(t *testing.T) {
	cases := []cliCase{
		{
			name: "recover",
			args: []string{"--recover", "--topics", "orders-.*", "--mirror", "my-mirror"},
			resp: []protocol.Response{&protocol.RecoverMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{
				{Name: "orders-us"}, {Name: "orders-eu"},
			}}},
			wantOut: "Recovered 2 mirror topic(s) in mirror my-mirror: [orders-us, orders-eu]\n",
			wantReq: &protocol.RecoverMirrorTopicsRequest{MirrorName: "my-mirror", TopicPatterns: []string{"orders-.*"}},
		},
		{
			name:    "recover with nothing FAILED",
			args:    []string{"--recover", "--topics", ".*", "--mirror", "my-mirror"},
			wantOut: "Recovered 0 mirror topic(s) in mirror my-mirror: []\n",
		},
		{
			name: "recover of a healthy topic",
			args: []string{"--recover", "--topics", "payments", "--mirror", "my-mirror"},
			resp: []protocol.Response{&protocol.RecoverMirrorTopicsResponse{MirrorName: "my-mirror", Topics: []protocol.MirrorTopicResult{
				{Name: "payments", ErrorCode: 42, ErrorMessage: strp("topic payments has no FAILED partition in mirror my-mirror (it is active): nothing to recover")},
			}}},
			wantErr:  "Error for topic payments: INVALID_REQUEST: topic payments has no FAILED partition in mirror my-mirror (it is active): nothing to recover\n",
			wantCode: 1,
		},
		{
			name:     "recover without --topics",
			args:     []string{"--recover", "--mirror", "my-mirror"},
			wantErr:  "Error: --recover requires --topics\n",
			wantCode: 1,
		},
		{
			name:     "recover without --mirror",
			args:     []string{"--recover", "--topics", "a"},
			wantErr:  "Error: --recover requires --mirror\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
}

func TestFlagPrefixes(t *testing.T) {
	cases := []cliCase{
		{
			name:    "prefixes, with = too",
			args:    []string{"--desc", "--mirror", "my-mirror", "--top=orders-.*", "--fail"},
			wantOut: failedHeader,
			wantReq: &protocol.DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror"}},
		},
		{
			name:    "a value that looks like an option is a value",
			args:    []string{"--descr", "--top", "--weird--", "--stat", "MIRRORING"},
			wantOut: describeHeader,
			wantReq: &protocol.DescribeClusterMirrorsRequest{},
		},
		{
			name:    "an exact name wins over longer options",
			args:    []string{"--delete", "--mirror", "m"},
			wantOut: "Deleted mirror m\n",
			wantReq: &protocol.DeleteClusterMirrorRequest{MirrorName: "m"},
		},
		{
			name:     "ambiguous prefix",
			args:     []string{"--st", "--topics", "a", "--mirror", "m"},
			wantErr:  "Error: option --st is ambiguous: it could be --start, --state or --stop (see --help)\n",
			wantCode: 1,
		},
		{
			name:     "ambiguous prefix of a longer name",
			args:     []string{"--list", "--mir", "m"},
			wantErr:  "Error: option --mir is ambiguous: it could be --mirror or --mirror-config (see --help)\n",
			wantCode: 1,
		},
		{
			name:     "unknown option",
			args:     []string{"--list", "--frob"},
			wantErr:  "Error: flag provided but not defined: -frob (see --help)\n",
			wantCode: 1,
		},
	}
	runCases(t, cases)
	// --bootstrap for --bootstrap-server (runCases gives the full name).
	ok := &protocol.ListClusterMirrorsResponse{}
	h := &fakeHandler{resp: map[int16]protocol.Response{ok.Key(): ok}}
	out, errOut, code := runCLI(t, "--bootstrap", startFake(t, h), "--list")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "MIRROR ") || len(h.requests()) != 1 {
		t.Fatalf("--bootstrap: exit %d, stdout %q, stderr %q, %d requests", code, out, errOut, len(h.requests()))
	}
	out, errOut, code = runCLI(t, "--bootstrap-s="+startFake(t, h), "--list")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "MIRROR ") {
		t.Fatalf("--bootstrap-s=: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

package protocol

import "github.com/twmb/franz-go/pkg/kmsg"

// Sample messages with a non-default value in every field, tagged fields
// included. They drive the round-trip tests, seed the fuzz corpora and are
// echoed by the server tests.

func strp(s string) *string { return &s }

var (
	sampleTopicID  = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sampleTopicID2 = [16]byte{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00}
)

func sampleTopicResults() []MirrorTopicResult {
	return []MirrorTopicResult{
		{Name: "orders-us", ErrorCode: 3, ErrorMessage: strp("topic orders-us does not exist on the source")},
		{Name: "orders-eu", ErrorCode: 87, ErrorMessage: strp("")},
	}
}

func sampleDescribedMirrors() []DescribedMirror {
	return []DescribedMirror{
		{
			ErrorCode:            58,
			MirrorName:           "my-mirror",
			AuthorizedOperations: 0x7f,
			Topics: []DescribedTopic{
				{
					TopicName: "foo",
					Partitions: []PartitionDetail{
						{
							PartitionIndex: 2, SourceOffset: 94, DestinationOffset: 90, Lag: 4,
							State: "MIRRORING", LastMirrorEpoch: 11,
							LastError: strp("NOT_LEADER_OR_FOLLOWER from broker 2"), OwnerBrokerId: 3,
							SourceUnreachableSinceMs: 1764640800000, LagTimeMs: 61250, LastFetchTimestampMs: 1764640800000,
							MaxRetryAttempts: -1,
						},
						{
							PartitionIndex: 0, SourceOffset: 1 << 40, DestinationOffset: 1<<40 - 5, Lag: 5,
							State: "FAILED", LastMirrorEpoch: 1,
							LastError: strp("source topic ID changed"), OwnerBrokerId: 0,
							SourceUnreachableSinceMs: 0, LagTimeMs: 0, LastFetchTimestampMs: 1,
							RetryAttempt: 4, MaxRetryAttempts: 20, NonRetryable: true, MirroredBytes: 123456,
						},
					},
				},
				{TopicName: "bar", Partitions: []PartitionDetail{{
					PartitionIndex: 1, SourceOffset: 7, DestinationOffset: 7, Lag: 1, State: "STOPPED",
					LastMirrorEpoch: 4, LastError: strp("x"), OwnerBrokerId: 1,
					SourceUnreachableSinceMs: 5, LagTimeMs: 6, LastFetchTimestampMs: 7,
					RetryAttempt: 2, MaxRetryAttempts: 0,
				}}},
			},
			SourceClusterId: "lBq12jYZRp-9wF3M9MPopg",
			SourceBootstrap: "localhost:9091,localhost:9092",
			Configs: []ClusterMirrorConfig{
				{Name: "bootstrap.servers", Value: strp("localhost:9091,localhost:9092")},
				{Name: "sasl.jaas.config", Value: strp("[hidden]")},
				{Name: "empty", Value: strp("")},
			},
			ErrorMessage: strp("mirror is degraded"),
		},
	}
}

// sampleMessages returns one sample request and response per API and
// version worth covering; the last sample of each API's request and response
// is at its highest version.
func sampleMessages() []Message {
	apiVersionsV := func(m Message, v int16) Message { m.SetVersion(v); return m }
	return append([]Message{
		apiVersionsV(&ApiVersionsRequest{}, 0),
		apiVersionsV(&ApiVersionsRequest{ClientSoftwareName: "sidemirror", ClientSoftwareVersion: "1.2.3"}, 3),
		apiVersionsV(&ApiVersionsResponse{
			ErrorCode: 35, FinalizedFeaturesEpoch: -1,
			ApiKeys: []ApiVersionsKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}},
		}, 0),
		apiVersionsV(&ApiVersionsResponse{
			ErrorCode: 0, ThrottleTimeMs: 5, FinalizedFeaturesEpoch: -1,
			ApiKeys: []ApiVersionsKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}, {ApiKey: 1000, MinVersion: 0, MaxVersion: 0}},
		}, 1),
		apiVersionsV(&ApiVersionsResponse{
			ErrorCode:              1,
			ApiKeys:                []ApiVersionsKey{{ApiKey: 18, MinVersion: 1, MaxVersion: 3}, {ApiKey: 1011, MinVersion: 2, MaxVersion: 4}},
			ThrottleTimeMs:         9,
			SupportedFeatures:      []ApiVersionsSupportedFeature{{Name: "mirror.version", MinVersion: 1, MaxVersion: 2}},
			FinalizedFeaturesEpoch: 42,
			FinalizedFeatures:      []ApiVersionsFinalizedFeature{{Name: "mirror.version", MaxVersionLevel: 2, MinVersionLevel: 1}},
			ZkMigrationReady:       true,
		}, 3),

		&CreateClusterMirrorRequest{
			MirrorName: "my-mirror",
			Config: []ClusterMirrorConfig{
				{Name: "bootstrap.servers", Value: strp("localhost:9092")},
				{Name: "security.protocol", Value: strp("SASL_SSL")},
				{Name: "mirror.topics.exclude", Value: nil},
			},
		},
		&CreateClusterMirrorResponse{ThrottleTimeMs: 1, ErrorCode: 36, ErrorMessage: strp("mirror my-mirror already exists")},

		&DeleteClusterMirrorRequest{MirrorName: "my-mirror"},
		&DeleteClusterMirrorResponse{ThrottleTimeMs: 2, ErrorCode: 42, ErrorMessage: strp("mirror has 2 topics that are not STOPPED")},

		&ListClusterMirrorsRequest{},
		&ListClusterMirrorsResponse{
			ThrottleTimeMs: 3, ErrorCode: 29, ErrorMessage: strp("partial"),
			Mirrors: []ListedMirror{
				{MirrorName: "my-mirror", SourceBootstrap: "localhost:9091,localhost:9092", SourceClusterId: "lBq12jYZRp-9wF3M9MPopg", TopicCount: 2},
				{MirrorName: "new-mirror", SourceBootstrap: "src:9092", SourceClusterId: "x", TopicCount: 1},
			},
		},

		&DescribeClusterMirrorsRequest{MirrorNames: []string{"my-mirror", "new-mirror"}, IncludeAuthorizedOperations: true},
		&DescribeClusterMirrorsResponse{
			ThrottleTimeMs: 4, ErrorCode: 15, ErrorMessage: strp("some sidecars did not answer"),
			Mirrors: sampleDescribedMirrors(),
		},

		&StartMirrorTopicsRequest{
			MirrorName: "my-mirror",
			Topics: []StartMirrorTopicData{
				{TopicId: sampleTopicID, TopicName: "orders-us", NumPartitions: 6},
				{TopicId: sampleTopicID2, TopicName: "orders-eu", NumPartitions: 3},
			},
			IncludePatterns: []string{"orders-.*"},
			ExcludePatterns: []string{"orders-internal", ""},
			TopicPatterns:   []string{"orders-.*", "payments"},
			Reseed:          true,
		},
		&StartMirrorTopicsResponse{ThrottleTimeMs: 5, ErrorCode: 7, ErrorMessage: strp("top"), MirrorName: "my-mirror", Topics: sampleTopicResults(),
			Reseeded: []ReseededTopic{{Name: "orders-us", CopyTopic: "orders-us.diverged-20260314T101500Z", Partitions: []ReseededPartition{
				{Partition: 2, FirstOffset: 1180, EndOffset: 1200, Records: 19},
				{Partition: 0, FirstOffset: 7, EndOffset: 8, Records: 1},
			}}}},

		&StopMirrorTopicsRequest{
			MirrorName:    "my-mirror",
			Topics:        []MirrorTopicData{{TopicId: sampleTopicID, TopicName: "orders-us"}},
			Patterns:      []string{"orders-us"},
			TopicPatterns: []string{".*"},
		},
		&StopMirrorTopicsResponse{ThrottleTimeMs: 6, ErrorCode: 8, ErrorMessage: strp("stop"), MirrorName: "my-mirror", Topics: sampleTopicResults()},

		&PauseMirrorTopicsRequest{
			MirrorName:    "my-mirror",
			Topics:        []MirrorTopicData{{TopicId: sampleTopicID2, TopicName: "my-topic"}},
			TopicPatterns: []string{"my-topic"},
		},
		&PauseMirrorTopicsResponse{ThrottleTimeMs: 7, ErrorCode: 9, ErrorMessage: strp("pause"), MirrorName: "my-mirror", Topics: sampleTopicResults()},

		&ResumeMirrorTopicsRequest{
			MirrorName:    "my-mirror",
			Topics:        []MirrorTopicData{{TopicId: sampleTopicID, TopicName: "my-topic"}},
			TopicPatterns: []string{"my-.*"},
		},
		&ResumeMirrorTopicsResponse{ThrottleTimeMs: 8, ErrorCode: 10, ErrorMessage: strp("resume"), MirrorName: "my-mirror", Topics: sampleTopicResults()},

		&RecoverMirrorTopicsRequest{
			MirrorName:    "my-mirror",
			Topics:        []MirrorTopicData{{TopicId: sampleTopicID, TopicName: "my-topic"}},
			TopicPatterns: []string{"orders-.*"},
		},
		&RecoverMirrorTopicsResponse{ThrottleTimeMs: 9, ErrorCode: 11, ErrorMessage: strp("recover"), MirrorName: "my-mirror", Topics: sampleTopicResults()},

		&ReadMirrorStatesRequest{
			MirrorName: "my-mirror",
			Topics: []ReadMirrorStatesRequestTopic{
				{Name: "foo", Partitions: []ReadMirrorStatesRequestPartition{{PartitionIndex: 1}, {PartitionIndex: 2}}},
			},
		},
		&ReadMirrorStatesResponse{
			ThrottleTimeMs: 9, ErrorCode: 11, ErrorMessage: strp("read"),
			Topics: []ReadMirrorStatesResponseTopic{{Name: "foo", Partitions: []ReadMirrorStatesResponsePartition{
				{PartitionIndex: 1, LastMirrorEpoch: 5, State: 7, ErrorCode: 6, PreviousState: 2, RetryAttempt: 3, Reason: strp("batch at offset 7 is transactional"), LastSourceOffset: 7},
				{PartitionIndex: 2, LastMirrorEpoch: 6, State: 4, ErrorCode: 1, PreviousState: 3, RetryAttempt: 1},
				{PartitionIndex: 3, LastMirrorEpoch: -1, State: 2, PreviousState: 16, LastSourceOffset: -1,
					OffsetMap: []OffsetShift{{SourceOffset: 20, DestinationOffset: 10}, {SourceOffset: 31, DestinationOffset: 20}}},
			}}},
		},

		&WriteMirrorStatesRequest{
			MirrorName: "my-mirror",
			Topics: []WriteMirrorStatesRequestTopic{{Name: "foo", Partitions: []WriteMirrorStatesRequestPartition{
				{PartitionIndex: 3, LastMirrorEpoch: 9, State: 6, PreviousState: 5, RetryAttempt: 2, DestinationLeaderEpoch: 12, Reason: strp("corrupt batch"), LastSourceOffset: 44},
				{PartitionIndex: 4, LastMirrorEpoch: -1, State: StateUnchanged, PreviousState: 16, DestinationLeaderEpoch: 3, LastSourceOffset: -1,
					OffsetMap: []OffsetShift{{SourceOffset: 7, DestinationOffset: 5}}},
			}}},
			StoppedTopics: []string{"foo", "bar"},
		},
		&WriteMirrorStatesResponse{
			ThrottleTimeMs: 10, ErrorCode: 12, ErrorMessage: strp("write"),
			Topics: []WriteMirrorStatesResponseTopic{{Name: "foo", Partitions: []WriteMirrorStatesResponsePartition{
				{PartitionIndex: 3, ErrorCode: 74},
			}}},
		},

		&ApplyCommandRequest{Command: []byte{1, 0, 0xff, 'c', 'm', 'd'}},
		&ApplyCommandResponse{ThrottleTimeMs: 11, ErrorCode: 41, ErrorMessage: strp("not the raft leader"), Result: []byte{2, 3, 4}},

		&DescribeLocalPartitionsRequest{MirrorNames: []string{"my-mirror"}},
		&DescribeLocalPartitionsResponse{ThrottleTimeMs: 12, ErrorCode: 13, ErrorMessage: strp("local"), Mirrors: sampleDescribedMirrors()},
	}, append(configAndMembershipSamples(), kafkaAPISamples()...)...)
}

// kafkaAPISamples are samples of Kafka's SASL and ACL APIs (kmsg's types).
func kafkaAPISamples() []Message {
	v := func(m Message, version int16) Message { m.SetVersion(version); return m }
	return []Message{
		v(&SaslHandshakeRequest{kmsg.SASLHandshakeRequest{Mechanism: "SCRAM-SHA-512"}}, 1),
		v(&SaslHandshakeResponse{kmsg.SASLHandshakeResponse{ErrorCode: 33, SupportedMechanisms: []string{"PLAIN", "SCRAM-SHA-256"}}}, 1),
		v(&SaslAuthenticateRequest{kmsg.SASLAuthenticateRequest{SASLAuthBytes: []byte("n,,n=alice,r=abc")}}, 0),
		v(&SaslAuthenticateRequest{kmsg.SASLAuthenticateRequest{SASLAuthBytes: []byte("\x00alice\x00secret")}}, 2),
		v(&SaslAuthenticateResponse{kmsg.SASLAuthenticateResponse{ErrorCode: 58, ErrorMessage: strp("no"), SASLAuthBytes: []byte("r=abcdef"), SessionLifetimeMillis: 3600}}, 2),
		v(&DescribeAclsRequest{kmsg.DescribeACLsRequest{ResourceType: 8, ResourceName: strp("my-mirror"), ResourcePatternType: 4,
			Principal: strp("User:monitor"), Host: strp("10.0.0.1"), Operation: 8, PermissionType: 2}}, 3),
		v(&DescribeAclsResponse{kmsg.DescribeACLsResponse{ThrottleMillis: 1, ErrorCode: 31, ErrorMessage: strp("denied"),
			Resources: []kmsg.DescribeACLsResponseResource{{ResourceType: 8, ResourceName: "my-mirror", ResourcePatternType: 4,
				ACLs: []kmsg.DescribeACLsResponseResourceACL{{Principal: "User:monitor", Host: "*", Operation: 8, PermissionType: 2}}}}}}, 3),
		v(&CreateAclsRequest{kmsg.CreateACLsRequest{Creations: []kmsg.CreateACLsRequestCreation{{ResourceType: 8, ResourceName: "my-mirror",
			ResourcePatternType: 4, Principal: "User:mirror-admin", Host: "10.0.0.2", Operation: 5, PermissionType: 2}}}}, 3),
		v(&CreateAclsResponse{kmsg.CreateACLsResponse{ThrottleMillis: 2, Results: []kmsg.CreateACLsResponseResult{{ErrorCode: 42, ErrorMessage: strp("bad")}}}}, 3),
		v(&DeleteAclsRequest{kmsg.DeleteACLsRequest{Filters: []kmsg.DeleteACLsRequestFilter{{ResourceType: 8, ResourceName: strp("m"),
			ResourcePatternType: 4, Principal: strp("User:a"), Host: strp("*"), Operation: 7, PermissionType: 2}}}}, 3),
		v(&DeleteAclsResponse{kmsg.DeleteACLsResponse{ThrottleMillis: 3, Results: []kmsg.DeleteACLsResponseResult{{ErrorCode: 1, ErrorMessage: strp("x"),
			MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{{ErrorCode: 2, ErrorMessage: strp("y"), ResourceType: 8, ResourceName: "m",
				ResourcePatternType: 4, Principal: "User:a", Host: "10.0.0.3", Operation: 7, PermissionType: 2}}}}}}, 3),
	}
}

package protocol

// configAndMembershipSamples are the samples of DescribeConfigs,
// IncrementalAlterConfigs and the raft membership APIs, in the order
// sampleMessages promises: the last sample of each request and response
// type is at its API's highest version and sets every field.
func configAndMembershipSamples() []Message {
	at := func(m Message, v int16) Message { m.SetVersion(v); return m }
	alterRequest := func() *IncrementalAlterConfigsRequest {
		return &IncrementalAlterConfigsRequest{
			Resources: []AlterConfigsResource{
				{ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror", Configs: []AlterableConfig{
					{Name: "bootstrap.servers", ConfigOperation: ConfigOpSet, Value: strp("localhost:9092")},
					{Name: "mirror.topics.include", ConfigOperation: ConfigOpAppend, Value: strp("orders-.*")},
					{Name: "sasl.jaas.config", ConfigOperation: ConfigOpDelete},
				}},
				{ResourceType: 2, ResourceName: "a-topic"},
			},
			ValidateOnly: true,
		}
	}
	alterResponse := func() *IncrementalAlterConfigsResponse {
		return &IncrementalAlterConfigsResponse{
			ThrottleTimeMs: 13,
			Responses: []AlterConfigsResourceResponse{
				{ErrorCode: 40, ErrorMessage: strp("mirror my-mirror has no config key x"), ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror"},
				{ErrorCode: 0, ResourceType: 2, ResourceName: ""},
			},
		}
	}
	describeRequest := func() *DescribeConfigsRequest {
		return &DescribeConfigsRequest{
			Resources: []DescribeConfigsResource{
				{ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror"},
				{ResourceType: ResourceTypeClusterMirror, ResourceName: "new-mirror", ConfigurationKeys: []string{"bootstrap.servers", ""}},
				{ResourceType: 4, ResourceName: "1", ConfigurationKeys: []string{}},
			},
		}
	}
	entry := func(name string, value *string, source int8) DescribeConfigsEntry {
		e := NewDescribeConfigsEntry()
		e.Name, e.Value, e.ConfigSource = name, value, source
		return e
	}
	return []Message{
		at(alterRequest(), 0),
		at(alterResponse(), 0),
		at(alterRequest(), 1),
		at(alterResponse(), 1),

		at(describeRequest(), 0),
		at(&DescribeConfigsResponse{ThrottleTimeMs: 1, Results: []DescribeConfigsResult{{
			ErrorCode: 0, ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror",
			Configs: []DescribeConfigsEntry{
				entry("bootstrap.servers", strp("localhost:9092"), -1),
				entry("mirror.metadata.refresh.interval.ms", strp("30000"), ConfigSourceDefault),
				{Name: "sasl.jaas.config", ConfigSource: -1, IsSensitive: true, ReadOnly: true},
			},
		}}}, 0),
		func() Message {
			r := describeRequest()
			r.IncludeSynonyms = true
			return at(r, 2)
		}(),
		at(&DescribeConfigsResponse{ThrottleTimeMs: 2, Results: []DescribeConfigsResult{{
			ErrorCode: 69, ErrorMessage: strp("mirror x does not exist"), ResourceType: ResourceTypeClusterMirror, ResourceName: "x",
			Configs: []DescribeConfigsEntry{{
				Name: "security.protocol", Value: strp("SSL"), ConfigSource: ConfigSourceDynamicResource,
				Synonyms: []DescribeConfigsSynonym{{Name: "security.protocol", Value: strp("SSL"), Source: ConfigSourceDynamicResource}},
			}},
		}}}, 2),
		func() Message {
			r := describeRequest()
			r.IncludeSynonyms, r.IncludeDocumentation = true, true
			return at(r, 3)
		}(),
		at(&DescribeConfigsResponse{ThrottleTimeMs: 4, Results: []DescribeConfigsResult{{
			ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror",
			Configs: []DescribeConfigsEntry{{
				Name: "mirror.topics.include", Value: strp("orders-.*"), ConfigSource: ConfigSourceDynamicResource,
				ConfigType: ConfigTypeList, Documentation: strp("Topic patterns to mirror."),
			}},
		}}}, 3),
		func() Message {
			r := describeRequest()
			r.IncludeSynonyms, r.IncludeDocumentation = true, true
			return at(r, 4)
		}(),
		at(&DescribeConfigsResponse{ThrottleTimeMs: 3, Results: []DescribeConfigsResult{
			{
				ErrorCode: 42, ErrorMessage: strp("the sidecar admin endpoint serves only CLUSTER_MIRROR (64) resources"),
				ResourceType: 2, ResourceName: "a-topic",
			},
			{
				ResourceType: ResourceTypeClusterMirror, ResourceName: "my-mirror",
				Configs: []DescribeConfigsEntry{
					{
						Name: "mirror.topic.replication.factor", Value: strp("3"), ReadOnly: true,
						ConfigSource: ConfigSourceDynamicResource, IsSensitive: true,
						Synonyms: []DescribeConfigsSynonym{
							{Name: "mirror.topic.replication.factor", Value: strp("3"), Source: ConfigSourceDynamicResource},
							{Name: "mirror.topic.replication.factor", Value: nil, Source: ConfigSourceDefault},
						},
						ConfigType: ConfigTypeShort, Documentation: strp("The replication factor of created mirror topics."),
					},
				},
			},
		}}, 4),

		&AddSidecarRequest{BrokerId: 3, RaftAddress: "10.0.0.3:9192", AdminAddress: "10.0.0.3:9191"},
		&AddSidecarResponse{ThrottleTimeMs: 14, ErrorCode: 41, ErrorMessage: strp("not the raft leader"), LeaderAdminAddress: strp("10.0.0.1:9191")},

		&RemoveSidecarRequest{BrokerId: 3},
		&RemoveSidecarResponse{ThrottleTimeMs: 15, ErrorCode: 42, ErrorMessage: strp("broker 3 is the last voter"), LeaderAdminAddress: strp("")},

		&DescribeSidecarsRequest{},
		&DescribeSidecarsResponse{
			ThrottleTimeMs: 16, ErrorCode: 15, ErrorMessage: strp("no leader"), LeaderId: 2,
			Sidecars: []DescribedSidecar{
				{BrokerId: 1, RaftAddress: "10.0.0.1:9192", AdminAddress: strp("10.0.0.1:9191"), Voter: true, Version: "1.0.0"},
				{BrokerId: 2, RaftAddress: "10.0.0.2:9192"},
			},
		},
	}
}

package fsm

// The Kafka protocol error codes Apply answers with. They are Kafka's own
// numbers (franz-go's kerr has them too; the tests check that they match),
// written out here so that the state machine imports no Kafka client.
const (
	codeUnknownServerError      int16 = -1
	codeUnknownTopicOrPartition int16 = 3
	codeInvalidTopic            int16 = 17  // INVALID_TOPIC_EXCEPTION
	codeUnsupportedVersion      int16 = 35  // UNSUPPORTED_VERSION
	codeInvalidPartitions       int16 = 37  // INVALID_PARTITIONS
	codeInvalidConfig           int16 = 40  // INVALID_CONFIG
	codeInvalidRequest          int16 = 42  // INVALID_REQUEST
	codeResourceNotFound        int16 = 91  // RESOURCE_NOT_FOUND
	codeInconsistentClusterID   int16 = 104 // INCONSISTENT_CLUSTER_ID
)

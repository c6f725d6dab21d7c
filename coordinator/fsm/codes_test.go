package fsm

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCodesAreKafkas checks the error codes Apply answers with against
// franz-go's table of Kafka's codes.
func TestCodesAreKafkas(t *testing.T) {
	for _, tc := range []struct {
		got  int16
		want *kerr.Error
	}{
		{codeUnknownServerError, kerr.UnknownServerError},
		{codeUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
		{codeInvalidTopic, kerr.InvalidTopicException},
		{codeUnsupportedVersion, kerr.UnsupportedVersion},
		{codeInvalidPartitions, kerr.InvalidPartitions},
		{codeInvalidConfig, kerr.InvalidConfig},
		{codeInvalidRequest, kerr.InvalidRequest},
		{codeResourceNotFound, kerr.ResourceNotFound},
		{codeInconsistentClusterID, kerr.InconsistentClusterID},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: code %d, Kafka's is %d", tc.want.Message, tc.got, tc.want.Code)
		}
	}
}

package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// TestNotCaughtUpIsAnError sends every admin request but the internal
// ApplyCommand to a sidecar that cannot catch up with its raft group (one
// of two members runs: no leader) and checks that each answer carries
// COORDINATOR_NOT_AVAILABLE, top-level or for every resource: an answer
// without an error would tell the CLI that a change happened.
func TestNotCaughtUpIsAnError(t *testing.T) {
	c := raftnodetest.New(t, 1, 2)
	n := c.Start(1)
	dest, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	svc, err := NewService(ServiceConfig{BrokerID: 1, Node: n, Destination: NewDestination(dest, ""), DestClient: dest,
		NewDataPlane: func(DataPlaneEvents, fetcher.OffsetMaps) (DataPlane, error) { return &fakeDataPlane{}, nil },
		SourceDialer: testSourceDialer, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := kerr.CoordinatorNotAvailable.Code
	for _, req := range []protocol.Request{
		&protocol.CreateClusterMirrorRequest{MirrorName: "m"},
		&protocol.DeleteClusterMirrorRequest{MirrorName: "m"},
		&protocol.ListClusterMirrorsRequest{},
		&protocol.DescribeClusterMirrorsRequest{},
		&protocol.DescribeLocalPartitionsRequest{},
		&protocol.StartMirrorTopicsRequest{MirrorName: "m"},
		&protocol.StopMirrorTopicsRequest{MirrorName: "m"},
		&protocol.PauseMirrorTopicsRequest{MirrorName: "m"},
		&protocol.ResumeMirrorTopicsRequest{MirrorName: "m"},
		&protocol.ReadMirrorStatesRequest{MirrorName: "m"},
		&protocol.WriteMirrorStatesRequest{MirrorName: "m"},
		&protocol.AddSidecarRequest{BrokerId: 3, RaftAddress: "h3:9192", AdminAddress: "h3:9191"},
		&protocol.RemoveSidecarRequest{BrokerId: 2},
		&protocol.DescribeSidecarsRequest{},
		&protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"}}},
		&protocol.DescribeConfigsRequest{Resources: []protocol.DescribeConfigsResource{{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: "m"}}},
	} {
		t.Run(protocol.KeyName(req.Key()), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var codes []int16
			switch r := svc.Handle(ctx, nil, req).(type) {
			case *protocol.IncrementalAlterConfigsResponse:
				for _, res := range r.Responses {
					codes = append(codes, res.ErrorCode)
				}
			case *protocol.DescribeConfigsResponse:
				for _, res := range r.Results {
					codes = append(codes, res.ErrorCode)
				}
			default:
				codes = append(codes, topLevelCode(r))
			}
			if len(codes) == 0 {
				t.Fatal("the answer names no resource")
			}
			for _, code := range codes {
				if code != want {
					t.Fatalf("error code %d, want %d (COORDINATOR_NOT_AVAILABLE)", code, want)
				}
			}
		})
	}
}

// topLevelCode returns the top-level error code of an admin response.
func topLevelCode(resp protocol.Response) int16 {
	switch r := resp.(type) {
	case *protocol.CreateClusterMirrorResponse:
		return r.ErrorCode
	case *protocol.DeleteClusterMirrorResponse:
		return r.ErrorCode
	case *protocol.ListClusterMirrorsResponse:
		return r.ErrorCode
	case *protocol.DescribeClusterMirrorsResponse:
		return r.ErrorCode
	case *protocol.DescribeLocalPartitionsResponse:
		return r.ErrorCode
	case *protocol.StartMirrorTopicsResponse:
		return r.ErrorCode
	case *protocol.StopMirrorTopicsResponse:
		return r.ErrorCode
	case *protocol.PauseMirrorTopicsResponse:
		return r.ErrorCode
	case *protocol.ResumeMirrorTopicsResponse:
		return r.ErrorCode
	case *protocol.ReadMirrorStatesResponse:
		return r.ErrorCode
	case *protocol.WriteMirrorStatesResponse:
		return r.ErrorCode
	case *protocol.AddSidecarResponse:
		return r.ErrorCode
	case *protocol.RemoveSidecarResponse:
		return r.ErrorCode
	case *protocol.DescribeSidecarsResponse:
		return r.ErrorCode
	}
	return -2
}

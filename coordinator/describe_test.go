package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// TestPartitionRow checks how describe merges a sidecar's row with the
// controller state: a paused or stopped topic that a sidecar still drives
// is PAUSING or STOPPING, one no sidecar drives any more is PAUSED or
// STOPPED, and an undriven active partition shows what was persisted.
func TestPartitionRow(t *testing.T) {
	m := &fsm.Mirror{Name: "m"}
	driven := protocol.PartitionDetail{PartitionIndex: 1, SourceOffset: 100, DestinationOffset: 90, Lag: 10,
		State: fetcher.StateMirroring.String(), LastMirrorEpoch: 3, OwnerBrokerId: 2}
	failed := driven
	failed.State, failed.LastError = fetcher.StateFailed.String(), strPtr("corrupt batch")
	reason := "leader epoch fenced"
	persisted := &protocol.ReadMirrorStatesResponsePartition{State: statestore.StateFailed, Reason: &reason}

	for _, tc := range []struct {
		name      string
		status    fsm.TopicStatus
		row       protocol.PartitionDetail
		reported  bool
		persisted *protocol.ReadMirrorStatesResponsePartition
		state     string
		owner     int32
		lastError string
	}{
		{"active, driven", fsm.TopicActive, driven, true, nil, "MIRRORING", 2, ""},
		{"paused, still driven", fsm.TopicPaused, driven, true, nil, "PAUSING", 2, ""},
		{"paused, released", fsm.TopicPaused, protocol.PartitionDetail{}, false, nil, "PAUSED", -1, ""},
		{"paused, failed row", fsm.TopicPaused, failed, true, nil, "PAUSED", -1, ""},
		{"stopped, still driven", fsm.TopicStopped, driven, true, nil, "STOPPING", 2, ""},
		{"stopped, released", fsm.TopicStopped, protocol.PartitionDetail{}, false, nil, "STOPPED", -1, ""},
		{"active, undriven, nothing persisted", fsm.TopicActive, protocol.PartitionDetail{}, false, nil, "UNKNOWN", -1, ""},
		{"active, undriven, persisted", fsm.TopicActive, protocol.PartitionDetail{}, false, persisted, "FAILED", -1, reason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := &fsm.MirrorTopic{Name: "t", Mirror: "m", Partitions: 2, Status: tc.status}
			d := partitionRow(m, topic, 1, tc.row, tc.reported, tc.persisted, nil)
			if d.State != tc.state || d.OwnerBrokerId != tc.owner || d.PartitionIndex != 1 || deref(d.LastError) != tc.lastError {
				t.Fatalf("row = %+v (last error %q), want state %s, owner %d, last error %q", d, deref(d.LastError), tc.state, tc.owner, tc.lastError)
			}
			if tc.state == "PAUSING" || tc.state == "STOPPING" {
				if d.Lag != driven.Lag || d.DestinationOffset != driven.DestinationOffset {
					t.Fatalf("a %s row lost the sidecar's offsets: %+v", tc.state, d)
				}
			}
		})
	}

	t.Run("unreachable sidecars are named", func(t *testing.T) {
		topic := &fsm.MirrorTopic{Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive}
		d := partitionRow(m, topic, 0, protocol.PartitionDetail{}, false, nil, []string{"2@127.0.0.1:9191"})
		if want := "no sidecar reports this partition; unreachable sidecars: 2@127.0.0.1:9191"; deref(d.LastError) != want {
			t.Fatalf("last error %q, want %q", deref(d.LastError), want)
		}
	})
}

// TestDetailUnreachableSource: a partition whose source cannot be reached
// is described with its lag not available (never 0 from a stale source high
// watermark), the time since which it is unreachable and the last error on
// its row; a healthy one keeps its lag and carries its lag in time and the
// bytes its owner appended.
func TestDetailUnreachableSource(t *testing.T) {
	r := &reconciler{brokerID: 2}
	lastFetch := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC)
	healthy := fetcher.PartitionStatus{
		Partition: fetcher.Partition{Mirror: "m", Topic: "t", Partition: 1}, State: fetcher.StateMirroring,
		SourceHighWatermark: 100, DestinationLogEndOffset: 100, Lag: 0,
		LagTime: 250 * time.Millisecond, LastFetch: lastFetch, BytesMirrored: 123456,
	}
	d := r.detail(healthy, healthy.State, nil)
	if d.Lag != 0 || d.LagTimeMs != 250 || d.LastFetchTimestampMs != lastFetch.UnixMilli() ||
		d.SourceUnreachableSinceMs != -1 || d.LastError != nil || d.OwnerBrokerId != 2 || d.MirroredBytes != 123456 {
		t.Fatalf("healthy row = %+v", d)
	}

	down := healthy
	down.LagTime, down.SourceUnreachableSince = 75*time.Second, lastFetch
	down.LastError = "source fetch of m/t/1 from broker 0: connection refused"
	d = r.detail(down, down.State, nil)
	if d.Lag != -1 || d.SourceOffset != 100 || d.DestinationOffset != 100 || d.State != "MIRRORING" {
		t.Fatalf("unreachable row = %+v: want lag -1 and the last known offsets", d)
	}
	if d.SourceUnreachableSinceMs != lastFetch.UnixMilli() || d.LagTimeMs != 75000 {
		t.Fatalf("unreachable row since %d, lag time %d ms", d.SourceUnreachableSinceMs, d.LagTimeMs)
	}
	msg := deref(d.LastError)
	for _, want := range []string{"source unreachable since 2026-12-02T01:02:03Z", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("last error %q does not say %q", msg, want)
		}
	}
}

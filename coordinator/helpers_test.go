package coordinator

import (
	"testing"
	"time"
)

// mustEncode encodes c or fails the test.
func mustEncode(t testing.TB, c Command) []byte {
	t.Helper()
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatalf("EncodeCommand(%T): %v", c, err)
	}
	return b
}

// mustApply applies cmds to s and fails the test on any error, top-level or
// per topic.
func mustApply(t testing.TB, s *State, cmds ...Command) {
	t.Helper()
	for _, c := range cmds {
		res := applyCommand(s, mustEncode(t, c))
		if res.ErrorCode != 0 {
			t.Fatalf("setup %T: error %d: %s", c, res.ErrorCode, res.ErrorMessage)
		}
		for _, tr := range res.Topics {
			if tr.ErrorCode != 0 {
				t.Fatalf("setup %T: topic %s: error %d: %s", c, tr.Name, tr.ErrorCode, tr.ErrorMessage)
			}
		}
	}
}

func bootstrapConfig() map[string]string {
	return map[string]string{BootstrapServersKey: "src1:9092,src2:9092", "security.protocol": "PLAINTEXT"}
}

// fixtureCommands build the state most tests start from:
//
//	mirror m1: topics a (active), p (paused), s (stopped); include "a.*"
//	mirror m2: topic b (active)
//	sidecar 1
func fixtureCommands() []Command {
	return []Command{
		CreateMirror{Name: "m1", Config: bootstrapConfig(), Include: []string{"a.*"}, NowMs: 1000},
		CreateMirror{Name: "m2", Config: bootstrapConfig(), NowMs: 1001},
		StartTopics{Mirror: "m1", Topics: []StartTopic{
			{Name: "a", Partitions: 3, SourceTopicID: [16]byte{1}},
			{Name: "p", Partitions: 1, SourceTopicID: [16]byte{2}},
			{Name: "s", Partitions: 2, SourceTopicID: [16]byte{3}},
		}, NowMs: 2000},
		StartTopics{Mirror: "m2", Topics: []StartTopic{{Name: "b", Partitions: 6}}, NowMs: 2001},
		SetTopicStatus{Mirror: "m1", Topics: []string{"p"}, Status: TopicPaused, NowMs: 3000},
		SetTopicStatus{Mirror: "m1", Topics: []string{"s"}, Status: TopicStopped, NowMs: 3001},
		RecordACLs{Topic: "s", ACLs: []ACL{{ResourceType: 2, ResourceName: "s", PatternType: 3, Principal: "User:*", Host: "*", Operation: 4, Permission: 2}}},
		RegisterSidecar{ID: 1, RaftAddr: "h1:9192", AdminAddr: "h1:9191", Version: "test"},
	}
}

func fixtureState(t testing.TB) *State {
	t.Helper()
	s := NewState()
	mustApply(t, s, fixtureCommands()...)
	return s
}

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

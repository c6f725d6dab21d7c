package fsm_test

import "github.com/sidemirror/sidemirror/coordinator/fsm"

import "testing"

func TestApplyRestartTopics(t *testing.T) {
	restart := func(topics ...string) fsm.RestartTopics {
		return fsm.RestartTopics{Mirror: "m1", Topics: topics, NowMs: 7000}
	}
	genIs := func(topic string, want int64) func(*testing.T, *fsm.State, *fsm.State) {
		return func(t *testing.T, _, s *fsm.State) {
			t.Helper()
			if got := s.Topics[topic]; got.RestartGen != want || got.UpdatedMs != 7000 {
				t.Fatalf("topic %s = %+v, want restart generation %d updated at 7000", topic, got, want)
			}
		}
	}
	runApplyCases(t, []applyCase{
		{name: "active topic", cmd: restart("a"), topics: []int16{ok}, check: genIs("a", 1)},
		{name: "paused topic", cmd: restart("p"), topics: []int16{invalidRequest}, topicMsg: "only active topics can be restarted"},
		{name: "stopped topic", cmd: restart("s"), topics: []int16{invalidRequest}, topicMsg: "only active topics can be restarted"},
		{name: "topic of another mirror", cmd: restart("b"), topics: []int16{unknownTopicCode}, topicMsg: "not a topic of mirror m1"},
		{name: "unknown mirror", cmd: fsm.RestartTopics{Mirror: "nope", Topics: []string{"a"}}, code: resourceNotFound, msg: "does not exist"},
	})
}

package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// RestartTopics is an operator's --start of topics that are already active
// in the mirror: every sidecar restarts the topics' FAILED partitions that
// it drives and grants them new automatic retries (DESIGN D12, D16: start
// accepts FAILED). It bumps each topic's RestartGen, which the sidecars
// watch.
type RestartTopics struct {
	Mirror string   `json:"mirror"`
	Topics []string `json:"topics"`
	NowMs  int64    `json:"nowMs"`
}

// Type implements Command.
func (RestartTopics) Type() CommandType { return CmdRestartTopics }

func (c RestartTopics) apply(s *State) Result {
	if s.Mirrors[c.Mirror] == nil {
		return unknownMirror(c.Mirror)
	}
	res := Result{Topics: make([]TopicResult, len(c.Topics))}
	for i, name := range c.Topics {
		t := s.Topics[name]
		switch {
		case t == nil || t.Mirror != c.Mirror:
			res.Topics[i] = topicFail(name, kerr.UnknownTopicOrPartition, "topic %s is not a topic of mirror %s", name, c.Mirror)
		case t.Status != TopicActive:
			res.Topics[i] = topicFail(name, kerr.InvalidRequest, "topic %s is %s, not active: only active topics can be restarted", name, t.Status)
		default:
			t.RestartGen++
			t.UpdatedMs = c.NowMs
			res.Topics[i] = TopicResult{Name: name}
		}
	}
	return res
}

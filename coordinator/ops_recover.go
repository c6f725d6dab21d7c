package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// recoverTopics handles RecoverMirrorTopics (the CLI's --recover): it
// restarts the FAILED partitions of the mirror's topics that the patterns
// name, with new automatic retries (RestartTopics, which the owners act on
// as for --start of an active topic). A topic matched by a regex that has
// no FAILED partition is left alone and not reported; one named literally
// gets an error saying so, as does a topic whose partitions diverged (only
// --start --reseed or --stop gets those out of FAILED).
func (a *admin) recoverTopics(ctx context.Context, r *protocol.RecoverMirrorTopicsRequest) protocol.Response {
	resp := &protocol.RecoverMirrorTopicsResponse{MirrorName: r.MirrorName}
	fail := func(code int16, format string, args ...any) protocol.Response {
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(fmt.Sprintf(format, args...))
		return resp
	}
	patterns := slices.Clone(r.TopicPatterns)
	for _, t := range r.Topics {
		patterns = append(patterns, t.TopicName)
	}
	st := a.ctl.State()
	if st.Mirrors[r.MirrorName] == nil {
		return fail(kerr.ResourceNotFound.Code, "mirror %s does not exist", r.MirrorName)
	}
	if len(patterns) == 0 {
		return fail(kerr.InvalidRequest.Code, "no topics given: name the topics to recover (names or regexes)")
	}
	names, err := expandMirrorTopics(st, r.MirrorName, patterns)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	failed := map[string]bool{}
	rows, _ := a.gatherRows(ctx, []string{r.MirrorName}, st)
	for p, d := range rows {
		if d.State == fetcher.StateFailed.String() {
			failed[p.Topic] = true
		}
	}
	var restart []string
	for _, name := range names {
		t := st.Topics[name]
		switch {
		case t == nil || t.Mirror != r.MirrorName:
			resp.Topics = append(resp.Topics, topicResult(name, kerr.UnknownTopicOrPartition.Code,
				fmt.Sprintf("topic %s is not a topic of mirror %s", name, r.MirrorName)))
		case t.Status == fsm.TopicActive && len(t.Diverged) > 0:
			resp.Topics = append(resp.Topics, topicResult(name, kerr.InvalidRequest.Code,
				"--recover cannot restart it: "+divergenceMessage(name, t.Diverged, true)))
		case failed[name]:
			restart = append(restart, name)
		case isLiteral(name) && slices.Contains(patterns, name):
			resp.Topics = append(resp.Topics, topicResult(name, kerr.InvalidRequest.Code,
				fmt.Sprintf("topic %s has no FAILED partition in mirror %s (it is %s): nothing to recover", name, r.MirrorName, t.Status)))
		}
	}
	if len(restart) > 0 {
		res, err := applyChecked(ctx, a.ctl, fsm.RestartTopics{Mirror: r.MirrorName, Topics: restart, NowMs: a.now().UnixMilli()})
		for i, name := range restart {
			if err != nil {
				resp.Topics = append(resp.Topics, topicError(name, err))
				continue
			}
			resp.Topics = append(resp.Topics, topicResult(name, res.Topics[i].ErrorCode, res.Topics[i].ErrorMessage))
			if res.Topics[i].ErrorCode == 0 {
				a.log.Info("recovering the FAILED partitions of a mirror topic", zap.String("mirror", r.MirrorName), zap.String("topic", name))
			}
		}
		a.local.Kick()
	}
	return resp
}

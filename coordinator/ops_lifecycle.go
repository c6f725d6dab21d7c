package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// topicOp is the outcome of a Stop, Pause or Resume: the response's fields.
type topicOp struct {
	code    int16
	message *string
	topics  []protocol.MirrorTopicResult
}

// expandMirrorTopics resolves names and regexes against the topics of a
// mirror (DESIGN D16). Plain names are passed on as they are, so that the
// controller can say what is wrong with a name that is not in the mirror.
func expandMirrorTopics(st *fsm.State, mirror string, patterns []string) ([]string, error) {
	res, err := compilePatterns(patterns)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range patterns {
		if isLiteral(p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, t := range st.TopicsOf(mirror) {
		if matchAny(res, t.Name) && !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no topic of mirror %s matches %s", mirror, strings.Join(patterns, ","))
	}
	return out, nil
}

// namesStoppable reports whether pattern names (or, as a regex, matches) a
// topic of the mirror that is not stopped yet.
func namesStoppable(st *fsm.State, mirror, pattern string) bool {
	res, err := compilePatterns([]string{pattern})
	if err != nil {
		return false
	}
	for _, t := range st.TopicsOf(mirror) {
		if t.Status != fsm.TopicStopped && matchAny(res, t.Name) {
			return true
		}
	}
	return false
}

// changeTopics applies a status change to the topics named by patterns.
func (a *admin) changeTopics(ctx context.Context, mirror string, patterns []string, status fsm.TopicStatus) topicOp {
	fail := func(code int16, format string, args ...any) topicOp {
		return topicOp{code: code, message: strPtr(fmt.Sprintf(format, args...))}
	}
	st := a.ctl.State()
	if _, ok := st.Mirrors[mirror]; !ok {
		return fail(kerr.ResourceNotFound.Code, "mirror %s does not exist", mirror)
	}
	if len(patterns) == 0 {
		return fail(kerr.InvalidRequest.Code, "no topics given: name the topics (names or regexes)")
	}
	names, err := expandMirrorTopics(st, mirror, patterns)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	cmd := fsm.SetTopicStatus{Mirror: mirror, Topics: names, Status: status, NowMs: a.now().UnixMilli()}
	if status == fsm.TopicStopped {
		// Stopped topics must not come back through discovery: patterns
		// move from the include list to the exclude list, and a topic
		// stopped by name is excluded as an anchored literal.
		// Only patterns that name a topic this stop can act on move: a
		// request that stops nothing changes nothing.
		for _, p := range patterns {
			if !namesStoppable(st, mirror, p) {
				continue
			}
			cmd.RemoveInclude = append(cmd.RemoveInclude, p)
			if isLiteral(p) {
				cmd.AddExclude = append(cmd.AddExclude, regexp.QuoteMeta(p))
			} else {
				cmd.AddExclude = append(cmd.AddExclude, p)
			}
		}
	}
	res, err := a.ctl.Apply(ctx, cmd)
	if err != nil {
		return fail(kerr.UnknownServerError.Code, "%v", err)
	}
	if res.ErrorCode != 0 {
		return fail(res.ErrorCode, "%s", res.ErrorMessage)
	}
	op := topicOp{}
	var changed []string
	for _, tr := range res.Topics {
		op.topics = append(op.topics, topicResult(tr.Name, tr.ErrorCode, tr.ErrorMessage))
		if tr.ErrorCode == 0 {
			changed = append(changed, tr.Name)
		}
	}
	a.local.Kick()
	if status == fsm.TopicActive || len(changed) == 0 {
		return op
	}
	// Paused and stopped topics: wait until no sidecar appends to them any
	// more, so that a stopped topic is never written by a sidecar once it
	// is writable for everyone.
	if err := a.waitReleased(ctx, mirror, changed); err != nil {
		a.log.Warn("topics still driven by a sidecar after the status change", zap.Strings("topics", changed), zap.Error(err))
	}
	var abortErr error
	if status == fsm.TopicStopped {
		// Open destination transactions replaying source transactions
		// end with ABORT markers (DESIGN D9), before the boundary is
		// recorded, so that read_committed consumers are not blocked.
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		aborted, err := fetcher.AbortTransactions(actx, a.destCl, mirror, changed)
		cancel()
		if len(aborted) > 0 {
			a.log.Info("aborted open destination transactions of stopped topics", zap.String("mirror", mirror), zap.Strings("transactional-ids", aborted))
		}
		if err != nil {
			a.log.Error("could not abort the open destination transactions of stopped topics", zap.String("mirror", mirror), zap.Error(err))
			abortErr = err
		}
	}
	var changedTopics []*fsm.MirrorTopic
	st = a.ctl.State()
	for _, name := range changed {
		if t := st.Topics[name]; t != nil {
			changedTopics = append(changedTopics, t)
		}
	}
	// Finish: the partitions rest in PAUSED or STOPPED from here.
	boundary := status.Resting()
	a.writer.persistBoundary(ctx, mirror, changedTopics, boundary)
	if status == fsm.TopicStopped {
		// One last group offset sync while the source is reachable
		// (DESIGN D9), after the appends ended, so the destination high
		// watermarks are final; bounded, and never blocks the failover.
		a.finalGroupSync(ctx, st.Mirrors[mirror], changedTopics)
		for i, tr := range op.topics {
			if tr.ErrorCode != 0 {
				continue
			}
			if abortErr != nil {
				op.topics[i] = topicResult(tr.Name, kerr.UnknownServerError.Code,
					fmt.Sprintf("topic %s is stopped but its open replayed transactions could not all be checked and aborted: %v; "+
						"read_committed consumers wait until the destination's transaction timeout aborts them", tr.Name, abortErr))
			}
			t := st.Topics[tr.Name]
			if t == nil || len(t.OwnedACLs) == 0 {
				continue
			}
			if err := a.dest.Unprotect(ctx, t.OwnedACLs); err != nil {
				op.topics[i] = topicResult(tr.Name, kerr.UnknownServerError.Code,
					fmt.Sprintf("topic %s is stopped but its read-only ACLs could not be removed: %v; retry --stop", tr.Name, err))
				continue
			}
			if _, err := applyChecked(ctx, a.ctl, fsm.RecordACLs{Topic: tr.Name}); err != nil {
				a.log.Error("could not record the removal of read-only ACLs", zap.String("topic", tr.Name), zap.Error(err))
			}
			a.log.Info("stopped mirror topic: writable now", zap.String("mirror", mirror), zap.String("topic", tr.Name))
		}
	}
	return op
}

// waitReleased polls every reachable sidecar until none reports a partition
// of topics, or ctx ends. Unreachable sidecars are skipped: on restart they
// read the new status before driving anything.
func (a *admin) waitReleased(ctx context.Context, mirror string, topics []string) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		busy := false
		rows, _ := a.gatherRows(wctx, []string{mirror}, a.ctl.State())
		for p := range rows {
			if slices.Contains(topics, p.Topic) {
				busy = true
				break
			}
		}
		if !busy {
			return nil
		}
		select {
		case <-wctx.Done():
			return wctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (a *admin) stopTopics(ctx context.Context, r *protocol.StopMirrorTopicsRequest) protocol.Response {
	patterns := slices.Clone(r.TopicPatterns)
	if len(patterns) == 0 {
		patterns = slices.Clone(r.Patterns)
	}
	for _, t := range r.Topics {
		patterns = append(patterns, t.TopicName)
	}
	op := a.changeTopics(ctx, r.MirrorName, patterns, fsm.TopicStopped)
	return &protocol.StopMirrorTopicsResponse{ErrorCode: op.code, ErrorMessage: op.message, MirrorName: r.MirrorName, Topics: op.topics}
}

func (a *admin) pauseTopics(ctx context.Context, r *protocol.PauseMirrorTopicsRequest) protocol.Response {
	patterns := slices.Clone(r.TopicPatterns)
	for _, t := range r.Topics {
		patterns = append(patterns, t.TopicName)
	}
	op := a.changeTopics(ctx, r.MirrorName, patterns, fsm.TopicPaused)
	return &protocol.PauseMirrorTopicsResponse{ErrorCode: op.code, ErrorMessage: op.message, MirrorName: r.MirrorName, Topics: op.topics}
}

func (a *admin) resumeTopics(ctx context.Context, r *protocol.ResumeMirrorTopicsRequest) protocol.Response {
	patterns := slices.Clone(r.TopicPatterns)
	for _, t := range r.Topics {
		patterns = append(patterns, t.TopicName)
	}
	op := a.changeTopics(ctx, r.MirrorName, patterns, fsm.TopicActive)
	return &protocol.ResumeMirrorTopicsResponse{ErrorCode: op.code, ErrorMessage: op.message, MirrorName: r.MirrorName, Topics: op.topics}
}

// deleteMirror handles DeleteClusterMirror: the controller refuses unless
// the mirror is empty or all its topics are stopped.
func (a *admin) deleteMirror(ctx context.Context, r *protocol.DeleteClusterMirrorRequest) protocol.Response {
	resp := &protocol.DeleteClusterMirrorResponse{}
	topics := a.ctl.State().TopicsOf(r.MirrorName)
	res, err := a.ctl.Apply(ctx, fsm.DeleteMirror{Name: r.MirrorName})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strPtr(err.Error())
		return resp
	}
	if res.ErrorCode != 0 {
		resp.ErrorCode, resp.ErrorMessage = res.ErrorCode, strPtr(res.ErrorMessage)
		return resp
	}
	if a.coord != nil {
		if err := a.coord.tombstone(ctx, r.MirrorName, topics); err != nil {
			a.log.Warn("could not tombstone the deleted mirror's states in __mirror_state", zap.String("mirror", r.MirrorName), zap.Error(err))
		}
	}
	a.log.Info("deleted mirror", zap.String("mirror", r.MirrorName))
	a.local.Kick()
	return resp
}

// finalGroupSync runs one last group offset sync for topics being stopped
// (DESIGN D9), bounded by stopGroupSyncTimeout. A source that cannot be
// reached is logged, never an error: failover must not wait for it.
func (a *admin) finalGroupSync(ctx context.Context, m *fsm.Mirror, stopped []*fsm.MirrorTopic) {
	if m == nil || m.SyncFault != "" || len(stopped) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, stopGroupSyncTimeout)
	defer cancel()
	log := a.log.Named("metasync").With(zap.String("mirror", m.Name))
	src, err := newSourceClient(a.dial, sourceConfig(m.Config))
	if err != nil {
		log.Warn("no last group offset sync before the stop", zap.Error(err))
		return
	}
	defer src.Close()
	topics := map[string]*fsm.MirrorTopic{}
	for _, t := range stopped {
		if t.SyncFault == "" {
			topics[t.Name] = t
		}
	}
	maps, err := offsetMapsOf(ctx, a.writer, m)
	if err != nil {
		log.Warn("no last group offset sync before the stop", zap.Error(err))
		return
	}
	n, err := syncGroupOffsets(ctx, log, m, kadm.NewClient(src), kadm.NewClient(a.destCl), topics, src, maps)
	if err != nil {
		log.Warn("last group offset sync before the stop failed (the stop goes on)", zap.Int("offsets-committed", n), zap.Error(err))
		return
	}
	log.Info("last group offset sync before the stop", zap.Int("offsets-committed", n))
}

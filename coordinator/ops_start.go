package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
)

// startRequest is a start of topics of a mirror: from the admin endpoint
// (StartMirrorTopics) or from topic discovery.
type startRequest struct {
	mirror   string
	patterns []string // names and regexes of source topics
	include  []string // patterns added to mirror.topics.include
	exclude  []string // patterns to skip, added to mirror.topics.exclude
	reseed   bool
}

// startResult is the outcome of a start: the top-level error, a result
// per topic, and the divergent records a re-seed copied.
type startResult struct {
	topicOp
	reseeded []protocol.ReseededTopic
}

// startTopics handles StartMirrorTopics (KIP-1279 §4.2): see start.
func (a *admin) startTopics(ctx context.Context, r *protocol.StartMirrorTopicsRequest) protocol.Response {
	patterns := append([]string(nil), r.TopicPatterns...)
	for _, t := range r.Topics {
		patterns = append(patterns, t.TopicName)
	}
	res := a.start(ctx, startRequest{mirror: r.MirrorName, patterns: patterns, include: r.IncludePatterns, exclude: r.ExcludePatterns, reseed: r.Reseed})
	return &protocol.StartMirrorTopicsResponse{ErrorCode: res.code, ErrorMessage: res.message, MirrorName: r.MirrorName,
		Topics: res.topics, Reseeded: res.reseeded}
}

// start starts topics of a mirror (KIP-1279 §4.2, DESIGN D16): it
// expands the given names and regexes against the source's topics, creates
// each destination topic with the source's partition count and the configs
// of D3 (or accepts an existing one with the same partition count that is
// empty or holds a prefix of the source's log: failback, D9),
// makes it read-only (D4), and assigns it to the mirror through raft.
// A topic whose destination log diverged from the source's is assigned with
// its diverged partitions recorded: FAILED, not driven, and reported as a
// per-topic error. With reseed such topics are re-seeded (reseed.go) and
// started; reseed on a topic that did not diverge is refused.
// Every topic gets its own result; one bad topic does not fail the others.
func (a *admin) start(ctx context.Context, req startRequest) startResult {
	var out startResult
	if req.reseed {
		// Copying the diverged records can take longer than an admin
		// request; once a copy began, the re-seed must not be cut short
		// between the deletion and the start, except by a shutdown
		// (reseed.go).
		var cancel context.CancelFunc
		ctx, cancel = reseedContext(ctx)
		defer cancel()
	}
	fail := func(code int16, format string, args ...any) startResult {
		out.code, out.message = code, strPtr(fmt.Sprintf(format, args...))
		return out
	}
	st := a.ctl.State()
	m, ok := st.Mirrors[req.mirror]
	if !ok {
		return fail(kerr.ResourceNotFound.Code, "mirror %s does not exist: create it first with --create", req.mirror)
	}
	patterns := req.patterns
	if len(patterns) == 0 {
		return fail(kerr.InvalidRequest.Code, "no topics given: name the topics to start (names or regexes)")
	}
	for _, p := range append(append([]string(nil), patterns...), req.exclude...) {
		if _, err := compilePatterns([]string{p}); err != nil {
			return fail(kerr.InvalidRequest.Code, "%v", err)
		}
	}
	unprotected := mirrorSetting(m, ReadOnlyEnforcementKey) == "none"
	rf, _ := strconv.Atoi(mirrorSetting(m, ReplicationFactorKey))

	src, err := newSourceClient(a.dial, sourceConfig(m.Config))
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "mirror %s config: %v", m.Name, err)
	}
	defer src.Close()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var (
		topics            []SourceTopic
		matched           []SourceTopic
		missing           []string
		listErr, matchErr error
	)
	// A topic created a moment ago may not be in the metadata of every
	// source broker yet: ask again before answering that it is missing.
	askAgain(sctx, func() bool {
		if topics, listErr = sourceTopics(sctx, src); listErr != nil {
			return true
		}
		matched, missing, matchErr = expandTopics(topics, patterns, req.exclude)
		return matchErr != nil || (len(matched) > 0 && len(missing) == 0)
	})
	if listErr != nil {
		return fail(kerr.BrokerNotAvailable.Code, "cannot list the topics of the source cluster at %s: %v", m.Config[fsm.BootstrapServersKey], listErr)
	}
	if matchErr != nil {
		return fail(kerr.InvalidRequest.Code, "%v", matchErr)
	}
	fix, err := fixShadowing(st, m, topics, req.include, req.exclude)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	if len(matched) == 0 && len(missing) == 0 {
		if !slices.ContainsFunc(req.include, func(p string) bool { return !isLiteral(p) }) {
			return fail(kerr.InvalidRequest.Code, "no source topic matches %s (after excluding %s)",
				strings.Join(patterns, ","), strings.Join(req.exclude, ","))
		}
		// A pattern for topics still to come: record it, discovery
		// starts them as they appear.
		return a.recordPatterns(ctx, m.Name, req, fix)
	}
	if !unprotected && len(matched) > 0 {
		if err := a.dest.CheckAuthorizer(ctx, matched[0].Name); err != nil {
			if errors.Is(err, ErrNoAuthorizer) {
				return fail(kerr.SecurityDisabled.Code, "%v", err)
			}
			return fail(kerr.UnknownServerError.Code, "%v", err)
		}
	}

	results := map[string]protocol.MirrorTopicResult{}
	order := make([]string, 0, len(matched)+len(missing))
	var start []fsm.StartTopic
	var restart, undiverge []string
	divergedMsg := map[string]string{}
	owned := map[string][]fsm.ACL{}
	failed := a.failedTopics(ctx, st, m.Name, matched)
	for _, t := range matched {
		order = append(order, t.Name)
		prep, err := a.prepareTopic(ctx, st, m, src, t, int16(rf), unprotected, owned, failed, req.reseed)
		if prep.copied != nil {
			out.reseeded = append(out.reseeded, *prep.copied)
		}
		if err != nil {
			if errors.Is(err, errRestart) {
				restart = append(restart, t.Name)
				continue
			}
			results[t.Name] = topicError(t.Name, err)
			continue
		}
		if prep.resolved {
			undiverge = append(undiverge, t.Name)
			continue
		}
		if len(prep.diverged) > 0 {
			divergedMsg[t.Name] = divergenceMessage(t.Name, prep.diverged, true)
		}
		start = append(start, fsm.StartTopic{Name: t.Name, Partitions: t.Partitions, SourceTopicID: t.ID, Unprotected: unprotected, Diverged: prep.diverged})
	}
	for _, name := range missing {
		order = append(order, name)
		results[name] = topicResult(name, kerr.UnknownTopicOrPartition.Code,
			fmt.Sprintf("topic %s does not exist on the source cluster %s", name, m.SourceClusterID))
	}
	if len(start) > 0 {
		res, err := applyChecked(ctx, a.ctl, fsm.StartTopics{Mirror: m.Name, Topics: start, AddInclude: req.include,
			AddExclude: req.exclude, NowMs: a.now().UnixMilli()})
		if err != nil {
			a.undoACLs(ctx, owned)
			return fail(kerr.UnknownServerError.Code, "%v", err)
		}
		if err := a.applyShadowFix(ctx, m.Name, fix); err != nil {
			out.message = strPtr(fmt.Sprintf("%s; the exclude patterns were not changed: %v", fix.note, err))
		} else if fix.note != "" {
			out.message = strPtr(fix.note)
		}
		for _, tr := range res.Topics {
			results[tr.Name] = topicResult(tr.Name, tr.ErrorCode, tr.ErrorMessage)
			acls := owned[tr.Name]
			if tr.ErrorCode != 0 {
				a.undoACLs(ctx, map[string][]fsm.ACL{tr.Name: acls})
				continue
			}
			if len(acls) > 0 {
				if _, err := applyChecked(ctx, a.ctl, fsm.RecordACLs{Topic: tr.Name, ACLs: acls}); err != nil {
					a.log.Error("could not record the read-only ACLs of a mirror topic", zap.String("topic", tr.Name), zap.Error(err))
				}
			}
			if msg := divergedMsg[tr.Name]; msg != "" {
				// Started, but no partition is driven until the re-seed:
				// the operator must act, so the topic reports the error.
				results[tr.Name] = topicResult(tr.Name, kerr.InvalidRequest.Code, msg)
				a.log.Warn("started a mirror topic whose partitions diverged: FAILED until re-seeded", zap.String("mirror", m.Name),
					zap.String("topic", tr.Name), zap.String("reason", msg))
				continue
			}
			a.log.Info("started mirror topic", zap.String("mirror", m.Name), zap.String("topic", tr.Name))
		}
	}
	for _, name := range undiverge {
		if _, err := applyChecked(ctx, a.ctl, fsm.SetDiverged{Mirror: m.Name, Topic: name, NowMs: a.now().UnixMilli()}); err != nil {
			results[name] = topicError(name, err)
			continue
		}
		results[name] = topicResult(name, 0, "")
		a.log.Info("mirror topic no longer diverged: mirroring it", zap.String("mirror", m.Name), zap.String("topic", name))
	}
	if len(restart) > 0 {
		res, err := applyChecked(ctx, a.ctl, fsm.RestartTopics{Mirror: m.Name, Topics: restart, NowMs: a.now().UnixMilli()})
		for i, name := range restart {
			switch {
			case err != nil:
				results[name] = topicError(name, err)
			default:
				results[name] = topicResult(name, res.Topics[i].ErrorCode, res.Topics[i].ErrorMessage)
				a.log.Info("restarting the FAILED partitions of a mirror topic", zap.String("mirror", m.Name), zap.String("topic", name))
			}
		}
	}
	for _, name := range order {
		out.topics = append(out.topics, results[name])
	}
	a.local.Kick()
	return out
}

// errRestart marks a topic that is active in the mirror with FAILED
// partitions: --start restarts them (DESIGN D16).
var errRestart = errors.New("coordinator: restart the failed partitions")

// failedTopics returns the topics among matched that are active in the
// mirror and have a FAILED partition somewhere.
func (a *admin) failedTopics(ctx context.Context, st *fsm.State, mirror string, matched []SourceTopic) map[string]bool {
	out := map[string]bool{}
	active := false
	for _, t := range matched {
		if cur, ok := st.Topics[t.Name]; ok && cur.Mirror == mirror && cur.Status == fsm.TopicActive {
			active = true
		}
	}
	if !active {
		return out
	}
	rows, _ := a.gatherRows(ctx, []string{mirror}, st)
	for p, d := range rows {
		if d.State == fetcher.StateFailed.String() {
			out[p.Topic] = true
		}
	}
	return out
}

// prepared is what prepareTopic found out about one topic.
type prepared struct {
	diverged []fsm.Divergence        // start the topic with these partitions diverged (DESIGN D9)
	resolved bool                    // an active topic with diverged partitions may be mirrored now
	copied   *protocol.ReseededTopic // the divergent records a re-seed copied
}

// prepareTopic checks one topic against the controller state and the
// destination, creates the destination topic when absent (or re-seeds it,
// reseed.go) and protects it. ACLs it creates are added to owned.
func (a *admin) prepareTopic(ctx context.Context, st *fsm.State, m *fsm.Mirror, src *kgo.Client, t SourceTopic, rf int16, unprotected bool,
	owned map[string][]fsm.ACL, failed map[string]bool, reseed bool,
) (prepared, error) {
	var out prepared
	activeDiverged := false
	if cur, ok := st.Topics[t.Name]; ok && cur.Status != fsm.TopicStopped {
		switch {
		case cur.Mirror != m.Name:
			return out, topicErr(kerr.InvalidRequest, "topic %s is already in mirror %s (%s): stop it there first", t.Name, cur.Mirror, cur.Status)
		case cur.Status == fsm.TopicActive && len(cur.Diverged) > 0:
			activeDiverged = true
		case reseed:
			return out, topicErr(kerr.InvalidRequest, "topic %s is already %s in mirror %s and has no diverged partitions: "+
				"--reseed only re-seeds a topic whose log on this cluster diverged from the source's", t.Name, cur.Status, m.Name)
		case cur.Status == fsm.TopicActive && failed[t.Name]:
			return out, errRestart
		default:
			return out, topicErr(kerr.InvalidRequest, "topic %s is already %s in mirror %s", t.Name, cur.Status, m.Name)
		}
	}
	var protection []fsm.ACL
	if !unprotected && !activeDiverged {
		// Decided before the destination topic is created: a topic whose
		// protection cannot be decided is refused with nothing created.
		var err error
		if protection, err = a.dest.ProtectionFor(ctx, t.Name); err != nil {
			return out, err
		}
	}
	diverged, copied, err := a.prepareDestination(ctx, src, t, rf, reseed)
	out.copied = copied
	if err != nil {
		return out, err
	}
	if activeDiverged {
		if len(diverged) > 0 {
			if cur := st.Topics[t.Name]; !slices.Equal(cur.Diverged, diverged) {
				if _, err := applyChecked(ctx, a.ctl, fsm.SetDiverged{Mirror: m.Name, Topic: t.Name, Diverged: diverged, NowMs: a.now().UnixMilli()}); err != nil {
					a.log.Warn("could not record the divergence of a mirror topic", zap.String("topic", t.Name), zap.Error(err))
				}
			}
			return out, topicErr(kerr.InvalidRequest, "%s", divergenceMessage(t.Name, diverged, true))
		}
		out.resolved = true // its ACLs are in place since its start
		return out, nil
	}
	out.diverged = diverged
	if unprotected {
		return out, nil
	}
	if err := a.dest.ApplyProtection(ctx, protection); err != nil {
		return out, err
	}
	owned[t.Name] = protection
	return out, nil
}

// prepareDestination makes the destination topic ready to mirror t into:
// it creates it when absent, accepts it when it is empty or holds a prefix
// of the source's log (failback, DESIGN D9), and otherwise returns the
// diverged partitions, or with reseed re-seeds the topic.
func (a *admin) prepareDestination(ctx context.Context, src *kgo.Client, t SourceTopic, rf int16, reseed bool) ([]fsm.Divergence, *protocol.ReseededTopic, error) {
	nothing := func(why string) error {
		return topicErr(kerr.InvalidRequest, "destination topic %s %s: nothing to re-seed; start it without --reseed", t.Name, why)
	}
	ex, err := a.dest.DescribeTopic(ctx, t.Name)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case ex == nil:
		if reseed {
			return nil, nil, nothing("does not exist")
		}
		overrides, maxBytes, err := listedTopicConfigs(ctx, src, t.Name)
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, a.dest.CreateTopic(ctx, t.Name, t.Partitions, rf, MirrorTopicConfigs(overrides, maxBytes))
	case ex.Partitions != t.Partitions:
		return nil, nil, topicErr(kerr.InvalidPartitions, "destination topic %s already exists with %d partitions, the source topic has %d: delete it or start another topic",
			t.Name, ex.Partitions, t.Partitions)
	case ex.Empty:
		if reseed {
			return nil, nil, nothing("is empty")
		}
		return nil, nil, nil
	}
	found, dl, err := a.findDivergences(ctx, src, t.Name, t.Partitions)
	if err != nil {
		return nil, nil, err
	}
	if len(found) == 0 {
		if reseed {
			return nil, nil, nothing("holds a prefix of the source topic's log (it has not diverged)")
		}
		a.log.Info("destination topic holds a prefix of the source topic: mirroring resumes from its log end offset", zap.String("topic", t.Name))
		return nil, nil, nil
	}
	if !reseed {
		return found, nil, nil
	}
	copied, err := a.reseed(ctx, src, t, rf, found, dl)
	return nil, copied, err
}

// undoACLs deletes ACLs created for topics that did not start.
func (a *admin) undoACLs(ctx context.Context, owned map[string][]fsm.ACL) {
	for topic, acls := range owned {
		if err := a.dest.Unprotect(ctx, acls); err != nil {
			a.log.Error("could not remove the ACLs of a topic that did not start", zap.String("topic", topic), zap.Error(err))
		}
	}
}

// topicError turns an error into a per-topic result.
func topicError(name string, err error) protocol.MirrorTopicResult {
	var ke *kerr.Error
	code := kerr.UnknownServerError.Code
	if errors.As(err, &ke) {
		code = ke.Code
	}
	if errors.Is(err, ErrNoAuthorizer) {
		code = kerr.SecurityDisabled.Code
	}
	return topicResult(name, code, err.Error())
}

func topicResult(name string, code int16, msg string) protocol.MirrorTopicResult {
	r := protocol.MirrorTopicResult{Name: name, ErrorCode: code}
	if code != 0 && msg != "" {
		r.ErrorMessage = strPtr(msg)
	}
	return r
}

// codedError is an operator-facing message with the Kafka error code it
// travels with; errors.As finds the *kerr.Error.
type codedError struct {
	code *kerr.Error
	msg  string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.code }

// topicErr returns a codedError.
func topicErr(code *kerr.Error, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// recordPatterns answers a start whose regexes match no source topic yet:
// its include and exclude patterns are recorded (and the exclude patterns
// that shadow them narrowed, ops_patterns.go), so that discovery starts the
// topics when they appear; the answer says so.
func (a *admin) recordPatterns(ctx context.Context, mirror string, req startRequest, fix shadowFix) startResult {
	var out startResult
	add := slices.Clone(req.exclude)
	for _, p := range fix.add {
		if !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	if _, err := applyChecked(ctx, a.ctl, fsm.AlterMirrorPatterns{Name: mirror, AddInclude: req.include, AddExclude: add,
		RemoveExclude: fix.remove, NowMs: a.now().UnixMilli()}); err != nil {
		out.code, out.message = kerr.UnknownServerError.Code, strPtr(err.Error())
		return out
	}
	note := fmt.Sprintf("no source topic matches %s yet: kept in %s, discovery starts matching topics as they appear",
		strings.Join(req.patterns, ","), fsm.IncludeKey)
	if fix.note != "" {
		note += "; " + fix.note
		a.log.Warn("start: narrowed exclude patterns that shadowed its include patterns", zap.String("mirror", mirror), zap.String("change", fix.note))
	}
	a.log.Info("start: recorded include patterns that match no source topic yet", zap.String("mirror", mirror), zap.Strings("include", req.include))
	out.message = strPtr(note)
	return out
}

// applyShadowFix removes the exclude patterns that shadowed a start's
// include patterns and adds the literals that replace them.
func (a *admin) applyShadowFix(ctx context.Context, mirror string, fix shadowFix) error {
	if len(fix.remove) == 0 {
		return nil
	}
	if _, err := applyChecked(ctx, a.ctl, fsm.AlterMirrorPatterns{Name: mirror, AddExclude: fix.add, RemoveExclude: fix.remove,
		NowMs: a.now().UnixMilli()}); err != nil {
		return err
	}
	a.log.Warn("start: narrowed exclude patterns that shadowed its include patterns", zap.String("mirror", mirror), zap.String("change", fix.note))
	return nil
}

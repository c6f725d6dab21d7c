package coordinator

import (
	"context"
	"regexp"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// discoveryCheckInterval is how often the discovery loop looks for mirrors
// whose refresh interval has passed.
const discoveryCheckInterval = time.Second

// runDiscovery runs discover until ctx ends. Service.Run runs it.
func (ms *metaSync) runDiscovery(ctx context.Context) {
	last := map[string]time.Time{} // mirror -> last discovery
	every(ctx, discoveryCheckInterval, func() { ms.discover(ctx, last) })
}

// every calls fn every interval until ctx ends; the first call is one
// interval after the start.
func every(ctx context.Context, interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fn()
	}
}

// discover starts the source topics that match a mirror's include patterns
// and none of its exclude patterns and are not mirrored yet (KIP-1279 §1.3).
// Only the raft leader runs it, once per mirror per
// mirror.metadata.refresh.interval.ms, for every due mirror at once: a
// mirror whose source does not answer does not delay the others.
func (ms *metaSync) discover(ctx context.Context, last map[string]time.Time) {
	if !ms.ctl.IsLeader() {
		return
	}
	st := ms.ctl.State()
	now := ms.now()
	var wg sync.WaitGroup
	for _, name := range st.MirrorNames() {
		m := st.Mirrors[name]
		if len(m.Include) == 0 || m.SyncFault != "" {
			continue // nothing to discover, or the source is another cluster
		}
		if !refreshDue(m, last, now) {
			continue
		}
		wg.Go(func() {
			if err := ms.discoverMirror(ctx, st, m); err != nil {
				ms.log.Warn("topic discovery", zap.String("mirror", name), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

func (ms *metaSync) discoverMirror(ctx context.Context, st *fsm.State, m *fsm.Mirror) error {
	src, err := newSourceClient(ms.dial, sourceConfig(m.Config))
	if err != nil {
		return err
	}
	defer src.Close()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	topics, err := sourceTopics(sctx, src)
	if err != nil {
		return err
	}
	matched, _, err := expandTopics(topics, m.Include, m.Exclude)
	if err != nil {
		return err
	}
	if dead := shadowedIncludes(m, topics); len(dead) > 0 {
		ms.log.Warn("topic discovery: include patterns that exclude patterns shadow start nothing: "+
			"--start the pattern again (it narrows the shadowing exclude patterns) or --alter "+fsm.ExcludeKey,
			zap.String("mirror", m.Name), zap.Strings("include", dead), zap.Strings("exclude", m.Exclude))
	}
	var fresh []string
	for _, t := range matched {
		if _, known := st.Topics[t.Name]; !known {
			fresh = append(fresh, regexp.QuoteMeta(t.Name))
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	ms.log.Info("discovered new source topics", zap.String("mirror", m.Name), zap.Strings("topics", fresh))
	res := ms.starter.start(ctx, startRequest{mirror: m.Name, patterns: fresh})
	if res.code != 0 {
		ms.log.Warn("could not start discovered topics", zap.String("mirror", m.Name), zap.String("error", deref(res.message)))
	}
	for _, tr := range res.topics {
		if tr.ErrorCode != 0 {
			ms.log.Warn("could not start a discovered topic", zap.String("mirror", m.Name), zap.String("topic", tr.Name), zap.String("error", deref(tr.ErrorMessage)))
		}
	}
	return nil
}

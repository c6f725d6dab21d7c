package coordinator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

// Keys of the consumer group offset sync.
const (
	// GroupsIncludeKey is mirror.groups.include: comma-separated regular
	// expressions of the consumer groups whose offsets are synced (default
	// ".*", all).
	GroupsIncludeKey = "mirror.groups.include"
	// GroupsExcludeKey is mirror.groups.exclude: groups matching one of
	// these are never synced (default none).
	GroupsExcludeKey = "mirror.groups.exclude"
)

// stopGroupSyncTimeout bounds the last group sync of a stop (DESIGN D9).
const stopGroupSyncTimeout = 10 * time.Second

// groupFilter tells which consumer groups a mirror syncs.
type groupFilter struct{ include, exclude []*regexp.Regexp }

func newGroupFilter(m *Mirror) (groupFilter, error) {
	inc, err := compilePatterns(SplitPatterns(mirrorSetting(m, GroupsIncludeKey)))
	if err != nil {
		return groupFilter{}, fmt.Errorf("%s: %w", GroupsIncludeKey, err)
	}
	exc, err := compilePatterns(SplitPatterns(mirrorSetting(m, GroupsExcludeKey)))
	if err != nil {
		return groupFilter{}, fmt.Errorf("%s: %w", GroupsExcludeKey, err)
	}
	return groupFilter{include: inc, exclude: exc}, nil
}

func (f groupFilter) match(group string) bool {
	return matchAny(f.include, group) && !matchAny(f.exclude, group)
}

// groupWritable reports whether the sync may commit offsets for a group in
// the given destination state: only when nobody consumes with it there
// (absent, Empty or Dead). A group with members commits its own offsets.
func groupWritable(state string, listed bool) bool {
	return !listed || state == "Empty" || state == "Dead"
}

// groupOffsetsToCommit picks, from a group's source offsets, those of the
// given topics' partitions, clamped to the destination high watermarks, with
// committed leader epoch -1 (destination epochs differ from the source's),
// dropping those the destination already has.
func groupOffsetsToCommit(source kadm.OffsetResponses, topics map[string]*MirrorTopic, hw map[string]map[int32]int64, dest kadm.OffsetResponses) kadm.Offsets {
	out := kadm.Offsets{}
	source.Each(func(o kadm.OffsetResponse) {
		t := topics[o.Topic]
		if o.Err != nil || t == nil || o.Partition >= t.Partitions || o.At < 0 {
			return
		}
		end, ok := hw[o.Topic][o.Partition]
		if !ok {
			return // destination high watermark unknown: next round
		}
		at := min(o.At, end)
		if d, ok := dest.Lookup(o.Topic, o.Partition); ok && d.Err == nil && d.At == at {
			return
		}
		out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1, Metadata: o.Metadata})
	})
	return out
}

// syncGroups copies the committed offsets of the mirror's consumer groups.
func (r *metaSyncRound) syncGroups(ctx context.Context) (int, error) {
	return syncGroupOffsets(ctx, r.log, r.mirror, r.srcAdm, r.dstAdm, r.topics)
}

// syncGroupOffsets copies, for the groups the mirror syncs, the source's
// committed offsets on topics to the destination (DESIGN D10): only for
// groups without active members on the destination, clamped to the
// destination high watermark, committed leader epoch -1. Offsets are
// identical on both sides, so they need no translation. It returns the
// number of partition offsets committed.
func syncGroupOffsets(ctx context.Context, log *zap.Logger, m *Mirror, src, dst *kadm.Client, topics map[string]*MirrorTopic) (int, error) {
	if len(topics) == 0 {
		return 0, nil
	}
	filter, err := newGroupFilter(m)
	if err != nil {
		return 0, err
	}
	listed, err := src.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("list source groups: %w", err)
	}
	var groups []string
	for _, g := range listed.Sorted() {
		if g.GroupType == "share" || g.GroupType == "streams" || !filter.match(g.Group) {
			continue
		}
		groups = append(groups, g.Group)
	}
	if len(groups) == 0 {
		return 0, nil
	}
	destGroups, err := dst.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("list destination groups: %w", err)
	}
	var writable []string
	for _, g := range groups {
		dg, ok := destGroups[g]
		if groupWritable(dg.State, ok) {
			writable = append(writable, g)
		}
	}
	if len(writable) == 0 {
		return 0, nil
	}
	names := sortedKeys(topics)
	ends, err := dst.ListEndOffsets(ctx, names...)
	if err != nil && len(ends) == 0 {
		return 0, fmt.Errorf("destination high watermarks: %w", err)
	}
	hw := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if hw[o.Topic] == nil {
			hw[o.Topic] = map[int32]int64{}
		}
		hw[o.Topic][o.Partition] = o.Offset
	})
	srcOffsets := src.FetchManyOffsets(ctx, writable...)
	dstOffsets := dst.FetchManyOffsets(ctx, writable...)
	items := 0
	var errs []error
	for _, g := range writable {
		so := srcOffsets[g]
		if so.Err != nil {
			errs = append(errs, fmt.Errorf("offsets of source group %s: %w", g, so.Err))
			continue
		}
		commit := groupOffsetsToCommit(so.Fetched, topics, hw, dstOffsets[g].Fetched)
		if len(commit) == 0 {
			continue
		}
		resp, err := dst.CommitOffsets(ctx, g, commit)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			// A consumer that joined meanwhile makes the commit fail
			// (UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS): it owns the
			// group's offsets now.
			errs = append(errs, fmt.Errorf("commit offsets of group %s on the destination: %w", g, err))
			continue
		}
		n := 0
		commit.Each(func(kadm.Offset) { n++ })
		log.Debug("synced group offsets", zap.String("group", g), zap.Int("partitions", n))
		items += n
	}
	return items, errors.Join(errs...)
}

// finalGroupSync runs one last group offset sync for topics being stopped
// (DESIGN D9), bounded by stopGroupSyncTimeout. A source that cannot be
// reached is logged, never an error: failover must not wait for it.
func (s *Service) finalGroupSync(ctx context.Context, m *Mirror, stopped []*MirrorTopic) {
	if m == nil || m.SyncFault != "" || len(stopped) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, stopGroupSyncTimeout)
	defer cancel()
	log := s.log.Named("metasync").With(zap.String("mirror", m.Name))
	src, err := s.sourceClient(sourceConfig(m.Config))
	if err != nil {
		log.Warn("no last group offset sync before the stop", zap.Error(err))
		return
	}
	defer src.Close()
	topics := map[string]*MirrorTopic{}
	for _, t := range stopped {
		if t.SyncFault == "" {
			topics[t.Name] = t
		}
	}
	n, err := syncGroupOffsets(ctx, log, m, kadm.NewClient(src), kadm.NewClient(s.cfg.DestClient), topics)
	if err != nil {
		log.Warn("last group offset sync before the stop failed (the stop goes on)", zap.Int("offsets-committed", n), zap.Error(err))
		return
	}
	log.Info("last group offset sync before the stop", zap.Int("offsets-committed", n))
}

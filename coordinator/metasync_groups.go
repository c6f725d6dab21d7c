package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
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
type groupFilter struct{ include, exclude []*topicPattern }

func newGroupFilter(m *fsm.Mirror) (groupFilter, error) {
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

// liveFunc maps a committed source offset at of a partition whose
// destination high watermark is end to the destination offset to commit
// before the clamp to end: the first live record at or after it for
// compacted topics (see fetcher.NextLiveOffset), the translated offset in
// translate mode, in exact mode the live record's offset translated with
// the partition's offset map if it has one (repeated markers), at itself
// where none applies.
type liveFunc func(topic string, partition int32, at, end int64) int64

// groupOffsetsToCommit picks, from a group's source offsets, those of the
// given topics' partitions, mapped by live (if not nil, see liveFunc),
// clamped to the destination high watermarks, with committed leader epoch
// -1 (destination epochs differ from the source's), dropping those the
// destination already has.
func groupOffsetsToCommit(source kadm.OffsetResponses, topics map[string]*fsm.MirrorTopic, hw map[string]map[int32]int64,
	dest kadm.OffsetResponses, live liveFunc) kadm.Offsets {
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
		at := o.At
		if live != nil {
			at = live(o.Topic, o.Partition, at, end)
		}
		at = min(at, end)
		if d, ok := dest.Lookup(o.Topic, o.Partition); ok && d.Err == nil && d.At == at {
			return
		}
		out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1, Metadata: o.Metadata})
	})
	return out
}

// syncGroups copies the committed offsets of the mirror's consumer groups.
func (r *metaSyncRound) syncGroups(ctx context.Context) (int, error) {
	maps, err := offsetMapsOf(ctx, r.ms.states, r.mirror)
	if err != nil {
		return 0, err
	}
	return syncGroupOffsets(ctx, r.log, r.mirror, r.srcAdm, r.dstAdm, r.topics, r.src, maps)
}

// offsetMapsOf returns the offset maps of the mirror's partitions (DESIGN
// D2), read from __mirror_state once: of every partition of a
// translate-mode mirror; of an exact-mode mirror only those of partitions
// whose map is not empty (the shifts of markers a destination transaction
// coordinator wrote twice), nil if none has one.
func offsetMapsOf(ctx context.Context, states stateReader, m *fsm.Mirror) (map[fetcher.Partition][]fetcher.OffsetShift, error) {
	mode := mirrorSetting(m, fsm.OffsetsKey)
	persisted, err := states.readStatesOf(ctx, &protocol.ReadMirrorStatesRequest{MirrorName: m.Name})
	if err != nil {
		return nil, fmt.Errorf("offset maps of mirror %s (mirror.offsets=%s): %w", m.Name, mode, err)
	}
	translate := mode == "translate"
	out := map[fetcher.Partition][]fetcher.OffsetShift{}
	for p := range persisted {
		if om := offsetMapOf(persisted, p); translate || len(om) > 0 {
			out[p] = om
		}
	}
	if !translate && len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// shiftedLive returns a liveFunc for an exact-mode mirror whose partitions
// have offset maps: the source offset that live (nil: the committed one)
// answers, translated with the partition's map where it has one.
func shiftedLive(mirror string, live liveFunc, maps map[fetcher.Partition][]fetcher.OffsetShift) liveFunc {
	return func(topic string, p int32, at, end int64) int64 {
		if live != nil {
			at = live(topic, p, at, end)
		}
		if om, ok := maps[fetcher.Partition{Mirror: mirror, Topic: topic, Partition: p}]; ok {
			at = fetcher.TranslateOffset(om, at)
		}
		return at
	}
}

// compactedLive returns a liveFunc for the compacted topics among names on
// the source of srcCl, nil if there are none. In a compacted topic a
// committed offset may point into a compaction hole: the source's consumer
// resumes at the next live record, while the destination holds fillers
// (copies of that record) there (DESIGN D2), so the offset is moved to the
// live record. Look-ups are remembered for one sync; one that fails leaves
// the offset as it is.
func compactedLive(ctx context.Context, log *zap.Logger, srcCl *kgo.Client, names []string) liveFunc {
	if srcCl == nil || len(names) == 0 {
		return nil
	}
	configs, err := kadm.NewClient(srcCl).DescribeTopicConfigs(ctx, names...)
	if err != nil && len(configs) == 0 {
		log.Debug("topic configs for group offset translation", zap.Error(err))
		return nil
	}
	compacted := map[string]bool{}
	for _, rc := range configs {
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && strings.Contains(c.MaybeValue(), "compact") {
				compacted[rc.Name] = true
			}
		}
	}
	if len(compacted) == 0 {
		return nil
	}
	type key struct {
		topic string
		p     int32
		at    int64
	}
	seen := map[key]int64{}
	return func(topic string, p int32, at, end int64) int64 {
		if !compacted[topic] || at >= end {
			return at
		}
		k := key{topic, p, at}
		if v, ok := seen[k]; ok {
			return v
		}
		v, err := fetcher.NextLiveOffset(ctx, srcCl, topic, p, at)
		if err != nil {
			log.Debug("next live record of a committed offset", zap.String("topic", topic), zap.Int32("partition", p),
				zap.Int64("offset", at), zap.Error(err))
			v = at
		}
		seen[k] = v
		return v
	}
}

// syncGroupOffsets copies, for the groups the mirror syncs, the source's
// committed offsets on topics to the destination (DESIGN D10): only for
// groups without active members on the destination, clamped to the
// destination high watermark, committed leader epoch -1. Offsets are
// identical on both sides, except that, given the source's client srcCl,
// offsets of compacted topics move out of compaction holes (see
// compactedLive), and that they are translated with the partitions' offset
// maps (see offsetMapsOf): every offset of a translate-mode mirror, and of
// an exact-mode mirror those of partitions with a map (a destination
// coordinator wrote a marker twice), after the move out of a hole. It
// returns the number of partition offsets committed.
func syncGroupOffsets(ctx context.Context, log *zap.Logger, m *fsm.Mirror, src, dst *kadm.Client, topics map[string]*fsm.MirrorTopic, srcCl *kgo.Client, maps map[fetcher.Partition][]fetcher.OffsetShift) (int, error) {
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
	var live liveFunc
	switch {
	case mirrorSetting(m, fsm.OffsetsKey) == "translate":
		// No fillers: holes are in the map, and the map translates all.
		live = func(topic string, p int32, at, _ int64) int64 {
			return fetcher.TranslateOffset(maps[fetcher.Partition{Mirror: m.Name, Topic: topic, Partition: p}], at)
		}
	case len(maps) > 0:
		live = shiftedLive(m.Name, compactedLive(ctx, log, srcCl, names), maps)
	default:
		live = compactedLive(ctx, log, srcCl, names)
	}
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
		commit := groupOffsetsToCommit(so.Fetched, topics, hw, dstOffsets[g].Fetched, live)
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

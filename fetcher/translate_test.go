package fetcher

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// memOffsetMaps is an OffsetMaps in memory.
type memOffsetMaps struct {
	mu      sync.Mutex
	maps    map[Partition][]OffsetShift
	loadErr error // LoadOffsetMap fails with it (a coordinator that is away)
}

func (s *memOffsetMaps) LoadOffsetMap(_ context.Context, p Partition) ([]OffsetShift, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return nil, s.loadErr
	}
	return slices.Clone(s.maps[p]), nil
}

func (s *memOffsetMaps) setLoadErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadErr = err
}

func (s *memOffsetMaps) AppendOffsetShifts(_ context.Context, p Partition, shifts []OffsetShift) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maps == nil {
		s.maps = map[Partition][]OffsetShift{}
	}
	s.maps[p] = append(s.maps[p], shifts...)
	return nil
}

func (s *memOffsetMaps) get(p Partition) []OffsetShift {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.maps[p])
}

func TestTranslateOffset(t *testing.T) {
	// Source 0..9 live, 10..19 a hole, 20..29 live, 30 a hole, 31.. live.
	m := []OffsetShift{{20, 10}, {31, 20}}
	for _, tc := range []struct{ src, want int64 }{
		{0, 0}, {9, 9}, {10, 10}, {15, 10}, {19, 10}, {20, 10}, {29, 19}, {30, 20}, {31, 20}, {40, 29},
	} {
		if got := TranslateOffset(m, tc.src); got != tc.want {
			t.Errorf("TranslateOffset(%d) = %d, want %d", tc.src, got, tc.want)
		}
	}
	// A leading gap: the source starts at 100, the destination at 0.
	if got := TranslateOffset([]OffsetShift{{100, 0}}, 50); got != 0 {
		t.Errorf("TranslateOffset below the first shift = %d, want 0", got)
	}
	for _, tc := range []struct{ dst, want int64 }{{0, 0}, {9, 9}, {10, 20}, {19, 29}, {20, 31}, {25, 36}} {
		if got := sourceOffsetOf(m, tc.dst); got != tc.want {
			t.Errorf("sourceOffsetOf(%d) = %d, want %d", tc.dst, got, tc.want)
		}
	}
}

// waitTranslated waits until partition 0 of topic is MIRRORING with lag 0
// against the source's end offset.
func (e *testEnv) waitTranslated(m *Manager, topic string) {
	e.t.Helper()
	testwait.For(e.t, waitTimeout, "the translated partition to catch up", func() bool {
		end := e.offsets(e.srcAdm, false, topic)[0]
		for _, st := range m.Status() {
			if st.Topic == topic && st.Partition.Partition == 0 {
				if st.State == StateFailed {
					e.t.Fatalf("FAILED: %s", st.LastError)
				}
				return st.State == StateMirroring && st.SourceHighWatermark == end && st.Lag == 0
			}
		}
		return false
	})
}

// TestTranslateMode mirrors a compacted source in translate mode: the
// destination holds exactly the source's live records, in order and with
// no fillers, and the offset map translates every source record's offset
// to its destination offset; a restarted Manager resumes from the map.
func TestTranslateMode(t *testing.T) {
	const topic = "translated"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	e.compactSource(topic)
	rng := rand.New(rand.NewPCG(31, 32))
	e.produceOverwrites(rng, topic, 0, 400)
	e.src.Compact()
	if holes, holed := e.sourceHoles(topic); holes == 0 || holed == 0 {
		t.Fatalf("compaction left %d holes, %d batches with holes inside", holes, holed)
	}
	store := &memOffsetMaps{}
	p := Partition{testMirror, topic, 0}
	start := func() *Manager {
		m := e.newManager(OffsetMapStore(store))
		if err := m.SetMirrorSettings(testMirror, MirrorSettings{TranslateOffsets: true}); err != nil {
			t.Fatal(err)
		}
		startAll(t, m, topic, []int32{0})
		return m
	}
	// check: every source record is at the destination offset the map
	// translates its offset to; with exact, the destination holds nothing
	// else (after a restart it also holds records the source compacted
	// away after they were mirrored).
	check := func(exact bool) {
		t.Helper()
		src, dst := e.readAll(e.src, e.srcAdm, topic)[0], e.readAll(e.dst, e.dstAdm, topic)[0]
		if exact && len(src) != len(dst) {
			t.Fatalf("%d source records, %d destination records (translate mode writes no fillers)", len(src), len(dst))
		}
		byOffset := map[int64]*kgo.Record{}
		for _, d := range dst {
			byOffset[d.Offset] = d
		}
		m := store.get(p)
		for _, s := range src {
			at := TranslateOffset(m, s.Offset)
			d := byOffset[at]
			if d == nil || !sameBytes(s.Key, d.Key) || !sameBytes(s.Value, d.Value) || !s.Timestamp.Equal(d.Timestamp) {
				t.Fatalf("source offset %d %q=%q translates to destination offset %d, which holds %v", s.Offset, s.Key, s.Value, at, d)
			}
		}
		t.Logf("%d records, %d shifts, source end %d, destination end %d", len(src), len(m),
			e.offsets(e.srcAdm, false, topic)[0], e.offsets(e.dstAdm, false, topic)[0])
	}
	m := start()
	e.waitTranslated(m, topic)
	check(true)
	if metricValue(t, m.met.fillers.WithLabelValues(testMirror, topic)) != 0 {
		t.Fatal("translate mode wrote fillers")
	}

	// Restart with more overwrites and holes meanwhile.
	sctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := m.Stop(sctx, p); err != nil {
		t.Fatal(err)
	}
	m.Close()
	e.produceOverwrites(rng, topic, 400, 300)
	e.src.Compact()
	m = start()
	e.produceOverwrites(rng, topic, 700, 50)
	time.Sleep(100 * time.Millisecond)
	e.waitTranslated(m, topic)
	check(false)
}

// TestTranslateModeOffsetMapFull checks that a partition whose offset map
// would outgrow its __mirror_state record fails with ErrOffsetMapFull, with
// every shift it did record describing the records it appended.
func TestTranslateModeOffsetMapFull(t *testing.T) {
	const topic = "translated-full"
	defer func(n int) { maxOffsetShifts = n }(maxOffsetShifts)
	maxOffsetShifts = 3
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	e.compactSource(topic)
	rng := rand.New(rand.NewPCG(41, 42))
	e.produceOverwrites(rng, topic, 0, 400)
	e.src.Compact()
	store := &memOffsetMaps{}
	m := e.newManager(OffsetMapStore(store))
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{TranslateOffsets: true}); err != nil {
		t.Fatal(err)
	}
	p := Partition{testMirror, topic, 0}
	startAll(t, m, topic, []int32{0})
	st := waitState(t, m, p, StateFailed)
	if !strings.Contains(st.LastError, "mirror.offsets=exact") || !strings.Contains(st.LastError, "more than the 3") {
		t.Fatalf("failed with %q, want the offset map full, naming mirror.offsets=exact", st.LastError)
	}
	shifts := store.get(p)
	if len(shifts) == 0 || len(shifts) > 3 {
		t.Fatalf("recorded %d shifts, want 1 to 3", len(shifts))
	}
	// What was appended is where the recorded map says.
	src, dst := e.readAll(e.src, e.srcAdm, topic)[0], e.readAll(e.dst, e.dstAdm, topic)[0]
	byOffset := map[int64]*kgo.Record{}
	for _, d := range dst {
		byOffset[d.Offset] = d
	}
	for _, s := range src {
		at := TranslateOffset(shifts, s.Offset)
		if at >= int64(len(dst)) {
			break // not appended
		}
		if d := byOffset[at]; d == nil || !sameBytes(s.Key, d.Key) || !sameBytes(s.Value, d.Value) {
			t.Fatalf("source offset %d translates to destination offset %d, which holds %v", s.Offset, at, d)
		}
	}
}

func TestValidShifts(t *testing.T) {
	m := []OffsetShift{{20, 10}, {31, 20}, {40, 25}}
	for _, tc := range []struct {
		leo  int64
		want int
	}{{5, 0}, {10, 1}, {19, 1}, {20, 2}, {24, 2}, {25, 3}, {99, 3}} {
		if got := validShifts(m, tc.leo); len(got) != tc.want {
			t.Errorf("validShifts(leo %d) keeps %d shifts, want %d", tc.leo, len(got), tc.want)
		}
	}
}

// TestTranslateModeTransactions mirrors a compacted source written with
// transactions in translate mode: every marker lands at the destination
// offset the map translates its source offset to, with the same outcome,
// and the read_committed records are the source's.
func TestTranslateModeTransactions(t *testing.T) {
	const topic = "translated-txn"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	e.compactSource(topic)
	txn := e.producer(kgo.SnappyCompression(), kgo.TransactionalID("translated-txn"))
	rng := rand.New(rand.NewPCG(41, 42))
	for i := range 30 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for range 1 + rng.IntN(6) {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte{byte('a' + rng.IntN(5))}, Value: []byte{byte(i), byte(rng.IntN(256))}})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryCommit
		if i%3 == 1 {
			end = kgo.TryAbort
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			e.produceOverwrites(rng, topic, 0, 8)
		}
	}
	e.produceOverwrites(rng, topic, 0, 3)
	e.src.Compact()
	store := &memOffsetMaps{}
	m := e.newManager(OffsetMapStore(store))
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{TranslateOffsets: true}); err != nil {
		t.Fatal(err)
	}
	startAll(t, m, topic, []int32{0})
	e.waitTranslated(m, topic)

	omap := store.get(Partition{testMirror, topic, 0})
	srcMarkers, dstMarkers := e.markers(e.src, e.srcCl, topic), e.markers(e.dst, e.dstCl, topic)
	if len(srcMarkers) == 0 || len(srcMarkers) != len(dstMarkers) {
		t.Fatalf("%d source markers, %d destination markers", len(srcMarkers), len(dstMarkers))
	}
	for off, commit := range srcMarkers {
		d := TranslateOffset(omap, off)
		if got, ok := dstMarkers[d]; !ok || got != commit {
			t.Fatalf("source marker at %d (commit %v) translates to %d: destination marker there %v (present %v)", off, commit, d, got, ok)
		}
	}
	src, dst := e.readAll(e.src, e.srcAdm, topic)[0], e.readAll(e.dst, e.dstAdm, topic)[0]
	if len(src) != len(dst) {
		t.Fatalf("%d source records, %d destination records", len(src), len(dst))
	}
	for i := range src {
		if !sameBytes(src[i].Key, dst[i].Key) || !sameBytes(src[i].Value, dst[i].Value) || TranslateOffset(omap, src[i].Offset) != dst[i].Offset {
			t.Fatalf("record %d: source %d %q=%q, destination %d %q=%q", i, src[i].Offset, src[i].Key, src[i].Value, dst[i].Offset, dst[i].Key, dst[i].Value)
		}
	}
	t.Logf("%d records, %d markers, %d shifts", len(src), len(srcMarkers), len(omap))
}

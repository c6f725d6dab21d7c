package fetcher

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// srcRecord is a live source record as a test defines it.
type srcRecord struct {
	offset  int64
	ts      int64
	key     []byte
	value   []byte
	headers []kmsg.Header
}

// srcBatch describes a source batch as compaction left it: its offset range
// and the live records in it (any subset, possibly none).
type srcBatch struct {
	base, last int64
	live       []int64 // offsets of the live records
	codec      kgo.CompressionCodec
	attrs      int16
}

// content is what a destination offset holds.
type content struct {
	ts      int64
	key     []byte
	value   []byte
	headers []kmsg.Header
}

func (c content) String() string {
	return fmt.Sprintf("{ts %d key %q value %q headers %v}", c.ts, c.key, c.value, c.headers)
}

func sameContent(a, b content) bool {
	return a.ts == b.ts && sameBytes(a.key, b.key) && sameBytes(a.value, b.value) && sameHeaders(a.headers, b.headers)
}

// recordFor returns the content of source offset off: deterministic, with
// nulls, empty values and headers now and then.
func recordFor(off int64) srcRecord {
	r := srcRecord{offset: off, ts: 1700000000000 + off*3, key: fmt.Appendf(nil, "k%d", off%7),
		value: bytes.Repeat(fmt.Appendf(nil, "v%d ", off), 1+int(off%5))}
	switch off % 6 {
	case 1:
		r.key = nil
	case 2:
		r.value = nil // a tombstone
	case 3:
		r.headers = []kmsg.Header{{Key: "h", Value: fmt.Appendf(nil, "%d", off)}, {Key: "n", Value: nil}}
	case 4:
		r.value = []byte{}
	}
	return r
}

// build returns the source batch's bytes; the first live record's timestamp
// is the base timestamp, as after Kafka's compaction.
func (sb srcBatch) build(t testing.TB) []byte {
	t.Helper()
	firstTS := int64(1700000000000)
	if len(sb.live) > 0 {
		firstTS = recordFor(sb.live[0]).ts
	}
	var recs []testRecord
	for _, off := range sb.live {
		r := recordFor(off)
		recs = append(recs, testRecord{key: r.key, value: r.value, headers: r.headers, tsDelta: r.ts - firstTS, offDelta: int32(off - sb.base)})
	}
	codec := sb.codec
	if codec == (kgo.CompressionCodec{}) {
		codec = kgo.NoCompression()
	}
	return makeBatch(t, sb.base, firstTS, recs, codec, sb.attrs, int32(sb.last-sb.base))
}

// mirrored is what simulate produced.
type mirrored struct {
	dest    map[int64]content // destination offset -> record
	end     int64             // destination log end offset
	steps   []string          // what each append was: batch, fillers, rebuild
	fillers int64
	copies  int64 // copies inside rebuilt batches
}

// simulate runs the source batches through the stream's decisions (inspect,
// hole plan, fillers, rebuilds) from offset start, decodes every batch that
// would be appended, checks its framing, and returns the destination log.
func simulate(t *testing.T, zst *zstd.Encoder, batches [][]byte, start int64) mirrored {
	t.Helper()
	m := mirrored{dest: map[int64]content{}, end: start}
	plan := newHolePlan()
	appendBatch := func(kind string, raw []byte, base int64, n int64, want *kmsg.RecordBatch) {
		t.Helper()
		if base != m.end {
			t.Fatalf("%s at offset %d, destination log end offset %d", kind, base, m.end)
		}
		if !crcValid(raw) {
			t.Fatalf("%s at %d: CRC invalid", kind, base)
		}
		rb, recs := decodeRecords(t, raw)
		if int64(rb.NumRecords) != n || int64(rb.LastOffsetDelta)+1 != n || len(recs) != int(n) {
			t.Fatalf("%s at %d: %d records, last offset delta %d, decoded %d; want %d contiguous",
				kind, base, rb.NumRecords, rb.LastOffsetDelta, len(recs), n)
		}
		if want != nil && rb.Attributes != want.Attributes {
			t.Fatalf("%s at %d: attributes %#x, source %#x", kind, base, rb.Attributes, want.Attributes)
		}
		for i, r := range recs {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("%s at %d: record %d has offset delta %d", kind, base, i, r.OffsetDelta)
			}
			m.dest[base+int64(i)] = content{ts: rb.FirstTimestamp + r.TimestampDelta64, key: r.Key, value: r.Value, headers: r.Headers}
		}
		m.end = base + n
		m.steps = append(m.steps, fmt.Sprintf("%s %d..%d", kind, base, base+n-1))
	}
	for _, b := range batches {
		cursor := plan.cursor(m.end)
		rb, action, err := inspectBatch(b, cursor)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case action == actionSkip:
			continue
		case action == actionAppend && !plan.pending():
			appendBatch("batch", append([]byte(nil), b...), rb.FirstOffset, int64(rb.NumRecords), &rb)
			continue
		}
		steps, next, err := plan.planBatch(b, &rb, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			switch s.kind {
			case stepBatch:
				src, _ := parseBatch(s.raw)
				appendBatch("batch", append([]byte(nil), s.raw...), s.base, s.n, &src)
			case stepFillers:
				if next == nil || next.Offset != s.fillerOf {
					t.Fatalf("fillers copy %v, step says offset %d", next, s.fillerOf)
				}
				for off := s.base; off < s.base+s.n; {
					n := min(3, s.base+s.n-off) // small filler batches: more boundaries
					appendBatch("fillers", buildFillerBatch(zst, next, int(n)), off, n, nil)
					m.fillers += n
					off += n
				}
			case stepRebuild:
				raw, copies, err := rebuildBatch(zst, s.batch, next)
				if err != nil {
					t.Fatal(err)
				}
				rb, _ := parseBatch(raw)
				if rb.FirstTimestamp != s.batch.rb.FirstTimestamp {
					t.Fatalf("rebuilt batch at %d: base timestamp %d, source %d", s.base, rb.FirstTimestamp, s.batch.rb.FirstTimestamp)
				}
				wantMax := s.batch.rb.MaxTimestamp
				if s.batch.trailing() && next != nil {
					wantMax = max(wantMax, next.Timestamp)
				}
				if rb.MaxTimestamp != wantMax {
					t.Fatalf("rebuilt batch at %d: max timestamp %d, want %d", s.base, rb.MaxTimestamp, wantMax)
				}
				src := s.batch.rb
				appendBatch("rebuild", raw, s.base, s.n, &src)
				if int64(copies) != s.n-int64(len(s.batch.recs)) {
					t.Fatalf("rebuilt batch at %d: %d copies for %d offsets and %d live records", s.base, copies, s.n, len(s.batch.recs))
				}
				m.copies += int64(copies)
			}
		}
	}
	return m
}

// checkMirrored asserts the D2 invariant: every destination offset holds the
// source record at that offset or, in a hole, a copy of the next live source
// record after it; the destination ends right after the last live record's
// batch (or earlier if that batch ends with holes, which wait).
func checkMirrored(t *testing.T, m mirrored, src []srcBatch, start int64) {
	t.Helper()
	var live []int64
	for _, sb := range src {
		live = append(live, sb.live...)
	}
	for off := start; off < m.end; off++ {
		got, ok := m.dest[off]
		if !ok {
			t.Fatalf("destination offset %d is missing", off)
		}
		i, found := slices.BinarySearch(live, off)
		if i == len(live) {
			t.Fatalf("destination offset %d: no live source record at or after it, yet it was written", off)
		}
		r := recordFor(live[i])
		want := content{ts: r.ts, key: r.key, value: r.value, headers: r.headers}
		if !sameContent(got, want) {
			t.Fatalf("destination offset %d (live %v): %v, want a copy of source offset %d %v", off, found, got, live[i], want)
		}
	}
	// The destination must reach the last live record's batch end, unless
	// that batch has trailing holes.
	var wantEnd int64 = start
	for _, sb := range src {
		if len(sb.live) > 0 && sb.last >= start {
			if sb.live[len(sb.live)-1] == sb.last {
				wantEnd = sb.last + 1
			} else {
				wantEnd = sb.base
			}
		}
	}
	if m.end != wantEnd {
		t.Fatalf("destination log end offset %d, want %d (steps %v)", m.end, wantEnd, m.steps)
	}
}

func offsets(from, to int64) []int64 {
	var o []int64
	for i := from; i <= to; i++ {
		o = append(o, i)
	}
	return o
}

func TestCompactionHoles(t *testing.T) {
	zst, err := newFillerEncoder()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		start   int64
		src     []srcBatch
		steps   []string
		fillers int64 // between batches and empty batches
		copies  int64 // inside rebuilt batches
	}{
		{
			name:  "no holes",
			src:   []srcBatch{{base: 0, last: 4, live: offsets(0, 4)}, {base: 5, last: 6, live: offsets(5, 6)}},
			steps: []string{"batch 0..4", "batch 5..6"},
		},
		{
			name:    "hole between batches",
			src:     []srcBatch{{base: 0, last: 2, live: offsets(0, 2)}, {base: 10, last: 12, live: offsets(10, 12)}},
			steps:   []string{"batch 0..2", "fillers 3..5", "fillers 6..8", "fillers 9..9", "batch 10..12"},
			fillers: 7,
		},
		{
			name:    "hole before the first batch (stream starts in a hole)",
			start:   2,
			src:     []srcBatch{{base: 5, last: 6, live: offsets(5, 6)}},
			steps:   []string{"fillers 2..4", "batch 5..6"},
			fillers: 3,
		},
		{
			name:   "holes inside: leading, middle",
			src:    []srcBatch{{base: 0, last: 9, live: []int64{3, 4, 7, 9}}},
			steps:  []string{"rebuild 0..9"},
			copies: 6,
		},
		{
			name:  "trailing holes wait for the next batch",
			src:   []srcBatch{{base: 0, last: 9, live: []int64{1, 5}}, {base: 10, last: 11, live: offsets(10, 11)}},
			steps: []string{"rebuild 0..9", "batch 10..11"}, copies: 8,
		},
		{
			name:  "trailing holes, then a gap, then a rebuilt batch",
			src:   []srcBatch{{base: 0, last: 4, live: []int64{0}}, {base: 8, last: 12, live: []int64{10, 12}}},
			steps: []string{"rebuild 0..4", "fillers 5..7", "rebuild 8..12"}, fillers: 3, copies: 7,
		},
		{
			name: "empty batches wait for the next live record",
			src: []srcBatch{
				{base: 0, last: 1, live: offsets(0, 1)},
				{base: 2, last: 4},
				{base: 5, last: 5},
				{base: 9, last: 11},
				{base: 12, last: 14, live: []int64{13, 14}},
			},
			steps:   []string{"batch 0..1", "fillers 2..4", "fillers 5..7", "fillers 8..10", "fillers 11..11", "rebuild 12..14"},
			fillers: 10, copies: 1,
		},
		{
			name:  "pending at the end: nothing after the empty batch yet",
			src:   []srcBatch{{base: 0, last: 1, live: offsets(0, 1)}, {base: 2, last: 4}},
			steps: []string{"batch 0..1"},
		},
		{
			name:  "pending at the end: trailing holes",
			src:   []srcBatch{{base: 0, last: 1, live: offsets(0, 1)}, {base: 2, last: 6, live: []int64{3}}},
			steps: []string{"batch 0..1"},
		},
		{
			name:    "already mirrored batches are skipped, including empty ones",
			start:   7,
			src:     []srcBatch{{base: 0, last: 4, live: []int64{4}}, {base: 5, last: 6}, {base: 7, last: 7, live: []int64{7}}},
			steps:   []string{"batch 7..7"},
			fillers: 0,
		},
	}
	for _, tt := range tests {
		for _, c := range codecs {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				var batches [][]byte
				for i := range tt.src {
					tt.src[i].codec = c.codec
					batches = append(batches, tt.src[i].build(t))
				}
				m := simulate(t, zst, batches, tt.start)
				checkMirrored(t, m, tt.src, tt.start)
				if !slices.Equal(m.steps, tt.steps) {
					t.Fatalf("steps %v, want %v", m.steps, tt.steps)
				}
				if m.fillers != tt.fillers || m.copies != tt.copies {
					t.Fatalf("%d fillers and %d copies, want %d and %d", m.fillers, m.copies, tt.fillers, tt.copies)
				}
			})
		}
	}
}

// TestCompactionHolesRandom checks the invariant on random compacted logs.
func TestCompactionHolesRandom(t *testing.T) {
	zst, err := newFillerEncoder()
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var src []srcBatch
		var batches [][]byte
		off := int64(rng.IntN(3))
		for range 1 + rng.IntN(8) {
			off += int64(rng.IntN(3)) * int64(rng.IntN(2)) // a gap now and then
			sb := srcBatch{base: off, last: off + int64(rng.IntN(6)), codec: codecs[rng.IntN(len(codecs))].codec}
			keep := rng.Float64()
			for o := sb.base; o <= sb.last; o++ {
				if rng.Float64() < keep {
					sb.live = append(sb.live, o)
				}
			}
			src = append(src, sb)
			batches = append(batches, sb.build(t))
			off = sb.last + 1
		}
		start := src[0].base - int64(rng.IntN(2))
		start = max(start, 0)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := simulate(t, zst, batches, start)
			checkMirrored(t, m, src, start)
		})
	}
}

func TestRebuildBatchCodecs(t *testing.T) {
	zst, err := newFillerEncoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			sb := srcBatch{base: 100, last: 119, live: []int64{100, 103, 110, 111, 119}, codec: c.codec}
			b := sb.build(t)
			rb, err := parseBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			h, err := decodeHoledBatch(b, &rb)
			if err != nil {
				t.Fatal(err)
			}
			raw, copies, err := rebuildBatch(zst, h, nil)
			if err != nil || copies != 15 {
				t.Fatalf("copies %d, err %v", copies, err)
			}
			got, recs := decodeRecords(t, raw)
			if got.Attributes != rb.Attributes || got.MaxTimestamp != rb.MaxTimestamp || got.FirstTimestamp != rb.FirstTimestamp {
				t.Fatalf("header %+v, source %+v", got, rb)
			}
			_, srcRecs := decodeRecords(t, b)
			// Live records are the same encoded records.
			for _, sr := range srcRecs {
				if !bytes.Equal(recs[sr.OffsetDelta].AppendTo(nil), sr.AppendTo(nil)) {
					t.Fatalf("live record at delta %d changed", sr.OffsetDelta)
				}
			}
			// Trailing holes need the next record.
			sb.live = sb.live[:4]
			b = sb.build(t)
			rb, _ = parseBatch(b)
			h, err = decodeHoledBatch(b, &rb)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := rebuildBatch(zst, h, nil); err == nil || !strings.Contains(err.Error(), "next live record") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestDecodeHoledBatchCorrupt(t *testing.T) {
	recs := []testRecord{{key: []byte("a"), offDelta: 3}, {key: []byte("b"), offDelta: 2}}
	b := makeBatch(t, 0, 1, recs, kgo.NoCompression(), 0, 5)
	rb, err := parseBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeHoledBatch(b, &rb); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("err = %v", err)
	}
	recs = []testRecord{{key: []byte("a"), offDelta: 7}}
	b = makeBatch(t, 0, 1, recs, kgo.NoCompression(), 0, 5)
	rb, _ = parseBatch(b)
	if _, err := decodeHoledBatch(b, &rb); err == nil {
		t.Fatal("offset delta beyond the last one accepted")
	}
}

// TestRebuildBatchLarge: copies that would make the rebuilt batch larger
// than 1 MiB and than the source batch switch it to zstd; otherwise the
// codec stays.
func TestRebuildBatchLarge(t *testing.T) {
	zst, err := newFillerEncoder()
	if err != nil {
		t.Fatal(err)
	}
	big := testRecord{key: []byte("k"), value: bytes.Repeat([]byte("x"), 1000), offDelta: 29_999}
	for _, tt := range []struct {
		name  string
		codec kgo.CompressionCodec
		last  int32
		want  int16
	}{
		{"none, small", kgo.NoCompression(), 99, 0},
		{"none, 30 MB of copies", kgo.NoCompression(), 29_999, 4},
		{"lz4, small", kgo.Lz4Compression(), 99, 3},
		{"gzip, 30 MB of copies", kgo.GzipCompression(), 29_999, 1}, // gzip shrinks them far below 1 MiB
		{"zstd", kgo.ZstdCompression(), 29_999, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := big
			r.offDelta = tt.last
			b := makeBatch(t, 0, 1, []testRecord{r}, tt.codec, 0, tt.last)
			rb, _ := parseBatch(b)
			h, err := decodeHoledBatch(b, &rb)
			if err != nil {
				t.Fatal(err)
			}
			raw, copies, err := rebuildBatch(zst, h, nil)
			if err != nil || copies != tt.last {
				t.Fatalf("copies %d, err %v", copies, err)
			}
			got, recs := decodeRecords(t, raw)
			if codec := got.Attributes & attrCompression; codec != tt.want {
				t.Fatalf("codec %d (%d bytes), want %d", codec, len(raw), tt.want)
			}
			if len(recs) != int(tt.last)+1 || !bytes.Equal(recs[0].Value, big.value) {
				t.Fatalf("%d records", len(recs))
			}
		})
	}
}

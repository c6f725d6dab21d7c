package fetcher

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchBatch returns a zstd v2 batch of about 1 MiB (compressed) of
// realistic records: JSON-ish events with ids, timestamps, enums, free text
// from a vocabulary, a key and two headers each.
func benchBatch(b *testing.B) []byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("order payment shipped cancelled customer warehouse inventory region europe " +
		"america asia premium standard express refund invoice pending approved declined retry timeout " +
		"session checkout cart product category electronics books garden toys sports device mobile desktop")
	levels := []string{"INFO", "WARN", "ERROR", "DEBUG"}
	var recs []testRecord
	var batch []byte
	for n := 2000; ; n += 2000 {
		for len(recs) < n {
			var sb strings.Builder
			for range 8 + rng.IntN(24) {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			v := fmt.Sprintf(`{"id":"%016x","ts":%d,"user":%d,"level":"%s","amount":%d.%02d,"region":"%s","msg":"%s"}`,
				rng.Uint64(), 1700000000000+int64(len(recs))*7, rng.IntN(1_000_000), levels[rng.IntN(len(levels))],
				rng.IntN(10000), rng.IntN(100), words[rng.IntN(9)], sb.String())
			recs = append(recs, testRecord{
				key:     fmt.Appendf(nil, "user-%d", rng.IntN(100000)),
				value:   []byte(v),
				headers: []kmsg.Header{{Key: "trace-id", Value: fmt.Appendf(nil, "%032x", rng.Uint64())}, {Key: "source", Value: []byte("checkout-service")}},
				tsDelta: int64(len(recs)) * 7,
			})
		}
		batch = makeBatch(b, 1_000_000, 1700000000000, recs, kgo.ZstdCompression(), 0, -1)
		if len(batch) >= 1<<20 {
			return batch
		}
	}
}

// BenchmarkRewriteZstd measures the append path's work per batch, the same
// calls as a partition's driver makes: inspectBatch (parse the header,
// verify the source CRC32C, decide the batch is appended as is), then
// rewriteBatch (the producer fields, the new CRC32C).
func BenchmarkRewriteZstd(b *testing.B) {
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// rewriteBatch zeroes the base offset: expect the batch there.
		if _, action, err := inspectBatch(batch, batchBase(batch)); err != nil || action != actionAppend {
			b.Fatalf("inspectBatch = %v, %v; want an append", action, err)
		}
		rewriteBatch(batch, 1000, 0, int32(i))
	}
}

// BenchmarkDecodeReencodeZstd measures what a decoding mirror (MirrorMaker
// style) does with the same batch: decompress the records and compress them
// again with zstd at the default level.
func BenchmarkDecodeReencodeZstd(b *testing.B) {
	batch := benchBatch(b)
	rb, err := parseBatch(batch)
	if err != nil {
		b.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	var raw, out []byte
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if raw, err = dec.DecodeAll(rb.Records, raw[:0]); err != nil {
			b.Fatal(err)
		}
		out = enc.EncodeAll(raw, out[:0])
	}
	b.ReportMetric(float64(len(raw))/float64(len(batch)), "ratio")
}

// BenchmarkRebuildBatch measures a compaction-holed batch's rebuild: the
// records of benchBatch with three of every four removed (holes inside the
// batch, the last offset kept live), decompressed, holes filled with copies
// of the next live record, recompressed with the source codec. Bytes are the
// source (holed) batch's.
func BenchmarkRebuildBatch(b *testing.B) {
	full := benchBatch(b)
	rb, err := parseBatch(full)
	if err != nil {
		b.Fatal(err)
	}
	_, recs := decodeRecords(b, full)
	var live []testRecord
	for i, r := range recs {
		if i%4 == 3 || i == len(recs)-1 {
			live = append(live, testRecord{key: r.Key, value: r.Value, headers: r.Headers, tsDelta: r.TimestampDelta64, offDelta: r.OffsetDelta})
		}
	}
	zst, err := newFillerEncoder()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"zstd", kgo.ZstdCompression()}, {"lz4", kgo.Lz4Compression()}, {"none", kgo.NoCompression()}} {
		b.Run(c.name, func(b *testing.B) {
			holed := makeBatch(b, rb.FirstOffset, rb.FirstTimestamp, live, c.codec, 0, rb.LastOffsetDelta)
			hrb, err := parseBatch(holed)
			if err != nil {
				b.Fatal(err)
			}
			var out []byte
			b.SetBytes(int64(len(holed)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				h, err := decodeHoledBatch(holed, &hrb)
				if err != nil {
					b.Fatal(err)
				}
				if out, _, err = rebuildBatch(zst, h, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out))/float64(len(holed)), "out/in")
			b.ReportMetric(float64(hrb.LastOffsetDelta+1), "records")
		})
	}
}

package fetcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
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

// BenchmarkMirrorLZ4 runs the whole data path of one Manager between two
// kfake clusters: a backlog of lz4 batches of about 128 KiB in 6 partitions
// fetched, inspected, rewritten and appended until the destination holds the
// source's end offsets. Bytes are the records' uncompressed values. kfake
// serves both sides in this process, so most of the CPU is kfake's: read a
// CPU profile (-cpuprofile) for the Manager's own share (fetcher, kgo, kmsg).
func BenchmarkMirrorLZ4(b *testing.B) {
	const (
		parts      = 6
		perPart    = 20_000
		valueBytes = 500
	)
	e := newTestEnv(b, 1, nil)
	m := e.newManager()
	prod := e.producer(kgo.Lz4Compression(), kgo.ProducerBatchMaxBytes(128<<10), kgo.ProducerLinger(20*time.Millisecond))
	values := benchValues(parts*perPart, valueBytes)
	b.SetBytes(parts * perPart * valueBytes)
	b.ReportAllocs()
	b.StopTimer()
	for i := range b.N {
		topic := fmt.Sprintf("bench-%d", i)
		ctx := context.Background()
		for _, adm := range []*kadm.Client{e.srcAdm, e.dstAdm} {
			if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
				b.Fatal(err)
			}
		}
		for j := range parts * perPart {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(j % parts), Value: values[j]}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		ps := make([]int32, parts)
		for p := range ps {
			ps[p] = int32(p)
			if err := m.Start(Partition{testMirror, topic, int32(p)}); err != nil {
				b.Fatal(err)
			}
		}
		e.waitCaughtUp(m, topic, ps)
		b.StopTimer()
	}
}

// benchValues returns n values of about size bytes of JSON-like events,
// as compressible as real ones (lz4 about halves them).
func benchValues(n, size int) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("order payment shipped cancelled customer warehouse inventory region europe " +
		"america asia premium standard express refund invoice pending approved declined retry timeout")
	out := make([][]byte, n)
	for i := range out {
		v := fmt.Appendf(nil, `{"id":"%016x","user":%d,"amount":%d,"msg":"`, rng.Uint64(), rng.IntN(1_000_000), rng.IntN(100000))
		for len(v) < size-2 {
			v = append(append(v, words[rng.IntN(len(words))]...), ' ')
		}
		out[i] = append(v[:size-2], '"', '}')
	}
	return out
}

package fetcher

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is a record to put into a hand-made batch.
type testRecord struct {
	key, value []byte
	headers    []kmsg.Header
	tsDelta    int64
	offDelta   int32
}

// makeBatch builds a valid v2 batch at base with the given records,
// compressed with codec, plus extra attribute bits. If lastOffsetDelta < 0,
// it is len(recs)-1.
func makeBatch(t testing.TB, base int64, firstTS int64, recs []testRecord, codec kgo.CompressionCodec, extraAttrs int16, lastOffsetDelta int32) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		off := r.offDelta
		if off == 0 {
			off = int32(i)
		}
		var body []byte
		body = append(body, 0)
		body = kbin.AppendVarlong(body, r.tsDelta)
		body = kbin.AppendVarint(body, off)
		body = kbin.AppendVarintBytes(body, r.key)
		body = kbin.AppendVarintBytes(body, r.value)
		body = kbin.AppendVarint(body, int32(len(r.headers)))
		for _, h := range r.headers {
			body = kbin.AppendVarintString(body, h.Key)
			body = kbin.AppendVarintBytes(body, h.Value)
		}
		raw = kbin.AppendVarint(raw, int32(len(body)))
		raw = append(raw, body...)
	}
	attrs := extraAttrs
	if codec != kgo.NoCompression() {
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, typ := c.Compress(&buf, raw)
		raw = append([]byte(nil), out...)
		attrs |= int16(typ)
	}
	if lastOffsetDelta < 0 {
		lastOffsetDelta = int32(len(recs) - 1)
	}
	maxTS := firstTS
	for _, r := range recs {
		maxTS = max(maxTS, firstTS+r.tsDelta)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          base,
		Length:               int32(minBatchLength + len(raw)),
		PartitionLeaderEpoch: 7,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lastOffsetDelta,
		FirstTimestamp:       firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           1234,
		ProducerEpoch:        3,
		FirstSequence:        99,
		NumRecords:           int32(len(recs)),
		Records:              raw,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// sampleRecords returns n records with keys, values, headers and nulls.
func sampleRecords(n int) []testRecord {
	recs := make([]testRecord, n)
	for i := range recs {
		r := testRecord{
			key:     []byte("key-" + string(rune('a'+i%26))),
			value:   bytes.Repeat([]byte("value "), 1+i%7),
			tsDelta: int64(i),
		}
		switch i % 5 {
		case 1:
			r.key = nil
		case 2:
			r.value = nil
		case 3:
			r.headers = []kmsg.Header{{Key: "h1", Value: []byte("v1")}, {Key: "h2", Value: nil}}
		case 4:
			r.value = []byte{}
		}
		recs[i] = r
	}
	return recs
}

// decodeRecords decompresses and parses every record of a v2 batch.
func decodeRecords(t testing.TB, b []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("parse batch: %v", err)
	}
	raw, err := decompressor.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&attrCompression))
	if err != nil {
		t.Fatalf("decompress: %v", err)
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		l, n := kbin.Varint(raw)
		if n <= 0 {
			t.Fatalf("bad varint")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
			t.Fatalf("record: %v", err)
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return rb, recs
}

// metricValue returns the value of a counter or gauge, or the sample
// count of a histogram.
func metricValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	case d.Histogram != nil:
		return float64(d.Histogram.GetSampleCount())
	}
	t.Fatalf("not a counter, gauge or histogram: %v", m.Desc())
	return 0
}

// seriesCount returns how many series a collector has.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 10000)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// lagSeries returns how many sidemirror_partition_lag_records series m's
// partitions have.
func lagSeries(m *Manager) int {
	return len(partitionSeries(m, m.met.parts.lagRecords))
}

// partitionSeries returns the series of the per-partition metric d, by
// mirror/topic/partition.
func partitionSeries(m *Manager, d *prometheus.Desc) map[string]float64 {
	ch := make(chan prometheus.Metric, 10000)
	m.met.parts.Collect(ch)
	close(ch)
	out := make(map[string]float64)
	for mt := range ch {
		if mt.Desc() != d {
			continue
		}
		var pb dto.Metric
		if err := mt.Write(&pb); err != nil {
			panic(err)
		}
		l := make(map[string]string)
		for _, lp := range pb.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		out[l["mirror"]+"/"+l["topic"]+"/"+l["partition"]] = pb.GetGauge().GetValue()
	}
	return out
}

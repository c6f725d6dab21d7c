package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/protocol"
)

// TestTranslateMode mirrors a compacted source topic with
// mirror.offsets=translate: the destination holds the source's live records
// in order without fillers, at offsets of its own, and consumer group
// offsets are translated exactly: a committed offset at a record, or in a
// compaction hole before it, becomes that record's destination offset.
func TestTranslateMode(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, keys = "translate", "translated", 200
	createSourceTopic(t, topic, 1, eagerCompaction())
	deadline := time.Now().Add(3 * time.Minute)
	// The group offset in a hole needs a hole before a record that neither
	// cleaner removes: solo records (keys written once) behind overwrites
	// that later waves supersede.
	for wave := uint64(700); ; wave++ {
		produceSolos(t, topic, keys, 50, wave)
		produceOverwrites(t, topic, keys, 3000, 3, wave)
		time.Sleep(2 * time.Second)
		src := dumpPartition(t, env.Source, topic, 0, "-X", readUncommitted)
		if len(src.solosAfterHoles()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source log has no compaction hole before a solo record after 3 minutes")
		}
	}
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", mirrorConfigFile(t, map[string]string{
		"mirror.offsets": "translate", "mirror.metadata.refresh.interval.ms": "2000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	wait.For(t, 3*time.Minute, "the translated partition to catch up", func() bool {
		var rows []protocol.PartitionDetail
		for _, tp := range describe(t, mirror).Topics {
			rows = append(rows, tp.Partitions...)
		}
		if len(rows) != 1 {
			return false
		}
		if rows[0].State == "FAILED" {
			t.Fatalf("FAILED: %s", deref(rows[0].LastError))
		}
		return rows[0].State == "MIRRORING" && rows[0].Lag == 0 && rows[0].SourceOffset == endOffsets(t, env.Source, topic)[0]
	})
	if f := sumMetric(t, "sidemirror_filler_records_total", mirror); f != 0 {
		t.Fatalf("translate mode wrote %v fillers", f)
	}

	// Let the source's cleaner settle, then compare: every source record
	// is on the destination, in order. Both clusters compact (the topic's
	// configs are synced): either may still hold records the other's
	// cleaner removed, superseded by a later record of the same key.
	time.Sleep(3 * time.Second)
	src := dumpPartition(t, env.Source, topic, 0, "-X", readUncommitted)
	dst := dumpPartition(t, env.Destination, topic, 0, "-X", readUncommitted)
	// Destination offset of each record line: values are unique, but
	// tombstones of one key written in the same millisecond print alike,
	// so they are left out.
	tombstone := func(line string) bool { return strings.SplitN(line, " ", 4)[2] == "-1" }
	at := map[string]int64{}
	for _, o := range dst.offsets {
		if !tombstone(dst.lines[o]) {
			at[dst.lines[o]] = o
		}
	}
	lastOfKey := map[string]int64{} // destination offset of each key's last record
	for _, o := range dst.offsets {
		lastOfKey[lineKey(dst.lines[o])] = o
	}
	prev, found := int64(-1), 0
	for _, o := range src.offsets {
		if tombstone(src.lines[o]) {
			continue
		}
		d, ok := at[src.lines[o]]
		switch {
		case ok && d > prev:
			prev = d
			found++
		case !ok && lastOfKey[lineKey(src.lines[o])] > prev:
			// superseded and cleaned on the destination
		default:
			var srcKey, dstKey []int64
			for _, so := range src.offsets {
				if lineKey(src.lines[so]) == lineKey(src.lines[o]) {
					srcKey = append(srcKey, so)
				}
			}
			for _, do := range dst.offsets {
				if lineKey(dst.lines[do]) == lineKey(src.lines[o]) {
					dstKey = append(dstKey, do)
				}
			}
			t.Fatalf("source offset %d (%.100q) is not on the destination after destination offset %d; source offsets of its key %v, destination %v (destination %d records up to %d)",
				o, src.lines[o], prev, srcKey, dstKey, len(dst.offsets), dst.offsets[len(dst.offsets)-1])
		}
	}
	if found == 0 {
		t.Fatal("no source record found on the destination")
	}
	srcEnd, dstEnd := endOffsets(t, env.Source, topic)[0], endOffsets(t, env.Destination, topic)[0]
	if dstEnd >= srcEnd {
		t.Fatalf("destination ends at %d, the source at %d: translate mode leaves the holes out", dstEnd, srcEnd)
	}

	// Group offsets: one at a live record, one in a hole before a record,
	// both records on the destination too.
	onDest := func(o int64) bool { _, ok := at[src.lines[o]]; return ok }
	live, hole := int64(-1), int64(-1)
	var afterHole int64
	for i := len(src.offsets) / 2; i < len(src.offsets) && live < 0; i++ {
		if onDest(src.offsets[i]) {
			live = src.offsets[i]
		}
	}
	for _, i := range src.solosAfterHoles() {
		if onDest(src.offsets[i]) {
			hole, afterHole = src.offsets[i-1]+1, src.offsets[i]
			break
		}
	}
	if live < 0 || hole < 0 {
		t.Fatalf("no live record (%d) or hole before one (%d) on both clusters", live, hole)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srcAdm := kadm.NewClient(newClient(t, env.Source, testbed.Admin))
	dstAdm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	for group, off := range map[string]int64{"translate-live": live, "translate-hole": hole} {
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: topic, Partition: 0, At: off, LeaderEpoch: -1})
		if resp, err := srcAdm.CommitOffsets(ctx, group, o); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", group, err, resp.Error())
		}
	}
	want := map[string]int64{"translate-live": at[src.lines[live]], "translate-hole": at[src.lines[afterHole]]}
	wait.For(t, time.Minute, "translated group offsets", func() bool {
		for group, w := range want {
			fetched, err := dstAdm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			o, ok := fetched.Lookup(topic, 0)
			if !ok || o.Err != nil || o.At != w {
				return false
			}
		}
		return true
	})
	t.Logf("source %d records up to offset %d; destination %d records up to %d; group at source %d -> %d, hole %d -> %d",
		len(src.offsets), srcEnd, len(dst.offsets), dstEnd, live, want["translate-live"], hole, want["translate-hole"])
}

// produceSolos writes n pairs to partition 0 of topic: an overwrite of one
// of keys (superseded by later waves, so the cleaner removes it) followed by
// a record whose key is written only once (never removed by either side's
// cleaner).
func produceSolos(t *testing.T, topic string, keys, n int, wave uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for j := range n {
		rs = append(rs,
			&kgo.Record{Key: fmt.Appendf(nil, "key-%d", j%keys), Value: fmt.Appendf(nil, "pre-%d-%d", wave, j)},
			&kgo.Record{Key: fmt.Appendf(nil, "solo-%d-%d", wave, j), Value: fmt.Appendf(nil, "solo-%d-%d", wave, j)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce solo records: %v", err)
	}
}

// isSolo reports whether a dump line is one of produceSolos' single-key
// records.
func isSolo(line string) bool { return strings.HasPrefix(lineKey(line), "solo-") }

// solosAfterHoles returns the indexes in d.offsets of the solo records
// right behind a compaction hole.
func (d compactedDump) solosAfterHoles() []int {
	var at []int
	for i := 1; i < len(d.offsets); i++ {
		if d.offsets[i] > d.offsets[i-1]+1 && isSolo(d.lines[d.offsets[i]]) {
			at = append(at, i)
		}
	}
	return at
}

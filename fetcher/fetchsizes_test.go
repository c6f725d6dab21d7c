package fetcher

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorFetchSizes checks that a mirror's fetch.max.bytes,
// fetch.min.bytes, fetch.max.wait.ms and max.partition.fetch.bytes
// (MirrorSettings) reach the Fetch requests sent to its source, in place of
// the Manager's, and that the partition still mirrors every record.
func TestMirrorFetchSizes(t *testing.T) {
	e := newTestEnv(t, 1, map[string]int32{"fs": 1})
	cl := e.producer(kgo.NoCompression())
	e.produce(cl, "fs", []int32{0}, 0, 30, 10)

	var mu sync.Mutex
	var seen []*kmsg.FetchRequest
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		mu.Lock()
		seen = append(seen, req.(*kmsg.FetchRequest))
		mu.Unlock()
		return nil, nil, false
	})
	m := e.newManager()
	settings := MirrorSettings{FetchMaxBytes: 3 << 20, FetchMinBytes: 7, FetchMaxWait: 40 * time.Millisecond, PartitionMaxBytes: 300 << 10}
	if err := m.SetMirrorSettings(testMirror, settings); err != nil {
		t.Fatal(err)
	}
	startAll(t, m, "fs", []int32{0})
	e.waitCaughtUp(m, "fs", []int32{0})
	// The comparison below reads the source with its own client: only the
	// requests so far are the fetcher's.
	mu.Lock()
	requests := seen
	seen = nil
	mu.Unlock()
	if len(requests) == 0 {
		t.Fatal("no Fetch request reached the source")
	}
	for _, req := range requests {
		if req.MaxBytes != settings.FetchMaxBytes || req.MinBytes != settings.FetchMinBytes || req.MaxWaitMillis != 40 {
			t.Fatalf("Fetch request with max bytes %d, min bytes %d, max wait %d ms; want %d, %d, 40",
				req.MaxBytes, req.MinBytes, req.MaxWaitMillis, settings.FetchMaxBytes, settings.FetchMinBytes)
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rp.PartitionMaxBytes != settings.PartitionMaxBytes {
					t.Fatalf("partition max bytes %d, want %d", rp.PartitionMaxBytes, settings.PartitionMaxBytes)
				}
			}
		}
	}
	e.compareTopic("fs")
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{FetchMinBytes: -1}); err == nil {
		t.Fatal("a negative fetch.min.bytes was accepted")
	}
}

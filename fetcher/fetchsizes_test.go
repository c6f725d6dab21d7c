package fetcher

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestMirrorFetchSizes checks that a mirror's fetch.max.bytes,
// fetch.min.bytes, fetch.max.wait.ms and max.partition.fetch.bytes
// (MirrorSettings) reach the Fetch requests sent to its source, in place of
// the Manager's, that a request's MaxBytes is still what the memory budget
// reserved for it (at most the mirror's fetch.max.bytes, the sum of its
// partitions' sizes and the budget), and that the partitions still mirror
// every record.
func TestMirrorFetchSizes(t *testing.T) {
	const n = 16 // 16 partitions of 300 KiB ask for more than 3 MiB
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	settings := MirrorSettings{FetchMaxBytes: 3 << 20, FetchMinBytes: 7, FetchMaxWait: 40 * time.Millisecond, PartitionMaxBytes: 300 << 10}
	for _, tc := range []struct {
		name   string
		budget int64 // 0: the default
		want   int32 // the MaxBytes of a request for every partition with nothing held
	}{
		{"default budget", 0, settings.FetchMaxBytes},
		{"budget below fetch.max.bytes", 1 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := fmt.Sprintf("fs%d", tc.budget)
			e := newTestEnv(t, 1, map[string]int32{topic: n})
			e.produce(e.producer(kgo.NoCompression()), topic, parts, 0, 30, 10)

			var mu sync.Mutex
			var seen []*kmsg.FetchRequest
			e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				e.src.KeepControl()
				mu.Lock()
				seen = append(seen, req.(*kmsg.FetchRequest))
				mu.Unlock()
				return nil, nil, false
			})
			var opts []Opt
			if tc.budget > 0 {
				opts = append(opts, BufferMemory(tc.budget))
			}
			m := e.newManager(opts...)
			if err := m.SetMirrorSettings(testMirror, settings); err != nil {
				t.Fatal(err)
			}
			startAll(t, m, topic, parts)
			e.waitCaughtUp(m, topic, parts)
			// Caught up, nothing is held: the long polls for all the
			// partitions ask for all the room they may have.
			testwait.For(t, waitTimeout, fmt.Sprintf("a Fetch request with MaxBytes %d", tc.want), func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, req := range seen {
					if req.MaxBytes == tc.want {
						return true
					}
				}
				return false
			})
			// The comparison below reads the source with its own client:
			// only the requests so far are the fetcher's.
			mu.Lock()
			requests := seen
			seen = nil
			mu.Unlock()
			limit := int64(DefaultBufferMemory)
			if tc.budget > 0 {
				limit = tc.budget
			}
			for _, req := range requests {
				if req.MinBytes != settings.FetchMinBytes || req.MaxWaitMillis != 40 {
					t.Fatalf("Fetch request with min bytes %d, max wait %d ms; want %d, 40", req.MinBytes, req.MaxWaitMillis, settings.FetchMinBytes)
				}
				var sum int64
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						if rp.PartitionMaxBytes != settings.PartitionMaxBytes {
							t.Fatalf("partition max bytes %d, want %d", rp.PartitionMaxBytes, settings.PartitionMaxBytes)
						}
						sum += int64(rp.PartitionMaxBytes)
					}
				}
				if want := min(int64(settings.FetchMaxBytes), sum, limit); int64(req.MaxBytes) > want || req.MaxBytes < 1 {
					t.Fatalf("Fetch request for %d bytes of partitions with MaxBytes %d: more than fetch.max.bytes %d, the partitions' %d or the budget %d",
						sum, req.MaxBytes, settings.FetchMaxBytes, sum, limit)
				}
			}
			if got := e.compareTopic(topic); got != n*30 {
				t.Fatalf("compared %d records, want %d", got, n*30)
			}
		})
	}
	m := newTestEnv(t, 1, map[string]int32{"neg": 1}).newManager()
	if err := m.SetMirrorSettings(testMirror, MirrorSettings{FetchMinBytes: -1}); err == nil {
		t.Fatal("a negative fetch.min.bytes was accepted")
	}
}

package mirror

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// codecs are the compression codecs every variety test writes with.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// varietyRecord returns record i of a mixed workload: null keys and values
// now and then, zero to three headers, values mostly small with an empty
// one, every 997th record a value of 1 to 32 KB and every 4,001st a large
// one of 100 to 900 KB. The strides are prime to the number of codecs, so
// produceVariety's producers each get values of every size.
func varietyRecord(rng *rand.Rand, i int) *kgo.Record {
	r := &kgo.Record{}
	if i%17 != 0 {
		r.Key = []byte("key-" + strconv.Itoa(i%5000))
	}
	switch {
	case i%19 == 0: // null value
	case i%23 == 0:
		r.Value = []byte{}
	case i%4001 == 0:
		r.Value = printable(rng, 100_000+(i/4001%9)*100_000) // 100 KB .. 900 KB
	case i%997 == 0:
		r.Value = printable(rng, 1_000+rng.IntN(31_000)) // 1 KB .. 32 KB
	default:
		r.Value = printable(rng, rng.IntN(200))
	}
	for h := range i % 4 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h" + strconv.Itoa(h), Value: printable(rng, 1+rng.IntN(16))})
	}
	return r
}

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// words are 256 random 8-letter words that printable draws from.
var words = func() [][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([][]byte, 256)
	for i := range out {
		out[i] = make([]byte, 8)
		for j := range out[i] {
			out[i][j] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	return out
}()

// printable returns n letters and digits: random words of a small
// vocabulary, values that kcat prints on one line and that every codec
// compresses somewhat, like real payloads (the LZ codecs, lz4 and snappy,
// need repeats; random letters alone would leave their batches
// uncompressed).
func printable(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n)
	for len(b)+8 <= n {
		b = append(b, words[rng.IntN(len(words))]...)
	}
	for len(b) < n {
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return b
}

// produceVariety writes n records to topic on c, split evenly over one
// producer per compression codec, and returns once all are acknowledged.
func produceVariety(t *testing.T, c *testbed.Cluster, topic string, n int, seed uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(codecs))
	for ci, cc := range codecs {
		cl, err := c.NewClient(testbed.Admin,
			kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(cc.codec),
			kgo.ProducerLinger(10*time.Millisecond),
			kgo.ProducerBatchMaxBytes(1<<20),
			kgo.MaxBufferedRecords(20_000))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			var once sync.Once
			for i := ci; i < n; i += len(codecs) {
				cl.Produce(ctx, varietyRecord(rng, i), func(_ *kgo.Record, err error) {
					if err != nil {
						once.Do(func() { errs <- fmt.Errorf("%s producer: %w", cc.name, err) })
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// compareDumps reads partition p of topic from the source and the
// destination with kcat, as an independent client, and fails the test at
// the first line that differs. It returns the number of records compared.
// extra are more kcat arguments for both sides (an isolation level, say).
func compareDumps(t *testing.T, topic string, p int32, extra ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := testbed.ComparePartition(ctx, env.Source, env.Destination, topic, p, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

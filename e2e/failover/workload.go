package failover

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// valueWidth pads each record's value (its sequence number) to about the
// size of a small event.
const valueWidth = 100

// encodeSeq returns the value of record seq: the decimal number, then
// spaces.
func encodeSeq(seq int64) []byte {
	return fmt.Appendf(nil, "%-*d", valueWidth, seq)
}

// decodeSeq reads the sequence number of a value made by encodeSeq.
func decodeSeq(v []byte) (int64, error) {
	s := strings.TrimSpace(string(v))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("record value %q holds no sequence number", s)
	}
	return n, nil
}

// Producer writes numbered records to one topic with an idempotent
// producer (acks=all) and remembers which the cluster acknowledged.
type Producer struct {
	cl    *kgo.Client
	topic string
	next  int64
	close sync.Once

	mu    sync.Mutex
	acked []int64
	err   error
}

// NewProducer returns a producer on the client options of a cluster.
func NewProducer(opts []kgo.Opt, topic string) (*Producer, error) {
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(20*time.Second))...)
	if err != nil {
		return nil, err
	}
	return &Producer{cl: cl, topic: topic}, nil
}

// Produce writes n records at about rate records a second (0: as fast as
// the client goes) and waits for their acknowledgements or ctx's end.
func (p *Producer) Produce(ctx context.Context, n int, rate int) {
	const tick = 10 * time.Millisecond
	per := n
	if rate > 0 {
		per = max(1, rate/int(time.Second/tick))
	}
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; {
		for j := 0; j < per && i < n; j, i = j+1, i+1 {
			seq := p.next
			p.next++
			p.cl.Produce(ctx, &kgo.Record{Value: encodeSeq(seq)}, func(_ *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err == nil {
					p.acked = append(p.acked, seq)
				} else if p.err == nil {
					p.err = err
				}
			})
		}
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		}
	}
	_ = p.cl.Flush(ctx)
}

// Acked returns the sequence numbers acknowledged so far and the first
// produce error.
func (p *Producer) Acked() ([]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.acked...), p.err
}

// Close ends the producer; records not yet acknowledged fail.
func (p *Producer) Close() { p.close.Do(p.cl.Close) }

// Group is one member of a consumer group that reads a topic, is handed
// records and commits their offsets after each poll, as an application
// that processes each batch and then commits does (at least once).
type Group struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	deliveries []Delivery
	err        error
}

// StartGroup joins group on the cluster of opts and consumes topic until
// Stop; a partition without a committed offset is read from its start.
func StartGroup(opts []kgo.Opt, group, topic string) (*Group, error) {
	cl, err := kgo.NewClient(append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{cl: cl, cancel: cancel, done: make(chan struct{})}
	go g.run(ctx)
	return g, nil
}

func (g *Group) run(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		fs := g.cl.PollFetches(ctx)
		var batch []Delivery
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			seq, err := decodeSeq(r.Value)
			if err != nil {
				bad = err
				return
			}
			batch = append(batch, Delivery{Seq: seq, Partition: r.Partition, Offset: r.Offset})
		})
		g.mu.Lock()
		g.deliveries = append(g.deliveries, batch...)
		if bad != nil && g.err == nil {
			g.err = bad
		}
		g.mu.Unlock()
		if len(batch) > 0 {
			// A failed commit (the source gone) leaves the batch to be
			// read again wherever the group resumes.
			_ = g.cl.CommitUncommittedOffsets(ctx)
		}
	}
}

// Deliveries returns the records the member was handed so far.
func (g *Group) Deliveries() []Delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Delivery(nil), g.deliveries...)
}

// Stop ends the member: with commit, it commits what it was handed and
// leaves the group (a planned stop); without, it stops at once and closes
// the client in the background (the cluster is gone: leaving the group
// would wait for it). It returns the first malformed record it saw.
func (g *Group) Stop(commit bool) error {
	g.cancel()
	<-g.done
	if commit {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := g.cl.CommitUncommittedOffsets(ctx)
		cancel()
		if err != nil {
			g.cl.Close()
			return fmt.Errorf("final commit: %w", err)
		}
		g.cl.Close()
	} else {
		go g.cl.Close()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// DumpSeqs reads every record of topic with kcat (arguments kcatArgs
// connect to the cluster) and returns their sequence numbers, in partition
// then offset order.
func DumpSeqs(ctx context.Context, kcatArgs []string, topic string) ([]int64, error) {
	args := append(append([]string(nil), kcatArgs...), "-C", "-q", "-e", "-t", topic, "-o", "beginning", "-f", "%s\n")
	cmd := exec.CommandContext(ctx, "kcat", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kcat dump of %s: %w\n%s", topic, err, stderr.String())
	}
	var seqs []int64
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		seq, err := decodeSeq([]byte(line))
		if err != nil {
			return nil, errors.New("kcat dump of " + topic + ": " + err.Error())
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics names the workload's topics; the caller creates them on the source
// (Compacted with cleanup.policy=compact and small segments).
type Topics struct {
	Plain     string // the idempotent producer's; the group reads it
	Txn       string // the transactional producers'
	Compacted string // overwrites and tombstones
	Group     string // the consumer group committing on the source
}

// Workload is the traffic of a chaos run on the source: an idempotent
// producer (every record numbered in SeqHeader), two transactional producers
// committing about three transactions in four and aborting the others, a
// producer overwriting a few hundred keys of a compacted topic with
// tombstones among the values, and a consumer group reading the plain topic
// and committing its offsets. Every producer keeps a steady, modest rate, so
// that the run stays within the machine's two cores. The transactional
// producers pause 150 to 250 ms between transactions: about 4 each per
// second, 8 per partition of their topic. A mirror replays a partition's
// transactions one after the other, four replicated writes each (about 50
// per second per partition on the test bed, fetcher/DESIGN.md), and two
// producers that wrote without pausing outran that replay by half (24 per
// second per partition), so that the backlog the faults left could not
// drain.
type Workload struct {
	topics Topics
	opts   []kgo.Opt
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	acked    map[string]int // producer -> records acknowledged, in order (plain topic)
	commits  int
	aborts   int
	overw    int
	groupN   int
	buffered int
	errs     []error
}

// Stats is what a workload wrote.
type Stats struct {
	Acked        map[string]int // per SeqHeader producer: sequence numbers 0..n-1 were acknowledged
	Commits      int
	Aborts       int
	Overwrites   int // compacted-topic records, tombstones included
	GroupRecords int // records the group consumed
	// BufferedAtStop is how many records the idempotent and the compacting
	// producer still held, not yet acknowledged, when Stop was called: a
	// source that fell behind the offered rate keeps taking records that
	// long after.
	BufferedAtStop int
}

// StartWorkload starts the producers and the group with the source
// client options opts (seed brokers, SASL...) and seed for the workload's
// random choices.
func StartWorkload(opts []kgo.Opt, topics Topics, seed uint64) (*Workload, error) {
	w := &Workload{topics: topics, opts: opts, acked: make(map[string]int)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	idem, err := w.client()
	if err != nil {
		return nil, err
	}
	comp, err := w.client()
	if err != nil {
		idem.Close()
		return nil, err
	}
	var txns []*kgo.Client
	for _, id := range []string{"chaos-txn-a", "chaos-txn-b"} {
		cl, err := w.client(kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err != nil {
			closeAll(append(txns, idem, comp)...)
			return nil, err
		}
		txns = append(txns, cl)
	}
	group, err := w.client(kgo.ConsumerGroup(topics.Group), kgo.ConsumeTopics(topics.Plain),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		closeAll(append(txns, idem, comp)...)
		return nil, err
	}
	w.start(func() { w.idempotent(idem) })
	w.start(func() { w.compacted(comp, seed) })
	for i, cl := range txns {
		w.start(func() { w.transactional(cl, fmt.Sprintf("txn-%c", 'a'+i), seed+uint64(i)) })
	}
	w.start(func() { w.consume(group) })
	return w, nil
}

func (w *Workload) client(extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond)}, w.opts...), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("chaos: workload client: %w", err)
	}
	return cl, nil
}

func closeAll(cls ...*kgo.Client) {
	for _, cl := range cls {
		cl.Close()
	}
}

func (w *Workload) start(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

func (w *Workload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < 10 {
		w.errs = append(w.errs, err)
	}
}

// Stop ends the workload, waits for what is in flight and returns its
// stats. Errors of single records during faults are expected and retried by
// the clients; Stop returns the ones that were not (a record the idempotent
// producer gave up on ends its numbering there).
func (w *Workload) Stop() (Stats, error) {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	acked := make(map[string]int, len(w.acked))
	for k, v := range w.acked {
		acked[k] = v
	}
	return Stats{Acked: acked, Commits: w.commits, Aborts: w.aborts, Overwrites: w.overw, GroupRecords: w.groupN,
		BufferedAtStop: w.buffered}, errors.Join(w.errs...)
}

// idempotent writes numbered records, one at a time per tick, and counts a
// record acknowledged only when every one before it was: a gap in the
// destination is then a lost record, not one the source never took.
func (w *Workload) idempotent(cl *kgo.Client) {
	defer cl.Close()
	const name = "idem"
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var (
		mu      sync.Mutex
		done    = map[int]bool{}
		next    int
		stopped bool
	)
	for i := 0; ; i++ {
		select {
		case <-w.ctx.Done():
			w.flush(cl)
			return
		case <-tick.C:
		}
		r := &kgo.Record{Topic: w.topics.Plain, Key: []byte("k" + strconv.Itoa(i%50)),
			Value:   fmt.Appendf(nil, "idempotent-record-%d", i),
			Headers: []kgo.RecordHeader{{Key: SeqHeader, Value: []byte(name + ":" + strconv.Itoa(i))}}}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !stopped {
					stopped = true
					w.fail(fmt.Errorf("chaos: idempotent record %d: %w", i, err))
				}
				return
			}
			done[i] = true
			for done[next] && !stopped {
				delete(done, next)
				next++
				w.mu.Lock()
				w.acked[name] = next
				w.mu.Unlock()
			}
		})
	}
}

// flush counts what a producer still buffers and waits (up to two
// minutes) until the source acknowledged it.
func (w *Workload) flush(cl *kgo.Client) {
	w.mu.Lock()
	w.buffered += int(cl.BufferedProduceRecords())
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = cl.Flush(ctx)
}

// transactional runs transactions of 1 to 20 records, committing three in
// four.
func (w *Workload) transactional(cl *kgo.Client, name string, seed uint64) {
	defer cl.Close()
	rng := rand.New(rand.NewPCG(seed, 2))
	for n := 0; w.ctx.Err() == nil; n++ {
		if err := cl.BeginTransaction(); err != nil {
			w.fail(fmt.Errorf("chaos: %s begin: %w", name, err))
			return
		}
		k := 1 + rng.IntN(20)
		for j := range k {
			cl.Produce(w.ctx, &kgo.Record{Topic: w.topics.Txn, Key: []byte(name),
				Value: fmt.Appendf(nil, "%s-txn-%d-record-%d", name, n, j)}, nil)
		}
		commit := rng.IntN(4) != 0
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := cl.Flush(ctx)
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		} else {
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			commit = false
		}
		cancel()
		if err != nil {
			// A fault broke the transaction: abort it (whatever the source
			// recorded, the checker compares both sides), retrying while
			// the brokers come back.
			if err := w.abort(cl); err != nil {
				w.fail(fmt.Errorf("chaos: %s: %w", name, err))
				return
			}
			continue
		}
		w.mu.Lock()
		if commit {
			w.commits++
		} else {
			w.aborts++
		}
		w.mu.Unlock()
		select {
		case <-w.ctx.Done():
		case <-time.After(time.Duration(150+rng.IntN(100)) * time.Millisecond):
		}
	}
}

// abort ends a broken transaction with an abort, retrying for up to two
// minutes, so that the next one can begin.
func (w *Workload) abort(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		err := cl.AbortBufferedRecords(ctx)
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TryAbort)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("aborting a broken transaction: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// compacted overwrites 300 keys, one value in ten a tombstone.
func (w *Workload) compacted(cl *kgo.Client, seed uint64) {
	defer cl.Close()
	rng := rand.New(rand.NewPCG(seed, 3))
	tick := time.NewTicker(3 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.ctx.Done():
			w.flush(cl)
			return
		case <-tick.C:
		}
		r := &kgo.Record{Topic: w.topics.Compacted, Key: fmt.Appendf(nil, "key-%03d", rng.IntN(300))}
		if rng.IntN(10) != 0 {
			r.Value = fmt.Appendf(nil, "value-%d", i)
		}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err == nil {
				w.mu.Lock()
				w.overw++
				w.mu.Unlock()
			}
		})
	}
}

// consume reads the plain topic in the group and commits every second.
func (w *Workload) consume(cl *kgo.Client) {
	defer cl.Close()
	last := time.Now()
	for w.ctx.Err() == nil {
		fs := cl.PollFetches(w.ctx)
		n := 0
		fs.EachRecord(func(*kgo.Record) { n++ })
		w.mu.Lock()
		w.groupN += n
		w.mu.Unlock()
		if time.Since(last) >= time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cl.CommitUncommittedOffsets(ctx)
			cancel()
			last = time.Now()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = cl.CommitUncommittedOffsets(ctx)
	cancel()
}

package fetcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
)

// Transactions are replayed as DESIGN.md D8 describes: every source
// producer ID that writes transactions to a partition gets its own
// destination transactional producer for that partition, so that each
// destination transaction covers exactly one partition and its marker can be
// placed at the source offset. A transactional batch is appended inside the
// producer's destination transaction (AddPartitionsToTxn first), and a
// source marker becomes EndTxn with the same outcome; the partition appends
// nothing else until the broker has written the marker.
//
// The destination's transaction coordinator is the record of open
// transactions: a partition that (re)starts looks its producers up with
// DescribeTransactions and DescribeProducers and continues a transactional
// ID the destination knows, with its producer ID and epoch, instead of
// starting it over: a transaction still open is continued, not aborted.
//
// Fencing (DESIGN.md D8): a transactional ID continued that way shares its
// producer ID and epoch with whoever used it before, possibly a sidecar
// that froze, or whose AddPartitionsToTxn is still being written to the
// coordinator's log, and that will act with a request in hand. Nothing
// fences that owner while it may have a transaction open (InitProducerID
// would abort it, and the abort's marker would land where the source has a
// record), but its requests are harmless: it replays the same source at the
// same offsets, so its add opens the transaction the successor opens, and
// the only EndTxn it can send is the one for the marker at the destination
// log end offset it had reached, which is where the successor writes the
// same marker. Once the successor has replayed a marker and the
// destination shows nothing open or in transition under the ID, it bumps
// the epoch (fenceTxnProducer), so a late EndTxn or AddPartitionsToTxn of
// the old owner is refused instead of ending or opening a later
// transaction. Every InitProducerID of an existing ID names the producer ID
// and epoch it expects, so a late one cannot bump past the owner either.

// defaultTxnTimeout is the default transaction timeout of destination
// producers: Kafka's default transaction.max.timeout.ms, the longest a
// source transaction can stay open on a broker with default settings.
const defaultTxnTimeout = 15 * time.Minute

// markerTimeout bounds the wait for the broker to write a marker after
// EndTxn; past it the partition restarts from the destination LEO.
const markerTimeout = 30 * time.Second

// txnVersions pins the transaction APIs to the protocol in which a client
// adds partitions explicitly and keeps its epoch across transactions
// (before KIP-890's second part): InitProducerID v4, AddPartitionsToTxn v3,
// EndTxn v4, Produce v11. The replay relies on both.
func txnVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.InitProducerID.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	return v
}

// newTxnClient returns a client for the destination's transaction
// coordinators, with the settings of local and the versions of txnVersions.
func newTxnClient(local *kgo.Client) (*kgo.Client, error) {
	return kgo.NewClient(append(local.Opts(), kgo.MaxVersions(txnVersions()))...)
}

// txnClients is how many transaction clients a Manager has; each partition
// uses one (partition.txnCl, round robin). A broker handles one request of
// a connection at a time, and kgo sends these requests on one connection
// per broker and client, so with one client the AddPartitionsToTxn, EndTxn
// and DescribeTransactions of every partition whose transactional IDs a
// coordinator holds wait behind each other's transaction log writes
// (acks=all). Each partition's own requests are sequential anyway; eight
// clients let eight partitions' requests be handled at once per broker.
const txnClients = 8

// TransactionalID is the destination transactional ID that replays the
// transactions of source producer srcPID on partition p. ':' cannot occur
// in topic or mirror names, so the prefix of a partition matches nothing
// else.
func TransactionalID(p Partition, srcPID int64) string {
	return transactionalIDPrefix(p.Mirror, p.Topic) + strconv.Itoa(int(p.Partition)) + ":" + strconv.FormatInt(srcPID, 10)
}

func transactionalIDPrefix(mirror, topic string) string {
	return "sidemirror:" + mirror + ":" + topic + ":"
}

// txnProducer is the destination transactional producer of one source
// producer ID on one partition.
type txnProducer struct {
	srcPID int64
	id     string // transactional ID
	pid    int64
	epoch  int16
	seq    int32 // base sequence of the next batch sent on the partition
	open   bool  // the partition is in the producer's ongoing transaction
	// shared: the producer ID and epoch were found on the destination,
	// not given to this run; an earlier owner may still hold them, so the
	// epoch is bumped after a marker, once nothing is open under the ID
	// (fenceTxnProducer).
	shared bool
	// readSeq: seq is not known yet; beginTxn reads it once the partition
	// is in the transaction (readSequence).
	readSeq bool
	// established: the local broker acknowledged a batch of this
	// producer ID and epoch in this run (lastAck: when), so it holds the
	// producer's state on the partition and refuses a batch that does not
	// follow the last one: the producer's next batches may be pipelined
	// (pipeline.roomFor).
	established bool
	lastAck     time.Time
	// add: the AddPartitionsToTxn sent ahead for the transaction the
	// partition's next batch of this producer begins (startAdd); nil:
	// none.
	add *txnAdd
}

// txnAdd is an AddPartitionsToTxn on its way, sent by a goroutine while the
// driver waits for appends of other producers or checks the previous
// marker; err is set when done is closed.
type txnAdd struct {
	done chan struct{}
	err  error
}

func (tp *txnProducer) String() string {
	return fmt.Sprintf("%s (producer ID %d, epoch %d)", tp.id, tp.pid, tp.epoch)
}

// maxIdleTxnProducers bounds the producers a partition remembers without an
// open transaction; forgotten ones are looked up again when needed.
const maxIdleTxnProducers = 256

// txnProducerFor returns the destination producer of source producer
// srcPID, looking it up on the destination the first time: a
// transactional ID the destination knows is continued with its producer ID
// and epoch (an ongoing transaction with the sequence the broker expects
// next), and its epoch is bumped after the run's first marker with it; an
// unknown one gets a new producer ID (InitProducerID).
//
// The caller has nothing in flight. An open transaction's next sequence
// comes from DescribeProducers; a request of that transaction from before
// (an earlier run's, or an earlier owner's, whose outcome was unknown) that
// the broker appends between the run's log end offset and that look-up
// would make the sequence disagree with the offset, so the log end offset
// is read again right after it: if it moved, the run starts over from it.
func (p *partition) txnProducerFor(ctx context.Context, pl *pipeline, srcPID int64) (*txnProducer, error) {
	return p.lookUpTxnProducer(ctx, pl, srcPID, false)
}

// lookUpTxnProducer is txnProducerFor; renew starts an ID with nothing open
// over with a new epoch instead of continuing it: for a run whose producer
// the destination fenced or forgot between transactions (beginTxn), whose
// epoch somebody else bumped.
func (p *partition) lookUpTxnProducer(ctx context.Context, pl *pipeline, srcPID int64, renew bool) (*txnProducer, error) {
	if tp := p.txns[srcPID]; tp != nil {
		return tp, nil
	}
	if len(p.txns) >= maxIdleTxnProducers {
		for k, tp := range p.txns {
			if !tp.open {
				delete(p.txns, k)
			}
		}
	}
	id := TransactionalID(p.key, srcPID)
	d, err := p.m.describeTxn(ctx, p.txnCl, id)
	if err != nil {
		return nil, err
	}
	tp := &txnProducer{srcPID: srcPID, id: id}
	switch {
	case d == nil || d.ProducerID < 0 || d.ProducerEpoch < 0:
		// Unknown (never used, or expired): nothing can be open under
		// it, so a new producer ID aborts nothing.
		mir, err := p.m.mirror(p.key.Mirror)
		if err != nil {
			return nil, err
		}
		if tp.pid, tp.epoch, err = p.m.initTxnProducer(ctx, p.txnCl, id, mir.settings.Load().TransactionTimeout, -1, -1); err != nil {
			return nil, err
		}
	case renew && d.State != "Ongoing" && !strings.HasPrefix(d.State, "Prepare"):
		mir, err := p.m.mirror(p.key.Mirror)
		if err != nil {
			return nil, err
		}
		timeout := mir.settings.Load().TransactionTimeout
		// Twice, as fenceTxnProducer does.
		tp.pid, tp.epoch, err = p.m.initTxnProducer(ctx, p.txnCl, id, timeout, d.ProducerID, d.ProducerEpoch)
		if err == nil {
			tp.pid, tp.epoch, err = p.m.initTxnProducer(ctx, p.txnCl, id, timeout, tp.pid, tp.epoch)
		}
		if err != nil {
			// PRODUCER_FENCED here: another bump came in between,
			// and the next attempt looks the ID up again.
			return nil, err
		}
	case d.State == "Empty" || d.State == "CompleteCommit" || d.State == "CompleteAbort" || d.State == "Ongoing":
		// Continued with the producer ID and epoch the destination
		// holds, open or not: the epoch is bumped once this run has
		// replayed a marker with it (fenceTxnProducer). Bumping it now
		// could abort a transaction that an earlier owner is opening at
		// this very moment: DescribeTransactions shows the state before
		// a transition whose log write is still pending, and the
		// InitProducerID that follows would then fence the transaction
		// the add opens and write an ABORT marker at the log end offset,
		// where the source has the transaction's first record.
		tp.pid, tp.epoch, tp.shared = d.ProducerID, d.ProducerEpoch, true
		tp.open = d.State == "Ongoing" && d.Topics.Lookup(p.key.Topic, p.key.Partition)
		if tp.open {
			if err := p.readSequence(ctx, pl, tp); err != nil {
				return nil, err
			}
		} else {
			// Read once the partition is in the transaction (beginTxn):
			// a broker may list only producers with a transaction open
			// on the partition.
			tp.readSeq = true
		}
		p.log.Info("continuing a destination transactional ID", zap.String("state", d.State),
			zap.String("transactional-id", id), zap.Int64("producer-id", tp.pid), zap.Int16("producer-epoch", tp.epoch),
			zap.Bool("partition-in-transaction", tp.open), zap.Int32("next-sequence", tp.seq))
	default: // PrepareCommit, PrepareAbort, PrepareEpochFence: markers being written
		return nil, fmt.Errorf("destination transaction %s is in state %s: retrying once it completes", id, d.State)
	}
	p.txns[srcPID] = tp
	return tp, nil
}

// readSequence sets tp's next sequence on the partition from the local
// broker's producer state, and checks that the log end offset is still the
// run's next offset: a batch of tp from before (an earlier run's or owner's,
// its outcome unknown) that lands between the two would make them disagree.
// The caller has nothing in flight.
func (p *partition) readSequence(ctx context.Context, pl *pipeline, tp *txnProducer) error {
	last, err := p.m.lastSequence(ctx, p.key, tp.pid, tp.epoch)
	if err != nil {
		return err
	}
	leo, err := p.localLEO(ctx)
	if err != nil {
		return err
	}
	if leo != pl.next {
		return fmt.Errorf("the destination log end offset of %s moved from %d to %d while transaction %s was looked up: "+
			"resuming from it", p.key, pl.next, leo, tp)
	}
	tp.seq, tp.readSeq = nextSequence(last, 1), false
	return nil
}

// beginTxn adds the partition to tp's transaction unless it is in it,
// waiting for the AddPartitionsToTxn sent ahead if there is one. A
// producer between transactions whose ID the destination no longer knows
// (transactional.id.expiration.ms passed while the source producer was
// idle) or that was fenced starts over with InitProducerID: it has nothing
// open that could be lost. Nothing of tp is in flight (the partition is not
// in its transaction), so nothing is in flight at all.
func (p *partition) beginTxn(pl *pipeline, tp *txnProducer) (*txnProducer, error) {
	if tp.open {
		return tp, nil
	}
	err := p.finishAdd(tp)
	if errors.Is(err, ErrTransactionAborted) {
		p.log.Info("destination transactional ID expired or fenced between transactions: initializing it again",
			zap.String("transactional-id", tp.id), zap.Error(err))
		delete(p.txns, tp.srcPID)
		if tp, err = p.lookUpTxnProducer(p.ctx, pl, tp.srcPID, true); err != nil {
			return nil, err
		}
		if !tp.open {
			err = p.m.addPartitionToTxn(p.ctx, p.txnCl, tp, p.key)
		}
	}
	if err != nil {
		return nil, err
	}
	tp.open = true
	if tp.readSeq {
		if err := p.readSequence(p.ctx, pl, tp); err != nil {
			return nil, err
		}
	}
	return tp, nil
}

// startAdd sends the AddPartitionsToTxn that puts the partition into tp's
// next transaction ahead, on a goroutine, unless the partition is in tp's
// transaction or an add is on its way. The caller has seen the batch of tp
// that begins that transaction at the partition's next offset: everything
// before it, tp's previous marker included, has been handled, so tp's
// previous transaction is complete and the add opens the one this batch
// belongs to, which is where beginTxn would have added the partition a
// few round trips later. The run waits for it before it ends (waitAdds).
func (p *partition) startAdd(tp *txnProducer) {
	if tp.open || tp.add != nil {
		return
	}
	a := &txnAdd{done: make(chan struct{})}
	req := *tp // the driver may change tp meanwhile
	if !p.m.goFunc(func() {
		defer close(a.done)
		a.err = p.m.addPartitionToTxn(p.ctx, p.txnCl, &req, p.key)
	}) {
		a.err = ErrClosed
		close(a.done)
	}
	tp.add = a
	p.pruneAdds()
	p.adds = append(p.adds, a)
}

// pruneAdds forgets the adds sent ahead that are answered: waitAdds need
// not wait for them, and a run that replays transactions for hours would
// otherwise keep one for each.
func (p *partition) pruneAdds() {
	p.adds = slices.DeleteFunc(p.adds, func(a *txnAdd) bool {
		select {
		case <-a.done:
			return true
		default:
			return false
		}
	})
}

// finishAdd waits for tp's add sent ahead, or adds the partition to tp's
// transaction now if none was.
func (p *partition) finishAdd(tp *txnProducer) error {
	a := tp.add
	if a == nil {
		return p.m.addPartitionToTxn(p.ctx, p.txnCl, tp, p.key)
	}
	select {
	case <-a.done:
	case <-p.ctx.Done():
		return p.ctx.Err() // waitAdds waits for it
	}
	tp.add = nil
	return a.err
}

// waitAdds waits until every add the run sent ahead is answered: a run
// ends with none on its way, as with nothing in flight.
func (p *partition) waitAdds() {
	for _, a := range p.adds {
		<-a.done
	}
	p.adds = nil
}

// addAhead starts the add of the next batch in upcoming (fetched data not
// handled yet), if inspecting that batch at offset next (the partition's
// next offset) finds a transactional batch to append there (actionTxn:
// framing and CRC checked, so the stream will append it rather than fail
// on it) of a producer the run has looked up (startAdd).
func (p *partition) addAhead(upcoming []byte, next int64) {
	b, err := nextBatch(upcoming)
	if err != nil || len(b) < batchHeaderSize || b[offMagic] != 2 || batchBase(b) != next {
		return
	}
	// The header first: the loop looks again after every append result.
	if attrs := binary.BigEndian.Uint16(b[offAttributes:]); attrs&attrTransactional == 0 || attrs&attrControl != 0 {
		return
	}
	tp := p.txns[int64(binary.BigEndian.Uint64(b[offProducerID:]))]
	if tp == nil || tp.open || tp.add != nil {
		return
	}
	if _, action, err := inspectBatch(b, next); err == nil && action == actionTxn {
		p.startAdd(tp)
	}
}

// submitTxnBatch appends b, a transactional batch of source producer
// srcPID holding the source offsets base..base+n-1 (n records, fillers of
// them copies; rebuilt: a batch rebuilt with its holes filled), in the
// destination transaction of that producer.
func (p *partition) submitTxnBatch(pl *pipeline, b []byte, srcPID, base int64, n, fillers int32, rebuilt bool) error {
	return p.submitTxn(pl, &appendItem{p: p, raw: b, base: base, last: base + int64(n) - 1,
		num: n, fillers: fillers, rebuilt: rebuilt}, srcPID)
}

// submitTxn appends it (raw, offsets, counts set), a transactional batch of
// source producer srcPID, in the destination transaction of that producer,
// with its ID, epoch and next sequence. A producer's consecutive batches
// are pipelined once the broker acknowledged one of them (pipeline.roomFor:
// the broker refuses a batch that does not follow the last, so a batch
// refused makes the ones behind it fail too, with nothing appended out of
// place); a batch of another producer waits until nothing is in flight.
func (p *partition) submitTxn(pl *pipeline, it *appendItem, srcPID int64) error {
	tp := p.txns[srcPID]
	if tp == nil {
		if err := pl.waitIdle(); err != nil {
			return err
		}
		var err error
		if tp, err = p.txnProducerFor(p.ctx, pl, srcPID); err != nil {
			return err
		}
	}
	p.startAdd(tp) // while what is in flight lands
	if err := pl.waitFor(func() bool { return pl.roomFor(tp) }); err != nil {
		return err
	}
	tp, err := p.beginTxn(pl, tp)
	if err != nil {
		return err
	}
	seq := tp.seq
	tp.seq = nextSequence(seq, it.num)
	rewriteBatch(it.raw, tp.pid, tp.epoch, seq)
	it.seqNext, it.txn = tp.seq, tp
	pl.submit(it)
	return nil
}

// replayMarker ends the destination transaction of the marker's source
// producer with the marker's outcome and waits until the destination completed the
// transaction, its marker at destination offset at (the marker's source offset, except in
// translate mode). A marker whose transaction has no
// records here (they were before the point mirroring started) ends an empty
// transaction that holds only this partition, which writes the marker just
// the same. upcoming is the fetched data after the marker: once the
// transaction is complete, the add of a transaction that its first batch
// begins goes out while the marker is checked (addAhead).
func (p *partition) replayMarker(pl *pipeline, rb *kmsg.RecordBatch, at int64, upcoming []byte) error {
	if err := pl.waitIdle(); err != nil {
		return err
	}
	commit, err := markerCommits(rb)
	if err != nil {
		return err
	}
	if pl.next != at {
		return fmt.Errorf("%w: transaction marker of source offset %d due at destination offset %d, destination log end offset %d",
			ErrExactness, rb.FirstOffset, at, pl.next)
	}
	tp := p.txns[rb.ProducerID]
	if tp == nil {
		if tp, err = p.txnProducerFor(p.ctx, pl, rb.ProducerID); err != nil {
			return err
		}
	}
	if !tp.open && tp.add == nil {
		p.log.Info("transaction marker without records on this partition: replaying an empty transaction",
			zap.Int64("offset", at), zap.Int64("source-producer-id", rb.ProducerID))
	}
	idle := time.Now()
	if tp, err = p.beginTxn(pl, tp); err != nil {
		return err
	}
	added := time.Now()
	if err := p.m.endTxn(p.ctx, p.txnCl, tp, commit); err != nil {
		return err
	}
	ended := time.Now()
	tp.open = false
	completed := func() {
		if !tp.shared { // else the epoch is bumped first
			p.addAhead(upcoming, at+1)
		}
	}
	if err := p.waitTxnComplete(tp, at, completed); err != nil {
		return err
	}
	if tp.shared {
		if err := p.fenceTxnProducer(tp, at); err != nil {
			return err
		}
	}
	pl.leo, pl.next = at+1, at+1
	p.setLEO(at + 1 + p.extra)
	if ce := p.log.Check(zap.DebugLevel, "transaction marker replayed"); ce != nil {
		ce.Write(zap.Int64("offset", at), zap.Bool("commit", commit), zap.Duration("add-wait", added.Sub(idle)),
			zap.Duration("end-txn", ended.Sub(added)), zap.Duration("complete", time.Since(ended)))
	}
	outcome := "abort"
	if commit {
		outcome = "commit"
	}
	p.m.met.markers.WithLabelValues(p.key.Mirror, p.key.Topic, outcome).Inc()
	return nil
}

// waitMarker polls the local log end offset until the marker written for
// offset at is in the log.
func (p *partition) waitMarker(at int64) error {
	ctx, cancel := context.WithTimeout(p.ctx, markerTimeout)
	defer cancel()
	d := time.Millisecond
	for {
		leo, err := p.localLEO(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, errNotLeader):
			// retry below
		case err != nil:
			return err
		case leo == at+1:
			return nil
		case leo > at+1:
			return fmt.Errorf("%w: after the transaction marker for source offset %d the destination log end offset is %d; "+
				"another writer appended to %s", ErrExactness, at, leo, p.key)
		}
		if !sleepCtx(ctx, d) {
			if p.ctx.Err() != nil {
				return p.ctx.Err()
			}
			return fmt.Errorf("the destination did not write the transaction marker for source offset %d within %s", at, markerTimeout)
		}
		d = min(2*d, 50*time.Millisecond)
	}
}

// waitTxnComplete waits until the destination's transaction coordinator
// has recorded tp's transaction as complete, and then checks that the
// partition holds the one marker at offset at and nothing after it. The
// coordinator writes the markers and then CompleteCommit or CompleteAbort;
// until then it may send a marker again (after REQUEST_TIMED_OUT or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND from the partition leader, or when the
// coordinator moved to another broker and reloaded the transaction in
// PrepareCommit or PrepareAbort), and Kafka's partitions append such a
// repeat as a second control batch. So the partition appends nothing else
// while the transaction is being completed: a repeated marker is then found
// right behind the first, before any later record was shifted, and the
// partition fails with a reason that names it.
//
// The first look comes after about three quarters of how long completions
// took lately (p.completion, a moving average), then the looks back off
// from an eighth of it: a coordinator takes about the same time for every
// transaction (its markers' writes, then CompleteCommit's), so most
// transactions take one look. completed runs once the transaction is
// complete, before the log end offset is checked.
func (p *partition) waitTxnComplete(tp *txnProducer, at int64, completed func()) error {
	ctx, cancel := context.WithTimeout(p.ctx, txnCompleteTimeout)
	defer cancel()
	ended := time.Now()
	first, d := p.completion*3/4, max(p.completion/8, time.Millisecond)
	if first > 0 && !sleepCtx(ctx, min(first, maxFirstCompletionLook)) {
		return p.ctx.Err()
	}
	for {
		sent := time.Now()
		done, err := p.txnCompleted(ctx, tp, at)
		if err != nil && !retriableTxnError(err) {
			return err
		}
		if done {
			p.noteCompletion(sent.Sub(ended))
			break
		}
		if !sleepCtx(ctx, d) {
			if p.ctx.Err() != nil {
				return p.ctx.Err()
			}
			return fmt.Errorf("the destination did not complete transaction %s within %s after its marker at offset %d (last: %v)",
				tp, txnCompleteTimeout, at, err)
		}
		d = min(2*d, 50*time.Millisecond)
	}
	completed()
	// Complete means every marker was appended (acks=all): this one is in
	// the log, and nothing will be appended behind it but what comes next.
	leo, err := p.localLEO(p.ctx)
	switch {
	case err != nil:
		return err
	case leo == at:
		return p.waitMarker(at) // not expected; waitMarker tells what it finds
	case leo > at+1:
		// The coordinator wrote the marker again (repeats.go).
		return p.absorbRepeats(tp, at, leo)
	case leo != at+1:
		return fmt.Errorf("%w: the destination log end offset of %s is %d after the transaction marker at offset %d of %s",
			ErrExactness, p.key, leo, at, tp)
	}
	return nil
}

// maxFirstCompletionLook bounds the wait before the first look at a
// transaction's completion, whatever the moving average says.
const maxFirstCompletionLook = 50 * time.Millisecond

// noteCompletion adds a transaction that was seen complete took after
// EndTxn to the moving average of completions (1/8 weight). A sample is
// taken as at most twice the average: one transaction that waited for a
// coordinator to move does not delay the first look of the next ones, while
// a destination that became slower is followed within a few transactions.
func (p *partition) noteCompletion(took time.Duration) {
	if p.completion == 0 {
		p.completion = took
		return
	}
	took = min(took, 2*p.completion)
	p.completion += (took - p.completion) / 8
}

// txnCompleteTimeout bounds the wait for the destination to complete a
// transaction after EndTxn: long enough for a transaction coordinator to
// move to another broker and reload its log.
const txnCompleteTimeout = 5 * time.Minute

// retriableTxnError tells the errors txnRetry waits out.
func retriableTxnError(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator)
}

// txnCompleted asks the destination once whether tp's transaction, whose
// marker is due at offset at, is complete.
func (p *partition) txnCompleted(ctx context.Context, tp *txnProducer, at int64) (bool, error) {
	d, err := p.m.describeTxn(ctx, p.txnCl, tp.id)
	switch {
	case err != nil:
		return false, err
	case d == nil, d.ProducerID != tp.pid, d.ProducerEpoch != tp.epoch:
		return true, nil // expired, or the epoch moved on: no longer this transaction
	case d.State == "PrepareCommit", d.State == "PrepareAbort":
		return false, nil // markers still being written
	}
	// Complete, or Ongoing again with this epoch: an earlier owner of a
	// continued ID has opened the next transaction (fenceTxnProducer then
	// leaves the epoch shared); the log end offset check follows.
	return true, nil
}

// fenceTxnProducer bumps the epoch of tp, continued from the destination
// and with its transaction now complete, its marker at offset at: an
// earlier owner that may still hold the old epoch is fenced before the
// transactional ID begins another transaction.
//
// InitProducerID aborts whatever is open under the ID, and a transaction
// that an earlier owner opened meanwhile (its AddPartitionsToTxn sent ahead
// for the next transaction, late) holds this partition: the abort would
// write an ABORT marker at the log end offset, where the source has the
// next transaction's first record. So the epoch is bumped only while the
// destination shows the ID with nothing open and nothing in transition
// (InitProducerID answers CONCURRENT_TRANSACTIONS while an add's log write
// is pending, which DescribeTransactions does not show); otherwise it stays
// shared and the next marker tries again. An add that lands between the
// look and the bump is not seen in time: the log end offset read after the
// bump finds its marker, and the partition fails with the reason.
func (p *partition) fenceTxnProducer(tp *txnProducer, at int64) error {
	mir, err := p.m.mirror(p.key.Mirror)
	if err != nil {
		return err
	}
	d, err := p.m.describeTxn(p.ctx, p.txnCl, tp.id)
	if err != nil {
		return err
	}
	switch {
	case d == nil || d.ProducerID != tp.pid || d.ProducerEpoch != tp.epoch:
		// Expired, or bumped by another holder: the next use looks it up.
		delete(p.txns, tp.srcPID)
		return nil
	case d.State != "Empty" && d.State != "CompleteCommit" && d.State != "CompleteAbort":
		p.keepShared(tp, d.State)
		return nil
	}
	timeout := mir.settings.Load().TransactionTimeout
	pid, epoch, err := p.m.initTxnProducerOnce(p.ctx, p.txnCl, tp.id, timeout, tp.pid, tp.epoch)
	if errors.Is(err, kerr.ConcurrentTransactions) {
		p.keepShared(tp, "a transition in progress")
		return nil
	}
	if err == nil {
		// Kafka answers an InitProducerID that expects the epoch just
		// before the current one as a retry of the bump (with the current
		// epoch): after a second bump a late one of an earlier owner,
		// expecting the old epoch, is refused.
		pid, epoch, err = p.m.initTxnProducer(p.ctx, p.txnCl, tp.id, timeout, pid, epoch)
	}
	if err != nil {
		// The marker is in place; the next attempt resumes after it and
		// looks the ID up again.
		delete(p.txns, tp.srcPID)
		return err
	}
	leo, err := p.localLEO(p.ctx)
	if err != nil {
		delete(p.txns, tp.srcPID)
		return err
	}
	if leo != at+1 {
		return fmt.Errorf("%w: the destination log end offset of %s is %d after the epoch of %s was bumped, want %d: "+
			"the destination wrote a control batch the source does not have (the bump aborted a transaction an earlier owner had opened, "+
			"or a coordinator wrote a marker again)",
			ErrExactness, p.key, leo, tp, at+1)
	}
	p.log.Info("fenced earlier holders of a continued destination transactional ID",
		zap.String("transactional-id", tp.id), zap.Int64("producer-id", pid), zap.Int16("producer-epoch", epoch),
		zap.Int16("previous-epoch", tp.epoch))
	tp.pid, tp.epoch, tp.seq, tp.shared, tp.established = pid, epoch, 0, false, false
	return nil
}

// keepShared notes that tp's epoch stays shared past a marker: the
// destination shows the ID in state (another holder's transaction open or
// in transition).
func (p *partition) keepShared(tp *txnProducer, state string) {
	p.log.Info("the epoch of a continued destination transactional ID stays shared: another holder is using it",
		zap.String("transactional-id", tp.id), zap.Int64("producer-id", tp.pid), zap.Int16("producer-epoch", tp.epoch),
		zap.String("state", state))
}

// markerCommits reads the control record of a marker batch: true for
// COMMIT, false for ABORT. Kafka writes markers uncompressed, one record
// whose key is a version (int16) and a type (int16).
func markerCommits(rb *kmsg.RecordBatch) (bool, error) {
	if rb.Attributes&attrCompression != 0 || rb.NumRecords != 1 {
		return false, fmt.Errorf("%w: control batch at offset %d is compressed or holds %d records",
			ErrCorruptBatch, rb.FirstOffset, rb.NumRecords)
	}
	var r kmsg.Record
	if err := r.ReadFrom(rb.Records); err != nil || len(r.Key) < 4 {
		return false, fmt.Errorf("%w: control record at offset %d cannot be read", ErrCorruptBatch, rb.FirstOffset)
	}
	switch typ := int16(r.Key[2])<<8 | int16(r.Key[3]); typ {
	case 0:
		return false, nil
	case 1:
		return true, nil
	default:
		return false, fmt.Errorf("%w: control record at offset %d has type %d, not a transaction marker",
			ErrCorruptBatch, rb.FirstOffset, typ)
	}
}

// txnRetry runs op until it succeeds, fails for good, or the destination
// keeps answering a retriable error for 30 s: CONCURRENT_TRANSACTIONS (the
// previous transaction's markers are still being written) and coordinator
// moves are waited out.
func txnRetry(ctx context.Context, what string, op func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d := 5 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		if nr, ok := errors.AsType[*noRetry](err); ok {
			return fmt.Errorf("%s: %w", what, nr.err)
		}
		if !retriableTxnError(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !sleepCtx(ctx, d) {
			return fmt.Errorf("%s: %w (%w)", what, err, ctx.Err())
		}
		d = min(2*d, 200*time.Millisecond)
	}
}

// noRetry is an error of op that txnRetry returns at once although it is
// one it waits out otherwise.
type noRetry struct{ err error }

func (e *noRetry) Error() string { return e.err.Error() }

// txnFenced maps the errors that mean the destination ended or fenced a
// replayed transaction to ErrTransactionAborted.
func txnFenced(err error, tp *txnProducer) error {
	for _, fenced := range []*kerr.Error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidTxnState,
		kerr.InvalidProducerIDMapping, kerr.TransactionalIDNotFound, kerr.TransactionAbortable} {
		if errors.Is(err, fenced) {
			return fmt.Errorf("%w: transaction %s: %w (did it stay open longer than mirror.transaction.timeout.ms?); "+
				"its records may be aborted on the destination while the source commits them: --recover resumes after it, "+
				"re-creating the topic restores it", ErrTransactionAborted, tp, err)
		}
	}
	return err
}

// describeTxn returns the destination state of transactional ID id, nil if
// the coordinator does not know it; cl is one of the Manager's transaction
// clients (txnClients).
func (m *Manager) describeTxn(ctx context.Context, cl *kgo.Client, id string) (*kadm.DescribedTransaction, error) {
	var d kadm.DescribedTransaction
	err := txnRetry(ctx, "destination DescribeTransactions("+id+")", func() error {
		ds, err := kadm.NewClient(cl).DescribeTransactions(ctx, id)
		if err != nil {
			return err
		}
		d, err = ds.On(id, nil)
		if err == nil {
			err = d.Err
		}
		return err
	})
	if errors.Is(err, kerr.TransactionalIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// initTxnProducer gets a producer ID and a new epoch for transactional ID id
// (InitProducerID), which also ends whatever the ID had open. expPID and
// expEpoch, unless -1, are the producer ID and epoch the caller last saw:
// the destination refuses the bump (PRODUCER_FENCED) when another one came
// in between.
func (m *Manager) initTxnProducer(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration, expPID int64, expEpoch int16) (int64, int16, error) {
	return m.initTxn(ctx, cl, id, timeout, expPID, expEpoch, true)
}

// initTxnProducerOnce is initTxnProducer that returns CONCURRENT_TRANSACTIONS
// instead of waiting it out: the transition in progress may be an add that
// opens a transaction, which a retry would then abort.
func (m *Manager) initTxnProducerOnce(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration, expPID int64, expEpoch int16) (int64, int16, error) {
	return m.initTxn(ctx, cl, id, timeout, expPID, expEpoch, false)
}

func (m *Manager) initTxn(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration, expPID int64, expEpoch int16, waitConcurrent bool) (int64, int16, error) {
	var pid int64
	var epoch int16
	err := txnRetry(ctx, "destination InitProducerID("+id+")", func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = expPID, expEpoch
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if !waitConcurrent && errors.Is(err, kerr.ConcurrentTransactions) {
				return &noRetry{err}
			}
			return err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return nil
	})
	if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return 0, 0, fmt.Errorf("%w (%v)", ErrNotSuperUser, err)
	}
	if errors.Is(err, kerr.InvalidTransactionTimeout) {
		return 0, 0, fmt.Errorf("%w: %v: the destination brokers need transaction.max.timeout.ms >= %d (or lower the mirror's mirror.transaction.timeout.ms)",
			ErrAppendRejected, err, timeout.Milliseconds())
	}
	if err != nil {
		return 0, 0, err
	}
	m.log.Info("transactional producer initialized", zap.String("transactional-id", id),
		zap.Int64("producer-id", pid), zap.Int16("producer-epoch", epoch))
	return pid, epoch, nil
}

// lastSequence returns the last sequence the local broker recorded for
// producer pid with epoch on p, -1 if none.
func (m *Manager) lastSequence(ctx context.Context, p Partition, pid int64, epoch int16) (int32, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	t := kmsg.NewDescribeProducersRequestTopic()
	t.Topic = p.Topic
	t.Partitions = []int32{p.Partition}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, m.localBroker())
	if err != nil {
		return 0, fmt.Errorf("destination DescribeProducers for %s: %w", p, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != p.Topic || rp.Partition != p.Partition {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, localError("destination DescribeProducers", p, err)
			}
			for _, ap := range rp.ActiveProducers {
				if ap.ProducerID == pid && ap.ProducerEpoch == int32(epoch) {
					return ap.LastSequence, nil
				}
			}
			return -1, nil
		}
	}
	return 0, fmt.Errorf("destination DescribeProducers for %s: %w", p, errMissingAnswer)
}

// addPartitionToTxn adds p to tp's transaction through cl.
func (m *Manager) addPartitionToTxn(ctx context.Context, cl *kgo.Client, tp *txnProducer, p Partition) error {
	err := txnRetry(ctx, "destination AddPartitionsToTxn("+tp.id+")", func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = tp.id, tp.pid, tp.epoch
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = p.Topic, []int32{p.Partition}
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return txnFenced(err, tp)
}

// endTxn commits or aborts tp's transaction through cl.
func (m *Manager) endTxn(ctx context.Context, cl *kgo.Client, tp *txnProducer, commit bool) error {
	return txnFenced(endTxn(ctx, cl, tp.id, tp.pid, tp.epoch, commit), tp)
}

// endTxn commits or aborts the transaction of transactional ID id through
// cl, a client made by newTxnClient.
func endTxn(ctx context.Context, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) error {
	return txnRetry(ctx, fmt.Sprintf("destination EndTxn(%s, commit=%v)", id, commit), func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// AbortTransactions aborts the open destination transactions that replay
// source transactions into topics of mirror (DESIGN.md D9: stop aborts
// them), and waits until their markers are written. It uses cl, a client of
// the destination cluster, and returns the transactional IDs it aborted.
func AbortTransactions(ctx context.Context, cl *kgo.Client, mirror string, topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	tcl, err := newTxnClient(cl)
	if err != nil {
		return nil, err
	}
	defer tcl.Close()
	adm := kadm.NewClient(tcl)
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	var partial error // coordinators that did not answer: their transactions are left to the timeout
	if _, ok := errors.AsType[*kadm.ShardErrors](err); ok {
		partial = fmt.Errorf("destination ListTransactions: some transaction coordinators did not answer: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("destination ListTransactions: %w", err)
	}
	var ids []string
	for _, id := range listed.TransactionalIDs() {
		for _, t := range topics {
			if strings.HasPrefix(id, transactionalIDPrefix(mirror, t)) {
				ids = append(ids, id)
				break
			}
		}
	}
	if len(ids) == 0 {
		return nil, partial
	}
	ds, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("destination DescribeTransactions: %w", err)
	}
	var aborted []string
	for _, id := range ids {
		d, err := ds.On(id, nil)
		if err == nil {
			err = d.Err
		}
		if err != nil {
			return aborted, fmt.Errorf("destination DescribeTransactions(%s): %w", id, err)
		}
		if d.State != "Ongoing" {
			continue
		}
		if err := endTxn(ctx, tcl, id, d.ProducerID, d.ProducerEpoch, false); err != nil {
			return aborted, err
		}
		aborted = append(aborted, id)
	}
	// EndTxn returns once the abort is decided; the markers follow.
	for _, id := range aborted {
		err := txnRetry(ctx, "waiting for the abort markers of "+id, func() error {
			ds, err := adm.DescribeTransactions(ctx, id)
			if err != nil {
				return err
			}
			d, err := ds.On(id, nil)
			if err == nil && d.State == "PrepareAbort" {
				err = kerr.ConcurrentTransactions // not done yet
			}
			return err
		})
		if err != nil && !errors.Is(err, kerr.TransactionalIDNotFound) {
			return aborted, err
		}
	}
	return aborted, partial
}

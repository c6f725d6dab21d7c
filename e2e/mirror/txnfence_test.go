package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// txnV1Client is a destination client with the transaction protocol the
// sidecars replay with (InitProducerID v4, AddPartitionsToTxn v3, EndTxn v4):
// the requests a frozen sidecar would still send.
func txnV1Client(t *testing.T) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.InitProducerID.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	return newClient(t, env.Destination, testbed.Admin, kgo.MaxVersions(v))
}

// describeMirrorTxns returns the destination state of the transactional
// IDs of mirror, by ID.
func describeMirrorTxns(t *testing.T, mirror string) map[string]kadm.DescribedTransaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("ListTransactions on the destination: %v", err)
	}
	var ids []string
	for _, id := range listed.TransactionalIDs() {
		if strings.HasPrefix(id, "sidemirror:"+mirror+":") {
			ids = append(ids, id)
		}
	}
	ds, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatalf("DescribeTransactions on the destination: %v", err)
	}
	out := map[string]kadm.DescribedTransaction{}
	for _, id := range ids {
		d, err := ds.On(id, nil)
		if err == nil {
			err = d.Err
		}
		if err != nil {
			t.Fatalf("DescribeTransactions(%s): %v", id, err)
		}
		out[id] = d
	}
	return out
}

// staleRequests sends what the owner of a destination transaction that
// held producer pid at epoch would send when it wakes: EndTxn (commit) and
// AddPartitionsToTxn for partition p of topic, and, with initToo,
// InitProducerID expecting that epoch. It returns their errors.
func staleRequests(t *testing.T, cl *kgo.Client, d kadm.DescribedTransaction, topic string, p int32, initToo bool) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = d.TxnID, d.ProducerID, d.ProducerEpoch, true
	if resp, err := end.RequestWith(ctx, cl); err != nil {
		t.Fatalf("EndTxn(%s): %v", d.TxnID, err)
	} else {
		errs = append(errs, kerr.ErrorForCode(resp.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = d.TxnID, d.ProducerID, d.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{p}
	add.Topics = append(add.Topics, at)
	resp, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AddPartitionsToTxn(%s): %v", d.TxnID, err)
	}
	addErr := kerr.ErrorForCode(resp.ErrorCode)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if e := kerr.ErrorForCode(rp.ErrorCode); e != nil && addErr == nil {
				addErr = e
			}
		}
	}
	errs = append(errs, addErr)
	if initToo {
		id := d.TxnID
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
		init.ProducerID, init.ProducerEpoch = d.ProducerID, d.ProducerEpoch
		iresp, err := init.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("InitProducerID(%s): %v", d.TxnID, err)
		}
		errs = append(errs, kerr.ErrorForCode(iresp.ErrorCode))
	}
	return errs
}

func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// TestFrozenSidecarMidTransaction freezes a sidecar (SIGSTOP) while a
// source transaction is half appended to the partitions it drives. Their
// new owners continue the open destination transactions with the same
// producer ID and epoch; the source commits and begins its next
// transaction. What the frozen sidecar still holds, the old producer ID and
// epoch, must be refused by the destination's transaction coordinators
// (EndTxn, AddPartitionsToTxn, InitProducerID): had the next transaction
// kept the epoch, its EndTxn would write a marker where the source has
// records. The sidecar is thawed, and the dumps, read_committed and
// read_uncommitted, and the markers must equal the source's.
func TestFrozenSidecarMidTransaction(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, partitions = "txn-frozen", "txn-frozen", 3
	victim := env.Sidecars.Sidecar(2)
	before, led := mirrorLedBy(t, mirror, topic, partitions, 300, 61, victim.BrokerID)

	src := openSourceTxn(t, "e2e-txn-frozen", topic, partitions, 20)
	waitOpenTxnReplayed(t, mirror, topic, partitions, time.Minute)
	held := describeMirrorTxns(t, mirror)
	t.Cleanup(victim.Thaw)
	victim.Freeze()
	wait.For(t, time.Minute, fmt.Sprintf("leadership of %s to leave broker %d", topic, victim.BrokerID), func() bool {
		return len(ledBy(destMetadata(t, topic), victim.BrokerID)) == 0
	})

	// The source goes on: more records in the open transaction, its commit,
	// and the next transaction, left open.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for p := range int32(partitions) {
		recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "after the freeze %d", p)})
	}
	if err := src.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := src.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i] = &kgo.Record{Partition: int32(i), Value: fmt.Appendf(nil, "next transaction %d", i)}
	}
	if err := src.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitOpenTxnReplayed(t, mirror, topic, partitions, 2*time.Minute)

	cl := txnV1Client(t)
	for _, p := range led {
		id := fmt.Sprintf("sidemirror:%s:%s:%d:", mirror, topic, p)
		for tid, d := range held {
			if !strings.HasPrefix(tid, id) {
				continue
			}
			ends := endOffsets(t, env.Destination, topic)
			errs := staleRequests(t, cl, d, topic, p, false)
			if !fenced(errs[0]) || !fenced(errs[1]) {
				t.Fatalf("%s-%d: the frozen owner's EndTxn and AddPartitionsToTxn with producer %d epoch %d: %v, want them fenced",
					topic, p, d.ProducerID, d.ProducerEpoch, errs)
			}
			if now := endOffsets(t, env.Destination, topic); !maps.Equal(now, ends) {
				t.Fatalf("end offsets changed by the frozen owner's requests: %v -> %v", ends, now)
			}
			t.Logf("%s-%d: %s epoch %d refused: %v", topic, p, tid, d.ProducerEpoch, errs)
		}
	}

	logOffset := fileSize(t, victim.LogPath())
	victim.Thaw()
	wait.For(t, 30*time.Second, "the thawed sidecar to stop driving its partitions", func() bool {
		return len(stoppedAfter(t, victim.LogPath(), logOffset, topic)) == len(led)
	})
	waitOriginalOrder(t, topic, before, time.Minute)
	if err := src.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produceVariety(t, env.Source, topic, 100, 62)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	// With nothing open, an InitProducerID expecting the old epoch is
	// refused as well (it would otherwise bump past the owner).
	for _, p := range led {
		id := fmt.Sprintf("sidemirror:%s:%s:%d:", mirror, topic, p)
		for tid, d := range held {
			if strings.HasPrefix(tid, id) {
				if errs := staleRequests(t, cl, d, topic, p, true); !fenced(errs[2]) {
					t.Fatalf("%s-%d: InitProducerID expecting producer %d epoch %d: %v, want it fenced", topic, p, d.ProducerID, d.ProducerEpoch, errs)
				}
			}
		}
	}
	waitCaughtUp(t, mirror, topic, time.Minute)
	for p := range int32(partitions) {
		if commits, aborts := compareTransactional(t, topic, p); commits != 2 || aborts != 0 {
			t.Fatalf("%s-%d holds %d commit and %d abort markers, want 2 commits", topic, p, commits, aborts)
		}
		compareDumps(t, topic, p, "-X", readCommitted)
		compareDumps(t, topic, p, "-X", readUncommitted)
	}
	if ids := openMirrorTxns(t, mirror); len(ids) != 0 {
		t.Fatalf("destination transactions still open after the commit: %v", ids)
	}
}

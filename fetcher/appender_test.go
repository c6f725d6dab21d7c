package fetcher

import "testing"

// TestTransactionalBatchGoesAlone checks that a produce request holding a
// transactional batch holds nothing else and names its transactional ID,
// and that partitions skipped meanwhile keep their turn.
func TestTransactionalBatchGoesAlone(t *testing.T) {
	a := newAppender(&Manager{cfg: defaultCfg()})
	part := func(n int32) *partition { return &partition{key: Partition{Mirror: "m", Topic: "t", Partition: n}} }
	p0, p1, p2 := part(0), part(1), part(2)
	tp := &txnProducer{id: "sidemirror:m:t:1:7"}
	a.submit(&appendItem{p: p0, raw: []byte("a0")})
	a.submit(&appendItem{p: p1, raw: []byte("t1"), txn: tp})
	a.submit(&appendItem{p: p2, raw: []byte("a2")})
	a.submit(&appendItem{p: p0, raw: []byte("b0")})

	type want struct {
		parts []int32
		txnID string
	}
	for i, w := range []want{{[]int32{0, 2}, ""}, {[]int32{1}, tp.id}, {[]int32{0}, ""}} {
		req, items, _ := a.next(maxProduceRequestBytes, nil)
		var got []int32
		for _, it := range items {
			got = append(got, it.p.key.Partition)
		}
		id := ""
		if req != nil && req.TransactionID != nil {
			id = *req.TransactionID
		}
		if len(got) != len(w.parts) || id != w.txnID {
			t.Fatalf("request %d: partitions %v, transactional ID %q; want %v, %q", i, got, id, w.parts, w.txnID)
		}
		for j := range got {
			if got[j] != w.parts[j] {
				t.Fatalf("request %d: partitions %v, want %v", i, got, w.parts)
			}
		}
	}
	if req, items, _ := a.next(maxProduceRequestBytes, nil); req != nil || len(items) != 0 {
		t.Fatalf("a fourth request with %d items", len(items))
	}
}

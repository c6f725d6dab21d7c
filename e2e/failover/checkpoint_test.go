package failover

import (
	"encoding/binary"
	"testing"
)

func TestParseCheckpoint(t *testing.T) {
	s := func(v string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(v))), v...) }
	key := append(append(s("billing"), s("orders")...), 0, 0, 0, 2)
	value := binary.BigEndian.AppendUint16(nil, 0)
	value = binary.BigEndian.AppendUint64(value, 1200)
	value = binary.BigEndian.AppendUint64(value, 1101)
	value = append(value, s("")...)
	c, err := ParseCheckpoint(key, value)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Checkpoint{Group: "billing", Topic: "orders", Partition: 2, Upstream: 1200, Downstream: 1101}); c != want {
		t.Fatalf("ParseCheckpoint = %+v, want %+v", c, want)
	}
	if _, err := ParseCheckpoint(key[:len(key)-1], value); err == nil {
		t.Fatal("a truncated key parsed")
	}
	if _, err := ParseCheckpoint(key, value[:10]); err == nil {
		t.Fatal("a truncated value parsed")
	}
}

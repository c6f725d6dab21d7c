package failover

import (
	"encoding/binary"
	"fmt"
)

// Checkpoint is one record of MirrorMaker 2's checkpoints topic
// (<source alias>.checkpoints.internal on the target): the group's
// committed offset on the source (Upstream) and MM2's translation of it on
// the target (Downstream).
type Checkpoint struct {
	Group      string
	Topic      string
	Partition  int32
	Upstream   int64
	Downstream int64
}

// ParseCheckpoint decodes a checkpoint record. The key is the group, the
// topic (each an int16 length and UTF-8 bytes) and the partition (int32);
// the value an int16 version (0), the upstream and downstream offsets
// (int64 each) and a metadata string; all big-endian.
func ParseCheckpoint(key, value []byte) (Checkpoint, error) {
	var c Checkpoint
	str := func(b []byte) (string, []byte, error) {
		if len(b) < 2 {
			return "", nil, fmt.Errorf("short string")
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", nil, fmt.Errorf("string of %d bytes in %d", n, len(b)-2)
		}
		return string(b[2 : 2+n]), b[2+n:], nil
	}
	var err error
	rest := key
	if c.Group, rest, err = str(rest); err != nil {
		return c, fmt.Errorf("checkpoint key group: %w", err)
	}
	if c.Topic, rest, err = str(rest); err != nil {
		return c, fmt.Errorf("checkpoint key topic: %w", err)
	}
	if len(rest) != 4 {
		return c, fmt.Errorf("checkpoint key: %d bytes after the topic, want 4", len(rest))
	}
	c.Partition = int32(binary.BigEndian.Uint32(rest))
	if len(value) < 18 {
		return c, fmt.Errorf("checkpoint value of %d bytes", len(value))
	}
	if v := binary.BigEndian.Uint16(value); v != 0 {
		return c, fmt.Errorf("checkpoint value version %d, want 0", v)
	}
	c.Upstream = int64(binary.BigEndian.Uint64(value[2:]))
	c.Downstream = int64(binary.BigEndian.Uint64(value[10:]))
	return c, nil
}

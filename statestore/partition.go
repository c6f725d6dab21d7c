package statestore

import (
	"math"
	"unicode/utf16"
)

// PartitionFor returns the __mirror_state partition whose leader coordinates
// mirror, the way Kafka places consumer groups and transactional IDs:
// Utils.abs(mirror.hashCode()) % numPartitions, with Java's String.hashCode.
// Every sidecar must agree on it, and so must any Java tool that locates a
// mirror's coordinator. It panics if numPartitions is not positive.
func PartitionFor(mirror string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic("statestore: PartitionFor with a partition count that is not positive")
	}
	return javaAbs(javaHashCode(mirror)) % numPartitions
}

// javaHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over
// the UTF-16 code units of s, in wrapping int32 arithmetic. Invalid UTF-8
// counts as U+FFFD, as Kafka's UTF-8 decoding of a name would.
func javaHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// javaAbs is Kafka's Utils.abs: the absolute value, except that MinInt32,
// whose absolute value does not fit, maps to 0.
func javaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	default:
		return n
	}
}

package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// Encoding helpers for Kafka's own APIs (DescribeConfigs,
// IncrementalAlterConfigs), whose early versions are not flexible: int16
// string lengths and int32 array lengths, no tagged fields. The mirror APIs
// are flexible in every version and use the compact helpers in codec.go.

// appendStr appends a string, compact when flexible.
func appendStr(dst []byte, s string, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactString(dst, s)
	}
	return kbin.AppendString(dst, s)
}

// appendNullableStr appends a nullable string, compact when flexible.
func appendNullableStr(dst []byte, s *string, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactNullableString(dst, s)
	}
	return kbin.AppendNullableString(dst, s)
}

// appendLen appends an array length, compact when flexible.
func appendLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}

// appendNullableLen appends a nullable array length, compact when flexible.
func appendNullableLen(dst []byte, n int, isNil, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactNullableArrayLen(dst, n, isNil)
	}
	return kbin.AppendNullableArrayLen(dst, n, isNil)
}

// appendTagsIf appends an empty tagged-field section when flexible.
func appendTagsIf(dst []byte, flexible bool) []byte {
	if flexible {
		return appendNoTags(dst)
	}
	return dst
}

// str reads a string, compact when flexible. A null is malformed.
func (d *decoder) str(flexible bool) string {
	if flexible {
		return d.string()
	}
	return d.b.String()
}

// nullableStr reads a nullable string, compact when flexible.
func (d *decoder) nullableStr(flexible bool) *string {
	if flexible {
		return d.nullableString()
	}
	return d.b.NullableString()
}

// arrayLenV reads an array length, compact when flexible: -1 for null, else
// the element count, bounded by the bytes left.
func (d *decoder) arrayLenV(flexible bool) int {
	if flexible {
		return d.arrayLen()
	}
	return d.legacyArrayLen()
}

// nullableStringsV reads a nullable array of strings: null reads as nil,
// empty as an empty non-nil slice.
func (d *decoder) nullableStringsV(flexible bool) []string {
	n := d.arrayLenV(flexible)
	if n < 0 {
		return nil
	}
	out := make([]string, 0, min(n, maxPrealloc))
	for i := 0; i < n && d.ok(); i++ {
		out = append(out, d.str(flexible))
	}
	return out
}

// tagsIf skips a tagged-field section (none is known) when flexible.
func (d *decoder) tagsIf(flexible bool) {
	if flexible {
		d.tags(nil)
	}
}

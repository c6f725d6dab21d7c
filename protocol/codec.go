package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// This file holds the encoding helpers shared by the message files. Writing
// uses kbin's Append functions directly; reading goes through decoder, a
// kbin.Reader that also remembers the first structural error, bounds array
// lengths by the bytes left and copies byte slices out of the frame.

// versioned carries a message's version. It is embedded in every request and
// response so that they implement Version and SetVersion.
type versioned struct{ version int16 }

// Version returns the version the message is encoded and decoded with.
func (v *versioned) Version() int16 { return v.version }

// SetVersion sets the version the message is encoded and decoded with.
func (v *versioned) SetVersion(version int16) { v.version = version }

// appendNoTags appends an empty tagged-field section.
func appendNoTags(dst []byte) []byte { return append(dst, 0) }

// tagWriter collects the tagged fields of one structure. Fields must be added
// in ascending tag order, as Kafka requires.
type tagWriter struct {
	count uint32
	body  []byte
}

// add appends one tagged field whose encoded content is field.
func (w *tagWriter) add(tag uint32, field []byte) {
	w.count++
	w.body = kbin.AppendUvarint(w.body, tag)
	w.body = kbin.AppendUvarint(w.body, uint32(len(field)))
	w.body = append(w.body, field...)
}

// appendTo appends the tagged-field section: the count, then the fields.
func (w *tagWriter) appendTo(dst []byte) []byte {
	dst = kbin.AppendUvarint(dst, w.count)
	return append(dst, w.body...)
}

// appendStrings appends a compact array of compact strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

// appendNullableStrings appends a compact nullable array of compact strings;
// nil is encoded as null.
func appendNullableStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactNullableArrayLen(dst, len(ss), ss == nil)
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

// encoder is implemented by the structures nested in messages.
type encoder interface{ appendTo(dst []byte) []byte }

// appendArray appends a compact array of structures.
func appendArray[T any, PT interface {
	*T
	encoder
}](dst []byte, vs []T) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(vs))
	for i := range vs {
		dst = PT(&vs[i]).appendTo(dst)
	}
	return dst
}

// decoder reads a message body. After any failure every read returns a zero
// value, so a decode runs to its end and finish reports the first problem.
type decoder struct {
	b   kbin.Reader
	err error
	// elements counts the array elements decoded so far, shared with the
	// decoders of tagged fields; maxElements > 0 bounds it.
	elements    *int
	maxElements int
}

// MaxRequestElements bounds the array elements (summed over every array,
// nested ones included) that one request may hold, so that no request can
// make the server allocate more than a few MiB for its decoded form: an
// element on the wire can be a single byte, in memory it is at least a
// string or slice header. Responses, decoded by clients from sidecars they
// chose to ask, are bounded by MaxResponseBytes only.
const MaxRequestElements = 100_000

func newDecoder(src []byte) *decoder { return &decoder{b: kbin.Reader{Src: src}, elements: new(int)} }

// newRequestDecoder is newDecoder for requests, bounded by
// MaxRequestElements.
func newRequestDecoder(src []byte) *decoder {
	d := newDecoder(src)
	d.maxElements = MaxRequestElements
	return d
}

// count adds n decoded elements and fails once the bound is passed.
func (d *decoder) count(n int64) bool {
	*d.elements += int(n)
	if d.maxElements > 0 && *d.elements > d.maxElements {
		d.fail(fmt.Errorf("%w: %d array elements or more in one request, the limit is %d", ErrTooManyElements, *d.elements, d.maxElements))
		return false
	}
	return true
}

// fail records err unless an earlier error is already recorded, and stops
// further reads.
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b.Src = nil
}

// ok reports whether every read so far succeeded.
func (d *decoder) ok() bool { return d.err == nil && d.b.Ok() }

// finish reports the first decode error, or ErrMalformed when bytes are left
// over after the last field.
func (d *decoder) finish() error {
	switch {
	case d.err != nil:
		return d.err
	case !d.b.Ok():
		return fmt.Errorf("%w: %w", ErrMalformed, kbin.ErrNotEnoughData)
	case len(d.b.Src) > 0:
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b.Src))
	}
	return nil
}

func (d *decoder) bool() bool     { return d.b.Bool() }
func (d *decoder) int8() int8     { return d.b.Int8() }
func (d *decoder) int16() int16   { return d.b.Int16() }
func (d *decoder) int32() int32   { return d.b.Int32() }
func (d *decoder) int64() int64   { return d.b.Int64() }
func (d *decoder) uuid() [16]byte { return d.b.Uuid() }
func (d *decoder) string() string { return d.b.CompactString() }
func (d *decoder) nullableString() *string {
	return d.b.CompactNullableString()
}

// bytes reads compact bytes into a new slice; empty and null read as nil.
func (d *decoder) bytes() []byte {
	b := d.b.CompactNullableBytes()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// arrayLen reads a compact array length: -1 for null, else the element
// count. A count larger than the bytes left (every element takes at least
// one byte) is malformed.
func (d *decoder) arrayLen() int {
	n := d.b.Uvarint()
	if n == 0 {
		return -1
	}
	l := int64(n) - 1
	if l > int64(len(d.b.Src)) {
		d.fail(fmt.Errorf("%w: array of %d elements in %d bytes", ErrMalformed, l, len(d.b.Src)))
		return 0
	}
	if !d.count(l) {
		return 0
	}
	return int(l)
}

// legacyArrayLen reads a non-compact (int32) array length, as arrayLen.
func (d *decoder) legacyArrayLen() int {
	l := int64(d.b.Int32())
	if l < 0 {
		return -1
	}
	if l > int64(len(d.b.Src)) {
		d.fail(fmt.Errorf("%w: array of %d elements in %d bytes", ErrMalformed, l, len(d.b.Src)))
		return 0
	}
	if !d.count(l) {
		return 0
	}
	return int(l)
}

// maxPrealloc caps how many elements an array decode allocates up front, so
// a length prefix alone cannot make the decoder allocate much.
const maxPrealloc = 256

// strings reads a compact array of strings; null and empty read as nil.
func (d *decoder) strings() []string {
	n := d.arrayLen()
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, min(n, maxPrealloc))
	for i := 0; i < n && d.ok(); i++ {
		out = append(out, d.string())
	}
	return out
}

// nullableStrings reads a compact nullable array of strings: null reads as
// nil, empty as an empty non-nil slice.
func (d *decoder) nullableStrings() []string {
	n := d.arrayLen()
	if n < 0 {
		return nil
	}
	out := make([]string, 0, min(n, maxPrealloc))
	for i := 0; i < n && d.ok(); i++ {
		out = append(out, d.string())
	}
	return out
}

// structure is implemented by the structures nested in messages.
type structure interface{ readFrom(d *decoder) }

// readArray reads a compact array of structures; null and empty read as nil.
func readArray[T any, PT interface {
	*T
	structure
}](d *decoder) []T {
	n := d.arrayLen()
	if n <= 0 {
		return nil
	}
	out := make([]T, 0, min(n, maxPrealloc))
	for i := 0; i < n && d.ok(); i++ {
		var v T
		PT(&v).readFrom(d)
		out = append(out, v)
	}
	return out
}

// tags reads a tagged-field section. For every field, known is called with
// the tag and a decoder over exactly the field's bytes; it returns false for
// a tag it does not know, which is then skipped. A known field must use all
// of its bytes. known may be nil when the structure has no tagged fields.
func (d *decoder) tags(known func(tag uint32, f *decoder) bool) {
	n := d.b.Uvarint()
	if uint64(n) > uint64(len(d.b.Src)) { // every field takes at least two bytes
		d.fail(fmt.Errorf("%w: %d tagged fields in %d bytes", ErrMalformed, n, len(d.b.Src)))
		return
	}
	for i := uint32(0); i < n && d.ok(); i++ {
		tag := d.b.Uvarint()
		size := d.b.Uvarint()
		data := d.b.Span(int(size))
		if !d.ok() || known == nil {
			continue
		}
		f := newDecoder(data)
		f.elements, f.maxElements = d.elements, d.maxElements
		if !known(tag, f) {
			continue
		}
		if err := f.finish(); err != nil {
			d.fail(fmt.Errorf("tagged field %d: %w", tag, err))
		}
	}
}

// appendStatus appends the ThrottleTimeMs, ErrorCode and ErrorMessage that
// open most responses.
func appendStatus(dst []byte, throttleTimeMs int32, errorCode int16, errorMessage *string) []byte {
	dst = kbin.AppendInt32(dst, throttleTimeMs)
	dst = kbin.AppendInt16(dst, errorCode)
	return kbin.AppendCompactNullableString(dst, errorMessage)
}

// status reads what appendStatus appends.
func (d *decoder) status() (throttleTimeMs int32, errorCode int16, errorMessage *string) {
	throttleTimeMs = d.int32()
	errorCode = d.int16()
	errorMessage = d.nullableString()
	return throttleTimeMs, errorCode, errorMessage
}

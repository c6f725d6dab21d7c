package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Request and response headers, as in Kafka:
//
//	RequestHeader v1 (non-flexible requests) and v2 (flexible requests)
//	  RequestApiKey      int16
//	  RequestApiVersion  int16
//	  CorrelationId      int32
//	  ClientId           nullable string, int16 length (never compact)
//	  _tagged_fields     v2 only
//
//	ResponseHeader v0 (ApiVersions, non-flexible responses) and v1 (flexible)
//	  CorrelationId      int32
//	  _tagged_fields     v1 only
//
// Every frame on the wire is a big-endian int32 size followed by that many
// bytes: the header, then the body.

// RequestHeader is a Kafka request header.
type RequestHeader struct {
	RequestApiKey     int16
	RequestApiVersion int16
	CorrelationId     int32
	ClientId          *string
}

// Flexible reports whether the header is v2 (with tagged fields): whether the
// request's version is flexible.
func (h *RequestHeader) Flexible() bool {
	return requestHeaderFlexible(h.RequestApiKey, h.RequestApiVersion)
}

// AppendTo appends the header, v1 or v2 as Flexible says.
func (h *RequestHeader) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, h.RequestApiKey)
	dst = kbin.AppendInt16(dst, h.RequestApiVersion)
	dst = kbin.AppendInt32(dst, h.CorrelationId)
	dst = kbin.AppendNullableString(dst, h.ClientId)
	if h.Flexible() {
		dst = appendNoTags(dst)
	}
	return dst
}

// ReadRequestHeader decodes the request header at the start of a frame
// (after the size prefix) and returns it with the body that follows. Unknown
// tagged fields in the header are skipped. It does not check the key or
// version against the registry.
func ReadRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	var h RequestHeader
	d := newDecoder(frame)
	h.RequestApiKey = d.int16()
	h.RequestApiVersion = d.int16()
	h.CorrelationId = d.int32()
	h.ClientId = d.b.NullableString()
	if d.ok() && h.Flexible() {
		d.tags(nil)
	}
	if !d.ok() {
		if d.err != nil {
			return h, nil, fmt.Errorf("request header: %w", d.err)
		}
		return h, nil, fmt.Errorf("request header: %w: %w", ErrMalformed, kbin.ErrNotEnoughData)
	}
	return h, d.b.Src, nil
}

// appendResponseHeader appends the response header for key and version.
func appendResponseHeader(dst []byte, key, version int16, correlationID int32) []byte {
	dst = kbin.AppendInt32(dst, correlationID)
	if responseHeaderFlexible(key, version) {
		dst = appendNoTags(dst)
	}
	return dst
}

// readResponseHeader decodes the response header for key and version and
// returns the correlation ID and the body.
func readResponseHeader(frame []byte, key, version int16) (int32, []byte, error) {
	d := newDecoder(frame)
	corr := d.int32()
	if d.ok() && responseHeaderFlexible(key, version) {
		d.tags(nil)
	}
	if !d.ok() {
		if d.err != nil {
			return 0, nil, fmt.Errorf("response header: %w", d.err)
		}
		return 0, nil, fmt.Errorf("response header: %w: %w", ErrMalformed, kbin.ErrNotEnoughData)
	}
	return corr, d.b.Src, nil
}

package protocol

import (
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrServerClosed is returned by Server.Serve after Server.Close.
	ErrServerClosed = errors.New("protocol: server closed")

	// ErrClientClosed is returned by Client.Do after Client.Close, or after
	// a transport error broke the connection.
	ErrClientClosed = errors.New("protocol: client closed")

	// ErrFrameTooLarge means a frame's size prefix exceeds the configured
	// maximum (MaxFrameBytes on the server, MaxResponseBytes on the client).
	ErrFrameTooLarge = errors.New("protocol: frame too large")

	// ErrInvalidFrameSize means a frame's size prefix is negative or too
	// small to hold a header.
	ErrInvalidFrameSize = errors.New("protocol: invalid frame size")

	// ErrTruncatedFrame means the connection ended inside a frame.
	ErrTruncatedFrame = errors.New("protocol: truncated frame")

	// ErrUnknownAPIKey means a request names an API key that is not in the
	// registry (see APIs).
	ErrUnknownAPIKey = errors.New("protocol: unknown api key")

	// ErrUnsupportedVersion means a request's version is outside the range
	// the registry lists for its API key.
	ErrUnsupportedVersion = errors.New("protocol: unsupported api version")

	// ErrMalformed means a header or body does not decode: it is short,
	// has a length that does not fit, or has bytes left over.
	ErrMalformed = errors.New("protocol: malformed message")

	// ErrTooManyElements means a request holds more array elements than
	// MaxRequestElements.
	ErrTooManyElements = errors.New("protocol: too many array elements")

	// ErrCorrelationMismatch means a response carries another correlation
	// ID than the request it answers.
	ErrCorrelationMismatch = errors.New("protocol: correlation id mismatch")

	// ErrBadResponse means a handler returned nil or a response of another
	// API than the request's.
	ErrBadResponse = errors.New("protocol: handler returned a bad response")
)

// Error is a Kafka error code returned by the admin endpoint, with the
// server's message. It unwraps to franz-go's *kerr.Error for the code, so
// errors.Is(err, kerr.InvalidRequest) works.
type Error struct {
	Code    int16  // the Kafka error code
	Message string // the server's message; empty if it sent none
}

// Name returns the error code's Kafka name, such as INVALID_CONFIG, or
// UNKNOWN_SERVER_ERROR(<code>) for a code franz-go does not know.
func (e *Error) Name() string {
	ke := kerr.TypedErrorForCode(e.Code)
	if ke == nil {
		return "NONE"
	}
	if ke.Code != e.Code {
		return ke.Message + "(" + strconv.Itoa(int(e.Code)) + ")"
	}
	return ke.Message
}

// Error returns "NAME: message", or "NAME: description" when the server sent
// no message.
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Name() + ": " + e.Message
	}
	if ke := kerr.TypedErrorForCode(e.Code); ke != nil {
		return e.Name() + ": " + ke.Description
	}
	return e.Name()
}

// Unwrap returns franz-go's error for the code.
func (e *Error) Unwrap() error { return kerr.ErrorForCode(e.Code) }

// ErrorFor returns nil for code 0 and otherwise an *Error carrying the code
// and msg (nil for none), wrapping kerr.ErrorForCode(code).
func ErrorFor(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	e := &Error{Code: code}
	if msg != nil {
		e.Message = *msg
	}
	return e
}

// RefusedSettingsPrefix starts the message of the INVALID_CONFIG with which
// a sidecar refuses a mirror config's keys or values at validation, before
// it connects to the source: a key or value sidemirror does not support
// (GSSAPI, a consumer group setting, an unknown key) or an invalid value.
// It is how the admin API tells these apart from the other INVALID_CONFIG
// errors (a source that cannot be reached, a missing bootstrap.servers, a
// key to delete that is not set): kafka-cluster-mirrors exits 2 on the
// first, as it does for its own --command-config, and 1 on the others.
const RefusedSettingsPrefix = "mirror config refused: "

// IsRefusedSettings reports whether err is an INVALID_CONFIG whose message
// starts with RefusedSettingsPrefix.
func IsRefusedSettings(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == kerr.InvalidConfig.Code && strings.HasPrefix(e.Message, RefusedSettingsPrefix)
}

package sidecar

import (
	"errors"

	"github.com/sidemirror/sidemirror/internal/security"
)

var (
	// ErrInvalidConfig is matched (errors.Is) by every configuration error.
	// The error itself prints as one line, "config: <key>: <problem>", naming
	// the key, the offending value (secrets as [hidden]) and what is expected.
	// It is the same error as security.ErrInvalidConfig, which the client
	// settings' errors match.
	ErrInvalidConfig = security.ErrInvalidConfig

	// ErrNotSupported is matched by errors for settings that are valid
	// Kafka but not implemented by sidemirror (GSSAPI, unsecured OAUTHBEARER
	// tokens); it is security.ErrNotSupported.
	ErrNotSupported = security.ErrNotSupported

	// ErrDataDirLocked is returned by Run when another process holds the lock
	// file of data.dir; the message names the directory and the holder's PID.
	ErrDataDirLocked = errors.New("sidecar: data directory is locked by another process")

	// ErrListen is returned by Run when a listener cannot be opened; the
	// message names the listener key and the address.
	ErrListen = errors.New("sidecar: cannot listen")

	// ErrAlreadyStarted is returned by a second call of Run on one Sidecar.
	ErrAlreadyStarted = errors.New("sidecar: already started")

	// ErrShutdownTimeout is returned by Run when the shutdown did not finish
	// within its bound; some connections or goroutines were cut off.
	ErrShutdownTimeout = errors.New("sidecar: shutdown timed out")
)

// ConfigError is a configuration error. It matches ErrInvalidConfig, and
// also its Cause when there is one.
type ConfigError struct {
	Key   string // the offending key; empty for file-level errors
	msg   string // the whole one-line message
	Cause error  // underlying error, if any
}

func (e *ConfigError) Error() string { return e.msg }

// Unwrap returns ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrInvalidConfig, e.Cause}
	}
	return []error{ErrInvalidConfig}
}

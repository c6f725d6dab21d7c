package security

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is matched (errors.Is) by every configuration error
	// of this package. The error prints as one line, "config: <key>:
	// <problem>", naming the key, the offending value (secrets as [hidden])
	// and what is expected.
	ErrInvalidConfig = errors.New("invalid configuration")

	// ErrNotSupported is matched by errors for settings that are valid Kafka
	// but that sidemirror does not implement (GSSAPI, other login callback
	// handlers); they are refused when the configuration is validated.
	ErrNotSupported = errors.New("not supported")

	// ErrAuthentication is matched by errors of an authentication that
	// failed: a token endpoint that refused the client, a certificate that
	// no principal mapping rule applies to.
	ErrAuthentication = errors.New("security: authentication failed")
)

// ConfigError is a configuration error naming its key. It matches
// ErrInvalidConfig, ErrNotSupported when NotSupported is set, and Cause.
type ConfigError struct {
	Key          string // the offending key, with its prefix
	Msg          string // what is wrong and what is expected; never a secret
	NotSupported bool   // a valid Kafka setting that sidemirror lacks
	Cause        error
}

func (e *ConfigError) Error() string { return "config: " + e.Key + ": " + e.Msg }

// Unwrap returns ErrInvalidConfig, ErrNotSupported when it applies, and the
// cause.
func (e *ConfigError) Unwrap() []error {
	errs := []error{ErrInvalidConfig}
	if e.NotSupported {
		errs = append(errs, ErrNotSupported)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

func configErr(key, format string, args ...any) *ConfigError {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

func notSupported(key, format string, args ...any) *ConfigError {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...), NotSupported: true}
}

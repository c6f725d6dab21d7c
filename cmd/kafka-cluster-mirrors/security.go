package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds the CLI's connection security: Kafka's client security
// properties in --command-config (security.protocol, sasl.mechanism,
// sasl.jaas.config, ssl.truststore.*, ssl.keystore.*, ...), read with
// internal/security as the sidecar reads its own, and turned into the
// admin client's TLS configuration and SASL mechanism.

// errSettings marks --command-config settings that are refused at
// validation: exit code 2.
var errSettings = errors.New("unsupported or invalid client settings")

// settingsError is a --command-config problem: exit code 2.
type settingsError struct{ err error }

func (e *settingsError) Error() string { return e.err.Error() }
func (e *settingsError) Unwrap() []error {
	return []error{errSettings, e.err}
}

// loadSecurity reads the client security keys of --command-config into
// cfg.Security. A security key sidemirror does not implement (any other
// ssl.* or sasl.* key, GSSAPI, another login callback handler) is refused.
func (cfg *Config) loadSecurity(props []properties.Property) error {
	r := properties.NewResolver()
	values := map[string]string{}
	for _, p := range props {
		name := p.Key
		isSecurity := security.IsClientKey(name)
		if !isSecurity && (strings.HasPrefix(name, "ssl.") || strings.HasPrefix(name, "sasl.")) {
			return &settingsError{fmt.Errorf("--command-config %s: line %d: %s is not a client security setting kafka-cluster-mirrors supports (supported: %s); remove it",
				cfg.CommandConfigPath, p.Line, name, strings.Join(security.ClientKeys, ", "))}
		}
		if !isSecurity {
			continue
		}
		v, err := r.Resolve(name, strings.TrimSpace(p.Value))
		if err != nil {
			return &settingsError{fmt.Errorf("--command-config %s: line %d: %w", cfg.CommandConfigPath, p.Line, err)}
		}
		values[name] = v
	}
	cc, err := security.ParseClientConfig(values, "")
	if err != nil {
		return &settingsError{fmt.Errorf("--command-config %s: %w", cfg.CommandConfigPath, err)}
	}
	cfg.Security = cc
	return nil
}

// clientOpts returns the admin client's options: client ID, dial timeout,
// TLS and SASL as --command-config says.
func (cfg *Config) clientOpts() ([]protocol.ClientOpt, error) {
	opts := []protocol.ClientOpt{protocol.DialTimeout(dialTimeout), protocol.ClientID(cfg.ClientID)}
	cc := cfg.Security
	if cc.SecurityProtocol == "" {
		return opts, nil
	}
	if cc.UsesTLS() {
		tc, err := cc.TLSConfig()
		if err != nil {
			return nil, &settingsError{fmt.Errorf("--command-config %s: %w", cfg.CommandConfigPath, err)}
		}
		opts = append(opts, protocol.DialTLSConfig(tc))
	}
	if cc.UsesSASL() {
		m, err := cc.Mechanism()
		if err != nil {
			return nil, &settingsError{fmt.Errorf("--command-config %s: %w", cfg.CommandConfigPath, err)}
		}
		opts = append(opts, protocol.SASLMechanism(m))
	}
	return opts, nil
}

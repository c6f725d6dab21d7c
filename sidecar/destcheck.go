package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/security"
)

// This file checks, once at start, that the destination client gets
// through to the local broker with its destination.* settings, and logs
// why not in words an operator acts on: a broker that refuses the SASL
// credentials, a TLS handshake that fails (no client certificate where the
// listener requires one, a CA the trust store lacks), a token endpoint
// that issues no token. The destination client logs nothing of its own;
// without this check only /readyz ("FAIL local broker") and the errors of
// the parts that use the client would say it.

// Backoff of the start-up check between attempts.
const (
	destCheckFirstWait = time.Second
	destCheckMaxWait   = 30 * time.Second
	destCheckTimeout   = 10 * time.Second
)

// checkDestination asks the local broker for its API versions through the
// seed brokers of cl (local.bootstrap.servers), without retries, until one
// answers or ctx ends. Each new kind of failure is logged once (a refusal
// at error level, no answer at warn level), success once at info level.
func checkDestination(ctx context.Context, cl *kgo.Client, dest security.ClientConfig, log *zap.Logger) {
	wait := destCheckFirstWait
	var last string
	for {
		err := askSeeds(ctx, cl)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			log.Info("local broker reachable",
				zap.Strings(KeyLocalBootstrapServers, dest.BootstrapServers),
				zap.String(DestinationPrefix+"security.protocol", dest.Protocol()))
			return
		}
		if msg := destinationProblem(dest, err); msg != last {
			// A broker that is not up yet is routine at start; one that
			// refuses the settings is a configuration error.
			level := zap.ErrorLevel
			if msg == unreachable(dest) {
				level = zap.WarnLevel
			}
			log.Log(level, msg,
				zap.Strings(KeyLocalBootstrapServers, dest.BootstrapServers),
				zap.String(DestinationPrefix+"security.protocol", dest.Protocol()),
				zap.Error(err))
			last = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, destCheckMaxWait)
	}
}

// askSeeds sends ApiVersions to each seed broker in turn and returns nil
// when one answers, else the last error. The seeds are asked directly, not
// through a metadata load, so the error is the connection's own.
func askSeeds(ctx context.Context, cl *kgo.Client) error {
	err := errors.New("no seed broker")
	for _, b := range cl.SeedBrokers() {
		rctx, cancel := context.WithTimeout(ctx, destCheckTimeout)
		_, err = b.Request(rctx, kmsg.NewPtrApiVersionsRequest())
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// destinationProblem says what a failed connection to the local broker
// means and which keys to check.
func destinationProblem(dest security.ClientConfig, err error) string {
	k := func(name string) string { return DestinationPrefix + name }
	switch {
	case errors.Is(err, security.ErrAuthentication):
		return "destination: cannot get an OAUTHBEARER token for the local broker: check " +
			k("sasl.oauthbearer.token.endpoint.url") + " and the client ID and secret"
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		return "destination: the local broker refused this sidecar's SASL authentication: check " +
			k("sasl.mechanism") + " and the credentials in " + k("sasl.jaas.config") +
			" (and that local.bootstrap.servers names the broker's listener for that mechanism)"
	case isTLSFailure(err):
		return "destination: the TLS handshake with the local broker failed: check " + k("ssl.truststore.*") +
			" (the CA of the broker's certificate) and, where the listener requires client certificates, " +
			k("ssl.keystore.*")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// Some servers hang up instead of answering a failed
		// authentication.
		check := ""
		if dest.UsesSASL() {
			check = ", the credentials in " + k("sasl.jaas.config")
		}
		if dest.UsesTLS() {
			check += " and, where the listener requires client certificates, " + k("ssl.keystore.*")
		}
		return "destination: the local broker closed the connection while this sidecar connected and authenticated: check that " +
			KeyLocalBootstrapServers + " names the broker's " + dest.Protocol() + " listener" + check
	}
	return unreachable(dest)
}

// unreachable is destinationProblem's message for any other failure: no
// broker there (yet), or one that speaks another protocol.
func unreachable(dest security.ClientConfig) string {
	return "destination: cannot reach the local broker: check " + KeyLocalBootstrapServers + " and " +
		DestinationPrefix + "security.protocol (" + dest.Protocol() + ")"
}

// isTLSFailure reports whether err is a failed TLS handshake: an alert
// the broker sent (remote error: tls: ...), a certificate that does not
// verify, or a non-TLS answer.
func isTLSFailure(err error) bool {
	var (
		op       *net.OpError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		header   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname),
		errors.As(err, &header), errors.As(err, &alert):
		return true
	case errors.As(err, &op):
		return op.Op == "remote error" // an alert from the broker
	}
	return false
}

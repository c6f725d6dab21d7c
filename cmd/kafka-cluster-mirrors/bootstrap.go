package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
	"github.com/sidemirror/sidemirror/statestore"
)

// This file resolves --bootstrap-server when it names a broker of the
// destination cluster rather than a sidecar, as the KIP's examples do. The
// answer to ApiVersions tells them apart: a sidecar lists the mirror APIs,
// a broker does not. For a broker, the CLI reads the sidecar registry in
// __mirror_state (statestore.ReadSidecars: every sidecar writes its admin
// address and admin.security.protocol there when it starts) and connects to
// the first sidecar that answers as one, trying the sidecar beside the given
// broker first, then the others by broker ID. The broker is reached with the
// security settings of --command-config; so is a sidecar whose admin
// endpoint is not PLAINTEXT.

// errNoSidecars is matched by the error for a cluster without registry
// records.
var errNoSidecars = errors.New("no sidecars registered on this cluster")

// isSidecar reports whether cl's endpoint lists the mirror APIs in its
// answer to ApiVersions.
func isSidecar(ctx context.Context, cl *protocol.Client) (bool, error) {
	req := &protocol.ApiVersionsRequest{ClientSoftwareName: defaultClientID, ClientSoftwareVersion: softwareVersion()}
	req.SetVersion(3)
	resp, err := do[*protocol.ApiVersionsResponse](ctx, cl, req)
	if err != nil {
		return false, err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, nil); err != nil {
		return false, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == protocol.KeyListClusterMirrors {
			return true, nil
		}
	}
	return false, nil
}

// softwareVersion is version as ApiVersions v3 accepts it (letters, digits,
// '-' and '.').
func softwareVersion() string {
	v := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '-'
	}, version)
	if v = strings.Trim(v, "-."); v == "" {
		return "dev"
	}
	return v
}

// resolveSidecar returns a client of a sidecar: cl itself when addr, which
// cl is connected to, is one; else, addr being a broker, a new client of a
// sidecar of its cluster found in the sidecar registry (cl is then closed).
func resolveSidecar(ctx context.Context, cfg Config, addr string, cl *protocol.Client) (*protocol.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	sidecar, err := isSidecar(ctx, cl)
	if err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("--bootstrap-server %s: %w", addr, err)
	}
	if sidecar {
		return cl, nil
	}
	_ = cl.Close()
	return sidecarOfBroker(ctx, cfg, addr)
}

// sidecarOfBroker reads the sidecar registry through the broker at addr and
// connects to a live sidecar.
func sidecarOfBroker(ctx context.Context, cfg Config, addr string) (*protocol.Client, error) {
	sec := cfg.Security
	if sec.SecurityProtocol == "" { // no security keys in --command-config
		sec = security.DefaultClientConfig("")
	}
	seed := addr
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		seed = net.JoinHostPort("localhost", port) // ":9094", as in the KIP's examples
	}
	sec.BootstrapServers = []string{seed}
	opts, err := sec.KgoOpts()
	if err != nil {
		return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker, and --command-config does not say how to connect to it: %w", addr, err)
	}
	kcl, err := kgo.NewClient(append(opts, kgo.ClientID(cfg.ClientID), kgo.DialTimeout(dialTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker, and a client of it cannot be made: %w", addr, err)
	}
	defer kcl.Close()
	registry, err := statestore.ReadSidecars(ctx, kcl)
	switch {
	case errors.Is(err, statestore.ErrTopicNotFound):
		registry = nil
	case err != nil && sec.Protocol() == security.ProtocolPlaintext:
		return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker, and reading the sidecar registry in %s failed "+
			"(if its listener needs SASL or TLS, give security.protocol and its settings in --command-config): %w", addr, statestore.TopicName, err)
	case err != nil:
		return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker, and reading the sidecar registry in %s failed: %w", addr, statestore.TopicName, err)
	}
	if len(registry) == 0 {
		return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker with %w; point --bootstrap-server at a sidecar's admin.listener", addr, errNoSidecars)
	}
	beside := int32(-1)
	if md, err := kadm.NewClient(kcl).BrokerMetadata(ctx); err == nil {
		beside = brokerAt(ctx, md.Brokers, addr)
	}
	secured, err := cfg.clientOpts()
	if err != nil {
		return nil, err
	}
	plain := []protocol.ClientOpt{protocol.DialTimeout(dialTimeout), protocol.ClientID(cfg.ClientID)}
	var failures []string
	for _, sc := range sidecarOrder(registry, beside) {
		// A sidecar's record says how its admin endpoint listens: a
		// PLAINTEXT one is reached in plain whatever the broker needs,
		// another with the settings of --command-config.
		dialOpts := secured
		if p := strings.ToUpper(sc.AdminProtocol); p == "" || p == security.ProtocolPlaintext {
			dialOpts = plain
		}
		cl, err := protocol.Dial(ctx, sc.AdminAddress, dialOpts...)
		if err == nil {
			var ok bool
			if ok, err = isSidecar(ctx, cl); ok {
				return cl, nil
			}
			_ = cl.Close()
			if err == nil {
				err = errors.New("it does not serve the mirror APIs")
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		failures = append(failures, fmt.Sprintf("sidecar %d at %s: %v", sc.BrokerID, sc.AdminAddress, err))
	}
	return nil, fmt.Errorf("--bootstrap-server %s is a Kafka broker, and none of the sidecars registered on its cluster answers: %s",
		addr, strings.Join(failures, "; "))
}

// sidecarOrder returns the registry's sidecars in the order to try them:
// the one beside broker first, then the others by broker ID.
func sidecarOrder(registry map[int32]statestore.Sidecar, beside int32) []statestore.Sidecar {
	var out []statestore.Sidecar
	for _, sc := range registry {
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b statestore.Sidecar) int {
		switch {
		case a.BrokerID == beside:
			return -1
		case b.BrokerID == beside:
			return 1
		}
		return int(a.BrokerID) - int(b.BrokerID)
	})
	return out
}

// brokerAt returns the node ID of the broker whose advertised address is
// addr (the same host:port, or a port and host resolving to a common IP
// address; an empty host is this machine), or -1.
func brokerAt(ctx context.Context, brokers kadm.BrokerDetails, addr string) int32 {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	ips := func(h string) []string {
		if h == "" {
			h = "localhost"
		}
		got, err := net.DefaultResolver.LookupHost(ctx, h)
		if err != nil {
			return []string{h}
		}
		return got
	}
	given := ips(host)
	for _, b := range brokers {
		if fmt.Sprint(b.Port) != port {
			continue
		}
		if strings.EqualFold(b.Host, host) {
			return b.NodeID
		}
		for _, ip := range ips(b.Host) {
			if slices.Contains(given, ip) {
				return b.NodeID
			}
		}
	}
	return -1
}

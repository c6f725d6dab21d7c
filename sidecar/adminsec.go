package sidecar

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/sidemirror/sidemirror/coordinator"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// Keys of the admin endpoint's security (DESIGN D15), with Kafka's listener
// names under the prefix "admin.": its admin.ssl.* keys are
// AdminPrefix + security.ListenerKeys.
const (
	KeyAdminSecurityProtocol = "admin.security.protocol"
	KeyAdminSASLMechanisms   = "admin.sasl.enabled.mechanisms"
	KeyAdminSuperUsers       = "admin.super.users"
	KeyAdminSASLRelayServers = "admin.sasl.relay.bootstrap.servers"
	KeyAdminSASLRelayProto   = "admin.sasl.relay.security.protocol"

	// AdminPrefix prefixes the admin listener's ssl.* keys.
	AdminPrefix = "admin."
)

// adminSASLMechanisms are the mechanisms the admin endpoint can relay to
// the local broker.
var adminSASLMechanisms = []string{security.MechanismPlain, security.MechanismSCRAMSHA256, security.MechanismSCRAMSHA512}

// AdminSecurity is how the admin endpoint authenticates and authorizes
// its clients, as a Kafka listener does: admin.security.protocol, the SASL
// mechanisms it serves (each exchange relayed to the local broker, which
// checks the credentials: the destination cluster's users work unchanged
// and the sidecar keeps no password database), the listener's TLS
// settings, and the super users. Any protocol but PLAINTEXT turns
// authorization on: every request needs an ACL (or a super user).
type AdminSecurity struct {
	Protocol   string   // admin.security.protocol
	Mechanisms []string // admin.sasl.enabled.mechanisms
	SuperUsers []string // admin.super.users, Kafka's ';'-separated list
	// RelayServers is the local broker's SASL listener that exchanges are
	// relayed to (admin.sasl.relay.bootstrap.servers); empty: the
	// destination client's local.bootstrap.servers.
	RelayServers []string
	// RelayProtocol is SASL_PLAINTEXT or SASL_SSL
	// (admin.sasl.relay.security.protocol); empty: the destination's
	// destination.security.protocol. SASL_SSL uses the destination's
	// destination.ssl.* settings.
	RelayProtocol string
	TLS           security.ListenerTLS // admin.ssl.*
}

// defaultAdminSecurity is PLAINTEXT with every relayable mechanism.
func defaultAdminSecurity() AdminSecurity {
	return AdminSecurity{Protocol: security.ProtocolPlaintext, Mechanisms: slices.Clone(adminSASLMechanisms),
		TLS: security.DefaultListenerTLS(AdminPrefix)}
}

// usesSASL and usesTLS tell the protocol's parts.
func (a AdminSecurity) usesSASL() bool {
	return strings.HasPrefix(strings.ToUpper(a.Protocol), "SASL_")
}
func (a AdminSecurity) usesTLS() bool {
	p := strings.ToUpper(a.Protocol)
	return p == security.ProtocolSSL || p == security.ProtocolSASLSSL
}

// Authorization returns the coordinator's access control for a.
func (a AdminSecurity) Authorization() coordinator.Authorization {
	return coordinator.Authorization{Enabled: !strings.EqualFold(a.Protocol, security.ProtocolPlaintext), SuperUsers: slices.Clone(a.SuperUsers)}
}

func init() {
	fields = append(fields,
		field{KeyAdminSecurityProtocol, "", func(c *Config, v string) error { c.Admin.Protocol = strings.ToUpper(v); return nil }},
		field{KeyAdminSASLMechanisms, "", func(c *Config, v string) error { c.Admin.Mechanisms = splitList(v); return nil }},
		field{KeyAdminSuperUsers, "", func(c *Config, v string) error {
			c.Admin.SuperUsers = nil
			for _, u := range strings.Split(v, ";") {
				if u = strings.TrimSpace(u); u != "" {
					c.Admin.SuperUsers = append(c.Admin.SuperUsers, u)
				}
			}
			return nil
		}},
		field{KeyAdminSASLRelayServers, "", func(c *Config, v string) error { c.Admin.RelayServers = splitList(v); return nil }},
		field{KeyAdminSASLRelayProto, "", func(c *Config, v string) error { c.Admin.RelayProtocol = strings.ToUpper(v); return nil }},
	)
	for _, k := range security.ListenerKeys {
		fields = append(fields, field{AdminPrefix + k, "", func(c *Config, v string) error { *c.Admin.TLS.Field(k) = v; return nil }})
	}
}

// validate checks the admin endpoint's security against the rest of c.
func (a AdminSecurity) validate(c Config) error {
	if !slices.Contains(security.SecurityProtocols, a.Protocol) {
		return configErr(KeyAdminSecurityProtocol, "%q is not supported (expected %s)", a.Protocol, orList(security.SecurityProtocols))
	}
	for _, u := range a.SuperUsers {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return configErr(KeyAdminSuperUsers, "%q is not a principal (expected Type:name entries separated by ';', e.g. User:admin;User:ops)", u)
		}
	}
	if a.usesTLS() {
		if err := a.TLS.Validate(); err != nil {
			return err
		}
		// With PLAINTEXT peers the other sidecars reach this one's internal
		// APIs on admin.listener, without TLS: forwarded writes, the describe
		// fan-out and the liveness probes would all fail.
		if n := len(c.RaftMembers()); n > 1 && !c.Peer.SSL() {
			return configErr(KeyAdminSecurityProtocol, "%s with %s=PLAINTEXT cannot work in a group of %d sidecars: they dial each other's admin endpoint without TLS; set %s=SSL on every sidecar (their internal APIs then use raft.listener)",
				a.Protocol, KeyPeerSecurityProtocol, n, KeyPeerSecurityProtocol)
		}
	}
	if !a.usesSASL() {
		return nil
	}
	if len(a.Mechanisms) == 0 {
		return configErr(KeyAdminSASLMechanisms, "is empty, but %s is %s (expected some of %s)", KeyAdminSecurityProtocol, a.Protocol, orList(adminSASLMechanisms))
	}
	for _, m := range a.Mechanisms {
		if !slices.Contains(adminSASLMechanisms, m) {
			return configErr(KeyAdminSASLMechanisms, "%q is not supported (expected %s: the exchange is relayed to the local broker, which checks the credentials)", m, orList(adminSASLMechanisms))
		}
	}
	for _, s := range a.RelayServers {
		if problem := checkHostPort(s, false, false); problem != "" {
			return configErr(KeyAdminSASLRelayServers, "%q %s", s, problem)
		}
	}
	if p := a.relayProtocol(c); p != security.ProtocolSASLPlaintext && p != security.ProtocolSASLSSL {
		if a.RelayProtocol != "" {
			return configErr(KeyAdminSASLRelayProto, "%q is not supported (expected SASL_PLAINTEXT or SASL_SSL: a listener of the local broker that authenticates with SASL)", a.RelayProtocol)
		}
		return configErr(KeyAdminSASLRelayProto, "is not set and %s is %s: the admin endpoint relays SASL exchanges to the local broker, so name its SASL listener with %s and this key (SASL_PLAINTEXT or SASL_SSL)",
			DestinationPrefix+"security.protocol", c.Destination.Protocol(), KeyAdminSASLRelayServers)
	}
	return nil
}

// relayProtocol is the relay's protocol: RelayProtocol or the destination's.
func (a AdminSecurity) relayProtocol(c Config) string {
	if a.RelayProtocol != "" {
		return a.RelayProtocol
	}
	return c.Destination.Protocol()
}

// redacted returns the admin security keys in reference order.
func (a AdminSecurity) redacted() []Property {
	props := []Property{
		{Key: KeyAdminSecurityProtocol, Value: a.Protocol},
		{Key: KeyAdminSASLMechanisms, Value: strings.Join(a.Mechanisms, ",")},
		{Key: KeyAdminSASLRelayServers, Value: strings.Join(a.RelayServers, ",")},
		{Key: KeyAdminSASLRelayProto, Value: a.RelayProtocol},
		{Key: KeyAdminSuperUsers, Value: strings.Join(a.SuperUsers, ";")},
	}
	return append(props, a.TLS.Redacted()...)
}

// adminServerOpts returns the admin server's options for c's admin
// security, and wraps ln in TLS for SSL and SASL_SSL.
func adminServerOpts(c Config, ln net.Listener) ([]protocol.ServerOpt, net.Listener, error) {
	a := c.Admin
	var opts []protocol.ServerOpt
	if a.usesTLS() {
		st, err := a.TLS.NewServerTLS()
		if err != nil {
			return nil, nil, err
		}
		ln = protocol.TLSListener(ln, st.Config())
		opts = append(opts, protocol.TLSPrincipal(st.Principal))
	}
	if a.usesSASL() {
		servers := a.RelayServers
		if len(servers) == 0 {
			servers = c.LocalBootstrapServers
		}
		var relayTLS *tls.Config
		if a.relayProtocol(c) == security.ProtocolSASLSSL {
			cfg, err := c.Destination.TLSConfig()
			if err != nil {
				return nil, nil, fmt.Errorf("sidecar: %s SASL_SSL: %w", KeyAdminSASLRelayProto, err)
			}
			relayTLS = cfg
		}
		opts = append(opts, protocol.SASL(protocol.NewSASLRelay(servers, relayTLS, a.Mechanisms)))
	}
	return opts, ln, nil
}

// peerSecurityWarning is the warning logged at start when the admin
// endpoint is secured but the peers are not (peer.security.protocol
// PLAINTEXT): the internal APIs are then served on admin.listener to
// anyone, exempt from SASL and ACLs, and in a group of more than one
// sidecar the others dial that endpoint without TLS or SASL. The sidecar
// starts anyway; "" when there is nothing to warn about.
func peerSecurityWarning(c Config) string {
	if strings.EqualFold(c.Admin.Protocol, security.ProtocolPlaintext) || c.Peer.SSL() {
		return ""
	}
	internal := "the internal APIs (ApplyCommand, ReadMirrorStates, WriteMirrorStates, DescribeLocalPartitions) stay open to anyone who reaches " + KeyAdminListener
	if n := len(c.RaftMembers()); n > 1 {
		return fmt.Sprintf("%s is %s but %s is PLAINTEXT in a group of %d sidecars: %s, and the sidecars reach each other there without TLS or SASL; set %s=SSL on every sidecar",
			KeyAdminSecurityProtocol, c.Admin.Protocol, KeyPeerSecurityProtocol, n, internal, KeyPeerSecurityProtocol)
	}
	return fmt.Sprintf("%s is %s but %s is PLAINTEXT: %s, bypassing the ACLs; set %s=SSL (needed before other sidecars join)",
		KeyAdminSecurityProtocol, c.Admin.Protocol, KeyPeerSecurityProtocol, internal, KeyPeerSecurityProtocol)
}

package sidecar

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
)

// Keys of the sidecar's properties file, in the order of the reference
// (docs/configuration.md) and of Config.Redacted. The destination cluster's
// client keys are DestinationPrefix + security.ClientKeys.
const (
	KeyLocalBrokerID         = "local.broker.id"
	KeyLocalBootstrapServers = "local.bootstrap.servers"
	KeyAdminListener         = "admin.listener"
	KeyAdminAdvertised       = "admin.advertised.listener"
	KeyRaftListener          = "raft.listener"
	KeyRaftAdvertised        = "raft.advertised.listener"
	KeyHTTPListener          = "http.listener"
	KeyDataDir               = "data.dir"
	KeyRaftPeers             = "raft.peers"
	KeyRaftSnapshotThreshold = "raft.snapshot.threshold"
	KeyRaftSnapshotInterval  = "raft.snapshot.interval.ms"
	KeyLogFormat             = "log.format"
	KeyLogLevel              = "log.level"
	KeyAllowEveryone         = "readonly.allow.everyone.if.no.acl.found"
	KeyFailoverTimeout       = "sidecar.failover.timeout.ms"
	KeyStatePartitions       = "mirror.state.topic.num.partitions"
	KeyThrottledRate         = "mirror.replication.throttled.rate"
	KeyBufferMemory          = "mirror.buffer.memory.bytes"
	KeyCPUCores              = "sidecar.cpu.cores"

	// DestinationPrefix prefixes the Kafka client properties that the
	// sidecar uses towards its own (destination) cluster.
	DestinationPrefix = "destination."
)

// Config is the sidecar's configuration. Build one with DefaultConfig and
// set fields, or read one with LoadConfig/ParseConfig; either way, check it
// with Validate.
type Config struct {
	// LocalBrokerID is the node ID of the broker this sidecar runs next to
	// (local.broker.id). It is also the sidecar's raft node ID.
	LocalBrokerID int32
	// LocalBootstrapServers reaches the local broker (local.bootstrap.servers).
	LocalBootstrapServers []string
	// Destination holds the client properties for the destination cluster
	// (destination.*). Its BootstrapServers are LocalBootstrapServers.
	Destination security.ClientConfig

	AdminListener string // admin.listener: Kafka-protocol admin endpoint
	// Admin is the admin endpoint's authentication and authorization
	// (admin.security.protocol, admin.sasl.*, admin.ssl.*,
	// admin.super.users; adminsec.go).
	Admin        AdminSecurity
	RaftListener string // raft.listener: raft transport
	HTTPListener string // http.listener: /metrics and /healthz

	// AdminAdvertised is the admin address the other sidecars dial
	// (admin.advertised.listener): registered in the raft state for write
	// forwarding, the describe fan-out and the liveness probes. "" = the
	// default of AdminAdvertisedAddr.
	AdminAdvertised string
	// RaftAdvertised is the raft address the other sidecars dial
	// (raft.advertised.listener). "" = the default of RaftAdvertisedAddr.
	RaftAdvertised string

	// DataDir holds raft state and the lock file (data.dir, absolute).
	DataDir string
	// RaftPeers lists the raft group (raft.peers); empty means a group of
	// this sidecar alone. See RaftMembers.
	RaftPeers []RaftPeer
	// RaftSnapshotThreshold and RaftSnapshotInterval are raft's
	// SnapshotThreshold and SnapshotInterval (raft.snapshot.threshold,
	// raft.snapshot.interval.ms): every interval (raft adds up to as much
	// again at random) a snapshot of the raft state is written to data.dir
	// when at least the threshold of log entries were appended since the
	// last one, and the log before it is compacted.
	RaftSnapshotThreshold uint64
	RaftSnapshotInterval  time.Duration

	LogFormat string // log.format: json or console
	LogLevel  string // log.level: debug, info, warn or error

	// AllowEveryone states the destination brokers'
	// allow.everyone.if.no.acl.found (readonly.allow.everyone.if.no.acl.found):
	// auto asks every broker, which gives an answer only when no broker sets
	// the key (Kafka hides its value) and refuses topic starts that need one
	// otherwise; true or false state it. It decides whether read-only mirror
	// topics get an ALLOW ALL for User:* beside their DENY WRITE (DESIGN D4).
	AllowEveryone string

	// FailoverTimeout is how long the raft group waits for a silent sidecar
	// before it moves leadership of that broker's mirror partitions to
	// brokers with live sidecars (sidecar.failover.timeout.ms, DESIGN D7).
	FailoverTimeout time.Duration

	// StatePartitions is the partition count of __mirror_state
	// (mirror.state.topic.num.partitions), used when the sidecars create
	// it. It must be the same on every sidecar and never change.
	StatePartitions int32

	// Peer is how the sidecars authenticate each other (peer.*, peer.go).
	Peer PeerSecurity
	// Limits bounds the listeners (admin.max.connections, ...; peer.go).
	Limits Limits

	// ThrottledRate caps the bytes per second this sidecar appends to its
	// broker for all mirrors and throttled partitions together
	// (mirror.replication.throttled.rate, KIP-1279's destination-side
	// throttle); 0 is no limit. It is the initial rate: a dynamic
	// mirror.replication.throttled.rate of the broker in the raft state
	// replaces it while set (coordinator/throttle.go).
	ThrottledRate int64

	// BufferMemory bounds the fetched record bytes this sidecar holds at
	// once, for all mirrors and partitions (mirror.buffer.memory.bytes).
	BufferMemory int64

	// CPUCores is how many cores run the sidecar's Go code at once
	// (sidecar.cpu.cores, Go's GOMAXPROCS; 0: as many as the host or its
	// cgroup gives). The GOMAXPROCS environment variable wins. See
	// ApplyCPUCores.
	CPUCores int
}

// RaftPeer is one member of the raft group: a sidecar, identified by the ID
// of its broker, and its raft.listener address.
type RaftPeer struct {
	ID      int32
	Address string
}

func (p RaftPeer) String() string { return fmt.Sprintf("%d@%s", p.ID, p.Address) }

// Accepted values of log.format and log.level.
var (
	logFormats = []string{"json", "console"}
	logLevels  = []string{"debug", "info", "warn", "error"}
	allowModes = []string{"auto", "true", "false"}
)

// DefaultConfig returns a Config with every default set. LocalBrokerID is -1
// (unset); LocalBootstrapServers and DataDir are empty; all three are
// required.
func DefaultConfig() Config {
	return Config{
		LocalBrokerID: -1,
		Destination:   security.DefaultClientConfig(DestinationPrefix),
		AdminListener: "127.0.0.1:9191",
		Admin:         defaultAdminSecurity(),
		RaftListener:  "127.0.0.1:9192",
		HTTPListener:  "127.0.0.1:9193",
		LogFormat:     "json",
		LogLevel:      "info",
		AllowEveryone: "auto",

		RaftSnapshotThreshold: raftnode.DefaultSnapshotThreshold,
		RaftSnapshotInterval:  raftnode.DefaultSnapshotInterval,

		FailoverTimeout: 15 * time.Second,
		StatePartitions: 16,
		Peer:            defaultPeerSecurity(),
		Limits:          defaultLimits(),
		BufferMemory:    fetcher.DefaultBufferMemory,
		CPUCores:        DefaultCPUCores,
	}
}

// RaftMembers returns the raft group: RaftPeers, or when that is empty, this
// sidecar alone at its advertised raft address.
func (c Config) RaftMembers() []RaftPeer {
	if len(c.RaftPeers) == 0 {
		return []RaftPeer{{ID: c.LocalBrokerID, Address: c.RaftAdvertisedAddr()}}
	}
	return append([]RaftPeer(nil), c.RaftPeers...)
}

// AdminAdvertisedAddr returns the admin address this sidecar registers for
// the other sidecars, given the address admin.listener is bound to (its
// port is used when admin.listener asks for port 0): admin.advertised.listener
// when set, else admin.listener's host with the bound port. Validate
// allows the default only where it can be dialed: in a group of more than
// this sidecar, admin.listener's host must not be a wildcard, nor loopback
// when the group spans hosts. A wildcard host becomes loopback here, which
// is right for a group of one.
func (c Config) AdminAdvertisedAddr(bound string) string {
	if c.AdminAdvertised != "" {
		return c.AdminAdvertised
	}
	host, port, _ := net.SplitHostPort(c.AdminListener)
	if _, p, err := net.SplitHostPort(bound); err == nil {
		port = p
	}
	return net.JoinHostPort(dialableHost(host), port)
}

// RaftAdvertisedAddr returns the raft address this sidecar advertises:
// raft.advertised.listener when set, else this sidecar's entry in
// raft.peers (which tells the others where to dial it, and which Validate
// requires raft.advertised.listener to equal), else, in a group of one,
// raft.listener with a wildcard host made loopback.
func (c Config) RaftAdvertisedAddr() string {
	if c.RaftAdvertised != "" {
		return c.RaftAdvertised
	}
	if self, ok := c.selfPeer(); ok {
		return self.Address
	}
	host, port, _ := net.SplitHostPort(c.RaftListener)
	return net.JoinHostPort(dialableHost(host), port)
}

// selfPeer returns this sidecar's entry in raft.peers.
func (c Config) selfPeer() (RaftPeer, bool) {
	for _, p := range c.RaftPeers {
		if p.ID == c.LocalBrokerID {
			return p, true
		}
	}
	return RaftPeer{}, false
}

// Validate checks the configuration and returns the first problem as a
// one-line *ConfigError naming the key, the offending value and what is
// expected.
func (c Config) Validate() error {
	if c.LocalBrokerID < 0 {
		return configErr(KeyLocalBrokerID, "%d is negative (expected a broker ID >= 0)", c.LocalBrokerID)
	}
	if len(c.LocalBootstrapServers) == 0 {
		return configErr(KeyLocalBootstrapServers, "is empty (expected host:port of the local broker, e.g. 127.0.0.1:9092)")
	}
	for _, s := range c.LocalBootstrapServers {
		if problem := checkHostPort(s, false, false); problem != "" {
			return configErr(KeyLocalBootstrapServers, "%q %s", s, problem)
		}
	}
	if err := c.Destination.Validate(); err != nil {
		return err
	}
	for _, l := range []struct{ key, addr string }{
		{KeyAdminListener, c.AdminListener},
		{KeyRaftListener, c.RaftListener},
		{KeyHTTPListener, c.HTTPListener},
	} {
		if problem := checkHostPort(l.addr, true, true); problem != "" {
			return configErr(l.key, "%q %s", l.addr, problem)
		}
	}
	if c.DataDir == "" {
		return configErr(KeyDataDir, "is empty (expected an absolute path, e.g. /var/lib/sidemirror)")
	}
	if !filepath.IsAbs(c.DataDir) {
		return configErr(KeyDataDir, "%q is not an absolute path (expected e.g. /var/lib/sidemirror)", c.DataDir)
	}
	if err := c.validateRaftPeers(); err != nil {
		return err
	}
	if err := c.validateAdvertised(); err != nil {
		return err
	}
	if !slices.Contains(logFormats, c.LogFormat) {
		return configErr(KeyLogFormat, "%q is not supported (expected %s)", c.LogFormat, orList(logFormats))
	}
	if !slices.Contains(logLevels, c.LogLevel) {
		return configErr(KeyLogLevel, "%q is not supported (expected %s)", c.LogLevel, orList(logLevels))
	}
	if !slices.Contains(allowModes, c.AllowEveryone) {
		return configErr(KeyAllowEveryone, "%q is not supported (expected %s)", c.AllowEveryone, orList(allowModes))
	}
	if c.RaftSnapshotThreshold < 1 {
		return configErr(KeyRaftSnapshotThreshold, "%d is too small (expected at least 1 log entry)", c.RaftSnapshotThreshold)
	}
	if c.RaftSnapshotInterval < time.Second {
		return configErr(KeyRaftSnapshotInterval, "%d is too short (expected at least 1000 ms)", c.RaftSnapshotInterval.Milliseconds())
	}
	if c.FailoverTimeout < time.Second {
		return configErr(KeyFailoverTimeout, "%d is too short (expected at least 1000 ms)", c.FailoverTimeout.Milliseconds())
	}
	if c.StatePartitions < 1 || c.StatePartitions > 1000 {
		return configErr(KeyStatePartitions, "%d is out of range (expected 1 to 1000)", c.StatePartitions)
	}
	if c.BufferMemory < minBufferMemory {
		return configErr(KeyBufferMemory, "%d is too small (expected bytes, at least %d)", c.BufferMemory, minBufferMemory)
	}
	if c.ThrottledRate < 0 {
		return configErr(KeyThrottledRate, "%d is negative (expected bytes per second, or 0 for no limit)", c.ThrottledRate)
	}
	if c.CPUCores < 0 || c.CPUCores > maxCPUCores {
		return configErr(KeyCPUCores, "%d is out of range (expected 0 for every core, or 1 to %d)", c.CPUCores, maxCPUCores)
	}
	if err := c.validatePeer(); err != nil {
		return err
	}
	return c.Admin.validate(c)
}

func (c Config) validateRaftPeers() error {
	if len(c.RaftPeers) == 0 {
		return nil
	}
	ids := make(map[int32]RaftPeer)
	addrs := make(map[string]RaftPeer)
	foundLocal := false
	for _, p := range c.RaftPeers {
		if p.ID < 0 {
			return configErr(KeyRaftPeers, "%q has a negative ID (expected id@host:port with the broker ID >= 0)", p.String())
		}
		if problem := checkHostPort(p.Address, false, false); problem != "" {
			return configErr(KeyRaftPeers, "%q: address %q %s", p.String(), p.Address, problem)
		}
		if isWildcardHost(hostOf(p.Address)) {
			return configErr(KeyRaftPeers, "%q: address %q is a wildcard address, which no sidecar can dial (expected %d@<the address of that sidecar's host>:%s)",
				p.String(), p.Address, p.ID, portOf(p.Address))
		}
		if prev, dup := ids[p.ID]; dup {
			return configErr(KeyRaftPeers, "ID %d appears twice (%q and %q; expected one entry per broker)", p.ID, prev.String(), p.String())
		}
		if prev, dup := addrs[p.Address]; dup {
			return configErr(KeyRaftPeers, "address %q appears twice (%q and %q; expected one entry per broker)", p.Address, prev.String(), p.String())
		}
		ids[p.ID], addrs[p.Address] = p, p
		foundLocal = foundLocal || p.ID == c.LocalBrokerID
	}
	if !foundLocal {
		return configErr(KeyRaftPeers, "%q does not contain local.broker.id %d (expected an entry %d@<this sidecar's raft.listener>)",
			formatPeers(c.RaftPeers), c.LocalBrokerID, c.LocalBrokerID)
	}
	return nil
}

// LoadConfig reads a properties file, resolves ${env:...} and ${file:...}
// references and returns the validated Config.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, &ConfigError{msg: "config: " + (&properties.FileError{Path: path, Err: err}).Error(), Cause: err}
	}
	defer f.Close()
	props, err := properties.Parse(f)
	if err != nil {
		return Config{}, &ConfigError{msg: "config: " + (&properties.FileError{Path: path, Err: err}).Error(), Cause: err}
	}
	return ParseConfig(props)
}

// field is one sidecar key and how it sets a Config.
type field struct {
	key      string
	required string // non-empty: the key is required; says what is expected
	set      func(c *Config, value string) error
}

var fields = []field{
	{KeyLocalBrokerID, "expected a broker ID >= 0", func(c *Config, v string) error {
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return configErr(KeyLocalBrokerID, "%q is not an integer (expected a broker ID >= 0)", v)
		}
		c.LocalBrokerID = int32(id)
		return nil
	}},
	{KeyLocalBootstrapServers, "expected host:port of the local broker, e.g. 127.0.0.1:9092", func(c *Config, v string) error {
		c.LocalBootstrapServers = splitList(v)
		return nil
	}},
	{KeyAdminListener, "", func(c *Config, v string) error { c.AdminListener = v; return nil }},
	{KeyAdminAdvertised, "", func(c *Config, v string) error { c.AdminAdvertised = v; return nil }},
	{KeyRaftListener, "", func(c *Config, v string) error { c.RaftListener = v; return nil }},
	{KeyRaftAdvertised, "", func(c *Config, v string) error { c.RaftAdvertised = v; return nil }},
	{KeyHTTPListener, "", func(c *Config, v string) error { c.HTTPListener = v; return nil }},
	{KeyDataDir, "expected an absolute path, e.g. /var/lib/sidemirror", func(c *Config, v string) error {
		c.DataDir = v
		if filepath.IsAbs(v) {
			c.DataDir = filepath.Clean(v)
		}
		return nil
	}},
	{KeyRaftPeers, "", func(c *Config, v string) error {
		peers, err := parseRaftPeers(v)
		c.RaftPeers = peers
		return err
	}},
	{KeyRaftSnapshotThreshold, "", func(c *Config, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return configErr(KeyRaftSnapshotThreshold, "%q is not an integer (expected log entries, at least 1)", v)
		}
		c.RaftSnapshotThreshold = n
		return nil
	}},
	{KeyRaftSnapshotInterval, "", func(c *Config, v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return configErr(KeyRaftSnapshotInterval, "%q is not an integer (expected milliseconds, at least 1000)", v)
		}
		c.RaftSnapshotInterval = time.Duration(ms) * time.Millisecond
		return nil
	}},
	{KeyLogFormat, "", func(c *Config, v string) error { c.LogFormat = v; return nil }},
	{KeyLogLevel, "", func(c *Config, v string) error { c.LogLevel = v; return nil }},
	{KeyAllowEveryone, "", func(c *Config, v string) error { c.AllowEveryone = v; return nil }},
	{KeyFailoverTimeout, "", func(c *Config, v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return configErr(KeyFailoverTimeout, "%q is not an integer (expected milliseconds, at least 1000)", v)
		}
		c.FailoverTimeout = time.Duration(ms) * time.Millisecond
		return nil
	}},
	{KeyStatePartitions, "", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return configErr(KeyStatePartitions, "%q is not an integer (expected 1 to 1000)", v)
		}
		c.StatePartitions = int32(n)
		return nil
	}},
	{KeyThrottledRate, "", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return configErr(KeyThrottledRate, "%q is not an integer (expected bytes per second, or 0 for no limit)", v)
		}
		c.ThrottledRate = n
		return nil
	}},
	{KeyBufferMemory, "", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return configErr(KeyBufferMemory, "%q is not an integer (expected bytes, at least %d)", v, minBufferMemory)
		}
		c.BufferMemory = n
		return nil
	}},
	{KeyCPUCores, "", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return configErr(KeyCPUCores, "%q is not an integer (expected 0 for every core, or 1 to %d)", v, maxCPUCores)
		}
		c.CPUCores = n
		return nil
	}},
}

// minBufferMemory is the least mirror.buffer.memory.bytes: 1 MiB, one
// partition's fetch at the default size.
const minBufferMemory = 1 << 20

// ParseConfig builds a Config from properties (as read by properties.Parse):
// unknown keys are refused, ${env:NAME} and ${file:path:key} references are
// resolved, defaults fill what is absent, and the result is validated.
// Problems are reported in file order, one at a time.
func ParseConfig(props []Property) (Config, error) {
	known := make([]string, 0, len(fields)+len(security.ClientKeys))
	byKey := make(map[string]field, len(fields))
	for _, f := range fields {
		known = append(known, f.key)
		byKey[f.key] = f
	}
	for _, k := range security.ClientKeys {
		known = append(known, DestinationPrefix+k)
	}
	for _, p := range props {
		if !slices.Contains(known, p.Key) {
			return Config{}, unknownKeyError(p.Key, known, DestinationPrefix)
		}
	}

	r := properties.NewResolver()
	values := make(map[string]string, len(props))
	client := make(map[string]string)
	for _, p := range props {
		v, err := r.Resolve(p.Key, strings.TrimSpace(p.Value))
		if err != nil {
			return Config{}, referenceError(err)
		}
		values[p.Key] = v
		if strings.HasPrefix(p.Key, DestinationPrefix) {
			client[p.Key] = v
		}
	}

	c := DefaultConfig()
	for _, p := range props {
		if f, ok := byKey[p.Key]; ok {
			if err := f.set(&c, values[p.Key]); err != nil {
				return Config{}, err
			}
		}
	}
	for _, f := range fields {
		if _, ok := values[f.key]; !ok && f.required != "" {
			return Config{}, &ConfigError{Key: f.key, msg: fmt.Sprintf("config: missing required key %q (%s)", f.key, f.required)}
		}
	}
	dest, err := security.ParseClientConfig(client, DestinationPrefix)
	if err != nil {
		return Config{}, err
	}
	c.Destination = dest
	c.Destination.BootstrapServers = c.LocalBootstrapServers
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseRaftPeers parses "id@host:port,id@host:port". Addresses and
// uniqueness are checked by Validate.
func parseRaftPeers(v string) ([]RaftPeer, error) {
	var peers []RaftPeer
	for _, entry := range splitList(v) {
		id, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return nil, configErr(KeyRaftPeers, "%q has no '@' (expected id@host:port, e.g. 1@10.0.0.1:9192)", entry)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 32)
		if err != nil {
			return nil, configErr(KeyRaftPeers, "%q: ID %q is not an integer (expected id@host:port, e.g. 1@10.0.0.1:9192)", entry, id)
		}
		peers = append(peers, RaftPeer{ID: int32(n), Address: strings.TrimSpace(addr)})
	}
	return peers, nil
}

// Redacted returns the effective configuration as key/value pairs in
// reference order, every key included, secrets shown as [hidden].
func (c Config) Redacted() []Property {
	props := []Property{
		{Key: KeyLocalBrokerID, Value: strconv.Itoa(int(c.LocalBrokerID))},
		{Key: KeyLocalBootstrapServers, Value: strings.Join(c.LocalBootstrapServers, ",")},
	}
	props = append(props, c.Destination.Redacted()...)
	props = append(props,
		Property{Key: KeyAdminListener, Value: c.AdminListener},
		Property{Key: KeyAdminAdvertised, Value: c.AdminAdvertised})
	props = append(props, c.Admin.redacted()...)
	props = append(props,
		Property{Key: KeyRaftListener, Value: c.RaftListener},
		Property{Key: KeyRaftAdvertised, Value: c.RaftAdvertised},
		Property{Key: KeyHTTPListener, Value: c.HTTPListener},
		Property{Key: KeyDataDir, Value: c.DataDir},
		Property{Key: KeyRaftPeers, Value: formatPeers(c.RaftPeers)},
		Property{Key: KeyRaftSnapshotThreshold, Value: strconv.FormatUint(c.RaftSnapshotThreshold, 10)},
		Property{Key: KeyRaftSnapshotInterval, Value: strconv.FormatInt(c.RaftSnapshotInterval.Milliseconds(), 10)},
		Property{Key: KeyLogFormat, Value: c.LogFormat},
		Property{Key: KeyLogLevel, Value: c.LogLevel},
		Property{Key: KeyAllowEveryone, Value: c.AllowEveryone},
		Property{Key: KeyFailoverTimeout, Value: strconv.FormatInt(c.FailoverTimeout.Milliseconds(), 10)},
		Property{Key: KeyStatePartitions, Value: strconv.Itoa(int(c.StatePartitions))},
		Property{Key: KeyThrottledRate, Value: strconv.FormatInt(c.ThrottledRate, 10)},
		Property{Key: KeyBufferMemory, Value: strconv.FormatInt(c.BufferMemory, 10)},
		Property{Key: KeyCPUCores, Value: strconv.Itoa(c.CPUCores)},
	)
	return append(props, c.redactedPeer()...)
}

// String prints the effective configuration as properties, one key per
// line, secrets hidden.
func (c Config) String() string {
	var b strings.Builder
	for _, p := range c.Redacted() {
		fmt.Fprintf(&b, "%s=%s\n", p.Key, p.Value)
	}
	return b.String()
}

// MarshalLogObject logs the effective configuration (secrets hidden) as a
// zap object: log.Info("...", zap.Object("config", cfg)).
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, p := range c.Redacted() {
		enc.AddString(p.Key, p.Value)
	}
	return nil
}

func formatPeers(peers []RaftPeer) string {
	s := make([]string, len(peers))
	for i, p := range peers {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Property is one key/value pair of a .properties file.
type Property = properties.Property

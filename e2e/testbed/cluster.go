package testbed

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterOptions describe one KRaft cluster of combined broker+controller
// nodes.
type ClusterOptions struct {
	// Name names the cluster in logs and directories ("source").
	Name string
	// Nodes is the number of nodes; node IDs are 1..Nodes.
	Nodes int
	// SASL makes the client listener SASL_PLAINTEXT with the PLAIN users of
	// Users; otherwise it is PLAINTEXT.
	SASL bool
	// SCRAMUsers (with SASL) also enables SCRAM-SHA-512 on the client
	// listener, with these users created when the nodes are formatted
	// (kafka-storage format --add-scram), beside the PLAIN users.
	SCRAMUsers []User
	// SCRAM (with SASL) enables SCRAM-SHA-512 on the client listener
	// without creating users, for users made later with Kafka's tools or
	// AlterUserScramCredentials; SCRAMUsers implies it.
	SCRAM bool
	// Authorizer enables StandardAuthorizer with allow.everyone.if.no.acl.found
	// (true unless BrokerConfig says otherwise; sidecars beside the cluster
	// get readonly.allow.everyone.if.no.acl.found stated to match, as Kafka
	// does not reveal it) and the super users of SuperUsers. SuperUsers holds User:ANONYMOUS, the
	// principal of every PLAINTEXT client, so on a PLAINTEXT cluster every
	// client keeps full access while ACLs can be created and described.
	Authorizer bool
	// HeapMB is each node's maximum JVM heap (default 512).
	HeapMB int
	// JVMOptions replace the default JVM tuning flags when not nil.
	JVMOptions []string
	// BrokerConfig overrides or adds server.properties entries.
	BrokerConfig map[string]string
	// Racks sets broker.rack of the nodes, by node ID (nodes not named
	// have none).
	Racks map[int32]string
	// Hosts, if set, runs node i in Hosts[i], a host of a multi-host bed,
	// bound to that host's address on the standard ports; otherwise nodes
	// bind free loopback ports.
	Hosts []*Host
	// Proxied gives every node a Proxy (on the bed's gateway with Hosts, on
	// a loopback port without) and a second client listener, REMOTE, that
	// advertises the proxy's address: clients that bootstrap from
	// RemoteBootstrap reach the node through the proxy, those that
	// bootstrap from Bootstrap reach it directly.
	Proxied bool
	// LogDirTmpfsMB (with Hosts), if positive, puts every node's log.dirs
	// (the metadata log included) on a tmpfs of its own of that many MiB,
	// so that Node.FillLogDir can fill it (disk.go). The mounts go with
	// the Network.
	LogDirTmpfsMB int
	// Secure, if set, adds TLS client listeners (SASL_SSL with SCRAM, SSL
	// with client authentication, SASL_SSL with OAUTHBEARER) beside the
	// BROKER listener (tls.go).
	Secure *SecureListeners
}

// User is a SASL/PLAIN principal of a test cluster.
type User struct {
	Name     string
	Password string
}

// The principals of every SASL test cluster. Sidemirror and Admin are super
// users; Alice is an ordinary user that ACLs apply to. Broker is the
// inter-broker principal.
var (
	Sidemirror = User{Name: "sidemirror", Password: "sidemirror-secret"}
	Admin      = User{Name: "admin", Password: "admin-secret"}
	Alice      = User{Name: "alice", Password: "alice-secret"}
	brokerUser = User{Name: "broker", Password: "broker-secret"}
)

// Users lists the PLAIN users every SASL cluster knows.
var Users = []User{Sidemirror, Admin, Alice}

// SuperUsers lists the principals that bypass ACLs on clusters with an
// authorizer. ANONYMOUS is the principal of the PLAINTEXT controller
// listener, which only nodes of the cluster use.
var SuperUsers = []string{"User:" + Sidemirror.Name, "User:" + Admin.Name, "User:" + brokerUser.Name, "User:ANONYMOUS"}

// Cluster is a running (or stopped) test cluster.
type Cluster struct {
	opts  ClusterOptions
	dist  Distribution
	id    string // Kafka cluster ID
	dir   string
	nodes []*Node
	// ownProxies are the loopback bed's proxies (ClusterOptions.Proxied
	// without Hosts), closed by Close; a Network closes its own.
	ownProxies []*Proxy
}

// Node is one broker+controller process of a Cluster.
type Node struct {
	ID             int32
	BrokerAddr     string // client listener, host:port
	ControllerAddr string
	RemoteAddr     string // its proxy's address, BrokerAddr when it has none
	cluster        *Cluster
	host           *Host  // nil on the loopback bed
	proxy          *Proxy // nil unless ClusterOptions.Proxied
	dir            string
	logPath        string
	secureAddrs    map[string]string // listener name -> host:port (tls.go)

	mu   sync.Mutex
	proc *process
}

// StartCluster formats and starts a cluster under parent and waits until
// every node is ready. On error the nodes already started are killed.
func StartCluster(ctx context.Context, dist Distribution, parent string, opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.HeapMB <= 0 {
		opts.HeapMB = 512
	}
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	c := &Cluster{opts: opts, dist: dist, id: newClusterID(), dir: filepath.Join(parent, opts.Name)}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "log4j2.properties"), []byte(log4jConfig), 0o644); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := c.placeNodes(); err != nil {
		return nil, err
	}
	if err := c.placeSecureListeners(); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		n.dir = filepath.Join(c.dir, fmt.Sprintf("node-%d", n.ID))
		n.logPath = filepath.Join(c.dir, fmt.Sprintf("node-%d.log", n.ID))
	}
	for _, n := range c.nodes {
		if err := n.writeConfig(); err != nil {
			return nil, err
		}
	}
	if err := c.format(ctx); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// placeNodes creates the nodes with their addresses: free loopback ports, or
// the standard ports of their hosts, with a proxy each when asked for.
func (c *Cluster) placeNodes() error {
	o := c.opts
	if o.Hosts != nil && len(o.Hosts) != o.Nodes {
		return fmt.Errorf("testbed: %s: %d hosts for %d nodes", o.Name, len(o.Hosts), o.Nodes)
	}
	if o.LogDirTmpfsMB > 0 && o.Hosts == nil {
		return fmt.Errorf("testbed: %s: tmpfs log directories need the nodes on hosts (ClusterOptions.Hosts, the multi-host bed)", o.Name)
	}
	var ports []int
	if o.Hosts == nil {
		var err error
		if ports, err = freePorts(3 * o.Nodes); err != nil {
			return err
		}
	}
	for i := range o.Nodes {
		n := &Node{ID: int32(i + 1), cluster: c}
		if o.Hosts == nil {
			n.BrokerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i]))
			n.ControllerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+1]))
		} else {
			n.host = o.Hosts[i]
			n.BrokerAddr = n.host.Addr(hostBrokerPort)
			n.ControllerAddr = n.host.Addr(hostControllerPort)
		}
		n.RemoteAddr = n.BrokerAddr
		switch {
		case o.Proxied && o.Hosts != nil:
			p, err := n.host.net.NewProxy(n.host.Addr(hostRemotePort))
			if err != nil {
				return err
			}
			n.proxy, n.RemoteAddr = p, p.Addr()
		case o.Proxied:
			// The loopback bed: the REMOTE listener on a third free port,
			// its proxy on another one; Close closes it.
			p, err := NewProxy("127.0.0.1:0", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+2])))
			if err != nil {
				return err
			}
			n.proxy, n.RemoteAddr = p, p.Addr()
			c.ownProxies = append(c.ownProxies, p)
		}
		c.nodes = append(c.nodes, n)
	}
	return nil
}

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.opts.Name }

// ID returns the Kafka cluster ID the nodes were formatted with.
func (c *Cluster) ID() string { return c.id }

// Dir returns the directory holding the cluster's data and logs.
func (c *Cluster) Dir() string { return c.dir }

// allowEveryone is the allow.everyone.if.no.acl.found of the cluster's
// brokers with an authorizer: "true", unless BrokerConfig sets another value.
func (c *Cluster) allowEveryone() string {
	if v, ok := c.opts.BrokerConfig["allow.everyone.if.no.acl.found"]; ok {
		return v
	}
	return "true"
}

// SASL reports whether clients must authenticate with SASL/PLAIN.
func (c *Cluster) SASL() bool { return c.opts.SASL }

// Nodes returns the cluster's nodes, ordered by ID.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with the given ID, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Bootstrap returns the client bootstrap servers of every node.
func (c *Cluster) Bootstrap() string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.BrokerAddr
	}
	return strings.Join(addrs, ",")
}

// RemoteBootstrap returns the bootstrap servers for clients on other hosts
// (a mirror's sidecars): the nodes' proxies when the cluster has them,
// else Bootstrap.
func (c *Cluster) RemoteBootstrap() string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.RemoteAddr
	}
	return strings.Join(addrs, ",")
}

// SecurityProtocol returns the client listener's security.protocol.
func (c *Cluster) SecurityProtocol() string {
	if c.opts.SASL {
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// Close stops every node: SIGTERM, then SIGKILL for those still running after
// a short grace period. Data stays on disk.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = n.Stop(ctx)
		}()
	}
	wg.Wait()
}

// CloseProxies closes the loopback bed's node proxies (ClusterOptions.Proxied
// without Hosts); Env.Close calls it after Close.
func (c *Cluster) CloseProxies() {
	for _, p := range c.ownProxies {
		p.Close()
	}
	c.ownProxies = nil
}

// WaitReady waits until every running node answers Metadata listing all
// running nodes of the cluster.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for _, n := range c.nodes {
		if n.Running() {
			if err := n.WaitReady(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// LogTails returns the last lines of each node's log, headed by its path.
func (c *Cluster) LogTails(lines int) string {
	var b strings.Builder
	for _, n := range c.nodes {
		data, err := os.ReadFile(n.logPath)
		if err != nil {
			fmt.Fprintf(&b, "=== %s: %v\n", n.logPath, err)
			continue
		}
		fmt.Fprintf(&b, "=== last %d lines of %s\n%s\n", lines, n.logPath, tail(string(data), lines))
	}
	return b.String()
}

// format runs Kafka's StorageTool for every node, in parallel.
func (c *Cluster) format(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.format(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *Node) configPath() string { return filepath.Join(n.dir, "server.properties") }

// writeConfig writes the node's server.properties.
func (n *Node) writeConfig() error {
	c := n.cluster
	if err := n.mountDisk(); err != nil {
		return err
	}
	if err := os.MkdirAll(n.dataDir(), 0o755); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	voters := make([]string, len(c.nodes))
	for i, o := range c.nodes {
		voters[i] = fmt.Sprintf("%d@%s", o.ID, o.ControllerAddr)
	}
	rf := strconv.Itoa(min(3, len(c.nodes)))
	minISR := strconv.Itoa(max(1, min(2, len(c.nodes)-1)))
	listeners := "BROKER://" + n.BrokerAddr + ",CONTROLLER://" + n.ControllerAddr
	advertised := "BROKER://" + n.BrokerAddr
	protocols := "BROKER:" + c.SecurityProtocol() + ",CONTROLLER:PLAINTEXT"
	if n.proxy != nil {
		listeners += ",REMOTE://" + n.proxy.Upstream()
		advertised += ",REMOTE://" + n.RemoteAddr
		protocols += ",REMOTE:" + c.SecurityProtocol()
	}
	props := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          strconv.Itoa(int(n.ID)),
		"controller.quorum.voters":                         strings.Join(voters, ","),
		"listeners":                                        listeners,
		"advertised.listeners":                             advertised,
		"listener.security.protocol.map":                   protocols,
		"inter.broker.listener.name":                       "BROKER",
		"controller.listener.names":                        "CONTROLLER",
		"log.dirs":                                         n.dataDir(),
		"auto.create.topics.enable":                        "false",
		"default.replication.factor":                       rf,
		"offsets.topic.replication.factor":                 rf,
		"offsets.topic.num.partitions":                     "10",
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"transaction.state.log.num.partitions":             "10",
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		"group.initial.rebalance.delay.ms":                 "0",
		"num.network.threads":                              "2",
		"num.io.threads":                                   "4",
		"background.threads":                               "4",
		"num.recovery.threads.per.data.dir":                "1",
		"log.cleaner.threads":                              "1",
		"log.cleaner.dedupe.buffer.size":                   strconv.Itoa(16 << 20),
	}
	if c.opts.SASL {
		var jaas strings.Builder
		fmt.Fprintf(&jaas, `org.apache.kafka.common.security.plain.PlainLoginModule required username=%q password=%q`, brokerUser.Name, brokerUser.Password)
		for _, u := range append([]User{brokerUser}, Users...) {
			fmt.Fprintf(&jaas, ` user_%s=%q`, u.Name, u.Password)
		}
		jaas.WriteString(";")
		props["sasl.enabled.mechanisms"] = "PLAIN"
		props["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
		props["listener.name.broker.plain.sasl.jaas.config"] = jaas.String()
		if n.proxy != nil {
			props["listener.name.remote.plain.sasl.jaas.config"] = jaas.String()
		}
		if c.opts.SCRAM || len(c.opts.SCRAMUsers) > 0 {
			const scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
			props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-512"
			props["listener.name.broker.scram-sha-512.sasl.jaas.config"] = scram
			if n.proxy != nil {
				props["listener.name.remote.scram-sha-512.sasl.jaas.config"] = scram
			}
		}
	}
	if c.opts.Authorizer {
		props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		props["allow.everyone.if.no.acl.found"] = "true"
		props["super.users"] = strings.Join(SuperUsers, ";")
	}
	if err := n.secureConfig(props); err != nil {
		return err
	}
	maps.Copy(props, c.opts.BrokerConfig)
	if rack, ok := c.opts.Racks[n.ID]; ok {
		props["broker.rack"] = rack
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(n.configPath(), []byte(b.String()), 0o644)
}

// format runs `kafka-storage format` for the node.
func (n *Node) format(ctx context.Context) error {
	java, err := javaPath()
	if err != nil {
		return err
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.cluster.dir, "log4j2.properties"),
		"-cp", n.cluster.dist.Classpath(), "kafka.tools.StorageTool",
		"format", "-t", n.cluster.id, "-c", n.configPath()}
	if n.cluster.opts.SASL {
		for _, u := range n.cluster.opts.SCRAMUsers {
			args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u.Name, u.Password))
		}
	}
	args = append(args, n.secureFormatArgs()...)
	cmd := exec.CommandContext(ctx, java, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testbed: format %s node %d: %w\n%s", n.cluster.opts.Name, n.ID, err, tail(string(out), 20))
	}
	return nil
}

// jvmOptions returns the node's JVM flags.
func (n *Node) jvmOptions() []string {
	o := n.cluster.opts
	opts := o.JVMOptions
	if opts == nil {
		// Small and frugal: serial GC and the client compiler keep a node's
		// CPU low on a 2-core machine.
		opts = []string{"-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m"}
	}
	return append(append(slices.Clone(opts), n.secureJVMOptions()...),
		fmt.Sprintf("-Xmx%dm", o.HeapMB),
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+filepath.Join(n.cluster.dir, "log4j2.properties"))
}

// launch starts the node's JVM without waiting for readiness.
func (n *Node) launch() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		select {
		case <-n.proc.exited:
		default:
			return fmt.Errorf("testbed: %s node %d is already running", n.cluster.opts.Name, n.ID)
		}
	}
	java, err := javaPath()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	fmt.Fprintf(logf, "===== testbed: starting %s node %d at %s\n", n.cluster.opts.Name, n.ID, time.Now().Format(time.RFC3339Nano))
	args := append(n.jvmOptions(), "-cp", n.cluster.dist.Classpath(), "kafka.Kafka", n.configPath())
	cmd := hostCommand(n.host, java, args...)
	cmd.Dir = n.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	p, err := startProcess(cmd)
	logf.Close() // the child holds its own descriptor
	if err != nil {
		return err
	}
	n.proc = p
	return nil
}

// Start starts a stopped node and waits until it is ready.
func (n *Node) Start(ctx context.Context) error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// Stop shuts the node down with SIGTERM (a controlled shutdown that moves
// leadership away) and waits for it to exit; it kills the node if ctx ends
// first.
func (n *Node) Stop(ctx context.Context) error {
	p := n.current()
	if p == nil {
		return nil
	}
	p.signal(syscall.SIGCONT) // a frozen node must be able to shut down
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		p.signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("testbed: %s node %d did not stop in time and was killed", n.cluster.opts.Name, n.ID)
	}
}

// Kill ends the node with SIGKILL, like a crash, and waits for it to exit.
func (n *Node) Kill() {
	if p := n.current(); p != nil {
		p.signal(syscall.SIGKILL)
		<-p.exited
	}
}

// Running reports whether the node's process is alive.
func (n *Node) Running() bool { return n.current() != nil }

// PID returns the node's process ID, or 0 when it is not running.
func (n *Node) PID() int {
	if p := n.current(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// LogPath returns the file the node's output goes to.
func (n *Node) LogPath() string { return n.logPath }

// Host returns the host the node runs in, nil on the loopback bed.
func (n *Node) Host() *Host { return n.host }

// Proxy returns the proxy in front of the node, or nil.
func (n *Node) Proxy() *Proxy { return n.proxy }

// current returns the running process, or nil.
func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil
	}
	select {
	case <-n.proc.exited:
		return nil
	default:
		return n.proc
	}
}

// WaitReady polls the node until it answers Metadata with itself and every
// other running node of its cluster registered, or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	var last error
	for {
		p := n.current()
		if p == nil {
			return fmt.Errorf("testbed: %s node %d exited during start-up (log %s):\n%s",
				n.cluster.opts.Name, n.ID, n.logPath, tailFile(n.logPath, 30))
		}
		if last = n.probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: %s node %d not ready: %v (log %s):\n%s",
				n.cluster.opts.Name, n.ID, last, n.logPath, tailFile(n.logPath, 30))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// probe asks the node for metadata once.
func (n *Node) probe(ctx context.Context) error {
	opts := append(n.cluster.ClientOptions(Sidemirror),
		kgo.SeedBrokers(n.BrokerAddr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	registered := map[int32]bool{}
	for _, b := range resp.Brokers {
		registered[b.NodeID] = true
	}
	for _, o := range n.cluster.nodes {
		if (o == n || o.Running()) && !registered[o.ID] {
			return fmt.Errorf("node %d not registered yet", o.ID)
		}
	}
	return nil
}

// tailFile returns the last lines of a file, or the error reading it.
func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(data), lines)
}

// newClusterID returns a random Kafka cluster ID (a base64 UUID). Like
// Kafka's Uuid.randomUuid it never starts with '-', which command-line
// parsers would take for an option.
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// log4jConfig sends the broker's logs to standard output, which the test bed
// writes to the node's log file.
const log4jConfig = `status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
`

// Recreate replaces the cluster by a new one at the same addresses, as when
// a cluster is rebuilt: it stops every node, deletes their data, formats
// them with a new cluster ID and starts them again. Clients that reconnect
// reach a cluster with another ID and no topics.
func (c *Cluster) Recreate(ctx context.Context) error {
	c.Close()
	for _, n := range c.nodes {
		if n.Running() {
			return fmt.Errorf("testbed: %s node %d still runs", c.opts.Name, n.ID)
		}
		if err := os.RemoveAll(n.dataDir()); err != nil {
			return fmt.Errorf("testbed: %w", err)
		}
		if err := n.writeConfig(); err != nil {
			return err
		}
	}
	c.id = newClusterID()
	if err := c.format(ctx); err != nil {
		return err
	}
	return c.StartStopped(ctx)
}

// StartStopped launches every node that is not running, all at once (a
// KRaft quorum needs a majority of them to come up), and waits until each
// is ready.
func (c *Cluster) StartStopped(ctx context.Context) error {
	for _, n := range c.nodes {
		if !n.Running() {
			if err := n.launch(); err != nil {
				return err
			}
		}
	}
	return c.WaitReady(ctx)
}

package testbed

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the sidemirror programs built for a test run.
type Binaries struct {
	Sidemirror string // the daemon
	CLI        string // kafka-cluster-mirrors
}

// BuildBinaries builds the daemon and the CLI of the module the tests run
// in into dir.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{
		Sidemirror: filepath.Join(dir, "sidemirror"),
		CLI:        filepath.Join(dir, "kafka-cluster-mirrors"),
	}
	for out, pkg := range map[string]string{b.Sidemirror: "./cmd/sidemirror", b.CLI: "./cmd/kafka-cluster-mirrors"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("testbed: go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// moduleRoot returns the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("testbed: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("testbed: not inside the sidemirror module")
	}
	return filepath.Dir(gomod), nil
}

// SidecarGroup is one sidecar per node of a destination cluster, forming
// one raft group.
type SidecarGroup struct {
	sidecars []*Sidecar
}

// Sidecar is one sidemirror daemon process beside a destination broker.
type Sidecar struct {
	BrokerID  int32
	AdminAddr string
	RaftAddr  string
	HTTPAddr  string

	host       *Host // nil on the loopback bed
	bin        string
	dir        string
	configPath string
	logPath    string

	mu   sync.Mutex
	proc *process
}

// StartSidecars writes a configuration for one sidecar per node of dest
// (local.broker.id = node ID, authenticating as the Sidemirror super user),
// starts them all and waits until each answers /healthz. A node on a host
// of a multi-host bed gets its sidecar in the same host, configured as
// docs/installation.md ("Three hosts") tells an operator: the standard
// ports (9191 admin, 9192 raft, 9193 HTTP) bound on every interface, the
// host's address advertised (admin.advertised.listener, and raft.peers for
// raft); the Sidecar's addresses are the host's. Otherwise sidecars bind
// free loopback ports. extra adds or overrides configuration keys of every
// sidecar.
func StartSidecars(ctx context.Context, bin string, dest *Cluster, parent string, extra map[string]string) (*SidecarGroup, error) {
	return StartSidecarsFor(ctx, bin, dest, parent, func(*Sidecar) map[string]string { return extra })
}

// StartSidecarsFor is StartSidecars with the keys that config returns for
// each sidecar added to or overriding that sidecar's configuration.
func StartSidecarsFor(ctx context.Context, bin string, dest *Cluster, parent string, config func(*Sidecar) map[string]string) (*SidecarGroup, error) {
	nodes := dest.Nodes()
	ports, err := freePorts(3 * len(nodes))
	if err != nil {
		return nil, err
	}
	g := &SidecarGroup{}
	for i, n := range nodes {
		s := &Sidecar{
			BrokerID:  n.ID,
			AdminAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i])),
			RaftAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+1])),
			HTTPAddr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i+2])),
			host:      n.Host(),
			bin:       bin,
			dir:       filepath.Join(parent, fmt.Sprintf("sidecar-%d", n.ID)),
		}
		if h := s.host; h != nil {
			s.AdminAddr, s.RaftAddr, s.HTTPAddr = h.Addr(hostAdminPort), h.Addr(hostRaftPort), h.Addr(hostHTTPPort)
		}
		s.configPath = filepath.Join(s.dir, "sidecar.properties")
		s.logPath = filepath.Join(parent, fmt.Sprintf("sidecar-%d.log", n.ID))
		g.sidecars = append(g.sidecars, s)
	}
	peers := make([]string, len(g.sidecars))
	for i, s := range g.sidecars {
		peers[i] = fmt.Sprintf("%d@%s", s.BrokerID, s.RaftAddr)
	}
	for i, s := range g.sidecars {
		props := map[string]string{
			"local.broker.id":               strconv.Itoa(int(s.BrokerID)),
			"local.bootstrap.servers":       nodes[i].BrokerAddr,
			"destination.security.protocol": dest.SecurityProtocol(),
			"admin.listener":                s.AdminAddr,
			"raft.listener":                 s.RaftAddr,
			"http.listener":                 s.HTTPAddr,
			"data.dir":                      filepath.Join(s.dir, "data"),
			"raft.peers":                    strings.Join(peers, ","),
			"log.format":                    "console",
			"log.level":                     "debug",
		}
		if s.host != nil {
			props["admin.listener"] = ":" + strconv.Itoa(hostAdminPort)
			props["admin.advertised.listener"] = s.AdminAddr
			props["raft.listener"] = ":" + strconv.Itoa(hostRaftPort)
			props["http.listener"] = ":" + strconv.Itoa(hostHTTPPort)
		}
		if dest.opts.Authorizer {
			// The brokers set allow.everyone.if.no.acl.found, whose value
			// Kafka does not reveal: stated, as docs/configuration.md
			// tells operators to (without it a sidecar refuses to start
			// topics that have no ACLs of their own).
			props["readonly.allow.everyone.if.no.acl.found"] = dest.allowEveryone()
		}
		if dest.SASL() {
			cp := dest.ClientProperties(Sidemirror)
			props["destination.sasl.mechanism"] = cp["sasl.mechanism"]
			props["destination.sasl.jaas.config"] = cp["sasl.jaas.config"]
		}
		maps.Copy(props, config(s))
		if err := s.writeConfig(props); err != nil {
			return nil, err
		}
	}
	for _, s := range g.sidecars {
		if err := s.launch(); err != nil {
			g.Close()
			return nil, err
		}
	}
	for _, s := range g.sidecars {
		if err := s.WaitHealthy(ctx); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Sidecars returns the group's sidecars, ordered by broker ID.
func (g *SidecarGroup) Sidecars() []*Sidecar { return g.sidecars }

// Sidecar returns the sidecar beside broker id, or nil.
func (g *SidecarGroup) Sidecar(id int32) *Sidecar {
	for _, s := range g.sidecars {
		if s.BrokerID == id {
			return s
		}
	}
	return nil
}

// AdminBootstrap returns every sidecar's admin endpoint, comma-separated,
// for the CLI's --bootstrap-server.
func (g *SidecarGroup) AdminBootstrap() string {
	addrs := make([]string, len(g.sidecars))
	for i, s := range g.sidecars {
		addrs[i] = s.AdminAddr
	}
	return strings.Join(addrs, ",")
}

// Close stops every sidecar (SIGTERM, then SIGKILL after a grace period).
func (g *SidecarGroup) Close() {
	var wg sync.WaitGroup
	for _, s := range g.sidecars {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx)
		}()
	}
	wg.Wait()
}

// KillAll ends every sidecar with SIGKILL at the same moment, as when every
// host restarts at once, and waits until all have exited.
func (g *SidecarGroup) KillAll() {
	var procs []*process
	for _, s := range g.sidecars {
		if p := s.current(); p != nil {
			p.signal(syscall.SIGKILL)
			procs = append(procs, p)
		}
	}
	for _, p := range procs {
		<-p.exited
	}
}

// StartStopped launches every sidecar that is not running, all at once, and
// waits until each is healthy.
func (g *SidecarGroup) StartStopped(ctx context.Context) error {
	var started []*Sidecar
	for _, s := range g.sidecars {
		if !s.Running() {
			if err := s.launch(); err != nil {
				return err
			}
			started = append(started, s)
		}
	}
	for _, s := range started {
		if err := s.WaitHealthy(ctx); err != nil {
			return err
		}
	}
	return nil
}

// LogTails returns the last lines of every sidecar's log.
func (g *SidecarGroup) LogTails(lines int) string {
	var b strings.Builder
	for _, s := range g.sidecars {
		fmt.Fprintf(&b, "=== last %d lines of %s\n%s\n", lines, s.logPath, tailFile(s.logPath, lines))
	}
	return b.String()
}

func (s *Sidecar) writeConfig(props map[string]string) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(s.configPath, []byte(b.String()), 0o600)
}

// SetConfig sets key in the sidecar's configuration file and returns its
// previous value ("" if it had none); the sidecar reads it when it starts
// next.
func (s *Sidecar) SetConfig(key, value string) (string, error) {
	return s.editConfig(key, &value)
}

// UnsetConfig removes key from the sidecar's configuration file, so that
// the sidecar runs with the key's default when it starts next, and returns
// its previous value ("" if it had none).
func (s *Sidecar) UnsetConfig(key string) (string, error) {
	return s.editConfig(key, nil)
}

// editConfig sets key to *value, or removes it when value is nil.
func (s *Sidecar) editConfig(key string, value *string) (old string, err error) {
	err = s.EditConfig(func(props map[string]string) {
		old = props[key]
		if value == nil {
			delete(props, key)
		} else {
			props[key] = *value
		}
	})
	return old, err
}

// EditConfig lets edit change the keys of the sidecar's configuration
// file at once (set, replace or delete entries of props); the sidecar reads
// it when it starts next.
func (s *Sidecar) EditConfig(edit func(props map[string]string)) error {
	data, err := os.ReadFile(s.configPath)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	props := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), "="); ok {
			props[k] = v
		}
	}
	edit(props)
	return s.writeConfig(props)
}

// ConfigPath returns the sidecar's configuration file.
func (s *Sidecar) ConfigPath() string { return s.configPath }

// LogPath returns the file the sidecar's output goes to.
func (s *Sidecar) LogPath() string { return s.logPath }

func (s *Sidecar) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		select {
		case <-s.proc.exited:
		default:
			return fmt.Errorf("testbed: sidecar %d is already running", s.BrokerID)
		}
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	fmt.Fprintf(logf, "===== testbed: starting sidecar %d at %s\n", s.BrokerID, time.Now().Format(time.RFC3339Nano))
	cmd := hostCommand(s.host, s.bin, "run", "--config", s.configPath)
	cmd.Stdout = logf
	cmd.Stderr = logf
	p, err := startProcess(cmd)
	logf.Close()
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

func (s *Sidecar) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	select {
	case <-s.proc.exited:
		return nil
	default:
		return s.proc
	}
}

// Start starts a stopped sidecar and waits until it is healthy.
func (s *Sidecar) Start(ctx context.Context) error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.WaitHealthy(ctx)
}

// Stop sends SIGTERM and waits for the sidecar to exit; it kills it when
// ctx ends first. It returns an error when the exit was not clean.
func (s *Sidecar) Stop(ctx context.Context) error {
	p := s.current()
	if p == nil {
		return nil
	}
	p.signal(syscall.SIGCONT) // a frozen sidecar must be able to shut down
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-ctx.Done():
		p.signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("testbed: sidecar %d did not stop in time and was killed", s.BrokerID)
	}
}

// Kill ends the sidecar with SIGKILL, like a crash.
func (s *Sidecar) Kill() {
	if p := s.current(); p != nil {
		p.signal(syscall.SIGKILL)
		<-p.exited
	}
}

// Freeze stops the sidecar with SIGSTOP; Thaw resumes it.
func (s *Sidecar) Freeze() {
	if p := s.current(); p != nil {
		p.signal(syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen sidecar with SIGCONT.
func (s *Sidecar) Thaw() {
	if p := s.current(); p != nil {
		p.signal(syscall.SIGCONT)
	}
}

// Host returns the host the sidecar runs in, nil on the loopback bed.
func (s *Sidecar) Host() *Host { return s.host }

// Running reports whether the sidecar's process is alive.
func (s *Sidecar) Running() bool { return s.current() != nil }

// WaitHealthy polls /healthz until it answers 200 or ctx ends.
func (s *Sidecar) WaitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	for {
		if s.current() == nil {
			return fmt.Errorf("testbed: sidecar %d exited during start-up (log %s):\n%s", s.BrokerID, s.logPath, tailFile(s.logPath, 30))
		}
		resp, err := client.Get("http://" + s.HTTPAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: sidecar %d not healthy (log %s):\n%s", s.BrokerID, s.logPath, tailFile(s.logPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Metrics returns the sidecar's /metrics page.
func (s *Sidecar) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// PID returns the sidecar's process ID, or 0 when it is not running.
func (s *Sidecar) PID() int {
	if p := s.current(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

package testbed

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MirrorMakerOptions describe one dedicated-mode MirrorMaker 2 process that
// replicates from Source to Target (one flow, SourceAlias->TargetAlias).
type MirrorMakerOptions struct {
	// SourceAlias and TargetAlias are MM2's cluster aliases; they name its
	// internal topics (mm2-offsets.<source>.internal,
	// <source>.checkpoints.internal, ...), so runs with different source
	// aliases do not share state. Letters and digits only.
	SourceAlias, TargetAlias string
	Source, Target           *Cluster
	// Topics and Groups are MM2's topics and groups filters (regexes,
	// comma-separated).
	Topics, Groups string
	// Config adds or overrides mm2.properties entries.
	Config map[string]string
	// HeapMB is the JVM's maximum heap (default 384).
	HeapMB int
}

// MirrorMaker is a running (or stopped) MirrorMaker 2 JVM.
type MirrorMaker struct {
	configPath string
	logPath    string
	proc       *process
	mu         sync.Mutex
}

// mirrorMakerLog4j is the MM2 JVM's log4j2 configuration: INFO, with the
// clients' chatter at WARN.
const mirrorMakerLog4j = `status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
`

// MirrorMakerProperties returns the mm2.properties of opts: the two
// clusters as the Admin user, the one flow enabled (the reverse flow and its
// heartbeats off), replication factor 1 for every topic MM2 creates (the
// bed's clusters may have a single node), and opts.Config on top.
func MirrorMakerProperties(opts MirrorMakerOptions) map[string]string {
	s, d := opts.SourceAlias, opts.TargetAlias
	p := map[string]string{
		"clusters":                                s + ", " + d,
		s + "->" + d + ".enabled":                 "true",
		s + "->" + d + ".topics":                  opts.Topics,
		s + "->" + d + ".groups":                  opts.Groups,
		d + "->" + s + ".enabled":                 "false",
		d + "->" + s + ".emit.heartbeats.enabled": "false",
		"replication.factor":                      "1",
		"checkpoints.topic.replication.factor":    "1",
		"heartbeats.topic.replication.factor":     "1",
		"offset-syncs.topic.replication.factor":   "1",
		"offset.storage.replication.factor":       "1",
		"status.storage.replication.factor":       "1",
		"config.storage.replication.factor":       "1",
	}
	for alias, c := range map[string]*Cluster{s: opts.Source, d: opts.Target} {
		for k, v := range c.ClientProperties(Admin) {
			p[alias+"."+k] = v
		}
	}
	maps.Copy(p, opts.Config)
	return p
}

// StartMirrorMaker writes mm2.properties under parent/mm2-<source alias>
// and starts org.apache.kafka.connect.mirror.MirrorMaker (dedicated mode)
// with the jars of dist (ResolveMirrorMaker). It does not wait for
// replication to begin: callers wait for what they need to see (records on
// the target, a checkpoint). The JVM dies with the test process, and
// KillAll ends it like the brokers.
func StartMirrorMaker(dist Distribution, parent string, opts MirrorMakerOptions) (*MirrorMaker, error) {
	if opts.HeapMB == 0 {
		opts.HeapMB = 384
	}
	dir := filepath.Join(parent, "mm2-"+opts.SourceAlias)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	props := MirrorMakerProperties(opts)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	m := &MirrorMaker{configPath: filepath.Join(dir, "mm2.properties"), logPath: filepath.Join(dir, "mm2.log")}
	if err := os.WriteFile(m.configPath, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	log4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(mirrorMakerLog4j), 0o644); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "===== testbed: starting MirrorMaker 2 %s->%s at %s\n", opts.SourceAlias, opts.TargetAlias, time.Now().Format(time.RFC3339Nano))
	args := []string{"-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		fmt.Sprintf("-Xmx%dm", opts.HeapMB), "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + log4j,
		"-cp", dist.Classpath(), "org.apache.kafka.connect.mirror.MirrorMaker", m.configPath}
	cmd := hostCommand(nil, java, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if m.proc, err = startProcess(cmd); err != nil {
		return nil, err
	}
	return m, nil
}

// ConfigPath returns the mm2.properties file.
func (m *MirrorMaker) ConfigPath() string { return m.configPath }

// LogPath returns the file the JVM's output goes to.
func (m *MirrorMaker) LogPath() string { return m.logPath }

// LogTail returns the last lines of the MM2 log, headed by its path.
func (m *MirrorMaker) LogTail(lines int) string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return fmt.Sprintf("=== %s: %v\n", m.logPath, err)
	}
	return fmt.Sprintf("=== last %d lines of %s\n%s\n", lines, m.logPath, tail(string(data), lines))
}

// PID returns the JVM's process ID, or 0 once it has exited.
func (m *MirrorMaker) PID() int {
	if !m.Running() {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Running reports whether the JVM is alive.
func (m *MirrorMaker) Running() bool {
	select {
	case <-m.proc.exited:
		return false
	default:
		return true
	}
}

// Stop shuts MM2 down with SIGTERM (its tasks commit their offsets and
// stop) and waits for it to exit; it kills the JVM if ctx ends first.
func (m *MirrorMaker) Stop(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.signal(syscall.SIGTERM)
	select {
	case <-m.proc.exited:
		return nil
	case <-ctx.Done():
		m.proc.signal(syscall.SIGKILL)
		<-m.proc.exited
		return fmt.Errorf("testbed: MirrorMaker 2 did not stop in time and was killed")
	}
}

// Kill ends the JVM with SIGKILL and waits for it to exit.
func (m *MirrorMaker) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.signal(syscall.SIGKILL)
	<-m.proc.exited
}

package testbed

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvOptions describe the clusters of an Env.
type EnvOptions struct {
	Source      ClusterOptions
	Destination ClusterOptions
	// Sidecars starts one sidemirror sidecar beside every destination node,
	// built from this module, with SidecarConfig added to each one's
	// configuration.
	Sidecars      bool
	SidecarConfig map[string]string
	// SidecarConfigFor, if set, adds or overrides keys of one sidecar's
	// configuration after SidecarConfig (its addresses, say).
	SidecarConfigFor func(*Sidecar) map[string]string
	// MultiHost runs every node, and the sidecar beside each destination
	// node, in a host of its own on one Network (Env.Net): source nodes in
	// hosts s1, s2, ..., destination nodes in d1, d2, .... The source's
	// nodes have proxies (ClusterOptions.Proxied): mirrors reach them at
	// Source.RemoteBootstrap(), and the Env's source faults act on that
	// path. It needs root and iproute2; Source.Hosts and Destination.Hosts
	// are set by StartEnv.
	MultiHost bool
	// StartTimeout bounds resolving jars and starting both clusters
	// (default 5 minutes).
	StartTimeout time.Duration
}

// DefaultEnvOptions is the standard test bed: a 1-node PLAINTEXT source and
// a 3-node destination with SASL/PLAIN and StandardAuthorizer.
func DefaultEnvOptions() EnvOptions {
	return EnvOptions{
		Source:      ClusterOptions{Name: "source", Nodes: 1},
		Destination: ClusterOptions{Name: "destination", Nodes: 3, SASL: true, Authorizer: true},
	}
}

// Env is a source and a destination cluster started together.
type Env struct {
	Dist        Distribution
	Dir         string
	Source      *Cluster
	Destination *Cluster
	Bin         Binaries      // set when sidecars were asked for
	Sidecars    *SidecarGroup // nil unless EnvOptions.Sidecars
	Net         *Network      // nil unless EnvOptions.MultiHost
}

// Clusters returns the env's clusters.
func (e *Env) Clusters() []*Cluster { return []*Cluster{e.Source, e.Destination} }

// StartEnv resolves Kafka and starts both clusters under a new temporary
// directory. progress, if not nil, receives a line per step.
func StartEnv(ctx context.Context, opts EnvOptions, progress func(string)) (*Env, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	dist, err := Resolve(ctx, KafkaVersion(), progress)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sidemirror-e2e-")
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	e := &Env{Dist: dist, Dir: dir}
	if opts.MultiHost {
		if err := e.placeOnHosts(&opts); err != nil {
			e.Close()
			return nil, err
		}
		say(fmt.Sprintf("multi-host bed: bridge %s at %s, hosts %s", e.Net.bridge, e.Net.Gateway(), e.Net.describeHosts()))
	}
	say(fmt.Sprintf("starting Kafka %s clusters under %s", dist.Version, dir))
	var wg sync.WaitGroup
	var srcErr, dstErr error
	wg.Add(2)
	go func() { defer wg.Done(); e.Source, srcErr = StartCluster(ctx, dist, dir, opts.Source) }()
	go func() { defer wg.Done(); e.Destination, dstErr = StartCluster(ctx, dist, dir, opts.Destination) }()
	wg.Wait()
	if srcErr != nil || dstErr != nil {
		e.Close()
		if srcErr != nil {
			return nil, srcErr
		}
		return nil, dstErr
	}
	if opts.Sidecars {
		say("building and starting sidecars")
		if e.Bin, err = BuildBinaries(ctx, dir); err != nil {
			e.Close()
			return nil, err
		}
		if e.Sidecars, err = StartSidecarsFor(ctx, e.Bin.Sidemirror, e.Destination, dir, opts.sidecarConfig); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// sidecarConfig returns the configuration keys the options add to one
// sidecar's.
func (o EnvOptions) sidecarConfig(s *Sidecar) map[string]string {
	props := maps.Clone(o.SidecarConfig)
	if props == nil {
		props = map[string]string{}
	}
	if o.SidecarConfigFor != nil {
		maps.Copy(props, o.SidecarConfigFor(s))
	}
	return props
}

// placeOnHosts creates the Network and one host per node of each cluster.
func (e *Env) placeOnHosts(opts *EnvOptions) error {
	var err error
	if e.Net, err = NewNetwork(); err != nil {
		return err
	}
	place := func(o *ClusterOptions, prefix string) error {
		o.Hosts = nil
		for i := range max(o.Nodes, 1) {
			h, err := e.Net.AddHost(fmt.Sprintf("%s%d", prefix, i+1))
			if err != nil {
				return err
			}
			o.Hosts = append(o.Hosts, h)
		}
		return nil
	}
	if err := place(&opts.Source, "s"); err != nil {
		return err
	}
	opts.Source.Proxied = true
	return place(&opts.Destination, "d")
}

// Close stops the sidecars, then both clusters, then removes the network.
func (e *Env) Close() {
	if e.Sidecars != nil {
		e.Sidecars.Close()
	}
	for _, c := range e.Clusters() {
		if c != nil {
			c.Close()
			c.CloseProxies()
		}
	}
	if e.Net != nil {
		if err := e.Net.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// LogTails returns the tails of every node's log.
func (e *Env) LogTails(lines int) string {
	var s string
	for _, c := range e.Clusters() {
		if c != nil {
			s += c.LogTails(lines)
		}
	}
	if e.Sidecars != nil {
		s += e.Sidecars.LogTails(lines)
	}
	return s
}

// Main is TestMain for packages that need the clusters: it starts them once,
// stores the Env in *env, runs the tests, prints the tail of every node's
// log when a test failed, stops the clusters and exits with the tests'
// code. A SIGINT or SIGTERM kills every JVM before the process exits, and a
// crash of the test process takes the JVMs with it (see startProcess).
// The directory of a failed run is kept for inspection.
func Main(m *testing.M, opts EnvOptions, env **Env) {
	flag.Parse()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "testbed: %v: killing Kafka nodes\n", s)
		KillAll()
		CloseNetworks()
		os.Exit(130)
	}()
	start := time.Now()
	e, err := StartEnv(context.Background(), opts, func(s string) { fmt.Fprintln(os.Stderr, "testbed:", s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "testbed: clusters ready in %.1fs: source %s, destination %s\n",
		time.Since(start).Seconds(), e.Source.Bootstrap(), e.Destination.Bootstrap())
	*env = e
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testbed: tests failed; Kafka logs:\n%s", e.LogTails(40))
	}
	e.Close()
	if code == 0 {
		_ = os.RemoveAll(e.Dir)
	} else {
		fmt.Fprintf(os.Stderr, "testbed: kept %s for inspection\n", e.Dir)
	}
	os.Exit(code)
}

// DumpLogsOnFailure makes t print the tail of every node's log of the
// clusters when t fails.
func DumpLogsOnFailure(t testing.TB, clusters ...*Cluster) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range clusters {
				t.Log(c.LogTails(40))
			}
		}
	})
}

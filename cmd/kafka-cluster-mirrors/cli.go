package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// The actions, in the order the error messages list them.
var actions = []string{"create", "delete", "describe", "list", "start", "stop", "pause", "resume", "alter",
	"add-sidecar", "remove-sidecar", "list-sidecars"}

// sidecarActions change or list the raft group; they take no --mirror.
var sidecarActions = map[string]bool{"add-sidecar": true, "remove-sidecar": true, "list-sidecars": true}

// clusterMirrorsEntityType is kafka-configs.sh's --entity-type of mirrors
// (KIP-1279 §8.3).
const clusterMirrorsEntityType = "cluster-mirrors"

// topicActions take --topics.
var topicActions = map[string]bool{"start": true, "stop": true, "pause": true, "resume": true}

// Defaults of the admin client.
const (
	defaultClientID       = "kafka-cluster-mirrors"
	defaultRequestTimeout = 30 * time.Second
	// reseedRequestTimeout is the least time --start --reseed waits: the
	// sidecar copies the diverged records before it answers (up to 15
	// minutes, coordinator.ReseedTimeout).
	reseedRequestTimeout = 16 * time.Minute
	dialTimeout          = 10 * time.Second
)

// usage is printed by --help; it follows KIP-1279's help text.
const usage = `Create cluster mirrors and manage mirrored topics.
Option                                  Description
------                                  -----------
--bootstrap-server <String: server to   REQUIRED: A broker of the
  connect to>                             destination cluster (the sidecars
                                          are found in __mirror_state), or
                                          the admin endpoint (host:port) of a
                                          sidemirror sidecar. Several may be
                                          given, comma-separated; the first
                                          that connects is used.
--add-config <String: key=value,...>    Configs of the mirror to set, with
                                          --alter: comma-separated key=value
                                          entries; a value with commas goes
                                          in square brackets (key=[a,b]).
--add-config-file <String: property     Property file with configs of the
  file>                                   mirror to set, with --alter (keeps
                                          secrets off the command line).
--add-sidecar                           Add a sidecar to the raft group of
                                          the sidecars (with --broker-id,
                                          --raft-address, --admin-address).
--admin-address <String: host:port>     The admin endpoint of the sidecar to
                                          add.
--alter                                 Alter the configuration of a cluster
                                          mirror (with --add-config,
                                          --add-config-file, --delete-config).
--broker-id <Integer: broker ID>        The broker ID of the sidecar to add or
                                          remove.
--command-config <String: command       Property file containing configs to be
  config property file>                   passed to the admin client
                                          (client.id, request.timeout.ms; and
                                          security.protocol, sasl.* and ssl.*
                                          for a broker).
--create                                Create a new cluster mirror from a
                                          source cluster.
--delete                                Delete a cluster mirror.
--delete-config <String: key,...>       Configs of the mirror to remove, with
                                          --alter: comma-separated keys.
--describe                              Describe a cluster mirror including
                                          partition lag and state.
--entity-name <String: mirror>          kafka-configs.sh's spelling of
                                          --mirror, with --entity-type
                                          cluster-mirrors.
--entity-type <String: entity type>     kafka-configs.sh's entity type; only
                                          cluster-mirrors is served.
--exclude <String: exclude patterns>    Comma-separated list of topic names or
                                          regex patterns to exclude from
                                          mirroring. Only valid with --start.
--help                                  Print usage information.
--json                                  Output description in JSON format
--list                                  List all cluster mirrors.
--list-sidecars                         List the sidecars of the raft group
                                          and which one leads.
--mirror <String: mirror>               The name of the cluster mirror. It
                                          must not end with .stopped or
                                          .paused.
--mirror-config <String: mirror config  Property file containing source
  property file>                          cluster configs for mirroring.
--pause                                 Pause mirroring for topics matching
                                          the given patterns.
--raft-address <String: host:port>      The raft address of the sidecar to
                                          add.
--remove-sidecar                        Remove a sidecar from the raft group
                                          (with --broker-id).
--reseed                                With --start: re-seed topics whose log
                                          on this cluster diverged from the
                                          source's (failback). Their
                                          divergent records are copied to
                                          <topic>.diverged-<timestamp>, then
                                          the topic is deleted, re-created
                                          and mirrored from the source.
--resume                                Resume mirroring for previously paused
                                          topics matching the given patterns.
--start                                 Start mirroring topics matching the
                                          given patterns.
--stop                                  Stop mirroring topics matching the
                                          given patterns.
--topics <String: topics>               Comma-separated list of topic names or
                                          regex patterns (e.g., 'my-topic,
                                          orders-.*,payments').
--version                               Display the version.
`

// Config is a parsed command line.
type Config struct {
	BootstrapServers  []string // --bootstrap-server, split on commas
	CommandConfigPath string   // --command-config
	Action            string   // one of actions
	actionsGiven      []string // every action flag given, for Validate
	Mirror            string   // --mirror
	MirrorConfigPath  string   // --mirror-config
	Topics            []string // --topics, split on commas
	Exclude           []string // --exclude, split on commas
	JSON              bool     // --json
	Reseed            bool     // --reseed

	AddConfigFlag  string   // --add-config, parsed by Load
	AddConfigFile  string   // --add-config-file
	DeleteConfig   []string // --delete-config, split on commas
	EntityType     string   // --entity-type
	BrokerID       int64    // --broker-id
	brokerIDGiven  bool
	entityConflict bool                  // --mirror and --entity-name differ
	RaftAddress    string                // --raft-address
	AdminAddress   string                // --admin-address
	AddConfig      []properties.Property // --add-config and --add-config-file entries, by Load

	// Loaded from the property files by Load.
	MirrorConfig   []properties.Property // --mirror-config's entries, in file order
	ClientID       string                // client.id of --command-config
	RequestTimeout time.Duration         // request.timeout.ms of --command-config
	brokerSecurity security.ClientConfig // the security settings of --command-config, for brokers (bootstrap.go)
}

// configFromFlags copies the parsed flags into a Config.
func configFromFlags(c *cli.Context) Config {
	cfg := Config{
		BootstrapServers:  splitList(c.String("bootstrap-server")),
		CommandConfigPath: c.String("command-config"),
		Mirror:            c.String("mirror"),
		MirrorConfigPath:  c.String("mirror-config"),
		Topics:            splitList(c.String("topics")),
		Exclude:           splitList(c.String("exclude")),
		JSON:              c.Bool("json"),
		Reseed:            c.Bool("reseed"),
		ClientID:          defaultClientID,
		RequestTimeout:    defaultRequestTimeout,

		AddConfigFlag: c.String("add-config"),
		AddConfigFile: c.String("add-config-file"),
		DeleteConfig:  splitList(c.String("delete-config")),
		EntityType:    c.String("entity-type"),
		BrokerID:      c.Int64("broker-id"),
		brokerIDGiven: c.IsSet("broker-id"),
		RaftAddress:   c.String("raft-address"),
		AdminAddress:  c.String("admin-address"),
	}
	if name := c.String("entity-name"); name != "" {
		if cfg.Mirror != "" && cfg.Mirror != name {
			cfg.entityConflict = true
		}
		cfg.Mirror = name
	}
	for _, a := range actions {
		if c.Bool(a) {
			cfg.actionsGiven = append(cfg.actionsGiven, a)
		}
	}
	if len(cfg.actionsGiven) == 1 {
		cfg.Action = cfg.actionsGiven[0]
	}
	return cfg
}

// splitList splits a comma-separated list, dropping blanks around entries
// and empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// flagList formats action names as "--create, --delete and --list".
func flagList(names []string, conj string) string {
	fs := make([]string, len(names))
	for i, n := range names {
		fs[i] = "--" + n
	}
	if len(fs) < 2 {
		return strings.Join(fs, "")
	}
	return strings.Join(fs[:len(fs)-1], ", ") + " " + conj + " " + fs[len(fs)-1]
}

// Validate checks the flags and their combinations, without reading files.
func (cfg *Config) Validate() error {
	if len(cfg.BootstrapServers) == 0 {
		return errors.New("--bootstrap-server is required: a broker (host:port) of the destination cluster, or a sidecar's admin endpoint")
	}
	for _, s := range cfg.BootstrapServers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("--bootstrap-server entry %q is not host:port", s)
		}
	}
	switch len(cfg.actionsGiven) {
	case 0:
		return fmt.Errorf("exactly one action is required: %s", flagList(actions, "or"))
	case 1:
	default:
		return fmt.Errorf("exactly one action is allowed, got %s; the actions are %s",
			flagList(cfg.actionsGiven, "and"), flagList(actions, "and"))
	}
	a := cfg.Action
	if err := cfg.validateAdmin(); err != nil {
		return err
	}
	switch {
	case a != "list" && a != "describe" && !sidecarActions[a] && cfg.Mirror == "":
		return fmt.Errorf("--%s requires --mirror", a)
	case a == "list" && cfg.Mirror != "":
		return errors.New("--mirror is not valid with --list")
	case a == "create" && cfg.MirrorConfigPath == "":
		return errors.New("--create requires --mirror-config, a property file with the source cluster's bootstrap.servers")
	case a != "create" && cfg.MirrorConfigPath != "":
		return errors.New("--mirror-config is only valid with --create")
	case topicActions[a] && len(cfg.Topics) == 0:
		return fmt.Errorf("--%s requires --topics", a)
	case !topicActions[a] && len(cfg.Topics) > 0:
		return fmt.Errorf("--topics is only valid with %s", flagList([]string{"start", "stop", "pause", "resume"}, "or"))
	case a != "start" && len(cfg.Exclude) > 0:
		return errors.New("--exclude is only valid with --start")
	case a != "start" && cfg.Reseed:
		return errors.New("--reseed is only valid with --start: kafka-cluster-mirrors --start --reseed --topics <diverged topics> --mirror <mirror>")
	case cfg.JSON && a != "describe" && a != "list":
		return errors.New("--json is only valid with --describe or --list")
	}
	return nil
}

// Load reads the property files named by the flags.
func (cfg *Config) Load() error {
	if cfg.CommandConfigPath != "" {
		props, err := properties.ReadFile(cfg.CommandConfigPath)
		if err != nil {
			return fmt.Errorf("--command-config: %w", err)
		}
		for _, p := range props {
			switch p.Key {
			case "client.id":
				cfg.ClientID = p.Value
			case "request.timeout.ms":
				ms, err := strconv.ParseInt(p.Value, 10, 32)
				if err != nil || ms <= 0 {
					return fmt.Errorf("--command-config %s: line %d: request.timeout.ms must be a positive number of milliseconds, got %q",
						cfg.CommandConfigPath, p.Line, p.Value)
				}
				cfg.RequestTimeout = time.Duration(ms) * time.Millisecond
			}
		}
		if err := cfg.loadBrokerSecurity(props); err != nil { // bootstrap.go
			return err
		}
	}
	if err := cfg.loadAlter(); err != nil {
		return err
	}
	if cfg.MirrorConfigPath != "" {
		props, err := properties.ReadFile(cfg.MirrorConfigPath)
		if err != nil {
			return fmt.Errorf("--mirror-config: %w", err)
		}
		found := false
		for _, p := range props {
			found = found || (p.Key == "bootstrap.servers" && strings.TrimSpace(p.Value) != "")
		}
		if !found {
			return fmt.Errorf("--mirror-config %s has no bootstrap.servers: set it to the source cluster's bootstrap servers", cfg.MirrorConfigPath)
		}
		cfg.MirrorConfig = props
	}
	return nil
}

// newApp returns the command line parser; its action runs the command with
// the given output writers and stores the exit code in *code.
func newApp(stdout, stderr io.Writer, code *int) *cli.App {
	return &cli.App{
		Name:            "kafka-cluster-mirrors",
		Usage:           "create cluster mirrors and manage mirrored topics",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelp:        true,
		HideHelpCommand: true,
		HideVersion:     true,
		// --help is our own flag, but urfave/cli still handles it, printing
		// this template (plain text).
		CustomAppHelpTemplate: usage,
		ExitErrHandler:        func(*cli.Context, error) {}, // run prints and exits
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%w (see --help)", err)
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "add-config"},
			&cli.StringFlag{Name: "add-config-file"},
			&cli.BoolFlag{Name: "add-sidecar"},
			&cli.StringFlag{Name: "admin-address"},
			&cli.BoolFlag{Name: "alter"},
			&cli.StringFlag{Name: "bootstrap-server"},
			&cli.Int64Flag{Name: "broker-id"},
			&cli.StringFlag{Name: "command-config"},
			&cli.BoolFlag{Name: "create"},
			&cli.BoolFlag{Name: "delete"},
			&cli.StringFlag{Name: "delete-config"},
			&cli.BoolFlag{Name: "describe"},
			&cli.StringFlag{Name: "entity-name"},
			&cli.StringFlag{Name: "entity-type"},
			&cli.StringFlag{Name: "exclude"},
			&cli.BoolFlag{Name: "help"},
			&cli.BoolFlag{Name: "json"},
			&cli.BoolFlag{Name: "list"},
			&cli.BoolFlag{Name: "list-sidecars"},
			&cli.StringFlag{Name: "mirror"},
			&cli.StringFlag{Name: "mirror-config"},
			&cli.BoolFlag{Name: "pause"},
			&cli.StringFlag{Name: "raft-address"},
			&cli.BoolFlag{Name: "remove-sidecar"},
			&cli.BoolFlag{Name: "reseed"},
			&cli.BoolFlag{Name: "resume"},
			&cli.BoolFlag{Name: "start"},
			&cli.BoolFlag{Name: "stop"},
			&cli.StringFlag{Name: "topics", Aliases: []string{"topic"}}, // --topic: the KIP's DR example
			&cli.BoolFlag{Name: "version"},
		},
		Action: func(c *cli.Context) error {
			// --help never gets here: urfave/cli prints the help template.
			switch {
			case c.Bool("version"):
				fmt.Fprintf(stdout, "kafka-cluster-mirrors %s\n", version)
				return nil
			case c.Args().Present():
				return fmt.Errorf("unexpected argument %q (see --help)", c.Args().First())
			}
			cfg := configFromFlags(c)
			if err := cfg.Validate(); err != nil {
				return err
			}
			if err := cfg.Load(); err != nil {
				return err
			}
			cl, err := connect(c.Context, cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			*code = execute(c.Context, cfg, cl, cfg.dialer(), stdout, stderr)
			return nil
		},
	}
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code := 0
	if err := newApp(stdout, stderr, &code).RunContext(ctx, args); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return code
}

// connect dials the bootstrap servers in order and returns a client of the
// sidecar the first one that connects is or leads to.
func connect(ctx context.Context, cfg Config) (*protocol.Client, error) {
	var errs []string
	for _, addr := range cfg.BootstrapServers {
		cl, err := protocol.Dial(ctx, addr, protocol.DialTimeout(dialTimeout), protocol.ClientID(cfg.ClientID))
		if err == nil {
			return resolveSidecar(ctx, cfg, addr, cl) // a broker's address leads to a sidecar (bootstrap.go)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("could not connect to --bootstrap-server %s: %s",
		strings.Join(cfg.BootstrapServers, ","), strings.Join(errs, "; "))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// The actions, in the order the error messages list them.
var actions = []string{"create", "delete", "describe", "list", "start", "stop", "pause", "resume", "recover", "alter",
	"add-sidecar", "remove-sidecar", "list-sidecars", "add-acl", "list-acls", "remove-acl"}

// sidecarActions change or list the raft group; they take no --mirror.
var sidecarActions = map[string]bool{"add-sidecar": true, "remove-sidecar": true, "list-sidecars": true}

// clusterMirrorsEntityType is kafka-configs.sh's --entity-type of mirrors
// (KIP-1279 §8.3).
const clusterMirrorsEntityType = "cluster-mirrors"

// topicActions take --topics and require it.
var topicActions = map[string]bool{"start": true, "stop": true, "pause": true, "resume": true, "recover": true}

// Defaults of the admin client.
const (
	defaultClientID       = "kafka-cluster-mirrors"
	defaultRequestTimeout = 30 * time.Second
	// reseedRequestTimeout is the least time --start --reseed waits: the
	// sidecar copies the diverged records before it answers (up to 15
	// minutes, coordinator.ReseedTimeout).
	reseedRequestTimeout = 16 * time.Minute
	dialTimeout          = 10 * time.Second
	// defaultInterval is how often --wait and --watch describe.
	defaultInterval = 2 * time.Second
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
--add-acl                               Add ACLs (kafka-acls.sh --add): with
                                          --cluster-mirror or --cluster,
                                          --operation and --allow-principal
                                          or --deny-principal. --add,
                                          --list and --remove are
                                          --add-acl, --list-acls and
                                          --remove-acl when --cluster-mirror,
                                          --cluster or a principal is given.
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
--allow-host <String: host>             Host of the --allow-principal ACLs
                                          (default *). Repeatable.
--allow-principal <String: principal>   Principal (User:name) the ACLs allow.
                                          Repeatable.
--alter                                 Alter the configuration of a cluster
                                          mirror (with --add-config,
                                          --add-config-file, --delete-config).
--broker-id <Integer: broker ID>        The broker ID of the sidecar to add or
                                          remove.
--cluster                               The ACL resource is the CLUSTER (raft
                                          membership, ACL changes).
--cluster-mirror <String: mirror>       The ACL resource is this mirror ('*'
                                          for every mirror).
--command-config <String: command       Property file containing configs to be
  config property file>                   passed to the admin client
                                          (client.id, request.timeout.ms,
                                          security.protocol, sasl.mechanism,
                                          sasl.jaas.config, ssl.truststore.*,
                                          ssl.keystore.*, ...).
--create                                Create a new cluster mirror from a
                                          source cluster.
--delete                                Delete a cluster mirror.
--deny-host <String: host>              Host of the --deny-principal ACLs
                                          (default *). Repeatable.
--deny-principal <String: principal>    Principal (User:name) the ACLs deny.
                                          Repeatable.
--delete-config <String: key,...>       Configs of the mirror to remove, with
                                          --alter: comma-separated keys.
--describe                              Describe a cluster mirror including
                                          partition lag and state.
--entity-name <String: entity name>     kafka-configs.sh's entity name: the
                                          mirror (--mirror) with
                                          --entity-type cluster-mirrors, the
                                          broker ID with brokers, the topic
                                          with topics.
--entity-type <String: entity type>     kafka-configs.sh's entity type:
                                          cluster-mirrors; brokers and topics
                                          for the throttle configs
                                          mirror.replication.throttled.rate
                                          and
                                          mirror.replication.throttled.replicas
                                          (with --alter or --describe).
--exclude <String: exclude patterns>    Comma-separated list of topic names or
                                          regex patterns to exclude from
                                          mirroring. Only valid with --start.
--failed                                With --describe: only the FAILED
                                          partitions, with their automatic
                                          retries (RETRY: n/max, or
                                          NonRetryable) and reason (ERROR).
--help                                  Print usage information.
--interval <String: duration>           How often --wait and --watch ask
                                          (milliseconds or 2s, 1m; default
                                          2s).
--json                                  Output description in JSON format
--list                                  List all cluster mirrors.
--list-acls                             List ACLs (kafka-acls.sh --list),
                                          optionally of --cluster-mirror,
                                          --cluster or --principal.
--list-sidecars                         List the sidecars of the raft group
                                          and which one leads.
--mirror <String: mirror>               The name of the cluster mirror. It
                                          must not end with .stopped or
                                          .paused.
--mirror-config <String: mirror config  Property file containing source
  property file>                          cluster configs for mirroring.
--operation <String: operation>         ACL operation: Create, Delete, Alter,
                                          Describe, AlterConfigs,
                                          DescribeConfigs or All. Repeatable.
--pause                                 Pause mirroring for topics matching
                                          the given patterns.
--principal <String: principal>        With --list-acls: only this
                                          principal's ACLs.
--raft-address <String: host:port>      The raft address of the sidecar to
                                          add.
--recover                               Restart the FAILED partitions of the
                                          topics matching the given patterns,
                                          with new automatic retries.
--remove-acl                            Remove ACLs (kafka-acls.sh --remove):
                                          those named, or every ACL of the
                                          resource.
--remove-sidecar                        Remove a sidecar from the raft group
                                          (with --broker-id).
--resource-pattern-type <String: type>  LITERAL (default) or PREFIXED; ANY
                                          (the default of --list-acls) or
                                          MATCH to list or remove.
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
--state <String: states>                With --describe: only the partitions
                                          in these states (comma-separated,
                                          e.g. FAILED,LOG_TRUNCATION).
--stop                                  Stop mirroring topics matching the
                                          given patterns.
--timeout <String: duration>            With --wait: give up after this long
                                          (milliseconds or 90s, 10m); exit 4.
--topics <String: topics>               Comma-separated list of topic names or
                                          regex patterns (e.g., 'my-topic,
                                          orders-.*,payments'). With
                                          --describe: only these topics.
--version                               Display the version.
--wait                                  With --start or --resume: return once
                                          every partition of the topics is
                                          MIRRORING with lag 0.
--watch                                 With --describe: describe again every
                                          --interval, with each mirror's
                                          total lag, throughput (MB/s and
                                          records/s) and an ETA, until
                                          interrupted.

Long options may be abbreviated to any unambiguous prefix (--bootstrap for
--bootstrap-server). Exit codes: 0 success; 1 error; 2 settings refused at
validation (--command-config's, or a mirror config's by the sidecar); 3
--describe found FAILED partitions (among those it shows), or --wait met
one; 4 --wait timed out.
`

// Config is a parsed command line.
type Config struct {
	BootstrapServers  []string      // --bootstrap-server, split on commas
	CommandConfigPath string        // --command-config
	Action            string        // one of actions
	actionsGiven      []string      // every action flag given, for Validate
	Mirror            string        // --mirror
	MirrorConfigPath  string        // --mirror-config
	Topics            []string      // --topics, split on commas
	Exclude           []string      // --exclude, split on commas
	JSON              bool          // --json
	Reseed            bool          // --reseed
	Failed            bool          // --failed
	States            []string      // --state, split on commas, upper-cased
	Wait              bool          // --wait
	Watch             bool          // --watch
	Timeout           time.Duration // --timeout (--wait); 0: none
	Interval          time.Duration // --interval (--wait, --watch)
	timeoutFlag       string
	intervalFlag      string

	AddConfigFlag  string   // --add-config, parsed by Load
	AddConfigFile  string   // --add-config-file
	DeleteConfig   []string // --delete-config, split on commas
	EntityType     string   // --entity-type
	EntityName     string   // --entity-name of --entity-type brokers or topics (configs.go)
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
	// Security holds the client security keys of --command-config
	// (security.protocol, sasl.*, ssl.*; security.go); the zero value is
	// PLAINTEXT.
	Security security.ClientConfig

	ACL aclFlags // --add-acl, --list-acls, --remove-acl (acls.go)
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
		Failed:            c.Bool("failed"),
		States:            splitList(strings.ToUpper(c.String("state"))),
		Wait:              c.Bool("wait"),
		Watch:             c.Bool("watch"),
		timeoutFlag:       c.String("timeout"),
		intervalFlag:      c.String("interval"),
		Interval:          defaultInterval,
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
		ACL:           aclFlagsFrom(c),
	}
	if name := c.String("entity-name"); name != "" && cfg.configEntity() {
		cfg.EntityName = name
	} else if name != "" {
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
	if err := cfg.validateACL(); err != nil {
		return err
	}
	switch {
	case cfg.configEntity():
		return cfg.validateEntity()
	case a != "list" && a != "describe" && !sidecarActions[a] && !aclActions[a] && cfg.Mirror == "":
		return fmt.Errorf("--%s requires --mirror", a)
	case a == "list" && cfg.Mirror != "":
		return errors.New("--mirror is not valid with --list")
	case a == "create" && cfg.MirrorConfigPath == "":
		return errors.New("--create requires --mirror-config, a property file with the source cluster's bootstrap.servers")
	case a != "create" && cfg.MirrorConfigPath != "":
		return errors.New("--mirror-config is only valid with --create")
	case topicActions[a] && len(cfg.Topics) == 0:
		return fmt.Errorf("--%s requires --topics", a)
	case !topicActions[a] && a != "describe" && len(cfg.Topics) > 0:
		return fmt.Errorf("--topics is only valid with %s", flagList([]string{"start", "stop", "pause", "resume", "recover", "describe"}, "or"))
	case a != "describe" && cfg.Failed:
		return errors.New("--failed is only valid with --describe")
	case a != "describe" && len(cfg.States) > 0:
		return errors.New("--state is only valid with --describe")
	case cfg.Failed && len(cfg.States) > 0:
		return errors.New("--failed and --state cannot be combined: --failed shows the FAILED partitions")
	case a != "start" && len(cfg.Exclude) > 0:
		return errors.New("--exclude is only valid with --start")
	case a != "start" && cfg.Reseed:
		return errors.New("--reseed is only valid with --start: kafka-cluster-mirrors --start --reseed --topics <diverged topics> --mirror <mirror>")
	case cfg.JSON && a != "describe" && a != "list":
		return errors.New("--json is only valid with --describe or --list")
	case cfg.JSON && cfg.Failed:
		return errors.New("--failed is a table; with --json use --state FAILED")
	case cfg.Wait && a != "start" && a != "resume":
		return errors.New("--wait is only valid with --start or --resume")
	case cfg.Wait && cfg.Reseed:
		return errors.New("--wait is not valid with --reseed")
	case cfg.Watch && a != "describe":
		return errors.New("--watch is only valid with --describe")
	case cfg.Watch && cfg.JSON:
		return errors.New("--watch is a table; --json is not valid with it")
	case cfg.timeoutFlag != "" && !cfg.Wait:
		return errors.New("--timeout is only valid with --wait")
	case cfg.intervalFlag != "" && !cfg.Wait && !cfg.Watch:
		return errors.New("--interval is only valid with --wait or --watch")
	}
	var err error
	if cfg.timeoutFlag != "" {
		if cfg.Timeout, err = parseDuration("--timeout", cfg.timeoutFlag); err != nil {
			return err
		}
	}
	if cfg.intervalFlag != "" {
		if cfg.Interval, err = parseDuration("--interval", cfg.intervalFlag); err != nil {
			return err
		}
	}
	for _, s := range cfg.States {
		if _, ok := partstate.Parse(s); !ok {
			return fmt.Errorf("--state %s is not a partition state (expected %s)", s, strings.Join(stateNames(), ", "))
		}
	}
	if a == "describe" {
		if _, err := compileTopicFilter(cfg.Topics); err != nil {
			return err
		}
	}
	return nil
}

// parseDuration reads a positive duration: milliseconds (as Kafka's tools
// take them) or a Go duration such as 90s or 10m.
func parseDuration(flag, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if ms, nerr := strconv.ParseInt(v, 10, 64); nerr == nil {
		d, err = time.Duration(ms)*time.Millisecond, nil
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive duration (milliseconds, or with a unit: 90s, 10m)", flag, v)
	}
	return d, nil
}

// stateNames returns the names of the partition states.
func stateNames() []string {
	out := make([]string, len(partstate.States))
	for i, s := range partstate.States {
		out[i] = s.String()
	}
	return out
}

// compileTopicFilter compiles --describe --topics: names or regexes, each
// matched against the whole topic name, as the server does for the other
// actions. No patterns: every topic.
func compileTopicFilter(patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("--topics %q is not a valid regex: %v", p, err)
		}
		out = append(out, re)
	}
	return out, nil
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
		if err := cfg.loadSecurity(props); err != nil {
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
		DisableSliceFlagSeparator: true, // a principal may hold commas (User:CN=a,O=b)
		Flags: append(aclCLIFlags(),
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
			&cli.BoolFlag{Name: "failed"},
			&cli.BoolFlag{Name: "help"},
			&cli.StringFlag{Name: "interval"},
			&cli.BoolFlag{Name: "json"},
			&cli.BoolFlag{Name: "list"},
			&cli.BoolFlag{Name: "list-sidecars"},
			&cli.StringFlag{Name: "mirror"},
			&cli.StringFlag{Name: "mirror-config"},
			&cli.BoolFlag{Name: "pause"},
			&cli.StringFlag{Name: "raft-address"},
			&cli.BoolFlag{Name: "recover"},
			&cli.BoolFlag{Name: "remove-sidecar"},
			&cli.BoolFlag{Name: "reseed"},
			&cli.BoolFlag{Name: "resume"},
			&cli.BoolFlag{Name: "start"},
			&cli.StringFlag{Name: "state"},
			&cli.BoolFlag{Name: "stop"},
			&cli.StringFlag{Name: "timeout"},
			&cli.StringFlag{Name: "topics", Aliases: []string{"topic"}}, // --topic: the KIP's DR example
			&cli.BoolFlag{Name: "version"},
			&cli.BoolFlag{Name: "wait"},
			&cli.BoolFlag{Name: "watch"},
		),
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
	app := newApp(stdout, stderr, &code)
	args, err := expandPrefixes(rewriteKafkaACLsVerbs(args, app.Flags), app.Flags)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		if errors.Is(err, errSettings) {
			return exitSettings
		}
		return 1
	}
	return code
}

// expandPrefixes rewrites abbreviated long options to their full names, as
// Kafka's tools (joptsimple) accept them: --bootstrap is --bootstrap-server
// when no other option starts with "bootstrap". An exact name always wins;
// a prefix of several options is an error naming them; an unknown option is
// left for the parser to refuse. It works from the flag definitions, so
// every option added later is covered. args[0] is the program name; "--"
// ends the options, and the value of an option that takes one is skipped.
func expandPrefixes(args []string, flags []cli.Flag) ([]string, error) {
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	takesValue := func(f cli.Flag) bool {
		_, isBool := f.(*cli.BoolFlag)
		return !isBool
	}
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		arg := out[i]
		if arg == "--" {
			break
		}
		dashes := len(arg) - len(strings.TrimLeft(arg, "-"))
		if dashes == 0 || dashes > 2 || len(arg) == dashes {
			continue // an argument, or a bare "-"
		}
		name, value, hasValue := strings.Cut(arg[dashes:], "=")
		f, exact := byName[name]
		if !exact {
			var matches []string
			seen := map[cli.Flag]bool{}
			for _, fl := range flags {
				for _, n := range fl.Names() {
					if strings.HasPrefix(n, name) && !seen[fl] {
						seen[fl] = true
						matches = append(matches, fl.Names()[0])
					}
				}
			}
			switch len(matches) {
			case 0:
				continue
			case 1:
				f = byName[matches[0]]
				out[i] = "--" + matches[0]
				if hasValue {
					out[i] += "=" + value
				}
			default:
				slices.Sort(matches)
				return nil, fmt.Errorf("option --%s is ambiguous: it could be %s (see --help)", name, flagList(matches, "or"))
			}
		}
		if takesValue(f) && !hasValue {
			i++ // its value, even if it starts with a dash
		}
	}
	return out, nil
}

// connect dials the bootstrap servers in order and returns a client of the
// sidecar the first one that connects is or leads to.
func connect(ctx context.Context, cfg Config) (*protocol.Client, error) {
	opts, err := cfg.clientOpts()
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, addr := range cfg.BootstrapServers {
		cl, err := protocol.Dial(ctx, addr, opts...)
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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds --alter (a mirror's configuration, as kafka-configs.sh
// --entity-type cluster-mirrors does) and the raft membership actions
// (--add-sidecar, --remove-sidecar, --list-sidecars). No output echoes a
// configuration value: values may be secrets.

// dialer connects to another admin endpoint: the raft leader a sidecar
// named in a NOT_CONTROLLER answer. The returned func closes the client.
type dialer func(ctx context.Context, addr string) (client, func(), error)

// validateAdmin checks the flags of --alter and the sidecar actions.
func (cfg *Config) validateAdmin() error {
	a := cfg.Action
	idFlag := a == "add-sidecar" || a == "remove-sidecar"
	switch {
	case cfg.entityConflict:
		return errors.New("--mirror and --entity-name name different mirrors; give one of them")
	case cfg.EntityType != "" && !slices.Contains(entityTypes, cfg.EntityType):
		return fmt.Errorf("--entity-type %s is not served by the sidecars; they serve %s", cfg.EntityType, strings.Join(entityTypes, ", "))
	case sidecarActions[a] && cfg.Mirror != "":
		return fmt.Errorf("--mirror is not valid with --%s", a)
	case a == "alter" && cfg.AddConfigFlag == "" && cfg.AddConfigFile == "" && len(cfg.DeleteConfig) == 0:
		return errors.New("--alter requires --add-config, --add-config-file or --delete-config")
	case a != "alter" && (cfg.AddConfigFlag != "" || cfg.AddConfigFile != "" || len(cfg.DeleteConfig) > 0):
		return errors.New("--add-config, --add-config-file and --delete-config are only valid with --alter")
	case idFlag && !cfg.brokerIDGiven:
		return fmt.Errorf("--%s requires --broker-id", a)
	case !idFlag && cfg.brokerIDGiven:
		return errors.New("--broker-id is only valid with --add-sidecar or --remove-sidecar")
	case cfg.BrokerID < 0 || cfg.BrokerID > math.MaxInt32:
		return fmt.Errorf("--broker-id %d is not a broker ID (0 to %d)", cfg.BrokerID, math.MaxInt32)
	case a == "add-sidecar" && (cfg.RaftAddress == "" || cfg.AdminAddress == ""):
		return errors.New("--add-sidecar requires --raft-address and --admin-address, the sidecar's raft.listener and admin.listener (host:port)")
	case a != "add-sidecar" && (cfg.RaftAddress != "" || cfg.AdminAddress != ""):
		return errors.New("--raft-address and --admin-address are only valid with --add-sidecar")
	}
	for _, f := range []struct{ flag, addr string }{{"--raft-address", cfg.RaftAddress}, {"--admin-address", cfg.AdminAddress}} {
		if _, _, err := net.SplitHostPort(f.addr); f.addr != "" && err != nil {
			return fmt.Errorf("%s %q is not host:port", f.flag, f.addr)
		}
	}
	return nil
}

// loadAlter parses --add-config and reads --add-config-file.
func (cfg *Config) loadAlter() error {
	props, err := parseAddConfig(cfg.AddConfigFlag)
	if err != nil {
		return err
	}
	if cfg.AddConfigFile != "" {
		fromFile, err := properties.ReadFile(cfg.AddConfigFile)
		if err != nil {
			return fmt.Errorf("--add-config-file: %w", err)
		}
		props = append(props, fromFile...)
	}
	seen := map[string]bool{}
	for _, p := range props {
		if seen[p.Key] {
			return fmt.Errorf("config key %s is given twice in --add-config and --add-config-file; give it once", p.Key)
		}
		seen[p.Key] = true
	}
	for _, k := range cfg.DeleteConfig {
		if seen[k] {
			return fmt.Errorf("config key %s is both added and deleted; do one or the other", k)
		}
	}
	cfg.AddConfig = props
	return nil
}

// dialer returns how to reach another admin endpoint with the options of
// the first connection.
func (cfg *Config) dialer() dialer {
	return func(ctx context.Context, addr string) (client, func(), error) {
		opts, err := cfg.clientOpts()
		if err != nil {
			return nil, nil, err
		}
		cl, err := protocol.Dial(ctx, addr, opts...)
		if err != nil {
			return nil, nil, err
		}
		return cl, func() { _ = cl.Close() }, nil
	}
}

// parseAddConfig parses --add-config as kafka-configs.sh does:
// comma-separated key=value entries, where a value holding commas is put in
// square brackets (k=[a,b]), which are dropped. Errors name the entry's
// position and key, never its value.
func parseAddConfig(s string) ([]properties.Property, error) {
	var props []properties.Property
	for i, entry := range splitTopLevel(s) {
		n := i + 1
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok:
			return nil, fmt.Errorf("--add-config entry %d has no '=': expected key=value (a value with commas goes in square brackets: key=[a,b])", n)
		case k == "":
			return nil, fmt.Errorf("--add-config entry %d has no key: expected key=value", n)
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			v = v[1 : len(v)-1]
		} else if strings.ContainsAny(v, "[]") {
			return nil, fmt.Errorf("--add-config: the value of %s has unbalanced square brackets: put the whole value in them, key=[a,b]", k)
		}
		props = append(props, properties.Property{Key: k, Value: v, Line: n})
	}
	return props, nil
}

// splitTopLevel splits s on the commas that are not inside square
// brackets.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth = max(0, depth-1)
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// alterMirror sends IncrementalAlterConfigs for the mirror: SET for every
// added key, DELETE for every deleted one.
func alterMirror(ctx context.Context, cl client, mirror string, add []properties.Property, del []string, out io.Writer) error {
	res := protocol.AlterConfigsResource{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: mirror}
	for _, p := range add {
		v := p.Value
		res.Configs = append(res.Configs, protocol.AlterableConfig{Name: p.Key, ConfigOperation: protocol.ConfigOpSet, Value: &v})
	}
	for _, k := range del {
		res.Configs = append(res.Configs, protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpDelete})
	}
	req := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{res}}
	req.SetVersion(1)
	resp, err := do[*protocol.IncrementalAlterConfigsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if len(resp.Responses) != 1 || resp.Responses[0].ResourceName != mirror {
		return fmt.Errorf("IncrementalAlterConfigs answered for %d resources, not for mirror %s alone", len(resp.Responses), mirror)
	}
	r := resp.Responses[0]
	if err := protocol.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(out, "Completed updating config for mirror %s.\n", mirror)
	return nil
}

// membershipOutcome returns the error and leader address of an AddSidecar
// or RemoveSidecar response.
func membershipOutcome(resp protocol.Response) (leader *string, err error) {
	switch r := resp.(type) {
	case *protocol.AddSidecarResponse:
		return r.LeaderAdminAddress, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	case *protocol.RemoveSidecarResponse:
		return r.LeaderAdminAddress, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	}
	return nil, fmt.Errorf("unexpected %T response", resp)
}

// changeMembership sends an AddSidecar or RemoveSidecar request. A sidecar
// that is not the raft leader answers NOT_CONTROLLER naming the leader; the
// request is then sent there, once.
func changeMembership(ctx context.Context, cl client, dial dialer, req protocol.Request) error {
	resp, err := cl.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("%s request failed: %w", protocol.KeyName(req.Key()), err)
	}
	leader, outcome := membershipOutcome(resp)
	if !errors.Is(outcome, kerr.NotController) || leader == nil || *leader == "" || dial == nil {
		return outcome
	}
	lc, closeLeader, err := dial(ctx, *leader)
	if err != nil {
		return fmt.Errorf("the raft leader's admin endpoint is %s, but connecting to it failed: %w", *leader, err)
	}
	defer closeLeader()
	resp, err = lc.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("%s request to the raft leader at %s failed: %w", protocol.KeyName(req.Key()), *leader, err)
	}
	_, outcome = membershipOutcome(resp)
	return outcome
}

// addSidecar adds a sidecar to the raft group.
func addSidecar(ctx context.Context, cl client, dial dialer, id int32, raftAddr, adminAddr string, out io.Writer) error {
	req := &protocol.AddSidecarRequest{BrokerId: id, RaftAddress: raftAddr, AdminAddress: adminAddr}
	if err := changeMembership(ctx, cl, dial, req); err != nil {
		return err
	}
	fmt.Fprintf(out, "Added sidecar %d to the raft group\n", id)
	return nil
}

// removeSidecar removes a sidecar from the raft group.
func removeSidecar(ctx context.Context, cl client, dial dialer, id int32, out io.Writer) error {
	if err := changeMembership(ctx, cl, dial, &protocol.RemoveSidecarRequest{BrokerId: id}); err != nil {
		return err
	}
	fmt.Fprintf(out, "Removed sidecar %d from the raft group\n", id)
	return nil
}

// listSidecars prints the raft group as the answering sidecar sees it.
func listSidecars(ctx context.Context, cl client, out io.Writer) error {
	resp, err := do[*protocol.DescribeSidecarsResponse](ctx, cl, &protocol.DescribeSidecarsRequest{})
	if err != nil {
		return err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	const row = "%-6s %-30s %-30s %s\n"
	fmt.Fprintf(out, row, "ID", "RAFT-ADDRESS", "ADMIN-ADDRESS", "ROLE")
	for _, s := range resp.Sidecars {
		role := "FOLLOWER"
		switch {
		case s.BrokerId == resp.LeaderId:
			role = "LEADER"
		case !s.Voter:
			role = "NONVOTER"
		}
		admin := "-"
		if s.AdminAddress != nil && *s.AdminAddress != "" {
			admin = *s.AdminAddress
		}
		fmt.Fprintf(out, row, strconv.Itoa(int(s.BrokerId)), s.RaftAddress, admin, role)
	}
	return nil
}

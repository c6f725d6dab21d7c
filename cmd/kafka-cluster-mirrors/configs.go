package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds kafka-configs.sh's --entity-type brokers and topics for
// the destination-side throttle configs of KIP-1279 §4.12
// (mirror.replication.throttled.rate on a broker,
// mirror.replication.throttled.replicas on a topic), which the sidecars
// keep: --alter with --add-config or --delete-config, and --describe in
// Kafka's output form.

// Entity types of kafka-configs.sh besides cluster-mirrors.
const (
	brokersEntityType = "brokers"
	topicsEntityType  = "topics"
)

// entityTypes are the --entity-type values served.
var entityTypes = []string{clusterMirrorsEntityType, brokersEntityType, topicsEntityType}

// configEntity reports whether cfg names a broker or topic entity.
func (cfg *Config) configEntity() bool {
	return cfg.EntityType == brokersEntityType || cfg.EntityType == topicsEntityType
}

// validateEntity checks the flags of --entity-type brokers and topics.
func (cfg *Config) validateEntity() error {
	t := cfg.EntityType
	switch {
	case cfg.Action != "alter" && cfg.Action != "describe":
		return fmt.Errorf("--entity-type %s is only valid with --alter or --describe", t)
	case cfg.EntityName == "":
		return fmt.Errorf("--entity-type %s requires --entity-name (a %s)", t, map[string]string{brokersEntityType: "broker ID", topicsEntityType: "topic name"}[t])
	case cfg.Mirror != "":
		return fmt.Errorf("--mirror is not valid with --entity-type %s", t)
	case cfg.JSON || cfg.Failed || len(cfg.States) > 0 || len(cfg.Topics) > 0 || cfg.Watch:
		return fmt.Errorf("--json, --failed, --state, --topics and --watch are not valid with --entity-type %s", t)
	case cfg.AddConfigFile != "":
		return fmt.Errorf("--add-config-file is not valid with --entity-type %s; use --add-config", t)
	case cfg.Wait || cfg.Reseed || len(cfg.Exclude) > 0 || cfg.timeoutFlag != "" || cfg.intervalFlag != "" || cfg.MirrorConfigPath != "":
		return fmt.Errorf("--wait, --reseed, --exclude, --timeout, --interval and --mirror-config are not valid with --entity-type %s", t)
	}
	if t == brokersEntityType {
		if id, err := strconv.ParseInt(cfg.EntityName, 10, 32); err != nil || id < 0 {
			return fmt.Errorf("--entity-name %q is not a broker ID", cfg.EntityName)
		}
	}
	return nil
}

// entityResource returns the config resource type of cfg's entity and its
// singular name, as kafka-configs.sh prints it.
func (cfg *Config) entityResource() (int8, string) {
	if cfg.EntityType == brokersEntityType {
		return protocol.ResourceTypeBroker, "broker"
	}
	return protocol.ResourceTypeTopic, "topic"
}

// alterEntity sends IncrementalAlterConfigs for a broker or topic: SET for
// every added key, DELETE for every deleted one.
func alterEntity(ctx context.Context, cl client, cfg Config, out io.Writer) error {
	typ, kind := cfg.entityResource()
	res := protocol.AlterConfigsResource{ResourceType: typ, ResourceName: cfg.EntityName}
	for _, p := range cfg.AddConfig {
		v := p.Value
		res.Configs = append(res.Configs, protocol.AlterableConfig{Name: p.Key, ConfigOperation: protocol.ConfigOpSet, Value: &v})
	}
	for _, k := range cfg.DeleteConfig {
		res.Configs = append(res.Configs, protocol.AlterableConfig{Name: k, ConfigOperation: protocol.ConfigOpDelete})
	}
	req := &protocol.IncrementalAlterConfigsRequest{Resources: []protocol.AlterConfigsResource{res}}
	req.SetVersion(1)
	resp, err := do[*protocol.IncrementalAlterConfigsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if len(resp.Responses) != 1 || resp.Responses[0].ResourceName != cfg.EntityName {
		return fmt.Errorf("IncrementalAlterConfigs answered for %d resources, not for %s %s alone", len(resp.Responses), kind, cfg.EntityName)
	}
	r := resp.Responses[0]
	if err := protocol.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(out, "Completed updating config for %s %s.\n", kind, cfg.EntityName)
	return nil
}

// configSourceNames are Kafka's ConfigSource names, as kafka-configs.sh
// prints synonyms.
var configSourceNames = map[int8]string{
	0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
	4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}

// describeEntity prints a broker's or topic's dynamic configs as
// kafka-configs.sh --describe does:
//
//	Dynamic configs for broker 4 are:
//	  mirror.replication.throttled.rate=100000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:mirror.replication.throttled.rate=100000000}
func describeEntity(ctx context.Context, cl client, cfg Config, out io.Writer) error {
	typ, kind := cfg.entityResource()
	req := &protocol.DescribeConfigsRequest{IncludeSynonyms: true,
		Resources: []protocol.DescribeConfigsResource{{ResourceType: typ, ResourceName: cfg.EntityName}}}
	req.SetVersion(4)
	resp, err := do[*protocol.DescribeConfigsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("DescribeConfigs answered for %d resources, not for %s %s alone", len(resp.Results), kind, cfg.EntityName)
	}
	r := resp.Results[0]
	if err := protocol.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(out, "Dynamic configs for %s %s are:\n", kind, cfg.EntityName)
	for _, e := range r.Configs {
		syn := ""
		for i, s := range e.Synonyms {
			if i > 0 {
				syn += ", "
			}
			src := configSourceNames[s.Source]
			if src == "" {
				src = strconv.Itoa(int(s.Source))
			}
			syn += fmt.Sprintf("%s:%s=%s", src, s.Name, nullable(s.Value))
		}
		fmt.Fprintf(out, "  %s=%s sensitive=%t synonyms={%s}\n", e.Name, nullable(e.Value), e.IsSensitive, syn)
	}
	return nil
}

// nullable prints a nullable string as Java prints it.
func nullable(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

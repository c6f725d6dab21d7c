package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/protocol"
)

// client sends one request to an admin endpoint; *protocol.Client is one.
type client interface {
	Do(ctx context.Context, req protocol.Request) (protocol.Response, error)
}

// errReported means the failures were already printed (one line each, to
// stderr): exit 1 without another message.
var errReported = errors.New("failures reported")

// errFailedPartitions means describe succeeded and showed FAILED
// partitions: exit exitFailedPartitions without another message.
var errFailedPartitions = errors.New("FAILED partitions described")

// Exit codes (docs/operations.md, "Exit codes").
const (
	exitOK               = 0
	exitError            = 1 // usage, connection, Kafka error codes
	exitSettings         = 2 // settings refused at validation: --command-config's (security.go), or a mirror config's by the sidecar (protocol.IsRefusedSettings)
	exitFailedPartitions = 3 // --describe showed FAILED partitions, or --wait met one
	exitWaitTimedOut     = 4 // --wait gave up (--timeout)
)

// execute runs cfg's action with cl, prints its outcome and returns the exit
// code.
func execute(ctx context.Context, cfg Config, cl client, dial dialer, stdout, stderr io.Writer) int {
	timeout := cfg.RequestTimeout
	if cfg.Reseed {
		timeout = max(timeout, reseedRequestTimeout)
	}
	parent := ctx // --wait and --watch outlast one request
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	switch cfg.Action {
	case "create":
		err = createMirror(ctx, cl, cfg.Mirror, cfg.MirrorConfig, stdout)
	case "delete":
		err = deleteMirror(ctx, cl, cfg.Mirror, stdout)
	case "list":
		err = listMirrors(ctx, cl, cfg.JSON, stdout)
	case "describe":
		if cfg.configEntity() {
			err = describeEntity(ctx, cl, cfg, stdout)
		} else if cfg.Watch {
			err = watchMirrors(parent, cl, cfg, stdout, stderr)
		} else {
			err = describeMirrors(ctx, cl, cfg, stdout, stderr)
		}
	case "start", "stop", "pause", "resume", "recover":
		var done []string
		done, err = changeTopics(ctx, cl, cfg.Action, cfg.Mirror, cfg.Topics, cfg.Exclude, cfg.Reseed, stdout, stderr)
		if err == nil && cfg.Wait {
			err = waitCaughtUp(parent, cl, cfg, done, stdout, stderr)
		}
	case "alter":
		if cfg.configEntity() {
			err = alterEntity(ctx, cl, cfg, stdout)
		} else {
			err = alterMirror(ctx, cl, cfg.Mirror, cfg.AddConfig, cfg.DeleteConfig, stdout)
		}
	case "add-sidecar":
		err = addSidecar(ctx, cl, dial, int32(cfg.BrokerID), cfg.RaftAddress, cfg.AdminAddress, stdout)
	case "remove-sidecar":
		err = removeSidecar(ctx, cl, dial, int32(cfg.BrokerID), stdout)
	case "list-sidecars":
		err = listSidecars(ctx, cl, stdout)
	case "add-acl":
		err = addACLs(ctx, cl, cfg.ACL, stdout)
	case "list-acls":
		err = listACLs(ctx, cl, cfg.ACL, stdout)
	case "remove-acl":
		err = removeACLs(ctx, cl, cfg.ACL, stdout)
	default:
		err = fmt.Errorf("unknown action %q", cfg.Action)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFailedPartitions):
		return exitFailedPartitions
	case errors.Is(err, errWaitTimedOut):
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitWaitTimedOut
	case errors.Is(err, errReported):
		return exitError
	case protocol.IsRefusedSettings(err):
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitSettings
	default:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitError
	}
}

// do sends req and checks that the response is of type R.
func do[R protocol.Response](ctx context.Context, cl client, req protocol.Request) (R, error) {
	var zero R
	resp, err := cl.Do(ctx, req)
	if err != nil {
		return zero, fmt.Errorf("%s request failed: %w", protocol.KeyName(req.Key()), err)
	}
	r, ok := resp.(R)
	if !ok {
		return zero, fmt.Errorf("%s request got a %T response", protocol.KeyName(req.Key()), resp)
	}
	return r, nil
}

// createMirror sends CreateClusterMirror with the mirror-config entries.
func createMirror(ctx context.Context, cl client, mirror string, config []properties.Property, out io.Writer) error {
	req := &protocol.CreateClusterMirrorRequest{MirrorName: mirror}
	for _, p := range config {
		value := p.Value
		req.Config = append(req.Config, protocol.ClusterMirrorConfig{Name: p.Key, Value: &value})
	}
	resp, err := do[*protocol.CreateClusterMirrorResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(out, "Created mirror %s\n", mirror)
	return nil
}

// deleteMirror sends DeleteClusterMirror.
func deleteMirror(ctx context.Context, cl client, mirror string, out io.Writer) error {
	resp, err := do[*protocol.DeleteClusterMirrorResponse](ctx, cl, &protocol.DeleteClusterMirrorRequest{MirrorName: mirror})
	if err != nil {
		return err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(out, "Deleted mirror %s\n", mirror)
	return nil
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num formats an offset or lag; negative values (-1: unknown) print as "-".
func num(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// nonNil returns s, or an empty slice for nil, so that JSON shows [] rather
// than null for an empty list.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSON prints v as indented JSON.
func writeJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// listMirrors sends ListClusterMirrors and prints the mirrors sorted by name.
func listMirrors(ctx context.Context, cl client, asJSON bool, out io.Writer) error {
	resp, err := do[*protocol.ListClusterMirrorsResponse](ctx, cl, &protocol.ListClusterMirrorsRequest{})
	if err != nil {
		return err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	slices.SortFunc(resp.Mirrors, func(a, b protocol.ListedMirror) int { return cmp.Compare(a.MirrorName, b.MirrorName) })
	if asJSON {
		resp.Mirrors = nonNil(resp.Mirrors)
		return writeJSON(out, resp)
	}
	const row = "%-30s %-10s %-26s %s\n"
	fmt.Fprintf(out, row, "MIRROR", "TOPICS", "CLUSTER-ID", "BOOTSTRAP-SERVER")
	for _, m := range resp.Mirrors {
		fmt.Fprintf(out, row, m.MirrorName, strconv.Itoa(int(m.TopicCount)), orDash(m.SourceClusterId), orDash(m.SourceBootstrap))
	}
	return nil
}

// sortDescribed sorts mirrors by name, their topics by name and partitions
// by index, and redacts secret config values (the server already does; this
// is a second line of defense).
func sortDescribed(mirrors []protocol.DescribedMirror) {
	slices.SortStableFunc(mirrors, func(a, b protocol.DescribedMirror) int { return cmp.Compare(a.MirrorName, b.MirrorName) })
	for i := range mirrors {
		m := &mirrors[i]
		slices.SortStableFunc(m.Topics, func(a, b protocol.DescribedTopic) int { return cmp.Compare(a.TopicName, b.TopicName) })
		for j := range m.Topics {
			slices.SortStableFunc(m.Topics[j].Partitions, func(a, b protocol.PartitionDetail) int {
				return cmp.Compare(a.PartitionIndex, b.PartitionIndex)
			})
		}
		for j, c := range m.Configs {
			if c.Value != nil && properties.IsSecret(c.Name) {
				v := properties.Hidden
				m.Configs[j].Value = &v
			}
		}
	}
}

// describeFilter selects the partitions --describe shows: --topics (names
// or regexes, whole names) and --state (or --failed: FAILED).
type describeFilter struct {
	topics []*regexp.Regexp
	states []string
}

func newDescribeFilter(cfg Config) (describeFilter, error) {
	topics, err := compileTopicFilter(cfg.Topics)
	if err != nil {
		return describeFilter{}, err
	}
	f := describeFilter{topics: topics, states: cfg.States}
	if cfg.Failed {
		f.states = []string{partstate.Failed.String()}
	}
	return f, nil
}

func (f describeFilter) topic(name string) bool {
	if len(f.topics) == 0 {
		return true
	}
	return slices.ContainsFunc(f.topics, func(re *regexp.Regexp) bool { return re.MatchString(name) })
}

func (f describeFilter) state(name string) bool {
	return len(f.states) == 0 || slices.Contains(f.states, strings.ToUpper(name))
}

// apply drops the topics and partitions the filter does not select; a
// topic left without partitions goes too, when the filter selects by
// state. Mirrors stay, with their errors.
func (f describeFilter) apply(mirrors []protocol.DescribedMirror) {
	for i := range mirrors {
		m := &mirrors[i]
		m.Topics = slices.DeleteFunc(m.Topics, func(t protocol.DescribedTopic) bool { return !f.topic(t.TopicName) })
		if len(f.states) == 0 {
			continue
		}
		for j := range m.Topics {
			m.Topics[j].Partitions = slices.DeleteFunc(m.Topics[j].Partitions, func(p protocol.PartitionDetail) bool { return !f.state(p.State) })
		}
		m.Topics = slices.DeleteFunc(m.Topics, func(t protocol.DescribedTopic) bool { return len(t.Partitions) == 0 })
	}
}

// retryColumn is --describe --failed's RETRY: NonRetryable for a failure
// that is never retried automatically, else retries made/most allowed.
func retryColumn(p protocol.PartitionDetail) string {
	switch {
	case p.NonRetryable:
		return "NonRetryable"
	case p.MaxRetryAttempts >= 0:
		return fmt.Sprintf("%d/%d", p.RetryAttempt, p.MaxRetryAttempts)
	}
	return "-"
}

// describeMirrors sends DescribeClusterMirrors (for one mirror, or all) and
// prints a row per partition that cfg's filters select, with an indented
// error line under partitions that have a last error (with --failed: the
// RETRY and ERROR columns instead), or everything as JSON. Mirror-level
// errors are printed to errOut and make the command fail; otherwise FAILED
// partitions among those shown give errFailedPartitions.
func describeMirrors(ctx context.Context, cl client, cfg Config, out, errOut io.Writer) error {
	resp, err := fetchDescribe(ctx, cl, cfg)
	if err != nil {
		return err
	}
	return printDescribe(resp, cfg, out, errOut)
}

// fetchDescribe sends DescribeClusterMirrors for cfg's mirror (or all) and
// returns the answer sorted and filtered by cfg.
func fetchDescribe(ctx context.Context, cl client, cfg Config) (*protocol.DescribeClusterMirrorsResponse, error) {
	filter, err := newDescribeFilter(cfg)
	if err != nil {
		return nil, err
	}
	req := &protocol.DescribeClusterMirrorsRequest{}
	if cfg.Mirror != "" {
		req.MirrorNames = []string{cfg.Mirror}
	}
	resp, err := do[*protocol.DescribeClusterMirrorsResponse](ctx, cl, req)
	if err != nil {
		return nil, err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	sortDescribed(resp.Mirrors)
	filter.apply(resp.Mirrors)
	return resp, nil
}

// printDescribe prints a describe answer as describeMirrors does and
// returns its outcome.
func printDescribe(resp *protocol.DescribeClusterMirrorsResponse, cfg Config, out, errOut io.Writer) error {
	switch {
	case cfg.JSON:
		resp.Mirrors = nonNil(resp.Mirrors)
		for i := range resp.Mirrors {
			m := &resp.Mirrors[i]
			m.Topics, m.Configs = nonNil(m.Topics), nonNil(m.Configs)
			for j := range m.Topics {
				m.Topics[j].Partitions = nonNil(m.Topics[j].Partitions)
			}
		}
		if err := writeJSON(out, resp); err != nil {
			return err
		}
	case cfg.Failed:
		const row = "%-30s %-40s %-10s %-15s %-18s %-8s %-15s %-13s %s\n"
		fmt.Fprintf(out, row, "MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE", "RETRY", "ERROR")
		for _, m := range resp.Mirrors {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(out, row, m.MirrorName, t.TopicName, strconv.Itoa(int(p.PartitionIndex)),
						num(p.SourceOffset), num(p.DestinationOffset), num(p.Lag), orDash(p.State), retryColumn(p), orDash(oneLine(deref(p.LastError))))
				}
			}
		}
	default:
		const row = "%-30s %-40s %-10s %-15s %-18s %-8s %s\n"
		fmt.Fprintf(out, row, "MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE")
		for _, m := range resp.Mirrors {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(out, row, m.MirrorName, t.TopicName, strconv.Itoa(int(p.PartitionIndex)),
						num(p.SourceOffset), num(p.DestinationOffset), num(p.Lag), orDash(p.State))
					if p.LastError != nil && *p.LastError != "" {
						fmt.Fprintf(out, "  error: %s\n", oneLine(*p.LastError))
					}
				}
			}
		}
	}
	failed, mirrorErr := false, false
	for _, m := range resp.Mirrors {
		if err := protocol.ErrorFor(m.ErrorCode, m.ErrorMessage); err != nil {
			fmt.Fprintf(errOut, "Error for mirror %s: %v\n", m.MirrorName, err)
			mirrorErr = true
		}
		for _, t := range m.Topics {
			failed = failed || slices.ContainsFunc(t.Partitions, func(p protocol.PartitionDetail) bool {
				return p.State == partstate.Failed.String()
			})
		}
	}
	switch {
	case mirrorErr:
		return errReported
	case failed:
		return errFailedPartitions
	}
	return nil
}

// deref returns *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// oneLine keeps a server message on one output line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// topicAction describes how one of start, stop, pause and resume builds its
// request and reports its result.
type topicAction struct {
	request func(mirror string, topics, exclude []string, reseed bool) protocol.Request
	done    string // printf format: count, mirror, names
}

var topicActionsByName = map[string]topicAction{
	"start": {
		// --topics are started now and kept as include patterns, so that new
		// matching source topics are started by auto-discovery.
		request: func(mirror string, topics, exclude []string, reseed bool) protocol.Request {
			return &protocol.StartMirrorTopicsRequest{
				MirrorName: mirror, TopicPatterns: topics, IncludePatterns: topics, ExcludePatterns: exclude, Reseed: reseed,
			}
		},
		done: "Started %d mirror topic(s) in mirror %s: [%s]\n",
	},
	"stop": {
		// --topics are stopped now, and moved from the include patterns to
		// the exclude patterns so that auto-discovery does not restart them.
		request: func(mirror string, topics, _ []string, _ bool) protocol.Request {
			return &protocol.StopMirrorTopicsRequest{MirrorName: mirror, TopicPatterns: topics, Patterns: topics}
		},
		done: "Stopped mirroring for %d topic(s) in mirror %s: [%s]\n",
	},
	"pause": {
		request: func(mirror string, topics, _ []string, _ bool) protocol.Request {
			return &protocol.PauseMirrorTopicsRequest{MirrorName: mirror, TopicPatterns: topics}
		},
		done: "Paused mirroring for %d topic(s) in mirror %s: [%s]\n",
	},
	"resume": {
		request: func(mirror string, topics, _ []string, _ bool) protocol.Request {
			return &protocol.ResumeMirrorTopicsRequest{MirrorName: mirror, TopicPatterns: topics}
		},
		done: "Resumed mirroring for %d topic(s) in mirror %s: [%s]\n",
	},
	"recover": {
		// The FAILED partitions of --topics restart, with new automatic
		// retries; topics matched by a regex with no FAILED partition are
		// left alone.
		request: func(mirror string, topics, _ []string, _ bool) protocol.Request {
			return &protocol.RecoverMirrorTopicsRequest{MirrorName: mirror, TopicPatterns: topics}
		},
		done: "Recovered %d mirror topic(s) in mirror %s: [%s]\n",
	},
}

// topicsOutcome returns the per-topic results and the top-level error of a
// Start, Stop, Pause or ResumeMirrorTopics response.
func topicsOutcome(resp protocol.Response) ([]protocol.MirrorTopicResult, error) {
	switch r := resp.(type) {
	case *protocol.StartMirrorTopicsResponse:
		return r.Topics, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	case *protocol.StopMirrorTopicsResponse:
		return r.Topics, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	case *protocol.PauseMirrorTopicsResponse:
		return r.Topics, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	case *protocol.ResumeMirrorTopicsResponse:
		return r.Topics, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	case *protocol.RecoverMirrorTopicsResponse:
		return r.Topics, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage)
	}
	return nil, fmt.Errorf("unexpected %T response", resp)
}

// printReseeded reports the divergent records that --start --reseed copied
// before it deleted and re-created their topics.
func printReseeded(out io.Writer, topics []protocol.ReseededTopic) {
	for _, t := range topics {
		fmt.Fprintf(out, "Copied the diverged records of topic %s to topic %s (offsets there start at 0):\n", t.Name, t.CopyTopic)
		for _, p := range t.Partitions {
			fmt.Fprintf(out, "  partition %d: offsets %d to %d, %d record(s)\n", p.Partition, p.FirstOffset, p.EndOffset-1, p.Records)
		}
	}
}

// changeTopics starts, stops, pauses, resumes or recovers the topics
// matching topics (names or regexes, expanded by the server). It prints the
// topics that succeeded in the server's order, then one line per failed
// topic to errOut, and returns the topics that succeeded.
func changeTopics(ctx context.Context, cl client, action, mirror string, topics, exclude []string, reseed bool, out, errOut io.Writer) ([]string, error) {
	ta, ok := topicActionsByName[action]
	if !ok {
		return nil, fmt.Errorf("unknown action %q", action)
	}
	req := ta.request(mirror, topics, exclude, reseed)
	resp, err := cl.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s request failed: %w", protocol.KeyName(req.Key()), err)
	}
	if r, ok := resp.(*protocol.StartMirrorTopicsResponse); ok {
		printReseeded(out, r.Reseeded)
	}
	results, topErr := topicsOutcome(resp)
	if topErr != nil {
		return nil, topErr
	}
	var done []string
	var failed []protocol.MirrorTopicResult
	for _, r := range results {
		if r.ErrorCode == 0 {
			done = append(done, r.Name)
		} else {
			failed = append(failed, r)
		}
	}
	if len(done) > 0 || len(failed) == 0 {
		fmt.Fprintf(out, ta.done, len(done), mirror, strings.Join(done, ", "))
	}
	if r, ok := resp.(*protocol.StartMirrorTopicsResponse); ok && r.ErrorCode == 0 && r.ErrorMessage != nil && *r.ErrorMessage != "" {
		// What the start changed beside the topics: patterns recorded for
		// topics to come, exclude patterns narrowed.
		fmt.Fprintf(out, "Note: %s\n", oneLine(*r.ErrorMessage))
	}
	for _, r := range failed {
		fmt.Fprintf(errOut, "Error for topic %s: %v\n", r.Name, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	if len(failed) > 0 {
		return done, errReported
	}
	return done, nil
}

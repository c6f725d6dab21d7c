package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

const (
	rulesPath     = "../../deploy/prometheus/sidemirror-rules.yml"
	dashboardPath = "../../deploy/grafana/sidemirror.json"
	mirrorName    = "monitored"
	topicName     = "payments"
	job           = "sidemirror"
	// refresh is the mirror's metadata sync interval (ms), unreachableAfter
	// the source-unreachable threshold the test gives the committed rule
	// instead of its 120 s, and lagTimeAbove the lag-in-time alert's
	// instead of its 300 s (the RPO).
	refresh          = "2000"
	unreachableAfter = "15"
	lagTimeAbove     = "20"
)

// wait polls a few times a second.
var wait = testwait.Every(500 * time.Millisecond)

// TestPrometheus runs a real Prometheus that scrapes the three sidecars of
// the bed every second with the committed alert rules (their "for"
// durations set to 0, the source-unreachable threshold to 15 s and the
// lag-in-time RPO to 20 s, so that the test takes seconds rather than
// minutes; the expressions are otherwise the committed ones). While a
// mirror copies a topic that a producer keeps writing, and after the
// source cluster is stopped, every query of the committed Grafana
// dashboard must return data at least once, the template variables must
// find the job and the mirror, every rule must evaluate without error, the
// source-unreachable and lag alerts must be inactive while the source runs
// and fire once it is stopped, and the no-raft-leader and partition-failed
// alerts must stay inactive. The lag alert that fires is
// SidemirrorLagTimeAboveRPO, the lag in time: with the source stopped the
// lag in records cannot be measured (SidemirrorLagAboveRPO's records stay
// at the last known count), while the time since the destination last held
// everything the source had keeps growing.
func TestPrometheus(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatal("prometheus is not installed: scripts/setup.sh installs Debian's prometheus package")
	}
	prom := startPrometheus(t)

	// The workload: a mirror of a topic a producer keeps writing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := env.Source.NewClient(testbed.Admin, kgo.DefaultProduceTopic(topicName), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := kadm.NewClient(src).CreateTopic(ctx, 3, 1, nil, topicName); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(cfg, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\nmirror.metadata.refresh.interval.ms="+refresh+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "--create", "--mirror", mirrorName, "--mirror-config", cfg)
	pctx, stopProducer := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Go(func() {
		for pctx.Err() == nil {
			recs := make([]*kgo.Record, 50)
			for i := range recs {
				recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("payment")}
			}
			_ = src.ProduceSync(pctx, recs...).FirstErr()
			time.Sleep(100 * time.Millisecond)
		}
	})
	defer func() { stopProducer(); produced.Wait() }()
	runCLI(t, "--start", "--topics", topicName, "--mirror", mirrorName)

	queries := dashboardQueries(t)
	answered := map[string]bool{}
	ask := func() []string {
		var missing []string
		for _, q := range queries {
			if answered[q.expr] {
				continue
			}
			if n, err := prom.query(q.expr); err != nil {
				t.Fatalf("panel %q: query %s: %v", q.panel, q.expr, err)
			} else if n > 0 {
				answered[q.expr] = true
				continue
			}
			missing = append(missing, fmt.Sprintf("%q: %s", q.panel, q.expr))
		}
		return missing
	}

	// While the source runs: records flow, the metadata sync succeeds, the
	// source-unreachable alert is inactive.
	wait.For(t, 3*time.Minute, "records mirrored, the metadata sync's success and the rules evaluated with it", func() bool {
		ask()
		flowing, _ := prom.query(`sum(rate(sidemirror_mirrored_records_total{job="sidemirror", mirror="monitored"}[30s])) > 0`)
		synced, _ := prom.query(`sidemirror_metadata_sync_last_success_timestamp_seconds{job="sidemirror", mirror="monitored", step="cluster_id"}`)
		rules := prom.rules(t)
		return flowing > 0 && synced > 0 && rules["SidemirrorSourceUnreachable"].evaluatedAfter(prom.started.Add(5*time.Second))
	})
	rules := prom.rules(t)
	for name, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %s: %s", name, r.Health, r.LastError)
		}
	}
	// With the rules' for: durations at 0, one evaluation during a raft
	// election (a loaded machine can miss heartbeats) fires
	// SidemirrorNoRaftLeader; a healthy group settles within seconds, so
	// the alerts must all be inactive in one evaluation within 30 s.
	quiet := []string{"SidemirrorSourceUnreachable", "SidemirrorLagTimeAboveRPO", "SidemirrorNoRaftLeader", "SidemirrorPartitionFailed", "SidemirrorSidecarDown"}
	last := ""
	wait.For(t, 30*time.Second, "the source-unreachable, lag, raft-leader, FAILED and sidecar-down alerts inactive in one evaluation while the source runs", func() bool {
		var active []string
		rules = prom.rules(t)
		for _, name := range quiet {
			if r, ok := rules[name]; !ok || r.State != "inactive" {
				active = append(active, fmt.Sprintf("%s is %q", name, r.State))
			}
		}
		if now := strings.Join(active, ", "); now != last {
			if now != "" {
				t.Logf("while the source runs: %s", now)
			}
			last = now
		}
		return len(active) == 0
	})
	for _, v := range dashboardVariables(t) {
		values, err := prom.labelValues(v.label, v.metric)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(values, v.want) {
			t.Errorf("dashboard variable %s (label_values(%s, %s)) = %v, want %s among them", v.name, v.metric, v.label, values, v.want)
		}
	}
	var notYet []string
	for _, q := range queries {
		if !answered[q.expr] {
			notYet = append(notYet, q.panel)
		}
	}
	t.Logf("queries without data while the source runs: %q", notYet)
	lagBefore, _ := prom.value(`max(sidemirror_partition_lag_records{job="sidemirror", mirror="monitored"})`)

	// The source stops: the source-unreachable alert fires.
	stopProducer()
	produced.Wait()
	stopped := time.Now()
	for _, n := range env.Source.Nodes() {
		if err := n.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // leave the bed as it was for later tests
		for _, n := range env.Source.Nodes() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := n.Start(sctx); err != nil {
				t.Errorf("restarting source node: %v", err)
			}
			cancel()
		}
	})
	wait.For(t, 2*time.Minute, "the source-unreachable alert to fire", func() bool {
		ask()
		return prom.rules(t)["SidemirrorSourceUnreachable"].State == "firing"
	})
	t.Logf("SidemirrorSourceUnreachable fired %.1f s after the source stopped (threshold %s s)", time.Since(stopped).Seconds(), unreachableAfter)
	wait.For(t, 2*time.Minute, "the lag alert (SidemirrorLagTimeAboveRPO) to fire", func() bool {
		ask()
		return prom.rules(t)["SidemirrorLagTimeAboveRPO"].State == "firing"
	})
	lagTime, _ := prom.value(`max(sidemirror_partition_lag_seconds{job="sidemirror", mirror="monitored"})`)
	t.Logf("SidemirrorLagTimeAboveRPO fired %.1f s after the source stopped (RPO %s s; largest partition lag %s s)",
		time.Since(stopped).Seconds(), lagTimeAbove, lagTime)
	lagAfter, _ := prom.value(`max(sidemirror_partition_lag_records{job="sidemirror", mirror="monitored"})`)
	t.Logf("largest partition lag: %s while the source ran, %s with the source stopped (SidemirrorLagAboveRPO: %s)",
		lagBefore, lagAfter, prom.rules(t)["SidemirrorLagAboveRPO"].State)

	// Every panel's query has answered at least once, with or without the
	// source (the error panels need the errors of its absence).
	// The error panels' counters grow once the clients' retries against
	// the stopped source give up (up to a minute each).
	missing := ask()
	for deadline := time.Now().Add(3 * time.Minute); len(missing) > 0 && time.Now().Before(deadline); missing = ask() {
		time.Sleep(time.Second)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of the dashboard's %d queries never returned data, %.0f s after the source stopped:\n%s",
			len(missing), len(queries), time.Since(stopped).Seconds(), strings.Join(missing, "\n"))
	}
	t.Logf("all %d queries of the dashboard returned data (the last %.0f s after the source stopped)", len(queries), time.Since(stopped).Seconds())
	for _, name := range []string{"SidemirrorNoRaftLeader", "SidemirrorPartitionFailed"} {
		if st := prom.rules(t)[name].State; st != "inactive" {
			t.Errorf("alert %s is %q with the source stopped, want inactive", name, st)
		}
	}
}

// runCLI runs kafka-cluster-mirrors against the sidecars and fails the
// test unless it exits 0.
func runCLI(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, env.Bin.CLI, append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-cluster-mirrors %v: %v\n%s", args, err, out)
	}
}

// prometheus is a running Prometheus server.
type prometheus struct {
	base    string
	started time.Time
}

// startPrometheus writes the scrape config and the test's version of the
// committed rules and starts Prometheus, stopped at test end.
func startPrometheus(t *testing.T) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	fors := regexp.MustCompile(`(?m)^(\s+for:) \S+$`)
	if len(fors.FindAll(rules, -1)) < 5 {
		t.Fatalf("%s: found no for: durations to shorten", rulesPath)
	}
	rules = fors.ReplaceAll(rules, []byte("$1 0s"))
	threshold := regexp.MustCompile(`(step="cluster_id"\}\)) > 120`)
	if !threshold.Match(rules) {
		t.Fatalf("%s: the source-unreachable rule's threshold (> 120) is not where the test expects it", rulesPath)
	}
	rules = threshold.ReplaceAll(rules, []byte("$1 > "+unreachableAfter))
	rpo := regexp.MustCompile(`(sidemirror_partition_lag_seconds\{job=~"sidemirror\.\*"\}\)) > 300`)
	if !rpo.Match(rules) {
		t.Fatalf("%s: the lag-in-time rule's threshold (> 300) is not where the test expects it", rulesPath)
	}
	rules = rpo.ReplaceAll(rules, []byte("$1 > "+lagTimeAbove))
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, s := range env.Sidecars.Sidecars() {
		targets = append(targets, fmt.Sprintf("%q", s.HTTPAddr))
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%s]
`, filepath.Join(dir, "rules.yml"), job, strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", out)
		}
	})
	p := &prometheus{base: "http://" + addr, started: time.Now()}
	wait.For(t, time.Minute, "Prometheus to be ready", func() bool {
		select {
		case <-exited:
			out, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited:\n%s", out)
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// get decodes the data of a Prometheus API answer into v.
func (p *prometheus) get(path string, params url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

type vectorResult struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Value [2]any `json:"value"`
	} `json:"result"`
}

// query returns how many series an instant query returns.
func (p *prometheus) query(expr string) (int, error) {
	var r vectorResult
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return 0, err
	}
	if r.ResultType == "scalar" {
		return 1, nil
	}
	return len(r.Result), nil
}

// value returns the first series' value of an instant query, "none" if
// it returns no series.
func (p *prometheus) value(expr string) (string, error) {
	var r vectorResult
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &r); err != nil || len(r.Result) == 0 {
		return "none", err
	}
	return fmt.Sprint(r.Result[0].Value[1]), nil
}

func (p *prometheus) labelValues(label, match string) ([]string, error) {
	var values []string
	err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {match}}, &values)
	return values, err
}

type alertRule struct {
	Name           string    `json:"name"`
	State          string    `json:"state"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

func (r alertRule) evaluatedAfter(t time.Time) bool { return r.LastEvaluation.After(t) }

// rules returns the alert rules by name.
func (p *prometheus) rules(t *testing.T) map[string]alertRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		t.Fatal(err)
	}
	out := map[string]alertRule{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r
		}
	}
	if len(out) == 0 {
		t.Fatal("Prometheus has loaded no alert rules")
	}
	return out
}

// dashboardQuery is one target of a panel of the committed dashboard, with
// the template variables replaced: the job, every mirror, a rate interval
// that spans several scrapes.
type dashboardQuery struct{ panel, expr string }

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	r := strings.NewReplacer("$job", job, "$mirror", ".*", "$__rate_interval", "30s")
	var out []dashboardQuery
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, pr := range panels {
			var p struct {
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(pr, &p); err != nil {
				t.Fatalf("%s: %v", dashboardPath, err)
			}
			walk(p.Panels)
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, dashboardQuery{p.Title, r.Replace(tg.Expr)})
				}
			}
		}
	}
	walk(dash.Panels)
	if len(out) < 10 {
		t.Fatalf("%s: found %d queries, want the dashboard's panels' (at least 10)", dashboardPath, len(out))
	}
	for _, q := range out {
		if strings.Contains(q.expr, "$") {
			t.Fatalf("panel %q: query %s has a variable the test does not fill in", q.panel, q.expr)
		}
	}
	return out
}

// dashboardVariable is a label_values(metric, label) template variable
// and a value it must find.
type dashboardVariable struct{ name, metric, label, want string }

func dashboardVariables(t *testing.T) []dashboardVariable {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	lv := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)
	want := map[string]string{"job": job, "mirror": mirrorName}
	var out []dashboardVariable
	for _, v := range dash.Templating.List {
		q, _ := v.Query.(string)
		if v.Type != "query" {
			continue
		}
		m := lv.FindStringSubmatch(q)
		if m == nil || want[v.Name] == "" {
			t.Fatalf("dashboard variable %s: query %q is not one the test knows (label_values(metric, label) of job or mirror)", v.Name, q)
		}
		out = append(out, dashboardVariable{v.Name, strings.ReplaceAll(m[1], "$job", job), m[2], want[v.Name]})
	}
	if len(out) != len(want) {
		t.Fatalf("dashboard variables %v, want one for each of %v", out, want)
	}
	return out
}

package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/protocol"
)

// The status page on http.listener at "/": a read-only view of the mirrors,
// their partitions (state, offsets, lag and a sparkline of the lag), the
// sidecars and the raft leader, as the admin endpoint's describe requests
// report them (the whole cluster, not only this sidecar's partitions). A
// sampler asks for them every statusActiveInterval while someone looked
// at the page in the last statusActiveFor, every statusIdleInterval
// otherwise, and keeps the lag of the last statusWindow in memory; a
// request renders the last sample and never waits for the cluster. The
// page reloads itself (meta refresh) and has no script.

const (
	statusActiveInterval = 2 * time.Second
	statusIdleInterval   = 30 * time.Second
	statusActiveFor      = 5 * time.Minute
	statusWindow         = 5 * time.Minute
	statusRefresh        = 2 // seconds between the page's reloads
	statusMaxRows        = 1000
	statusTimeout        = 10 * time.Second
)

// statusSource answers the admin endpoint's requests in process
// (coordinator.Service).
type statusSource interface {
	Handle(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response
}

// lagSample is the lag of a partition or a mirror at one time; -1 unknown.
type lagSample struct {
	at  time.Time
	lag int64
}

// statusPage samples the cluster's describe output and serves the page.
type statusPage struct {
	brokerID int32
	log      *zap.Logger
	now      func() time.Time

	mu       sync.Mutex
	viewed   time.Time
	sampled  time.Time // zero until the first sample
	mirrors  []protocol.DescribedMirror
	sidecars *protocol.DescribeSidecarsResponse
	err      string                 // why the last sample is incomplete
	lags     map[string][]lagSample // by lagKey, oldest first, within statusWindow
}

func newStatusPage(brokerID int32, log *zap.Logger) *statusPage {
	return &statusPage{brokerID: brokerID, log: log.Named("status"), now: time.Now, lags: map[string][]lagSample{}}
}

func mirrorKey(mirror string) string { return mirror }
func partitionKey(mirror, topic string, p int32) string {
	return mirror + "\x00" + topic + "\x00" + strconv.Itoa(int(p))
}

// run samples until ctx ends.
func (p *statusPage) run(ctx context.Context, src statusSource) {
	for {
		p.sample(ctx, src)
		p.mu.Lock()
		interval := statusIdleInterval
		if p.now().Sub(p.viewed) < statusActiveFor {
			interval = statusActiveInterval
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// sample asks src for the mirrors and the sidecars and records the lags.
func (p *statusPage) sample(ctx context.Context, src statusSource) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var errs []string
	var mirrors []protocol.DescribedMirror
	if resp, ok := src.Handle(ctx, nil, &protocol.DescribeClusterMirrorsRequest{}).(*protocol.DescribeClusterMirrorsResponse); ok {
		if resp.ErrorCode != 0 {
			errs = append(errs, "mirrors: "+errorText(resp.ErrorCode, resp.ErrorMessage))
		}
		mirrors = resp.Mirrors
	}
	sidecars, _ := src.Handle(ctx, nil, &protocol.DescribeSidecarsRequest{}).(*protocol.DescribeSidecarsResponse)
	if sidecars != nil && sidecars.ErrorCode != 0 {
		errs = append(errs, "sidecars: "+errorText(sidecars.ErrorCode, sidecars.ErrorMessage))
	}
	if ctx.Err() != nil {
		return // shutting down, or the answer is late: keep the last sample
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sampled, p.mirrors, p.sidecars, p.err = now, mirrors, sidecars, strings.Join(errs, "; ")
	seen := map[string]bool{}
	add := func(key string, lag int64) {
		seen[key] = true
		s := append(p.lags[key], lagSample{at: now, lag: lag})
		first := 0
		for first < len(s) && now.Sub(s[first].at) > statusWindow {
			first++
		}
		p.lags[key] = slices.Clone(s[first:])
	}
	for _, m := range mirrors {
		total, known := int64(0), false
		for _, t := range m.Topics {
			for _, d := range t.Partitions {
				add(partitionKey(m.MirrorName, t.TopicName, d.PartitionIndex), d.Lag)
				if d.Lag >= 0 {
					total, known = total+d.Lag, true
				}
			}
		}
		if !known {
			total = -1
		}
		add(mirrorKey(m.MirrorName), total)
	}
	for k := range p.lags {
		if !seen[k] {
			delete(p.lags, k) // a partition or mirror that is gone
		}
	}
}

func errorText(code int16, msg *string) string {
	if msg != nil && *msg != "" {
		return *msg
	}
	return "error code " + strconv.Itoa(int(code))
}

// The page's view model.
type (
	statusView struct {
		BrokerID int32
		Version  string
		Refresh  int
		Sampled  string // "" before the first sample
		Error    string
		Leader   string
		Mirrors  []mirrorView
		Sidecars []sidecarView
	}
	mirrorView struct {
		Name, Source, SourceCluster, Error string
		Partitions                         int
		Lag                                string
		Spark                              sparkline
		Rows                               []rowView
		Hidden                             int // partitions beyond statusMaxRows
	}
	rowView struct {
		Topic                         string
		Partition                     int32
		State, StateClass             string
		SourceOffset, DestOffset, Lag string
		Owner, LastError              string
		Spark                         sparkline
	}
	sidecarView struct {
		BrokerID                           int32
		RaftAddress, AdminAddress, Version string
		Voter, Leader, Self                bool
	}
	// sparkline is an inline SVG polyline of the lag samples kept (at
	// most statusWindow): Points holds only numbers, commas and spaces.
	sparkline struct {
		Points string
		Max    string // the largest lag drawn
		Since  string // the oldest sample's time
	}
)

const (
	sparkWidth  = 120
	sparkHeight = 24
)

// spark draws samples from the oldest (left) to the newest (right), x by
// time and y by lag scaled to the largest; unknown lags are left out.
func spark(samples []lagSample) sparkline {
	var peak int64
	for _, s := range samples {
		peak = max(peak, s.lag)
	}
	out := sparkline{Max: strconv.FormatInt(peak, 10)}
	if len(samples) == 0 {
		return out
	}
	first, last := samples[0].at, samples[len(samples)-1].at
	out.Since = first.UTC().Format("15:04:05 UTC")
	var b strings.Builder
	for _, s := range samples {
		if s.lag < 0 {
			continue
		}
		x := float64(sparkWidth)
		if span := last.Sub(first); span > 0 {
			x = float64(sparkWidth) * float64(s.at.Sub(first)) / float64(span)
		}
		y := float64(sparkHeight - 1)
		if peak > 0 {
			y = 1 + float64(sparkHeight-2)*(1-float64(s.lag)/float64(peak))
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	out.Points = b.String()
	return out
}

func offsetText(o int64) string {
	if o < 0 {
		return "?"
	}
	return strconv.FormatInt(o, 10)
}

// stateClass colours a row by its state.
func stateClass(state string) string {
	switch state {
	case "MIRRORING":
		return "ok"
	case "FAILED":
		return "bad"
	case "UNKNOWN":
		return "unknown"
	default:
		return "busy"
	}
}

// view builds the page's model from the last sample.
func (p *statusPage) view() statusView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := statusView{BrokerID: p.brokerID, Version: Version, Refresh: statusRefresh, Error: p.err}
	if p.sampled.IsZero() {
		return v
	}
	v.Sampled = p.sampled.UTC().Format("2006-01-02 15:04:05 UTC")
	leader := int32(-1)
	if p.sidecars != nil {
		leader = p.sidecars.LeaderId
		for _, s := range p.sidecars.Sidecars {
			sv := sidecarView{BrokerID: s.BrokerId, RaftAddress: s.RaftAddress, Version: s.Version, Voter: s.Voter,
				Leader: s.BrokerId == leader, Self: s.BrokerId == p.brokerID}
			if s.AdminAddress != nil {
				sv.AdminAddress = *s.AdminAddress
			}
			v.Sidecars = append(v.Sidecars, sv)
		}
	}
	v.Leader = "none"
	if leader >= 0 {
		v.Leader = "broker " + strconv.Itoa(int(leader))
	}
	for _, m := range p.mirrors {
		mv := mirrorView{Name: m.MirrorName, Source: m.SourceBootstrap, SourceCluster: m.SourceClusterId,
			Spark: spark(p.lags[mirrorKey(m.MirrorName)])}
		if m.ErrorCode != 0 || m.ErrorMessage != nil {
			mv.Error = errorText(m.ErrorCode, m.ErrorMessage)
		}
		var total int64
		known := false
		for _, t := range m.Topics {
			for _, d := range t.Partitions {
				mv.Partitions++
				if d.Lag >= 0 {
					total, known = total+d.Lag, true
				}
				if len(mv.Rows) >= statusMaxRows {
					mv.Hidden++
					continue
				}
				r := rowView{Topic: t.TopicName, Partition: d.PartitionIndex, State: d.State, StateClass: stateClass(d.State),
					SourceOffset: offsetText(d.SourceOffset), DestOffset: offsetText(d.DestinationOffset), Lag: offsetText(d.Lag),
					Owner: "-", Spark: spark(p.lags[partitionKey(m.MirrorName, t.TopicName, d.PartitionIndex)])}
				if d.OwnerBrokerId >= 0 {
					r.Owner = "broker " + strconv.Itoa(int(d.OwnerBrokerId))
				}
				if d.LastError != nil {
					r.LastError = *d.LastError
				}
				mv.Rows = append(mv.Rows, r)
			}
		}
		mv.Lag = "?"
		if known {
			mv.Lag = strconv.FormatInt(total, 10)
		}
		v.Mirrors = append(v.Mirrors, mv)
	}
	return v
}

// ServeHTTP serves the page.
func (p *statusPage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.viewed = p.now()
	p.mu.Unlock()
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, p.view()); err != nil {
		p.log.Error("rendering the status page", zap.Error(err))
		http.Error(w, "rendering the status page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

var statusTemplate = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>sidemirror: sidecar of broker {{.BrokerID}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0; } h1 small { font-weight: normal; color: #666; }
h2 { font-size: 1.15em; margin-top: 1.5em; } h3 { font-size: 1.05em; margin: 1em 0 .3em; }
.meta { color: #666; } .err { color: #b00020; }
table { border-collapse: collapse; } th, td { padding: 2px 10px; text-align: left; border-bottom: 1px solid #eee; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.ok td.state { color: #1b7f3b; } tr.bad td.state { color: #b00020; font-weight: bold; }
tr.busy td.state { color: #9a6700; } tr.unknown td.state { color: #666; }
svg.spark { vertical-align: middle; background: #f6f8fa; }
svg.spark polyline { fill: none; stroke: #0969da; stroke-width: 1.5; }
</style>
</head>
<body>
<h1>sidemirror <small>sidecar of broker {{.BrokerID}} · {{.Version}}</small></h1>
<p class="meta">{{if .Sampled}}As of {{.Sampled}} · raft leader: {{.Leader}}{{else}}Starting: no answer from the raft group yet{{end}} · reloads every {{.Refresh}} s · read-only</p>
{{if .Error}}<p class="err">{{.Error}}</p>{{end}}
{{define "spark"}}<svg class="spark" width="120" height="24" viewBox="0 0 120 24" role="img"><title>lag{{if .Since}} since {{.Since}}{{end}}, peak {{.Max}}</title>{{if .Points}}<polyline points="{{.Points}}"/>{{end}}</svg>{{end}}
<h2>Mirrors</h2>
{{range .Mirrors}}
<section class="mirror" id="mirror-{{.Name}}">
<h3>{{.Name}}</h3>
<p>source {{.Source}}{{if .SourceCluster}} (cluster {{.SourceCluster}}){{end}} · {{.Partitions}} partitions · lag <b class="lag">{{.Lag}}</b> records {{template "spark" .Spark}}</p>
{{if .Error}}<p class="err">{{.Error}}</p>{{end}}
<table>
<tr><th>Topic</th><th>Partition</th><th>State</th><th>Source offset</th><th>Destination offset</th><th>Lag</th><th>Lag, last 5 min</th><th>Driven by</th><th>Last error</th></tr>
{{range .Rows}}<tr class="{{.StateClass}}"><td>{{.Topic}}</td><td class="n">{{.Partition}}</td><td class="state">{{.State}}</td><td class="n">{{.SourceOffset}}</td><td class="n">{{.DestOffset}}</td><td class="n">{{.Lag}}</td><td>{{template "spark" .Spark}}</td><td>{{.Owner}}</td><td class="err">{{.LastError}}</td></tr>
{{end}}</table>
{{if .Hidden}}<p class="meta">{{.Hidden}} more partitions not shown: kafka-cluster-mirrors --describe lists them all.</p>{{end}}
</section>
{{else}}
<p class="meta">{{if $.Sampled}}No mirrors yet: create one with kafka-cluster-mirrors --create.{{else}}…{{end}}</p>
{{end}}
<h2>Sidecars</h2>
<table>
<tr><th>Broker</th><th>Role</th><th>Raft address</th><th>Admin address</th><th>Version</th></tr>
{{range .Sidecars}}<tr><td class="n">{{.BrokerID}}</td><td>{{if .Leader}}raft leader{{else if .Voter}}voter{{else}}non-voter{{end}}{{if .Self}} (this sidecar){{end}}</td><td>{{.RaftAddress}}</td><td>{{.AdminAddress}}</td><td>{{.Version}}</td></tr>
{{end}}</table>
</body>
</html>
`))

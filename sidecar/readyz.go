package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/fetcher"
)

// readyzTimeout bounds the checks of one /readyz request: the local broker
// and every source are asked in parallel.
const readyzTimeout = 3 * time.Second

// readyCheck is one line of /readyz: what was checked and, if it failed,
// why.
type readyCheck struct {
	name string
	err  error
	ok   string // what an answer that passed says
}

// readinessOf is what /readyz looks at: the raft node, the destination
// client and the data plane.
type readinessOf struct {
	brokerID int32
	raft     interface {
		Members() ([]raftnode.Member, error)
		Leader() (int32, string)
	}
	local   *kgo.Client
	sources interface {
		CheckSources(ctx context.Context) []fetcher.SourceHealth
	}
	exclude map[string]bool // names of checks left out
}

// The names of the checks, for /readyz?exclude=.
const (
	checkRaft    = "raft"
	checkLocal   = "local"
	checkSources = "sources"
)

// readyz serves GET /readyz: 200 when this sidecar is a raft member with a
// known leader, reaches its local broker and the source of every mirror
// (and no partition it drives has an unreachable source); 503 otherwise.
// The body has one line per check, "ok" or "FAIL" and why. The query
// parameter exclude (repeated or comma-separated: raft, local, sources)
// leaves checks out, as Kubernetes' own /readyz does: a probe of a
// sidecar in the broker's pod excludes sources, so that a source outage
// does not take the destination brokers' pods out of service.
func (s *Sidecar) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c := s.comps.Load()
	switch {
	case s.stopping.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "FAIL shutting down\n")
		return
	case c == nil:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "FAIL starting\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
	defer cancel()
	exclude := map[string]bool{}
	for _, v := range r.URL.Query()["exclude"] {
		for _, name := range strings.Split(v, ",") {
			switch name = strings.TrimSpace(name); name {
			case checkRaft, checkLocal, checkSources:
				exclude[name] = true
			default:
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, "unknown check %q in exclude: the checks are %s, %s and %s\n", name, checkRaft, checkLocal, checkSources)
				return
			}
		}
	}
	ro := readinessOf{brokerID: s.cfg.LocalBrokerID, raft: c.node, local: c.dest, exclude: exclude}
	if c.fetcher != nil {
		ro.sources = c.fetcher
	}
	body, ready := report(ro.check(ctx))
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, body)
}

// report renders checks one per line and says whether all passed.
func report(checks []readyCheck) (body string, ready bool) {
	var b strings.Builder
	ready = true
	for _, ch := range checks {
		if ch.err != nil {
			ready = false
			fmt.Fprintf(&b, "FAIL %s: %s\n", ch.name, oneLine(ch.err.Error()))
		} else {
			fmt.Fprintf(&b, "ok   %s: %s\n", ch.name, ch.ok)
		}
	}
	return b.String(), ready
}

// oneLine keeps an error on one line of the body.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// check runs the checks: raft, the local broker and the sources in
// parallel, within ctx.
func (r readinessOf) check(ctx context.Context) []readyCheck {
	local := make(chan readyCheck, 1)
	if !r.exclude[checkLocal] {
		go func() { local <- r.checkLocal(ctx) }() // bounded by ctx
	}
	var sources []fetcher.SourceHealth
	if r.sources != nil && !r.exclude[checkSources] {
		sources = r.sources.CheckSources(ctx)
	}
	var out []readyCheck
	if !r.exclude[checkRaft] {
		out = append(out, r.checkRaft())
	}
	if !r.exclude[checkLocal] {
		out = append(out, <-local)
	}
	switch {
	case r.exclude[checkSources]:
		return out
	case r.sources == nil:
		return append(out, readyCheck{name: "sources", err: fmt.Errorf("the data plane is not running")})
	case len(sources) == 0:
		out = append(out, readyCheck{name: "sources", ok: "no mirror"})
	}
	for _, h := range sources {
		ch := readyCheck{name: "source of mirror " + h.Mirror, ok: "reachable", err: h.Err}
		if h.Unreachable > 0 {
			err := fmt.Errorf("%d partition(s) driven here cannot fetch from their source leaders (kafka-cluster-mirrors --describe says since when)", h.Unreachable)
			if ch.err != nil {
				err = fmt.Errorf("%w; %w", ch.err, err)
			}
			ch.err = err
		}
		out = append(out, ch)
	}
	return out
}

// checkRaft: this sidecar is in the raft configuration and knows a leader.
func (r readinessOf) checkRaft() readyCheck {
	ch := readyCheck{name: "raft"}
	members, err := r.raft.Members()
	if err != nil {
		ch.err = fmt.Errorf("cannot read the raft configuration: %w", err)
		return ch
	}
	ids := make([]string, 0, len(members))
	var self *raftnode.Member
	for i, m := range members {
		ids = append(ids, strconv.Itoa(int(m.ID)))
		if m.ID == r.brokerID {
			self = &members[i]
		}
	}
	leader, _ := r.raft.Leader()
	switch {
	case self == nil:
		ch.err = fmt.Errorf("broker %d is not a member of the raft group (members: %s): add it with kafka-cluster-mirrors --add-sidecar (docs/operations.md)",
			r.brokerID, strings.Join(ids, ", "))
	case leader < 0:
		ch.err = fmt.Errorf("a member, but no raft leader is known: fewer than a majority of the members reach each other")
	default:
		role := "voter"
		if !self.Voter {
			role = "non-voter"
		}
		ch.ok = fmt.Sprintf("member (%s) of %d, leader %d", role, len(members), leader)
	}
	return ch
}

// checkLocal asks the local broker for its API versions.
func (r readinessOf) checkLocal(ctx context.Context) readyCheck {
	ch := readyCheck{name: "local broker " + strconv.Itoa(int(r.brokerID)), ok: "reachable"}
	_, err := r.local.Broker(int(r.brokerID)).Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		ch.err = fmt.Errorf("no answer to ApiVersions: %w", err)
	}
	return ch
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/protocol"
)

// errWaitTimedOut means --wait gave up at --timeout: exit exitWaitTimedOut.
var errWaitTimedOut = errors.New("--wait timed out")

// waitProgressEvery is how often --wait reports the lag it waits for.
const waitProgressEvery = 10 * time.Second

// catchUp is where the partitions of some topics stand.
type catchUp struct {
	partitions, behind int
	lag                int64 // records, over the partitions whose lag is known
	failed             []string
	missing            []string // topics describe does not show (yet)
}

// measure sums up the partitions of topics in mirror m.
func measure(m protocol.DescribedMirror, topics []string) catchUp {
	var c catchUp
	for _, name := range topics {
		i := slices.IndexFunc(m.Topics, func(t protocol.DescribedTopic) bool { return t.TopicName == name })
		if i < 0 || len(m.Topics[i].Partitions) == 0 {
			c.missing = append(c.missing, name)
			continue
		}
		for _, p := range m.Topics[i].Partitions {
			c.partitions++
			if p.Lag > 0 {
				c.lag += p.Lag
			}
			switch {
			case p.State == partstate.Failed.String():
				c.failed = append(c.failed, fmt.Sprintf("%s-%d is FAILED: %s", name, p.PartitionIndex, orDash(oneLine(deref(p.LastError)))))
				c.behind++
			case p.State != partstate.Mirroring.String() || p.Lag != 0:
				c.behind++
			}
		}
	}
	return c
}

// waitCaughtUp is --wait after --start or --resume: it describes the mirror
// every --interval until every partition of topics is MIRRORING with lag 0
// (nil), a partition is FAILED (errFailedPartitions, the partitions printed
// to errOut), or --timeout passes (errWaitTimedOut). It reports the lag to
// errOut every waitProgressEvery. A describe that fails is reported and
// tried again.
func waitCaughtUp(ctx context.Context, cl client, cfg Config, topics []string, out, errOut io.Writer) error {
	if len(topics) == 0 {
		return nil
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	start, reported := time.Now(), time.Now()
	last := "no answer yet"
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		resp, err := fetchDescribe(rctx, cl, Config{Mirror: cfg.Mirror})
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			fmt.Fprintf(errOut, "Waiting for mirror %s: describe failed (trying again): %v\n", cfg.Mirror, err)
			last = "describe failed: " + err.Error()
		case err == nil:
			i := slices.IndexFunc(resp.Mirrors, func(m protocol.DescribedMirror) bool { return m.MirrorName == cfg.Mirror })
			if i < 0 {
				return fmt.Errorf("--wait: describe does not show mirror %s", cfg.Mirror)
			}
			if err := protocol.ErrorFor(resp.Mirrors[i].ErrorCode, resp.Mirrors[i].ErrorMessage); err != nil {
				return fmt.Errorf("--wait: mirror %s: %w", cfg.Mirror, err)
			}
			c := measure(resp.Mirrors[i], topics)
			if len(c.failed) > 0 {
				for _, f := range c.failed {
					fmt.Fprintf(errOut, "Error: partition %s\n", f)
				}
				return errFailedPartitions
			}
			if c.behind == 0 && len(c.missing) == 0 {
				fmt.Fprintf(out, "Caught up: %d partition(s) of %d topic(s) in mirror %s are MIRRORING with lag 0 (after %s)\n",
					c.partitions, len(topics), cfg.Mirror, time.Since(start).Round(time.Second))
				return nil
			}
			last = fmt.Sprintf("lag %d record(s), %d of %d partition(s) not caught up", c.lag, c.behind, c.partitions)
			if len(c.missing) > 0 {
				last += fmt.Sprintf(", not described yet: %s", strings.Join(c.missing, ", "))
			}
			if time.Since(reported) >= waitProgressEvery {
				fmt.Fprintf(errOut, "Waiting for mirror %s: %s\n", cfg.Mirror, last)
				reported = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s: mirror %s: %s", errWaitTimedOut, cfg.Timeout, cfg.Mirror, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// watchSample is one --watch refresh of a mirror: its total lag and the
// records on the destination, the bytes each partition's owner has
// appended (by partition and owner: a counter that starts again when
// another sidecar takes the partition over), when, and the partitions
// whose lag is not known because their source is unreachable (describe
// shows LAG -).
type watchSample struct {
	at          time.Time
	lag, dst    int64
	bytes       map[watchKey]int64
	unreachable int
}

// watchKey names a partition's byte counter: the partition and the broker
// whose sidecar counts.
type watchKey struct {
	topic            string
	partition, owner int32
}

// sampleOf sums up mirror m as described at.
func sampleOf(m protocol.DescribedMirror, at time.Time) watchSample {
	s := watchSample{at: at, bytes: map[watchKey]int64{}}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			s.lag += max(p.Lag, 0)
			s.dst += max(p.DestinationOffset, 0)
			if p.SourceUnreachableSinceMs > 0 {
				s.unreachable++
			}
			if p.MirroredBytes >= 0 && p.OwnerBrokerId >= 0 {
				s.bytes[watchKey{t.TopicName, p.PartitionIndex, p.OwnerBrokerId}] = p.MirroredBytes
			}
		}
	}
	return s
}

// bytesPerSecond is the rate at which the partitions' owners appended
// bytes between prev and cur, over the counters both samples have (a
// partition whose owner changed counts again from the next sample); false
// when they have none in common (sidecars that do not count bytes).
func bytesPerSecond(prev, cur watchSample, dt float64) (float64, bool) {
	var sum int64
	common := false
	for k, b := range cur.bytes {
		if pb, ok := prev.bytes[k]; ok {
			common = true
			sum += max(b-pb, 0)
		}
	}
	return float64(sum) / dt, common
}

// mebibyte is the MB of --watch's MB/s, as Kafka's perf tools count it.
const mebibyte = 1 << 20

// watchMirrors is --describe --watch: the describe table every --interval,
// each followed by a line per mirror with its total lag, the rate at which
// records are mirrored and the lag drains (since the previous refresh) and
// the time left at that rate, until ctx ends (Ctrl-C: exit 0). On a
// terminal the screen is cleared before each refresh. A refresh that fails
// is reported and the next one tried.
func watchMirrors(ctx context.Context, cl client, cfg Config, out, errOut io.Writer) error {
	clearScreen := isTerminal(out)
	prev := map[string]watchSample{}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		resp, err := fetchDescribe(rctx, cl, cfg)
		cancel()
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fmt.Fprintf(errOut, "%s describe failed: %v\n", now.Format(time.TimeOnly), err)
		default:
			if clearScreen {
				fmt.Fprint(out, "\033[H\033[2J")
			}
			fmt.Fprintf(out, "Every %s: %s\n", cfg.Interval, now.Format(time.DateTime))
			if err := printDescribe(resp, cfg, out, errOut); err != nil && !errors.Is(err, errFailedPartitions) && !errors.Is(err, errReported) {
				return err
			}
			fmt.Fprintln(out)
			for _, m := range resp.Mirrors {
				s := sampleOf(m, now)
				fmt.Fprintln(out, watchLine(m.MirrorName, prev[m.MirrorName], s))
				prev[m.MirrorName] = s
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watchLine is --watch's summary of a mirror: total lag, the throughput
// since the previous sample (if any) in MB/s and records per second, the
// records per second the lag drains, and the ETA at the drain rate. Partitions whose source is unreachable have no
// known lag: they are counted, and while there are any the mirror is not
// caught up and has no ETA.
func watchLine(mirror string, prev, cur watchSample) string {
	line := fmt.Sprintf("Mirror %s: lag %d record(s)", mirror, cur.lag)
	if cur.unreachable > 0 {
		line += fmt.Sprintf(" (and unknown for %d partition(s) whose source is unreachable)", cur.unreachable)
	}
	dt := cur.at.Sub(prev.at).Seconds()
	if prev.at.IsZero() || dt <= 0 {
		return line
	}
	copied := float64(cur.dst-prev.dst) / dt
	drain := float64(prev.lag-cur.lag) / dt
	line += ", mirroring "
	if bps, ok := bytesPerSecond(prev, cur, dt); ok {
		line += strconv.FormatFloat(bps/mebibyte, 'f', 2, 64) + " MB/s, "
	}
	line += strconv.FormatFloat(max(copied, 0), 'f', 0, 64) + " records/s"
	switch {
	case cur.unreachable > 0:
		// Their lag is missing from the sum (and was in the previous
		// one, if they became unreachable since): no rate to go by.
		line += ", no ETA while the source is unreachable"
	case cur.lag == 0:
		line += ", caught up"
	case drain > 0:
		line += fmt.Sprintf(", lag draining %s records/s, ETA %s", strconv.FormatFloat(drain, 'f', 0, 64),
			(time.Duration(float64(cur.lag) / drain * float64(time.Second))).Round(time.Second))
	default:
		line += ", lag not draining"
	}
	return line
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

package testbed

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// EndOffsets returns the end offset of every partition of topic on c, or
// the error of the first partition that has none (a topic created a moment
// ago, say, whose metadata has not reached every broker yet).
func (c *Cluster) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	cl, err := c.NewClient(Admin)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && err == nil {
			err = fmt.Errorf("end offset of %s-%d: %w", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out, err
}

// WaitEndOffsets is EndOffsets retried every 250 ms until it answers for
// at least one partition without an error, as a topic created a moment ago
// needs, or until ctx ends: then the last error.
func (c *Cluster) WaitEndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	for {
		out, err := c.EndOffsets(ctx, topic)
		if err == nil && len(out) == 0 {
			err = fmt.Errorf("end offsets of %s: no partition", topic)
		}
		if err == nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("end offsets of %s on %s: %w (%d partitions)", topic, c.Name(), err, len(out))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// CPUSeconds returns the CPU seconds (user + system) the running sidecars
// have used, from /proc.
func (g *SidecarGroup) CPUSeconds() float64 {
	var total float64
	for _, s := range g.sidecars {
		total += ProcessCPUSeconds(s.PID())
	}
	return total
}

// CPUSeconds returns the CPU seconds (user + system) the cluster's running
// nodes have used, from /proc.
func (c *Cluster) CPUSeconds() float64 {
	var total float64
	for _, n := range c.nodes {
		total += ProcessCPUSeconds(n.PID())
	}
	return total
}

// ProcessCPUSeconds returns the CPU seconds (user + system) process pid has
// used, 0 if it does not run.
func ProcessCPUSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// ResetPeakRSS sets process pid's peak resident set size (VmHWM) back to
// its current resident size (Linux's clear_refs), so that PeakRSS measures
// from now on. It reports whether the kernel allowed it.
func ResetPeakRSS(pid int) bool {
	if pid == 0 {
		return false
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// SumMetric sums the samples of the metric name labelled with mirror over
// every sidecar's /metrics.
func (g *SidecarGroup) SumMetric(ctx context.Context, name, mirror string) (float64, error) {
	var total float64
	for _, s := range g.sidecars {
		page, err := s.Metrics(ctx)
		if err != nil {
			return 0, fmt.Errorf("metrics of sidecar %d: %w", s.BrokerID, err)
		}
		for line := range strings.Lines(page) {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `mirror="`+mirror+`"`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += v
			}
		}
	}
	return total, nil
}

// PeakRSS returns the sidecar process's peak resident set size in bytes
// (VmHWM), 0 if it does not run.
func (s *Sidecar) PeakRSS() int64 { return ProcessPeakRSS(s.PID()) }

// ProcessPeakRSS returns process pid's peak resident set size in bytes
// (VmHWM), 0 if it does not run.
func ProcessPeakRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

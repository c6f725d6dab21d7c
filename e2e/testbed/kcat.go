package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
)

// DumpFormat is the kcat format of a record dump that two copies of a
// partition must share: offset, timestamp, key and value lengths, key,
// value and headers.
const DumpFormat = `%o %T %K %S %k %s %h\n`

// Kcat runs kcat against the cluster as u with args and returns its
// standard output; the error carries kcat's standard error.
func (c *Cluster) Kcat(ctx context.Context, u User, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "kcat", append(c.KcatArgs(u), args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kcat %v on %s: %w: %s", args, c.Name(), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// dumpArgs are kcat's arguments that read partition p of topic from its
// start to its end, one line per record in format, with extra (an
// isolation level, say).
func dumpArgs(topic string, p int32, format string, extra []string) []string {
	args := []string{"-C", "-t", topic, "-p", strconv.Itoa(int(p)), "-o", "beginning", "-e", "-q", "-f", format}
	return append(args, extra...)
}

// DumpPartition reads partition p of topic on the cluster as u with kcat,
// from its start to its end, one line per record in format (DumpFormat for
// a full dump); extra are more kcat arguments.
func (c *Cluster) DumpPartition(ctx context.Context, u User, topic string, p int32, format string, extra ...string) ([]byte, error) {
	return c.Kcat(ctx, u, dumpArgs(topic, p, format, extra)...)
}

// ComparePartition streams kcat dumps (DumpFormat, as Admin) of partition
// p of topic on src and dst side by side, and returns the number of
// records compared; the error names the first record that differs, both
// lines shown. extra are more kcat arguments for both sides. Streaming
// keeps large partitions out of memory.
func ComparePartition(ctx context.Context, src, dst *Cluster, topic string, p int32, extra ...string) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	var started []*exec.Cmd
	defer func() {
		cancel() // ends the kcats still writing on an early return
		for _, cmd := range started {
			_ = cmd.Wait() // a second Wait after the one below only errs
		}
	}()
	type stream struct {
		c      *Cluster
		r      io.Reader
		cmd    *exec.Cmd
		stderr bytes.Buffer
	}
	start := func(c *Cluster) (*stream, error) {
		s := &stream{c: c}
		s.cmd = exec.CommandContext(ctx, "kcat", append(c.KcatArgs(Admin), dumpArgs(topic, p, DumpFormat, extra)...)...)
		s.cmd.Stderr = &s.stderr
		out, err := s.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("kcat: %w", err)
		}
		started = append(started, s.cmd)
		s.r = out
		return s, nil
	}
	a, err := start(src)
	if err != nil {
		return 0, err
	}
	b, err := start(dst)
	if err != nil {
		return 0, err
	}
	n, err := compareLines(a.r, b.r)
	if err != nil {
		return n, fmt.Errorf("%s-%d: %w", topic, p, err)
	}
	for _, s := range []*stream{a, b} {
		if err := s.cmd.Wait(); err != nil {
			return n, fmt.Errorf("kcat on %s: %w: %s", s.c.Name(), err, bytes.TrimSpace(s.stderr.Bytes()))
		}
	}
	return n, nil
}

// compareLines reads lines from src and dst side by side and returns how
// many are equal; the error shows the first pair that differs (one side
// may be missing: a shorter dump).
func compareLines(src, dst io.Reader) (int, error) {
	a, b := bufio.NewReaderSize(src, 1<<20), bufio.NewReaderSize(dst, 1<<20)
	n := 0
	for {
		la, errA := a.ReadBytes('\n')
		lb, errB := b.ReadBytes('\n')
		if !bytes.Equal(la, lb) {
			return n, fmt.Errorf("record %d differs:\nsource:      %.300q\ndestination: %.300q", n, la, lb)
		}
		if errA == io.EOF && errB == io.EOF {
			return n, nil
		}
		if errA != nil || errB != nil {
			return n, fmt.Errorf("reading dumps: %v / %v", errA, errB)
		}
		n++
	}
}

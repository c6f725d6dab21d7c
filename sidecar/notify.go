package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
)

// systemd's service notifications (sd_notify(3), the unit's Type=notify):
// the service manager passes the path of a datagram socket in
// $NOTIFY_SOCKET, and the service sends newline-separated assignments such
// as READY=1 to it, one datagram each. A path starting with "@" is in the
// abstract namespace, which Go's net package maps itself.

// notifySocketEnv names the socket's environment variable.
const notifySocketEnv = "NOTIFY_SOCKET"

// readyPollInterval is how often the readiness is checked until it holds.
const readyPollInterval = 500 * time.Millisecond

// sdNotify sends state to $NOTIFY_SOCKET. Without the variable (the
// sidecar does not run under systemd's Type=notify) it does nothing and
// reports false.
func sdNotify(state string) (bool, error) {
	path := os.Getenv(notifySocketEnv)
	if path == "" {
		return false, nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sidecar: %s %s: %w", notifySocketEnv, path, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sidecar: %s %s: %w", notifySocketEnv, path, err)
	}
	return true, nil
}

// notify is sdNotify that logs a failure instead of returning it: a lost
// notification must not stop the sidecar.
func (s *Sidecar) notify(state string) {
	if _, err := sdNotify(state); err != nil {
		s.log.Warn("could not notify systemd", zap.String("state", state), zap.Error(err))
	}
}

// notifyWhenReady checks the readiness every readyPollInterval until it
// holds or ctx ends, reporting what it waits for as STATUS=, and then sends
// READY=1. It runs only under Type=notify ($NOTIFY_SOCKET set).
func (s *Sidecar) notifyWhenReady(ctx context.Context, c *components) {
	last := ""
	for {
		err := s.readiness(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.log.Info("ready: a member of the raft group and connected to the local broker; notifying systemd")
			s.notify("READY=1\nSTATUS=mirroring: a member of the raft group, connected to the local broker")
			return
		}
		if msg := err.Error(); msg != last {
			last = msg
			s.log.Info("not ready yet", zap.String("waiting-for", msg))
			s.notify("STATUS=waiting: " + msg)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(readyPollInterval):
		}
	}
}

// readiness returns nil once this sidecar is a member of the raft group
// that has caught up with its leader, and reaches the broker it runs next to
// (local.broker.id, through the destination's metadata); otherwise an
// error saying what is missing.
func (s *Sidecar) readiness(ctx context.Context, c *components) error {
	members, err := c.node.Members()
	if err != nil {
		return fmt.Errorf("the raft configuration: %v", err)
	}
	id := s.cfg.LocalBrokerID
	if !slices.ContainsFunc(members, func(m raftnode.Member) bool { return m.ID == id }) {
		return fmt.Errorf("this sidecar (%d) to join the raft group", id)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.node.WaitCaughtUp(wctx); err != nil {
		return errors.New("a raft leader, and a majority of the sidecars running")
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(wctx, c.dest)
	if err != nil {
		return fmt.Errorf("the destination cluster (%v)", err)
	}
	if !slices.ContainsFunc(meta.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == id }) {
		return fmt.Errorf("broker %d (%s) in the destination cluster's metadata", id, KeyLocalBrokerID)
	}
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(wctx, c.dest.Broker(int(id))); err != nil {
		return fmt.Errorf("a connection to broker %d (%v)", id, err)
	}
	return nil
}

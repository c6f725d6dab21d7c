package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// This file changes the raft group's membership (DESIGN D5: members are
// added and removed through the admin endpoint). Only the leader changes
// the configuration; every method returns a *NotLeaderError on another
// node. Each change is made against the configuration it was checked
// against (raft's prevIndex), so two concurrent changes cannot both pass
// the checks on a stale view: the second fails and can be retried.

// memberError is an operator-facing membership error: its message stands
// alone, and it matches its sentinel (ErrUnknownMember, ...).
type memberError struct {
	kind error
	msg  string
}

func (e *memberError) Error() string { return e.msg }
func (e *memberError) Unwrap() error { return e.kind }

func memberErr(kind error, format string, args ...any) error {
	return &memberError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Member is one server of the raft configuration.
type Member struct {
	ID      int32  // broker ID
	Address string // raft address
	Voter   bool   // false for a non-voter
}

// membershipTimeout bounds how long raft may queue a configuration change
// when ctx has no deadline.
const membershipTimeout = 30 * time.Second

// Members returns the latest raft configuration this node knows, by ID.
// Servers whose ID is not a broker ID (no sidemirror node adds one) are
// left out and logged.
func (n *Node) Members() ([]Member, error) {
	cfg, _, err := n.configuration()
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		id, err := parseServerID(s.ID)
		if err != nil {
			n.log.Warn("raft configuration holds a server whose ID is not a broker ID", zap.String("server-id", string(s.ID)))
			continue
		}
		out = append(out, Member{ID: id, Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// AddMember adds broker id at raft address addr to the group as a voter.
// An id already in the group at addr (as a voter) is a no-op and returns
// false. A stale entry, id at another address or addr under another ID, is
// removed first, and the server then added; this node's own entry is never
// replaced (it leads: its address is the one in use).
func (n *Node) AddMember(ctx context.Context, id int32, addr string) (added bool, err error) {
	if id < 0 {
		return false, memberErr(ErrInvalidMember, "broker ID %d is negative; give the broker ID of the sidecar's broker", id)
	}
	if strings.TrimSpace(addr) == "" {
		return false, memberErr(ErrInvalidMember, "broker %d has no raft address; give its raft.listener (host:port)", id)
	}
	if n.cfg.Transport == nil { // the TCP transport dials host:port
		if p := HostPortProblem(addr); p != "" {
			return false, memberErr(ErrInvalidMember, "raft address %q of broker %d %s", addr, id, p)
		}
	}
	if err := n.checkLeader(); err != nil {
		return false, err
	}
	cfg, index, err := n.configuration()
	if err != nil {
		return false, err
	}
	sid, saddr := serverID(id), raft.ServerAddress(addr)
	var stale []raft.Server
	for _, s := range cfg.Servers {
		switch {
		case s.ID == sid && s.Address == saddr && s.Suffrage == raft.Voter:
			return false, nil
		case s.ID == sid && s.Address == saddr: // a non-voter: AddVoter promotes it
		case s.ID == sid || s.Address == saddr:
			stale = append(stale, s)
		}
	}
	for _, s := range stale {
		if s.ID == serverID(n.cfg.ID) {
			return false, memberErr(ErrInvalidMember, "broker %d at %s would replace the entry of broker %d at %s, the raft leader; "+
				"a sidecar's own address changes when it restarts with the new raft.listener", id, addr, n.cfg.ID, s.Address)
		}
	}
	if err := n.probeMember(ctx, id, addr); err != nil {
		return false, err
	}
	for _, s := range stale {
		n.log.Info("removing a stale raft member before adding its replacement",
			zap.String("stale-id", string(s.ID)), zap.String("stale-address", string(s.Address)),
			zap.Int32("broker-id", id), zap.String("raft-address", addr))
		f := n.raft.RemoveServer(s.ID, index, changeTimeout(ctx))
		if err := f.Error(); err != nil {
			return false, n.changeError(fmt.Sprintf("removing the stale member %s at %s", s.ID, s.Address), err)
		}
		index = f.Index()
	}
	f := n.raft.AddVoter(sid, saddr, index, changeTimeout(ctx))
	if err := f.Error(); err != nil {
		return false, n.changeError(fmt.Sprintf("adding broker %d at %s", id, addr), err)
	}
	n.log.Info("added a sidecar to the raft group", zap.Int32("member-id", id), zap.String("raft-address", addr))
	return true, nil
}

// RemoveMember removes broker id from the group. An unknown ID and the last
// voter are refused. To remove itself, the leader first hands leadership to
// another voter and then returns a *NotLeaderError naming the new leader,
// which is to be asked instead: a leader that removes itself shuts its raft
// down, and could not rejoin without a restart.
func (n *Node) RemoveMember(ctx context.Context, id int32) error {
	if err := n.checkLeader(); err != nil {
		return err
	}
	cfg, index, err := n.configuration()
	if err != nil {
		return err
	}
	sid := serverID(id)
	var target *raft.Server
	voters := 0
	var ids []int32
	for i, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if s.ID == sid {
			target = &cfg.Servers[i]
		}
		if v, err := parseServerID(s.ID); err == nil {
			ids = append(ids, v)
		}
	}
	switch {
	case target == nil:
		slices.Sort(ids)
		return memberErr(ErrUnknownMember, "broker %d is not in the raft group (members: %s); list them with kafka-cluster-mirrors --list-sidecars",
			id, joinIDs(ids))
	case target.Suffrage == raft.Voter && voters == 1:
		return memberErr(ErrLastVoter, "broker %d is the last voter of the raft group and cannot be removed: no member would be left to elect a leader", id)
	case id == n.cfg.ID:
		return n.handOver(ctx)
	}
	f := n.raft.RemoveServer(sid, index, changeTimeout(ctx))
	if err := f.Error(); err != nil {
		return n.changeError(fmt.Sprintf("removing broker %d", id), err)
	}
	n.log.Info("removed a sidecar from the raft group", zap.Int32("member-id", id), zap.String("raft-address", string(target.Address)))
	return nil
}

// handOver transfers leadership to another voter and waits until this node
// knows the new leader's admin address; it returns a *NotLeaderError naming
// it.
func (n *Node) handOver(ctx context.Context) error {
	n.log.Info("handing raft leadership over before removing this sidecar from the group")
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("coordinator: this sidecar leads the raft group and could not hand leadership over before removing itself: %w; retry", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, addr := n.Leader(); id >= 0 && id != n.cfg.ID && addr != "" {
			return &NotLeaderError{LeaderID: id, LeaderAdminAddr: addr}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return &NotLeaderError{LeaderID: -1}
		}
	}
}

// checkLeader returns a *NotLeaderError unless this node leads.
func (n *Node) checkLeader() error {
	if n.closing.Load() {
		return &NotLeaderError{LeaderID: -1, Closing: true}
	}
	if n.raft.State() == raft.Leader {
		return nil
	}
	id, addr := n.Leader()
	if id == n.cfg.ID {
		id, addr = -1, ""
	}
	return &NotLeaderError{LeaderID: id, LeaderAdminAddr: addr}
}

// configuration returns the latest raft configuration and its log index.
func (n *Node) configuration() (raft.Configuration, uint64, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, fmt.Errorf("coordinator: reading the raft configuration: %w", err)
	}
	return f.Configuration(), f.Index(), nil
}

// changeError explains the failure of a configuration change.
func (n *Node) changeError(doing string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		id, addr := n.Leader()
		if id == n.cfg.ID {
			id, addr = -1, ""
		}
		n.log.Warn("raft membership change interrupted by a leadership change", zap.String("change", doing), zap.Error(err))
		return &NotLeaderError{LeaderID: id, LeaderAdminAddr: addr}
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("coordinator: %s: %w", doing, ErrClosed)
	}
	return fmt.Errorf("coordinator: %s: %w; check the members with kafka-cluster-mirrors --list-sidecars and retry", doing, err)
}

// changeTimeout is how long raft may queue a configuration change: until
// ctx's deadline, or membershipTimeout.
func changeTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return membershipTimeout
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func parseServerID(id raft.ServerID) (int32, error) {
	v, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil || v < 0 {
		return -1, fmt.Errorf("server ID %q is not a broker ID", id)
	}
	return int32(v), nil
}

// HostPortProblem describes what is wrong with a host:port address, or
// returns "".
func HostPortProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "is not host:port"
	}
	if host == "" {
		return "has no host (expected host:port)"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "has no port between 1 and 65535 (expected host:port)"
	}
	return ""
}

// joinIDs formats broker IDs as "1, 2, 3".
func joinIDs(ids []int32) string {
	ss := make([]string, len(ids))
	for i, id := range ids {
		ss[i] = strconv.Itoa(int(id))
	}
	return strings.Join(ss, ", ")
}

package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/internal/partstate"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/protocol"
)

// createMirror handles CreateClusterMirror: it validates the name and the
// config, asks the source for its cluster ID (an unreachable source is
// refused, so a typo in bootstrap.servers shows at once) and stores the
// mirror through raft.
func (a *admin) createMirror(ctx context.Context, r *protocol.CreateClusterMirrorRequest) protocol.Response {
	resp := &protocol.CreateClusterMirrorResponse{}
	fail := func(code int16, format string, args ...any) protocol.Response {
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(fmt.Sprintf(format, args...))
		return resp
	}
	if err := fsm.ValidateMirrorName(r.MirrorName); err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	config := map[string]string{}
	for _, c := range r.Config {
		if c.Value != nil {
			config[c.Name] = *c.Value
		}
	}
	if strings.TrimSpace(config[fsm.BootstrapServersKey]) == "" {
		return fail(kerr.InvalidConfig.Code, "the mirror config has no bootstrap.servers: set it to the source cluster's bootstrap servers (host:port,...)")
	}
	if err := checkMirrorKeys(config); err != nil {
		return fail(kerr.InvalidConfig.Code, "%s%v", protocol.RefusedSettingsPrefix, err)
	}
	include, exclude := SplitPatterns(config[fsm.IncludeKey]), SplitPatterns(config[fsm.ExcludeKey])
	delete(config, fsm.IncludeKey)
	delete(config, fsm.ExcludeKey)
	_, exists := a.ctl.State().Mirrors[r.MirrorName]
	if exists {
		return fail(kerr.InvalidRequest.Code, "mirror %s already exists: choose another name, or delete it first", r.MirrorName)
	}
	src, err := newSourceClient(a.dial, sourceConfig(config))
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "%s%v", protocol.RefusedSettingsPrefix, err)
	}
	defer src.Close()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	clusterID, err := sourceClusterID(sctx, src)
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "cannot reach the source cluster at %s: %v (check bootstrap.servers and the security settings of the mirror config)",
			config[fsm.BootstrapServersKey], err)
	}
	res, err := a.ctl.Apply(ctx, fsm.CreateMirror{Name: r.MirrorName, Config: config, SourceClusterID: clusterID,
		Include: include, Exclude: exclude, NowMs: a.now().UnixMilli()})
	if err != nil {
		return fail(kerr.UnknownServerError.Code, "%v", err)
	}
	if res.ErrorCode != 0 {
		return fail(res.ErrorCode, "%s", res.ErrorMessage)
	}
	a.log.Info("created mirror", zap.String("mirror", r.MirrorName), zap.String("source-cluster-id", clusterID))
	a.local.Kick()
	return resp
}

// listMirrors handles ListClusterMirrors from the controller state.
func (a *admin) listMirrors(*protocol.ListClusterMirrorsRequest) protocol.Response {
	resp := &protocol.ListClusterMirrorsResponse{}
	st := a.ctl.State()
	for _, name := range st.MirrorNames() {
		m := st.Mirrors[name]
		resp.Mirrors = append(resp.Mirrors, protocol.ListedMirror{
			MirrorName:      name,
			SourceBootstrap: m.Config[fsm.BootstrapServersKey],
			SourceClusterId: m.SourceClusterID,
			TopicCount:      int32(len(st.TopicsOf(name))),
		})
	}
	return resp
}

// describeLocal handles DescribeLocalPartitions: the rows of the partitions
// this sidecar's data plane drives.
func (a *admin) describeLocal(r *protocol.DescribeLocalPartitionsRequest) protocol.Response {
	return &protocol.DescribeLocalPartitionsResponse{Mirrors: a.local.LocalRows(r.MirrorNames)}
}

// divergedRow is the describe row of partition p of an active topic with
// diverged partitions (DESIGN D9): FAILED, with the divergence as the
// reason, or for the partitions that did not diverge, why they wait too.
func divergedRow(t *fsm.MirrorTopic, p int32) protocol.PartitionDetail {
	d := protocol.PartitionDetail{}
	d.Default()
	d.PartitionIndex = p
	d.State = fetcher.StateFailed.String()
	d.NonRetryable = true // only --start --reseed or --stop gets it out
	reseed := fmt.Sprintf("kafka-cluster-mirrors --start --reseed --topics %s copies the diverged records to %s.diverged-<timestamp> and re-mirrors the topic",
		t.Name, t.Name)
	for _, dv := range t.Diverged {
		if dv.Partition == p {
			d.LastError = strPtr(fmt.Sprintf("%s; stock Kafka cannot truncate a log: %s", dv, reseed))
			return d
		}
	}
	d.LastError = strPtr(fmt.Sprintf("not mirrored: partition %d of topic %s diverged and re-seeding re-creates the whole topic: %s",
		t.Diverged[0].Partition, t.Name, reseed))
	return d
}

// describeMirrors handles DescribeClusterMirrors: it asks every sidecar for
// the partitions it drives and merges their rows with the controller state,
// so that every partition of every mirror topic has a row.
func (a *admin) describeMirrors(ctx context.Context, r *protocol.DescribeClusterMirrorsRequest) protocol.Response {
	resp := &protocol.DescribeClusterMirrorsResponse{}
	st := a.ctl.State()
	names := r.MirrorNames
	if len(names) == 0 {
		names = st.MirrorNames()
	}
	rows, unreachable := a.gatherRows(ctx, names, st)
	for _, name := range names {
		persisted := a.writer.readStates(ctx, name)
		var dm protocol.DescribedMirror
		dm.Default()
		dm.MirrorName = name
		m, ok := st.Mirrors[name]
		if !ok {
			dm.ErrorCode = kerr.ResourceNotFound.Code
			dm.ErrorMessage = strPtr(fmt.Sprintf("mirror %s does not exist", name))
			resp.Mirrors = append(resp.Mirrors, dm)
			continue
		}
		dm.SourceClusterId = m.SourceClusterID
		if m.SyncFault != "" {
			dm.ErrorCode, dm.ErrorMessage = kerr.InconsistentClusterID.Code, strPtr(m.SyncFault)
		}
		dm.SourceBootstrap = m.Config[fsm.BootstrapServersKey]
		for _, k := range sortedKeys(m.Config) {
			v := m.Config[k]
			if properties.IsSecret(k) {
				v = properties.Hidden
			}
			dm.Configs = append(dm.Configs, protocol.ClusterMirrorConfig{Name: k, Value: strPtr(v)})
		}
		if len(m.Include) > 0 {
			dm.Configs = append(dm.Configs, protocol.ClusterMirrorConfig{Name: fsm.IncludeKey, Value: strPtr(strings.Join(m.Include, ","))})
		}
		if len(m.Exclude) > 0 {
			dm.Configs = append(dm.Configs, protocol.ClusterMirrorConfig{Name: fsm.ExcludeKey, Value: strPtr(strings.Join(m.Exclude, ","))})
		}
		for _, t := range st.TopicsOf(name) {
			dt := protocol.DescribedTopic{TopicName: t.Name}
			for p := range t.Partitions {
				key := fetcher.Partition{Mirror: name, Topic: t.Name, Partition: p}
				row, reported := rows[key]
				var last *protocol.ReadMirrorStatesResponsePartition
				if ps, ok := persisted[key]; ok {
					last = &ps
				}
				dt.Partitions = append(dt.Partitions, partitionRow(m, t, p, row, reported, last, unreachable))
			}
			dm.Topics = append(dm.Topics, dt)
		}
		resp.Mirrors = append(resp.Mirrors, dm)
	}
	return resp
}

// partitionRow is the describe row of partition p of mirror topic t: the row
// its sidecar reported (when reported), merged with the controller state,
// the state last persisted in __mirror_state (nil if none) and the sidecars
// that could not be asked.
func partitionRow(m *fsm.Mirror, t *fsm.MirrorTopic, p int32, d protocol.PartitionDetail, reported bool,
	persisted *protocol.ReadMirrorStatesResponsePartition, unreachable []string,
) protocol.PartitionDetail {
	if reported && t.Status != fsm.TopicActive {
		// Paused or stopped: the owner enters PAUSING or STOPPING and
		// removes the driver. One that has not seen the change yet reports
		// the state before it: the row shows where the partition state
		// machine leads from there.
		st, _ := partstate.Parse(d.State)
		if tr := partstate.Next(st, t.Status.Event()); tr.Allowed() {
			st = tr.To
		}
		if st != partstate.Pausing && st != partstate.Stopping {
			reported = false // nothing drives it any more
		} else {
			d.State = st.String()
		}
	}
	if !reported {
		d = protocol.PartitionDetail{}
		d.Default()
		d.PartitionIndex = p
		switch t.Status {
		case fsm.TopicPaused, fsm.TopicStopped:
			d.State = t.Status.Resting().String()
		default:
			d.State = partstate.Unknown.String()
			if persisted != nil {
				// Its owner is gone or not started yet: show what it
				// last recorded.
				d.State = stateName(persisted.State)
				d.LastError = persisted.Reason
				if d.State == partstate.Failed.String() {
					d.RetryAttempt, d.MaxRetryAttempts = persisted.RetryAttempt, mirrorRetryPolicy(m).maxAttempts
				}
			}
			if len(unreachable) > 0 {
				d.LastError = strPtr("no sidecar reports this partition; unreachable sidecars: " + strings.Join(unreachable, ", "))
			}
		}
	}
	if fault := cmp.Or(t.SyncFault, m.SyncFault); fault != "" && t.Status == fsm.TopicActive {
		// Halted by the metadata sync (DESIGN D10): not driven, and not to
		// be mistaken for a stopped topic.
		d.LastError = strPtr(fault)
		if d.OwnerBrokerId < 0 {
			d.State = fetcher.StateFailed.String()
		}
	} else if t.SyncFault != "" {
		d.LastError = strPtr(t.SyncFault)
	}
	if t.Status == fsm.TopicActive && len(t.Diverged) > 0 {
		d = divergedRow(t, p)
	}
	return d
}

// gatherRows collects the describe rows of every sidecar, itself included,
// in parallel. When two sidecars report one partition (leadership moving),
// the row further ahead wins. It also returns the sidecars it could not
// ask.
func (a *admin) gatherRows(ctx context.Context, mirrors []string, st *fsm.State) (map[fetcher.Partition]protocol.PartitionDetail, []string) {
	type answer struct {
		id      int32
		addr    string
		mirrors []protocol.DescribedMirror
		err     error
	}
	answers := make(chan answer, len(st.Sidecars)+1)
	var wg sync.WaitGroup
	askedSelf := false
	for id, sc := range st.Sidecars {
		if id == a.brokerID {
			askedSelf = true
			answers <- answer{id: id, mirrors: a.local.LocalRows(mirrors)}
			continue
		}
		wg.Add(1)
		go func() { // bounded by the request's context
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := a.peers.Do(cctx, sc.AdminAddr, &protocol.DescribeLocalPartitionsRequest{MirrorNames: mirrors})
			ans := answer{id: id, addr: sc.AdminAddr, err: err}
			if err == nil {
				ans.mirrors = resp.(*protocol.DescribeLocalPartitionsResponse).Mirrors
			}
			answers <- ans
		}()
	}
	if !askedSelf {
		answers <- answer{id: a.brokerID, mirrors: a.local.LocalRows(mirrors)}
	}
	wg.Wait()
	close(answers)
	rows := map[fetcher.Partition]protocol.PartitionDetail{}
	var unreachable []string
	for ans := range answers {
		if ans.err != nil {
			a.log.Warn("describe: sidecar did not answer", zap.Int32("broker-id", ans.id), zap.String("admin-address", ans.addr), zap.Error(ans.err))
			unreachable = append(unreachable, strconv.Itoa(int(ans.id)))
			continue
		}
		for _, m := range ans.mirrors {
			for _, t := range m.Topics {
				for _, d := range t.Partitions {
					key := fetcher.Partition{Mirror: m.MirrorName, Topic: t.TopicName, Partition: d.PartitionIndex}
					if prev, ok := rows[key]; ok && prev.DestinationOffset >= d.DestinationOffset {
						continue
					}
					rows[key] = d
				}
			}
		}
	}
	slices.Sort(unreachable)
	return rows, unreachable
}

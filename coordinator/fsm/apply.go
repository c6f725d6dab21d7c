package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sidemirror/sidemirror/internal/partstate"
)

// This file holds the validation and application of every command. Rules:
// - deterministic: no clocks, no randomness, no map iteration order
//   reaching the state or a message (iterate sorted keys);
// - validate everything first, then mutate, so a top-level error leaves the
//   state untouched;
// - copy maps and slices out of the command, so the state never aliases a
//   decoded command;
// - messages are for operators: the offending value and what to do.

// applyCommand decodes b and applies it to s. It never panics on any input
// (FuzzApply checks that); FSM.Apply adds a recover as a last line of
// defence against bugs.
func applyCommand(s *State, b []byte) Result {
	c, err := DecodeCommand(b)
	if err != nil {
		code := codeInvalidRequest
		if len(b) >= 1 {
			if _, known := codecs[CommandType(b[0])]; !known || isUnknownVersion(b) {
				code = codeUnsupportedVersion
			}
		}
		return fail(code, "%v", err)
	}
	return c.apply(s)
}

func isUnknownVersion(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	_, ok := codecs[CommandType(b[0])].decode[b[1]]
	return !ok
}

func unknownMirror(name string) Result {
	return fail(codeResourceNotFound, "mirror %q does not exist; list the mirrors with kafka-cluster-mirrors --list", name)
}

// checkPatterns rejects empty patterns. Whether a pattern compiles is
// checked by the proposer (ValidatePattern), not here: see there.
func checkPatterns(kind string, ps []string) (Result, bool) {
	for i, p := range ps {
		if strings.TrimSpace(p) == "" {
			return fail(codeInvalidRequest, "%s pattern #%d is empty; give a topic name or a regular expression", kind, i+1), false
		}
	}
	return Result{}, true
}

// checkConfigKey rejects keys the mirror config cannot hold.
func checkConfigKey(k string) (Result, bool) {
	switch k {
	case "":
		return fail(codeInvalidConfig, "a mirror config key is empty; remove the entry"), false
	case IncludeKey, ExcludeKey:
		return fail(codeInvalidConfig, "config key %s cannot be set directly; topic patterns are added with --start (--topics, --exclude) and moved to the exclude list with --stop", k), false
	}
	return Result{}, true
}

func missingBootstrap(mirror string) Result {
	return fail(codeInvalidConfig, "mirror %q needs %s: the source cluster's bootstrap servers, e.g. host1:9092,host2:9092", mirror, BootstrapServersKey)
}

// appendUnique appends the entries of add that list does not hold yet, in
// order, and returns a new slice.
func appendUnique(list []string, add []string) []string {
	out := slices.Clone(list)
	for _, p := range add {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// namesListed counts the occurrences of each name in a request.
func namesListed(names []string) map[string]int {
	n := make(map[string]int, len(names))
	for _, name := range names {
		n[name]++
	}
	return n
}

// listSome formats up to max names for a message.
func listSome(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

func (c CreateMirror) apply(s *State) Result {
	if p := mirrorNameProblem(c.Name); p != "" {
		return fail(codeInvalidRequest, "%s", p)
	}
	if s.Mirrors[c.Name] != nil {
		return fail(codeInvalidRequest, "mirror %s already exists; choose another name, or delete it first with kafka-cluster-mirrors --delete --mirror %s", c.Name, c.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Config)) {
		if r, ok := checkConfigKey(k); !ok {
			return r
		}
	}
	if strings.TrimSpace(c.Config[BootstrapServersKey]) == "" {
		return missingBootstrap(c.Name)
	}
	if r, ok := checkPatterns("include", c.Include); !ok {
		return r
	}
	if r, ok := checkPatterns("exclude", c.Exclude); !ok {
		return r
	}
	s.Mirrors[c.Name] = &Mirror{
		Name:            c.Name,
		Config:          maps.Clone(c.Config),
		SourceClusterID: c.SourceClusterID,
		Include:         appendUnique(nil, c.Include),
		Exclude:         appendUnique(nil, c.Exclude),
		CreatedMs:       c.NowMs,
		UpdatedMs:       c.NowMs,
	}
	return Result{}
}

func (c DeleteMirror) apply(s *State) Result {
	if s.Mirrors[c.Name] == nil {
		return unknownMirror(c.Name)
	}
	topics := s.TopicsOf(c.Name)
	var busy []string
	for _, t := range topics {
		if t.Status != TopicStopped {
			busy = append(busy, t.Name)
		}
	}
	if len(busy) > 0 {
		return fail(codeInvalidRequest, "mirror %s still has %d topic(s) that are not stopped (%s); stop them first with kafka-cluster-mirrors --stop --mirror %s --topics <topics>",
			c.Name, len(busy), listSome(busy, 10), c.Name)
	}
	for _, t := range topics {
		delete(s.Topics, t.Name)
	}
	delete(s.Mirrors, c.Name)
	return Result{}
}

func (c AlterMirrorConfig) apply(s *State) Result {
	m := s.Mirrors[c.Name]
	if m == nil {
		return unknownMirror(c.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		if r, ok := checkConfigKey(k); !ok {
			return r
		}
		if slices.Contains(c.Delete, k) {
			return fail(codeInvalidRequest, "config key %s is both set and deleted in one request; do one or the other", k)
		}
	}
	for _, k := range c.Delete {
		if r, ok := checkConfigKey(k); !ok {
			return r
		}
		if k == BootstrapServersKey {
			return fail(codeInvalidConfig, "%s of mirror %s cannot be deleted; set a new value instead", BootstrapServersKey, c.Name)
		}
	}
	if v, ok := c.Set[BootstrapServersKey]; ok && strings.TrimSpace(v) == "" {
		return missingBootstrap(c.Name)
	}
	cfg := maps.Clone(m.Config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	if _, set := c.Set[OffsetsKey]; (set || slices.Contains(c.Delete, OffsetsKey)) && len(s.TopicsOf(c.Name)) > 0 {
		if v := c.Set[OffsetsKey]; !set || v != m.offsets() {
			return fail(codeInvalidConfig, "%s of mirror %s cannot change once it has topics: the destination offsets of its topics follow it; "+
				"create a new mirror for another mode", OffsetsKey, c.Name)
		}
	}
	maps.Copy(cfg, c.Set)
	for _, k := range c.Delete {
		delete(cfg, k)
	}
	m.Config = cfg
	m.UpdatedMs = c.NowMs
	return Result{}
}

func (c SetSourceClusterID) apply(s *State) Result {
	m := s.Mirrors[c.Name]
	if m == nil {
		return unknownMirror(c.Name)
	}
	if strings.TrimSpace(c.ClusterID) == "" {
		return fail(codeInvalidRequest, "the source cluster ID for mirror %s is empty; the source cluster did not report one", c.Name)
	}
	if m.SourceClusterID != "" && m.SourceClusterID != c.ClusterID {
		return fail(codeInconsistentClusterID, "mirror %s mirrors source cluster %s, but its bootstrap servers now lead to cluster %s; fix %s, or if the source was replaced on purpose, stop the mirror's topics and recreate the mirror",
			c.Name, m.SourceClusterID, c.ClusterID, BootstrapServersKey)
	}
	m.SourceClusterID = c.ClusterID
	return Result{}
}

func (c StartTopics) apply(s *State) Result {
	m := s.Mirrors[c.Mirror]
	if m == nil {
		return unknownMirror(c.Mirror)
	}
	if r, ok := checkPatterns("include", c.AddInclude); !ok {
		return r
	}
	if r, ok := checkPatterns("exclude", c.AddExclude); !ok {
		return r
	}
	names := make([]string, len(c.Topics))
	for i, t := range c.Topics {
		names[i] = t.Name
	}
	listed := namesListed(names)
	res := Result{Topics: make([]TopicResult, len(c.Topics))}
	for i, t := range c.Topics {
		res.Topics[i] = c.checkTopic(s, t, listed[t.Name])
	}
	m.Include = appendUnique(m.Include, c.AddInclude)
	m.Exclude = appendUnique(m.Exclude, c.AddExclude)
	for i, t := range c.Topics {
		if res.Topics[i].ErrorCode != 0 {
			continue
		}
		mt := &MirrorTopic{
			Name:          t.Name,
			Mirror:        c.Mirror,
			Partitions:    t.Partitions,
			SourceTopicID: t.SourceTopicID,
			Status:        TopicActive,
			StartedMs:     c.NowMs,
			UpdatedMs:     c.NowMs,
			Unprotected:   t.Unprotected,
			Diverged:      slices.Clone(t.Diverged),
		}
		if old := s.Topics[t.Name]; old != nil {
			// A restart: the ACLs recorded are still in the cluster
			// (or being removed); whoever owns them keeps track.
			mt.OwnedACLs = slices.Clone(old.OwnedACLs)
		}
		s.Topics[t.Name] = mt
	}
	return res
}

func (c StartTopics) checkTopic(s *State, t StartTopic, listed int) TopicResult {
	if p := nameProblem("topic", t.Name); p != "" {
		return topicFail(t.Name, codeInvalidTopic, "%s", p)
	}
	if listed > 1 {
		return topicFail(t.Name, codeInvalidRequest, "topic %s is listed %d times in the request; list it once", t.Name, listed)
	}
	if t.Partitions < 1 {
		return topicFail(t.Name, codeInvalidPartitions, "topic %s has the partition count %d; it must be the source topic's partition count, at least 1", t.Name, t.Partitions)
	}
	if msg := checkDivergences(t.Diverged, t.Partitions); msg != "" {
		return topicFail(t.Name, codeInvalidRequest, "topic %s: %s", t.Name, msg)
	}
	old := s.Topics[t.Name]
	switch {
	case old == nil || old.Status == TopicStopped:
		return TopicResult{Name: t.Name}
	case old.Mirror != c.Mirror:
		return topicFail(t.Name, codeInvalidRequest, "topic %s is already %s in mirror %s; a topic belongs to one mirror at a time: stop it there first (kafka-cluster-mirrors --stop --mirror %s --topics %s)",
			t.Name, old.Status, old.Mirror, old.Mirror, t.Name)
	}
	return operatorEvent(old, partstate.Start, c.Mirror)
}

// operatorEvent checks an operator event on topic t against the partition
// state machine: the topic's status stands for the state its partitions
// rest in (partstate), so that Apply, which knows no partition states,
// refuses exactly what the table refuses.
func operatorEvent(t *MirrorTopic, e partstate.Event, mirror string) TopicResult {
	tr := partstate.Next(t.Status.Resting(), e)
	if !tr.Allowed() {
		return topicFail(t.Name, tr.Code, "%s", tr.Refusal(t.Name, mirror))
	}
	return TopicResult{Name: t.Name}
}

func (c SetTopicStatus) apply(s *State) Result {
	m := s.Mirrors[c.Mirror]
	if m == nil {
		return unknownMirror(c.Mirror)
	}
	if !c.Status.Valid() {
		return fail(codeInvalidRequest, "%d is not a topic status; use %d (resume), %d (pause) or %d (stop)", c.Status, TopicActive, TopicPaused, TopicStopped)
	}
	if r, ok := checkPatterns("exclude", c.AddExclude); !ok {
		return r
	}
	listed := namesListed(c.Topics)
	res := Result{Topics: make([]TopicResult, len(c.Topics))}
	for i, name := range c.Topics {
		res.Topics[i] = c.checkTopic(s, name, listed[name])
	}
	m.Include = slices.DeleteFunc(slices.Clone(m.Include), func(p string) bool { return slices.Contains(c.RemoveInclude, p) })
	m.Exclude = appendUnique(m.Exclude, c.AddExclude)
	for i, name := range c.Topics {
		if res.Topics[i].ErrorCode != 0 {
			continue
		}
		t := s.Topics[name]
		t.Status = c.Status
		t.UpdatedMs = c.NowMs
	}
	return res
}

// checkTopic applies the per-topic rules of DESIGN D16 at the level the FSM
// knows: Stop accepts active (which covers partitions in FAILED) and paused
// topics, Pause accepts active ones, Resume paused ones.
func (c SetTopicStatus) checkTopic(s *State, name string, listed int) TopicResult {
	t := s.Topics[name]
	switch {
	case listed > 1:
		return topicFail(name, codeInvalidRequest, "topic %s is listed %d times in the request; list it once", name, listed)
	case t == nil:
		return topicFail(name, codeUnknownTopicOrPartition, "topic %s is not a mirror topic; list the topics of mirror %s with kafka-cluster-mirrors --describe --mirror %s", name, c.Mirror, c.Mirror)
	case t.Mirror != c.Mirror:
		return topicFail(name, codeInvalidRequest, "topic %s belongs to mirror %s, not to mirror %s; give --mirror %s", name, t.Mirror, c.Mirror, t.Mirror)
	}
	return operatorEvent(t, c.Status.Event(), c.Mirror)
}

func unknownTopic(name string) Result {
	return fail(codeUnknownTopicOrPartition, "topic %s is not a mirror topic", name)
}

func (c RecordACLs) apply(s *State) Result {
	t := s.Topics[c.Topic]
	if t == nil {
		return unknownTopic(c.Topic)
	}
	for i, a := range c.ACLs {
		if a.ResourceName == "" || a.Principal == "" {
			return fail(codeInvalidRequest, "ACL #%d for topic %s has no resource name or principal", i+1, c.Topic)
		}
	}
	t.OwnedACLs = slices.Clone(c.ACLs)
	return Result{}
}

func (c SetUnprotected) apply(s *State) Result {
	t := s.Topics[c.Topic]
	if t == nil {
		return unknownTopic(c.Topic)
	}
	t.Unprotected = c.Unprotected
	return Result{}
}

func (c RegisterSidecar) apply(s *State) Result {
	if c.ID < 0 {
		return fail(codeInvalidRequest, "sidecar ID %d is negative; it is the broker ID of the sidecar's broker", c.ID)
	}
	if strings.TrimSpace(c.RaftAddr) == "" {
		return fail(codeInvalidRequest, "sidecar %d registered no raft address", c.ID)
	}
	s.Sidecars[c.ID] = &SidecarInfo{ID: c.ID, RaftAddr: c.RaftAddr, AdminAddr: c.AdminAddr, Version: c.Version}
	return Result{}
}

func (c RecordReplicaOrder) apply(s *State) Result {
	if len(c.Partitions) == 0 {
		return fail(codeInvalidRequest, "RecordReplicaOrder names no partition")
	}
	seen := map[TopicPartition]bool{}
	var add []ReplicaOrder
	for _, o := range c.Partitions {
		if p := replicaOrderProblem(o.Topic, o.Partition, o.Replicas); p != "" {
			return fail(codeInvalidRequest, "%s", p)
		}
		tp := TopicPartition{o.Topic, o.Partition}
		if seen[tp] {
			return fail(codeInvalidRequest, "partition %s-%d is listed twice; list it once", o.Topic, o.Partition)
		}
		seen[tp] = true
		if old, ok := s.MovedReplicas(o.Topic, o.Partition); ok {
			if !slices.Equal(old, o.Replicas) {
				return fail(codeInvalidRequest, "the original replica order of %s-%d is already recorded as %v, not %v; it is restored and cleared first",
					o.Topic, o.Partition, old, o.Replicas)
			}
			continue
		}
		if s.Topics[o.Topic] == nil {
			return unknownTopic(o.Topic)
		}
		add = append(add, o)
	}
	for _, o := range add {
		if s.MovedPartitions == nil {
			s.MovedPartitions = map[string]map[int32][]int32{}
		}
		if s.MovedPartitions[o.Topic] == nil {
			s.MovedPartitions[o.Topic] = map[int32][]int32{}
		}
		s.MovedPartitions[o.Topic][o.Partition] = slices.Clone(o.Replicas)
	}
	return Result{}
}

func (c ClearReplicaOrder) apply(s *State) Result {
	if len(c.Partitions) == 0 {
		return fail(codeInvalidRequest, "ClearReplicaOrder names no partition")
	}
	for _, tp := range c.Partitions {
		if p := nameProblem("topic", tp.Topic); p != "" {
			return fail(codeInvalidRequest, "%s", p)
		}
		if tp.Partition < 0 {
			return fail(codeInvalidRequest, "partition %d of topic %s is negative", tp.Partition, tp.Topic)
		}
	}
	for _, tp := range c.Partitions {
		parts := s.MovedPartitions[tp.Topic]
		if parts == nil {
			continue
		}
		delete(parts, tp.Partition)
		if len(parts) == 0 {
			delete(s.MovedPartitions, tp.Topic)
		}
	}
	if len(s.MovedPartitions) == 0 {
		s.MovedPartitions = nil
	}
	return Result{}
}

func (c RemoveSidecar) apply(s *State) Result {
	if c.ID < 0 {
		return fail(codeInvalidRequest, "sidecar ID %d is negative; it is the broker ID of the sidecar's broker", c.ID)
	}
	delete(s.Sidecars, c.ID)
	return Result{}
}

func (c AlterMirrorPatterns) apply(s *State) Result {
	m := s.Mirrors[c.Name]
	if m == nil {
		return unknownMirror(c.Name)
	}
	if r, ok := checkPatterns("include", c.AddInclude); !ok {
		return r
	}
	if r, ok := checkPatterns("exclude", c.AddExclude); !ok {
		return r
	}
	for _, p := range c.AddInclude {
		if slices.Contains(c.RemoveInclude, p) {
			return fail(codeInvalidRequest, "include pattern %q is both added and removed in one request; do one or the other", p)
		}
	}
	for _, p := range c.AddExclude {
		if slices.Contains(c.RemoveExclude, p) {
			return fail(codeInvalidRequest, "exclude pattern %q is both added and removed in one request; do one or the other", p)
		}
	}
	drop := func(list, remove []string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return slices.Contains(remove, p) })
	}
	m.Include = appendUnique(drop(m.Include, c.RemoveInclude), c.AddInclude)
	m.Exclude = appendUnique(drop(m.Exclude, c.RemoveExclude), c.AddExclude)
	m.UpdatedMs = c.NowMs
	return Result{}
}

func (c SetTopicPartitions) apply(s *State) Result {
	t := s.Topics[c.Topic]
	switch {
	case t == nil:
		return unknownTopic(c.Topic)
	case t.Status == TopicStopped:
		return fail(codeInvalidRequest, "topic %s is stopped; its partition count is no longer synced", c.Topic)
	case c.Partitions < t.Partitions:
		return fail(codeInvalidPartitions, "topic %s has %d partitions; the count cannot shrink to %d", c.Topic, t.Partitions, c.Partitions)
	}
	t.Partitions = c.Partitions
	return Result{}
}

func (c SetSyncFault) apply(s *State) Result {
	m := s.Mirrors[c.Mirror]
	if m == nil {
		return unknownMirror(c.Mirror)
	}
	if c.Topic == "" {
		m.SyncFault = c.Fault
		return Result{}
	}
	t := s.Topics[c.Topic]
	if t == nil {
		return unknownTopic(c.Topic)
	}
	if t.Mirror != c.Mirror {
		return fail(codeInvalidRequest, "topic %s belongs to mirror %s, not to mirror %s", c.Topic, t.Mirror, c.Mirror)
	}
	t.SyncFault = c.Fault
	return Result{}
}

func (c SetDiverged) apply(s *State) Result {
	if s.Mirrors[c.Mirror] == nil {
		return unknownMirror(c.Mirror)
	}
	t := s.Topics[c.Topic]
	switch {
	case t == nil:
		return unknownTopic(c.Topic)
	case t.Mirror != c.Mirror:
		return fail(codeInvalidRequest, "topic %s belongs to mirror %s, not to mirror %s", c.Topic, t.Mirror, c.Mirror)
	case t.Status != TopicActive:
		return fail(codeInvalidRequest, "topic %s is %s in mirror %s: only an active topic has diverged partitions", c.Topic, t.Status, c.Mirror)
	}
	if msg := checkDivergences(c.Diverged, t.Partitions); msg != "" {
		return fail(codeInvalidRequest, "topic %s: %s", c.Topic, msg)
	}
	if len(c.Diverged) == 0 && len(t.Diverged) > 0 {
		t.StartedMs = c.NowMs
	}
	t.Diverged = slices.Clone(c.Diverged)
	if len(t.Diverged) == 0 {
		t.Diverged = nil
	}
	t.UpdatedMs = c.NowMs
	return Result{}
}

// checkDivergences returns what is wrong with a list of diverged partitions
// of a topic with the given partition count, or "".
func checkDivergences(ds []Divergence, partitions int32) string {
	seen := map[int32]bool{}
	for _, d := range ds {
		switch {
		case d.Partition < 0 || d.Partition >= partitions:
			return fmt.Sprintf("diverged partition %d does not exist (the topic has %d partitions)", d.Partition, partitions)
		case seen[d.Partition]:
			return fmt.Sprintf("diverged partition %d is listed twice", d.Partition)
		case d.Offset < 0 || d.Extra < 1:
			return fmt.Sprintf("diverged partition %d: offset %d and %d extra records are not a divergence", d.Partition, d.Offset, d.Extra)
		}
		seen[d.Partition] = true
	}
	return ""
}

func (c RecordSyncedACLs) apply(s *State) Result {
	m := s.Mirrors[c.Mirror]
	if m == nil {
		return unknownMirror(c.Mirror)
	}
	for i, a := range c.ACLs {
		if a.ResourceName == "" || a.Principal == "" {
			return fail(codeInvalidRequest, "synced ACL #%d of mirror %s has no resource name or principal", i+1, c.Mirror)
		}
	}
	m.SyncedACLs = slices.Clone(c.ACLs)
	return Result{}
}

func (ReadBarrier) apply(*State) Result { return Result{} }

func (c RestartTopics) apply(s *State) Result {
	if s.Mirrors[c.Mirror] == nil {
		return unknownMirror(c.Mirror)
	}
	res := Result{Topics: make([]TopicResult, len(c.Topics))}
	for i, name := range c.Topics {
		t := s.Topics[name]
		if t == nil || t.Mirror != c.Mirror {
			res.Topics[i] = topicFail(name, codeUnknownTopicOrPartition, "topic %s is not a topic of mirror %s", name, c.Mirror)
			continue
		}
		if res.Topics[i] = operatorEvent(t, partstate.Restart, c.Mirror); res.Topics[i].ErrorCode == 0 {
			t.RestartGen++
			t.UpdatedMs = c.NowMs
		}
	}
	return res
}

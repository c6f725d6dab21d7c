package fsm_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

// applyCase is one command applied to the fixture state (plus setup).
type applyCase struct {
	name  string
	setup []fsm.Command // applied after the fixture; must succeed
	cmd   fsm.Command
	// code and msg (a substring) are the expected top-level result.
	code int16
	msg  string
	// topics are the expected per-topic codes, in request order; nil for
	// commands without per-topic results.
	topics []int16
	// topicMsg is a substring expected in the message of the first failed
	// topic.
	topicMsg string
	// check inspects the state after a successful (top-level) apply.
	check func(t *testing.T, before, after *fsm.State)
}

func runApplyCases(t *testing.T, cases []applyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fsmtest.State(t)
			fsmtest.MustApply(t, s, tc.setup...)
			before := s.Clone()
			res := fsm.ApplyTo(s, fsmtest.MustEncode(t, tc.cmd))

			if res.ErrorCode != tc.code {
				t.Fatalf("error code = %d (%s), want %d", res.ErrorCode, res.ErrorMessage, tc.code)
			}
			if tc.code != 0 && (tc.msg == "" || !strings.Contains(res.ErrorMessage, tc.msg)) {
				t.Fatalf("error message = %q, want it to contain %q", res.ErrorMessage, tc.msg)
			}
			var codes []int16
			var firstTopicErr string
			for _, tr := range res.Topics {
				codes = append(codes, tr.ErrorCode)
				if tr.ErrorCode != 0 && firstTopicErr == "" {
					firstTopicErr = tr.ErrorMessage
				}
			}
			if !slices.Equal(codes, tc.topics) {
				t.Fatalf("topic codes = %v, want %v (results %+v)", codes, tc.topics, res.Topics)
			}
			if tc.topicMsg != "" && !strings.Contains(firstTopicErr, tc.topicMsg) {
				t.Fatalf("first topic error = %q, want it to contain %q", firstTopicErr, tc.topicMsg)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("state invalid after apply: %v", err)
			}

			if tc.code != 0 {
				if !reflect.DeepEqual(s, before) {
					t.Fatalf("state changed by a failed command:\nbefore %+v\nafter  %+v", before, s)
				}
				return
			}
			// Topics that failed are unchanged.
			for _, tr := range res.Topics {
				if tr.ErrorCode != 0 && !reflect.DeepEqual(s.Topics[tr.Name], before.Topics[tr.Name]) {
					t.Fatalf("topic %s failed but changed: before %+v after %+v", tr.Name, before.Topics[tr.Name], s.Topics[tr.Name])
				}
			}
			if tc.check != nil {
				tc.check(t, before, s)
			}
		})
	}
}

var (
	ok                = int16(0)
	invalidRequest    = kerr.InvalidRequest.Code
	invalidConfig     = kerr.InvalidConfig.Code
	resourceNotFound  = kerr.ResourceNotFound.Code
	unknownTopicCode  = kerr.UnknownTopicOrPartition.Code
	invalidTopic      = kerr.InvalidTopicException.Code
	invalidPartitions = kerr.InvalidPartitions.Code
)

func TestApplyCreateMirror(t *testing.T) {
	create := func(name string) fsm.CreateMirror {
		return fsm.CreateMirror{Name: name, Config: fsmtest.BootstrapConfig(), NowMs: 5000}
	}
	withConfig := func(cfg map[string]string) fsm.CreateMirror {
		c := create("m3")
		c.Config = cfg
		return c
	}
	runApplyCases(t, []applyCase{
		{name: "creates", cmd: fsm.CreateMirror{Name: "m3", Config: fsmtest.BootstrapConfig(), SourceClusterID: "cid",
			Include: []string{"x.*", "y", "x.*"}, Exclude: []string{"z"}, NowMs: 5000},
			check: func(t *testing.T, _, s *fsm.State) {
				want := &fsm.Mirror{Name: "m3", Config: fsmtest.BootstrapConfig(), SourceClusterID: "cid",
					Include: []string{"x.*", "y"}, Exclude: []string{"z"}, CreatedMs: 5000, UpdatedMs: 5000}
				if !reflect.DeepEqual(s.Mirrors["m3"], want) {
					t.Fatalf("mirror = %+v, want %+v", s.Mirrors["m3"], want)
				}
			}},
		{name: "249 characters", cmd: create(strings.Repeat("n", 249))},
		{name: "empty name", cmd: create(""), code: invalidRequest, msg: "mirror name is empty"},
		{name: "250 characters", cmd: create(strings.Repeat("n", 250)), code: invalidRequest, msg: "250 characters long; the limit is 249"},
		{name: "illegal character", cmd: create("dr#1"), code: invalidRequest, msg: "illegal character '#'"},
		{name: "dot", cmd: create("."), code: invalidRequest, msg: "not allowed"},
		{name: "dot dot", cmd: create(".."), code: invalidRequest, msg: "not allowed"},
		{name: "ends with .stopped", cmd: create("dr.stopped"), code: invalidRequest, msg: `ends with ".stopped"`},
		{name: "ends with .paused", cmd: create("dr.paused"), code: invalidRequest, msg: `ends with ".paused"`},
		{name: "duplicate", cmd: create("m1"), code: invalidRequest, msg: "mirror m1 already exists"},
		{name: "no config", cmd: withConfig(nil), code: invalidConfig, msg: "needs bootstrap.servers"},
		{name: "blank bootstrap.servers", cmd: withConfig(map[string]string{fsm.BootstrapServersKey: " "}), code: invalidConfig, msg: "needs bootstrap.servers"},
		{name: "include as config", cmd: withConfig(map[string]string{fsm.BootstrapServersKey: "h:1", fsm.IncludeKey: "a"}), code: invalidConfig, msg: "mirror.topics.include cannot be set directly"},
		{name: "empty config key", cmd: withConfig(map[string]string{fsm.BootstrapServersKey: "h:1", "": "x"}), code: invalidConfig, msg: "key is empty"},
		{name: "empty include pattern", cmd: fsm.CreateMirror{Name: "m3", Config: fsmtest.BootstrapConfig(), Include: []string{"a", ""}},
			code: invalidRequest, msg: "include pattern #2 is empty"},
	})
}

func TestApplyDeleteMirror(t *testing.T) {
	stopAll := fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a", "p"}, Status: fsm.TopicStopped, NowMs: 9000}
	runApplyCases(t, []applyCase{
		{name: "unknown mirror", cmd: fsm.DeleteMirror{Name: "nope"}, code: resourceNotFound, msg: `mirror "nope" does not exist`},
		{name: "active and paused topics", cmd: fsm.DeleteMirror{Name: "m1"}, code: invalidRequest, msg: "2 topic(s) that are not stopped (a, p)"},
		{name: "active topic", cmd: fsm.DeleteMirror{Name: "m2"}, code: invalidRequest, msg: "not stopped (b)"},
		{name: "empty mirror", setup: []fsm.Command{fsm.CreateMirror{Name: "m3", Config: fsmtest.BootstrapConfig()}}, cmd: fsm.DeleteMirror{Name: "m3"},
			check: func(t *testing.T, _, s *fsm.State) {
				if s.Mirrors["m3"] != nil {
					t.Fatal("mirror m3 still exists")
				}
			}},
		{name: "only stopped topics", setup: []fsm.Command{stopAll}, cmd: fsm.DeleteMirror{Name: "m1"},
			check: func(t *testing.T, before, s *fsm.State) {
				if s.Mirrors["m1"] != nil || len(s.TopicsOf("m1")) != 0 {
					t.Fatalf("mirror m1 or its topics remain: %+v", s.TopicsOf("m1"))
				}
				if !reflect.DeepEqual(s.Topics["b"], before.Topics["b"]) || s.Mirrors["m2"] == nil {
					t.Fatal("mirror m2 was touched")
				}
			}},
	})
}

func TestApplyAlterMirrorConfig(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "sets and deletes", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{"sasl.mechanism": "PLAIN", fsm.BootstrapServersKey: "new:9092"},
			Delete: []string{"security.protocol", "absent"}, NowMs: 7000},
			check: func(t *testing.T, _, s *fsm.State) {
				want := map[string]string{fsm.BootstrapServersKey: "new:9092", "sasl.mechanism": "PLAIN"}
				if m := s.Mirrors["m1"]; !reflect.DeepEqual(m.Config, want) || m.UpdatedMs != 7000 || m.CreatedMs != 1000 {
					t.Fatalf("mirror = %+v, want config %v, updated 7000", m, want)
				}
			}},
		{name: "unknown mirror", cmd: fsm.AlterMirrorConfig{Name: "nope", Set: map[string]string{"a": "b"}}, code: resourceNotFound, msg: "does not exist"},
		{name: "delete bootstrap.servers", cmd: fsm.AlterMirrorConfig{Name: "m1", Delete: []string{fsm.BootstrapServersKey}}, code: invalidConfig, msg: "cannot be deleted"},
		{name: "blank bootstrap.servers", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{fsm.BootstrapServersKey: ""}}, code: invalidConfig, msg: "needs bootstrap.servers"},
		{name: "set and delete one key", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{"k": "v"}, Delete: []string{"k"}}, code: invalidRequest, msg: "both set and deleted"},
		{name: "exclude as config", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{fsm.ExcludeKey: "x"}}, code: invalidConfig, msg: "cannot be set directly"},
		{name: "delete empty key", cmd: fsm.AlterMirrorConfig{Name: "m1", Delete: []string{""}}, code: invalidConfig, msg: "key is empty"},
		{name: "offsets mode without topics", setup: []fsm.Command{fsm.CreateMirror{Name: "m3", Config: fsmtest.BootstrapConfig()}},
			cmd: fsm.AlterMirrorConfig{Name: "m3", Set: map[string]string{fsm.OffsetsKey: "translate"}}},
		{name: "offsets mode with topics", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{fsm.OffsetsKey: "translate"}},
			code: invalidConfig, msg: "cannot change once it has topics"},
		{name: "offsets mode deleted with topics", setup: []fsm.Command{
			fsm.CreateMirror{Name: "m3", Config: map[string]string{fsm.BootstrapServersKey: "src:9092", fsm.OffsetsKey: "translate"}},
			fsm.StartTopics{Mirror: "m3", Topics: []fsm.StartTopic{{Name: "t", Partitions: 1}}}},
			cmd: fsm.AlterMirrorConfig{Name: "m3", Delete: []string{fsm.OffsetsKey}}, code: invalidConfig, msg: "cannot change once it has topics"},
		{name: "offsets mode set to its value with topics", cmd: fsm.AlterMirrorConfig{Name: "m1", Set: map[string]string{fsm.OffsetsKey: "exact"}}},
	})
}

func TestApplySetSourceClusterID(t *testing.T) {
	set := fsm.SetSourceClusterID{Name: "m1", ClusterID: "cluster-a"}
	runApplyCases(t, []applyCase{
		{name: "sets", cmd: set, check: func(t *testing.T, _, s *fsm.State) {
			if got := s.Mirrors["m1"].SourceClusterID; got != "cluster-a" {
				t.Fatalf("source cluster ID = %q", got)
			}
		}},
		{name: "same again", setup: []fsm.Command{set}, cmd: set},
		{name: "changed", setup: []fsm.Command{set}, cmd: fsm.SetSourceClusterID{Name: "m1", ClusterID: "cluster-b"},
			code: kerr.InconsistentClusterID.Code, msg: "mirrors source cluster cluster-a, but its bootstrap servers now lead to cluster cluster-b"},
		{name: "empty", cmd: fsm.SetSourceClusterID{Name: "m1"}, code: invalidRequest, msg: "is empty"},
		{name: "unknown mirror", cmd: fsm.SetSourceClusterID{Name: "nope", ClusterID: "x"}, code: resourceNotFound, msg: "does not exist"},
	})
}

func TestApplyStartTopics(t *testing.T) {
	start := func(mirror string, topics ...fsm.StartTopic) fsm.StartTopics {
		return fsm.StartTopics{Mirror: mirror, Topics: topics, NowMs: 8000}
	}
	topic := func(name string) fsm.StartTopic {
		return fsm.StartTopic{Name: name, Partitions: 4, SourceTopicID: [16]byte{9}}
	}
	runApplyCases(t, []applyCase{
		{name: "new topic and patterns", cmd: fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{{Name: "c", Partitions: 4, SourceTopicID: [16]byte{9}, Unprotected: true}},
			AddInclude: []string{"a.*", "c.*", "c.*"}, AddExclude: []string{"^c-internal$"}, NowMs: 8000},
			topics: []int16{ok},
			check: func(t *testing.T, _, s *fsm.State) {
				want := &fsm.MirrorTopic{Name: "c", Mirror: "m1", Partitions: 4, SourceTopicID: [16]byte{9}, Status: fsm.TopicActive,
					StartedMs: 8000, UpdatedMs: 8000, Unprotected: true}
				if !reflect.DeepEqual(s.Topics["c"], want) {
					t.Fatalf("topic = %+v, want %+v", s.Topics["c"], want)
				}
				m := s.Mirrors["m1"]
				if !slices.Equal(m.Include, []string{"a.*", "c.*"}) || !slices.Equal(m.Exclude, []string{"^c-internal$"}) {
					t.Fatalf("patterns = %v / %v", m.Include, m.Exclude)
				}
			}},
		{name: "unknown mirror", cmd: start("nope", topic("c")), code: resourceNotFound, msg: "does not exist"},
		{name: "active in another mirror", cmd: start("m1", topic("b")), topics: []int16{invalidRequest},
			topicMsg: "topic b is already active in mirror m2"},
		{name: "paused in another mirror", setup: []fsm.Command{fsm.SetTopicStatus{Mirror: "m2", Topics: []string{"b"}, Status: fsm.TopicPaused}},
			cmd: start("m1", topic("b")), topics: []int16{invalidRequest}, topicMsg: "already paused in mirror m2"},
		{name: "active in this mirror", cmd: start("m1", topic("a")), topics: []int16{invalidRequest}, topicMsg: "already mirrored by mirror m1"},
		{name: "paused in this mirror", cmd: start("m1", topic("p")), topics: []int16{invalidRequest}, topicMsg: "resume it"},
		{name: "restart stopped topic", cmd: start("m1", topic("s")), topics: []int16{ok},
			check: func(t *testing.T, before, s *fsm.State) {
				got := s.Topics["s"]
				if got.Status != fsm.TopicActive || got.Partitions != 4 || got.StartedMs != 8000 {
					t.Fatalf("topic s = %+v, want active with 4 partitions started at 8000", got)
				}
				if !reflect.DeepEqual(got.OwnedACLs, before.Topics["s"].OwnedACLs) {
					t.Fatalf("owned ACLs lost on restart: %+v", got.OwnedACLs)
				}
			}},
		{name: "stopped topic moves to another mirror", cmd: start("m2", topic("s")), topics: []int16{ok},
			check: func(t *testing.T, _, s *fsm.State) {
				if got := s.Topics["s"]; got.Mirror != "m2" || got.Status != fsm.TopicActive {
					t.Fatalf("topic s = %+v, want active in m2", got)
				}
			}},
		{name: "bad topic name", cmd: start("m1", topic("bad name")), topics: []int16{invalidTopic}, topicMsg: "illegal character ' '"},
		{name: "zero partitions", cmd: start("m1", fsm.StartTopic{Name: "c"}), topics: []int16{invalidPartitions}, topicMsg: "partition count 0"},
		{name: "listed twice", cmd: start("m1", topic("c"), topic("d"), topic("c")), topics: []int16{invalidRequest, ok, invalidRequest},
			topicMsg: "listed 2 times",
			check: func(t *testing.T, _, s *fsm.State) {
				if s.Topics["c"] != nil || s.Topics["d"] == nil {
					t.Fatalf("c = %+v (want absent), d = %+v (want present)", s.Topics["c"], s.Topics["d"])
				}
			}},
		{name: "one bad one good", cmd: start("m1", topic("b"), topic("c")), topics: []int16{invalidRequest, ok},
			check: func(t *testing.T, _, s *fsm.State) {
				if s.Topics["c"] == nil || s.Topics["c"].Mirror != "m1" {
					t.Fatal("topic c not started")
				}
			}},
		{name: "empty pattern", cmd: fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{topic("c")}, AddExclude: []string{""}},
			code: invalidRequest, msg: "exclude pattern #1 is empty"},
	})
}

func TestApplySetTopicStatus(t *testing.T) {
	set := func(status fsm.TopicStatus, topics ...string) fsm.SetTopicStatus {
		return fsm.SetTopicStatus{Mirror: "m1", Topics: topics, Status: status, NowMs: 9000}
	}
	statusIs := func(topic string, want fsm.TopicStatus) func(*testing.T, *fsm.State, *fsm.State) {
		return func(t *testing.T, _, s *fsm.State) {
			t.Helper()
			if got := s.Topics[topic]; got.Status != want || got.UpdatedMs != 9000 {
				t.Fatalf("topic %s = %+v, want %s updated at 9000", topic, got, want)
			}
		}
	}
	runApplyCases(t, []applyCase{
		{name: "stop active", cmd: set(fsm.TopicStopped, "a"), topics: []int16{ok}, check: statusIs("a", fsm.TopicStopped)},
		{name: "stop paused", cmd: set(fsm.TopicStopped, "p"), topics: []int16{ok}, check: statusIs("p", fsm.TopicStopped)},
		{name: "stop stopped", cmd: set(fsm.TopicStopped, "s"), topics: []int16{invalidRequest}, topicMsg: "already stopped"},
		{name: "stop unknown topic", cmd: set(fsm.TopicStopped, "nope"), topics: []int16{unknownTopicCode}, topicMsg: "topic nope is not a mirror topic"},
		{name: "stop topic of another mirror", cmd: set(fsm.TopicStopped, "b"), topics: []int16{invalidRequest}, topicMsg: "belongs to mirror m2"},
		{name: "pause active", cmd: set(fsm.TopicPaused, "a"), topics: []int16{ok}, check: statusIs("a", fsm.TopicPaused)},
		{name: "pause paused", cmd: set(fsm.TopicPaused, "p"), topics: []int16{invalidRequest}, topicMsg: "already paused"},
		{name: "pause stopped", cmd: set(fsm.TopicPaused, "s"), topics: []int16{invalidRequest}, topicMsg: "stopped and cannot be paused"},
		{name: "resume paused", cmd: set(fsm.TopicActive, "p"), topics: []int16{ok}, check: statusIs("p", fsm.TopicActive)},
		{name: "resume active", cmd: set(fsm.TopicActive, "a"), topics: []int16{invalidRequest}, topicMsg: "not paused (it is active)"},
		{name: "resume stopped", cmd: set(fsm.TopicActive, "s"), topics: []int16{invalidRequest}, topicMsg: "stopped and cannot be resumed"},
		{name: "failover stops active and paused, reports stopped", cmd: set(fsm.TopicStopped, "a", "p", "s"),
			topics: []int16{ok, ok, invalidRequest},
			check: func(t *testing.T, b, s *fsm.State) {
				statusIs("a", fsm.TopicStopped)(t, b, s)
				statusIs("p", fsm.TopicStopped)(t, b, s)
			}},
		{name: "listed twice", cmd: set(fsm.TopicPaused, "a", "a"), topics: []int16{invalidRequest, invalidRequest}, topicMsg: "listed 2 times"},
		{name: "invalid status", cmd: set(fsm.TopicStatus(0), "a"), code: invalidRequest, msg: "0 is not a topic status"},
		{name: "unknown mirror", cmd: fsm.SetTopicStatus{Mirror: "nope", Topics: []string{"a"}, Status: fsm.TopicStopped}, code: resourceNotFound, msg: "does not exist"},
		{name: "patterns", cmd: fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a"}, Status: fsm.TopicStopped, NowMs: 9000,
			AddExclude: []string{"^a$", "^a$"}, RemoveInclude: []string{"a.*", "not-there"}},
			topics: []int16{ok},
			check: func(t *testing.T, _, s *fsm.State) {
				m := s.Mirrors["m1"]
				if len(m.Include) != 0 || !slices.Equal(m.Exclude, []string{"^a$"}) {
					t.Fatalf("include %v exclude %v, want [] and [^a$]", m.Include, m.Exclude)
				}
			}},
		{name: "empty exclude pattern", cmd: fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a"}, Status: fsm.TopicStopped, AddExclude: []string{" "}},
			code: invalidRequest, msg: "exclude pattern #1 is empty"},
	})
}

func TestApplyTopicAttributes(t *testing.T) {
	acls := []fsm.ACL{{ResourceType: 2, ResourceName: "a", PatternType: 3, Principal: "User:*", Host: "*", Operation: 4, Permission: 2}}
	runApplyCases(t, []applyCase{
		{name: "record ACLs", cmd: fsm.RecordACLs{Topic: "a", ACLs: acls}, check: func(t *testing.T, _, s *fsm.State) {
			if !reflect.DeepEqual(s.Topics["a"].OwnedACLs, acls) {
				t.Fatalf("owned ACLs = %+v", s.Topics["a"].OwnedACLs)
			}
		}},
		{name: "clear ACLs", cmd: fsm.RecordACLs{Topic: "s"}, check: func(t *testing.T, _, s *fsm.State) {
			if len(s.Topics["s"].OwnedACLs) != 0 {
				t.Fatalf("owned ACLs = %+v", s.Topics["s"].OwnedACLs)
			}
		}},
		{name: "ACLs of unknown topic", cmd: fsm.RecordACLs{Topic: "nope", ACLs: acls}, code: unknownTopicCode, msg: "topic nope is not a mirror topic"},
		{name: "ACL without principal", cmd: fsm.RecordACLs{Topic: "a", ACLs: []fsm.ACL{{ResourceName: "a"}}}, code: invalidRequest, msg: "ACL #1"},
		{name: "set unprotected", cmd: fsm.SetUnprotected{Topic: "a", Unprotected: true}, check: func(t *testing.T, _, s *fsm.State) {
			if !s.Topics["a"].Unprotected {
				t.Fatal("topic a not unprotected")
			}
		}},
		{name: "unprotected unknown topic", cmd: fsm.SetUnprotected{Topic: "nope"}, code: unknownTopicCode, msg: "not a mirror topic"},
	})
}

func TestApplyRegisterSidecar(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "new", cmd: fsm.RegisterSidecar{ID: 2, RaftAddr: "h2:9192", AdminAddr: "h2:9191", Version: "v"}, check: func(t *testing.T, _, s *fsm.State) {
			want := &fsm.SidecarInfo{ID: 2, RaftAddr: "h2:9192", AdminAddr: "h2:9191", Version: "v"}
			if !reflect.DeepEqual(s.Sidecars[2], want) || len(s.Sidecars) != 2 {
				t.Fatalf("sidecars = %+v", s.Sidecars)
			}
		}},
		{name: "update", cmd: fsm.RegisterSidecar{ID: 1, RaftAddr: "h1:9192", AdminAddr: "h1b:9191", Version: "v2"}, check: func(t *testing.T, _, s *fsm.State) {
			if got := s.Sidecars[1]; got.AdminAddr != "h1b:9191" || got.Version != "v2" || len(s.Sidecars) != 1 {
				t.Fatalf("sidecars = %+v", s.Sidecars)
			}
		}},
		{name: "negative ID", cmd: fsm.RegisterSidecar{ID: -1, RaftAddr: "x:1"}, code: invalidRequest, msg: "negative"},
		{name: "no raft address", cmd: fsm.RegisterSidecar{ID: 2}, code: invalidRequest, msg: "no raft address"},
	})
}

func TestStateClone(t *testing.T) {
	s := fsmtest.State(t)
	c := s.Clone()
	if !reflect.DeepEqual(s, c) {
		t.Fatal("clone differs")
	}
	c.Mirrors["m1"].Config["x"] = "y"
	c.Mirrors["m1"].Include[0] = "changed"
	c.Topics["s"].OwnedACLs[0].Principal = "User:changed"
	c.Sidecars[1].AdminAddr = "changed"
	if reflect.DeepEqual(s, c) {
		t.Fatal("clone shares memory with the original")
	}
}

func TestTopicStatus(t *testing.T) {
	for _, tc := range []struct {
		status fsm.TopicStatus
		str    string
		value  string
	}{
		{fsm.TopicActive, "active", "dr"},
		{fsm.TopicPaused, "paused", "dr.paused"},
		{fsm.TopicStopped, "stopped", "dr.stopped"},
	} {
		t.Run(tc.str, func(t *testing.T) {
			if tc.status.String() != tc.str || tc.status.MirrorNameValue("dr") != tc.value {
				t.Fatalf("String %q MirrorNameValue %q", tc.status.String(), tc.status.MirrorNameValue("dr"))
			}
			if m, st := fsm.ParseMirrorNameValue(tc.value); m != "dr" || st != tc.status {
				t.Fatalf("ParseMirrorNameValue(%q) = %q, %s", tc.value, m, st)
			}
		})
	}
}

func TestMembershipCommands(t *testing.T) {
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsm.RemoveSidecar{ID: 1})
	if s.Sidecars[1] != nil {
		t.Fatal("RemoveSidecar kept the sidecar")
	}
	fsmtest.MustApply(t, s, fsm.RemoveSidecar{ID: 1}) // idempotent
	if res := fsm.ApplyTo(s, fsmtest.MustEncode(t, fsm.RemoveSidecar{ID: -1})); res.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("RemoveSidecar(-1) = %+v", res)
	}
}

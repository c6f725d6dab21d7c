package fsm_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

func TestParseThrottledReplicas(t *testing.T) {
	for _, tc := range []struct {
		in   string
		all  bool
		want []fsm.Replica
		err  string
	}{
		{in: "[0:4]", want: []fsm.Replica{{0, 4}}},
		{in: "0:4", want: []fsm.Replica{{0, 4}}},
		{in: " 2:5 , 0:4,2:5,0:3", want: []fsm.Replica{{0, 3}, {0, 4}, {2, 5}}},
		{in: "*", all: true},
		{in: "[*]", all: true},
		{in: "", err: `entry ""`},
		{in: "[0:4", err: "unclosed"},
		{in: "0", err: `entry "0"`},
		{in: "0:-1", err: `entry "0:-1"`},
		{in: "a:4", err: `entry "a:4"`},
		{in: "0:4,", err: `entry ""`},
	} {
		all, got, err := fsm.ParseThrottledReplicas(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || all != tc.all || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q = %v %v %v, want %v %v", tc.in, all, got, err, tc.all, tc.want)
		}
	}
	for _, v := range []string{"0", "100000000", " 7 "} {
		if _, err := fsm.ParseThrottledRate(v); err != nil {
			t.Errorf("rate %q: %v", v, err)
		}
	}
	for _, v := range []string{"-1", "10MB", "", "1.5"} {
		if _, err := fsm.ParseThrottledRate(v); err == nil {
			t.Errorf("rate %q accepted", v)
		}
	}
}

func TestApplyThrottleConfigs(t *testing.T) {
	rate := func(b int32, v string) fsm.AlterBrokerConfig {
		return fsm.AlterBrokerConfig{Broker: b, Set: map[string]string{fsm.ThrottledRateKey: v}}
	}
	replicas := func(topic, v string) fsm.AlterTopicConfig {
		return fsm.AlterTopicConfig{Topic: topic, Set: map[string]string{fsm.ThrottledReplicasKey: v}}
	}
	runApplyCases(t, []applyCase{
		{name: "set a broker's rate", cmd: rate(4, "100000000"), check: func(t *testing.T, _, s *fsm.State) {
			if n, ok := s.ThrottledRate(4); !ok || n != 100000000 {
				t.Fatalf("rate of broker 4 = %d %v", n, ok)
			}
			if _, ok := s.ThrottledRate(5); ok {
				t.Fatal("broker 5 has a rate")
			}
		}},
		{name: "change it", setup: []fsm.Command{rate(4, "100000000")}, cmd: rate(4, "1000000"), check: func(t *testing.T, _, s *fsm.State) {
			if n, _ := s.ThrottledRate(4); n != 1000000 {
				t.Fatalf("rate = %d", n)
			}
		}},
		{name: "delete it", setup: []fsm.Command{rate(4, "1000")},
			cmd: fsm.AlterBrokerConfig{Broker: 4, Delete: []string{fsm.ThrottledRateKey}}, check: func(t *testing.T, _, s *fsm.State) {
				if s.BrokerConfigs != nil {
					t.Fatalf("broker configs left: %v", s.BrokerConfigs)
				}
			}},
		{name: "delete of an unset rate", cmd: fsm.AlterBrokerConfig{Broker: 4, Delete: []string{fsm.ThrottledRateKey}}},
		{name: "negative rate", cmd: rate(4, "-5"), code: invalidConfig, msg: "broker 4: mirror.replication.throttled.rate=\"-5\" is not a rate"},
		{name: "other broker key", cmd: fsm.AlterBrokerConfig{Broker: 4, Set: map[string]string{"log.retention.ms": "1"}},
			code: invalidConfig, msg: "log.retention.ms is not kept by the sidecars"},
		{name: "delete of another key", cmd: fsm.AlterBrokerConfig{Broker: 4, Delete: []string{"num.io.threads"}},
			code: invalidConfig, msg: "num.io.threads is not kept"},
		{name: "negative broker", cmd: rate(-1, "5"), code: invalidRequest, msg: "negative"},
		{name: "nothing", cmd: fsm.AlterBrokerConfig{Broker: 4}, code: invalidConfig, msg: "no config key"},
		{name: "set and delete", cmd: fsm.AlterBrokerConfig{Broker: 4, Set: map[string]string{fsm.ThrottledRateKey: "5"}, Delete: []string{fsm.ThrottledRateKey}},
			code: invalidConfig, msg: "both set and deleted"},

		{name: "set a topic's replicas", cmd: replicas("my-topic", "[0:4]"), check: func(t *testing.T, _, s *fsm.State) {
			if v := s.TopicConfigs["my-topic"][fsm.ThrottledReplicasKey]; v != "[0:4]" {
				t.Fatalf("replicas = %q", v)
			}
		}},
		{name: "delete them", setup: []fsm.Command{replicas("my-topic", "*")},
			cmd: fsm.AlterTopicConfig{Topic: "my-topic", Delete: []string{fsm.ThrottledReplicasKey}}, check: func(t *testing.T, _, s *fsm.State) {
				if s.TopicConfigs != nil {
					t.Fatalf("topic configs left: %v", s.TopicConfigs)
				}
			}},
		{name: "bad replicas", cmd: replicas("my-topic", "0-4"), code: invalidConfig, msg: `entry "0-4" is not partition:broker`},
		{name: "bad topic name", cmd: replicas("bad name", "*"), code: invalidTopic, msg: "illegal character"},
		{name: "other topic key", cmd: fsm.AlterTopicConfig{Topic: "my-topic", Set: map[string]string{"retention.ms": "1"}},
			code: invalidConfig, msg: "retention.ms is not kept"},
	})
}

// TestSnapshotThrottleConfigs checks that a snapshot keeps the broker and
// topic configs, that a state without them writes no field, and that a
// snapshot with a bad value is refused.
func TestSnapshotThrottleConfigs(t *testing.T) {
	src := fixtureFSM(t)
	n := uint64(len(fsmtest.Commands()))
	for i, c := range []fsm.Command{
		fsm.AlterBrokerConfig{Broker: 4, Set: map[string]string{fsm.ThrottledRateKey: "1000000"}},
		fsm.AlterTopicConfig{Topic: "my-topic", Set: map[string]string{fsm.ThrottledReplicasKey: "0:4,1:5"}},
	} {
		if res := src.Apply(n+uint64(i)+1, fsmtest.MustEncode(t, c)); res.ErrorCode != 0 {
			t.Fatal(res.ErrorMessage)
		}
	}
	data := snapshotBytes(t, src)
	dst := fsm.New(nil)
	if _, err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got := readState(dst)
	if !reflect.DeepEqual(got, readState(src)) {
		t.Fatalf("restored %+v, want %+v", got, readState(src))
	}
	if r, ok := got.ThrottledRate(4); !ok || r != 1000000 || got.TopicConfigs["my-topic"][fsm.ThrottledReplicasKey] != "0:4,1:5" {
		t.Fatalf("restored broker configs %v, topic configs %v", got.BrokerConfigs, got.TopicConfigs)
	}
	if c := got.Clone(); !reflect.DeepEqual(c, got) {
		t.Fatalf("clone differs: %+v", c)
	}

	plain := string(snapshotBytes(t, fixtureFSM(t)))
	if strings.Contains(plain, "brokerConfigs") || strings.Contains(plain, "topicConfigs") {
		t.Fatalf("a snapshot without configs names the fields: %s", plain)
	}

	bad := strings.Replace(string(data), `"1000000"`, `"fast"`, 1)
	if bad == string(data) {
		t.Fatalf("test setup: the snapshot does not hold the rate: %s", data)
	}
	if _, err := dst.Restore(strings.NewReader(bad)); !errors.Is(err, fsm.ErrInvalidSnapshot) || !strings.Contains(err.Error(), "not a rate") {
		t.Fatalf("Restore of a snapshot with a bad rate = %v, want ErrInvalidSnapshot", err)
	}
}

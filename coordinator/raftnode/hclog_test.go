package raftnode

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestHCLogAdapter(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	h := newHCLog(zap.New(core).Named("raft"))

	h.Trace("trace is dropped")
	h.Debug("debug line", "peer", "raft-2", "error", errors.New("boom"))
	h.With("term", 3).Named("snapshots").Info("info line", "detail", hclog.Fmt("%d%%", 50), "odd")
	h.Named("x").ResetNamed("transport").Warn("warn line")
	h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERROR] from the std logger")

	want := []struct {
		level  zapcore.Level
		name   string
		msg    string
		fields map[string]any
	}{
		{zap.DebugLevel, "raft", "debug line", map[string]any{"peer": "raft-2", "error": "boom"}},
		{zap.InfoLevel, "raft.snapshots", "info line", map[string]any{"term": int64(3), "detail": "50%", "extra-value-at-end": "odd"}},
		{zap.WarnLevel, "raft.transport", "warn line", map[string]any{}},
		{zap.ErrorLevel, "raft", "from the std logger", map[string]any{}},
	}
	got := logs.AllUntimed()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if e.Level != w.level || e.LoggerName != w.name || e.Message != w.msg {
			t.Errorf("entry %d = %s %q %q, want %s %q %q", i, e.Level, e.LoggerName, e.Message, w.level, w.name, w.msg)
		}
		fields := e.ContextMap()
		for k, v := range w.fields {
			if fields[k] != v {
				t.Errorf("entry %d field %s = %#v, want %#v (all: %v)", i, k, fields[k], v, fields)
			}
		}
	}
	if h.IsTrace() || !h.IsDebug() || h.GetLevel() != hclog.Debug {
		t.Errorf("IsTrace %v IsDebug %v GetLevel %v", h.IsTrace(), h.IsDebug(), h.GetLevel())
	}
}

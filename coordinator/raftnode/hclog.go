package raftnode

import (
	"bytes"
	"fmt"
	"io"
	"log"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// hclogAdapter lets raft log through zap. raft's levels map to zap's; its
// Trace lines (per-RPC chatter) are dropped. Key-value arguments become
// zap fields; raft's keys are already kebab-case. SetLevel is ignored: the
// zap core decides what is written.
type hclogAdapter struct {
	root    *zap.Logger // before Named, for ResetNamed
	log     *zap.Logger
	name    string
	implied []any
}

func newHCLog(l *zap.Logger) hclog.Logger {
	return &hclogAdapter{root: l, log: l}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	var zl zapcore.Level
	switch level {
	case hclog.Debug:
		zl = zap.DebugLevel
	case hclog.Info, hclog.DefaultLevel:
		zl = zap.InfoLevel
	case hclog.Warn:
		zl = zap.WarnLevel
	case hclog.Error:
		zl = zap.ErrorLevel
	default: // Trace, NoLevel, Off
		return
	}
	if ce := h.log.Check(zl, msg); ce != nil {
		ce.Write(hclogFields(args)...)
	}
}

func hclogFields(args []any) []zap.Field {
	fs := make([]zap.Field, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			fs = append(fs, zap.Any("extra-value-at-end", args[i]))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		switch v := args[i+1].(type) {
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					fs = append(fs, zap.String(key, fmt.Sprintf(f, v[1:]...)))
					continue
				}
			}
			fs = append(fs, zap.String(key, fmt.Sprint(v...)))
		case error:
			fs = append(fs, zap.NamedError(key, v))
		default:
			fs = append(fs, zap.Any(key, v))
		}
	}
	return fs
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) IsTrace() bool { return false }
func (h *hclogAdapter) IsDebug() bool { return h.log.Core().Enabled(zap.DebugLevel) }
func (h *hclogAdapter) IsInfo() bool  { return h.log.Core().Enabled(zap.InfoLevel) }
func (h *hclogAdapter) IsWarn() bool  { return h.log.Core().Enabled(zap.WarnLevel) }
func (h *hclogAdapter) IsError() bool { return h.log.Core().Enabled(zap.ErrorLevel) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.implied }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.log = h.log.With(hclogFields(args)...)
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	c.log = h.log.Named(name)
	if h.name != "" {
		c.name = h.name + "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.log = h.root.Named(name).With(hclogFields(h.implied)...)
	c.name = name
	return &c
}

func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	case h.IsError():
		return hclog.Error
	default:
		return hclog.Off
	}
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &hclogWriter{h: h, level: hclog.Info}
	if opts != nil {
		w.infer = opts.InferLevels || opts.InferLevelsWithTimestamp
		if opts.ForceLevel != hclog.NoLevel {
			w.level = opts.ForceLevel
		}
	}
	return w
}

// hclogWriter logs each line written to it, at a fixed level or at the
// level of its "[ERROR]"-style prefix.
type hclogWriter struct {
	h     *hclogAdapter
	level hclog.Level
	infer bool
}

var levelPrefixes = []struct {
	prefix string
	level  hclog.Level
}{
	{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
	{"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error},
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		level := w.level
		if w.infer {
			if i := bytes.IndexByte(line, '['); i >= 0 {
				for _, lp := range levelPrefixes {
					if bytes.HasPrefix(line[i:], []byte(lp.prefix)) {
						level = lp.level
						line = bytes.TrimSpace(line[i+len(lp.prefix):])
						break
					}
				}
			}
		}
		w.h.Log(level, string(line))
	}
	return len(p), nil
}

package sidecar

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the daemon's logger from log.format and log.level,
// writing to stderr: "json" uses zap's production encoder (with ISO 8601
// times), "console" the development-style console encoder for humans.
// Sidecar names its own logger "sidecar"; other components name theirs.
func NewLogger(cfg Config) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, configErr(KeyLogLevel, "%q is not supported (expected %s)", cfg.LogLevel, orList(logLevels))
	}
	var zc zap.Config
	switch cfg.LogFormat {
	case "json":
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	case "console":
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
	default:
		return nil, configErr(KeyLogFormat, "%q is not supported (expected %s)", cfg.LogFormat, orList(logFormats))
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Sampling = nil           // every log line of a daemon this quiet is worth keeping
	zc.DisableStacktrace = true // errors say what went wrong; stacks are noise to operators
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	log, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("sidecar: building the logger: %w", err)
	}
	return log, nil
}

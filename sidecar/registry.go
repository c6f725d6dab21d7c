package sidecar

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/statestore"
)

// Registry backoff: the first retry after registryBackoffMin, doubling up
// to registryBackoffMax.
const (
	registryBackoffMin = time.Second
	registryBackoffMax = 30 * time.Second
)

// registerSidecar writes this sidecar's record to the sidecar registry in
// __mirror_state (statestore.RegisterSidecar), so that kafka-cluster-mirrors
// pointed at a broker finds the admin address and how to connect to it. It runs once per start (the
// only time the address can change), retrying with backoff until the write
// succeeds or ctx ends: the destination cluster may not be reachable yet.
func registerSidecar(ctx context.Context, store *statestore.Store, sc statestore.Sidecar, log *zap.Logger) {
	backoff := registryBackoffMin
	for {
		err := store.RegisterSidecar(ctx, sc)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Warn("cannot register this sidecar in the sidecar registry of "+statestore.TopicName+"; retrying",
			zap.Duration("backoff", backoff), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, registryBackoffMax)
	}
}

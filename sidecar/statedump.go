package sidecar

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/statestore"
)

// StateTopic is the name of the topic DumpState prints.
const StateTopic = statestore.TopicName

// DumpState prints every record of __mirror_state as a JSON line to w,
// reading it through the local broker with the sidecar's destination client
// settings.
func DumpState(ctx context.Context, cfg Config, w io.Writer) error {
	opts, err := cfg.Destination.KgoOpts() // seeded with local.bootstrap.servers
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ClientID("sidemirror-state-dump"), kgo.RetryTimeout(30*time.Second))...)
	if err != nil {
		return fmt.Errorf("sidecar: destination client: %w", err)
	}
	defer cl.Close()
	return statestore.Dump(ctx, cl, w)
}

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// ConfigSyncExcludeKey is mirror.config.sync.exclude: comma-separated topic
// config names the metadata sync never copies, beyond the built-in ones
// (topicConfigsNotCopied) and the forced values of DESIGN D3.
const ConfigSyncExcludeKey = "mirror.config.sync.exclude"

// forcedTopicConfigs are the configs MirrorTopicConfigs forces whatever the
// source says; the sync never changes them to a source value.
var forcedTopicConfigs = map[string]bool{
	"compression.type":                true,
	"message.timestamp.type":          true,
	"message.timestamp.before.max.ms": true,
	"message.timestamp.after.max.ms":  true,
	"max.message.bytes":               true,
}

// configChanges returns the alterations that bring a destination topic's
// dynamic configs (current) in line with the source's overrides: the
// source's non-default configs less the ones never copied and the excluded
// ones, plus the forced values of DESIGN D3. Destination-only configs that
// the sync would copy from the source are deleted (removed on the source);
// excluded, never-copied and forced ones are left alone.
func configChanges(sourceOverrides map[string]string, sourceMaxMessageBytes int64, current map[string]string, exclude map[string]bool) []kadm.AlterConfig {
	overrides := maps.Clone(sourceOverrides)
	for k := range overrides {
		if exclude[k] {
			delete(overrides, k)
		}
	}
	want := MirrorTopicConfigs(overrides, sourceMaxMessageBytes)
	var out []kadm.AlterConfig
	for _, k := range sortedKeys(want) {
		if v, ok := current[k]; !ok || v != *want[k] {
			out = append(out, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: want[k]})
		}
	}
	for _, k := range sortedKeys(current) {
		if _, ok := want[k]; ok || exclude[k] || topicConfigsNotCopied[k] || forcedTopicConfigs[k] {
			continue
		}
		out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return out
}

// configExcludes returns the config names a mirror never syncs beyond the
// built-in ones.
func configExcludes(m *fsm.Mirror) map[string]bool {
	out := map[string]bool{}
	for _, k := range SplitPatterns(mirrorSetting(m, ConfigSyncExcludeKey)) {
		out[k] = true
	}
	return out
}

// syncConfigs copies source topic configs to the destination topics with
// IncrementalAlterConfigs.
func (r *metaSyncRound) syncConfigs(ctx context.Context) (int, error) {
	exclude := configExcludes(r.mirror)
	items := 0
	var errs []error
	for _, name := range sortedKeys(r.topics) {
		overrides, maxBytes, err := sourceTopicConfigs(ctx, r.src, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		current, _, err := sourceTopicConfigs(ctx, r.ms.destCl, name) // same request, destination side
		if err != nil {
			errs = append(errs, fmt.Errorf("destination: %w", err))
			continue
		}
		changes := configChanges(overrides, maxBytes, current, exclude)
		if len(changes) == 0 {
			continue
		}
		resp, err := r.dstAdm.AlterTopicConfigs(ctx, changes, name)
		if err == nil {
			for _, rr := range resp {
				if rr.Err != nil {
					err = fmt.Errorf("%w: %s", rr.Err, rr.ErrMessage)
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("alter configs of destination topic %s: %w", name, err))
			continue
		}
		names := make([]string, len(changes))
		for i, c := range changes {
			names[i] = c.Name
		}
		r.log.Info("synced topic configs", zap.String("topic", name), zap.Strings("configs", names))
		items += len(changes)
	}
	return items, errors.Join(errs...)
}

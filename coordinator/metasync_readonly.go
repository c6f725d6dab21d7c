package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// The read-only ACL re-check (DESIGN D4), the last step of every metadata
// sync of a mirror. Kafka applies allow.everyone.if.no.acl.found only to
// resources without any ACL, so when a topic is started on a cluster that
// allows everyone and no other ACL applies to it, the start adds an ALLOW
// ALL for User:* beside the DENY WRITE (Destination.Protect), or the DENY
// WRITE alone would lock every consumer out. That ALLOW ALL must not
// outlive the situation it was made for: an ACL that appears later (an
// operator's, or one the ACL sync copied from the source, such as "ALLOW
// READ for User:alice", meaning "only alice may read") would be overridden
// by it. So, for every active or paused topic (both are read-only) whose
// DENY WRITE the sidecars own, the re-check lists the ACLs that apply to the
// topic (literal, prefixed and wildcard) and:
//
//   - another ACL applies: the sidecars' ALLOW ALL is deleted, so the topic
//     is authorized as if the sidecars had added nothing but the DENY WRITE;
//   - no other ACL applies any more and the brokers allow everyone: the
//     ALLOW ALL is added back (or created again when it went missing),
//     because without it the DENY WRITE alone denies reading to everyone,
//     which is what it was added for in the first place;
//   - the brokers do not (any more) allow everyone: the ALLOW ALL goes, as
//     Protect would not have added it.
//
// A DENY WRITE the sidecars own that is missing on the destination (deleted
// by hand) is created again first: it is what keeps the topic read-only.
//
// Only ACLs the sidecars own (MirrorTopic.OwnedACLs) are deleted, and the
// new owned set is recorded with RecordACLs. An ALLOW ALL for User:* that
// someone else created is left alone. Stopped topics own nothing. The step
// needs only the destination, so it runs even when the source is
// unreachable or its cluster ID changed.

// stepReadOnly is the metrics step label of the re-check.
const stepReadOnly = "readonly_acls"

// allowAllChange is what the re-check does with a topic's ALLOW ALL.
type allowAllChange int

const (
	allowAllKeep allowAllChange = iota
	allowAllAdd                 // create it and own it
	allowAllDrop                // delete it and no longer own it
)

// decideAllowAll decides on the ALLOW ALL for User:* of a read-only topic
// from the ACLs the sidecars own for it and the ACLs that apply to it on
// the destination (topicACLs). allowsEveryone is asked only when no other
// ACL applies. The reason is for the log.
func decideAllowAll(topic string, owned, existing []fsm.ACL, allowsEveryone func() (bool, error)) (allowAllChange, string, error) {
	deny, allow := readOnlyACLs(topic)
	if !slices.Contains(owned, deny) {
		// Not protected by the sidecars (yet: a start records the ACLs
		// it created after the topic is active).
		return allowAllKeep, "", nil
	}
	ownsAllow, hasAllow := slices.Contains(owned, allow), slices.Contains(existing, allow)
	if others := otherACLs(topic, existing); len(others) > 0 {
		if !ownsAllow {
			return allowAllKeep, "", nil
		}
		return allowAllDrop, fmt.Sprintf("%d other ACL(s) apply to the topic, e.g. %s: they decide who may read it, "+
			"and the ALLOW ALL for User:* would override them", len(others), aclString(others[0])), nil
	}
	everyoneAllowed, err := allowsEveryone()
	if err != nil {
		return allowAllKeep, "", err
	}
	switch {
	case everyoneAllowed && !ownsAllow && !hasAllow:
		return allowAllAdd, "no other ACL applies to the topic any more: without the ALLOW ALL for User:* the DENY WRITE alone " +
			"would deny reading to everyone on a cluster that allows everyone on resources without ACLs", nil
	case everyoneAllowed && ownsAllow && !hasAllow:
		return allowAllAdd, "the sidecars' ALLOW ALL for User:* is missing on the destination, and no other ACL applies to the topic", nil
	case !everyoneAllowed && ownsAllow:
		return allowAllDrop, "the destination does not allow everyone on resources without ACLs " +
			"(readonly.allow.everyone.if.no.acl.found), so the topic gets no ALLOW ALL for User:*", nil
	}
	return allowAllKeep, "", nil
}

// aclString formats an ACL for logs, e.g.
// "TOPIC LITERAL orders: User:alice@* READ ALLOW".
func aclString(a fsm.ACL) string {
	return fmt.Sprintf("%s %s %s: %s@%s %s %s", kmsg.ACLResourceType(a.ResourceType), kmsg.ACLResourcePatternType(a.PatternType),
		a.ResourceName, a.Principal, a.Host, kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission))
}

// readOnlyRechecked reports whether the re-check looks at t: an active or
// paused topic whose read-only ACLs the sidecars own.
func readOnlyRechecked(t *fsm.MirrorTopic) bool {
	if t == nil || t.Unprotected || (t.Status != fsm.TopicActive && t.Status != fsm.TopicPaused) {
		return false
	}
	deny, _ := readOnlyACLs(t.Name)
	return slices.Contains(t.OwnedACLs, deny)
}

// readOnlyCheck runs the re-check for the topics of one mirror. state and
// apply are the controller's (Service.state and Service.apply); tests give
// their own.
type readOnlyCheck struct {
	dest  *Destination
	log   *zap.Logger
	state func() *fsm.State
	apply func(context.Context, fsm.Command) error
}

// recheckReadOnly runs the re-check for a mirror as a metadata sync step,
// with its own timeout: it needs only the destination, so the source steps
// before it neither gate it nor use up its time.
func (ms *metaSync) recheckReadOnly(ctx context.Context, log *zap.Logger, metrics *metaSyncMetrics, mirror string) {
	if ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ms.timeout)
	defer cancel()
	c := readOnlyCheck{dest: ms.dest, log: log, state: ms.ctl.State, apply: func(ctx context.Context, cmd fsm.Command) error {
		_, err := applyChecked(ctx, ms.ctl, cmd)
		return err
	}}
	items, err := c.run(ctx, mirror)
	metrics.record(mirror, stepReadOnly, items, err, ms.now())
	if err != nil && ctx.Err() == nil {
		log.Warn("metadata sync step failed", zap.String("step", stepReadOnly), zap.Error(err))
	}
}

// run re-checks every read-only topic of mirror and returns how many ACLs
// it created or deleted.
func (c readOnlyCheck) run(ctx context.Context, mirror string) (int, error) {
	var everyone *bool
	allowsEveryone := func() (bool, error) { // asked once per round at most
		if everyone == nil {
			v, err := c.dest.allowsEveryone(ctx)
			if err != nil {
				return false, err
			}
			everyone = &v
		}
		return *everyone, nil
	}
	items := 0
	var errs []error
	for _, t := range c.state().TopicsOf(mirror) {
		if !readOnlyRechecked(t) {
			continue
		}
		changed, err := c.topic(ctx, t, allowsEveryone)
		if changed {
			items++
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return items, errors.Join(errs...)
}

// restoreDeny creates again the DENY WRITE of read-only topic t, which the
// sidecars own but the destination lacks (deleted by hand): without it
// anyone allowed could write to the mirror topic. It reports whether the
// topic still has it, read-only, afterwards.
func (c readOnlyCheck) restoreDeny(ctx context.Context, t *fsm.MirrorTopic) (bool, error) {
	// A stop may have run since the round read the state, and removed the
	// ACLs on purpose.
	if cur := c.state().Topics[t.Name]; !readOnlyRechecked(cur) || !slices.Equal(cur.OwnedACLs, t.OwnedACLs) {
		return false, nil
	}
	deny, _ := readOnlyACLs(t.Name)
	if err := c.dest.createACLs(ctx, []fsm.ACL{deny}); err != nil {
		return false, fmt.Errorf("create the missing DENY WRITE again: %w", err)
	}
	if cur := c.state().Topics[t.Name]; cur != nil && !readOnlyRechecked(cur) {
		// Stopped meanwhile: the stop removed the ACLs it knew of,
		// perhaps before this one was created. Take it back.
		if err := c.dest.Unprotect(ctx, []fsm.ACL{deny}); err != nil {
			return false, fmt.Errorf("remove the DENY WRITE of a topic stopped meanwhile: %w", err)
		}
		return false, nil
	}
	c.log.Warn("read-only ACLs: the DENY WRITE for User:* of a mirror topic was missing on the destination; created it again "+
		"(while it was missing, any principal allowed to write could append to the mirror topic, which fails its partitions)",
		zap.String("topic", t.Name), zap.String("status", t.Status.String()))
	return true, nil
}

// topic re-checks one topic; t is the state's topic as the round read it.
// It reports whether it created or deleted an ACL.
func (c readOnlyCheck) topic(ctx context.Context, t *fsm.MirrorTopic, allowsEveryone func() (bool, error)) (bool, error) {
	existing, err := c.dest.topicACLs(ctx, t.Name)
	if err != nil {
		return false, err
	}
	deny, _ := readOnlyACLs(t.Name)
	restored := false
	if !slices.Contains(existing, deny) {
		if restored, err = c.restoreDeny(ctx, t); err != nil || !restored {
			return restored, err
		}
		existing = append(existing, deny)
	}
	change, reason, err := decideAllowAll(t.Name, t.OwnedACLs, existing, allowsEveryone)
	if err != nil || change == allowAllKeep {
		return restored, err
	}
	// A stop, or a start recording its ACLs, may have run since the round
	// read the state: act only while the record is still the one decided on.
	if cur := c.state().Topics[t.Name]; !readOnlyRechecked(cur) || !slices.Equal(cur.OwnedACLs, t.OwnedACLs) {
		return false, nil
	}
	_, allow := readOnlyACLs(t.Name)
	without := slices.DeleteFunc(slices.Clone(t.OwnedACLs), func(a fsm.ACL) bool { return a == allow })
	log := c.log.With(zap.String("topic", t.Name), zap.String("status", t.Status.String()), zap.String("reason", reason))
	switch change {
	case allowAllDrop:
		// Delete, then record: a crash in between leaves an owned ACL
		// that is gone, which the next round deletes (a no-op) and records;
		// the other order could leave an ALLOW ALL that nobody owns.
		if err := c.dest.Unprotect(ctx, []fsm.ACL{allow}); err != nil {
			return false, err
		}
		if err := c.apply(ctx, fsm.RecordACLs{Topic: t.Name, ACLs: without}); err != nil {
			return true, fmt.Errorf("record the read-only ACLs without the ALLOW ALL: %w", err)
		}
		log.Info("read-only ACLs: removed the ALLOW ALL for User:* of a mirror topic")
	case allowAllAdd:
		// Record, then create: an ALLOW ALL created just before a crash
		// is still known as the sidecars'.
		if !slices.Contains(t.OwnedACLs, allow) {
			if err := c.apply(ctx, fsm.RecordACLs{Topic: t.Name, ACLs: append(slices.Clone(t.OwnedACLs), allow)}); err != nil {
				return false, fmt.Errorf("record the ALLOW ALL before creating it: %w", err)
			}
		}
		if err := c.dest.createACLs(ctx, []fsm.ACL{allow}); err != nil {
			return false, err
		}
		if cur := c.state().Topics[t.Name]; cur != nil && !readOnlyRechecked(cur) {
			// Stopped meanwhile: the stop removed the ACLs it knew
			// of, perhaps before this one existed. Take it back.
			if err := c.dest.Unprotect(ctx, []fsm.ACL{allow}); err != nil {
				return true, fmt.Errorf("remove the ALLOW ALL of a topic stopped meanwhile: %w", err)
			}
			if slices.Contains(cur.OwnedACLs, allow) {
				keep := slices.DeleteFunc(slices.Clone(cur.OwnedACLs), func(a fsm.ACL) bool { return a == allow })
				if err := c.apply(ctx, fsm.RecordACLs{Topic: t.Name, ACLs: keep}); err != nil {
					return true, fmt.Errorf("record the removal of the ALLOW ALL of a topic stopped meanwhile: %w", err)
				}
			}
			log.Info("read-only ACLs: the topic was stopped while its ALLOW ALL for User:* was added; removed it again")
			return true, nil
		}
		log.Info("read-only ACLs: added the ALLOW ALL for User:* of a mirror topic")
	}
	return true, nil
}

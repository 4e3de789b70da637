package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// needed are the notify-keyspace-events flags a watch needs: K, events on
// the key's own channel; g, DEL and EXPIRE; x, expiries; h, a lock's
// hash; $, a semaphore's or latch's count.
const needed = "Kgxh$"

// checkNotifications returns ErrNotificationsOff when the node d is on
// lacks some of the needed flags, after adding them when enable is set,
// and ErrNotificationsUnknown when it will not say.
func checkNotifications(ctx context.Context, d rueidis.DedicatedClient, enable bool) error {
	m, err := d.Do(ctx, d.B().ConfigGet().Parameter("notify-keyspace-events").Build()).AsStrMap()
	if err != nil {
		if scripts.IsNoPermission(err) {
			return fmt.Errorf("%w: the Redis user may not run CONFIG GET (give it +config|get, or watch Unchecked): %w (%w)", ErrNotificationsUnknown, reentrant.ErrNoPermission, err)
		}
		if _, refused := rueidis.IsRedisErr(err); refused {
			return fmt.Errorf("%w: CONFIG GET notify-keyspace-events: %w", ErrNotificationsUnknown, err)
		}
		return err
	}
	have := m["notify-keyspace-events"]
	missing := missingFlags(have)
	if missing == "" {
		return nil
	}
	if enable {
		err := d.Do(ctx, d.B().ConfigSet().ParameterValue().ParameterValue("notify-keyspace-events", have+missing).Build()).Error()
		if err == nil {
			return nil
		}
		if scripts.IsNoPermission(err) {
			return fmt.Errorf("%w: it is %q and the Redis user may not run CONFIG SET to add %q (give it +config|set): %w (%w)", ErrNotificationsOff, have, missing, reentrant.ErrNoPermission, err)
		}
		return fmt.Errorf("%w: it is %q and CONFIG SET refused to add %q: %w", ErrNotificationsOff, have, missing, err)
	}
	return fmt.Errorf("%w: notify-keyspace-events is %q, without %q; run CONFIG SET notify-keyspace-events %s (or set it in redis.conf)",
		ErrNotificationsOff, have, missing, have+missing)
}

// missingFlags returns the needed flags that have lacks; A stands for
// g$lshzxet.
func missingFlags(have string) string {
	if strings.Contains(have, "A") {
		have += "g$lshzxet"
	}
	var missing strings.Builder
	for _, f := range needed {
		if !strings.ContainsRune(have, f) {
			missing.WriteRune(f)
		}
	}
	return missing.String()
}

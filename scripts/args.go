package scripts

// The arguments scripts share: how a release announces itself, flags and
// durations as text.

import (
	"strconv"
	"time"
)

// Publish is the command a script uses to announce a release: classic
// PUBLISH, or sharded SPUBLISH as Redisson uses on a Redis 7+ cluster.
type Publish string

// The publish commands.
const (
	PublishClassic Publish = "publish"
	PublishSharded Publish = "spublish"
	// PublishNone announces nothing, as Redisson's spin lock releases,
	// and as every script does for a user with no channel rights.
	PublishNone Publish = ""
)

// flag is a script's boolean argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// millis formats d in whole milliseconds. The values every lock pair sends
// by default, the watchdog's 30s lease and the unlock latch's 10s TTL, are
// constants: no allocation.
func millis(d time.Duration) string {
	switch d {
	case 30 * time.Second:
		return "30000"
	case 10 * time.Second:
		return "10000"
	case 24 * time.Hour: // a fencing counter's TTL, by default
		return "86400000"
	case 3 * time.Second: // a waiting client's registration, by default
		return "3000"
	case time.Second: // how long a channel lingers, by default
		return "1000"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

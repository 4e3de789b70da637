package reentrant

import (
	"testing"

	"github.com/relock-go/relock/pubsub"
)

// The pub/sub kind on a cluster follows the server's INFO: sharded from
// Redis 7 and on Valkey, whether or not Valkey still reports a
// redis_version for compatibility.
func TestPubSubFor(t *testing.T) {
	for _, c := range []struct {
		server string
		info   string
		want   pubsub.Mode
	}{
		{"Redis 6.2", "# Server\r\nredis_version:6.2.14\r\nredis_mode:cluster\r\n", pubsub.Classic},
		{"Redis 7.0", "# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n", pubsub.Sharded},
		{"Valkey 8.0", "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", pubsub.Sharded},
		{"a Valkey without redis_version", "# Server\r\nserver_name:valkey\r\nvalkey_version:9.0.0\r\n", pubsub.Sharded},
		{"no version at all", "# Server\r\n", pubsub.Classic},
	} {
		if got := pubSubFor(c.info); got != c.want {
			t.Errorf("%s: %v, want %v", c.server, got, c.want)
		}
	}
}

package redistest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// TestProxyLike checks the emulation itself: a default rueidis client
// takes it for a single node, and it refuses keys of two slots as a proxy
// does, in commands and in scripts, while keys sharing a hash tag pass.
func TestProxyLike(t *testing.T) {
	s := StartProxyLike(t)
	rdb := s.Client()
	if got := rdb.Mode(); got != rueidis.ClientModeStandalone {
		t.Fatalf("client mode %q, want standalone", got)
	}
	ctx := context.Background()
	err := rdb.Do(ctx, rdb.B().Del().Key("a", "b").Build()).Error()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("DEL of two slots: %v, want CROSSSLOT", err)
	}
	err = rdb.Do(ctx, rdb.B().Eval().Script("return 1").Numkeys(2).Key("a", "b").Build()).Error()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL on two slots: %v, want CROSSSLOT", err)
	}
	if err := rdb.Do(ctx, rdb.B().Del().Key("{t}a", "{t}b").Build()).Error(); err != nil {
		t.Fatalf("DEL of one slot: %v", err)
	}
}

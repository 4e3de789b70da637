package reentranttest_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// The rueidis settings docs/testing.md gives for a client built by hand
// run relock on miniredis: a lock is taken and given back.
func TestMiniredisSettings(t *testing.T) {
	m := miniredis.NewMiniRedis()
	t.Cleanup(m.Close)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{"miniredis"}, // dialled in memory
		DisableCache:      true,
		AlwaysRESP2:       true,
		ForceSingleClient: true,
		AlwaysPipelining:  true,
		DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
			return m.Dial()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.Lock("settings").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := locks.Lock("settings").Unlock(held); err != nil {
		t.Fatal(err)
	}
}

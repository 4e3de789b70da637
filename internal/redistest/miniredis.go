package redistest

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// Miniredis starts an embedded miniredis server and a rueidis client set up
// for it: no client-side cache, RESP2 (miniredis refuses ordinary commands on
// a subscribed RESP3 connection), a single-node client (rueidis would
// otherwise take miniredis for a one-node cluster), and in-memory
// connections. Both are closed when the test ends.
func Miniredis(t testing.TB) (*miniredis.Miniredis, rueidis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	return m, MiniredisClient(t, m, rueidis.ClientOption{InitAddress: []string{m.Addr()}})
}

// MiniredisClient makes a client for m with o as a base, adding the settings
// miniredis needs. With o.DialCtxFn unset it dials m in memory (m.Dial), which
// also works inside a testing/synctest bubble. In-memory connections have no
// buffer, so the client always pipelines: its reader then runs beside its
// writer, where rueidis's synchronous mode would write a whole pipeline
// before reading and deadlock.
func MiniredisClient(t testing.TB, m *miniredis.Miniredis, o rueidis.ClientOption) rueidis.Client {
	t.Helper()
	o.DisableCache = true
	o.AlwaysRESP2 = true
	o.ForceSingleClient = true
	o.AlwaysPipelining = true
	if len(o.InitAddress) == 0 {
		o.InitAddress = []string{m.Addr()}
	}
	if o.DialCtxFn == nil {
		o.DialCtxFn = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) { return m.Dial() }
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatalf("redistest: miniredis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

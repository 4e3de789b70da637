package redistest_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each server is its own, on its own port; pause, kill and restart do what
// they say.
func TestServerLifecycle(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	assert.NotEqual(t, a.Addr, b.Addr)
	assert.NotEqual(t, "127.0.0.1:6379", a.Addr, "never the shared Redis")
	require.NoError(t, a.Do("SET", "k", "a").Error())
	n, err := b.Do("EXISTS", "k").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "servers share nothing")

	// Paused: a command times out; resumed: it answers.
	c := a.Client()
	a.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = c.Do(ctx, c.B().Ping().Build()).Error()
	cancel()
	assert.Error(t, err, "a paused server does not answer")
	a.Resume()
	require.NoError(t, a.Do("PING").Error())

	// Killed and restarted on the same port, without its data.
	a.Kill()
	assert.Error(t, a.Do("PING").Error())
	a.Restart()
	require.NoError(t, a.Do("PING").Error())
	n, err = a.Do("EXISTS", "k").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no persistence: the data is gone")
}

// With persistence, a restart keeps the data and RestartEmpty loses it.
func TestRestartEmpty(t *testing.T) {
	s := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	require.NoError(t, s.Do("SET", "k", "v").Error())
	s.Kill()
	s.Restart()
	n, err := s.Do("EXISTS", "k").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "appendfsync always keeps the write")
	s.RestartEmpty()
	n, err = s.Do("EXISTS", "k").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "RestartEmpty loses it")
}

func TestMiniredis(t *testing.T) {
	m, c := redistest.Miniredis(t)
	require.NoError(t, c.Do(context.Background(), c.B().Set().Key("k").Value("v").Build()).Error())
	v, err := m.Get("k")
	require.NoError(t, err)
	assert.Equal(t, "v", v)
}

// A TLS-only server answers its own client, and not plain TCP.
func TestStartTLS(t *testing.T) {
	s, files := redistest.StartTLS(t)
	require.NoError(t, s.Do("PING").Error(), "PING over TLS")
	for _, f := range []string{files.CA, files.ClientCert, files.ClientKey} {
		_, err := os.Stat(f)
		require.NoError(t, err)
	}
	conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = conn.Write([]byte("PING\r\n"))
	buf := make([]byte, 16)
	n, _ := conn.Read(buf)
	assert.NotContains(t, string(buf[:n]), "PONG", "a plain PING was answered")
}

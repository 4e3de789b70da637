package reentrant_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// asRedisson is checkLockSyncedSlaves with its default slavesSyncTimeout.
var asRedisson = reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas, Timeout: time.Second}

func readConfig(t *testing.T, file string) reentrant.RedissonConfig {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	cfg, err := reentrant.FromRedissonConfig(b)
	require.NoError(t, err)
	return cfg
}

// Redisson's own example configs, from its docs, read as a Java client
// reads them; what has no meaning here is listed, not dropped in silence.
func TestRedissonConfigExamples(t *testing.T) {
	single := readConfig(t, "testdata/redisson-single.yaml")
	assert.Equal(t, []string{"127.0.0.1:6379"}, single.Client.InitAddress)
	assert.Equal(t, 10*time.Second, single.Client.Dialer.Timeout, "connectTimeout")
	assert.Equal(t, 3*time.Second, single.Client.ConnWriteTimeout, "timeout")
	assert.Zero(t, single.Client.SelectDB)
	assert.Empty(t, single.Client.Password)
	assert.Nil(t, single.Client.TLSConfig)
	assert.Equal(t, reentrant.Options{ReplicaSync: asRedisson, FencingCounterTTL: reentrant.NoExpiry}, single.Options,
		"no lock settings: relock's defaults, which are Redisson's, Redisson's replica sync, and fencing counters kept as Java's")
	for _, key := range []string{"singleServerConfig.connectionPoolSize", "singleServerConfig.retryDelay", "threads", "codec", "transportMode"} {
		assert.Contains(t, single.Ignored, key)
	}
	assert.NotContains(t, single.Ignored, "singleServerConfig.address")

	cluster := readConfig(t, "testdata/redisson-cluster.yaml")
	assert.Equal(t, []string{"127.0.0.1:7004", "127.0.0.1:7001", "127.0.0.1:7000"}, cluster.Client.InitAddress)
	assert.Contains(t, cluster.Ignored, "clusterServersConfig.readMode")
	assert.Equal(t, asRedisson, cluster.Options.ReplicaSync, "checkLockSyncedSlaves not written: on, as in Redisson")

	sentinel := readConfig(t, "testdata/redisson-sentinel.yaml")
	assert.Equal(t, []string{"127.0.0.1:26379", "127.0.0.1:26389"}, sentinel.Client.InitAddress)
	assert.Equal(t, "mymaster", sentinel.Client.Sentinel.MasterSet)
}

// The lock settings, credentials, TLS and environment variables.
func TestRedissonConfigSettings(t *testing.T) {
	t.Setenv("RELOCK_TEST_REDIS_PORT", "7777")
	cfg, err := reentrant.FromRedissonConfig([]byte(`
clusterServersConfig:
  nodeAddresses: ["rediss://user1:secret1@10.0.0.1:${RELOCK_TEST_REDIS_PORT}", "rediss://10.0.0.2:${RELOCK_TEST_UNSET:-7000}"]
  password: "cluster-pw"
  shardedSubscriptionMode: "OFF"
  clientName: "billing"
username: "top-user"
password: "top-pw"
sslVerificationMode: "NONE"
lockWatchdogTimeout: 12000
lockWatchdogBatchSize: 50
fairLockWaitTimeout: 60000
checkLockSyncedSlaves: true
slavesSyncTimeout: 2500
someFutureSetting: 1
`))
	require.NoError(t, err)
	c := cfg.Client
	assert.Equal(t, []string{"10.0.0.1:7777", "10.0.0.2:7000"}, c.InitAddress)
	assert.Equal(t, "top-user", c.Username, "the top level's, over the URL's")
	assert.Equal(t, "cluster-pw", c.Password, "the mode's own, over the top level's")
	assert.Equal(t, "billing", c.ClientName)
	require.NotNil(t, c.TLSConfig)
	assert.True(t, c.TLSConfig.InsecureSkipVerify, "NONE")
	assert.Equal(t, reentrant.Options{
		WatchdogTimeout:   12 * time.Second,
		RenewBatchSize:    50,
		FairWaitTimeout:   time.Minute,
		PubSub:            reentrant.PubSubClassic,
		ReplicaSync:       reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas, Timeout: 2500 * time.Millisecond},
		FencingCounterTTL: reentrant.NoExpiry,
	}, cfg.Options)
	assert.Equal(t, []string{"someFutureSetting"}, cfg.Ignored)

	// Said false, it is off.
	cfg, err = reentrant.FromRedissonConfig([]byte("singleServerConfig: {address: 'redis://h', database: 3}\ncheckLockSyncedSlaves: false\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"h:6379"}, cfg.Client.InitAddress)
	assert.Equal(t, 3, cfg.Client.SelectDB)
	assert.Zero(t, cfg.Options.ReplicaSync)
}

// Bad configs are errors that name the key.
func TestRedissonConfigErrors(t *testing.T) {
	for yaml, want := range map[string]string{
		"singleServerConfig: [":     "Redisson config",
		"":                          "not a mapping",
		"- a\n- b":                  "not a mapping",
		"lockWatchdogTimeout: 1000": "no server mode",
		"singleServerConfig: {address: 'redis://h'}\nlockWatchdogTimeout: soon":                "lockWatchdogTimeout",
		"singleServerConfig: {address: 'redis://h'}\nlockWatchdogTimeout: -5":                  "lockWatchdogTimeout",
		"singleServerConfig: {address: 'redis://h', database: x}":                              "singleServerConfig.database",
		"singleServerConfig: {address: 'localhost:6379'}":                                      "singleServerConfig.address",
		"singleServerConfig: {address: ['redis://h']}":                                         "singleServerConfig.address",
		"singleServerConfig: {timeout: 10}":                                                    "names no server address",
		"clusterServersConfig: {nodeAddresses: 'redis://h'}":                                   "clusterServersConfig.nodeAddresses",
		"sentinelServersConfig: {sentinelAddresses: ['redis://h:26379']}":                      "masterName",
		"replicatedServersConfig: {nodeAddresses: ['redis://h']}":                              "replicatedServersConfig is not supported",
		"singleServerConfig: {address: 'redis://a'}\nclusterServersConfig: {}":                 "both",
		"singleServerConfig: {address: 'rediss://a', sslVerificationMode: WEAK}":               "sslVerificationMode",
		"clusterServersConfig: {nodeAddresses: ['redis://h'], shardedSubscriptionMode: MAYBE}": "shardedSubscriptionMode",
		"singleServerConfig: {address: 'redis://h'}\ncheckLockSyncedSlaves: 1":                 "checkLockSyncedSlaves",
	} {
		_, err := reentrant.FromRedissonConfig([]byte(yaml))
		require.Error(t, err, yaml)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, yaml)
		assert.True(t, strings.Contains(err.Error(), want), "%q: %v", yaml, err)
	}
}

// A config read here connects, and its lock settings hold.
func TestRedissonConfigConnects(t *testing.T) {
	s := redistest.Start(t)
	cfg, err := reentrant.FromRedissonConfig([]byte("singleServerConfig:\n  address: \"redis://" + s.Addr + "\"\n  database: 2\nlockWatchdogTimeout: 9000\n"))
	require.NoError(t, err)
	assert.True(t, cfg.Client.DisableCache, "relock reads nothing through the cache, which a least-privilege user may not turn on")
	rdb, err := rueidis.NewClient(cfg.Client)
	require.NoError(t, err)
	defer rdb.Close()
	locks, err := reentrant.New(rdb, cfg.Options)
	require.NoError(t, err)
	defer locks.Close()

	held, err := locks.Lock("configured").Lock(bg())
	require.NoError(t, err)
	inZero, err := s.Do("EXISTS", "configured").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, inZero, "the lock is in database 2, not 0")
	ms, err := rdb.Do(bg(), rdb.B().Pttl().Key("configured").Build()).AsInt64()
	require.NoError(t, err)
	assert.True(t, ms > 0 && ms <= 9000, "the lock's lease is lockWatchdogTimeout: PTTL %d", ms)
	require.NoError(t, locks.Lock("configured").Unlock(held))
}

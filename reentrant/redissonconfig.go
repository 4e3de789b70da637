package reentrant

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"go.yaml.in/yaml/v3"
)

// RedissonConfig is what FromRedissonConfig reads from a Redisson YAML
// config: how to connect, and the Options Redisson's settings map to.
type RedissonConfig struct {
	// Client connects to the server, servers or sentinels the config
	// names, with its credentials, database, client name, timeouts and
	// TLS, and DisableCache (relock reads nothing through rueidis's
	// client-side cache, and a least-privilege ACL user may not turn it
	// on). Pass it to rueidis.NewClient; set anything else you need first.
	Client rueidis.ClientOption
	// Options carry lockWatchdogTimeout, lockWatchdogBatchSize,
	// fairLockWaitTimeout, a cluster's shardedSubscriptionMode, and
	// checkLockSyncedSlaves with slavesSyncTimeout (see FromRedissonConfig),
	// and FencingCounterTTL NoExpiry: a service configured as a Java one
	// shares names with Java, whose RFencedLock would draw token 1 from a
	// counter that expired.
	Options Options
	// Ignored lists, as dotted paths ("singleServerConfig.connectionPoolSize"),
	// the keys that were read but change nothing here: Java pool, thread,
	// codec and retry settings, Java keystores, and keys this reader does
	// not know.
	Ignored []string
}

// FromRedissonConfig reads a Redisson YAML config (Config.fromYAML's
// format) so that a Go service connects where its Java peers do, with the
// same lock settings. It reads the singleServerConfig, clusterServersConfig,
// sentinelServersConfig and masterSlaveServersConfig modes (one of them);
// replicatedServersConfig and the multi-cluster modes are an error. As
// Redisson does, it first replaces ${NAME} and ${NAME:-default} with the
// environment variable NAME.
//
// From each mode: the addresses ("redis://" or, with TLS, "rediss://";
// user and password in the URL too), username, password, database,
// clientName, connectTimeout (the dial timeout), timeout (rueidis's
// ConnWriteTimeout) and sslVerificationMode (NONE, CA_ONLY, STRICT);
// for sentinels, masterName, sentinelUsername and sentinelPassword. The
// top level's username, password and sslVerificationMode (Redisson 3.40+)
// apply where the mode sets none, as in Redisson.
//
// checkLockSyncedSlaves, on unless the config says false, as in Redisson,
// is ReplicaSync{Replicas: ConnectedReplicas, Timeout: slavesSyncTimeout}
// (default 1s): every lock write waits for the replicas its master has,
// if it has any.
//
// A key of the wrong type or an impossible value (a negative timeout, an
// address without a scheme, no server at all) is an error naming the key;
// malformed YAML is an error too.
func FromRedissonConfig(config []byte) (RedissonConfig, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(expandEnv(string(config))), &doc); err != nil {
		return RedissonConfig{}, fmt.Errorf("relock: %w: Redisson config: %w", ErrInvalidArgument, err)
	}
	r := configReader{out: RedissonConfig{Client: rueidis.ClientOption{DisableCache: true}, Options: Options{FencingCounterTTL: NoExpiry}}}
	top, err := r.mapping(&doc, "")
	if err != nil {
		return RedissonConfig{}, err
	}
	if err := r.read(top); err != nil {
		return RedissonConfig{}, err
	}
	return r.out, nil
}

// envParam is ConfigSupport's ENV_PARAM_PATTERN.
var envParam = regexp.MustCompile(`\$\{([\w.]+)(:-.+?)?\}`)

// expandEnv is ConfigSupport.resolveEnvParams: ${NAME} becomes NAME's
// value, or the default after ":-" when NAME is not set; with neither, it
// is left as it is.
func expandEnv(s string) string {
	return envParam.ReplaceAllStringFunc(s, func(m string) string {
		parts := envParam.FindStringSubmatch(m)
		if v, ok := os.LookupEnv(parts[1]); ok {
			return v
		}
		if parts[2] != "" {
			return parts[2][2:]
		}
		return m
	})
}

// configReader walks the YAML tree, filling out and noting what it skips.
type configReader struct {
	out RedissonConfig
	// top: the top level's credentials and TLS mode; own: the server
	// mode's, which override them.
	top, own credentials
	// sync and syncTimeout: checkLockSyncedSlaves and slavesSyncTimeout.
	sync        *yaml.Node
	syncTimeout time.Duration
}

// credentials are a level's username, password and sslVerificationMode.
type credentials struct{ username, password, verify *yaml.Node }

// entry is one key of a YAML mapping and its value.
type entry struct {
	key, path string
	value     *yaml.Node
}

// mapping returns the entries of n, which must be a mapping (a document's
// root is unwrapped); path names n in errors.
func (r *configReader) mapping(n *yaml.Node, path string) ([]entry, error) {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			return nil, fmt.Errorf("relock: %w: Redisson config: not a mapping of settings", ErrInvalidArgument)
		}
		return nil, badValue(path, n, "a mapping")
	}
	entries := make([]entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		p := key
		if path != "" {
			p = path + "." + key
		}
		entries = append(entries, entry{key: key, path: p, value: n.Content[i+1]})
	}
	return entries, nil
}

// modes are the server modes relock reads: the key of each one's address
// or addresses, and whether it is a list.
var modes = map[string]struct {
	addresses string
	list      bool
}{
	"singleServerConfig":       {"address", false},
	"masterSlaveServersConfig": {"masterAddress", false},
	"clusterServersConfig":     {"nodeAddresses", true},
	"sentinelServersConfig":    {"sentinelAddresses", true},
}

// setting reads one key's value into the reader.
type setting func(r *configReader, e entry) error

// topSettings are the top level's settings relock reads, by key; the
// server modes are read by readMode.
var topSettings = map[string]setting{
	"username":            func(r *configReader, e entry) error { r.top.username = e.value; return nil },
	"password":            func(r *configReader, e entry) error { r.top.password = e.value; return nil },
	"sslVerificationMode": func(r *configReader, e entry) error { r.top.verify = e.value; return nil },
	"lockWatchdogTimeout": func(r *configReader, e entry) (err error) {
		r.out.Options.WatchdogTimeout, err = millisOf(e)
		return err
	},
	"lockWatchdogBatchSize": func(r *configReader, e entry) (err error) {
		r.out.Options.RenewBatchSize, err = intOf(e, 1)
		return err
	},
	"fairLockWaitTimeout": func(r *configReader, e entry) (err error) {
		r.out.Options.FairWaitTimeout, err = millisOf(e)
		return err
	},
	"checkLockSyncedSlaves": func(r *configReader, e entry) error {
		r.sync = e.value
		_, err := boolOf(e)
		return err
	},
	"slavesSyncTimeout": func(r *configReader, e entry) (err error) {
		r.syncTimeout, err = millisOf(e)
		return err
	},
}

// unsupportedModes are Redisson's server modes relock does not read: a
// config that sets one fails.
var unsupportedModes = map[string]bool{"replicatedServersConfig": true, "multiClusterServersConfig": true, "multiSentinelServersConfig": true}

func (r *configReader) read(top []entry) error {
	var mode *entry
	r.syncTimeout = time.Second
	for i, e := range top {
		var err error
		set, ok := topSettings[e.key]
		_, isMode := modes[e.key]
		switch {
		case ok:
			err = set(r, e)
		case isNull(e.value) && (isMode || unsupportedModes[e.key]): // a mode left unset
		case isMode && mode != nil:
			return fmt.Errorf("relock: %w: Redisson config: both %s and %s", ErrInvalidArgument, mode.key, e.key)
		case isMode:
			mode = &top[i]
		case unsupportedModes[e.key]:
			return fmt.Errorf("relock: %w: Redisson config: %s is not supported: connect with rueidis yourself", ErrInvalidArgument, e.key)
		default:
			r.out.Ignored = append(r.out.Ignored, e.path)
		}
		if err != nil {
			return err
		}
	}
	if mode == nil {
		return fmt.Errorf("relock: %w: Redisson config: no server mode (singleServerConfig, clusterServersConfig, sentinelServersConfig or masterSlaveServersConfig)", ErrInvalidArgument)
	}
	if err := r.readMode(*mode); err != nil {
		return err
	}
	if r.sync == nil || r.sync.Value == "true" { // Redisson's default: on
		r.out.Options.ReplicaSync = ReplicaSync{Replicas: ConnectedReplicas, Timeout: r.syncTimeout}
	}
	return nil
}

// modeSettings are a server mode's settings relock reads, by key, besides
// its addresses (see modes).
var modeSettings = map[string]setting{
	"masterName": func(r *configReader, e entry) (err error) {
		r.out.Client.Sentinel.MasterSet, err = stringOf(e)
		return err
	},
	"sentinelUsername": func(r *configReader, e entry) (err error) {
		r.out.Client.Sentinel.Username, err = stringOf(e)
		return err
	},
	"sentinelPassword": func(r *configReader, e entry) (err error) {
		r.out.Client.Sentinel.Password, err = stringOf(e)
		return err
	},
	"database": func(r *configReader, e entry) (err error) {
		r.out.Client.SelectDB, err = intOf(e, 0)
		return err
	},
	"clientName": func(r *configReader, e entry) (err error) {
		r.out.Client.ClientName, err = stringOf(e)
		return err
	},
	"connectTimeout": func(r *configReader, e entry) (err error) {
		r.out.Client.Dialer.Timeout, err = millisOf(e)
		return err
	},
	"timeout": func(r *configReader, e entry) (err error) {
		r.out.Client.ConnWriteTimeout, err = millisOf(e)
		return err
	},
	"username":            func(r *configReader, e entry) error { r.own.username = e.value; return nil },
	"password":            func(r *configReader, e entry) error { r.own.password = e.value; return nil },
	"sslVerificationMode": func(r *configReader, e entry) error { r.own.verify = e.value; return nil },
	"shardedSubscriptionMode": func(r *configReader, e entry) (err error) {
		r.out.Options.PubSub, err = shardedOf(e)
		return err
	},
}

// readMode reads one server mode's settings.
func (r *configReader) readMode(m entry) error {
	entries, err := r.mapping(m.value, m.path)
	if err != nil {
		return err
	}
	var addrs []string
	for _, e := range entries {
		var err error
		set, ok := modeSettings[e.key]
		switch {
		case e.key == modes[m.key].addresses:
			addrs, err = addressesOf(e, modes[m.key].list)
		case ok:
			err = set(r, e)
		default:
			r.out.Ignored = append(r.out.Ignored, e.path)
		}
		if err != nil {
			return err
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("relock: %w: Redisson config: %s names no server address", ErrInvalidArgument, m.key)
	}
	if m.key == "sentinelServersConfig" && r.out.Client.Sentinel.MasterSet == "" {
		return fmt.Errorf("relock: %w: Redisson config: %s.masterName is missing", ErrInvalidArgument, m.key)
	}
	return r.connect(addrs, firstSet(r.own.username, r.top.username), firstSet(r.own.password, r.top.password), firstSet(r.own.verify, r.top.verify))
}

// firstSet returns the first node that says something: the mode's own setting
// over the top level's, as Redisson's Objects.toString(serviceCfg.x,
// config.x).
func firstSet(nodes ...*yaml.Node) *yaml.Node {
	for _, n := range nodes {
		if n != nil && !isNull(n) {
			return n
		}
	}
	return nil
}

// connect fills the addresses, credentials and TLS in. Every address was
// checked by addressesOf; credentials in a URL count where no key sets
// them.
func (r *configReader) connect(addrs []string, username, password, verify *yaml.Node) error {
	o := &r.out.Client
	tlsOn := false
	for _, a := range addrs {
		u, _ := url.Parse(a)
		o.InitAddress = append(o.InitAddress, hostPort(u))
		tlsOn = tlsOn || u.Scheme == "rediss"
		if u.User != nil && o.Password == "" {
			o.Username = u.User.Username()
			o.Password, _ = u.User.Password()
		}
	}
	if username != nil {
		o.Username = username.Value
	}
	if password != nil {
		o.Password = password.Value
	}
	if !tlsOn {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	verifyMode := "STRICT"
	if verify != nil {
		verifyMode = verify.Value
	}
	switch verifyMode {
	case "STRICT":
	case "NONE":
		cfg.InsecureSkipVerify = true
	case "CA_ONLY":
		cfg.InsecureSkipVerify = true // the chain is checked below, the host name not
		cfg.VerifyConnection = verifyChainOnly
	default:
		return fmt.Errorf("relock: %w: Redisson config: sslVerificationMode %q, want NONE, CA_ONLY or STRICT", ErrInvalidArgument, verifyMode)
	}
	o.TLSConfig = cfg
	return nil
}

// verifyChainOnly is sslVerificationMode CA_ONLY: the server's chain must
// lead to a trusted root, whatever host name it is for.
func verifyChainOnly(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("relock: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// hostPort is u's host:port, 6379 when it names no port.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func badValue(path string, n *yaml.Node, want string) error {
	return fmt.Errorf("relock: %w: Redisson config: %s is %q, want %s", ErrInvalidArgument, path, n.Value, want)
}

func stringOf(e entry) (string, error) {
	if isNull(e.value) {
		return "", nil
	}
	if e.value.Kind != yaml.ScalarNode {
		return "", badValue(e.path, e.value, "a string")
	}
	return e.value.Value, nil
}

func intOf(e entry, least int) (int, error) {
	n, err := strconv.Atoi(e.value.Value)
	if e.value.Kind != yaml.ScalarNode || err != nil || n < least {
		return 0, badValue(e.path, e.value, fmt.Sprintf("an integer of at least %d", least))
	}
	return n, nil
}

func millisOf(e entry) (time.Duration, error) {
	n, err := strconv.ParseInt(e.value.Value, 10, 64)
	if e.value.Kind != yaml.ScalarNode || err != nil || n < 0 {
		return 0, badValue(e.path, e.value, "milliseconds, 0 or more")
	}
	return time.Duration(n) * time.Millisecond, nil
}

func boolOf(e entry) (bool, error) {
	switch e.value.Value {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badValue(e.path, e.value, "true or false")
}

// shardedOf is ClusterServersConfig.shardedSubscriptionMode: AUTO detects
// (the zero PubSubMode), ON is sharded, OFF classic.
func shardedOf(e entry) (PubSubMode, error) {
	switch e.value.Value {
	case "AUTO":
		return 0, nil
	case "ON":
		return PubSubSharded, nil
	case "OFF":
		return PubSubClassic, nil
	}
	return 0, badValue(e.path, e.value, "AUTO, ON or OFF")
}

// addressesOf reads one address, or a list of them (list), each a
// "redis://" or "rediss://" URL with a host.
func addressesOf(e entry, list bool) ([]string, error) {
	var values []*yaml.Node
	switch {
	case list && e.value.Kind == yaml.SequenceNode:
		values = e.value.Content
	case !list && e.value.Kind == yaml.ScalarNode:
		values = []*yaml.Node{e.value}
	default:
		return nil, badValue(e.path, e.value, map[bool]string{true: "a list of addresses", false: "an address"}[list])
	}
	var addrs []string
	for _, v := range values {
		u, err := url.Parse(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || !slices.Contains([]string{"redis", "rediss"}, u.Scheme) || u.Hostname() == "" || strings.ContainsAny(u.Port(), "-+") {
			return nil, badValue(e.path, v, `an address such as "redis://host:6379" or "rediss://host:6379"`)
		}
		addrs = append(addrs, v.Value)
	}
	return addrs, nil
}

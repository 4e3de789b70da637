package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// connFlags are the flags every command takes to reach Redis.
type connFlags struct {
	url, addr, user, sentinelMaster string
	redissonConfig                  string
	redisson                        reentrant.Options // what --redisson-config sets
	db                              int
	tls, tlsInsecure                bool
	tlsCA, tlsCert, tlsKey          string
	timeout                         time.Duration
	fs                              *flag.FlagSet // to see which were given
}

func newConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{fs: fs}
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	fs.StringVar(&c.redissonConfig, "redisson-config", "", "connect, and set the lock options, as the Redisson YAML config in this `file` does; other flags given add to it")
	// The defaults shown are the environment's where it sets one: the
	// flag package prints each non-empty default itself.
	fs.StringVar(&c.url, "url", os.Getenv("REDIS_URL"), "a redis:// or rediss:// `URL` (user, password, host, port, db), from $REDIS_URL if set; other flags given add to it")
	fs.StringVar(&c.addr, "addr", addr, "Redis `host:port`, from $REDIS_ADDR if set; a comma-separated list for a cluster's seeds or the sentinels")
	fs.StringVar(&c.user, "user", os.Getenv("REDIS_USERNAME"), "ACL user `name`, from $REDIS_USERNAME if set; the password is read from $REDIS_PASSWORD")
	fs.IntVar(&c.db, "db", 0, "the database `number` (SELECT), as Redisson's database setting")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by a rediss:// URL and the other --tls flags)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "trust the CA certificates in this PEM `file` (default the system's)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "present the client certificate in this PEM `file` (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the client certificate's private key `file`")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", false, "do not verify the server's certificate")
	fs.DurationVar(&c.timeout, "connect-timeout", 5*time.Second, "give up connecting after this long")
	fs.StringVar(&c.sentinelMaster, "sentinel-master", "", "with sentinels at --addr, the `name` of the master set")
	return c
}

// options turns the flags into rueidis's options. Flags given on the
// command line override the URL's parts.
func (c *connFlags) options() (rueidis.ClientOption, error) {
	o, err := c.base()
	if err == nil {
		c.overlay(&o)
		err = c.withTLS(&o)
	}
	if err != nil {
		return o, errExit{exitUsage, err}
	}
	if c.sentinelMaster != "" {
		o.Sentinel = rueidis.SentinelOption{MasterSet: c.sentinelMaster}
	}
	return o, nil
}

// base returns the options --url or --redisson-config give, or none.
func (c *connFlags) base() (rueidis.ClientOption, error) {
	var o rueidis.ClientOption
	switch {
	case c.db < 0:
		return o, fmt.Errorf("--db %d: a database number is 0 or more", c.db)
	case c.url != "" && c.redissonConfig != "":
		return o, errors.New("--url and --redisson-config: give one")
	case c.url != "":
		o, err := rueidis.ParseURL(c.url)
		if err != nil {
			return o, fmt.Errorf("--url: %w", err)
		}
		return o, nil
	case c.redissonConfig != "":
		b, err := os.ReadFile(c.redissonConfig)
		if err != nil {
			return o, fmt.Errorf("--redisson-config: %w", err)
		}
		cfg, err := reentrant.FromRedissonConfig(b)
		if err != nil {
			return o, fmt.Errorf("--redisson-config %s: %w", c.redissonConfig, err)
		}
		o, c.redisson = cfg.Client, cfg.Options
	}
	return o, nil
}

// overlay sets on o what the connection flags say: every one of them, or,
// over a base (--url, --redisson-config), those given.
func (c *connFlags) overlay(o *rueidis.ClientOption) {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	base := c.url != "" || c.redissonConfig != ""
	given := func(name string) bool { return !base || set[name] }
	if given("addr") {
		o.InitAddress = strings.Split(c.addr, ",")
	}
	if given("user") {
		o.Username = c.user
	}
	if pw := os.Getenv("REDIS_PASSWORD"); pw != "" && (!base || o.Password == "") {
		o.Password = pw
	}
	if given("db") {
		o.SelectDB = c.db
	}
	o.DisableCache = true
	if c.redissonConfig == "" || set["connect-timeout"] {
		o.Dialer = net.Dialer{Timeout: c.timeout}
		o.ConnWriteTimeout = c.timeout
	}
	o.Dialer.Timeout = cmp.Or(o.Dialer.Timeout, c.timeout)
	o.ConnWriteTimeout = cmp.Or(o.ConnWriteTimeout, c.timeout)
}

// withTLS sets o's TLS as the flags say. A CA, a client certificate or
// --tls-insecure implies TLS, as a rediss:// address does. A Redisson
// config's TLS settings stand unless TLS flags are given.
func (c *connFlags) withTLS(o *rueidis.ClientOption) error {
	flags := c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsInsecure
	if !flags && (o.TLSConfig == nil || c.redissonConfig != "") {
		return nil
	}
	cfg, err := c.tlsConfig(*o)
	if err != nil {
		return err
	}
	o.TLSConfig = cfg
	return nil
}

// tlsConfig builds the TLS settings the flags ask for.
func (c *connFlags) tlsConfig(o rueidis.ClientOption) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(o.InitAddress[0])
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", o.InitAddress[0], err)
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.tlsInsecure}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// redis connects to Redis: a single server, a cluster (found out from the
// server) or, with --sentinel-master, a Sentinel-managed master. Its error
// says which of the usual causes it was.
func (c *connFlags) redis() (rueidis.Client, error) {
	o, err := c.options()
	if err != nil {
		return nil, err
	}
	rdb, err := rueidis.NewClient(o)
	if err != nil {
		return nil, connectError(strings.Join(o.InitAddress, ","), o.TLSConfig != nil, err)
	}
	return rdb, nil
}

// connectError tells why connecting failed: credentials refused (exit
// 77), a TLS handshake that failed (a plain port, or an unknown CA), or a
// server that could not be reached (69). withTLS says TLS was asked for:
// a plain server does not answer a TLS hello, so the handshake times out.
func connectError(addr string, withTLS bool, err error) error {
	msg := err.Error()
	var cert x509.UnknownAuthorityError
	var host x509.HostnameError
	var header tls.RecordHeaderError
	switch {
	case strings.HasPrefix(msg, "NOAUTH"):
		return errExit{exitNoPerm, fmt.Errorf("Redis at %s asks for a password, and none was given: set $REDIS_PASSWORD, or give it in --url or --redisson-config", addr)}
	case strings.HasPrefix(msg, "WRONGPASS") || strings.Contains(msg, "invalid password"):
		return errExit{exitNoPerm, fmt.Errorf("Redis at %s refused the credentials: %w", addr, err)}
	case strings.Contains(msg, "DB index is out of range"):
		return errExit{exitUsage, fmt.Errorf("--db: Redis at %s has no such database (its databases setting): %w", addr, err)}
	case strings.HasPrefix(msg, "NOPERM"):
		return errExit{exitNoPerm, fmt.Errorf("the Redis user at %s may not do what relock needs: %w", addr, err)}
	case errors.As(err, &cert), errors.As(err, &host):
		return fmt.Errorf("TLS with %s failed: its certificate is not trusted (see --tls-ca, --tls-insecure): %w", addr, err)
	case errors.As(err, &header), withTLS && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("TLS with %s failed: does the server speak TLS there? %w", addr, err)
	}
	return fmt.Errorf("could not reach Redis at %s: %w", addr, err)
}

// locks connects and returns a relock client on it; close it with the
// returned function. The lost-lock warnings of the library are left out
// of the log: the command reports a loss itself, once.
func (c *connFlags) locks(e env, opts reentrant.Options) (*reentrant.Client, func(), error) {
	rdb, err := c.redis()
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = slog.New(dropLost{e.log.Handler()})
	opts = withRedisson(opts, c.redisson)
	locks, err := reentrant.New(rdb, opts)
	if err != nil {
		rdb.Close()
		switch {
		case errors.Is(err, reentrant.ErrInvalidArgument):
			return nil, nil, errExit{exitUsage, err}
		case errors.Is(err, reentrant.ErrNoPermission):
			return nil, nil, errExit{exitNoPerm, err}
		}
		return nil, nil, connectError(c.addr, c.tls, err)
	}
	return locks, func() { locks.Close(); rdb.Close() }, nil
}

// withRedisson fills in the lock options a command left at their defaults
// from those --redisson-config set.
func withRedisson(opts, r reentrant.Options) reentrant.Options {
	opts.WatchdogTimeout = cmp.Or(opts.WatchdogTimeout, r.WatchdogTimeout)
	opts.RenewBatchSize = cmp.Or(opts.RenewBatchSize, r.RenewBatchSize)
	opts.FairWaitTimeout = cmp.Or(opts.FairWaitTimeout, r.FairWaitTimeout)
	opts.PubSub = cmp.Or(opts.PubSub, r.PubSub)
	opts.ReplicaSync = cmp.Or(opts.ReplicaSync, r.ReplicaSync)
	opts.FencingCounterTTL = cmp.Or(opts.FencingCounterTTL, r.FencingCounterTTL)
	return opts
}

// dropLost is a log handler that leaves out the library's "lock lost"
// and "hold stalled" warnings: run and elect say it in a line of their own.
type dropLost struct{ slog.Handler }

func (d dropLost) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "relock: lock lost" || strings.HasPrefix(r.Message, "relock: hold stalled") {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d dropLost) WithAttrs(as []slog.Attr) slog.Handler { return dropLost{d.Handler.WithAttrs(as)} }
func (d dropLost) WithGroup(g string) slog.Handler       { return dropLost{d.Handler.WithGroup(g)} }

// flags returns a flag set for command name, and the connection flags
// registered on it. What it prints goes to a buffer that parse sends on:
// to stdout for --help, as relock --help's, to stderr for an error.
func (e env) flags(name string) (*flag.FlagSet, *connFlags) {
	fs := flag.NewFlagSet("relock "+name, flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	return fs, newConnFlags(fs)
}

package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// connFlags are the flags every command takes to reach Redis.
type connFlags struct {
	addr, user, sentinelMaster string
	tls                        bool
}

func newConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{}
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	fs.StringVar(&c.addr, "addr", addr, "Redis `host:port`; a comma-separated list for a cluster's seeds or the sentinels (default $REDIS_ADDR)")
	fs.StringVar(&c.user, "user", "", "ACL user name (the password is read from $REDIS_PASSWORD)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS")
	fs.StringVar(&c.sentinelMaster, "sentinel-master", "", "with sentinels at --addr, the `name` of the master set")
	return c
}

// redis connects to Redis: a single server, a cluster (found out from the
// server) or, with --sentinel-master, a Sentinel-managed master.
func (c *connFlags) redis() (rueidis.Client, error) {
	o := rueidis.ClientOption{
		InitAddress:  strings.Split(c.addr, ","),
		Username:     c.user,
		Password:     os.Getenv("REDIS_PASSWORD"),
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: 5 * time.Second},
	}
	if c.tls {
		host, _, err := net.SplitHostPort(o.InitAddress[0])
		if err != nil {
			return nil, fmt.Errorf("--addr %q: %w", c.addr, err)
		}
		o.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if c.sentinelMaster != "" {
		o.Sentinel = rueidis.SentinelOption{MasterSet: c.sentinelMaster}
	}
	rdb, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("could not reach Redis at %s: %w", c.addr, err)
	}
	return rdb, nil
}

// locks connects and returns a relock client on it; close it with the
// returned function.
func (c *connFlags) locks(e env, opts reentrant.Options) (*reentrant.Client, func(), error) {
	rdb, err := c.redis()
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = e.log
	locks, err := reentrant.New(rdb, opts)
	if err != nil {
		rdb.Close()
		if errors.Is(err, reentrant.ErrInvalidArgument) {
			return nil, nil, errExit{exitUsage, err}
		}
		return nil, nil, fmt.Errorf("could not reach Redis at %s: %w", c.addr, err)
	}
	return locks, func() { locks.Close(); rdb.Close() }, nil
}

// Command relock runs commands under relock's locks and shows them, from a
// shell, on the same keys Go and Java Redisson services use.
//
//	relock run [flags] NAME [--] CMD [ARGS...]
//	relock hold [flags] NAME
//	relock inspect [--json] [--value V]... NAME
//	relock list [--json] [PATTERN]
//	relock force-unlock [--yes] NAME
//	relock deadlocks [--json | --dot]
//	relock top [--once] [--json] [--sort waiting|ttl|name] [--limit N] [--interval D] [--watchdog-timeout D] [PATTERN]
//	relock events [--json] [--enable-notifications | --unchecked] NAME
//	relock elect [flags] NAME [--] CMD [ARGS...]
//	relock leader [--watch] [--json] NAME
//	relock version
//
// Flags may come before or after NAME; for run, the first word after NAME
// that is not a flag (or what follows "--") starts CMD, whose own flags
// stay its own. "relock CMD --help" lists a command's flags on stdout and
// exits 0. Every command takes the connection flags, before the command
// (relock --url URL list) or after it:
//
//	--url URL                  redis://[user:password@]host:port[/db], or
//	                           rediss:// for TLS (default $REDIS_URL); the
//	                           flags below, when given, override its parts
//	--addr host:port[,...]     Redis, the seeds of a cluster, or with
//	                           --sentinel-master the sentinels
//	                           (default $REDIS_ADDR, else 127.0.0.1:6379)
//	--db N                     the database (Redisson's database setting)
//	--user NAME                ACL user (default $REDIS_USERNAME); the
//	                           password is read from $REDIS_PASSWORD
//	--tls                      connect with TLS; --tls-ca FILE trusts that
//	                           CA, --tls-cert FILE and --tls-key FILE present
//	                           a client certificate, --tls-insecure skips
//	                           the server's certificate check (each of them
//	                           implies --tls, as a rediss:// address does)
//	--connect-timeout D        give up connecting after D (default 5s)
//	--sentinel-master NAME     ask the sentinels at --addr for NAME's master
//	--redisson-config FILE     connect, and set the lock options, as this
//	                           Redisson YAML config does (instead of --url);
//	                           the flags above, and --watchdog, when given,
//	                           override it
//
// # top
//
// top shows the held locks matching PATTERN (default all), refreshed every
// --interval (1s) until interrupted, as top(1) does: for each, its kind,
// TTL, the clients waiting on its channel (PUBSUB NUMSUB: each relock or
// Redisson client subscribes once, however many of its callers wait), the
// owners queued (fair and priority locks) and the holders; a line of
// totals with the commands the frame cost; and the deadlocks found (see
// deadlocks). It shows the --limit (50) locks most waited on, or with
// --sort name the first. In a terminal, keys act at once: p pauses and
// resumes, s steps the order (waiting, ttl, name), / reads a new PATTERN
// up to Enter (Esc keeps the old), q quits. --once prints one frame and
// exits, --json prints each frame as one line of JSON. A frame's cost is bounded: at most 10
// SCAN pages of 1,000 keys per node, going on in the next frame (the
// header says scanning), and five pipelined commands per lock shown; see
// docs/operations.md.
//
// # events
//
// events prints what happens to NAME until interrupted (package
// reentrant/events; see docs/events.md): a line per holder acquiring or
// releasing, per expiry with the holders it took, per deletion by anyone
// but a release, per count changed, with the time; --json prints one
// object per line. It needs the server's keyspace notifications
// (notify-keyspace-events Kgxh$, or KA) and exits 78 (EX_CONFIG: the
// server is not set up for it) naming the flags missing;
// --enable-notifications adds them on the key's node, --unchecked skips
// the check (a server that refuses CONFIG, which also exits 78).
//
// # elect, leader
//
// elect campaigns in election NAME (package reentrant/election; see
// docs/election.md) and, once it leads, runs CMD as run does under a lock,
// with RELOCK_NAME, RELOCK_OWNER and RELOCK_TERM, the term (a fencing
// token: RELOCK_TOKEN is the same). When CMD exits, relock resigns (the
// next candidate leads at once) and exits with CMD's status. If leadership
// is lost while CMD runs, CMD gets SIGTERM, then SIGKILL after --grace,
// and relock exits 75; with --keep it campaigns again instead, and runs
// CMD again once it leads. --value V is what the leader proclaims
// (default host:pid); --watchdog D how long a dead leader keeps leading.
//
// leader prints who leads election NAME: value, term, owner and since; it
// exits 1 when nobody does. With --watch it prints every change, woken by
// the election's messages, until interrupted, and says so when it cannot
// see who leads (Redis unreachable, a read refused) rather than keep the
// last leader on screen; --json prints one object per line, with
// "leading" true or false and "error" when it cannot see. inspect and
// list show an election's leader beside its lock.
//
// # run, hold
//
// run takes lock NAME, runs CMD with RELOCK_NAME and RELOCK_OWNER (and,
// with --fenced, RELOCK_TOKEN, the fencing token) in its environment,
// forwards SIGINT and SIGTERM to it, releases the lock when it exits, and
// exits with its status. Without -n or -w it waits as long as the lock is
// held. The watchdog keeps the lock while CMD runs (--watchdog sets its
// timeout, default 30s or --redisson-config's lockWatchdogTimeout, renewed
// every third of it); --lease D holds it for D
// at most instead. If the lock is lost while CMD runs (deleted, expired, or
// Redis unreachable past the timeout), CMD gets SIGTERM, then SIGKILL after
// --grace (default 10s), and relock exits 75.
//
// With --progress-within D, CMD must report progress at least every D
// with systemd's notify protocol (sd_notify(3)): relock gives it
// NOTIFY_SOCKET, a socket of its own, and WATCHDOG_USEC, and counts each
// WATCHDOG=1 as progress, so systemd-notify WATCHDOG=1 and programs that
// support a systemd watchdog work unchanged. A CMD that goes D without a
// report gets SIGTERM, then SIGKILL after --grace, the lock is given back
// at once, and relock exits 124 (see docs/long-jobs.md). elect takes it too,
// for a leader.
//
// On Linux CMD dies with relock: it runs behind a guard process that
// SIGKILLs it and every process below it the moment relock dies, by
// SIGKILL too, so it never runs on once the lock may pass to another
// (see docs/operations.md; elsewhere a relock killed with SIGKILL leaves
// CMD running).
//
// What is taken: a plain lock; with --fenced a fenced lock (CMD gets
// RELOCK_TOKEN); with --shared the read side of read-write lock NAME,
// shared with other readers as flock -s is; with --permits N one permit
// of permit-expirable semaphore NAME of N permits (set to N if it has
// none), so that up to N run at once, as consul lock -n does (CMD's
// RELOCK_OWNER is then the permit's id); with --value V (repeated for
// more) the values V of group lock NAME, all at once (Redisson's
// getMultiLock(NAME, values), values as StringCodec writes them). -w and
// --wait are one flag.
// -v (--verbose) says who holds the lock when the wait starts, and when it
// is taken and released.
//
// hold takes NAME as run does, prints "NAME held by OWNER" on stdout, and
// holds it until relock gets SIGINT or SIGTERM (then it releases and exits
// 0), as etcdctl lock NAME does; if the lock is lost first it exits 75.
//
// Exit status of run and hold:
//
//	CMD's status     CMD ran (128+n if a signal n killed it); hold: 0
//	1, or -E CODE    the lock was held by someone else (-n, or -w ran out)
//	2                bad usage
//	69               Redis could not be reached, or answered with an error
//	75               the lock was lost while held; CMD was stopped
//	124              CMD went --progress-within without reporting
//	                 progress; it was stopped and the lock given back
//	77               Redis refused the credentials, or the ACL user may not
//	                 do what relock needs
//	126, 127         CMD could not be run (not executable, not found)
//	128+n            relock got signal n while waiting for the lock
//
// When the lock is not acquired, one line on stderr says why; a lost lock
// is reported once.
//
// # inspect, list, force-unlock, deadlocks
//
// inspect shows what key NAME is (lock, fair lock, priority lock, fenced
// lock, read-write lock, semaphore, permit-expirable semaphore, count-down
// latch, rate limiter), its holders and their counts, its TTL, a fair
// lock's queue and deadlines, a priority lock's queue in the order it will
// be served (each waiter's priority and how long it has waited), and a
// fenced lock's last token. A semaphore and a latch are
// both a number in a string key: inspect tells them apart by who listens
// on their channels, and says so when it cannot.
//
// list finds lock-shaped keys (hashes whose fields are owners, and group
// locks' hashes) with SCAN, never KEYS, on every master of a cluster, and
// shows their holders (a group lock's as value=owner×count) and TTLs.
// PATTERN is SCAN's MATCH pattern, * by default.
//
// force-unlock deletes a lock whoever holds it (a group lock whole, every
// value with it) and publishes the release, so waiters wake at once. It shows the lock and asks for "y" on standard
// input (whether or not that is a terminal; no answer is a no) unless
// --yes is given, and refuses keys that are not lock-shaped.
//
// deadlocks prints the waits-for edges between owners that relock clients
// registered for deadlock detection (waits longer than their
// DeadlockTimeout by owners that may hold locks; see docs/deadlocks.md),
// one per holder of the lock waited for, and every cycle among them. It
// exits 1 when it finds a cycle. --dot prints the graph for Graphviz
// (relock deadlocks --dot | dot -Tsvg > waits.svg), each cycle in red.
//
// inspect, list, force-unlock and deadlocks exit 0 on success, 1 when the
// key is not there or not a lock (force-unlock) or a cycle was found
// (deadlocks), 2 on bad usage, 69 when Redis cannot be reached and 77 when
// it refuses the credentials or the user.
package main

// Package scripts is relock's wire layer: every Lua script relock runs, the
// Redis names they touch, and a typed Go wrapper for each. It is the only
// place Lua lives. It serves relock's own packages (reentrant and its
// add-ons, the CLI, the tests' Redisson peer) and makes no compatibility
// promise to importers: its names and signatures change with the
// protocol. Programs use package reentrant.
//
// Each script is its own embedded .lua file whose header documents its KEYS,
// ARGV and reply; each has one typed Go wrapper here. The layouts, names and
// replies are Redisson's (3.22 and later), so Java Redisson services and Go
// services using relock can contend for the same locks.
//
// Scripts run as EVALSHA and fall back to EVAL when the server answers
// NOSCRIPT (after SCRIPT FLUSH, a restart or a failover). They are never
// retried automatically: a lock script sent twice could count a hold twice.
// Callers decide what an error with an unknown outcome means; see [IsReply].
//
// A [Conn] with Replicas above 0, or [Connected], follows each script with
// WAIT in the same pipeline, and the wrappers report writes the replicas
// did not confirm with [ErrNotSynced] or [ErrSyncRefused] beside their
// result.
package scripts

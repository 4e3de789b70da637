// Package redistest runs real redis-server processes, and embedded miniredis
// servers, for relock's tests.
//
// Each [Server] is its own redis-server on a free loopback port with its own
// temporary directory; a test can stop, kill, pause, resume and restart it,
// and it is killed and removed when the test ends, pass or fail. Nothing here
// touches a Redis that was already running (such as one on 6379).
//
// When redis-server is not on PATH, [Start] skips the test and says how to
// install it; with RELOCK_REQUIRE_REDIS=1 in the environment it fails the
// test instead, so CI cannot pass by skipping.
package redistest

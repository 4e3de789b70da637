/*
 * clockshift: a preloaded library that moves a process's wall clock by an
 * offset a test changes while the process runs; its monotonic clock is left
 * alone. redistest builds it (cc -shared) and preloads it into redis-server
 * for clock faults: Redis expires keys, and answers TIME, on the wall clock.
 *
 * The offset, in microseconds, is read on every call from a file mapped at
 * load time (RELOCK_CLOCK_FILE): two copies of a signed 64-bit integer,
 * written together; a read that finds them different (a write under way)
 * reads again. The real clock comes from the clock_gettime system call,
 * not from the next library's symbol, so nothing here allocates or
 * recurses at load time (Debian's libfaketime 0.9.10 hangs redis-server
 * 7.0 at start that way).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *shift;

__attribute__((constructor)) static void load(void) {
	const char *path = getenv("RELOCK_CLOCK_FILE");
	if (!path)
		return;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	void *p = mmap(NULL, 16, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		shift = p;
}

static int64_t offset(void) {
	if (!shift)
		return 0;
	for (;;) {
		int64_t a = shift[0], b = shift[1];
		if (a == b)
			return a;
	}
}

static int real(clockid_t id, struct timespec *ts) {
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static void moved(struct timespec *ts) {
	int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset() * 1000;
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int r = real(id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		moved(ts);
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0 && tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// store is oracle A: one counter that workers increment by read-modify-write
// under the lock. Every operation, the read as well as the write, carries
// the fencing token, and a token below the highest seen is refused: a read
// that feeds a write must register its token, or an older holder's write
// could land between a newer holder's read and write. An accepted write
// whose read value is not the current one is a lost update: fencing did not
// stop an interleaving.
type store struct {
	mu       sync.Mutex
	value    int64
	high     int64
	accepted int64
	stale    int64 // refused reads and writes: token below the highest seen
	lost     int64 // accepted, but read an old value
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/read":
		token, _ := strconv.ParseInt(r.FormValue("token"), 10, 64)
		if token < s.high {
			s.stale++
			http.Error(w, "stale token", http.StatusConflict)
			return
		}
		s.high = token
		fmt.Fprint(w, s.value)
	case "/write":
		token, _ := strconv.ParseInt(r.FormValue("token"), 10, 64)
		old, _ := strconv.ParseInt(r.FormValue("old"), 10, 64)
		if token < s.high {
			s.stale++
			http.Error(w, "stale token", http.StatusConflict)
			return
		}
		if old != s.value {
			s.lost++
		}
		s.high, s.value = token, old+1
		s.accepted++
	}
}

// storeClient talks to the store over its Unix socket.
type storeClient struct{ c *http.Client }

func newStoreClient(socket string) storeClient {
	return storeClient{&http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}}
}

// read returns the value; ok is false when the store refused the token.
func (s storeClient) read(token int64) (v int64, ok bool, err error) {
	resp, err := s.c.Get("http://store/read?token=" + strconv.FormatInt(token, 10))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, nil
	}
	_, err = fmt.Fscan(resp.Body, &v)
	return v, err == nil, err
}

// write reports whether the store accepted it.
func (s storeClient) write(token, old int64) (bool, error) {
	resp, err := s.c.PostForm("http://store/write", map[string][]string{
		"token": {strconv.FormatInt(token, 10)}, "old": {strconv.FormatInt(old, 10)},
	})
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

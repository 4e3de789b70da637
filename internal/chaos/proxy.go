package chaos

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"time"
)

// proxy is a TCP proxy between the workers and redis-server that injects
// network faults: latency, a blackhole (nothing moves until it lifts, as with
// packets dropped and retransmitted), connection resets, and lost replies (a
// command's reply dropped after the server ran it, then the connection reset:
// the caller cannot know whether it ran).
type proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	links    map[*link]struct{}
	latency  time.Duration
	hole     chan struct{} // closed when the blackhole lifts; nil when there is none
	loseNext int           // replies to scripts still to lose
	lostAt   []int64       // when each reply was lost, on CLOCK_MONOTONIC
	wg       sync.WaitGroup
}

// link is one client connection and its upstream connection.
type link struct {
	client, server net.Conn
	ranScript      bool // the last bytes from the client held a script call
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, c, s, true)
		go p.pipe(l, s, c, false)
	}
}

// chunk is bytes read from one side, stamped with when they were read.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through a queue, so latency delays each chunk by
// the same amount without stacking up behind the ones before it.
func (p *proxy) pipe(l *link, src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	q := make(chan chunk, 64)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		for range q { // until the reader sees the closed connection
		}
	}()
	defer p.drop(l)
	for c := range q {
		p.mu.Lock()
		hole, latency := p.hole, p.latency
		p.mu.Unlock()
		if hole != nil {
			<-hole
		}
		if d := time.Until(c.at.Add(latency)); d > 0 {
			time.Sleep(d)
		}
		p.mu.Lock()
		if fromClient {
			l.ranScript = bytes.Contains(c.b, []byte("EVAL"))
		} else if l.ranScript && p.loseNext > 0 {
			p.loseNext--
			p.lostAt = append(p.lostAt, mono())
			p.mu.Unlock()
			return // drop the reply and reset the link
		}
		p.mu.Unlock()
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// drop resets the client side (RST, as a broken network would) and closes
// the server side.
func (p *proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	if tc, ok := l.client.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	l.client.Close()
	l.server.Close()
}

// setLatency delays every chunk in both directions by d from now on.
func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// blackhole stops all traffic until the returned func is called.
func (p *proxy) blackhole() (lift func()) {
	hole := make(chan struct{})
	p.mu.Lock()
	p.hole = hole
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.hole = nil
		p.mu.Unlock()
		close(hole)
	}
}

// reset breaks every connection with a TCP reset.
func (p *proxy) reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		p.drop(l)
	}
}

// loseReply drops the next reply to a script call and resets its link.
func (p *proxy) loseReply() {
	p.mu.Lock()
	p.loseNext++
	p.mu.Unlock()
}

// lostReplies returns when each reply was lost.
func (p *proxy) lostReplies() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lostAt)
}

func (p *proxy) close() {
	p.ln.Close()
	p.reset()
	p.wg.Wait()
}

// Package fencetest checks that a store refuses stale fencing tokens: the
// paused holder's late write, a stale read-then-write, the same token used
// twice, tokens below 1, holders racing, and tokens the size of an
// election's terms. Run it on a fence.Guard over a real database, or on a
// store of one's own that keeps the same promise.
package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/relock-go/relock/reentrant/fence"
)

// A Store keeps one value per resource, read and written under fencing
// tokens. Both calls must refuse, with an error wrapping
// fence.ErrStaleToken and changing nothing, a token smaller than the
// largest that has used the resource, and raise that largest to their own
// token otherwise: a read raises it as a write does. A token below 1 is
// an error (reentrant.ErrInvalidArgument for relock's). Read of a value
// never written returns "".
type Store interface {
	Write(ctx context.Context, resource string, token int64, value string) error
	Read(ctx context.Context, resource string, token int64) (string, error)
}

// Run checks s, one subtest per promise, each on a resource of its own
// (the promise's name, prefixed with prefix).
func Run(t *testing.T, prefix string, s Store) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.check(context.Background(), s, prefix+c.name); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check checks s as Run does, and returns what failed, one error per
// promise broken: for a test that shows a store's bug is caught.
func Check(ctx context.Context, prefix string, s Store) []error {
	var errs []error
	for _, c := range cases {
		if err := c.check(ctx, s, prefix+c.name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errs
}

// checker runs the store through one promise on resource r.
type checker struct {
	ctx context.Context
	s   Store
	r   string
}

func (c checker) write(token int64, v string) error {
	if err := c.s.Write(c.ctx, c.r, token, v); err != nil {
		return fmt.Errorf("write %q under %d: %w", v, token, err)
	}
	return nil
}

func (c checker) read(token int64) (string, error) {
	v, err := c.s.Read(c.ctx, c.r, token)
	if err != nil {
		return "", fmt.Errorf("read under %d: %w", token, err)
	}
	return v, nil
}

// stale returns an error unless err is ErrStaleToken.
func stale(err error, what string) error {
	if !errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("%s: got %v, want ErrStaleToken", what, err)
	}
	return nil
}

// want returns an error unless the resource's value is v.
func (c checker) want(token int64, v, what string) error {
	got, err := c.read(token)
	if err == nil && got != v {
		err = fmt.Errorf("%s: the value is %q, want %q", what, got, v)
	}
	return err
}

var cases = []struct {
	name  string
	check func(ctx context.Context, s Store, r string) error
}{
	{"paused holder's late write", func(ctx context.Context, s Store, r string) error {
		c := checker{ctx, s, r}
		return errors.Join(c.write(1, "old holder"), c.write(2, "new holder"),
			stale(s.Write(ctx, r, 1, "late"), "the old holder's write after the new one's"),
			c.want(2, "new holder", "after the late write"))
	}},
	{"stale read then write", func(ctx context.Context, s Store, r string) error {
		c := checker{ctx, s, r}
		if err := c.write(1, "0"); err != nil {
			return err
		}
		if _, err := c.read(1); err != nil {
			return err
		}
		if _, err := c.read(2); err != nil { // the new holder reads: the old one may not write now
			return err
		}
		_, late := s.Read(ctx, r, 1)
		return errors.Join(stale(s.Write(ctx, r, 1, "1"), "the old holder's write after the new holder read"),
			stale(late, "the old holder's read after the new holder's"))
	}},
	{"same token twice", func(ctx context.Context, s Store, r string) error {
		c := checker{ctx, s, r}
		return errors.Join(c.write(5, "first"), c.write(5, "second"), c.want(5, "second", "after two writes"))
	}},
	{"tokens below 1", func(ctx context.Context, s Store, r string) error {
		var errs []error
		for _, token := range []int64{0, -1} {
			if err := s.Write(ctx, r, token, "x"); err == nil || errors.Is(err, fence.ErrStaleToken) {
				errs = append(errs, fmt.Errorf("write under %d: got %v, want an error that is not ErrStaleToken", token, err))
			}
		}
		return errors.Join(append(errs, checker{ctx, s, r}.write(1, "after"))...)
	}},
	{"terms and clock-floored tokens", func(ctx context.Context, s Store, r string) error {
		// An election's terms and the fenced lock's tokens after a counter
		// loss are the server's clock in µs: past 2^50, and far past 2^31.
		c := checker{ctx, s, r}
		const term = int64(1796641106028101)
		return errors.Join(c.write(term, "leader"),
			stale(s.Write(ctx, r, term-1, "earlier"), "a term one below"),
			stale(s.Write(ctx, r, 1<<31, "int32"), "a token that fits 32 bits"),
			c.write(term+1, "next leader"))
	}},
	{"holders racing", func(ctx context.Context, s Store, r string) error {
		// Each holder reads, then writes what it read plus one, in
		// separate calls. A write is accepted only if no larger token used
		// the resource between its read and write, so accepted writes
		// never overlap: the value is the count of accepted writes. A
		// refused write that landed, or a stale one accepted, loses an
		// increment.
		if err := (checker{ctx, s, r}).write(1, "0"); err != nil {
			return err
		}
		const holders = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		accepted := 0
		for i := range holders {
			token := int64(2 + i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := s.Read(ctx, r, token)
				if err != nil {
					return // a newer holder read first
				}
				n, _ := strconv.Atoi(v)
				if err := s.Write(ctx, r, token, strconv.Itoa(n+1)); err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		got, err := checker{ctx, s, r}.read(holders + 2)
		switch {
		case err != nil:
			return err
		case accepted == 0:
			return errors.New("no holder's increment was accepted")
		case got != strconv.Itoa(accepted):
			return fmt.Errorf("the value is %s after %d accepted increments: an increment was lost or a refused write landed", got, accepted)
		}
		return nil
	}},
	{"resources apart", func(ctx context.Context, s Store, r string) error {
		a, b := checker{ctx, s, r + "/a"}, checker{ctx, s, r + "/b"}
		return errors.Join(a.write(10, "a"), b.write(1, "b"), b.want(1, "b", "a small token on another resource"))
	}},
}

// GuardStore is the Store of a fence.Guard over a table of values that
// CreateValues makes: a write is an upsert and a read a SELECT, each in
// the Guard's transaction.
type GuardStore struct {
	Guard  *fence.Guard
	Upsert string // the dialect's upsert of (resource, value) into Table
	Select string // SELECT value FROM Table WHERE resource = ?
}

// NewGuardStore returns a GuardStore on g with the statements of dialect
// d over table.
func NewGuardStore(g *fence.Guard, d fence.Dialect, table string) GuardStore {
	s := GuardStore{Guard: g}
	switch d.String() {
	case "postgresql":
		s.Upsert = fmt.Sprintf("INSERT INTO %s (resource, value) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value", table)
		s.Select = fmt.Sprintf("SELECT value FROM %s WHERE resource = $1", table)
	case "mysql":
		s.Upsert = fmt.Sprintf("INSERT INTO %s (resource, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)", table)
		s.Select = fmt.Sprintf("SELECT value FROM %s WHERE resource = ?", table)
	default:
		s.Upsert = fmt.Sprintf("INSERT INTO %s (resource, value) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET value = excluded.value", table)
		s.Select = fmt.Sprintf("SELECT value FROM %s WHERE resource = ?", table)
	}
	return s
}

// ValuesDDL is the DDL of GuardStore's table of values.
func ValuesDDL(d fence.Dialect, table string) string {
	key := "TEXT"
	if d.String() == "mysql" {
		key = "VARCHAR(255)"
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (resource %s NOT NULL PRIMARY KEY, value TEXT NOT NULL)", table, key)
}

// Write writes value under token.
func (s GuardStore) Write(ctx context.Context, resource string, token int64, value string) error {
	return s.Guard.Do(ctx, resource, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.Upsert, resource, value)
		return err
	})
}

// Read reads under token.
func (s GuardStore) Read(ctx context.Context, resource string, token int64) (string, error) {
	var v string
	err := s.Guard.Do(ctx, resource, token, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.Select, resource).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	return v, err
}

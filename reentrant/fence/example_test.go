package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/fence"
)

// A job that holds a fenced lock writes to PostgreSQL under its token: a
// write from a holder paused past its lease, after the next holder's, is
// refused instead of landing. (db is opened with a driver of the user's
// choosing, pgx's stdlib here; this example is compiled, not run.)
func ExampleGuard_Do() {
	var db *sql.DB // sql.Open("pgx", dsn)
	var locks *reentrant.Client
	ctx := context.Background()

	g, err := fence.New(db, fence.PostgreSQL, fence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := g.CreateTable(ctx); err != nil { // or g.Schema() in a migration
		log.Fatal(err)
	}
	mu := locks.FencedLock("order:42")
	held, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer mu.Unlock(held)
	token, _ := reentrant.TokenFrom(held)
	err = g.Do(held, "order:42", token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(held, "UPDATE orders SET state = $1 WHERE id = $2", "shipped", 42)
		return err
	})
	if errors.Is(err, fence.ErrStaleToken) {
		log.Print("a newer holder has written order 42: this one lost the lock")
	}
}

// A holder refused although it holds the lock (Redis lost the counter
// while its clock ran ahead, then was set right: docs/fencing.md) takes a
// token past the store's and writes; the store refuses the older holder
// from then on. A refusal that was right ends in ErrNotHeld. (Compiled,
// not run.)
func ExampleTokenPast() {
	var db *sql.DB // sql.Open("pgx", dsn)
	var locks *reentrant.Client
	ctx := context.Background()
	g, err := fence.New(db, fence.PostgreSQL, fence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	write := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE orders SET state = $1 WHERE id = $2", "shipped", 42)
		return err
	}
	mu := locks.FencedLock("order:42")
	held, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer mu.Unlock(held)
	token, _ := reentrant.TokenFrom(held)
	err = g.Do(held, "order:42", token, write)
	if errors.Is(err, fence.ErrStaleToken) {
		seen, serr := g.Token(held, "order:42")
		if serr != nil {
			log.Fatal(serr)
		}
		if held, err = fence.TokenPast(held, locks, "order:42", seen); err != nil {
			log.Fatal(err) // ErrNotHeld: the refusal was right
		}
		token, _ = reentrant.TokenFrom(held)
		err = g.Do(held, "order:42", token, write)
	}
	if err != nil {
		log.Fatal(err)
	}
}

package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// deleteChunkSQL deletes up to $4 deliveries of the deleted endpoint $1
// after the cursor ($2, $3): the candidates are read in
// deliveries_endpoint's order (endpoint_id, state, id) from the cursor
// (each chunk deleted leaves dead entries that a chunk starting from the
// endpoint's first entry would walk again), then locked in id order, as
// completions and holds lock deliveries (no deadlock with them), with no
// condition but the endpoint re-checked after a lock wait: a candidate
// whose state changed meanwhile is deleted all the same. It answers the
// candidates found, the rows deleted and the last candidate's state and
// id (the next cursor).
const deleteChunkSQL = `WITH c AS MATERIALIZED (
		SELECT state, id FROM deliveries WHERE endpoint_id = $1 AND (state, id) > ($2::text, $3::text)
		ORDER BY state, id LIMIT $4),
	l AS MATERIALIZED (
		SELECT id FROM deliveries WHERE id = ANY (ARRAY(SELECT id FROM c)) AND endpoint_id = $1 ORDER BY id FOR UPDATE),
	d AS (DELETE FROM deliveries WHERE id = ANY (ARRAY(SELECT id FROM l)) RETURNING 1)
	SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d),
		COALESCE((SELECT state FROM c ORDER BY state DESC, id DESC LIMIT 1), ''),
		COALESCE((SELECT id FROM c ORDER BY state DESC, id DESC LIMIT 1), '')`

// deletion is the deletion of a deleted endpoint's deliveries after the
// cursor (afterState, afterID; both empty: from the first).
type deletion struct {
	id                  string
	afterState, afterID string
	// limit is the most chunks deleteChunks runs (0: until done).
	limit int
}

// fromStart reports whether d's next chunk starts from the endpoint's
// first delivery.
func (d deletion) fromStart() bool { return d.afterState == "" && d.afterID == "" }

// deleteChunk deletes d's next chunk in tx and answers the deletion as it
// goes on (its cursor moved) and whether it is done. A chunk that finds
// fewer than moveChunk after a cursor has passed every delivery there was
// when the delete committed, but one whose state changed behind the
// cursor meanwhile (a completion, a rescue or a deferral of a delivery
// leased before the delete; no delivery of the endpoint is created once
// its row is gone: every writer reads it under the tenant's lock) may be
// left: the deletion starts over from the first, and is done when a chunk
// from the first finds fewer than moveChunk (it found every row left).
func deleteChunk(ctx context.Context, tx pgx.Tx, d deletion) (deletion, int64, bool, error) {
	var (
		found, deleted int64
		state, id      string
	)
	if err := tx.QueryRow(ctx, deleteChunkSQL, d.id, d.afterState, d.afterID, moveChunk).Scan(&found, &deleted, &state, &id); err != nil {
		return d, 0, false, err
	}
	switch {
	case found == moveChunk:
		d.afterState, d.afterID = state, id
	case d.fromStart():
		return d, deleted, true, nil
	default:
		d.afterState, d.afterID = "", ""
	}
	return d, deleted, false, nil
}

// markDeletionSQL renews the mark of endpoint $1's deletion with its
// cursor ($2, $3), at the server's clock when it runs; no row: another
// node finished it.
const markDeletionSQL = `UPDATE endpoint_deletions SET deleting_since = clock_timestamp(), after_state = $2, after_id = $3
	WHERE endpoint_id = $1 RETURNING deleting_since`

// startDeletion deletes, in tx (the delete's transaction, after the
// endpoint's row), the first chunk of endpoint id's deliveries and, when
// more may be left, records the deletion (endpoint_deletions) with its
// cursor. It answers the deletion left (ok false: none).
func startDeletion(ctx context.Context, tx pgx.Tx, id string) (deletion, bool, error) {
	d, _, done, err := deleteChunk(ctx, tx, deletion{id: id})
	if err != nil || done {
		return d, false, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO endpoint_deletions (endpoint_id, deleting_since, after_state, after_id) VALUES ($1, clock_timestamp(), $2, $3)`,
		d.id, d.afterState, d.afterID)
	return d, err == nil, err
}

// deleteChunks deletes d's chunks, one per transaction (no tenant lock: no
// delivery of the endpoint is created any more), renewing the deletion's
// mark with each, and stops when it is done (its mark deleted in the
// chunk's transaction), when another node finished it, or after d.limit
// chunks. It answers the deliveries deleted and the mark the last chunk
// left (nil: done, here or by another node). A chunk waits at most
// sweepLockWait for a row's lock, the delete's own (DeleteEndpoint,
// DeleteSource, which run them whatever their caller's context) as the
// rescue's (finishDeletions): a row a stuck session holds fails the
// chunk, and the rest is left marked for the rescue, instead of holding
// the call (and Close, which waits for the pool's connections) for as
// long as the session holds the row.
func (s *Store) deleteChunks(ctx context.Context, d deletion) (int64, *time.Time, error) {
	var total int64
	for i := 0; d.limit <= 0 || i < d.limit; i++ {
		if s.beforeChunk != nil {
			s.beforeChunk()
		}
		var (
			mark *time.Time
			n    int64
		)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// A chunk lost in a crash of the server is lost with its
			// cursor (one transaction): the next chunk does it again.
			if _, err := tx.Exec(ctx, asyncCommit); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, setSweepLockTimeout, s.sweepLockSetting()); err != nil {
				return err
			}
			next, deleted, done, err := deleteChunk(ctx, tx, d)
			if err != nil {
				return err
			}
			n = deleted
			if done {
				_, err := tx.Exec(ctx, "DELETE FROM endpoint_deletions WHERE endpoint_id = $1", d.id)
				return err
			}
			d = next
			err = tx.QueryRow(ctx, markDeletionSQL, d.id, d.afterState, d.afterID).Scan(&mark)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // finished by another node meanwhile
			}
			return err
		})
		if err != nil {
			return total, nil, wrap("delete the endpoint's deliveries", err)
		}
		total += n
		if mark == nil {
			return total, nil, nil
		}
		if d.limit > 0 && i == d.limit-1 {
			return total, mark, nil
		}
	}
	return total, nil, nil
}

// finishDeletions finishes, in part (sweepChunks chunks), the oldest
// deletion of a deleted endpoint's deliveries whose mark no chunk renewed
// for staleRelease (its node stopped between chunks: DeleteEndpoint,
// DeleteSource), and leaves its mark stale when more is left, for the next
// round of any node. A deletion whose chunk fails (a row a stuck session
// holds) is backed off (tried again after staleRelease) and the next
// oldest tried (up to 4, and up to sweepFailures failures), so that it
// does not stop every other. Two nodes may work on one deletion at
// once; each chunk re-checks its rows.
func (s *Store) finishDeletions(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT endpoint_id, after_state, after_id, deleting_since FROM endpoint_deletions
		WHERE deleting_since < clock_timestamp() - interval '`+staleRelease+`' ORDER BY deleting_since LIMIT 4`)
	if err != nil {
		return wrap("finish a stopped delete", err)
	}
	type stale struct {
		d    deletion
		mark time.Time
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stale, error) {
		var st stale
		err := row.Scan(&st.d.id, &st.d.afterState, &st.d.afterID, &st.mark)
		return st, err
	})
	if err != nil {
		return wrap("finish a stopped delete", err)
	}
	// A failed delete is backed off (its mark renewed: tried again after
	// staleRelease, behind the others), as finishReleases backs off a
	// failed move, and a round gives up after sweepFailures failures.
	var (
		errs     []error
		failures int
	)
	for _, st := range found {
		d := st.d
		d.limit = sweepChunks
		_, mark, err := s.deleteChunks(ctx, d)
		if err != nil {
			errs = append(errs, wrap("finish a stopped delete", err))
			if berr := s.sweepBackOff(ctx, backOffDeletionSQL, d.id, st.mark); berr != nil {
				errs = append(errs, wrap("finish a stopped delete: back off", berr))
			}
			if failures++; failures >= sweepFailures || ctx.Err() != nil {
				break
			}
			continue
		}
		if mark != nil {
			_, err = s.pool.Exec(ctx, `UPDATE endpoint_deletions SET deleting_since = clock_timestamp() - interval '`+staleRelease+`' - interval '1 second'
				WHERE endpoint_id = $1 AND deleting_since = $2`, d.id, *mark)
			if err != nil {
				errs = append(errs, wrap("finish a stopped delete", err))
			}
		}
		break
	}
	return errors.Join(errs...)
}

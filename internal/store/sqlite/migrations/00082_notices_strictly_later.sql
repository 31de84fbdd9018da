-- +goose Up
-- The notices of one endpoint are written at strictly increasing times,
-- in outbox order, whichever statement wrote them: a change that raises
-- two (endpoint.failing then endpoint.disabled at one failed attempt,
-- endpoint.disabled and delivery.dead_lettered at a 410) gave both the
-- same occurred_at, and their deliveries may arrive in either order, so a
-- receiver ordering by occurred_at could not tell which came last. A
-- notice written at or before the endpoint's latest pending one is moved
-- to one microsecond after it.
CREATE INDEX notices_endpoint ON notices (endpoint_id, created_at);
-- +goose StatementBegin
CREATE TRIGGER notices_strictly_later AFTER INSERT ON notices
WHEN NEW.created_at <= (SELECT max(created_at) FROM notices WHERE endpoint_id = NEW.endpoint_id AND id < NEW.id)
BEGIN
    UPDATE notices SET created_at = (SELECT max(created_at) FROM notices WHERE endpoint_id = NEW.endpoint_id AND id < NEW.id) + 1
    WHERE id = NEW.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER notices_strictly_later;
DROP INDEX notices_endpoint;

-- +goose Up
-- The notices of one endpoint are written at strictly increasing times,
-- in outbox order, whichever statement wrote them: a change that raises
-- two (endpoint.failing then endpoint.disabled at one failed attempt,
-- endpoint.disabled and delivery.dead_lettered at a 410) gave both the
-- same occurred_at, and their deliveries may arrive in either order, so a
-- receiver ordering by occurred_at could not tell which came last. A
-- notice written at or before the endpoint's latest pending one is moved
-- to one microsecond after it. (A row-level BEFORE trigger sees the rows
-- its statement inserted before this one, so a multi-row insert is
-- covered; two transactions writing notices of one endpoint at the same
-- microsecond can still tie.)
CREATE INDEX notices_endpoint ON notices (endpoint_id, created_at);
-- +goose StatementBegin
CREATE FUNCTION notices_strictly_later() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    prev timestamptz;
BEGIN
    SELECT max(created_at) INTO prev FROM notices WHERE endpoint_id = NEW.endpoint_id;
    IF prev IS NOT NULL AND NEW.created_at <= prev THEN
        NEW.created_at := prev + interval '1 microsecond';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER notices_strictly_later BEFORE INSERT ON notices
    FOR EACH ROW EXECUTE FUNCTION notices_strictly_later();

-- +goose Down
DROP TRIGGER notices_strictly_later ON notices;
DROP FUNCTION notices_strictly_later();
DROP INDEX notices_endpoint;

-- +goose Up
-- Leases in a narrow table of their own (issue 18). A claim used to write
-- lease_owner and lease_until into the delivery row; both were in index
-- predicates (deliveries_due, deliveries_due_tenant, deliveries_leased), so
-- every claim was a non-HOT update: a new version of the wide row and an
-- entry in each of the five indexes that admit a leased row. Now a claim
-- only locks the delivery row and inserts (delivery id, owner, lease end)
-- here; a completion or a rescue deletes it. The due indexes hold every
-- pending delivery, leased or not, and the claim skips the leased ones by
-- a probe of this table's primary key. No foreign key: its check would
-- cost a claim one more lookup and row lock per delivery; the one
-- statement that deletes pending deliveries (deleting an endpoint) deletes
-- their leases, and the rescuer drops any expired lease left without its
-- delivery.
CREATE TABLE delivery_leases (
    delivery_id text COLLATE "C" PRIMARY KEY,
    owner       text NOT NULL,
    until       timestamptz NOT NULL
);
-- The rescue (until < now) and the claim's read-back of its own leases
-- (until = its lease end, owner = itself).
CREATE INDEX delivery_leases_until ON delivery_leases (until, owner);
INSERT INTO delivery_leases (delivery_id, owner, until)
    SELECT id, lease_owner, lease_until FROM deliveries WHERE lease_owner IS NOT NULL;
DROP INDEX deliveries_due;
DROP INDEX deliveries_due_tenant;
DROP INDEX deliveries_leased;
ALTER TABLE deliveries DROP COLUMN lease_owner, DROP COLUMN lease_until;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX deliveries_due_tenant ON deliveries (tenant, next_attempt_at) WHERE state = 'pending';

-- +goose Down
ALTER TABLE deliveries ADD COLUMN lease_owner text, ADD COLUMN lease_until timestamptz,
    ADD CHECK ((lease_owner IS NULL) = (lease_until IS NULL));
UPDATE deliveries d SET lease_owner = l.owner, lease_until = l.until FROM delivery_leases l WHERE l.delivery_id = d.id;
DROP INDEX deliveries_due;
DROP INDEX deliveries_due_tenant;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_due_tenant ON deliveries (tenant, next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE lease_owner IS NOT NULL;
DROP TABLE delivery_leases;

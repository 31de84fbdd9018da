-- +goose Up
-- Endpoint health rollups (GET /v1/endpoints/{id}/stats): per endpoint, one
-- row per minute (span 'm', kept 25 h) and one per hour (span 'h', kept
-- 8 days), added to by every completion batch in its transaction. The
-- counter columns are store.StatsCounters; start and the last_* times are
-- microseconds since the epoch (0: none).
CREATE TABLE endpoint_stats (
    endpoint_id              TEXT NOT NULL,
    span                     TEXT NOT NULL,
    start                    INTEGER NOT NULL,
    attempts                 INTEGER NOT NULL DEFAULT 0,
    successes                INTEGER NOT NULL DEFAULT 0,
    failures                 INTEGER NOT NULL DEFAULT 0,
    dead_letters             INTEGER NOT NULL DEFAULT 0,
    duration_sum_us          INTEGER NOT NULL DEFAULT 0,
    fail_timeout             INTEGER NOT NULL DEFAULT 0,
    fail_dns                 INTEGER NOT NULL DEFAULT 0,
    fail_connection_refused  INTEGER NOT NULL DEFAULT 0,
    fail_connection_reset    INTEGER NOT NULL DEFAULT 0,
    fail_tls                 INTEGER NOT NULL DEFAULT 0,
    fail_blocked             INTEGER NOT NULL DEFAULT 0,
    fail_network             INTEGER NOT NULL DEFAULT 0,
    fail_canceled            INTEGER NOT NULL DEFAULT 0,
    fail_redirect            INTEGER NOT NULL DEFAULT 0,
    fail_http_status         INTEGER NOT NULL DEFAULT 0,
    fail_other               INTEGER NOT NULL DEFAULT 0,
    status_2xx               INTEGER NOT NULL DEFAULT 0,
    status_3xx               INTEGER NOT NULL DEFAULT 0,
    status_4xx               INTEGER NOT NULL DEFAULT 0,
    status_5xx               INTEGER NOT NULL DEFAULT 0,
    status_none              INTEGER NOT NULL DEFAULT 0,
    dur_0                    INTEGER NOT NULL DEFAULT 0,
    dur_1                    INTEGER NOT NULL DEFAULT 0,
    dur_2                    INTEGER NOT NULL DEFAULT 0,
    dur_3                    INTEGER NOT NULL DEFAULT 0,
    dur_4                    INTEGER NOT NULL DEFAULT 0,
    dur_5                    INTEGER NOT NULL DEFAULT 0,
    dur_6                    INTEGER NOT NULL DEFAULT 0,
    dur_7                    INTEGER NOT NULL DEFAULT 0,
    dur_8                    INTEGER NOT NULL DEFAULT 0,
    dur_9                    INTEGER NOT NULL DEFAULT 0,
    dur_10                   INTEGER NOT NULL DEFAULT 0,
    dur_11                   INTEGER NOT NULL DEFAULT 0,
    dur_12                   INTEGER NOT NULL DEFAULT 0,
    dur_13                   INTEGER NOT NULL DEFAULT 0,
    last_success_at          INTEGER NOT NULL DEFAULT 0,
    last_failure_at          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint_id, span, start)
) WITHOUT ROWID;
CREATE INDEX endpoint_stats_expiry ON endpoint_stats (span, start);

-- +goose Down
DROP TABLE endpoint_stats;

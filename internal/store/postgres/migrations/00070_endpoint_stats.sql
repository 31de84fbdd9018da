-- +goose Up
-- Endpoint health rollups (GET /v1/endpoints/{id}/stats): per endpoint, one
-- row per minute (span 'm', kept 25 h) and one per hour (span 'h', kept
-- 8 days), added to by every completion batch in its round trip. The
-- counter columns are store.StatsCounters.
CREATE TABLE endpoint_stats (
    endpoint_id              text COLLATE "C" NOT NULL,
    span                     text NOT NULL,
    start                    timestamptz NOT NULL,
    attempts                 bigint NOT NULL DEFAULT 0,
    successes                bigint NOT NULL DEFAULT 0,
    failures                 bigint NOT NULL DEFAULT 0,
    dead_letters             bigint NOT NULL DEFAULT 0,
    duration_sum_us          bigint NOT NULL DEFAULT 0,
    fail_timeout             bigint NOT NULL DEFAULT 0,
    fail_dns                 bigint NOT NULL DEFAULT 0,
    fail_connection_refused  bigint NOT NULL DEFAULT 0,
    fail_connection_reset    bigint NOT NULL DEFAULT 0,
    fail_tls                 bigint NOT NULL DEFAULT 0,
    fail_blocked             bigint NOT NULL DEFAULT 0,
    fail_network             bigint NOT NULL DEFAULT 0,
    fail_canceled            bigint NOT NULL DEFAULT 0,
    fail_redirect            bigint NOT NULL DEFAULT 0,
    fail_http_status         bigint NOT NULL DEFAULT 0,
    fail_other               bigint NOT NULL DEFAULT 0,
    status_2xx               bigint NOT NULL DEFAULT 0,
    status_3xx               bigint NOT NULL DEFAULT 0,
    status_4xx               bigint NOT NULL DEFAULT 0,
    status_5xx               bigint NOT NULL DEFAULT 0,
    status_none              bigint NOT NULL DEFAULT 0,
    dur_0                    bigint NOT NULL DEFAULT 0,
    dur_1                    bigint NOT NULL DEFAULT 0,
    dur_2                    bigint NOT NULL DEFAULT 0,
    dur_3                    bigint NOT NULL DEFAULT 0,
    dur_4                    bigint NOT NULL DEFAULT 0,
    dur_5                    bigint NOT NULL DEFAULT 0,
    dur_6                    bigint NOT NULL DEFAULT 0,
    dur_7                    bigint NOT NULL DEFAULT 0,
    dur_8                    bigint NOT NULL DEFAULT 0,
    dur_9                    bigint NOT NULL DEFAULT 0,
    dur_10                   bigint NOT NULL DEFAULT 0,
    dur_11                   bigint NOT NULL DEFAULT 0,
    dur_12                   bigint NOT NULL DEFAULT 0,
    dur_13                   bigint NOT NULL DEFAULT 0,
    last_success_at          timestamptz,
    last_failure_at          timestamptz,
    PRIMARY KEY (endpoint_id, span, start)
);
CREATE INDEX endpoint_stats_expiry ON endpoint_stats (span, start);

-- +goose Down
DROP TABLE endpoint_stats;

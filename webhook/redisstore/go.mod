module github.com/herald-webhooks/herald/webhook/redisstore

go 1.26.8

// Developed in the Herald repository: the webhook package it implements a
// store for is the one beside it.
replace github.com/herald-webhooks/herald => ../..

require (
	github.com/herald-webhooks/herald v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

module github.com/herald-webhooks/herald/interop

go 1.26.8

replace github.com/herald-webhooks/herald => ../

require (
	github.com/herald-webhooks/herald v0.0.0-00010101000000-000000000000
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
	github.com/stripe/stripe-go/v85 v85.0.0
	github.com/svix/svix-webhooks v1.44.0
)

require gopkg.in/validator.v2 v2.0.1 // indirect

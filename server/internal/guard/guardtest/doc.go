// Package guardtest holds the guard's behaviour tests against a real server
// (app.New on loopback, real Postgres): the seed's guard, create-agent,
// message-gate and dispatch cases as one table, grants, holds, idempotency,
// actor rules, bad input and the stream.
package guardtest

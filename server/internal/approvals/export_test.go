package approvals

// EventLockKey is eventLockKey for the external tests (pg_locks checks).
const EventLockKey = eventLockKey

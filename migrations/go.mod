module github.com/clawguard/clawguard/migrations

go 1.26

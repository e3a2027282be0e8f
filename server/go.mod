module github.com/clawguard/clawguard/server

go 1.26
